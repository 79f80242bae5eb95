// Diagnostics: one line each, on stderr, prefixed "offcpu: ".
#pragma once

#include <string>

namespace offcpu {

void note(const std::string &line);
void warn(const std::string &line); // "offcpu: warning: ..."

} // namespace offcpu
