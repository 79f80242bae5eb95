#include "symbolize/demangle.h"

#include <cxxabi.h>
#include <libiberty/demangle.h>

#include <cstdlib>
#include <memory>

namespace offcpu {
namespace {

using CString = std::unique_ptr<char, decltype(&std::free)>;

// Rust's v0 names start with _R; its legacy names look like C++ (_ZN...)
// but end in a hash component (17h + 16 hex digits), which libiberty
// checks: it returns null for anything that is not Rust.
std::optional<std::string> rust_name(const std::string &name) {
  if (name.compare(0, 2, "_R") != 0 && name.compare(0, 3, "_ZN") != 0)
    return std::nullopt;
  CString out(rust_demangle(name.c_str(), DMGL_PARAMS), &std::free);
  if (!out)
    return std::nullopt;
  return std::string(out.get());
}

} // namespace

std::string demangle(const std::string &name) {
  if (name.size() < 3 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
    return name;
  if (auto rust = rust_name(name))
    return *rust;
  int status = 0;
  CString out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
              &std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

} // namespace offcpu
