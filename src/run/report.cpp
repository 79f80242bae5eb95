#include "run/report.h"

namespace offcpu {

std::string describe_losses(const std::array<uint64_t, OFFCPU_LOST_NR> &lost,
                            uint32_t stack_storage_size, uint32_t max_entries) {
  std::string out;
  auto line = [&](uint64_t n, const std::string &text) {
    if (n)
      out += "offcpu: warning: " + std::to_string(n) + " " + text + "\n";
  };
  line(lost[OFFCPU_LOST_STACK_MAP_FULL],
       "stacks lost: stack storage full; raise --stack-storage-size (now " +
           std::to_string(stack_storage_size) + ")");
  line(lost[OFFCPU_LOST_STACK_COLLISION],
       "stacks lost to hash collisions; raise --stack-storage-size");
  line(lost[OFFCPU_LOST_AGG_MAP_FULL],
       "waits lost: too many distinct thread/stack pairs; raise --max-entries "
       "(now " +
           std::to_string(max_entries) + ")");
  line(lost[OFFCPU_LOST_START_STORE], "waits lost: the kernel could not store "
                                      "their start time (out of memory)");
  line(lost[OFFCPU_LOST_USER_STACK_WALK],
       "user stacks could not be walked (shown as [Missed User Stack])");
  line(lost[OFFCPU_LOST_KERNEL_STACK_WALK],
       "kernel stacks could not be walked (shown as [Missed Kernel Stack])");
  line(lost[OFFCPU_LOST_WAKER_STORE],
       "wakers lost: too many distinct wakers ([waker lost]); raise "
       "--stack-storage-size (now " +
           std::to_string(stack_storage_size) + ")");
  line(lost[OFFCPU_LOST_HELD],
       "waits lost: their thread exited without a last switch-out the "
       "kernel reported, and they were not yet in the aggregation map");
  line(lost[OFFCPU_LOST_ANNOUNCE],
       "new stacks announced late (announcement ring full): a process that "
       "exited before blocking on the same stack again may show [unknown]");
  return out;
}

std::string describe_truncated(size_t stacks, uint64_t waits, uint32_t depth) {
  if (!stacks)
    return "";
  const std::string d = std::to_string(depth);
  std::string fix =
      depth < OFFCPU_MAX_STACK_DEPTH
          ? "raise --perf-max-stack-depth (now " + d + ", at most " +
                std::to_string(OFFCPU_MAX_STACK_DEPTH) + ")"
          : d + " frames is the most offcpu keeps (--perf-max-stack-depth)";
  return "offcpu: warning: " + std::to_string(stacks) + " stacks deeper than " +
         d + " frames were cut (" + std::to_string(waits) +
         " waits): their root-side frames are missing, marked [truncated]; " +
         fix + "\n";
}

std::string symbolization_summary(const SymbolizeStats &st) {
  std::string line = "symbolization: " + std::to_string(st.named) +
                     " frames named, " + std::to_string(st.unnamed) +
                     " unnamed, " + std::to_string(st.elf_files_parsed) +
                     " ELF files parsed";
  for (const auto &[module, n] : st.unnamed_by_module)
    line += "; " + module + " " + std::to_string(n);
  return line;
}

} // namespace offcpu
