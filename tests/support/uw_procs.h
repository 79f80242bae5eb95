// The walker's installed processes as the kernel holds them (the uw_procs
// map, include/offcpu/unwind.h), read from `bpftool -j map dump` while
// offcpu runs: the light skeleton's maps carry no BTF, so bpftool gives
// each key and value as bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "offcpu/unwind.h"

namespace offcpu::test {

// Each entry of the dump by its tgid; entries of another shape are left out.
std::map<uint32_t, std::shared_ptr<const uw_proc>>
installed_procs(const std::string &bpftool_json);

} // namespace offcpu::test
