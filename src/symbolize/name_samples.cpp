#include "symbolize/name_samples.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_map>

#include "model/lock_kinds.h"
#include "util/flat_memo.h"
#include "util/utf8.h"

static_assert(offcpu::Latency::kBuckets == OFFCPU_HIST_BUCKETS,
              "the model's histogram is the BPF side's");

namespace offcpu {
namespace {

// A global rw_semaphore sits inside its symbol; farther than this from the
// nearest data symbol below it, the address is more likely in the heap.
constexpr uint64_t kMaxOffsetInSymbol = 4096;
// The tracer's own frames lead kernel stacks taken inside the tracepoint;
// they are looked for this far from the leaf.
constexpr size_t kTracerFrameWindow = 16;

const std::vector<uint64_t> *find_stack(const StackTable &stacks, uint64_t id) {
  auto it = stacks.find(id);
  return it == stacks.end() ? nullptr : &it->second;
}

// The root end of a stack cut at the depth limit: what is below it is
// missing, and says so in every output.
Frame truncation_mark() {
  return {"[truncated]", FrameKind::Marker, kNoModule, 0, kNoMapping, false};
}

// The profile's ids of the modules and mappings frames come from, each
// module's looked up once: a profile's frames hold a few dozen modules.
class ModuleIds {
public:
  explicit ModuleIds(Profile &p) : p_(p) {}

  uint32_t of(const ModuleInfo *m) {
    if (!m)
      return kNoModule;
    auto it = ids_.find(m);
    // Its debug file may be found after its first frame: told once.
    if (it != ids_.end() && (it->second.debug_file || m->debug_file.empty()))
      return it->second.id;
    uint32_t id = p_.module(m->path, m->build_id, m->debug_file);
    ids_[m] = {id, !m->debug_file.empty()};
    return id;
  }
  // The process's range a user frame came from, for pprof.
  uint32_t mapping(const Mapping &range, const ModuleInfo *m) {
    if (!m || range.end <= range.start)
      return kNoMapping;
    return p_.mapping({range.start, range.end, range.offset, of(m)});
  }

private:
  struct Id {
    uint32_t id;
    bool debug_file;
  };
  Profile &p_;
  std::unordered_map<const ModuleInfo *, Id> ids_;
};

using Item = Frames::Item;
using Items = Frames::Items;

// A frame's frames (itself, then what DWARF says is inlined into it) and
// what naming them counted: shared by every stack that holds the frame,
// and counted again for each.
struct FrameGroup {
  Items frames;
  FrameCounts counts;
};
using FrameMemo = FlatMemo<FrameKey, FrameGroup, FrameKeyHash>;

// Kernel frames root first, without the tracer's leaf frames; `truncated`:
// the stack was cut at the depth limit. Each frame named once (`memo`, by
// address and whether it is a return address).
Items kernel_frames(ModuleIds &ids, FrameMemo &memo,
                    const std::vector<uint64_t> &ips, bool truncated,
                    Symbolizer &sym) {
  Items leaf_first;
  leaf_first.reserve(ips.size() + 1);
  for (size_t i = 0; i < ips.size(); i++) {
    FrameKey key; // no process, no reading: kernel text is everyone's
    key.addr = ips[i];
    key.is_return = i > 0;
    if (const FrameGroup *known = memo.find(key)) {
      sym.count_again(known->counts);
      leaf_first.push_back(known->frames.front());
      continue;
    }
    const ModuleInfo *m = nullptr;
    FrameGroup g;
    std::string name =
        valid_utf8(sym.kernel_frame(ips[i], i > 0, &m, &g.counts));
    g.frames.push_back(std::make_shared<const Frame>(
        Frame{std::move(name), FrameKind::Kernel, ids.of(m), ips[i], kNoMapping,
              i > 0}));
    leaf_first.push_back(g.frames.front());
    memo.add(key, std::move(g));
  }
  size_t cut = 0;
  for (size_t i = 0; i < leaf_first.size() && i < kTracerFrameWindow; i++)
    if (is_tracer_frame(leaf_first[i]->name))
      cut = i + 1;
  leaf_first.erase(leaf_first.begin(),
                   leaf_first.begin() + static_cast<long>(cut));
  if (truncated)
    leaf_first.push_back(std::make_shared<const Frame>(truncation_mark()));
  std::reverse(leaf_first.begin(), leaf_first.end());
  return leaf_first;
}

// What DWARF says of a frame; with --lines, its name ends with its
// source file's base name and line: "function (file.c:123)".
void add_source(Frame &f, const SourceFrame &where, bool lines) {
  auto src = std::make_shared<FrameSource>();
  src->function = f.name;
  if (where.file)
    src->file = valid_utf8(*where.file);
  if (where.decl_file)
    src->function_file = valid_utf8(*where.decl_file);
  src->line = where.line;
  src->start_line = where.start_line;
  if (lines && where.line) {
    f.name += " (";
    f.name += src->file.empty() ? "??" : source_base_name(src->file);
    f.name += ":" + std::to_string(where.line) + ")";
  }
  f.source = std::move(src);
}

Items native_frames(ModuleIds &ids, FrameMemo &memo, uint32_t tgid,
                    uint64_t stack_id, const uint64_t *ips, size_t n, bool cut,
                    Symbolizer &sym);

// A Python frame as the model holds it: "function (file.py:line)", with
// its file and line for pprof.
Frame python_frame(uint32_t tgid, const PythonFrameWord &w, Symbolizer &sym) {
  Frame f{"[unknown Python code]", FrameKind::Python, kNoModule, w.code};
  const PythonCode *c = sym.python().code(tgid, w.code);
  if (!c)
    return f;
  auto src = std::make_shared<FrameSource>();
  src->function = c->qualname;
  src->file = c->filename;
  src->function_file = c->filename;
  src->start_line = c->first_line;
  src->line = w.index ? c->line(w.index - 1) : 0;
  f.name = c->qualname + " (" + source_base_name(c->filename) + ":" +
           (src->line ? std::to_string(src->line) : std::string("?")) + ")";
  f.source = std::move(src);
  return f;
}

bool is_eval_frame(const Frame &f) {
  static const std::string eval = "_PyEval_EvalFrameDefault";
  return f.kind == FrameKind::User && !f.inlined &&
         f.name.compare(0, eval.size(), eval) == 0 &&
         (f.name.size() == eval.size() || f.name[eval.size()] == ' ');
}

// Puts the Python frames (`py`, leaf first) in place of the interpreter's
// frames that ran them. In 3.11 a call from Python to Python runs in the
// same _PyEval_EvalFrameDefault: each C-level evaluation runs the frames
// from one entered from C (is_entry) up to the next. Matched from the leaf
// end (the root end of a deep stack may be cut); groups left over at the
// root go with the outermost evaluation, and with none found at all (its
// frames unnamed), the Python frames follow the native ones.
Items merge_python(Items root_first, uint32_t tgid,
                   const std::vector<PythonFrameWord> &py, Symbolizer &sym) {
  std::vector<Items> groups; // root first, each root first
  for (size_t i = py.size(); i-- > 0;) {
    if (groups.empty() || py[i].entry)
      groups.emplace_back();
    groups.back().push_back(
        std::make_shared<const Frame>(python_frame(tgid, py[i], sym)));
  }
  std::vector<size_t> evals;
  for (size_t i = 0; i < root_first.size(); i++)
    if (is_eval_frame(*root_first[i]))
      evals.push_back(i);
  if (evals.empty()) {
    for (auto &g : groups)
      root_first.insert(root_first.end(), g.begin(), g.end());
    return root_first;
  }
  while (groups.size() > evals.size()) { // extra root groups: the outermost
    groups[1].insert(groups[1].begin(), groups[0].begin(), groups[0].end());
    groups.erase(groups.begin());
  }
  std::vector<const Items *> at(root_first.size(), nullptr);
  size_t skip = evals.size() - groups.size();
  for (size_t g = 0; g < groups.size(); g++)
    at[evals[skip + g]] = &groups[g];
  Items out;
  out.reserve(root_first.size() + py.size());
  for (size_t i = 0; i < root_first.size(); i++) {
    if (!at[i]) {
      out.push_back(std::move(root_first[i]));
      continue;
    }
    out.insert(out.end(), at[i]->begin(), at[i]->end());
    while (i + 1 < root_first.size() && root_first[i + 1]->inlined)
      i++; // the interpreter's inlined internals go with it
  }
  return out;
}

// User frames root first, named with the maps the stack was taken under;
// Python frames in place of the interpreter's.
Items user_frames(ModuleIds &ids, FrameMemo &memo, uint32_t tgid,
                  uint64_t stack_id, const std::vector<uint64_t> &all, bool cut,
                  Symbolizer &sym) {
  size_t native = 0;
  std::vector<PythonFrameWord> py =
      sym.python().chain(tgid, python_frames_of(all, &native));
  Items named =
      native_frames(ids, memo, tgid, stack_id, all.data(), native, cut, sym);
  if (py.empty())
    return named;
  return merge_python(std::move(named), tgid, py, sym);
}

// The frames of one user address (`i` > 0: a return address): its own,
// then those DWARF says are inlined there, innermost last.
FrameGroup name_user_address(ModuleIds &ids, uint32_t tgid, uint64_t addr,
                             bool is_return, Symbolizer &sym) {
  FrameGroup g;
  const ModuleInfo *m = nullptr;
  Mapping range;
  std::string name =
      valid_utf8(sym.user_frame(tgid, addr, is_return, &m, &range, &g.counts));
  Frame holder{std::move(name),       FrameKind::User, ids.of(m), addr,
               ids.mapping(range, m), is_return};
  const SourceOptions &source = sym.source_options();
  const std::vector<SourceFrame> *chain = nullptr;
  if (source.dwarf)
    chain = &sym.user_source(tgid, addr, is_return, &g.counts);
  if (!chain || chain->empty()) {
    g.frames.push_back(std::make_shared<const Frame>(std::move(holder)));
    return g;
  }
  // The holder keeps its symbol's name; each inlined call becomes a frame
  // of its own, at the same address, innermost last.
  Frame first = holder;
  add_source(first, chain->front(), source.lines);
  g.frames.push_back(std::make_shared<const Frame>(std::move(first)));
  if (!source.inlined)
    return g;
  for (size_t k = 1; k < chain->size(); k++) {
    Frame f = holder;
    const SourceFrame &c = (*chain)[k];
    f.name = c.function ? valid_utf8(*c.function) : std::string("[inlined]");
    f.inlined = true;
    add_source(f, c, source.lines);
    g.frames.push_back(std::make_shared<const Frame>(std::move(f)));
  }
  return g;
}

// Native user frames root first, named with the maps the stack was taken
// under; each address's frames named once per process and reading.
Items native_frames(ModuleIds &ids, FrameMemo &memo, uint32_t tgid,
                    uint64_t stack_id, const uint64_t *ips, size_t n, bool cut,
                    Symbolizer &sym) {
  Items root_first;
  root_first.reserve(n + 1);
  if (cut)
    root_first.push_back(std::make_shared<const Frame>(truncation_mark()));
  FrameKey key = sym.select_stack(tgid, stack_id);
  for (size_t i = n; i-- > 0;) {
    key.addr = ips[i];
    key.is_return = i > 0;
    const FrameGroup *g = memo.find(key);
    if (g)
      sym.count_again(g->counts);
    else
      g = &memo.add(key, name_user_address(ids, tgid, ips[i], i > 0, sym));
    root_first.insert(root_first.end(), g->frames.begin(), g->frames.end());
  }
  return root_first;
}

bool same_source(const FrameSource *a, const FrameSource *b) {
  if (a == b)
    return true;
  return a && b && a->function == b->function && a->file == b->file &&
         a->function_file == b->function_file && a->line == b->line &&
         a->start_line == b->start_line;
}

// Whether two namings of a stack are the same in every output.
bool same_frames(const Frames &a, const Frames &b) {
  return std::equal(a.items().begin(), a.items().end(), b.items().begin(),
                    b.items().end(), [](const Item &xp, const Item &yp) {
                      if (xp == yp)
                        return true;
                      const Frame &x = *xp, &y = *yp;
                      return x.address == y.address && x.kind == y.kind &&
                             x.module == y.module && x.mapping == y.mapping &&
                             x.return_address == y.return_address &&
                             x.inlined == y.inlined && x.name == y.name &&
                             same_source(x.source.get(), y.source.get());
                    });
}

// Each stack named once: the samples that hold it (its threads, their
// states and wakers) share its frames. A kernel stack's names depend on its
// addresses alone; a user stack's on its process's maps as well.
class StackNames {
public:
  StackNames(Profile &p, const StackTable &stacks, Symbolizer &sym)
      : ids_(p), stacks_(stacks), sym_(sym) {}

  // Null if the stack is not in the table.
  const Frames *kernel(uint64_t id) {
    auto it = kernel_.find(id);
    if (it != kernel_.end())
      return &it->second;
    const auto *ips = find_stack(stacks_, id);
    if (!ips)
      return nullptr;
    Frames f(kernel_frames(ids_, kernel_memo_, *ips,
                           stacks_.truncated.count(id), sym_));
    return &kernel_.emplace(id, std::move(f)).first->second;
  }
  const Frames *user(uint32_t tgid, uint64_t id) {
    auto it = user_.find({tgid, id});
    if (it != user_.end())
      return &it->second;
    const auto *ips = find_stack(stacks_, id);
    if (!ips)
      return nullptr;
    Frames f(user_frames(ids_, user_memo_, tgid, id, *ips,
                         stacks_.truncated.count(id), sym_));
    // Workers forked from one server map its files where it did: the same
    // addresses name alike in each, and they share one copy of the frames
    // (postgres under pgbench: a third of 11,000 user stacks named were
    // another backend's).
    std::vector<Frames> &alike = by_id_[id];
    auto same = std::find_if(alike.begin(), alike.end(), [&](const Frames &o) {
      return same_frames(o, f);
    });
    if (same != alike.end())
      f = *same;
    else
      alike.push_back(f);
    return &user_.emplace(std::make_pair(tgid, id), std::move(f)).first->second;
  }

private:
  ModuleIds ids_;
  const StackTable &stacks_;
  Symbolizer &sym_;
  std::unordered_map<uint64_t, Frames> kernel_;
  struct TgidStackHash {
    size_t operator()(const std::pair<uint32_t, uint64_t> &k) const {
      return std::hash<uint64_t>()(k.second * 0x9e3779b97f4a7c15ull ^ k.first);
    }
  };
  // Node-based: the pointers handed out stay valid as it grows.
  std::unordered_map<std::pair<uint32_t, uint64_t>, Frames, TgidStackHash>
      user_;
  // Each user stack's distinct namings, by stack id.
  std::unordered_map<uint64_t, std::vector<Frames>> by_id_;
  // Each address's frames, named once (kernel_frames, native_frames).
  FrameMemo kernel_memo_;
  FrameMemo user_memo_;
};

// The thread and both stacks of an aggregation key.
Sample name_sample(uint32_t tgid, uint32_t tid, const char *comm,
                   size_t comm_len, uint64_t user_stack, uint64_t kernel_stack,
                   StackNames &names, StackSelection show) {
  Sample s;
  s.tgid = tgid;
  s.tid = tid;
  s.comm = valid_utf8({comm, strnlen(comm, comm_len)});
  if (show.user && user_stack != OFFCPU_NO_STACK) {
    if (const Frames *f = names.user(tgid, user_stack))
      s.user = *f;
    else
      s.user_missed = true;
  }
  if (show.kernel && kernel_stack != OFFCPU_NO_STACK) {
    if (const Frames *f = names.kernel(kernel_stack))
      s.kernel = *f;
    else
      s.kernel_missed = true;
  }
  return s;
}

bool same_names(const Frames &a, const Frames &b) {
  return std::equal(
      a.begin(), a.end(), b.begin(), b.end(),
      [](const Frame &x, const Frame &y) { return x.name == y.name; });
}

// Whether `full` extends `part`'s kernel stack for the same thread.
bool extends(const Sample &full, const Sample &part) {
  return !full.kernel_nosched && full.tid == part.tid &&
         full.tgid == part.tgid && full.comm == part.comm &&
         same_names(full.user, part.user) &&
         full.user_missed == part.user_missed &&
         full.kernel.size() > part.kernel.size() &&
         std::equal(
             part.kernel.begin(), part.kernel.end(), full.kernel.begin(),
             [](const Frame &x, const Frame &y) { return x.name == y.name; });
}

// The letter of a state class (offcpu_state_class), 0 for none.
char state_letter(uint32_t key_flags) {
  uint32_t cls = (key_flags & OFFCPU_KEY_STATE_MASK) >> OFFCPU_KEY_STATE_SHIFT;
  static const char letters[] = "RSDIT";
  return cls >= 1 && cls <= OFFCPU_STATE_NR ? letters[cls - 1] : 0;
}

bool has_frame(const Frames &frames, const char *name) {
  return std::any_of(frames.begin(), frames.end(),
                     [name](const Frame &f) { return f.name == name; });
}

// Interrupt entry frames, for kernels where the BPF side could not cut the
// waker's stack there (it did not know where entry code is).
bool is_interrupt_entry(const std::string &name) {
  return name.rfind("asm_sysvec_", 0) == 0 ||
         name.rfind("asm_common_interrupt", 0) == 0 ||
         name.rfind("sysvec_", 0) == 0 ||
         name.rfind("common_interrupt", 0) == 0;
}

Waker::Kind marker_kind(uint64_t id) {
  switch (id) {
  case OFFCPU_WAKER_PREEMPTED:
    return Waker::Kind::Preempted;
  case OFFCPU_WAKER_TOO_SHORT:
    return Waker::Kind::TooShort;
  case OFFCPU_WAKER_LOST:
    return Waker::Kind::Lost;
  case OFFCPU_WAKER_STILL_WAITING:
    return Waker::Kind::Waiting;
  case OFFCPU_WAKER_TIMER:
    return Waker::Kind::Timer;
  case OFFCPU_WAKER_IRQ:
    return Waker::Kind::Interrupt;
  default:
    return Waker::Kind::Unseen;
  }
}

// The waker of a key: a task with its stacks, or an interrupt, told apart
// from a timer by the function that did the wakeup.
Waker name_waker(uint64_t id,
                 const std::unordered_map<uint64_t, offcpu_waker> &wakers,
                 StackNames &names, StackSelection show) {
  Waker w;
  auto it = wakers.find(id);
  if (id < OFFCPU_WAKER_FIRST_ID || it == wakers.end()) {
    w.kind = id < OFFCPU_WAKER_FIRST_ID ? marker_kind(id) : Waker::Kind::Lost;
    return w;
  }
  const offcpu_waker &rw = it->second;
  // An interrupt's frames tell a timer from another interrupt, also where
  // no kernel frames are shown (-U: then walked for that alone).
  if (show.kernel || rw.kind == OFFCPU_WAKER_INTERRUPT)
    if (const Frames *f = names.kernel(rw.kernel_stack))
      w.kernel = *f;
  auto entry =
      std::find_if(w.kernel.begin(), w.kernel.end(),
                   [](const Frame &f) { return is_interrupt_entry(f.name); });
  bool interrupt = rw.kind == OFFCPU_WAKER_INTERRUPT || entry != w.kernel.end();
  if (interrupt) {
    // Root first: what lies below the entry is the task it interrupted.
    if (entry != w.kernel.end())
      w.kernel.erase(w.kernel.begin(), entry);
    bool timer = has_frame(w.kernel, "hrtimer_wakeup") ||
                 has_frame(w.kernel, "process_timeout");
    w.kind = timer ? Waker::Kind::Timer : Waker::Kind::Interrupt;
    if (timer || !show.kernel)
      w.kernel.clear();
    return w;
  }
  w.kind = Waker::Kind::Task;
  w.tgid = rw.tgid;
  w.tid = rw.pid;
  w.comm = valid_utf8({rw.comm, strnlen(rw.comm, sizeof(rw.comm))});
  if (show.user && rw.user_stack != OFFCPU_NO_STACK)
    if (const Frames *f = names.user(rw.tgid, rw.user_stack))
      w.user = *f;
  return w;
}

// Every user stack first, so perf maps are scanned once for all of them.
template <typename Entries>
void expect_user_stacks(const Entries &keys, const StackTable &stacks,
                        Symbolizer &sym) {
  for (const auto &kv : keys)
    if (const auto *ips = find_stack(stacks, kv.first.user_stack))
      sym.expect_user_stack(kv.first.tgid, kv.first.user_stack, *ips);
}

} // namespace

bool is_tracer_frame(const std::string &name) {
  static const char *const prefixes[] = {
      "bpf_prog_",        "bpf_trace_run",   "__bpf_trace_",
      "__traceiter_",     "perf_trace_",     "trace_call_bpf",
      "bpf_get_stack",    "__bpf_get_stack", "bpf_get_stackid",
      "__bpf_prog_enter", "__bpf_prog_exit", "bpf_trampoline_"};
  for (const char *p : prefixes)
    if (name.compare(0, std::strlen(p), p) == 0)
      return true;
  return false;
}

Sample name_wait(Profile &profile, uint32_t tgid, uint32_t tid,
                 const char *comm, size_t comm_len, uint64_t user_stack,
                 uint64_t kernel_stack, uint64_t waker, const RawProfile &raw,
                 Symbolizer &sym) {
  const StackSelection both{true, true};
  StackNames names(profile, raw.stacks, sym);
  Sample s = name_sample(tgid, tid, comm, comm_len, user_stack, kernel_stack,
                         names, both);
  if (waker != OFFCPU_WAKER_NONE)
    s.waker = name_waker(waker, raw.wakers, names, both);
  return s;
}

void merge_partial_kernel_stacks(std::vector<Sample> &samples) {
  std::vector<bool> gone(samples.size(), false);
  for (size_t i = 0; i < samples.size(); i++) {
    const Sample &part = samples[i];
    if (!part.kernel_nosched || part.kernel.empty())
      continue;
    size_t best = samples.size();
    for (size_t j = 0; j < samples.size(); j++) {
      if (j == i || gone[j] || !extends(samples[j], part))
        continue;
      if (best == samples.size() ||
          samples[j].total_ns > samples[best].total_ns)
        best = j;
    }
    if (best == samples.size())
      continue;
    samples[best].total_ns += part.total_ns;
    samples[best].count += part.count;
    samples[best].latency.add(part.latency);
    gone[i] = true;
  }
  size_t out = 0;
  for (size_t i = 0; i < samples.size(); i++) {
    if (gone[i])
      continue;
    if (out != i) // self-move would empty the sample
      samples[out] = std::move(samples[i]);
    out++;
  }
  samples.resize(out);
}

void add_offcpu_samples(Profile &profile, RawProfile &raw, Symbolizer &sym,
                        StackSelection show,
                        const std::map<uint64_t, std::string> &cgroups) {
  if (show.user)
    expect_user_stacks(raw.counts, raw.stacks, sym);
  std::vector<Sample> samples;
  samples.reserve(raw.counts.size());
  StackNames names(profile, raw.stacks, sym);
  raw.counts.consume([&](const std::pair<offcpu_key, offcpu_value> &kv) {
    const auto &[key, val] = kv;
    Sample s = name_sample(key.tgid, key.pid, key.comm, sizeof(key.comm),
                           key.user_stack, key.kernel_stack, names, show);
    s.total_ns = val.total_ns;
    s.count = val.count;
    s.runq_ns = val.runq_ns;
    s.latency = Latency::from_buckets(val.hist, val.count, val.max_ns);
    s.kernel_nosched = key.flags & OFFCPU_KSTACK_NOSCHED;
    s.state = state_letter(key.flags);
    if (key.cgroup) {
      auto c = cgroups.find(key.cgroup);
      s.cgroup = c != cgroups.end()
                     ? c->second
                     : "[cgroup " + std::to_string(key.cgroup) + "]";
    }
    if (key.waker != OFFCPU_WAKER_NONE)
      s.waker = name_waker(key.waker, raw.wakers, names, show);
    samples.push_back(std::move(s));
  });
  merge_partial_kernel_stacks(samples);
  // Handed over whole where possible: a second array of every sample (and
  // the first's capacity held meanwhile) was a third of the peak heap on a
  // whole-system run (issue #27).
  if (profile.samples.empty()) {
    profile.samples = std::move(samples);
    return;
  }
  profile.samples.reserve(profile.samples.size() + samples.size());
  std::move(samples.begin(), samples.end(),
            std::back_inserter(profile.samples));
}

namespace {

// "comm (tid)" of the thread that woke a futex waiter; empty if unseen.
std::string holder_name(uint64_t id,
                        const std::unordered_map<uint64_t, offcpu_waker> &w) {
  auto it = w.find(id);
  if (id < OFFCPU_WAKER_FIRST_ID || it == w.end())
    return {};
  const offcpu_waker &h = it->second;
  return valid_utf8(std::string(h.comm, strnlen(h.comm, sizeof(h.comm)))) +
         " (" + std::to_string(h.pid) + ")";
}

} // namespace

void add_lock_waits(Profile &profile, const RawLockWaits &raw, Symbolizer &sym,
                    StackSelection show, bool kinds) {
  if (show.user)
    expect_user_stacks(raw.waits, raw.stacks, sym);
  StackNames names(profile, raw.stacks, sym);
  for (const auto &[key, val] : raw.waits) {
    Sample s = name_sample(key.tgid, key.pid, key.comm, sizeof(key.comm),
                           key.user_stack, key.kernel_stack, names, show);
    s.total_ns = val.total_ns;
    s.count = val.count;
    s.latency = Latency::from_buckets(val.hist, val.count, val.max_ns);
    const bool futex =
        key.kind == OFFCPU_LOCK_FUTEX || key.kind == OFFCPU_LOCK_FUTEX_PI;
    auto cache =
        key.cache ? raw.slab_caches.find(key.cache) : raw.slab_caches.end();
    std::string name =
        futex ? sym.user_data(key.tgid, key.user_stack, key.lock)
        : cache != raw.slab_caches.end()
            ? "[" + cache->second + "]"
            : describe_lock(key.lock, key.flags, sym.kernel_symbols(), kinds);
    s.lock = LockWait{
        val.max_ns, (key.flags & RWSEM_WAIT_WRITE) != 0, valid_utf8(name),
        kinds ? lock_kind_name(key.kind) : std::string(),
        // The owner for offcpu lock --holders only: offcpu rwsem --wakers
        // keeps its layout.
        kinds ? key.owner : 0,
        kinds && key.owner
            ? valid_utf8(
                  std::string(key.owner_comm,
                              strnlen(key.owner_comm, sizeof(key.owner_comm))))
            : std::string()};
    if (key.cgroup) {
      auto c = raw.cgroups.find(key.cgroup);
      s.cgroup = c != raw.cgroups.end()
                     ? c->second
                     : "[cgroup " + std::to_string(key.cgroup) + "]";
    }
    // A futex's holder is always known; its stacks with --wakers only.
    if (futex && !raw.holder_stacks)
      s.lock->holder = holder_name(key.waker, raw.wakers);
    else if (key.waker != OFFCPU_WAKER_NONE)
      s.waker = name_waker(key.waker, raw.wakers, names, show);
    profile.samples.push_back(std::move(s));
  }
}

std::string describe_lock(uint64_t addr, uint32_t flags,
                          const KernelSymbols &ks, bool bracketed) {
  if (flags & RWSEM_LOCK_IS_MMAP)
    return "mmap_lock";
  char buf[64];
  if (auto s = ks.find_data(addr)) {
    uint64_t off = addr - s->addr;
    if (off < kMaxOffsetInSymbol) {
      std::string name(s->name);
      if (off) {
        snprintf(buf, sizeof(buf), "+0x%" PRIx64, off);
        name += buf;
      }
      if (!s->module.empty())
        name.append(" [").append(s->module).append("]");
      return name;
    }
  }
  snprintf(buf, sizeof(buf), bracketed ? "[lock 0x%" PRIx64 "]" : "0x%" PRIx64,
           addr);
  return buf;
}

} // namespace offcpu
