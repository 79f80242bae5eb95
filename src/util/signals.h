// Ctrl-C / SIGTERM handling: the first one asks the run to stop and print
// what it has; a second SIGINT ends the process at once.
#pragma once

namespace offcpu {

void install_stop_handlers();
bool stop_requested();
// A file to delete if a second Ctrl-C ends the process (an unfinished
// output file); null for none. The string must outlive the registration.
void set_cleanup_path(const char *path);

// Sleeps until the deadline (seconds, < 0: none) or a stop request.
// Returns true when stopped by a signal.
bool wait_for_stop(double seconds);

} // namespace offcpu
