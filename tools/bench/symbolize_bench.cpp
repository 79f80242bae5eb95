// How long symbolizing takes: 10,000 distinct stacks (user and kernel
// frames) from 50 live processes, from a cold start (kallsyms, maps and ELF
// files all read inside the timed region); without DWARF, then with inlined
// frames and source lines (issue #31: at most 2x).
// Each is timed in turns, several rounds, and the fastest of each kept: on
// a shared 2-CPU VM one round's ratio swings from 1.4x to 3x with the
// neighbours' load, the fastest rounds much less.
//   build/tools/offcpu_symbolize_bench [processes] [stacks] [rounds]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "symbolize/name_samples.h"
#include "symbolize/symbolizer.h"

using namespace offcpu;

// One cold symbolization of `raw`, in ms; its counts on stdout.
static double time_once(const RawProfile &given, bool dwarf, size_t nproc) {
  RawProfile raw = given; // naming consumes its counts
  SourceOptions source;
  source.dwarf = dwarf;
  source.inlined = dwarf;
  source.lines = dwarf;
  auto t0 = std::chrono::steady_clock::now();
  Symbolizer sym(system_files(), KernelSymbols::load(system_files()));
  sym.set_source_options(source);
  Profile profile;
  add_offcpu_samples(profile, raw, sym, StackSelection{});
  auto t1 = std::chrono::steady_clock::now();
  double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const SymbolizeStats &st = sym.stats();
  printf("%s: symbolized %zu stacks (%llu frames) from %zu processes in "
         "%.1f ms, cold start (kallsyms + maps + %llu ELF files parsed once "
         "each); %llu frames named, %llu not; %llu DWARF files, %llu "
         "inlined frames added\n",
         dwarf ? "inlined + lines" : "no DWARF (--no-inline)",
         profile.samples.size(),
         static_cast<unsigned long long>(st.named + st.unnamed), nproc, ms,
         static_cast<unsigned long long>(st.elf_files_parsed),
         static_cast<unsigned long long>(st.named),
         static_cast<unsigned long long>(st.unnamed),
         static_cast<unsigned long long>(st.dwarf_files),
         static_cast<unsigned long long>(st.frames_inlined));
  return ms;
}

int main(int argc, char **argv) {
  int nproc = argc > 1 ? atoi(argv[1]) : 50;
  int nstacks = argc > 2 ? atoi(argv[2]) : 10000;
  int rounds = argc > 3 ? std::max(1, atoi(argv[3])) : 3;
  // Live processes with real code: different programs so several ELF files
  // (and libc's debug file) are involved.
  const char *programs[] = {"/bin/sleep", "/usr/bin/tail", "/bin/cat",
                            "/usr/bin/sort"};
  std::vector<pid_t> pids;
  int feed[2];
  if (pipe(feed) != 0)
    return 1;
  for (int i = 0; i < nproc; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      dup2(feed[0], STDIN_FILENO); // never written, never closed: they wait
      const char *prog = programs[i % 4];
      if (i % 4 == 0)
        execl(prog, prog, "1000", (char *)nullptr);
      else if (i % 4 == 1)
        execl(prog, prog, "-f", "/dev/null", (char *)nullptr);
      else
        execl(prog, prog, (char *)nullptr); // reads the pipe below forever
      _exit(127);
    }
    pids.push_back(pid);
  }
  usleep(300000);

  // Addresses inside each process's executable file mappings, and kernel
  // text addresses: the raw material of real stacks.
  std::mt19937_64 rng(42);
  Symbolizer probe(system_files(), KernelSymbols{});
  KernelSymbols ks = KernelSymbols::load(system_files());
  std::vector<std::vector<uint64_t>> user_addrs(pids.size());
  for (size_t p = 0; p < pids.size(); p++) {
    auto text = system_files().read(
        "/proc/" + std::to_string(pids[p]) + "/maps", 1 << 24);
    for (const Mapping &m : parse_proc_maps(text ? *text : ""))
      if (m.executable && m.is_file())
        for (int k = 0; k < 64; k++)
          user_addrs[p].push_back(m.start + rng() % (m.end - m.start));
  }
  auto kernel_text = system_files().read("/proc/kallsyms", 64u << 20);
  std::vector<uint64_t> kernel_addrs;
  for (size_t pos = 0; kernel_text && pos < kernel_text->size() &&
                       kernel_addrs.size() < 5000;) {
    size_t nl = kernel_text->find('\n', pos);
    std::string line = kernel_text->substr(pos, nl - pos);
    pos = nl == std::string::npos ? kernel_text->size() : nl + 1;
    if (line.size() > 19 && (line[17] == 't' || line[17] == 'T') &&
        rng() % 20 == 0)
      kernel_addrs.push_back(std::stoull(line.substr(0, 16), nullptr, 16) + 4);
  }

  RawProfile raw;
  for (int s = 0; s < nstacks; s++) {
    size_t p = static_cast<size_t>(s) % pids.size();
    offcpu_key key{};
    key.tgid = key.pid = static_cast<uint32_t>(pids[p]);
    key.user_stack = 1000000 + static_cast<uint64_t>(s);
    key.kernel_stack = 2000000 + static_cast<uint64_t>(s);
    std::vector<uint64_t> u, k;
    for (int f = 0; f < 12 && !user_addrs[p].empty(); f++)
      u.push_back(user_addrs[p][rng() % user_addrs[p].size()]);
    for (int f = 0; f < 15 && !kernel_addrs.empty(); f++)
      k.push_back(kernel_addrs[rng() % kernel_addrs.size()]);
    raw.stacks[key.user_stack] = u;
    raw.stacks[key.kernel_stack] = k;
    offcpu_value val{};
    val.total_ns = 1000;
    val.count = 1;
    raw.counts.push_back({key, val});
  }

  // Without DWARF (--no-inline, as before issue #31), then with inlined
  // frames and --lines: each from a cold symbolizer, in turns.
  double best_ms[2] = {0, 0};
  for (int round = 0; round < rounds; round++)
    for (bool dwarf : {false, true}) {
      double ms = time_once(raw, dwarf, pids.size());
      double &best = best_ms[dwarf ? 1 : 0];
      if (best == 0 || ms < best)
        best = ms;
    }
  printf("fastest of %d rounds: %.1f ms without DWARF, %.1f ms with inlined "
         "frames and lines\n",
         rounds, best_ms[0], best_ms[1]);
  printf("DWARF cost: %.2fx the time without (budget: 2x)\n",
         best_ms[0] > 0 ? best_ms[1] / best_ms[0] : 0);
  for (pid_t pid : pids)
    kill(pid, SIGKILL);
  for (pid_t pid : pids)
    waitpid(pid, nullptr, 0);
  return 0;
}
