#include <gtest/gtest.h>

#include "probe/features.h"
#include "util/error.h"

namespace offcpu {
namespace {

KernelFeatures modern() {
  KernelFeatures f;
  f.btf = f.tp_btf_sched_switch = f.sched_switch_prev_state = true;
  f.task_storage = f.get_task_stack = f.task_iter = f.user_walk_other_task =
      true;
  f.user_walk_current = true;
  f.bpf_loop = true;
  offcpu_kernel_text text{};
  text.text_start = 0xffffffff81000000;
  f.kernel_text = text;
  return f;
}

TEST(Plans, ModernKernelPrefersTpBtfThenRawTp) {
  auto plans = offcpu_plans(modern(), AttachChoice::Auto);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_TRUE(plans[0].tp_btf);
  EXPECT_TRUE(plans[0].task_storage);
  EXPECT_TRUE(plans[0].prev_state_arg);
  EXPECT_TRUE(plans[0].kstack_at_switch_in); // ORC walk after the filters
  EXPECT_EQ(plans[0].kernel_text.text_start, 0xffffffff81000000);
  EXPECT_FALSE(plans[1].kstack_at_switch_in); // raw_tp: the kernel's walk
  EXPECT_TRUE(plans[0].seed_open_waits);
  EXPECT_TRUE(plans[0].flush_open_waits);
  EXPECT_FALSE(plans[1].tp_btf);
  EXPECT_FALSE(
      plans[1].task_storage); // raw_tp pointers cannot key task storage
  EXPECT_TRUE(plans[0].user_fp_walk);
  EXPECT_FALSE(plans[1].user_fp_walk);
  EXPECT_TRUE(plans[0].bpf_loop);
  EXPECT_FALSE(plans[1].bpf_loop); // keeps the bounded-loop code tested
}

TEST(Plans, KernelStacksAtSwitchOutWithoutTheOrcWalker) {
  EXPECT_FALSE(
      offcpu_plans(modern(), AttachChoice::Auto, KernelUnwind::SwitchOut)[0]
          .kstack_at_switch_in);
  KernelFeatures f = modern();
  f.kernel_text.reset(); // frame-pointer kernel, arm64, before 5.16
  f.kernel_text_missing = "no ORC";
  EXPECT_FALSE(offcpu_plans(f, AttachChoice::Auto)[0].kstack_at_switch_in);
  EXPECT_THROW(offcpu_plans(f, AttachChoice::Auto, KernelUnwind::Orc),
               FatalError);
  f = modern();
  f.bpf_loop = false; // the walker runs in bpf_loop callbacks
  EXPECT_FALSE(offcpu_plans(f, AttachChoice::Auto)[0].kstack_at_switch_in);
}

TEST(Plans, PlainKernelLoadsOnlyWithTheKfuncAndTpBtf) {
  KernelFeatures f = modern();
  f.rdonly_cast = true; // 6.2+
  auto plans = offcpu_plans(f, AttachChoice::Auto);
  EXPECT_TRUE(plans[0].direct_loads);
  EXPECT_FALSE(plans[1].direct_loads); // raw_tp: the regular object
  f.rdonly_cast = false; // 6.1 and older: the object without the kfunc
  EXPECT_FALSE(offcpu_plans(f, AttachChoice::Auto)[0].direct_loads);
}

TEST(Plans, Pre518KernelReadsStateFromTask) {
  KernelFeatures f = modern();
  f.sched_switch_prev_state = false;
  f.user_walk_other_task = false;
  auto plans = offcpu_plans(f, AttachChoice::Auto);
  EXPECT_FALSE(plans[0].prev_state_arg);
  EXPECT_TRUE(plans[0].seed_open_waits);   // opened without user stacks
  EXPECT_FALSE(plans[0].seed_user_stacks); // no bpf_copy_from_user_task
  EXPECT_TRUE(plans[0].flush_open_waits);
}

TEST(Plans, OldKernelWithoutBtfTracepointsUsesRawTpOnly) {
  KernelFeatures f;
  f.btf = true;
  auto plans = offcpu_plans(f, AttachChoice::Auto);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_FALSE(plans[0].tp_btf);
  EXPECT_FALSE(plans[0].task_storage);
  EXPECT_FALSE(plans[0].seed_open_waits);
  EXPECT_FALSE(plans[0].flush_open_waits);
}

TEST(Plans, ForcedChoice) {
  auto only_raw = offcpu_plans(modern(), AttachChoice::RawTp);
  ASSERT_EQ(only_raw.size(), 1u);
  EXPECT_FALSE(only_raw[0].tp_btf);
  auto only_btf = offcpu_plans(modern(), AttachChoice::TpBtf);
  ASSERT_EQ(only_btf.size(), 1u);
  EXPECT_TRUE(only_btf[0].tp_btf);
  KernelFeatures old;
  old.btf = true;
  EXPECT_TRUE(offcpu_plans(old, AttachChoice::TpBtf).empty());
}

TEST(Plans, DescribeNamesTheHook) {
  auto plans = offcpu_plans(modern(), AttachChoice::Auto);
  EXPECT_NE(plans[0].describe().find("tp_btf/sched_switch"), std::string::npos);
  EXPECT_NE(plans[1].describe().find("raw_tp/sched_switch"), std::string::npos);
}

RwsemFeatures production_kernel() {
  RwsemFeatures f;
  f.btf = true;
  f.write_slowpath = "rwsem_down_write_slowpath";
  f.read_slowpath = "rwsem_down_read_slowpath";
  f.fentry_targets = f.kprobes = f.down_write = f.contention_tracepoints = true;
  f.user_walk_current = true;
  f.mutex_slowpath = "__mutex_lock_slowpath";
  f.mutex_btf = true;
  return f;
}

TEST(RwsemPlans, FentryThenKprobeThenTracepoint) {
  auto plans = rwsem_plans(production_kernel(), RwsemAttach::Auto);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].mechanism, RwsemAttach::Fentry);
  EXPECT_EQ(plans[0].write_target, "rwsem_down_write_slowpath");
  EXPECT_EQ(plans[1].mechanism, RwsemAttach::Kprobe);
  EXPECT_FALSE(plans[1].entry_point_only);
  EXPECT_FALSE(plans[1].user_fp_walk);
  EXPECT_EQ(plans[2].mechanism, RwsemAttach::Tracepoint);
}

TEST(RwsemPlans, ThisMachineShape) {
  // No kprobes, fentry refused at load (so still planned first), 6.x
  // tracepoints.
  RwsemFeatures f = production_kernel();
  f.kprobes = false;
  auto plans = rwsem_plans(f, RwsemAttach::Auto);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].mechanism, RwsemAttach::Fentry);
  EXPECT_EQ(plans[1].mechanism, RwsemAttach::Tracepoint);
}

// offcpu lock: the tracepoints see every kind, so they come first; the
// slow-path probes remain for kernels without them (before 5.19).
TEST(RwsemPlans, LockPrefersTheTracepoints) {
  auto plans = rwsem_plans(production_kernel(), RwsemAttach::Auto, true);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].mechanism, RwsemAttach::Tracepoint);
  EXPECT_EQ(plans[1].mechanism, RwsemAttach::Fentry);
  EXPECT_EQ(plans[2].mechanism, RwsemAttach::Kprobe);
  RwsemFeatures old = production_kernel();
  old.contention_tracepoints = false; // 5.18 and older
  plans = rwsem_plans(old, RwsemAttach::Auto, true);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].mechanism, RwsemAttach::Fentry);
  // The fallbacks see mutex waits too, through the mutex slow path...
  EXPECT_EQ(plans[0].mutex_target, "__mutex_lock_slowpath");
  EXPECT_EQ(plans[1].mutex_target, "__mutex_lock_slowpath");
  EXPECT_NE(plans[1].describe().find("__mutex_lock_slowpath"),
            std::string::npos);
  // ...where it has BTF for fentry, exists for kprobes; offcpu rwsem never.
  old.mutex_btf = false;
  plans = rwsem_plans(old, RwsemAttach::Auto, true);
  EXPECT_TRUE(plans[0].mutex_target.empty());
  EXPECT_EQ(plans[1].mutex_target, "__mutex_lock_slowpath");
  for (const RwsemPlan &p : rwsem_plans(production_kernel(), RwsemAttach::Auto))
    EXPECT_TRUE(p.mutex_target.empty()) << p.describe();
}

// Where the kernel has plain loads and its direct map was found, each plan
// that walks user stacks is tried first with them, then with probe reads
// (the fallback, as the main program's light objects); kprobes walk none.
TEST(RwsemPlans, PlainLoadsFirstWhereFound) {
  RwsemFeatures f = production_kernel();
  f.bpf_loop = f.task_storage = true;
  f.direct_map_base = 0xffff888000000000ull;
  f.page_table_levels = 4;
  auto plans = rwsem_plans(f, RwsemAttach::Auto, true);
  ASSERT_EQ(plans.size(), 5u);
  EXPECT_EQ(plans[0].mechanism, RwsemAttach::Tracepoint);
  EXPECT_TRUE(plans[0].direct_loads);
  EXPECT_EQ(plans[0].direct_map_base, f.direct_map_base);
  EXPECT_EQ(plans[0].page_table_levels, 4u);
  EXPECT_NE(plans[0].describe().find("plain loads"), std::string::npos);
  EXPECT_EQ(plans[1].mechanism, RwsemAttach::Tracepoint);
  EXPECT_FALSE(plans[1].direct_loads);
  EXPECT_EQ(plans[1].describe().find("plain loads"), std::string::npos);
  EXPECT_TRUE(plans[2].direct_loads);
  EXPECT_EQ(plans[2].mechanism, RwsemAttach::Fentry);
  EXPECT_FALSE(plans[3].direct_loads);
  EXPECT_EQ(plans[4].mechanism, RwsemAttach::Kprobe);
  EXPECT_FALSE(plans[4].direct_loads);
  f.direct_map_base = 0; // not found: probe reads only
  EXPECT_EQ(rwsem_plans(f, RwsemAttach::Auto, true).size(), 3u);
}

TEST(RwsemPlans, OldKernelsUseOldNamesOrDownWrite) {
  RwsemFeatures f;
  f.btf = true;
  f.kprobes = true;
  f.write_slowpath = "rwsem_down_write_failed";
  auto plans = rwsem_plans(f, RwsemAttach::Auto);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].write_target, "rwsem_down_write_failed");
  f.write_slowpath.clear();
  f.down_write = true; // slow path inlined away: probe down_write itself
  plans = rwsem_plans(f, RwsemAttach::Auto);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].write_target, "down_write");
  EXPECT_TRUE(plans[0].entry_point_only);
}

TEST(RwsemPlans, ExplicitChoiceOnlyThatOne) {
  auto only = rwsem_plans(production_kernel(), RwsemAttach::Tracepoint);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].mechanism, RwsemAttach::Tracepoint);
  RwsemFeatures none;
  none.btf = true;
  EXPECT_TRUE(rwsem_plans(none, RwsemAttach::Kprobe).empty());
}

TEST(Features, ProbeOfThisKernelFindsBtf) {
  KernelFeatures f = probe_kernel_features();
  if (!f.btf)
    GTEST_SKIP() << "this kernel has no /sys/kernel/btf/vmlinux";
  // Every kernel with BTF has a sched_switch tracepoint type.
  EXPECT_TRUE(f.tp_btf_sched_switch);
  EXPECT_FALSE(describe_features(f).empty());
}

} // namespace
} // namespace offcpu
