// Reading files that other users may control (/proc, ELF files): every read
// is bounded. Behind an interface so parsers can be fed fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace offcpu {

class FileReader {
public:
  virtual ~FileReader() = default;
  // The file's contents, at most max_bytes of them; nullopt if unreadable.
  virtual std::optional<std::string> read(const std::string &path,
                                          std::size_t max_bytes) const = 0;
  // `size` bytes at `offset` (for /proc/PID/mem); nullopt if unreadable.
  virtual std::optional<std::string>
  read_at(const std::string &path, uint64_t offset, std::size_t size) const {
    (void)path, (void)offset, (void)size;
    return std::nullopt;
  }
  // The same, handed over in pieces so large files need not be held whole.
  virtual bool
  read_chunks(const std::string &path, std::size_t max_bytes,
              const std::function<void(std::string_view)> &sink) const {
    auto all = read(path, max_bytes);
    if (all)
      sink(*all);
    return all.has_value();
  }
};

// Reads the real file system.
class SystemFileReader : public FileReader {
public:
  std::optional<std::string> read(const std::string &path,
                                  std::size_t max_bytes) const override;
  bool
  read_chunks(const std::string &path, std::size_t max_bytes,
              const std::function<void(std::string_view)> &sink) const override;
  std::optional<std::string> read_at(const std::string &path, uint64_t offset,
                                     std::size_t size) const override;
};

const FileReader &system_files();

} // namespace offcpu
