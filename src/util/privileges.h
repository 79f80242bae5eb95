// Checks that we may load and attach BPF programs, before trying to.
#pragma once

namespace offcpu {

// Throws FatalError naming what is missing (root, or CAP_BPF+CAP_PERFMON).
void require_bpf_privileges();

} // namespace offcpu
