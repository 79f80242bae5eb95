#include "symbolize/dwarf_loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "util/clock.h"

namespace offcpu {

namespace {
// Addresses warmed at most per file (the run's cached lookups are the
// real bound; this keeps one busy file from holding the queue's memory).
constexpr size_t kMaxWarmPerFile = size_t{1} << 16;
// Addresses looked up per turn before the queue is looked at again.
constexpr size_t kWarmBatch = 64;
// A file whose sections were let go is opened again to warm its addresses
// only once this many wait, four times more after each such reopening:
// reading the sections again (inflating them) was a third of offcpu's CPU
// on a whole-system server load, 78 reopenings of 10 files as stacks came
// in (issue #27). What is left is looked up by the taker, in one reading.
constexpr size_t kReopenBatch = 256;
constexpr unsigned kReopenGrowthShift = 2;
constexpr unsigned kMaxReopenShift = 40;
} // namespace

struct DwarfLoader::Shared {
  struct Entry {
    UniqueFd fd; // until the thread opens it
    std::unique_ptr<DwarfFile> file;
    DwarfLoss why = DwarfLoss::None;
    std::vector<uint64_t> warm; // addresses to look up before it is taken
    size_t warmed = 0;          // addresses handed over so far
    bool opened = false;
    bool busy = false;              // the thread is using it
    std::atomic<bool> taken{false}; // asked for: the thread lets go of it
    bool abandoned = false;         // its taker gave up waiting
    // Out of to_warm until enough addresses wait (worth_reopening).
    bool deferred = false;
    unsigned warm_reopens = 0; // sections read again to warm it
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<Ticket, Entry> entries;
  std::deque<Ticket> to_open;
  std::deque<Ticket> to_warm;
  Ticket next = 1;
  // The files whose libdw sections the thread holds, the most recently
  // used last: let go (DwarfFile::release) past held_bytes.
  std::vector<Ticket> held;
  uint64_t held_bytes = 0;
  uint64_t deadline_ns = 0;
  DwarfLimits limits;
  uint64_t read_ahead = 0;
  uint64_t opened = 0; // files whose DWARF the thread read
  bool started = false;
  bool no_thread = false; // it could not be started
  bool stop = false;
  DwarfRunBudget budget;
};

namespace {

using Shared = DwarfLoader::Shared;

// Opens `t`'s file (the lock held on entry and on return).
void open_one(Shared &s, std::unique_lock<std::mutex> &lock,
              DwarfLoader::Ticket t) {
  Shared::Entry &e = s.entries.at(t);
  UniqueFd fd = std::move(e.fd);
  const uint64_t deadline = s.deadline_ns;
  const DwarfLimits limits = s.limits;
  e.busy = true;
  lock.unlock();
  std::unique_ptr<DwarfFile> file;
  DwarfLoss why = DwarfLoss::None;
  if (deadline && monotonic_ns() >= deadline)
    why = DwarfLoss::Time;
  else
    file = DwarfFile::open_fd(fd.get(), limits, &s.budget, deadline, &why);
  fd.reset();
  lock.lock();
  e.busy = false;
  e.opened = true;
  e.file = std::move(file);
  e.why = why;
  s.opened += e.file != nullptr;
  if (e.file && !e.warm.empty() && !e.taken)
    s.to_warm.push_back(t);
}

// Looks up a batch of `t`'s addresses, filling the file's cache.
void warm_some(Shared &s, std::unique_lock<std::mutex> &lock,
               DwarfLoader::Ticket t) {
  auto it = s.entries.find(t);
  if (it == s.entries.end())
    return; // taken since
  Shared::Entry &e = it->second;
  if (e.taken || !e.file || e.warmed >= e.warm.size())
    return;
  const size_t from = e.warmed;
  const size_t to = std::min(e.warm.size(), from + kWarmBatch);
  std::vector<uint64_t> batch(e.warm.begin() + static_cast<long>(from),
                              e.warm.begin() + static_cast<long>(to));
  e.warmed = to;
  if (e.warmed < e.warm.size())
    s.to_warm.push_back(t);
  const uint64_t deadline = s.deadline_ns;
  e.busy = true;
  lock.unlock();
  for (uint64_t a : batch) {
    if (e.taken.load(std::memory_order_relaxed) ||
        e.file->loss() != DwarfLoss::None)
      break;
    e.file->frames_at(a, deadline);
  }
  lock.lock();
  e.busy = false;
}

// Whether the thread holds `e`'s sections (not a taker's: it owns them).
bool holds(const Shared::Entry &e) {
  return e.file && !e.file->released() && !e.taken;
}

// The file to let go of among those held (0: none), never `keep` nor the
// only one held: one with nothing to inflate (read again in a fraction of
// a ms) before one with compressed sections, one whose addresses wait to
// be warmed last, the least recently used first.
DwarfLoader::Ticket cheapest_to_reopen(const Shared &s,
                                       DwarfLoader::Ticket keep) {
  if (s.held.size() < 2)
    return 0;
  DwarfLoader::Ticket pick = 0;
  int best = 4;
  for (DwarfLoader::Ticket t : s.held) {
    const Shared::Entry &e = s.entries.at(t);
    if (t == keep || !e.file)
      continue;
    const int rank = (e.file->inflated_bytes() > 0 ? 2 : 0) +
                     (e.warmed < e.warm.size() ? 1 : 0);
    if (rank < best) {
      best = rank;
      pick = t;
    }
  }
  return pick;
}

// Frees the sections of held files (cheapest_to_reopen first) while those
// held are past s.held_bytes. Their answers stay cached; new addresses
// open them again (DwarfFile::reopen). A whole system's debug files held
// together were most of offcpu's peak memory (issue #27).
void trim(Shared &s, std::unique_lock<std::mutex> &lock,
          DwarfLoader::Ticket keep) {
  for (;;) {
    uint64_t bytes = 0;
    std::vector<DwarfLoader::Ticket> still;
    for (DwarfLoader::Ticket t : s.held) {
      auto it = s.entries.find(t);
      if (it == s.entries.end())
        continue; // gone
      const Shared::Entry &e = it->second;
      if (t == keep || (!e.opened && !e.taken)) {
        // About to be read (again): counted if its size is known.
        still.push_back(t);
        if (e.file)
          bytes += e.file->section_bytes();
        continue;
      }
      if (!holds(e))
        continue; // taken, freed, or without DWARF
      still.push_back(t);
      bytes += e.file->section_bytes();
    }
    s.held = std::move(still);
    const DwarfLoader::Ticket victim = cheapest_to_reopen(s, keep);
    if (bytes <= s.held_bytes || !victim)
      return;
    // No compressed file is let go to make room for a plain one: the
    // plain one is, once its addresses are warmed.
    auto kept = s.entries.find(keep);
    if (kept != s.entries.end() && kept->second.file &&
        kept->second.file->inflated_bytes() == 0 &&
        s.entries.at(victim).file->inflated_bytes() > 0)
      return;
    s.held.erase(std::find(s.held.begin(), s.held.end(), victim));
    auto it = s.entries.find(victim);
    Shared::Entry &e = it->second;
    e.busy = true;
    lock.unlock();
    e.file->release();
    lock.lock();
    e.busy = false;
    s.cv.notify_all(); // a taker may wait for it
    if (e.abandoned) { // its taker gave up meanwhile: no one will take it
      std::unique_ptr<DwarfFile> gone = std::move(e.file);
      s.entries.erase(it);
      lock.unlock();
      gone.reset();
      lock.lock();
    }
  }
}

// Makes `next` the most recently used file, and makes room for it (its
// size is known once it has been open). After its addresses are warmed,
// trim(s, lock, 0) may let go of it too: a plain file over the budget
// beside a compressed one is the cheaper to read again.
void hold(Shared &s, std::unique_lock<std::mutex> &lock,
          DwarfLoader::Ticket next) {
  s.held.erase(std::remove(s.held.begin(), s.held.end(), next), s.held.end());
  s.held.push_back(next);
  trim(s, lock, next);
}

// Whether warming `e` now is worth it: its sections are held, or enough
// addresses wait to pay for reading them again (kReopenBatch).
bool worth_reopening(const Shared::Entry &e) {
  if (!e.file || !e.file->released())
    return true;
  const unsigned shift =
      std::min(e.warm_reopens * kReopenGrowthShift, kMaxReopenShift);
  return e.warm.size() - e.warmed >= (kReopenBatch << shift);
}

// Takes out of to_warm the files not worth reopening yet (warm() puts them
// back once enough addresses wait).
void defer_released(Shared &s) {
  for (auto it = s.to_warm.begin(); it != s.to_warm.end();) {
    auto found = s.entries.find(*it);
    if (found == s.entries.end()) { // taken since: nothing to warm
      it = s.to_warm.erase(it);
      continue;
    }
    Shared::Entry &e = found->second;
    if (worth_reopening(e) || e.taken) {
      ++it;
      continue;
    }
    e.deferred = true;
    it = s.to_warm.erase(it);
  }
}

// The next work: a file someone waits for, else more addresses of the
// file held (no reopening), else another file's addresses, else a file
// to open; 0 if none. Files are opened before their addresses are known
// to warm.
DwarfLoader::Ticket next_work(Shared &s, bool *open) {
  defer_released(s);
  if (s.to_open.empty() && s.to_warm.empty())
    return 0;
  *open = !s.to_open.empty() &&
          (s.to_warm.empty() || s.entries.at(s.to_open.front()).taken);
  std::deque<DwarfLoader::Ticket> &q = *open ? s.to_open : s.to_warm;
  auto it = q.begin();
  if (!*open) {
    auto held = std::find_if(q.begin(), q.end(), [&](DwarfLoader::Ticket t) {
      return holds(s.entries.at(t));
    });
    it = held != q.end() ? held : it;
    // defer_released left only tickets with entries in to_warm.
    Shared::Entry &e = s.entries.at(*it);
    if (e.file && e.file->released())
      e.warm_reopens++;
  }
  const DwarfLoader::Ticket t = *it;
  q.erase(it);
  return t;
}

// The thread: opens queued files and warms their caches, the sections of
// the files it used last held (hold()), until told to stop.
void serve(const std::shared_ptr<Shared> &sp) {
  Shared &s = *sp;
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.cv.wait(lock, [&] {
      return s.stop || !s.to_open.empty() || !s.to_warm.empty();
    });
    if (s.stop)
      return;
    bool open = false;
    const DwarfLoader::Ticket t = next_work(s, &open);
    if (!t)
      continue; // only deferred files: wait for more addresses
    hold(s, lock, t);
    if (s.stop || !s.entries.count(t))
      continue; // stopped, or let go of and abandoned, while it was unlocked
    if (open)
      open_one(s, lock, t);
    else
      warm_some(s, lock, t);
    auto it = s.entries.find(t);
    // Once its addresses are warmed. Not right after its open: those its
    // stacks hold come in just after it is submitted (and with addresses
    // left to warm it is the thread's next work: next_work prefers a file
    // held).
    if (!open && it != s.entries.end() &&
        it->second.warmed >= it->second.warm.size())
      trim(s, lock, 0);
    it = s.entries.find(t);
    if (it != s.entries.end() && it->second.abandoned) {
      // No one waits for it: freed outside the lock.
      std::unique_ptr<DwarfFile> gone = std::move(it->second.file);
      s.entries.erase(it);
      lock.unlock();
      gone.reset();
      lock.lock();
    }
    s.cv.notify_all();
  }
}

} // namespace

DwarfLoader::DwarfLoader(uint64_t held_bytes)
    : shared_(std::make_shared<Shared>()) {
  shared_->held_bytes = held_bytes;
}

void DwarfLoader::stop() {
  std::vector<std::unique_ptr<DwarfFile>> gone;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    Shared &s = *shared_;
    s.stop = true;
    s.to_open.clear();
    s.to_warm.clear();
    for (auto it = s.entries.begin(); it != s.entries.end();) {
      if (it->second.busy) { // the thread's until it is done
        ++it;
        continue;
      }
      gone.push_back(std::move(it->second.file));
      it = s.entries.erase(it);
    }
    s.cv.notify_all();
  }
  gone.clear(); // outside the lock: libdw's sections go
}

DwarfLoader::~DwarfLoader() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->stop = true;
  shared_->to_open.clear();
  shared_->to_warm.clear();
  shared_->cv.notify_all();
}

DwarfLoader::Ticket DwarfLoader::submit(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  const Ticket t = shared_->next++;
  shared_->entries[t].fd = std::move(fd);
  shared_->to_open.push_back(t);
  if (!shared_->started && !shared_->no_thread) {
    // Detached: it holds the state it uses, and the end of the run never
    // waits for a file libdw is still reading.
    try {
      std::thread([s = shared_] { serve(s); }).detach();
      shared_->started = true;
    } catch (const std::system_error &) {
      shared_->no_thread = true; // no threads left: take() reads the file
    }
  }
  shared_->cv.notify_all();
  return t;
}

void DwarfLoader::warm(Ticket ticket, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  auto it = shared_->entries.find(ticket);
  if (it == shared_->entries.end() || it->second.taken ||
      it->second.warm.size() >= kMaxWarmPerFile)
    return;
  Shared::Entry &e = it->second;
  const bool idle = e.opened && e.warmed == e.warm.size();
  e.warm.push_back(vaddr);
  if ((idle || e.deferred) && e.file) {
    // Busy: the thread holds its sections now (and may be changing them).
    e.deferred = !e.busy && !worth_reopening(e);
    if (!e.deferred) {
      shared_->to_warm.push_back(ticket);
      shared_->cv.notify_all();
    }
  }
}

std::unique_ptr<DwarfFile>
DwarfLoader::take(Ticket ticket, uint64_t deadline_ns, DwarfLoss *why) {
  *why = DwarfLoss::None;
  Shared &s = *shared_;
  std::unique_lock<std::mutex> lock(s.mu);
  auto it = s.entries.find(ticket);
  if (it == s.entries.end())
    return nullptr;
  Shared::Entry &e = it->second;
  e.taken = true;
  if (e.opened)
    s.read_ahead++;
  // Not begun: next in line, before files no one is waiting for.
  auto queued = std::find(s.to_open.begin(), s.to_open.end(), ticket);
  if (queued != s.to_open.end() && queued != s.to_open.begin()) {
    s.to_open.erase(queued);
    s.to_open.push_front(ticket);
  }
  if (s.no_thread && !e.opened) {
    queued = std::find(s.to_open.begin(), s.to_open.end(), ticket);
    if (queued != s.to_open.end())
      s.to_open.erase(queued);
    s.deadline_ns = deadline_ns ? deadline_ns : s.deadline_ns;
    open_one(s, lock, ticket); // on the caller's thread, as before
  }
  while (!e.opened || e.busy) {
    const uint64_t now = monotonic_ns();
    if (deadline_ns && now >= deadline_ns) {
      queued = std::find(s.to_open.begin(), s.to_open.end(), ticket);
      if (queued != s.to_open.end()) {
        s.to_open.erase(queued);
        s.entries.erase(it);
      } else {
        e.abandoned = true;
      }
      *why = DwarfLoss::Time;
      return nullptr;
    }
    if (deadline_ns)
      s.cv.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
    else
      s.cv.wait(lock);
  }
  std::unique_ptr<DwarfFile> file = std::move(e.file);
  *why = e.why;
  s.entries.erase(it);
  return file;
}

void DwarfLoader::set_deadline(uint64_t deadline_ns) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->deadline_ns = deadline_ns;
}

void DwarfLoader::set_limits(const DwarfLimits &limits) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->limits = limits;
}

DwarfRunBudget *DwarfLoader::run_budget() {
  return &shared_->budget;
}

uint64_t DwarfLoader::read_ahead() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->read_ahead;
}

uint64_t DwarfLoader::opened() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->opened;
}

size_t DwarfLoader::pending() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  size_t n = 0;
  for (const auto &[t, e] : shared_->entries)
    n += !e.opened || e.busy ||
         (e.file && !e.taken && !e.deferred && e.warmed < e.warm.size());
  return n;
}

} // namespace offcpu
