// What both tracing commands do before anything is loaded.
#pragma once

#include "collect/map_budget.h"

namespace offcpu {

// Stop handlers, the privilege check, libbpf's messages captured (echoed
// with -v), the BPF maps' memory checked against the machine. Throws
// FatalError naming what is wrong.
void prepare_tracing(bool verbose, const MapDemand &maps);

// Throws FatalError when the kernel has no BTF (CO-RE needs it).
void require_btf(bool has_btf);

} // namespace offcpu
