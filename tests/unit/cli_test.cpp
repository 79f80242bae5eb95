#include <gtest/gtest.h>

#include <set>

#include "cli/options.h"
#include "cli/suggest.h"
#include "model/lock_kinds.h"
#include "offcpu/shared.h"
#include "util/error.h"

namespace offcpu {
namespace {

// PIDs 100..199 "exist"; nothing else does.
bool fake_exists(uint32_t id) {
  return id >= 100 && id < 200;
}

CommandLine parse(std::vector<const char *> args) {
  args.insert(args.begin(), "offcpu");
  return parse_command_line(static_cast<int>(args.size()), args.data(),
                            fake_exists);
}

int usage_exit(std::vector<const char *> args, std::string *message = nullptr) {
  try {
    parse(std::move(args));
  } catch (const FatalError &e) {
    if (message)
      *message = e.what();
    return e.exit_code();
  }
  return 0;
}

TEST(Cli, DefaultsTraceEverythingUntilCtrlC) {
  auto cl = parse({});
  EXPECT_EQ(cl.action, Action::Run);
  EXPECT_TRUE(cl.profile.pids.empty());
  EXPECT_FALSE(cl.profile.duration_s.has_value());
  EXPECT_EQ(cl.profile.output.format, OutputFormat::Text);
  EXPECT_TRUE(cl.profile.output.targets.empty());
  EXPECT_EQ(cl.profile.min_block_us, 1u);
  // 0: sized from the machine when the run starts.
  EXPECT_EQ(cl.profile.stack_storage_size, 0u);
  EXPECT_EQ(cl.profile.max_entries, 0u);
  EXPECT_EQ(cl.profile.max_stack_depth, 127u);
  EXPECT_FALSE(cl.profile.state.has_value());
}

TEST(Cli, BccStyleCommandLine) {
  auto cl =
      parse({"-p", "123", "-f", "-d", "-m", "1000", "-M", "5000000", "30"});
  EXPECT_EQ(cl.profile.pids, std::vector<uint32_t>{123});
  EXPECT_EQ(cl.profile.output.format, OutputFormat::Folded);
  EXPECT_TRUE(cl.profile.output.delimited);
  EXPECT_EQ(cl.profile.min_block_us, 1000u);
  EXPECT_EQ(cl.profile.max_block_us, 5000000u);
  ASSERT_TRUE(cl.profile.duration_s.has_value());
  EXPECT_DOUBLE_EQ(*cl.profile.duration_s, 30.0);
}

TEST(Cli, ThreadsKeptApartOnRequest) {
  EXPECT_EQ(parse({"-f"}).profile.output.thread, ThreadFrame::Comm);
  EXPECT_EQ(parse({"--per-pid"}).profile.output.thread, ThreadFrame::Process);
  EXPECT_EQ(parse({"--per-thread"}).profile.output.thread, ThreadFrame::Thread);
  EXPECT_EQ(parse({"rwsem", "x", "--per-thread"}).rwsem.output.thread,
            ThreadFrame::Thread);
  EXPECT_EQ(usage_exit({"--per-pid", "--per-thread"}), kExitUsage);
}

TEST(Cli, PidsCommaSeparatedAndRepeated) {
  auto cl = parse({"-p", "101,102", "-p", "150", "-t", "160,161", "5"});
  EXPECT_EQ(cl.profile.pids, (std::vector<uint32_t>{101, 102, 150}));
  EXPECT_EQ(cl.profile.tids, (std::vector<uint32_t>{160, 161}));
  EXPECT_DOUBLE_EQ(*cl.profile.duration_s, 5.0);
}

TEST(Cli, StateMaskAcceptsHexAndZero) {
  EXPECT_EQ(*parse({"--state", "0x402"}).profile.state, 0x402);
  EXPECT_EQ(*parse({"--state", "2"}).profile.state, 2);
  EXPECT_EQ(*parse({"--state", "0"}).profile.state, 0);
}

TEST(Cli, StackOptions) {
  auto cl = parse(
      {"-U", "--stack-storage-size", "4096", "--perf-max-stack-depth", "64"});
  EXPECT_TRUE(cl.profile.user_stacks_only);
  EXPECT_EQ(cl.profile.stack_storage_size, 4096u);
  EXPECT_EQ(cl.profile.max_stack_depth, 64u);
  EXPECT_TRUE(parse({"-K"}).profile.kernel_stacks_only);
  EXPECT_TRUE(parse({"-v"}).profile.verbose);
  EXPECT_EQ(parse({"--attach", "raw_tp"}).profile.attach, AttachChoice::RawTp);
}

TEST(Cli, FormatsAndOutputFiles) {
  auto cl = parse({"--format", "svg", "--title", "T", "--width", "800", "-o",
                   "a.svg", "5"});
  EXPECT_EQ(cl.profile.output.format, OutputFormat::Svg);
  EXPECT_EQ(cl.profile.output.title, "T");
  EXPECT_EQ(cl.profile.output.width, 800);
  ASSERT_EQ(cl.profile.output.targets.size(), 1u);
  EXPECT_EQ(cl.profile.output.targets[0].path, "a.svg");
  EXPECT_DOUBLE_EQ(*cl.profile.duration_s, 5.0);
  // Several files from one run, each in the format its name says.
  auto many =
      parse({"-o", "x.svg", "-o", "x.pb.gz", "-o", "x.folded", "-o", "x.out"});
  const auto &t = many.profile.output.targets;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].format, OutputFormat::Svg);
  EXPECT_EQ(t[1].format, OutputFormat::Pprof);
  EXPECT_EQ(t[2].format, OutputFormat::Folded);
  EXPECT_EQ(t[3].format, OutputFormat::Text); // unknown extension: --format
  EXPECT_EQ(parse({"--format", "pprof"}).profile.output.format,
            OutputFormat::Pprof);
  EXPECT_EQ(usage_exit({"-f", "--format", "svg"}), kExitUsage);
  EXPECT_EQ(usage_exit({"--format", "png"}), kExitUsage);
  auto rw = parse({"rwsem", "x", "-o", "a.txt", "-o", "b.svg", "-o", "-"});
  ASSERT_EQ(rw.rwsem.output.targets.size(), 3u);
  EXPECT_EQ(rw.rwsem.output.targets[1].format, OutputFormat::Svg);
  EXPECT_EQ(rw.rwsem.output.targets[2].path, "");
}

TEST(Cli, FlamegraphCommand) {
  auto cl = parse(
      {"flamegraph", "in.folded", "--title", "Mine", "--countname", "ms"});
  EXPECT_EQ(cl.command, Command::Flamegraph);
  EXPECT_EQ(*cl.flamegraph.input, "in.folded");
  EXPECT_EQ(cl.flamegraph.output.title, "Mine");
  EXPECT_EQ(cl.flamegraph.count_name, "ms");
  EXPECT_FALSE(parse({"flamegraph"}).flamegraph.input.has_value());
  auto outs = parse({"flamegraph", "-o", "a.pb.gz", "-o", "b.folded", "-o",
                     "c.svg", "-o", "d"});
  const auto &t = outs.flamegraph.output.targets;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].format, OutputFormat::Pprof);
  EXPECT_EQ(t[1].format, OutputFormat::Folded);
  EXPECT_EQ(t[2].format, OutputFormat::Svg);
  EXPECT_EQ(t[3].format, OutputFormat::Svg); // unknown: --format, svg
  EXPECT_EQ(usage_exit({"flamegraph", "-o", "x.txt"}), kExitUsage);
  EXPECT_EQ(usage_exit({"flamegraph", "--format", "text"}), kExitUsage);
  EXPECT_EQ(usage_exit({"flamegraph", "-p", "100"}), kExitUsage);
  EXPECT_FALSE(parse({"flamegraph", "-"}).flamegraph.input.has_value());
}

TEST(Cli, HelpAndVersionAreNotErrors) {
  auto help = parse({"--help"});
  EXPECT_EQ(help.action, Action::PrintedHelp);
  EXPECT_NE(help.help_text.find("--min-block-time"), std::string::npos);
  auto version = parse({"-V"});
  EXPECT_EQ(version.action, Action::PrintedHelp);
  EXPECT_NE(version.help_text.find("offcpu "), std::string::npos);
}

TEST(Cli, BadInputIsAUsageError) {
  const std::vector<std::vector<const char *>> bad = {
      {"--no-such-option"},
      {"-p", "999"}, // no such process
      {"-t", "5"},   // no such thread
      {"-p", "0"},   // the idle task
      {"-p", "abc"},
      {"0"}, // zero duration
      {"-1"},
      {"abc"},
      {"1e999"},
      {"-u", "-k"},
      {"-U", "-K"},
      {"-m", "10", "-M", "5"},
      {"--state", "x"},
      {"--state", "-3"},
      {"--perf-max-stack-depth", "500"},
      {"--stack-storage-size", "0"},
      {"5", "6"},
  };
  for (const auto &args : bad) {
    std::string msg;
    EXPECT_EQ(usage_exit(args, &msg), kExitUsage) << args[0];
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line: " << msg;
    EXPECT_FALSE(msg.empty());
  }
}

TEST(Cli, RwsemByNameWithIntervalAndDuration) {
  auto cl = parse({"rwsem", "mysqld", "-i", "2", "--read", "-f", "30"});
  EXPECT_EQ(cl.command, Command::Rwsem);
  EXPECT_EQ(cl.rwsem.name, "mysqld");
  EXPECT_DOUBLE_EQ(cl.rwsem.interval_s, 2.0);
  EXPECT_TRUE(cl.rwsem.include_read);
  EXPECT_EQ(cl.rwsem.output.format, OutputFormat::Folded);
  EXPECT_DOUBLE_EQ(*cl.rwsem.duration_s, 30.0);
  EXPECT_EQ(cl.rwsem.attach, RwsemAttach::Auto);
}

TEST(Cli, RwsemByPidTakesTheLonePositionalAsDuration) {
  auto cl = parse({"rwsem", "-p", "150", "10"});
  EXPECT_TRUE(cl.rwsem.name.empty());
  EXPECT_EQ(cl.rwsem.pids, std::vector<uint32_t>{150});
  EXPECT_DOUBLE_EQ(*cl.rwsem.duration_s, 10.0);
  EXPECT_EQ(parse({"rwsem", "--attach", "kprobe", "x"}).rwsem.attach,
            RwsemAttach::Kprobe);
  EXPECT_TRUE(
      parse({"rwsem", "--thread-name", "worker"}).rwsem.match_thread_name);
}

TEST(Cli, RwsemBadInput) {
  std::string msg;
  EXPECT_EQ(usage_exit({"rwsem"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("NAME or -p"), std::string::npos) << msg;
  EXPECT_EQ(usage_exit({"rwsem", "-p", "999"}), kExitUsage); // no such process
  EXPECT_EQ(usage_exit({"rwsem", "a_name_longer_than_15"}), kExitUsage);
  EXPECT_EQ(usage_exit({"rwsem", "x", "0"}), kExitUsage);
  EXPECT_EQ(usage_exit({"rwsem", "x", "-i", "-1"}), kExitUsage);
  EXPECT_EQ(usage_exit({"rwsem", "x", "--attach", "uprobe"}), kExitUsage);
}

TEST(Cli, LockKindsSleepingByDefaultSpinOnRequest) {
  auto cl = parse({"lock", "-n", "mysqld", "-f", "10"});
  EXPECT_EQ(cl.command, Command::Lock);
  EXPECT_TRUE(cl.lock.lock_command);
  EXPECT_EQ(cl.lock.name, "mysqld");
  EXPECT_EQ(cl.lock.lock_kinds, uint32_t{OFFCPU_LOCK_SLEEPING});
  EXPECT_DOUBLE_EQ(cl.lock.interval_s, 0.0); // once at the end
  EXPECT_DOUBLE_EQ(*cl.lock.duration_s, 10.0);
  EXPECT_EQ(parse({"lock", "--spin"}).lock.lock_kinds,
            uint32_t{OFFCPU_LOCK_SLEEPING | OFFCPU_LOCK_SPINNING});
  // A family is both sides; --spin with -Y mutex adds the mutex's spinning.
  EXPECT_EQ(parse({"lock", "-Y", "rwsem,mutex"}).lock.lock_kinds,
            (1u << OFFCPU_LOCK_RWSEM_READ) | (1u << OFFCPU_LOCK_RWSEM_WRITE) |
                (1u << OFFCPU_LOCK_MUTEX));
  EXPECT_EQ(parse({"lock", "-Y", "mutex", "--spin"}).lock.lock_kinds,
            (1u << OFFCPU_LOCK_MUTEX) | (1u << OFFCPU_LOCK_MUTEX_SPIN));
  EXPECT_EQ(parse({"lock", "-Y", "rwsem:write"}).lock.lock_kinds,
            1u << OFFCPU_LOCK_RWSEM_WRITE);
  // One kind list per -Y: a duration after it is the duration; -Y again
  // adds to the list.
  auto d = parse({"lock", "-Y", "mutex", "5"});
  EXPECT_EQ(d.lock.lock_kinds, 1u << OFFCPU_LOCK_MUTEX);
  EXPECT_DOUBLE_EQ(*d.lock.duration_s, 5.0);
  EXPECT_EQ(parse({"lock", "-Y", "mutex", "-Y", "semaphore"}).lock.lock_kinds,
            (1u << OFFCPU_LOCK_MUTEX) | (1u << OFFCPU_LOCK_SEMAPHORE));
  // --futex adds the user-space kinds; -Y futex:pi is the PI ones alone.
  EXPECT_EQ(parse({"lock", "--futex"}).lock.lock_kinds,
            uint32_t{OFFCPU_LOCK_SLEEPING | OFFCPU_LOCK_FUTEXES});
  EXPECT_EQ(parse({"lock", "-Y", "futex:pi"}).lock.lock_kinds,
            1u << OFFCPU_LOCK_FUTEX_PI);
  EXPECT_EQ(parse({"lock", "-Y", "futex", "--futex"}).lock.lock_kinds,
            uint32_t{OFFCPU_LOCK_FUTEXES});
  auto f = parse({"lock", "-t", "150", "-m", "10", "-M", "20", "-k"});
  EXPECT_EQ(f.lock.tids, std::vector<uint32_t>{150});
  EXPECT_EQ(f.lock.min_wait_us, 10u);
  EXPECT_EQ(f.lock.max_wait_us, 20u);
  EXPECT_TRUE(f.lock.kernel_threads_only);
}

TEST(Cli, LockBadInput) {
  std::string msg;
  EXPECT_EQ(usage_exit({"lock", "-Y", "mutexes"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("unknown lock kind 'mutexes'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(usage_exit({"lock", "-m", "20", "-M", "10"}), kExitUsage);
  EXPECT_EQ(usage_exit({"lock", "-u", "-k"}), kExitUsage);
  EXPECT_EQ(usage_exit({"lock", "-p", "999"}), kExitUsage);
  EXPECT_EQ(usage_exit({"lock", "0"}), kExitUsage);
}

// futex(2)'s waiting commands, with FUTEX_PRIVATE_FLAG (128) and
// FUTEX_CLOCK_REALTIME (256) or not; wakes and requeues are no waits.
TEST(Cli, FutexOpsToKinds) {
  for (uint64_t flags : {0u, 128u, 256u, 384u}) {
    EXPECT_EQ(offcpu_futex_kind_of(0 | flags), OFFCPU_LOCK_FUTEX); // WAIT
    EXPECT_EQ(offcpu_futex_kind_of(9 | flags), OFFCPU_LOCK_FUTEX); // BITSET
    EXPECT_EQ(offcpu_futex_kind_of(6 | flags), OFFCPU_LOCK_FUTEX_PI);
    EXPECT_EQ(offcpu_futex_kind_of(13 | flags), OFFCPU_LOCK_FUTEX_PI);
    EXPECT_EQ(offcpu_futex_kind_of(11 | flags), OFFCPU_LOCK_FUTEX_PI);
    for (uint64_t cmd : {1u, 3u, 4u, 5u, 7u, 8u, 10u, 12u})
      EXPECT_EQ(offcpu_futex_kind_of(cmd | flags), uint32_t{OFFCPU_LOCK_KINDS});
  }
  EXPECT_EQ(lock_kind_name(OFFCPU_LOCK_FUTEX_PI), "futex:pi");
}

// offcpu lock's targets are the main command's: -- COMMAND (with its
// children), --children after -p, and the same refusals; --by cgroup puts
// the cgroup in the key; --holders is --wakers.
TEST(Cli, LockTargetsAsTheMainCommand) {
  auto c = parse({"lock", "-Y", "rwsem", "--", "make", "-j2"});
  EXPECT_EQ(c.command, Command::Lock);
  EXPECT_EQ(c.lock.command, (std::vector<std::string>{"make", "-j2"}));
  EXPECT_TRUE(c.lock.follow_children);
  EXPECT_TRUE(parse({"lock", "-p", "150", "--children"}).lock.follow_children);
  EXPECT_EQ(usage_exit({"lock", "--children"}), kExitUsage);
  EXPECT_EQ(usage_exit({"lock", "-p", "150", "--", "true"}), kExitUsage);
  EXPECT_EQ(usage_exit({"lock", "--user", "nobody"}), kExitUsage);
  EXPECT_EQ(usage_exit({"rwsem", "x", "--", "true"}), kExitUsage);
  auto g = parse({"lock", "--by", "cgroup"});
  EXPECT_EQ(g.lock.by, LockGrouping::Cgroup);
  EXPECT_TRUE(g.lock.key_cgroup);
  EXPECT_FALSE(parse({"lock"}).lock.key_cgroup);
  EXPECT_TRUE(parse({"lock", "--holders"}).lock.wakers);
}

// The kinds' names, both ways (reports and -Y).
TEST(Cli, LockKindNamesRoundTrip) {
  for (uint32_t k = 0; k < OFFCPU_LOCK_KINDS; k++)
    EXPECT_EQ(lock_kinds_named(lock_kind_name(k)), 1u << k) << k;
  EXPECT_EQ(lock_kind_name(offcpu_lock_kind_of(OFFCPU_LCB_F_MUTEX)), "mutex");
  EXPECT_EQ(lock_kind_name(
                offcpu_lock_kind_of(OFFCPU_LCB_F_MUTEX | OFFCPU_LCB_F_SPIN)),
            "mutex:spin");
  EXPECT_EQ(lock_kind_name(offcpu_lock_kind_of(OFFCPU_LCB_F_WRITE)),
            "rwsem:write");
  EXPECT_EQ(lock_kind_name(
                offcpu_lock_kind_of(OFFCPU_LCB_F_PERCPU | OFFCPU_LCB_F_READ)),
            "percpu-rwsem:read");
  EXPECT_EQ(lock_kind_name(
                offcpu_lock_kind_of(OFFCPU_LCB_F_SPIN | OFFCPU_LCB_F_WRITE)),
            "rwlock:write");
  EXPECT_EQ(lock_kind_name(offcpu_lock_kind_of(0)), "semaphore");
  EXPECT_EQ(lock_kind_name(offcpu_lock_kind_of(OFFCPU_LCB_F_RT)), "rtmutex");
}

// An empty filter value would silently trace everything: each is refused
// with one line that names what was empty.
TEST(Cli, EmptyFilterValuesAreUsageErrors) {
  const std::vector<std::vector<const char *>> bad = {
      {"-n", ""},
      {"--name", ""},
      {"--state", ""},
      {"--state", "D,,S"},
      {"--state", "D,"},
      {"--cgroup", ""},
      {"--cgroup", "/sys/fs/cgroup/a", "--cgroup", ""},
      {"-p", ""},
      {"-p", "1,,2"},
      {"-p", "1,"},
      {"-p", ",1"},
      {"-t", ""},
      {"-t", "1,,1"},
      {"--debug-dir", ""},
      {"--user", "", "--", "true"},
      {"rwsem", ""},
      {"rwsem", "-p", ""},
      {"rwsem", "x", "-p", "1,,1"},
  };
  for (const auto &args : bad) {
    std::string msg;
    EXPECT_EQ(usage_exit(args, &msg), kExitUsage) << args[0] << " " << args[1];
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line: " << msg;
    EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  }
  std::string msg;
  usage_exit({"-p", "1,,2"}, &msg);
  EXPECT_NE(msg.find("empty PID in '1,,2'"), std::string::npos) << msg;
  usage_exit({"-n", ""}, &msg);
  EXPECT_NE(msg.find("--name"), std::string::npos) << msg;
  usage_exit({"--cgroup", ""}, &msg);
  EXPECT_NE(msg.find("--cgroup"), std::string::npos) << msg;
}

TEST(Cli, MissingPidMessageNamesIt) {
  std::string msg;
  usage_exit({"-p", "4242"}, &msg);
  EXPECT_NE(msg.find("PID 4242 does not exist"), std::string::npos) << msg;
}

TEST(Cli, DurationMessageIsClear) {
  std::string msg;
  usage_exit({"0"}, &msg);
  EXPECT_NE(msg.find("duration must be a positive number of seconds"),
            std::string::npos)
      << msg;
}

TEST(Cli, MistypedLongOptionGetsTheOneMeant) {
  std::string msg;
  EXPECT_EQ(usage_exit({"--wakerz", "1"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("unknown option --wakerz: did you mean --wakers?"),
            std::string::npos)
      << msg;
  usage_exit({"--perpid"}, &msg);
  EXPECT_NE(msg.find("did you mean --per-pid?"), std::string::npos) << msg;
  usage_exit({"rwsem", "x", "--raed"}, &msg);
  EXPECT_NE(msg.find("did you mean --read?"), std::string::npos) << msg;
  // Nothing close: CLI11's own message.
  usage_exit({"--completely-unknown"}, &msg);
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--completely-unknown"), std::string::npos) << msg;
}

// "-pid 1234" was -p with the value "id".
TEST(Cli, LongOptionWithOneDashIsNamed) {
  std::string msg;
  EXPECT_EQ(usage_exit({"-pid", "150"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("-pid: long options take two dashes: did you mean --pid?"),
            std::string::npos)
      << msg;
  EXPECT_EQ(usage_exit({"-wakers"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("--wakers?"), std::string::npos) << msg;
  // Short options together and negative numbers are not long options.
  EXPECT_EQ(parse({"-fd", "1"}).profile.output.format, OutputFormat::Folded);
  EXPECT_EQ(usage_exit({"-m", "-5"}, &msg), kExitUsage);
  EXPECT_EQ(msg.find("two dashes"), std::string::npos) << msg;
}

TEST(Cli, PathGivenAsProcessNameAsksForTheComm) {
  std::string msg;
  EXPECT_EQ(usage_exit({"-n", "/usr/bin/redis-server"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("-n takes the process name (comm), not a path: use -n "
                     "redis-server"),
            std::string::npos)
      << msg;
  EXPECT_EQ(usage_exit({"rwsem", "/usr/sbin/mysqld"}, &msg), kExitUsage);
  EXPECT_NE(msg.find("use rwsem mysqld"), std::string::npos) << msg;
  EXPECT_EQ(parse({"-n", "redis-server"}).profile.name, "redis-server");
}

TEST(Suggest, EditDistanceAndClosestName) {
  EXPECT_EQ(edit_distance("wakers", "wakerz"), 1u);
  EXPECT_EQ(edit_distance("wakers", "wakres"), 1u); // a swap
  EXPECT_EQ(edit_distance("", "pid"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  const std::vector<std::string> known = {"pid", "tid", "wakers", "per-pid",
                                          "show-state"};
  EXPECT_EQ(closest_name("wakerz", known), "wakers");
  EXPECT_EQ(closest_name("showstate", known), "show-state");
  EXPECT_EQ(closest_name("pdi", known), "pid");
  EXPECT_EQ(closest_name("x", known), "");
  EXPECT_EQ(closest_name("bogus", known), "");
}

} // namespace
} // namespace offcpu
