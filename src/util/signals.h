// Ctrl-C / SIGTERM handling: the first one asks the run to stop and print
// what it has; a second SIGINT ends the process at once.
#pragma once

namespace offcpu {

void install_stop_handlers();
bool stop_requested();
// Sleeps until the deadline (seconds, < 0: none) or a stop request.
// Returns true when stopped by a signal.
bool wait_for_stop(double seconds);

} // namespace offcpu
