#include "collect/edge_loader.h"

#include <system_error>

#include "util/clock.h"

namespace offcpu {

EdgeLoader::EdgeLoader(std::function<int(SplitPrograms *)> load,
                       std::function<void(const SplitPrograms &)> then)
    : load_(std::move(load)), then_(std::move(then)) {
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error &) {
    run(); // no thread to be had: a slower start, nothing lost
  }
}

EdgeLoader::~EdgeLoader() {
  if (thread_.joinable())
    thread_.join();
}

void EdgeLoader::run() {
  int err = load_(&programs_);
  if (err == 0 && then_)
    then_(programs_);
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
