#pragma once

#include <string>

namespace offcpu {

// The demangled C++ name, or the name itself when it is not mangled.
std::string demangle(const std::string &name);

} // namespace offcpu
