// RAII and small helpers around libbpf objects.
#pragma once

#include <bpf/libbpf.h>

#include <memory>
#include <string>

namespace offcpu {

struct BpfLinkDeleter {
  void operator()(bpf_link *link) const { bpf_link__destroy(link); }
};
using BpfLink = std::unique_ptr<bpf_link, BpfLinkDeleter>;

// Runs an iterator program to completion (its side effects are the point).
// Returns 0 or a negative errno.
int run_iterator(bpf_program *prog);

// libbpf's messages go to a buffer; shown with -v or when loading fails.
void capture_libbpf_messages(bool echo_to_stderr);
std::string take_libbpf_messages();

// CLOCK_MONOTONIC in ns: bpf_ktime_get_ns()'s clock.
uint64_t monotonic_ns();

} // namespace offcpu
