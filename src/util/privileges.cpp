#include "util/privileges.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"

namespace offcpu {
namespace {

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

bool has_cap(const __user_cap_data_struct (&data)[2], int cap) {
  return data[cap / 32].effective & (1u << (cap % 32));
}

} // namespace

void require_bpf_privileges() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0)
    return; // cannot tell: let the kernel decide at load time
  if (has_cap(data, CAP_SYS_ADMIN))
    return;
  if (has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON))
    return;
  throw runtime_error(
      "permission denied: offcpu needs root, or CAP_BPF and CAP_PERFMON "
      "(try: sudo offcpu ...)");
}

} // namespace offcpu
