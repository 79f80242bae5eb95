#include <gtest/gtest.h>

#include "probe/features.h"

namespace offcpu {
namespace {

KernelFeatures modern() {
  KernelFeatures f;
  f.btf = f.tp_btf_sched_switch = f.sched_switch_prev_state = true;
  f.task_storage = f.get_task_stack = f.task_iter = f.user_walk_other_task = true;
  f.user_walk_current = true;
  return f;
}

TEST(Plans, ModernKernelPrefersTpBtfThenRawTp) {
  auto plans = offcpu_plans(modern(), AttachChoice::Auto);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_TRUE(plans[0].tp_btf);
  EXPECT_TRUE(plans[0].task_storage);
  EXPECT_TRUE(plans[0].prev_state_arg);
  EXPECT_FALSE(plans[0].kstack_at_switch_in); // truthful stacks by default
  EXPECT_TRUE(plans[0].seed_open_waits);
  EXPECT_TRUE(plans[0].flush_open_waits);
  EXPECT_FALSE(plans[1].tp_btf);
  EXPECT_FALSE(plans[1].task_storage); // raw_tp pointers cannot key task storage
  EXPECT_TRUE(plans[0].user_fp_walk);
  EXPECT_FALSE(plans[1].user_fp_walk);
}

TEST(Plans, SwitchInKernelStacksOnlyOnRequestAndWithHelper) {
  EXPECT_TRUE(offcpu_plans(modern(), AttachChoice::Auto, true)[0].kstack_at_switch_in);
  KernelFeatures f = modern();
  f.get_task_stack = false;
  EXPECT_FALSE(offcpu_plans(f, AttachChoice::Auto, true)[0].kstack_at_switch_in);
}

TEST(Plans, Pre518KernelReadsStateFromTask) {
  KernelFeatures f = modern();
  f.sched_switch_prev_state = false;
  f.user_walk_other_task = false;
  auto plans = offcpu_plans(f, AttachChoice::Auto);
  EXPECT_FALSE(plans[0].prev_state_arg);
  EXPECT_FALSE(plans[0].seed_open_waits);
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
