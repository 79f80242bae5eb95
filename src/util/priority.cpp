#include "util/priority.h"

#include <sys/resource.h>

#include <cerrno>

namespace offcpu {

PriorityBoost::PriorityBoost(int nice) {
  errno = 0;
  old_ = getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || old_ <= nice)
    return;
  raised_ = setpriority(PRIO_PROCESS, 0, nice) == 0;
}

PriorityBoost::~PriorityBoost() {
  if (raised_)
    setpriority(PRIO_PROCESS, 0, old_);
}

} // namespace offcpu
