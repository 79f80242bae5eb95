// Ctrl-C / SIGTERM handling: the first one asks the run to stop and print
// what it has; a second SIGINT ends the process at once.
#pragma once

namespace offcpu {

void install_stop_handlers();
bool stop_requested();
// The signal that asked for the stop (SIGINT, SIGTERM), 0 if none did.
int stop_signal();
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
