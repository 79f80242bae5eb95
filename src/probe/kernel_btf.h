// The facts the feature probe needs from the kernel's BTF, read in one pass
// over its types. libbpf 1.1 takes ~7 ms to parse the 5.5 MB of vmlinux BTF
// (and copies it) before answering the first question; offcpu asks about a
// dozen names once, at start-up, where every millisecond is before the
// first event. Read-only and bounded: a malformed section ends the pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace offcpu {

class KernelBtf {
public:
  struct Member {
    std::string_view name;
    uint32_t bit_offset;
    uint32_t bitfield_size; // 0: not a bitfield
  };

  // Over `size` bytes at `data`, which must outlive the result; nullptr if
  // they are not BTF.
  static std::unique_ptr<KernelBtf> parse(const uint8_t *data, size_t size);
  // /sys/kernel/btf/vmlinux, mapped where the kernel allows (6.16+), else
  // read; nullptr without one.
  static std::unique_ptr<KernelBtf> load_vmlinux();
  ~KernelBtf();
  KernelBtf(const KernelBtf &) = delete;
  KernelBtf &operator=(const KernelBtf &) = delete;

  // Id of the first type of this kind (BTF_KIND_*) and name; -1: none.
  int find(std::string_view name, unsigned kind) const;
  // Struct or union members; empty for other kinds.
  std::vector<Member> members(int id) const;
  // Byte size of a struct, union, enum or int; 0 for other kinds.
  uint32_t size_of(int id) const;
  bool enum_has(std::string_view enum_name, std::string_view value) const;
  // Parameters of the function prototype a typedef of a pointer to one
  // names (BTF-enabled tracepoints: btf_trace_<name>); -1: no such typedef.
  int typedef_proto_params(std::string_view typedef_name) const;

private:
  KernelBtf() = default;
  struct Type {
    uint32_t name_off, info, size_or_type;
  };
  const uint8_t *type(int id) const; // its bytes; nullptr: no such id
  bool header(int id, Type *out) const;
  std::string_view name(uint32_t off) const;
  // Fills offsets_; false on a malformed type section.
  bool index();

  const uint8_t *types_ = nullptr;
  size_t types_len_ = 0;
  const char *strings_ = nullptr;
  size_t strings_len_ = 0;
  std::vector<uint32_t> offsets_; // of type id i + 1 in types_
  // What keeps the bytes alive, for load_vmlinux.
  void *mapping_ = nullptr;
  size_t mapping_len_ = 0;
  std::vector<uint8_t> copy_;
};

} // namespace offcpu
