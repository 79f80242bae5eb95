// Finding a CPython interpreter's runtime state in a process (issue #32):
// the interpreter's file among its mappings, `_PyRuntime` and `Py_Version`
// in that file's symbols (the dynamic table has both: no debug package
// needed), the offsets of its version from a table, checked against what
// the process's memory holds. What BPF then needs: an offcpu_py_proc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offcpu/python.h"
#include "symbolize/proc_maps.h"
#include "util/fs.h"

namespace offcpu {

// How the frames one C-level evaluation runs are told apart.
enum class PythonEntries : uint8_t {
  Each, // 3.10: one _PyEval_EvalFrameDefault call per frame
  Flag, // 3.11: the first frame of a call has is_entry set
  Shim, // 3.12+: each call pushes a shim frame owned by the C stack
};

// How a version's line table reads.
enum class PythonLines : uint8_t {
  Pairs,     // 3.10: (bytes, line delta) pairs (Objects/lnotab_notes.txt)
  Locations, // 3.11+: PEP 626/657's location table
};

// The layout of one CPython minor version (x86-64, default build).
struct PythonLayout {
  unsigned major, minor;
  offcpu_py_proc offsets; // runtime left 0
  // PyCodeObject and string layout, for user space's reads (3.10 has no
  // co_qualname: co_name stands in).
  uint16_t co_filename, co_qualname, co_firstlineno, co_linetable;
  uint16_t unicode_state, unicode_length, ascii_data, compact_data;
  uint16_t bytes_size, bytes_data;
  PythonEntries entries;
  PythonLines lines;
  uint16_t ts_interp; // PyThreadState.interp, to check a thread state
};

// The table's entry for major.minor; null if the version is not known.
const PythonLayout *python_layout(unsigned major, unsigned minor);

// The interpreter found in a process.
struct PythonProcess {
  offcpu_py_proc bpf{}; // runtime 0: not Python, or not one we read
  const PythonLayout *layout = nullptr;
  unsigned major = 0, minor = 0;
  // Why it is not read (empty when it is, or when it is no Python at all):
  // "Python 3.9 (...): no layout known", for one line on stderr.
  std::string unsupported;
  // Not decided: the interpreter was still starting (no thread state yet).
  bool retry = false;
};

// Symbol values of one ELF file (dynamic table first, then .symtab for a
// statically linked interpreter); nullopt where absent.
struct PythonSymbols {
  std::optional<uint64_t> runtime, version;
  // vaddr - file offset of the loadable segment holding file offset `off`.
  std::vector<std::pair<uint64_t, uint64_t>> loads; // (offset, vaddr - offset)
};
// Reads them from an ELF file opened by the caller (pread only).
PythonSymbols python_symbols(int fd);

// The interpreter's candidate files among `maps`: executable mappings of
// files named python3.N or libpython3.N*.so*, in address order (a launcher
// linked with libpython has both: the one with `_PyRuntime` is it).
std::vector<const Mapping *> python_mappings(const std::vector<Mapping> &maps);

// Looks at process `tgid` (its maps as read) once: finds the interpreter,
// its runtime and layout, and checks the layout against the process's
// memory (/proc/PID/mem through `files`).
PythonProcess find_python(const FileReader &files, const std::string &proc_root,
                          uint32_t tgid, const std::vector<Mapping> &maps);

} // namespace offcpu
