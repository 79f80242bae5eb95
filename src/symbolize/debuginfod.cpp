#include "symbolize/debuginfod.h"

#include <dlfcn.h>
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

// libdebuginfod is opened only when DEBUGINFOD_URLS asks for it: linked
// in, it brought libcurl, gnutls, libcrypto, kerberos and LDAP into every
// run, 4-5 MiB of offcpu's resident memory (issue #27) and their
// relocations at each start, for a feature most runs leave off.
struct Api {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_set_user_data) set_user_data = nullptr;
  decltype(&debuginfod_get_user_data) get_user_data = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
};

template <typename F> bool bind(void *lib, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

// Null (after one warning) if the library or one of its functions is
// missing. Loaded once; never closed (its client may live to exit).
const Api *api() {
  static const Api *loaded = []() -> const Api * {
    void *lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
    static Api a;
    if (lib && bind(lib, "debuginfod_begin", a.begin) &&
        bind(lib, "debuginfod_end", a.end) &&
        bind(lib, "debuginfod_set_user_data", a.set_user_data) &&
        bind(lib, "debuginfod_get_user_data", a.get_user_data) &&
        bind(lib, "debuginfod_set_progressfn", a.set_progressfn) &&
        bind(lib, "debuginfod_find_debuginfo", a.find_debuginfo))
      return &a;
    const char *why = dlerror();
    fprintf(stderr,
            "offcpu: warning: DEBUGINFOD_URLS is set but libdebuginfod could "
            "not be loaded (%s): no debug files are fetched\n",
            why ? why : "a function is missing");
    return nullptr;
  }();
  return loaded;
}

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
  const Api *lib = api();
  if (!lib)
    return;
  debuginfod_client *c = lib->begin();
  if (!c)
    return;
  client_ = c;
  lib->set_user_data(c, this);
  lib->set_progressfn(c, [](debuginfod_client *dc, long a, long b) {
    return progress(dc, a, b);
  });
}

Debuginfod::~Debuginfod() {
  if (client_)
    api()->end(static_cast<debuginfod_client *>(client_));
}

// libdebuginfod calls this while it downloads: non-zero ends it.
int Debuginfod::progress(void *client, long done, long total) {
  auto *self = static_cast<Debuginfod *>(
      api()->get_user_data(static_cast<debuginfod_client *>(client)));
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
  int fd = api()->find_debuginfo(
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
