#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "probe/kernel_btf.h"
#include "probe/kernel_text.h"
#include "support/btf_bytes.h"

namespace offcpu {
namespace {

struct Field {
  const char *name;
  unsigned bit_offset, bits; // bits 0: not a bitfield
};

// A BTF holding only struct orc_entry with these members, written by
// libbpf and read back by offcpu's reader.
test::ParsedBtf orc_btf(std::initializer_list<Field> fields,
                        unsigned size = 6) {
  test::BtfPtr b(btf__new_empty());
  int s16 = btf__add_int(b.get(), "short", 2, BTF_INT_SIGNED);
  int u32 = btf__add_int(b.get(), "unsigned int", 4, 0);
  btf__add_struct(b.get(), "orc_entry", size);
  for (const Field &f : fields)
    btf__add_field(b.get(), f.name, f.bits ? u32 : s16, f.bit_offset, f.bits);
  return test::ParsedBtf(b.get());
}

TEST(OrcLayout, Since64TypeHasThreeBitsAndASignalBit) {
  auto b = orc_btf({{"sp_offset", 0, 0},
                    {"bp_offset", 16, 0},
                    {"sp_reg", 32, 4},
                    {"bp_reg", 36, 4},
                    {"type", 40, 3},
                    {"signal", 43, 1}});
  offcpu_kernel_text t{};
  std::string why;
  ASSERT_TRUE(orc_layout_from_btf(b.get(), t, &why)) << why;
  EXPECT_EQ(t.type_shift, 8);
  EXPECT_EQ(t.type_bits, 3);
  EXPECT_EQ(t.signal_shift, 11);
  EXPECT_EQ(t.end_shift, 0xff);
  EXPECT_FALSE(t.old_types);
}

TEST(OrcLayout, OlderKernelsHaveAnEndBitAndOldTypeNumbers) {
  auto b = orc_btf({{"sp_offset", 0, 0},
                    {"bp_offset", 16, 0},
                    {"sp_reg", 32, 4},
                    {"bp_reg", 36, 4},
                    {"type", 40, 2},
                    {"end", 42, 1}});
  offcpu_kernel_text t{};
  std::string why;
  ASSERT_TRUE(orc_layout_from_btf(b.get(), t, &why)) << why;
  EXPECT_EQ(t.type_bits, 2);
  EXPECT_EQ(t.end_shift, 10);
  EXPECT_EQ(t.signal_shift, 0xff);
  EXPECT_TRUE(t.old_types);
}

TEST(OrcLayout, UnknownLayoutsAndMissingStructAreRefused) {
  offcpu_kernel_text t{};
  std::string why;
  auto wider = orc_btf({{"sp_offset", 0, 0},
                        {"bp_offset", 16, 0},
                        {"sp_reg", 32, 4},
                        {"bp_reg", 36, 4},
                        {"type", 40, 3}},
                       8);
  EXPECT_FALSE(orc_layout_from_btf(wider.get(), t, &why));
  EXPECT_NE(why.find("layout"), std::string::npos);
  test::BtfPtr none(btf__new_empty());
  test::ParsedBtf empty(none.get());
  ASSERT_NE(empty.get(), nullptr);
  EXPECT_FALSE(orc_layout_from_btf(empty.get(), t, &why));
  EXPECT_NE(why.find("orc_entry"), std::string::npos);
  EXPECT_FALSE(orc_layout_from_btf(nullptr, t, &why));
}

// The real kernel: addresses resolved by the BPF lookup program must be the
// ones /proc/kallsyms shows.
TEST(KernelText, ResolvedAddressesMatchKallsyms) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to load the lookup program";
  auto b = KernelBtf::load_vmlinux();
  std::string why;
  auto text = probe_kernel_text(b.get(), &why);
  if (!text)
    GTEST_SKIP() << "no ORC walker on this kernel: " << why;
  std::ifstream in("/proc/kallsyms");
  ASSERT_TRUE(in);
  std::map<std::string, uint64_t> want = {
      {"_stext", text->text_start},
      {"__sched_text_start", text->sched_start},
      {"__start_orc_unwind_ip", text->orc_ip_start},
      {"__start_orc_unwind", text->orc_start}};
  int checked = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string addr, type, name;
    fields >> addr >> type >> name;
    auto it = want.find(name);
    if (it != want.end()) {
      EXPECT_EQ(it->second, std::stoull(addr, nullptr, 16)) << name;
      checked++;
    }
  }
  EXPECT_EQ(checked, 4);
}

} // namespace
} // namespace offcpu
