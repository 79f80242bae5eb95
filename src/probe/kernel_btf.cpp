#include "probe/kernel_btf.h"

#include <fcntl.h>
#include <linux/btf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/fd.h"

namespace offcpu {
namespace {

constexpr uint16_t kBtfMagic = 0xeB9F;
// The kernel's BTF is ~5.5 MB; refuse to read what cannot be it.
constexpr size_t kMaxBtfBytes = 256u << 20;

struct Header {
  uint16_t magic;
  uint8_t version, flags;
  uint32_t hdr_len, type_off, type_len, str_off, str_len;
};

unsigned kind_of(uint32_t info) {
  return (info >> 24) & 0x1f;
}
unsigned vlen_of(uint32_t info) {
  return info & 0xffff;
}
bool kind_flag_of(uint32_t info) {
  return info >> 31;
}

// Bytes that follow a type's 12-byte header; -1 for a kind this reader does
// not know (a newer kernel's): its size cannot be known, the pass ends.
long extra_bytes(uint32_t info) {
  const long vlen = vlen_of(info);
  switch (kind_of(info)) {
  case BTF_KIND_INT:
    return 4;
  case BTF_KIND_PTR:
  case BTF_KIND_FWD:
  case BTF_KIND_TYPEDEF:
  case BTF_KIND_VOLATILE:
  case BTF_KIND_CONST:
  case BTF_KIND_RESTRICT:
  case BTF_KIND_FUNC:
  case BTF_KIND_FLOAT:
  case BTF_KIND_TYPE_TAG:
    return 0;
  case BTF_KIND_ARRAY:
    return 12;
  case BTF_KIND_STRUCT:
  case BTF_KIND_UNION:
    return vlen * 12;
  case BTF_KIND_ENUM:
  case BTF_KIND_FUNC_PROTO:
    return vlen * 8;
  case BTF_KIND_VAR:
  case BTF_KIND_DECL_TAG:
    return 4;
  case BTF_KIND_DATASEC:
    return vlen * 12;
  case 19: // BTF_KIND_ENUM64 (6.0+; not in every uapi header)
    return vlen * 12;
  default:
    return -1;
  }
}

uint32_t load32(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

} // namespace

KernelBtf::~KernelBtf() {
  if (mapping_)
    munmap(mapping_, mapping_len_);
}

std::unique_ptr<KernelBtf> KernelBtf::parse(const uint8_t *data, size_t size) {
  Header h;
  if (!data || size < sizeof(h))
    return nullptr;
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kBtfMagic || h.hdr_len < sizeof(h) || h.hdr_len > size)
    return nullptr;
  const size_t body = size - h.hdr_len;
  if (uint64_t{h.type_off} + h.type_len > body ||
      uint64_t{h.str_off} + h.str_len > body || h.str_len == 0)
    return nullptr;
  std::unique_ptr<KernelBtf> b(new KernelBtf);
  b->types_ = data + h.hdr_len + h.type_off;
  b->types_len_ = h.type_len;
  b->strings_ = reinterpret_cast<const char *>(data + h.hdr_len + h.str_off);
  b->strings_len_ = h.str_len;
  if (b->strings_[b->strings_len_ - 1] != '\0' || !b->index())
    return nullptr;
  return b;
}

bool KernelBtf::index() {
  offsets_.reserve(types_len_ / 16);
  size_t off = 0;
  while (off < types_len_) {
    if (types_len_ - off < sizeof(Type))
      return false;
    const long extra = extra_bytes(load32(types_ + off + 4));
    if (extra < 0) {
      // An unknown kind: the types before it stay usable, none after it.
      return !offsets_.empty();
    }
    if (types_len_ - off - sizeof(Type) < static_cast<size_t>(extra))
      return false;
    offsets_.push_back(static_cast<uint32_t>(off));
    off += sizeof(Type) + static_cast<size_t>(extra);
  }
  return true;
}

std::unique_ptr<KernelBtf> KernelBtf::load_vmlinux() {
  UniqueFd fd(open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size <= 0 || static_cast<uint64_t>(st.st_size) > kMaxBtfBytes)
    return nullptr;
  const size_t size = static_cast<size_t>(st.st_size);
  void *p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p != MAP_FAILED) {
    auto b = parse(static_cast<const uint8_t *>(p), size);
    if (!b) {
      munmap(p, size);
      return nullptr;
    }
    b->mapping_ = p;
    b->mapping_len_ = size;
    return b;
  }
  // Kernels before 6.16 cannot map it: read it.
  std::vector<uint8_t> bytes(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(fd.get(), bytes.data() + got, size - got,
                      static_cast<off_t>(got));
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  auto b = parse(bytes.data(), got);
  if (b)
    b->copy_ = std::move(bytes); // the buffer moves, its bytes stay put
  return b;
}

const uint8_t *KernelBtf::type(int id) const {
  if (id < 1 || static_cast<size_t>(id) > offsets_.size())
    return nullptr;
  return types_ + offsets_[id - 1];
}

bool KernelBtf::header(int id, Type *out) const {
  const uint8_t *t = type(id);
  if (!t)
    return false;
  std::memcpy(out, t, sizeof(*out));
  return true;
}

std::string_view KernelBtf::name(uint32_t off) const {
  if (off >= strings_len_)
    return {};
  return std::string_view(strings_ + off); // the section ends with a NUL
}

int KernelBtf::find(std::string_view wanted, unsigned kind) const {
  for (size_t i = 0; i < offsets_.size(); i++) {
    Type t;
    std::memcpy(&t, types_ + offsets_[i], sizeof(t));
    if (kind_of(t.info) == kind && name(t.name_off) == wanted)
      return static_cast<int>(i + 1);
  }
  return -1;
}

std::vector<KernelBtf::Member> KernelBtf::members(int id) const {
  std::vector<Member> out;
  Type h;
  if (!header(id, &h) ||
      (kind_of(h.info) != BTF_KIND_STRUCT && kind_of(h.info) != BTF_KIND_UNION))
    return out;
  const uint8_t *m = type(id) + sizeof(Type);
  for (unsigned i = 0; i < vlen_of(h.info); i++, m += 12) {
    const uint32_t offset = load32(m + 8);
    Member member{name(load32(m)), offset, 0};
    if (kind_flag_of(h.info)) {
      member.bit_offset = offset & 0xffffff;
      member.bitfield_size = offset >> 24;
    }
    out.push_back(member);
  }
  return out;
}

uint32_t KernelBtf::size_of(int id) const {
  Type h;
  if (!header(id, &h))
    return 0;
  switch (kind_of(h.info)) {
  case BTF_KIND_STRUCT:
  case BTF_KIND_UNION:
  case BTF_KIND_ENUM:
  case BTF_KIND_INT:
    return h.size_or_type;
  default:
    return 0;
  }
}

bool KernelBtf::enum_has(std::string_view enum_name,
                         std::string_view value) const {
  const int id = find(enum_name, BTF_KIND_ENUM);
  Type h;
  if (!header(id, &h))
    return false;
  const uint8_t *e = type(id) + sizeof(Type);
  for (unsigned i = 0; i < vlen_of(h.info); i++, e += 8)
    if (name(load32(e)) == value)
      return true;
  return false;
}

int KernelBtf::typedef_proto_params(std::string_view typedef_name) const {
  Type t, ptr, proto;
  if (!header(find(typedef_name, BTF_KIND_TYPEDEF), &t) ||
      !header(static_cast<int>(t.size_or_type), &ptr) ||
      kind_of(ptr.info) != BTF_KIND_PTR ||
      !header(static_cast<int>(ptr.size_or_type), &proto) ||
      kind_of(proto.info) != BTF_KIND_FUNC_PROTO)
    return -1;
  return static_cast<int>(vlen_of(proto.info));
}

} // namespace offcpu
