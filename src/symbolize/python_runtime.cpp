#include "symbolize/python_runtime.h"

#include <gelf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "symbolize/elf_common.h"
#include "symbolize/map_files.h"
#include "util/safe_file.h"

namespace offcpu {

namespace {

constexpr uint16_t kNone = 0xffff;

// Offsets read from each version's DWARF (gdb: output &((T *)0)->field):
// 3.11 from python3.11-dbg (Debian 12's 3.11.2-7, and pyenv's 3.11.7 agrees),
// 3.10, 3.12 and 3.13 from pyenv's builds (3.10.13, 3.12.1, 3.13.0) and
// their include/python3.X/internal headers. The layout of these fields does
// not change within a minor version. An unknown version gets native frames
// only.
const PythonLayout kLayouts[] = {
    {3,
     10,
     {
         /*runtime=*/0,
         /*interp_head=*/32,   // _PyRuntime.interpreters.head
         /*interp_threads=*/8, // PyInterpreterState.tstate_head
         /*ts_next=*/8,
         /*ts_native_tid=*/176, // thread_id: a pthread_t
         /*ts_cframe=*/kNone,
         /*frame_current=*/24,  // PyThreadState.frame
         /*frame_code=*/32,     // PyFrameObject.f_code
         /*frame_previous=*/24, // f_back
         /*frame_instr=*/96,    // f_lasti
         /*frame_entry=*/kNone,
         /*code_bytecode=*/0,
         /*flags=*/OFFCPU_PY_F_LASTI | OFFCPU_PY_F_PTHREAD,
         /*pad=*/{},
     },
     /*co_filename=*/104,
     /*co_qualname=*/112, // co_name
     /*co_firstlineno=*/40,
     /*co_linetable=*/120,
     /*unicode_state=*/32,
     /*unicode_length=*/16,
     /*ascii_data=*/48,
     /*compact_data=*/72,
     /*bytes_size=*/16,
     /*bytes_data=*/32,
     PythonEntries::Each,
     PythonLines::Pairs,
     /*ts_interp=*/16},
    {3,
     11,
     {
         /*runtime=*/0,
         /*interp_head=*/40,    // _PyRuntime.interpreters.head
         /*interp_threads=*/16, // PyInterpreterState.threads.head
         /*ts_next=*/8,
         /*ts_native_tid=*/160,
         /*ts_cframe=*/56,
         /*frame_current=*/8, // _PyCFrame.current_frame
         /*frame_code=*/32,
         /*frame_previous=*/48,
         /*frame_instr=*/56,
         /*frame_entry=*/68,    // is_entry
         /*code_bytecode=*/184, // co_code_adaptive
         /*flags=*/0,
         /*pad=*/{},
     },
     /*co_filename=*/112,
     /*co_qualname=*/128,
     /*co_firstlineno=*/72,
     /*co_linetable=*/136,
     /*unicode_state=*/32,
     /*unicode_length=*/16,
     /*ascii_data=*/48,
     /*compact_data=*/72,
     /*bytes_size=*/16,
     /*bytes_data=*/32,
     PythonEntries::Flag,
     PythonLines::Locations,
     /*ts_interp=*/16},
    {3,
     12,
     {
         /*runtime=*/0,
         /*interp_head=*/40,
         /*interp_threads=*/72,
         /*ts_next=*/8,
         /*ts_native_tid=*/144,
         /*ts_cframe=*/56,
         /*frame_current=*/0, // _PyCFrame.current_frame
         /*frame_code=*/0,
         /*frame_previous=*/8,
         /*frame_instr=*/56,    // prev_instr
         /*frame_entry=*/70,    // owner
         /*code_bytecode=*/192, // co_code_adaptive
         /*flags=*/0,
         /*pad=*/{},
     },
     /*co_filename=*/112,
     /*co_qualname=*/128,
     /*co_firstlineno=*/68,
     /*co_linetable=*/136,
     /*unicode_state=*/32,
     /*unicode_length=*/16,
     /*ascii_data=*/40, // no wstr since 3.12
     /*compact_data=*/56,
     /*bytes_size=*/16,
     /*bytes_data=*/32,
     PythonEntries::Shim,
     PythonLines::Locations,
     /*ts_interp=*/16},
    {3,
     13,
     {
         /*runtime=*/0,
         /*interp_head=*/632,
         /*interp_threads=*/7344,
         /*ts_next=*/8,
         /*ts_native_tid=*/160,
         /*ts_cframe=*/kNone,
         /*frame_current=*/72, // PyThreadState.current_frame
         /*frame_code=*/0,     // f_executable
         /*frame_previous=*/8,
         /*frame_instr=*/56,    // instr_ptr
         /*frame_entry=*/70,    // owner
         /*code_bytecode=*/200, // co_code_adaptive
         /*flags=*/0,
         /*pad=*/{},
     },
     /*co_filename=*/112,
     /*co_qualname=*/128,
     /*co_firstlineno=*/68,
     /*co_linetable=*/136,
     /*unicode_state=*/32,
     /*unicode_length=*/16,
     /*ascii_data=*/40,
     /*compact_data=*/56,
     /*bytes_size=*/16,
     /*bytes_data=*/32,
     PythonEntries::Shim,
     PythonLines::Locations,
     /*ts_interp=*/16},
};

bool starts_with(const std::string &s, const char *p) {
  return s.compare(0, strlen(p), p) == 0;
}

// "python3.11", "libpython3.11.so.1.0", "python3.11d": minor version of a
// file name, 0 if not one.
unsigned python_file_minor(const std::string &base) {
  std::string rest;
  if (starts_with(base, "python3."))
    rest = base.substr(8);
  else if (starts_with(base, "libpython3."))
    rest = base.substr(11);
  else
    return 0;
  unsigned minor = 0;
  size_t i = 0;
  while (i < rest.size() && i < 3 && rest[i] >= '0' && rest[i] <= '9')
    minor = minor * 10 + static_cast<unsigned>(rest[i++] - '0');
  if (i == 0)
    return 0;
  std::string tail = rest.substr(i);
  // The interpreter itself, or its shared library; not python3.11-config.
  if (tail.empty() || tail == "d" || starts_with(tail, ".so") ||
      starts_with(tail, "d.so"))
    return minor;
  return 0;
}

void read_symbol_table(Elf *elf, Elf_Scn *scn, PythonSymbols &out) {
  GElf_Shdr sh;
  if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0 ||
      sh.sh_size > (uint64_t{64} << 20))
    return;
  Elf_Data *data = elf_getdata(scn, nullptr);
  if (!data)
    return;
  size_t count = sh.sh_size / sh.sh_entsize;
  for (size_t i = 0; i < count; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_value == 0)
      continue;
    const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
    if (!name)
      continue;
    if (!out.runtime && strcmp(name, "_PyRuntime") == 0)
      out.runtime = sym.st_value;
    else if (!out.version && strcmp(name, "Py_Version") == 0)
      out.version = sym.st_value;
  }
}

std::optional<uint64_t> read_word(const FileReader &files,
                                  const std::string &mem, uint64_t addr) {
  auto got = files.read_at(mem, addr, sizeof(uint64_t));
  if (!got || got->size() != sizeof(uint64_t))
    return std::nullopt;
  uint64_t v;
  memcpy(&v, got->data(), sizeof(v));
  return v;
}

// 3.13+ describe themselves: _PyRuntime opens with _Py_DebugOffsets
// (Include/internal/pycore_runtime.h), a cookie, the version, then offsets
// as 64-bit words. Ours must agree with the ones it gives, else the table
// is wrong for this build (a free-threaded one, say). Word indexes below
// are 3.13's order of the struct.
bool debug_offsets_agree(const FileReader &files, const std::string &mem,
                         const PythonLayout &l, uint64_t runtime) {
  constexpr size_t kWords = 44;
  auto got = files.read_at(mem, runtime, kWords * 8);
  if (!got || got->size() != kWords * 8 || got->compare(0, 8, "xdebugpy") != 0)
    return false;
  auto word = [&](size_t i) {
    uint64_t v;
    memcpy(&v, got->data() + i * 8, sizeof(v));
    return v;
  };
  const offcpu_py_proc &o = l.offsets;
  // (word index, our offset): free_threaded must be 0.
  const std::pair<size_t, uint64_t> checks[] = {
      {2, 0},                 // free_threaded
      {5, o.interp_head},     // runtime_state.interpreters_head
      {9, o.interp_threads},  // interpreter_state.threads_head
      {21, o.ts_next},        // thread_state.next
      {22, l.ts_interp},      // thread_state.interp
      {23, o.frame_current},  // thread_state.current_frame
      {25, o.ts_native_tid},  // thread_state.native_thread_id
      {29, o.frame_previous}, // interpreter_frame.previous
      {30, o.frame_code},     // interpreter_frame.executable
      {31, o.frame_instr},    // interpreter_frame.instr_ptr
      {33, o.frame_entry},    // interpreter_frame.owner
      {35, l.co_filename},    // code_object.filename
      {37, l.co_qualname},    // code_object.qualname
      {38, l.co_linetable},   // code_object.linetable
      {39, l.co_firstlineno}, // code_object.firstlineno
      {43, o.code_bytecode},  // code_object.co_code_adaptive
  };
  for (auto [i, want] : checks)
    if (word(i) != want)
      return false;
  return true;
}

// Whether the layout holds in this process: the main interpreter's first
// thread state points back to it and records a native thread id that is
// one of the process's threads (all of them live under /proc/PID/task);
// 3.10 records a pthread_t instead, only checked to be a user address.
// *early: the interpreter has no thread yet (starting): ask again later.
bool layout_holds(const FileReader &files, const std::string &pid_dir,
                  const PythonLayout &l, uint64_t runtime, bool *early) {
  std::string mem = pid_dir + "/mem";
  if (l.minor >= 13 && !debug_offsets_agree(files, mem, l, runtime))
    return false;
  auto interp = read_word(files, mem, runtime + l.offsets.interp_head);
  *early = interp && !*interp;
  if (!interp || !*interp)
    return false;
  auto ts = read_word(files, mem, *interp + l.offsets.interp_threads);
  *early = ts && !*ts;
  if (!ts || !*ts)
    return false;
  auto back = read_word(files, mem, *ts + l.ts_interp);
  auto tid = read_word(files, mem, *ts + l.offsets.ts_native_tid);
  if (!back || *back != *interp || !tid)
    return false;
  if (l.offsets.flags & OFFCPU_PY_F_PTHREAD)
    return *tid && *tid < (uint64_t{1} << 47);
  // The thread's own status file: it exists while the thread does.
  return files
      .read(pid_dir + "/task/" + std::to_string(static_cast<uint32_t>(*tid)) +
                "/stat",
            64)
      .has_value();
}

} // namespace

const PythonLayout *python_layout(unsigned major, unsigned minor) {
  for (const PythonLayout &l : kLayouts)
    if (l.major == major && l.minor == minor)
      return &l;
  return nullptr;
}

std::vector<const Mapping *> python_mappings(const std::vector<Mapping> &maps) {
  std::vector<const Mapping *> out;
  for (const Mapping &m : maps)
    if (m.executable && m.is_file() && python_file_minor(m.display_name()))
      out.push_back(&m);
  return out;
}

PythonSymbols python_symbols(int fd) {
  PythonSymbols out;
  if (!libelf_ready())
    return out;
  ElfHandle elf(elf_begin(fd, ELF_C_READ, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
    return out;
  size_t nph = 0;
  if (elf_getphdrnum(elf.get(), &nph) == 0)
    for (size_t i = 0; i < nph && i < 64; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) &&
          ph.p_type == PT_LOAD)
        out.loads.emplace_back(ph.p_offset, ph.p_vaddr - ph.p_offset);
    }
  for (Elf64_Word type : {SHT_DYNSYM, SHT_SYMTAB}) {
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
        read_symbol_table(elf.get(), scn, out);
    }
    if (out.runtime && out.version)
      break;
  }
  return out;
}

namespace {

// Where `_PyRuntime` and `Py_Version` of mapping `m`'s file are in the
// process; runtime 0 if the file has no `_PyRuntime` (pyenv's python3.12,
// a launcher whose interpreter is in libpython3.12.so).
struct RuntimeAt {
  uint64_t runtime = 0;
  std::optional<uint64_t> version;
};
RuntimeAt runtime_in(const std::string &pid_dir, const Mapping &m) {
  RuntimeAt at;
  CheckedFile opened = open_map_file(pid_dir, m); // its symbol tables read
  if (!opened)
    return at;
  PythonSymbols syms = python_symbols(opened.fd.get());
  // The load bias: where the file's virtual address 0 is in the process,
  // from the segment that holds this mapping's file offset.
  std::optional<uint64_t> bias;
  for (auto [off, delta] : syms.loads)
    if (off <= m.offset)
      bias = m.start - m.offset - delta;
  if (!syms.runtime || !bias)
    return at;
  at.runtime = *bias + *syms.runtime;
  if (syms.version)
    at.version = *bias + *syms.version;
  return at;
}

} // namespace

PythonProcess find_python(const FileReader &files, const std::string &proc_root,
                          uint32_t tgid, const std::vector<Mapping> &maps) {
  PythonProcess out;
  std::string pid_dir = proc_root + "/" + std::to_string(tgid);
  const Mapping *m = nullptr;
  RuntimeAt at;
  for (const Mapping *c : python_mappings(maps))
    if ((at = runtime_in(pid_dir, *c)).runtime) {
      m = c;
      break;
    }
  if (!m)
    return out;
  out.major = 3;
  out.minor = python_file_minor(m->display_name());
  if (at.version) { // 3.11+: the version the library was built as
    auto v = read_word(files, pid_dir + "/mem", *at.version);
    if (v) {
      out.major = static_cast<unsigned>((*v >> 24) & 0xff);
      out.minor = static_cast<unsigned>((*v >> 16) & 0xff);
    }
  }
  out.layout = python_layout(out.major, out.minor);
  std::string who = "Python " + std::to_string(out.major) + "." +
                    std::to_string(out.minor) + " (" + m->real_path() + ")";
  if (!out.layout) {
    out.unsupported = who + ": no layout known, native frames only";
    return out;
  }
  if (!layout_holds(files, pid_dir, *out.layout, at.runtime, &out.retry)) {
    out.unsupported = who + ": its runtime state does not match the " +
                      "layout of its version, native frames only";
    out.layout = nullptr;
    return out;
  }
  out.bpf = out.layout->offsets;
  out.bpf.runtime = at.runtime;
  return out;
}

} // namespace offcpu
