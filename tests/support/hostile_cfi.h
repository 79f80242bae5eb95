// Generators of the hostile unwind-table inputs of issue #26: .eh_frame
// bytes (one CIE, FDEs anywhere in the address space) and the ELF files
// around them, written at test or fuzz time (no binaries checked in).
// Used by tests/integration/hostile_unwind_test.cpp and the CFI fuzzer's
// seeds (tests/fuzz/fuzz_cfi.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/elf_writer.h"

namespace offcpu::test {

// .eh_frame with absolute 8-byte FDE pointers (DW_EH_PE_udata8), so FDEs
// can start anywhere, 2^64 - 4096 included.
class EhFrame {
public:
  // The CIE: CFA = rsp + 8, return address at CFA - 8, then `nops`
  // DW_CFA_nop instructions (a CIE every FDE re-runs, if not cached).
  explicit EhFrame(size_t nops = 0) {
    std::string body;
    put32(body, 0); // CIE id
    body += '\x01'; // version
    body += std::string("zR") + '\0';
    body += '\x01'; // code alignment
    body += '\x78'; // data alignment -8
    body += '\x10'; // return address register 16
    body += '\x01'; // augmentation data length
    body += '\x04'; // FDE pointers: udata8, absolute
    body += std::string("\x0c\x07\x08\x90\x01", 5);
    body += std::string(nops, '\0');
    while ((body.size() + 4) % 4)
      body += '\0';
    put32(bytes_, static_cast<uint32_t>(body.size()));
    bytes_ += body;
  }

  // An FDE for [begin, begin + range) running `code` (CFA instructions).
  void fde(uint64_t begin, uint64_t range, const std::string &code = "") {
    std::string body;
    // CIE pointer: from this field back to the CIE at offset 0.
    put32(body, static_cast<uint32_t>(bytes_.size() + 4));
    put64(body, begin);
    put64(body, range);
    body += '\0'; // augmentation data length
    body += code;
    while ((body.size() + 4) % 4)
      body += '\0';
    put32(bytes_, static_cast<uint32_t>(body.size()));
    bytes_ += body;
  }

  // Rows that alternate between two rules every byte: `n` rows.
  static std::string alternating(size_t n) {
    std::string code;
    for (size_t i = 0; i < n; i++) {
      code += '\x41'; // advance_loc 1
      code += i % 2 ? std::string("\x0e\x08", 2) : std::string("\x0e\x10", 2);
    }
    return code;
  }

  // `n` rows, each with a CFA offset of its own (n distinct rules).
  static std::string distinct(size_t n) {
    std::string code;
    for (size_t i = 0; i < n; i++) {
      code += '\x41'; // advance_loc 1
      code += '\x0e'; // def_cfa_offset, uleb128
      for (uint64_t v = 16 + 8 * i;; v >>= 7) {
        if (v < 0x80) {
          code += static_cast<char>(v);
          break;
        }
        code += static_cast<char>((v & 0x7f) | 0x80);
      }
    }
    return code;
  }

  const std::string &bytes() const { return bytes_; }
  // With the zero terminator.
  std::string section() const { return bytes_ + std::string(4, '\0'); }

private:
  static void put32(std::string &s, uint32_t v) {
    s.append(reinterpret_cast<const char *>(&v), 4);
  }
  static void put64(std::string &s, uint64_t v) {
    s.append(reinterpret_cast<const char *>(&v), 8);
  }
  std::string bytes_;
};

// An ELF shared object with `eh_frame` as its .eh_frame and one
// executable PT_LOAD from file offset 0 at address 0, `code_size` bytes
// long (however little of it the file holds).
inline std::string elf_with_cfi(const std::string &eh_frame, uint64_t code_size,
                                const std::string &build_id = "",
                                const std::string &debuglink = "") {
  ElfWriter w;
  ElfSegment load;
  load.flags = PF_R | PF_X;
  load.offset = 0;
  load.vaddr = 0;
  load.filesz = code_size;
  load.memsz = code_size;
  w.add_segment(load);
  w.add_text(0x1000, std::string(64, '\xc3'));
  if (!eh_frame.empty()) {
    ElfSection s;
    s.name = ".eh_frame";
    s.flags = SHF_ALLOC;
    s.addr = 0x2000;
    s.content = eh_frame;
    s.align = 8;
    w.add_section(s);
  }
  if (!build_id.empty())
    w.add_build_id(build_id);
  if (!debuglink.empty())
    w.add_debuglink(debuglink, 0x12345678);
  return w.bytes();
}

// The shapes of issue #26, as (name, ELF bytes) pairs small enough to
// seed a fuzzer (the big ones scaled down).
inline std::vector<std::pair<std::string, std::string>> cfi_seed_shapes() {
  std::vector<std::pair<std::string, std::string>> out;
  {
    EhFrame e;
    e.fde(0x1000, 0x100, "\x41\x0e\x10");
    e.fde(0x1000 + (uint64_t{1} << 47), 0x100, "\x41\x0e\x10");
    e.fde(~uint64_t{0} - 0x1fff, 0x1000, "\x41\x0e\x10");
    out.emplace_back("apart-2-47", elf_with_cfi(e.section(), 0x2000));
    out.emplace_back("apart-2-47-covered",
                     elf_with_cfi(e.section(), (uint64_t{1} << 47) + 0x2000));
  }
  {
    EhFrame e;
    for (uint64_t i = 0; i < 64; i++)
      e.fde(0x1000 + (i << 40), 0x100, "\x41\x0e\x10");
    out.emplace_back("apart-2-40",
                     elf_with_cfi(e.section(), uint64_t{1} << 47));
  }
  {
    EhFrame e;
    e.fde(0x1000, 0x10000, EhFrame::alternating(4000));
    out.emplace_back("alternating", elf_with_cfi(e.section(), 0x20000));
  }
  {
    EhFrame e(4000);
    for (uint64_t i = 0; i < 400; i++)
      e.fde(0x1000 + i * 16, 16, "\x41\x0e\x10");
    out.emplace_back("long-cie", elf_with_cfi(e.section(), 0x10000));
  }
  out.emplace_back("debuglink-only",
                   elf_with_cfi("", 0x2000, "0123456789abcdef", "x.debug"));
  return out;
}

} // namespace offcpu::test
