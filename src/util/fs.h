// Reading files that other users may control (/proc, ELF files): every read
// is bounded. Behind an interface so parsers can be fed fixtures.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace offcpu {

class FileReader {
public:
  virtual ~FileReader() = default;
  // The file's contents, at most max_bytes of them; nullopt if unreadable.
  virtual std::optional<std::string> read(const std::string &path,
                                          std::size_t max_bytes) const = 0;
};

// Reads the real file system.
class SystemFileReader : public FileReader {
public:
  std::optional<std::string> read(const std::string &path,
                                  std::size_t max_bytes) const override;
};

const FileReader &system_files();

} // namespace offcpu
