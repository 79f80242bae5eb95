// RAII and small helpers around libbpf objects.
#pragma once

#include <bpf/libbpf.h>

#include <bpf/bpf.h>

#include <cerrno>
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

// Whether map `fd` has `m`'s type, key size and value size: a map created
// for another object is never reused for this one.
bool same_map_shape(int fd, const bpf_map *m);

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

// Calls f(key, value) for every entry of a hash map, read `batch` entries
// a system call (a whole-system run's 40,000 keys were 80,000 calls one by
// one: a second of CPU at the end, issue #27). Kernels without batch
// lookups (before 5.6) get the entries one by one.
template <typename Key, typename Value, typename F>
void for_each_entry(int map_fd, F &&f, uint32_t batch = 1024) {
  std::vector<Key> keys(batch);
  std::vector<Value> values(batch);
  // The hash map's position between calls (a bucket index, opaque here).
  uint64_t token = 0;
  bool first = true;
  for (;;) {
    uint32_t count = batch;
    int err = bpf_map_lookup_batch(map_fd, first ? nullptr : &token, &token,
                                   keys.data(), values.data(), &count, nullptr);
    if (err && errno != ENOENT) {
      if (!first)
        return; // failed midway: what was read stands
      break;    // no batch lookups here
    }
    first = false;
    for (uint32_t i = 0; i < count; i++)
      f(keys[i], values[i]);
    if (err) // ENOENT: the last batch
      return;
  }
  for (const Key &key : map_keys<Key>(map_fd)) {
    Value v{};
    if (bpf_map_lookup_elem(map_fd, &key, &v) == 0)
      f(key, v);
  }
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
