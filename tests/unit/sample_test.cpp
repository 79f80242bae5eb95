#include <gtest/gtest.h>

#include <cstring>

#include "run/report.h"
#include "support/fake_files.h"
#include "support/model_builder.h"
#include "symbolize/name_samples.h"

namespace offcpu {
namespace {

const char kKallsyms[] =
    "ffffffff81000000 T entry_SYSCALL_64\n"
    "ffffffff81000100 T do_syscall_64\n"
    "ffffffff81000200 T do_nanosleep\n"
    "ffffffff81000300 T schedule\n"
    "ffffffff81000400 T __schedule\n"
    "ffffffff81000500 T __traceiter_sched_switch\n"
    "ffffffff81000600 T bpf_trace_run4\n"
    "ffffffffa0000000 t bpf_prog_6deef7357e7b4530_offcpu_switch [bpf]\n";

offcpu_key key(uint32_t pid, uint64_t ustack, uint64_t kstack,
               uint32_t flags = 0) {
  offcpu_key k{};
  k.tgid = 77;
  k.pid = pid;
  k.user_stack = ustack;
  k.kernel_stack = kstack;
  k.flags = flags;
  std::strcpy(k.comm, "worker");
  return k;
}

// A copy of `raw`: naming consumes its counts.
std::vector<Sample> symbolize_profile(RawProfile raw, Symbolizer &sym,
                                      StackSelection show) {
  Profile p;
  add_offcpu_samples(p, raw, sym, show);
  return p.samples;
}

std::vector<std::string> name_user_stack(uint32_t tgid, uint64_t id,
                                         const std::vector<uint64_t> &ips,
                                         Symbolizer &sym) {
  sym.select_stack(tgid, id);
  std::vector<std::string> out;
  for (size_t i = ips.size(); i-- > 0;)
    out.push_back(sym.user_frame(tgid, ips[i], i > 0));
  return out;
}

using test::names;

class SampleTest : public ::testing::Test {
protected:
  SampleTest() {
    files_.files["/fakeproc/77/maps"] = "";
    sym_ = std::make_unique<Symbolizer>(files_, KernelSymbols::parse(kKallsyms),
                                        "/fakeproc");
  }
  test::FakeFiles files_;
  std::unique_ptr<Symbolizer> sym_;
};

TEST_F(SampleTest, KernelStackRootFirstWithoutTracerFrames) {
  RawProfile raw;
  // Leaf first, as the kernel stores it: the probe's own frames lead.
  raw.stacks[100] = {0xffffffffa0000010, 0xffffffff81000610, 0xffffffff81000510,
                     0xffffffff81000410, 0xffffffff81000310, 0xffffffff81000210,
                     0xffffffff81000110, 0xffffffff81000010};
  raw.counts.push_back({key(5, OFFCPU_NO_STACK, 100), {3000, 2, 0, 0, {}}});
  auto samples = symbolize_profile(raw, *sym_, {});
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(
      names(samples[0].kernel),
      (std::vector<std::string>{"entry_SYSCALL_64", "do_syscall_64",
                                "do_nanosleep", "schedule", "__schedule"}));
  EXPECT_TRUE(samples[0].user.empty());
  EXPECT_FALSE(samples[0].user_missed); // kernel thread: no user stack at all
  EXPECT_EQ(samples[0].comm, "worker");
  EXPECT_EQ(samples[0].count, 2u);
}

TEST_F(SampleTest, MissedAndUnknownStacks) {
  RawProfile raw;
  raw.stacks[200] = {0x401000, 0x402000};
  raw.counts.push_back(
      {key(5, OFFCPU_STACK_MISSED, OFFCPU_STACK_MISSED), {1000, 1, 0, 0, {}}});
  raw.counts.push_back(
      {key(6, 200, 999 /* not in the map */), {1000, 1, 0, 0, {}}});
  auto samples = symbolize_profile(raw, *sym_, {});
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_TRUE(samples[0].user_missed);
  EXPECT_TRUE(samples[0].kernel_missed);
  EXPECT_EQ(names(samples[1].user),
            (std::vector<std::string>{"[unknown]", "[unknown]"}));
  EXPECT_TRUE(samples[1].kernel_missed);
}

// A stack cut at the depth limit ends, at its root, in a [truncated] frame;
// counted once per stack, with the waits on it.
TEST_F(SampleTest, TruncatedStacksAreMarkedAtTheRootAndCounted) {
  RawProfile raw;
  raw.stacks[100] = {0xffffffff81000410, 0xffffffff81000310};
  raw.stacks[200] = {0x401000, 0x402000};
  raw.stacks[300] = {0x403000};
  raw.stacks.truncated = {100, 200};
  raw.counts.push_back({key(5, 200, 100), {1000, 2, 0, 0, {}}});
  raw.counts.push_back({key(6, 200, OFFCPU_NO_STACK), {1000, 3, 0, 0, {}}});
  raw.counts.push_back({key(7, 300, OFFCPU_NO_STACK), {1000, 4, 0, 0, {}}});
  auto samples = symbolize_profile(raw, *sym_, {});
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(
      names(samples[0].user),
      (std::vector<std::string>{"[truncated]", "[unknown]", "[unknown]"}));
  EXPECT_EQ(samples[0].user[0].kind, FrameKind::Marker);
  EXPECT_EQ(
      names(samples[0].kernel),
      (std::vector<std::string>{"[truncated]", "schedule", "__schedule"}));
  EXPECT_EQ(names(samples[2].user), std::vector<std::string>{"[unknown]"});
  TruncatedStacks cut = truncated_stacks(raw.counts, raw.stacks);
  EXPECT_EQ(cut.stacks, 2u);
  EXPECT_EQ(cut.waits, 5u);
}

// One line, naming the option: to raise below the maximum, or that 127 is
// the most at it.
TEST(TruncatedReport, NamesTheOptionThatRaisesTheLimit) {
  EXPECT_EQ(describe_truncated(0, 0, 127), "");
  std::string at_max = describe_truncated(2, 9, 127);
  EXPECT_EQ(at_max.find('\n'), at_max.size() - 1) << at_max;
  EXPECT_NE(at_max.find("2 stacks deeper than 127 frames were cut (9 waits)"),
            std::string::npos)
      << at_max;
  EXPECT_NE(at_max.find("127 frames is the most offcpu keeps "
                        "(--perf-max-stack-depth)"),
            std::string::npos)
      << at_max;
  std::string lower = describe_truncated(1, 1, 40);
  EXPECT_NE(lower.find("raise --perf-max-stack-depth (now 40, at most 127)"),
            std::string::npos)
      << lower;
}

TEST_F(SampleTest, StackSelectionHidesParts) {
  RawProfile raw;
  raw.stacks[100] = {0xffffffff81000410};
  raw.stacks[200] = {0x401000};
  raw.counts.push_back({key(5, 200, 100), {1000, 1, 0, 0, {}}});
  auto user_only = symbolize_profile(raw, *sym_, StackSelection{true, false});
  EXPECT_TRUE(user_only[0].kernel.empty());
  EXPECT_FALSE(user_only[0].user.empty());
  auto kernel_only = symbolize_profile(raw, *sym_, StackSelection{false, true});
  EXPECT_TRUE(kernel_only[0].user.empty());
  EXPECT_EQ(names(kernel_only[0].kernel),
            std::vector<std::string>{"__schedule"});
}

TEST(MergePartial, NoschedStackJoinsTheFullStackItPrefixes) {
  Sample full = test::sample(
      "t", {"main"},
      {"do_syscall_64", "hrtimer_nanosleep", "do_nanosleep", "schedule"}, 5000,
      1, 5);
  Sample part = full;
  part.kernel =
      test::frames({"do_syscall_64", "hrtimer_nanosleep"}, FrameKind::Kernel);
  part.kernel_nosched = true;
  part.total_ns = 700;
  part.count = 1;
  Sample other_thread = part;
  other_thread.tid = 2;
  std::vector<Sample> samples = {part, full, other_thread};
  merge_partial_kernel_stacks(samples);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].total_ns, 5700u);
  EXPECT_EQ(samples[0].count, 6u);
  EXPECT_EQ(samples[1].tid, 2u); // nothing to merge with: kept as it is
  EXPECT_EQ(samples[1].total_ns, 700u);
  EXPECT_EQ(samples[1].comm, "t");
  EXPECT_EQ(samples[1].kernel.size(), 2u);
}

TEST(MergePartial, LoneNoschedSampleIsKeptIntact) {
  Sample part =
      test::sample("stuck", {"main", "read_forever"}, {"ksys_read"}, 900, 3);
  part.kernel_nosched = true;
  std::vector<Sample> samples = {part};
  merge_partial_kernel_stacks(samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].comm, "stuck");
  EXPECT_EQ(names(samples[0].user), names(part.user));
  EXPECT_EQ(names(samples[0].kernel), names(part.kernel));
}

TEST(MapsReadings, EachStackUsesTheMapsItWasTakenUnder) {
  test::FakeFiles files;
  Symbolizer sym(files, KernelSymbols{}, "/fakeproc");
  // Before exec: code at 0x1000; after: different code at 0x3000.
  files.files["/fakeproc/5/maps"] = "1000-2000 r-xp 00000000 00:00 0 [jit_a]\n";
  sym.note_user_stack(5, 101, {0x1500});
  files.files["/fakeproc/5/maps"] = "3000-4000 r-xp 00000000 00:00 0 [jit_b]\n";
  sym.note_user_stack(5, 102, {0x3500}); // not covered: read again
  sym.note_user_stack(5, 103, {0x3600}); // covered by the latest reading
  files.files.erase("/fakeproc/5/maps"); // the process is gone
  EXPECT_EQ(name_user_stack(5, 101, {0x1500}, sym),
            std::vector<std::string>{"[jit_a]"});
  EXPECT_EQ(name_user_stack(5, 102, {0x3500}, sym),
            std::vector<std::string>{"[jit_b]"});
  EXPECT_EQ(name_user_stack(5, 103, {0x3600}, sym),
            std::vector<std::string>{"[jit_b]"});
  // A stack never announced is named with the latest reading.
  EXPECT_EQ(name_user_stack(5, 999, {0x1500}, sym),
            std::vector<std::string>{"[unknown]"});
}

// dlopen maps ld.so.cache, unmaps it and may map the library where it
// was: a reading that holds data where the stack has code is older than
// the stack, and is read again.
TEST(MapsReadings, CodeWhereTheReadingHasDataIsReadAgain) {
  test::FakeFiles files;
  Symbolizer sym(files, KernelSymbols{}, "/fakeproc");
  files.files["/fakeproc/6/maps"] = "1000-2000 r-xp 00000000 00:00 0 [jit_a]\n"
                                    "3000-4000 r--p 00000000 00:00 0 [cache]\n";
  sym.note_user_stack(6, 101, {0x1500});
  files.files["/fakeproc/6/maps"] =
      "1000-2000 r-xp 00000000 00:00 0 [jit_a]\n"
      "3000-4000 r-xp 00000000 00:00 0 [jit_lib]\n";
  sym.note_user_stack(6, 102, {0x3500, 0x1500});
  files.files.erase("/fakeproc/6/maps");
  EXPECT_EQ(name_user_stack(6, 102, {0x3500, 0x1500}, sym),
            (std::vector<std::string>{"[jit_a]", "[jit_lib]"}));
}

// An exec'd child's first reading, taken before ld.so mapped its
// libraries; a later stack has code there, and the child is gone before it
// can be read again: those frames count as a process's gone before its
// maps were read (Reliability.ExecStormNamesOrReportsTheLoss saw them
// unnamed and not reported 1 run in 5), the others keep their names.
TEST(MapsReadings, CodeOutsideTheLastReadingOfAProcessGoneIsCounted) {
  test::FakeFiles files;
  Symbolizer sym(files, KernelSymbols{}, "/fakeproc");
  files.files["/fakeproc/7/maps"] = "1000-2000 r-xp 00000000 00:00 0 [jit_a]\n"
                                    "3000-4000 r--p 00000000 00:00 0 [cache]\n";
  sym.note_user_stack(7, 101, {0x1500});
  files.files.erase("/fakeproc/7/maps");
  sym.note_user_stack(7, 102, {0x3500, 0x5500, 0x1500});
  EXPECT_EQ(name_user_stack(7, 102, {0x3500, 0x5500, 0x1500}, sym),
            (std::vector<std::string>{"[jit_a]", "[unknown]", "[unknown]"}));
  EXPECT_EQ(sym.stats().frames_process_gone, 2u);
  EXPECT_EQ(sym.stats().processes_gone, 1u);
  // The stack the reading holds is named as it was, nothing counted.
  EXPECT_EQ(name_user_stack(7, 101, {0x1500}, sym),
            std::vector<std::string>{"[jit_a]"});
  EXPECT_EQ(sym.stats().frames_process_gone, 2u);
}

// A busy host's thread churn gives many samples on few stacks: the
// threads of one process on one stack share its frames, named once; a
// process that names the same addresses alike (a forked worker, its maps
// its parent's) shares them too; one with other maps has its own.
TEST_F(SampleTest, ThreadsOfOneStackShareItsFrames) {
  files_.files["/fakeproc/88/maps"] = "";
  files_.files["/fakeproc/89/maps"] =
      "400000-403000 r-xp 00000000 00:00 0 [jit_c]\n";
  RawProfile raw;
  raw.stacks[100] = {0xffffffff81000410, 0xffffffff81000310};
  raw.stacks[200] = {0x401000, 0x402000};
  raw.counts.push_back({key(5, 200, 100), {1000, 1, 0, 0, {}}});
  raw.counts.push_back({key(6, 200, 100), {2000, 1, 0, 0, {}}});
  for (uint32_t tgid : {88u, 89u}) {
    offcpu_key other = key(tgid, 200, 100);
    other.tgid = tgid;
    raw.counts.push_back({other, {3000, 1, 0, 0, {}}});
  }
  Profile p;
  add_offcpu_samples(p, raw, *sym_, {});
  auto &s = p.samples;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].user.identity(), s[1].user.identity());
  EXPECT_EQ(s[0].kernel.identity(), s[1].kernel.identity());
  EXPECT_EQ(s[0].kernel.identity(), s[2].kernel.identity());
  EXPECT_EQ(s[0].user.identity(), s[2].user.identity());
  EXPECT_NE(s[0].user.identity(), s[3].user.identity());
  EXPECT_EQ(names(s[3].user), (std::vector<std::string>{"[jit_c]", "[jit_c]"}));

  // Changing one sample's frames leaves the others' as they were.
  s[1].user.mut(0).name = "changed";
  EXPECT_NE(s[0].user.identity(), s[1].user.identity());
  EXPECT_EQ(names(s[0].user),
            (std::vector<std::string>{"[unknown]", "[unknown]"}));
  EXPECT_EQ(s[1].user[0].name, "changed");

  // An interval appended to a longer run keeps them shared.
  Profile whole;
  whole.append(p);
  EXPECT_EQ(whole.samples[0].kernel.identity(),
            whole.samples[2].kernel.identity());
  EXPECT_EQ(names(whole.samples[0].kernel), names(s[0].kernel));
}

// A server's stacks repeat the same frames: two stacks of one process
// that share their root hold the very same frame objects, named once, and
// the counts still count each frame of each stack.
TEST_F(SampleTest, StacksShareTheFramesTheyHaveInCommon) {
  files_.files["/fakeproc/90/maps"] =
      "400000-403000 r-xp 00000000 00:00 0 [jit_d]\n";
  RawProfile raw;
  raw.stacks[100] = {0xffffffff81000410, 0xffffffff81000310};
  raw.stacks[101] = {0xffffffff81000410, 0xffffffff81000300};
  raw.stacks[300] = {0x401000, 0x402000, 0x9000}; // leaf first
  raw.stacks[301] = {0x401800, 0x402000, 0x9000};
  offcpu_key a = key(90, 300, 100), b = key(90, 301, 101);
  a.tgid = b.tgid = 90;
  raw.counts.push_back({a, {1000, 1, 0, 0, {}}});
  raw.counts.push_back({b, {2000, 1, 0, 0, {}}});
  Profile p;
  add_offcpu_samples(p, raw, *sym_, {});
  ASSERT_EQ(p.samples.size(), 2u);
  const Frames &u0 = p.samples[0].user, &u1 = p.samples[1].user;
  ASSERT_EQ(u0.size(), 3u);
  ASSERT_EQ(u1.size(), 3u);
  EXPECT_NE(u0.identity(), u1.identity());
  // Root first: the unmapped root and the caller are shared, the leaves not.
  EXPECT_EQ(u0.items()[0], u1.items()[0]);
  EXPECT_EQ(u0.items()[1], u1.items()[1]);
  EXPECT_NE(u0.items()[2], u1.items()[2]);
  EXPECT_EQ(u0[2].address, 0x401000u);
  EXPECT_EQ(u1[2].address, 0x401800u);
  // The kernel stacks share their leaf (root first: the last) frame too.
  EXPECT_EQ(p.samples[0].kernel.items()[1], p.samples[1].kernel.items()[1]);
  EXPECT_NE(p.samples[0].kernel.items()[0], p.samples[1].kernel.items()[0]);
  // Every frame of every stack counted: 6 user frames (one unnamed each
  // stack), 4 kernel frames.
  const SymbolizeStats &st = sym_->stats();
  EXPECT_EQ(st.named + st.unnamed, 10u);
  EXPECT_EQ(st.unnamed_by_module.at("[unknown]"), 2u);

  // Appended to a longer run (rwsem's intervals), still shared.
  Profile whole;
  whole.append(p);
  ASSERT_EQ(whole.samples.size(), 2u);
  EXPECT_EQ(whole.samples[0].user.items()[1], whole.samples[1].user.items()[1]);
  EXPECT_EQ(names(whole.samples[0].user), names(u0));
}

TEST(SharedFrames, ReadingNeverCopiesWritingAlwaysDoes) {
  Frames a{{"main", FrameKind::User}, {"wait", FrameKind::User}};
  const Frames b = a;
  EXPECT_EQ(a.identity(), b.identity());
  size_t n = 0;
  for (const Frame &f : a) // a is not const: still no copy
    n += f.name.size();
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(a.identity(), b.identity());
  a.erase(a.begin(), a.begin() + 1);
  EXPECT_EQ(names(a), std::vector<std::string>{"wait"});
  EXPECT_EQ(names(b), (std::vector<std::string>{"main", "wait"}));
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.identity(), nullptr);
  EXPECT_EQ(b.size(), 2u);
}

TEST(TracerFrames, Recognised) {
  EXPECT_TRUE(is_tracer_frame("bpf_prog_6deef7357e7b4530_offcpu_switch [bpf]"));
  EXPECT_TRUE(is_tracer_frame("bpf_trace_run4"));
  EXPECT_TRUE(is_tracer_frame("__traceiter_sched_switch"));
  EXPECT_FALSE(is_tracer_frame("__schedule"));
  EXPECT_FALSE(is_tracer_frame("bpf_map_lookup")); // not a probe frame prefix
}

} // namespace
} // namespace offcpu
