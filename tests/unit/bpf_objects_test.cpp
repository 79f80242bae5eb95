// The BPF objects as built, read from their BTF. The light skeleton is
// generated from its own build of each BPF source (without the fallback
// programs it never loads), while the loader fills its .rodata and reads
// its .bss through the regular skeleton's types: both builds must lay out
// every global alike. And its loader has a limit on functions.
#include <algorithm>
#include <gtest/gtest.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

namespace {

struct BtfDeleter {
  void operator()(btf *b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<btf, BtfDeleter>;

struct Var {
  std::string name;
  unsigned offset, size;
  bool operator==(const Var &o) const {
    return name == o.name && offset == o.offset && size == o.size;
  }
};

// The variables of data section `sec`, in order, with their offsets.
std::vector<Var> section_vars(const btf *b, const char *sec) {
  std::vector<Var> out;
  int id = btf__find_by_name_kind(b, sec, BTF_KIND_DATASEC);
  if (id < 0)
    return out;
  const btf_type *t = btf__type_by_id(b, id);
  const btf_var_secinfo *v = btf_var_secinfos(t);
  for (unsigned i = 0; i < btf_vlen(t); i++) {
    const btf_type *var = btf__type_by_id(b, v[i].type);
    out.push_back(
        {btf__name_by_offset(b, var->name_off), v[i].offset, v[i].size});
  }
  return out;
}

class BpfObjects : public ::testing::TestWithParam<const char *> {};

// The light objects of `name` that exist (offcpu has a second one, with
// plain loads of kernel memory, and a third, the same with programs that
// return at once, for the split load's maps).
std::vector<std::string> light_objects(const std::string &dir,
                                       const std::string &name) {
  std::vector<std::string> out = {dir + name + ".light.bpf.o"};
  // The object with plain loads is light where its light skeleton is built
  // (offcpu); rwsem's is libbpf's (see objects_like_the_regular_one).
  const std::string direct = dir + name + ".direct.bpf.o";
  if (access((dir + name + ".dlskel.h").c_str(), F_OK) == 0)
    out.push_back(direct);
  if (access((dir + name + ".mlskel.h").c_str(), F_OK) == 0)
    out.push_back(dir + name + ".maps.bpf.o");
  return out;
}

// The objects whose globals the regular object's skeleton addresses: the
// light ones, and an object with plain loads libbpf opens through the
// regular skeleton (offcpu lock's, src/collect/rwsem_session.cpp).
std::vector<std::string> objects_like_the_regular_one(const std::string &dir,
                                                      const std::string &name) {
  std::vector<std::string> out = light_objects(dir, name);
  const std::string direct = dir + name + ".direct.bpf.o";
  if (access(direct.c_str(), F_OK) == 0 &&
      std::find(out.begin(), out.end(), direct) == out.end())
    out.push_back(direct);
  return out;
}

TEST_P(BpfObjects, LightObjectLaysOutGlobalsLikeTheRegularOne) {
  const std::string dir = std::string(OFFCPU_BUILD_DIR) + "/skel/";
  const std::string name = GetParam();
  BtfPtr regular(btf__parse((dir + name + ".bpf.o").c_str(), nullptr));
  ASSERT_TRUE(regular) << "objects of " << name << " in " << dir;
  for (const std::string &path : objects_like_the_regular_one(dir, name)) {
    BtfPtr light(btf__parse(path.c_str(), nullptr));
    ASSERT_TRUE(light) << path;
    for (const char *sec : {".rodata", ".bss", ".data"}) {
      std::vector<Var> r = section_vars(regular.get(), sec);
      std::vector<Var> l = section_vars(light.get(), sec);
      ASSERT_EQ(r.size(), l.size()) << path << " " << sec;
      for (size_t i = 0; i < r.size(); i++)
        EXPECT_TRUE(r[i] == l[i])
            << path << " " << sec << ": " << r[i].name << "@" << r[i].offset
            << " vs " << l[i].name << "@" << l[i].offset;
    }
    // The light object has globals to check at all.
    EXPECT_FALSE(section_vars(light.get(), ".bss").empty() &&
                 section_vars(light.get(), ".rodata").empty());
  }
}

// The maps of a BPF object, in its order, as one line each: what the split
// load matches by position (collect/split_loader.cpp). Internal maps are
// named after their object ("offcpu_d.rodata"): their section only.
std::vector<std::string> object_maps(const std::string &path) {
  std::vector<std::string> out;
  bpf_object *obj = bpf_object__open_file(path.c_str(), nullptr);
  if (!obj)
    return out;
  bpf_map *m = nullptr;
  bpf_object__for_each_map(m, obj) {
    std::string name = bpf_map__name(m);
    if (bpf_map__is_internal(m))
      name = name.substr(name.find('.'));
    out.push_back(name + " type " + std::to_string(bpf_map__type(m)) + " key " +
                  std::to_string(bpf_map__key_size(m)) + " value " +
                  std::to_string(bpf_map__value_size(m)) + " entries " +
                  std::to_string(bpf_map__max_entries(m)) + " flags " +
                  std::to_string(bpf_map__map_flags(m)));
  }
  bpf_object__close(obj);
  return out;
}

// The split load creates the maps with the object whose programs return
// at once, then loads the real programs against them, map by map.
TEST(BpfObjects, MapsOnlyObjectHasTheDirectObjectsMapsInItsOrder) {
  const std::string dir = std::string(OFFCPU_BUILD_DIR) + "/skel/";
  if (access((dir + "offcpu.mlskel.h").c_str(), F_OK) != 0)
    GTEST_SKIP() << "no maps-only object in this build";
  std::vector<std::string> direct = object_maps(dir + "offcpu.direct.bpf.o");
  std::vector<std::string> maps = object_maps(dir + "offcpu.maps.bpf.o");
  EXPECT_GT(direct.size(), 20u);
  EXPECT_EQ(direct, maps);
}

// libbpf 1.1's light-skeleton loader keeps the descriptors of at most 32
// programs, counting every BPF function (global functions and bpf_loop
// callbacks too); past that its cleanup code reads outside its stack and
// the kernel refuses the loader (seen: EACCES at start-up).
TEST_P(BpfObjects, LightObjectHasAtMost32Functions) {
  const std::string dir = std::string(OFFCPU_BUILD_DIR) + "/skel/";
  for (const std::string &path : light_objects(dir, GetParam())) {
    BtfPtr light(btf__parse(path.c_str(), nullptr));
    ASSERT_TRUE(light) << path;
    unsigned funcs = 0;
    for (unsigned id = 1; id < btf__type_cnt(light.get()); id++) {
      const btf_type *t = btf__type_by_id(light.get(), id);
      // Kernel functions the object calls (kfuncs) are declared, not loaded.
      funcs +=
          btf_is_func(t) && btf_vlen(t) != BTF_FUNC_EXTERN; // vlen: linkage
    }
    EXPECT_GT(funcs, 0u);
    EXPECT_LE(funcs, 32u) << path;
  }
}

INSTANTIATE_TEST_SUITE_P(All, BpfObjects,
                         ::testing::Values("offcpu", "rwsem", "ksyms"));

} // namespace
