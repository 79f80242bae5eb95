#include "symbolize/debuginfod.h"

#include <elfutils/debuginfod.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/clock.h"
#include "util/signals.h"

namespace offcpu {
namespace {

// A download longer than this says how far it got, then again every
// second.
constexpr uint64_t kQuietNs = 1000000000;

} // namespace

Debuginfod::Debuginfod(uint64_t budget_ns)
    : left_ns_(budget_ns), budget_ns_(budget_ns) {
  const char *urls = getenv("DEBUGINFOD_URLS");
  if (budget_ns == 0 || !urls || !*urls)
    return;
  // Root's cache, not that of the user who ran sudo (HOME may be theirs):
  // files there are root's, trusted as /usr/lib/debug is.
  if (!getenv("DEBUGINFOD_CACHE_PATH"))
    if (const passwd *pw = getpwuid(0); pw && pw->pw_dir)
      setenv("DEBUGINFOD_CACHE_PATH",
             (std::string(pw->pw_dir) + "/.cache/debuginfod_client").c_str(),
             0);
  debuginfod_client *c = debuginfod_begin();
  if (!c)
    return;
  client_ = c;
  debuginfod_set_user_data(c, this);
  debuginfod_set_progressfn(c, [](debuginfod_client *dc, long a, long b) {
    return progress(dc, a, b);
  });
}

Debuginfod::~Debuginfod() {
  if (client_)
    debuginfod_end(static_cast<debuginfod_client *>(client_));
}

// libdebuginfod calls this while it downloads: non-zero ends it.
int Debuginfod::progress(void *client, long done, long total) {
  auto *self = static_cast<Debuginfod *>(
      debuginfod_get_user_data(static_cast<debuginfod_client *>(client)));
  if (!self)
    return 0;
  const uint64_t now = monotonic_ns();
  if (stop_requested() || now >= self->until_ns_) {
    self->gave_up_ = true;
    return 1;
  }
  if (now - self->started_ns_ >= kQuietNs && now - self->said_ns_ >= kQuietNs) {
    self->said_ns_ = now;
    if (total > 0)
      fprintf(stderr,
              "offcpu: fetching the debug file of %s from debuginfod: %ld of "
              "%ld KiB\n",
              self->current_.c_str(), done / 1024, total / 1024);
    else
      fprintf(stderr,
              "offcpu: fetching the debug file of %s from debuginfod: %ld "
              "KiB\n",
              self->current_.c_str(), done / 1024);
  }
  return 0;
}

UniqueFd Debuginfod::fetch(const std::string &build_id, uint64_t deadline_ns) {
  if (!client_ || build_id.empty())
    return UniqueFd();
  if (left_ns_ == 0 || stop_requested()) {
    stats_.not_tried++;
    return UniqueFd();
  }
  started_ns_ = said_ns_ = monotonic_ns();
  until_ns_ = started_ns_ + left_ns_;
  if (deadline_ns && deadline_ns < until_ns_)
    until_ns_ = deadline_ns;
  if (until_ns_ <= started_ns_) {
    stats_.not_tried++;
    return UniqueFd();
  }
  current_ = build_id;
  gave_up_ = false;
  char *path = nullptr;
  // A build id in hex is passed with length 0.
  int fd = debuginfod_find_debuginfo(
      static_cast<debuginfod_client *>(client_),
      reinterpret_cast<const unsigned char *>(build_id.c_str()), 0, &path);
  free(path);
  const uint64_t spent = monotonic_ns() - started_ns_;
  left_ns_ = spent >= left_ns_ ? 0 : left_ns_ - spent;
  if (fd >= 0) {
    stats_.fetched++;
    return UniqueFd(fd);
  }
  if (gave_up_)
    stats_.cut++;
  else
    stats_.not_found++;
  return UniqueFd();
}

std::string Debuginfod::describe_losses() const {
  if (!stats_.cut && !stats_.not_tried)
    return {};
  char line[256];
  snprintf(line, sizeof(line),
           "offcpu: warning: %llu debug files not fetched from debuginfod "
           "(%llu downloads cut, %llu not tried): the run allows %g s for "
           "them (--debuginfod-time SECONDS), or the run ended; their frames "
           "show as [module]\n",
           static_cast<unsigned long long>(stats_.cut + stats_.not_tried),
           static_cast<unsigned long long>(stats_.cut),
           static_cast<unsigned long long>(stats_.not_tried),
           static_cast<double>(budget_ns_) / 1e9);
  return line;
}

} // namespace offcpu
