#include "collect/edge_loader.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <exception>
#include <system_error>

#include "util/clock.h"
#include "util/priority.h"

namespace offcpu {

EdgeLoader::EdgeLoader(std::function<int(SplitPrograms *)> load,
                       std::function<void(const SplitPrograms &)> then)
    : load_(std::move(load)), then_(std::move(then)) {
  // Signals stay with the main thread, which turns them into a stop (and
  // one pending here would make the verifier start over).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error &) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    run(); // no thread to be had: a slower start, nothing lost
    return;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

EdgeLoader::~EdgeLoader() {
  if (thread_.joinable())
    thread_.join();
}

void EdgeLoader::run() {
  // As the load before the attach: the stop and the rewalker wait for it.
  PriorityBoost boost(kBurstNice);
  int err = -ENOMEM;
  try {
    err = load_(&programs_);
    if (err == 0 && then_)
      then_(programs_);
  } catch (const std::exception &) {
    // Out of memory in libbpf's wrapper or ours: said as a failed load.
  }
  std::lock_guard<std::mutex> lock(mutex_);
  err_ = err;
  done_ns_ = monotonic_ns();
  done_ = true;
  cv_.notify_all();
}

const SplitPrograms *EdgeLoader::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
  return err_ == 0 ? &programs_ : nullptr;
}

bool EdgeLoader::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

int EdgeLoader::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return err_;
}

uint64_t EdgeLoader::done_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ns_;
}

} // namespace offcpu
