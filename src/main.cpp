// offcpu: off-CPU time by stack. Parsing and running live in offcpu_core.
#include <cstdio>
#include <exception>

#include "cli/options.h"
#include "run/flamegraph.h"
#include "run/profile.h"
#include "run/rwsem.h"
#include "util/error.h"
#include "util/memory.h"

int main(int argc, char **argv) {
  offcpu::limit_heap_growth();
  try {
    offcpu::CommandLine cl = offcpu::parse_command_line(argc, argv);
    if (cl.action == offcpu::Action::PrintedHelp) {
      fputs(cl.help_text.c_str(), stdout);
      return offcpu::kExitOk;
    }
    if (cl.command == offcpu::Command::Flamegraph)
      return offcpu::run_flamegraph(cl.flamegraph);
    if (cl.command == offcpu::Command::Rwsem)
      return offcpu::run_rwsem(cl.rwsem);
    if (cl.command == offcpu::Command::Lock)
      return offcpu::run_rwsem(cl.lock);
    return offcpu::run_profile(cl.profile);
  } catch (const offcpu::FatalError &e) {
    fprintf(stderr, "offcpu: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception &e) {
    fprintf(stderr, "offcpu: internal error: %s\n", e.what());
    return offcpu::kExitRuntime;
  }
}
