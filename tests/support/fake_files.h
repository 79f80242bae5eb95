// A FileReader over in-memory fixtures.
#pragma once

#include <map>
#include <string>

#include "util/fs.h"

namespace offcpu::test {

class FakeFiles : public FileReader {
public:
  std::map<std::string, std::string> files;
  std::optional<std::string> read(const std::string &path,
                                  std::size_t max_bytes) const override {
    auto it = files.find(path);
    if (it == files.end())
      return std::nullopt;
    return it->second.substr(0, max_bytes);
  }
};

} // namespace offcpu::test
