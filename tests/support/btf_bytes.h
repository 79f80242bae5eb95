// BTF written with libbpf's writer and read back with offcpu's reader: test
// fixtures for what the feature probe reads from the kernel's BTF.
#pragma once

#include <bpf/btf.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "probe/kernel_btf.h"

namespace offcpu::test {

struct BtfDeleter {
  void operator()(btf *b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<btf, BtfDeleter>;

// The bytes of `b` and offcpu's reading of them (null if it refused them).
class ParsedBtf {
public:
  explicit ParsedBtf(const btf *b) {
    __u32 size = 0;
    const void *raw = btf__raw_data(b, &size);
    bytes_.resize(size);
    if (raw && size)
      std::memcpy(bytes_.data(), raw, size);
    parsed_ = KernelBtf::parse(bytes_.data(), bytes_.size());
  }
  const KernelBtf *get() const { return parsed_.get(); }

private:
  std::vector<uint8_t> bytes_;
  std::unique_ptr<KernelBtf> parsed_;
};

} // namespace offcpu::test
