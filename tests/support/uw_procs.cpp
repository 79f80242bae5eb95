#include "support/uw_procs.h"

#include <cstring>
#include <vector>

#include "support/json.h"

namespace offcpu::test {
namespace {

// bpftool's bytes ("0x1f" each).
std::vector<uint8_t> bytes_of(const Json &list) {
  std::vector<uint8_t> out;
  for (const Json &b : list.array)
    out.push_back(static_cast<uint8_t>(std::stoul(b.string, nullptr, 16)));
  return out;
}

} // namespace

std::map<uint32_t, std::shared_ptr<const uw_proc>>
installed_procs(const std::string &bpftool_json) {
  std::map<uint32_t, std::shared_ptr<const uw_proc>> out;
  const Json doc = parse_json(bpftool_json);
  for (const Json &entry : doc.array) {
    const std::vector<uint8_t> key = bytes_of(entry["key"]);
    const std::vector<uint8_t> value = bytes_of(entry["value"]);
    uint32_t tgid = 0;
    if (key.size() != sizeof(tgid) || value.size() != sizeof(uw_proc))
      continue;
    std::memcpy(&tgid, key.data(), sizeof(tgid));
    auto proc = std::make_shared<uw_proc>();
    std::memcpy(proc.get(), value.data(), sizeof(uw_proc));
    out[tgid] = std::move(proc);
  }
  return out;
}

} // namespace offcpu::test
