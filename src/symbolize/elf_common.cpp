#include "symbolize/elf_common.h"

#include <gelf.h>

#include <cstring>

namespace offcpu {

bool libelf_ready() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  return ok;
}

std::string gnu_build_id(Elf_Scn *scn) {
  Elf_Data *data = elf_getdata(scn, nullptr);
  if (!data || !data->d_buf)
    return {};
  const auto *base = static_cast<const unsigned char *>(data->d_buf);
  size_t off = 0, name_off = 0, desc_off = 0;
  GElf_Nhdr nhdr;
  while (off < data->d_size &&
         (off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
    if (nhdr.n_type != NT_GNU_BUILD_ID || nhdr.n_namesz != 4 ||
        name_off + 4 > data->d_size ||
        std::memcmp(base + name_off, "GNU", 4) != 0 || nhdr.n_descsz == 0 ||
        nhdr.n_descsz > 64 || desc_off + nhdr.n_descsz > data->d_size)
      continue;
    static const char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(nhdr.n_descsz * 2);
    for (size_t i = 0; i < nhdr.n_descsz; i++) {
      s += digits[base[desc_off + i] >> 4];
      s += digits[base[desc_off + i] & 15];
    }
    return s;
  }
  return {};
}

} // namespace offcpu
