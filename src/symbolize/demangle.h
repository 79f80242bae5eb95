#pragma once

#include <optional>
#include <string>

namespace offcpu {

// The demangled C++ or Rust (legacy and v0) name, or the name itself when
// it is not mangled.
std::string demangle(const std::string &name);

} // namespace offcpu
