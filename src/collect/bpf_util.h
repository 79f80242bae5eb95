// RAII and small helpers around libbpf objects.
#pragma once

#include <bpf/libbpf.h>

#include <bpf/bpf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/clock.h"

namespace offcpu {

struct BpfLinkDeleter {
  void operator()(bpf_link *link) const { bpf_link__destroy(link); }
};
using BpfLink = std::unique_ptr<bpf_link, BpfLinkDeleter>;

// Runs an iterator program to completion (its side effects are the point).
// Returns 0 or a negative errno.
int run_iterator(int prog_fd);

// Every key of a hash map, as they are now (entries may come and go).
template <typename Key> std::vector<Key> map_keys(int map_fd) {
  std::vector<Key> keys;
  Key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(map_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    keys.push_back(key);
  }
  return keys;
}

// Puts each id in a u32 -> u8 set map (the PID/TID filters); throws
// FatalError if the kernel refuses.
void fill_id_set(bpf_map *map, const std::vector<uint32_t> &ids);
void fill_id_set(int map_fd, const std::vector<uint32_t> &ids);
// The same for the u64 -> u8 cgroup filter (--cgroup).
void fill_cgroup_set(int map_fd, const std::vector<uint64_t> &ids);

// libbpf's messages go to a buffer; shown with -v or when loading fails.
void capture_libbpf_messages(bool echo_to_stderr);
std::string take_libbpf_messages();

} // namespace offcpu
