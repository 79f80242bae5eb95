// Names of CPython frames (issue #32): a frame's code object, read from the
// process's memory through the bounded /proc/PID/mem reader, gives the
// function's qualified name, its file and its line table; the frame's
// instruction gives the line. Kept per code object: names of a process
// that exits are those read while it lived.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "symbolize/python_runtime.h"
#include "util/fs.h"

namespace offcpu {

// The line of the instruction at `index` (16-bit code units from the start
// of the bytecode) in a 3.11+ location table (PEP 626/657's compact form),
// counting from `first_line`; 0 if the table has no line for it or is
// malformed.
uint32_t python_line(std::string_view table, uint32_t first_line,
                     uint32_t index);
// The same in a 3.10 line table: (byte delta, signed line delta) pairs,
// a line delta of -128 for "no line" (CPython's Objects/lnotab_notes.txt).
uint32_t python_line_pairs(std::string_view table, uint32_t first_line,
                           uint32_t index);

// One Python frame as the BPF walker stored it (two tagged words).
struct PythonFrameWord {
  uint64_t code = 0;
  uint32_t index = 0; // instruction + 1; 0: unknown
  uint8_t mark = 0;   // the frame's is_entry (3.11) or owner (3.12+) byte
  bool entry = false; // the frame was entered from C (see python_chain)
};
// The Python frames stored after a user stack's native frames, leaf first;
// `native` receives how many words come before them.
std::vector<PythonFrameWord> python_frames_of(const std::vector<uint64_t> &ips,
                                              size_t *native);
// The frames of a version's chain, leaf first, with `entry` set on the
// first frame each C-level evaluation ran: 3.10 runs one frame a call;
// 3.11 marks it (is_entry); 3.12+ push a shim frame below it (owned by the
// C stack), dropped here.
std::vector<PythonFrameWord> python_chain(std::vector<PythonFrameWord> raw,
                                          PythonEntries entries);
inline bool is_python_word(uint64_t ip) {
  uint64_t tag = ip & OFFCPU_PY_TAG_MASK;
  return tag == OFFCPU_PY_CODE_TAG || tag == OFFCPU_PY_INSTR_TAG;
}

struct PythonCode {
  std::string qualname, filename;
  uint32_t first_line = 0;
  std::string line_table;
  PythonLines lines = PythonLines::Locations; // how line_table reads
  // The line of the instruction at `index`; 0 if none.
  uint32_t line(uint32_t index) const {
    return lines == PythonLines::Pairs
               ? python_line_pairs(line_table, first_line, index)
               : python_line(line_table, first_line, index);
  }
};

struct PythonNameStats {
  uint64_t code_objects = 0;     // read
  uint64_t code_unreadable = 0;  // could not be read (process gone, garbage)
  uint64_t code_over_budget = 0; // not read: its process used its budget
};

// What one process's code objects may hold in offcpu (names and line
// tables): a process that shows garbage code addresses costs at most this.
inline constexpr uint64_t kPythonBytesPerProcess = 32u << 20;

class PythonNames {
public:
  PythonNames(const FileReader &files, std::string proc_root)
      : files_(files), proc_root_(std::move(proc_root)) {}
  // The layout a process's frames are read with (find_python's).
  void set_layout(uint32_t tgid, const PythonLayout *layout) {
    layouts_[tgid] = layout;
  }
  // The frames as process `tgid`'s version chains them (python_chain).
  std::vector<PythonFrameWord> chain(uint32_t tgid,
                                     std::vector<PythonFrameWord> raw) const;
  // Reads, while the process lives, the code objects of these frames not
  // read yet.
  void capture(uint32_t tgid, const std::vector<PythonFrameWord> &frames);
  // The code object, read now if not before; null if unreadable.
  const PythonCode *code(uint32_t tgid, uint64_t addr);
  const PythonNameStats &stats() const { return stats_; }

private:
  std::optional<PythonCode> read_code(uint32_t tgid, const PythonLayout &l,
                                      uint64_t addr);
  std::optional<std::string> read_string(const std::string &mem,
                                         const PythonLayout &l, uint64_t obj);
  std::optional<std::string> read_bytes(const std::string &mem,
                                        const PythonLayout &l, uint64_t obj);
  const FileReader &files_;
  std::string proc_root_;
  std::map<uint32_t, const PythonLayout *> layouts_;
  // (process, code object) -> what it held; nullopt: unreadable.
  std::map<std::pair<uint32_t, uint64_t>, std::optional<PythonCode>> codes_;
  std::map<uint32_t, uint64_t> bytes_; // per process, against the budget
  PythonNameStats stats_;
};

} // namespace offcpu
