#include "probe/kernel_text.h"

#include <linux/btf.h>

#include <cstring>

#include "probe/kernel_btf.h"
#include "probe/ksyms_light.h"

namespace offcpu {

bool orc_layout_from_btf(const KernelBtf *b, offcpu_kernel_text &text,
                         std::string *why) {
  int id = b ? b->find("orc_entry", BTF_KIND_STRUCT) : -1;
  if (id < 0) {
    *why = "no struct orc_entry in the kernel's BTF (not an ORC kernel)";
    return false;
  }
  int sp_off = -1, bp_off = -1, sp_reg = -1, bp_reg = -1, type = -1;
  int type_bits = 0, signal = -1, end = -1;
  for (const KernelBtf::Member &m : b->members(id)) {
    const std::string_view name = m.name;
    const int off = static_cast<int>(m.bit_offset);
    const unsigned size = m.bitfield_size;
    if (name == "sp_offset")
      sp_off = off;
    else if (name == "bp_offset")
      bp_off = off;
    else if (name == "sp_reg" && size == 4)
      sp_reg = off;
    else if (name == "bp_reg" && size == 4)
      bp_reg = off;
    else if (name == "type" && size >= 2 && size <= 3) {
      type = off;
      type_bits = static_cast<int>(size);
    } else if (name == "signal" && size == 1)
      signal = off;
    else if (name == "end" && size == 1)
      end = off;
  }
  // The walker reads two 16-bit offsets and then one 16-bit word of flags.
  if (b->size_of(id) != 6 || sp_off != 0 || bp_off != 16 || sp_reg != 32 ||
      bp_reg != 36 || type < 40 || type + type_bits > 48 ||
      (signal >= 0 && signal >= 48) || (end >= 0 && end >= 48)) {
    *why = "unknown struct orc_entry layout";
    return false;
  }
  text.type_shift = static_cast<uint8_t>(type - 32);
  text.type_bits = static_cast<uint8_t>(type_bits);
  text.signal_shift = signal >= 0 ? static_cast<uint8_t>(signal - 32) : 0xff;
  text.end_shift = end >= 0 ? static_cast<uint8_t>(end - 32) : 0xff;
  // The `end` bit went away in 6.4, when entry types were renumbered.
  text.old_types = end >= 0;
  return true;
}

std::optional<offcpu_kernel_text> probe_kernel_text(const KernelBtf *b,
                                                    std::string *why) {
#if !defined(__x86_64__)
  *why = "the kernel-stack walker knows x86-64 ORC tables only";
  return std::nullopt;
#else
  offcpu_kernel_text text{};
  if (!orc_layout_from_btf(b, text, why))
    return std::nullopt;

  int err = offcpu_resolve_kernel_text(&text);
  if (err) {
    *why = std::string("cannot run the symbol lookup program (needs 5.16+): ") +
           std::strerror(-err);
    return std::nullopt;
  }
  const offcpu_kernel_text &f = text;
  bool ordered = f.text_start && f.text_start < f.text_end &&
                 f.sched_start >= f.text_start && f.sched_start < f.sched_end &&
                 f.sched_end <= f.text_end && f.orc_ip_start &&
                 f.orc_ip_start < f.orc_ip_end && f.orc_start &&
                 (f.orc_ip_end - f.orc_ip_start) % 4 == 0;
  if (!ordered) {
    *why = "no ORC unwind tables in the kernel's symbols (a kernel built "
           "without CONFIG_UNWINDER_ORC)";
    return std::nullopt;
  }
  return f;
#endif
}

} // namespace offcpu
