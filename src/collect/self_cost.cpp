#include "collect/self_cost.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/resource.h>

#include <cstdio>

namespace offcpu {
namespace {

ProgramCost read_cost(int fd) {
  bpf_prog_info info{};
  __u32 len = sizeof(info);
  ProgramCost c;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
    c.name = info.name;
    c.runs = info.run_cnt;
    c.run_ns = info.run_time_ns;
  }
  return c;
}

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval &tv) {
    return static_cast<double>(tv.tv_sec) +
           static_cast<double>(tv.tv_usec) / 1e6;
  };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

} // namespace

SelfCost::SelfCost() : stats_(bpf_enable_stats(BPF_STATS_RUN_TIME)) {}

void SelfCost::watch(const std::vector<int> &prog_fds) {
  for (int fd : prog_fds)
    if (fd >= 0)
      progs_.push_back(fd);
}

void SelfCost::start() {
  base_.clear();
  for (int fd : progs_)
    base_.push_back(read_cost(fd));
  user_cpu_base_ = process_cpu_seconds();
}

CostReport SelfCost::report(uint64_t window_ns) const {
  CostReport r;
  for (size_t i = 0; i < progs_.size() && i < base_.size(); i++) {
    ProgramCost now = read_cost(progs_[i]);
    now.runs -= base_[i].runs;
    now.run_ns -= base_[i].run_ns;
    r.bpf_ns += now.run_ns;
    if (i == 0)
      r.events = now.runs;
    r.programs.push_back(now);
  }
  r.available = r.events > 0 && r.bpf_ns > 0;
  int cpus = libbpf_num_possible_cpus();
  if (window_ns && cpus > 0)
    r.cpu_share =
        static_cast<double>(r.bpf_ns) / (static_cast<double>(window_ns) * cpus);
  r.user_cpu_s = process_cpu_seconds() - user_cpu_base_;
  return r;
}

std::string CostReport::summary(const char *event, const char *plural) const {
  char line[256];
  if (!available) {
    snprintf(line, sizeof(line),
             "cost: BPF run time not available (kernel statistics off); "
             "user space %.2f s CPU",
             user_cpu_s);
    return line;
  }
  snprintf(line, sizeof(line),
           "cost: %.0f ns of BPF per %s (%llu %s), %.2f%% of the CPUs over "
           "the window; user space %.2f s CPU",
           static_cast<double>(bpf_ns) / static_cast<double>(events), event,
           static_cast<unsigned long long>(events), plural, cpu_share * 100,
           user_cpu_s);
  return line;
}

std::string CostReport::per_program() const {
  std::string out;
  for (const ProgramCost &p : programs)
    if (p.runs)
      out += "offcpu:   BPF program " + p.name + ": " + std::to_string(p.runs) +
             " runs, " + std::to_string(p.run_ns / p.runs) + " ns each\n";
  return out;
}

} // namespace offcpu
