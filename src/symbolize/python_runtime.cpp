#include "symbolize/python_runtime.h"

#include <gelf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "symbolize/elf_common.h"
#include "util/safe_file.h"

namespace offcpu {

namespace {

constexpr uint16_t kNone = 0xffff;

// Offsets read from python3.11-dbg's DWARF (gdb: p &((T *)0)->field) for
// Debian 12's 3.11.2-7; the layout of these fields did not change within
// 3.11. Other versions are added here when checked the same way against
// their build: an unknown version gets native frames only.
const PythonLayout kLayouts[] = {
    {3,
     11,
     {
         .runtime = 0,
         .interp_head = 40,    // _PyRuntime.interpreters.head
         .interp_threads = 16, // PyInterpreterState.threads.head
         .ts_next = 8,
         .ts_native_tid = 160,
         .ts_cframe = 56,
         .frame_current = 8, // _PyCFrame.current_frame
         .frame_code = 32,
         .frame_previous = 48,
         .frame_instr = 56,
         .frame_entry = 68,
         .code_bytecode = 184, // co_code_adaptive
         .pad = {},
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
     /*bytes_data=*/32},
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

// Whether the layout holds in this process: the main interpreter's first
// thread state points back to it and records a native thread id that is
// one of the process's threads (all of them live under /proc/PID/task).
// *early: the interpreter has no thread yet (starting): ask again later.
bool layout_holds(const FileReader &files, const std::string &pid_dir,
                  const PythonLayout &l, uint64_t runtime, bool *early) {
  std::string mem = pid_dir + "/mem";
  auto interp = read_word(files, mem, runtime + l.offsets.interp_head);
  *early = interp && !*interp;
  if (!interp || !*interp)
    return false;
  auto ts = read_word(files, mem, *interp + l.offsets.interp_threads);
  *early = ts && !*ts;
  if (!ts || !*ts)
    return false;
  auto back = read_word(files, mem, *ts + 16); // PyThreadState.interp
  auto tid = read_word(files, mem, *ts + l.offsets.ts_native_tid);
  if (!back || *back != *interp || !tid)
    return false;
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

const Mapping *python_mapping(const std::vector<Mapping> &maps) {
  for (const Mapping &m : maps)
    if (m.executable && m.is_file() && python_file_minor(m.display_name()))
      return &m;
  return nullptr;
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

PythonProcess find_python(const FileReader &files, const std::string &proc_root,
                          uint32_t tgid, const std::vector<Mapping> &maps) {
  PythonProcess out;
  const Mapping *m = python_mapping(maps);
  if (!m)
    return out;
  std::string pid_dir = proc_root + "/" + std::to_string(tgid);
  char range[64];
  snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, m->start, m->end);
  FilePolicy mapped;
  mapped.follow_last_symlink = true;
  mapped.max_size = UINT64_MAX; // only the symbol tables are read
  CheckedFile opened = open_checked(pid_dir + "/map_files" + range, mapped);
  if (!opened)
    return out;
  PythonSymbols syms = python_symbols(opened.fd.get());
  // The load bias: where the file's virtual address 0 is in the process,
  // from the segment that holds this mapping's file offset.
  std::optional<uint64_t> bias;
  for (auto [off, delta] : syms.loads)
    if (off <= m->offset)
      bias = m->start - m->offset - delta;
  if (!syms.runtime || !bias)
    return out;
  out.major = 3;
  out.minor = python_file_minor(m->display_name());
  if (syms.version) { // 3.11+: the version the library was built as
    auto v = read_word(files, pid_dir + "/mem", *bias + *syms.version);
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
  uint64_t runtime = *bias + *syms.runtime;
  if (!layout_holds(files, pid_dir, *out.layout, runtime, &out.retry)) {
    out.unsupported = who + ": its runtime state does not match the " +
                      "layout of its version, native frames only";
    out.layout = nullptr;
    return out;
  }
  out.bpf = out.layout->offsets;
  out.bpf.runtime = runtime;
  return out;
}

} // namespace offcpu
