#include "collect/bpf_util.h"

#include <bpf/bpf.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "util/error.h"
#include "util/fd.h"

namespace offcpu {
namespace {

std::string g_messages;
bool g_echo = false;
// The split load runs libbpf in two threads.
std::mutex g_messages_lock;

int on_libbpf_message(enum libbpf_print_level level, const char *fmt,
                      va_list args) {
  if (level == LIBBPF_DEBUG) // relocation chatter; the verifier log is WARN
    return 0;
  // Verifier logs come as one long string: size the buffer to fit.
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0)
    return 0;
  std::string buf(static_cast<size_t>(n) + 1, '\0');
  vsnprintf(buf.data(), buf.size(), fmt, args);
  buf.resize(static_cast<size_t>(n));
  std::lock_guard<std::mutex> hold(g_messages_lock);
  if (g_messages.size() < (1u << 20))
    g_messages += buf;
  if (g_echo)
    fputs(buf.c_str(), stderr);
  return 0;
}

} // namespace

void capture_libbpf_messages(bool echo_to_stderr) {
  g_echo = echo_to_stderr;
  libbpf_set_print(on_libbpf_message);
}

std::string take_libbpf_messages() {
  std::lock_guard<std::mutex> hold(g_messages_lock);
  std::string s;
  s.swap(g_messages);
  return s;
}

void fill_id_set(int map_fd, const std::vector<uint32_t> &ids) {
  const uint8_t one = 1;
  for (uint32_t id : ids)
    if (bpf_map_update_elem(map_fd, &id, &one, BPF_ANY))
      throw runtime_error(std::string("cannot fill the PID/TID filter map: ") +
                          std::strerror(errno));
}

void fill_cgroup_set(int map_fd, const std::vector<uint64_t> &ids) {
  const uint8_t one = 1;
  for (uint64_t id : ids)
    if (bpf_map_update_elem(map_fd, &id, &one, BPF_ANY))
      throw runtime_error(std::string("cannot fill the cgroup filter: ") +
                          std::strerror(errno));
}

void fill_id_set(bpf_map *map, const std::vector<uint32_t> &ids) {
  fill_id_set(bpf_map__fd(map), ids);
}

int run_iterator(int prog_fd) {
  UniqueFd link(bpf_link_create(prog_fd, 0, BPF_TRACE_ITER, nullptr));
  if (!link)
    return -errno;
  UniqueFd fd(bpf_iter_create(link.get()));
  if (!fd)
    return -errno;
  char buf[256];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n == 0)
      return 0;
    if (n < 0 && errno != EINTR)
      return -errno;
  }
}

bool same_map_shape(int fd, const bpf_map *m) {
  bpf_map_info info{};
  __u32 len = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
         info.type == bpf_map__type(m) &&
         info.key_size == bpf_map__key_size(m) &&
         info.value_size == bpf_map__value_size(m);
}

} // namespace offcpu
