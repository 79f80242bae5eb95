// Where the running kernel keeps what the in-BPF kernel-stack walker needs:
// text section bounds, the ORC unwind tables and their entry layout.
#pragma once

#include <optional>
#include <string>

#include "offcpu/shared.h"

namespace offcpu {

class KernelBtf;

// ORC entry layout from the kernel's BTF (struct orc_entry); false if the
// struct is missing or laid out in a way the walker does not know.
bool orc_layout_from_btf(const KernelBtf *vmlinux, offcpu_kernel_text &text,
                         std::string *why);

// Resolves addresses with a one-shot BPF program (5.16+) and reads the ORC
// layout. nullopt, with the reason in *why, where the walker cannot run:
// not x86-64, no ORC unwinder (frame-pointer kernels), no BTF, too old.
std::optional<offcpu_kernel_text> probe_kernel_text(const KernelBtf *vmlinux,
                                                    std::string *why);

} // namespace offcpu
