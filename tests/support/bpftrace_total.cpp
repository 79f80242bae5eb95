#include "support/bpftrace_total.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <regex>
#include <vector>

namespace offcpu::test {

std::string bpftrace_unavailable(const std::string &events) {
  if (access("/usr/bin/bpftrace", X_OK) != 0)
    return "bpftrace (Debian package bpftrace) is not installed";
  std::string dir = "/sys/kernel/tracing/events/" + events;
  if (access(dir.c_str(), F_OK) != 0)
    mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr);
  if (access(dir.c_str(), F_OK) != 0)
    return "tracefs with " + events + " events cannot be mounted";
  return "";
}

bool window_of(const std::string &offcpu_err, uint64_t &from, uint64_t &to) {
  std::smatch w;
  if (!std::regex_search(offcpu_err, w,
                         std::regex("traced from (\\d+) to (\\d+) ns")))
    return false;
  from = std::stoull(w[1]);
  to = std::stoull(w[2]);
  return true;
}

double growth_us(const std::string &out, const std::string &prefix,
                 uint64_t from, uint64_t to) {
  std::regex tick(prefix + " (\\d+) (\\d+)");
  auto total_at = [&](uint64_t when) {
    uint64_t value = 0;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), tick);
         it != std::sregex_iterator(); ++it)
      if (std::stoull((*it)[1]) <= when)
        value = std::stoull((*it)[2]);
    return value;
  };
  return static_cast<double>(total_at(to) - total_at(from)) / 1000.0;
}

BpftraceTotal::BpftraceTotal(const std::string &probes) {
  std::string script =
      probes + "interval:ms:20 { printf(\"T %llu %llu\\n\", nsecs, @t); }\n";
  proc_ = std::make_unique<Subprocess>(
      std::vector<std::string>{"/usr/bin/bpftrace", "-e", script});
  for (double t0 = now_seconds(); !attached_ && now_seconds() - t0 < 30;) {
    auto line = proc_->read_line(1);
    attached_ = line && line->rfind("T ", 0) == 0;
  }
}

double BpftraceTotal::us_between(const std::string &offcpu_err) {
  sleep_seconds(0.2); // a tick past offcpu's window end
  proc_->signal(SIGINT);
  std::string out = proc_->wait(30).out;
  uint64_t from = 0, to = 0;
  if (!window_of(offcpu_err, from, to))
    return -1;
  return growth_us(out, "T", from, to);
}

} // namespace offcpu::test
