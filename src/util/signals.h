// Ctrl-C / SIGTERM handling: the first one asks the run to stop and print
// what it has; a second SIGINT ends the process at once.
#pragma once

#include <cstdint>

namespace offcpu {

void install_stop_handlers();
bool stop_requested();
// The signal that asked for the stop (SIGINT, SIGTERM), 0 if none did.
int stop_signal();
// When the first stop signal came (CLOCK_MONOTONIC ns), 0 if none did: the
// window ends there, however long the work in progress then takes.
uint64_t stop_signal_ns();

// A word the first stop signal sets to its time (if the word is 0 or
// later): the BPF programs' end of the window (their `stop_ns`), closed
// by the handler itself rather than once the main loop gets to it. One at a
// time; the registration lasts as long as the object.
class WindowEndOnSignal {
public:
  explicit WindowEndOnSignal(volatile uint64_t *word);
  ~WindowEndOnSignal();
  WindowEndOnSignal(const WindowEndOnSignal &) = delete;
  WindowEndOnSignal &operator=(const WindowEndOnSignal &) = delete;
};
// Files to delete if a second Ctrl-C ends the process (unfinished output
// files). The string must outlive its registration. Returns a handle for
// forget_cleanup_path, or -1 when all slots are taken (the file is then
// left behind by a second Ctrl-C; there are more slots than -o targets).
int add_cleanup_path(const char *path);
void forget_cleanup_path(int handle);

// Sleeps until the deadline (seconds, < 0: none) or a stop request.
// Returns true when stopped by a signal.
bool wait_for_stop(double seconds);

} // namespace offcpu
