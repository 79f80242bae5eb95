// Reads files' DWARF on a thread of its own (issue #31): libdw reads and
// inflates a debug file's sections in one call that takes from tens of ms
// (libc6-dbg) to a second and more (python3.11-dbg under load). Done in the
// window, as soon as a stack names the file, the end of the run only looks
// addresses up instead of waiting for it. The same budgets apply
// (dwarf_lines.h): one file's, the run's, and the end of the run's
// deadline, past which nothing is begun and no one waits. Once a file is
// open, the addresses its stacks hold are looked up on the thread too.
#pragma once

#include <cstdint>
#include <memory>

#include "symbolize/dwarf_lines.h"
#include "util/fd.h"

namespace offcpu {

class DwarfLoader {
public:
  // `held_bytes`: the sections the thread holds, its files together
  // (DwarfFile::section_bytes); past it files are let go
  // (DwarfFile::release), those with nothing to inflate first, the least
  // recently used first, never the one it works on (so the bound is
  // held_bytes and one file).
  explicit DwarfLoader(uint64_t held_bytes = kHeldBytes);
  // Tells the thread to stop after the file it is reading, without waiting
  // for it: libdw cannot be interrupted and the end of the run must not
  // wait for it (the thread only touches state it shares ownership of).
  ~DwarfLoader();
  DwarfLoader(const DwarfLoader &) = delete;
  DwarfLoader &operator=(const DwarfLoader &) = delete;

  using Ticket = uint64_t; // 0: none
  // Holding one file at a time let glibc's debug file (7 MB inflated,
  // 50-65 ms to read again) go each time another file's addresses came:
  // read three more times in an 8 s window of postgres under pgbench, 7%
  // of offcpu's CPU (issue #27).
  static constexpr uint64_t kHeldBytes = uint64_t{16} << 20;

  // Queues the DWARF of the ELF file open as `fd` (checked, ours) to be
  // read; starts the thread on first use.
  Ticket submit(UniqueFd fd);
  // An address (as the file numbers them) whose frames will be asked for:
  // looked up by the thread once the file is open, so that the end of the
  // run finds it in the file's cache.
  void warm(Ticket ticket, uint64_t vaddr);
  // The DWARF of `ticket`'s file, read now or by the thread: waits for it
  // until `deadline_ns` (CLOCK_MONOTONIC, 0: none). Null, with `why` set,
  // if the file has none usable or the deadline came first (Time). One
  // take per ticket.
  std::unique_ptr<DwarfFile> take(Ticket ticket, uint64_t deadline_ns,
                                  DwarfLoss *why);
  // The end of the run: no file is begun past it, nor waited for.
  void set_deadline(uint64_t deadline_ns);
  // Nothing more will be taken: the thread stops and the files not taken
  // are freed (one it is reading is freed when it is done).
  void stop();

  // What every file's DWARF may cost, together. Its cached-lookups share
  // is spent by the caller's thread (DwarfFile::frames_at), its bytes by
  // the loader's: no field is written by both.
  DwarfRunBudget *run_budget();
  // What each file opened from now on may cost and read.
  void set_limits(const DwarfLimits &limits);

  // Files found read when taken.
  uint64_t read_ahead() const;
  // Files whose DWARF was read (taken or not).
  uint64_t opened() const;
  // Files queued, being read, or with addresses left to warm.
  size_t pending() const;

  struct Shared; // the thread's and the loader's (dwarf_loader.cpp)

private:
  std::shared_ptr<Shared> shared_;
};

} // namespace offcpu
