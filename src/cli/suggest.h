// "Did you mean": the known option closest to a mistyped one.
#pragma once

#include <string>
#include <vector>

namespace offcpu {

// Levenshtein distance (insertions, deletions, substitutions; a swap of two
// neighbours counts once, as typists make it).
size_t edit_distance(const std::string &a, const std::string &b);

// The name in `known` closest to `typed`, if close enough to be what was
// meant (at most 2 edits, and fewer than a third of its length); else "".
std::string closest_name(const std::string &typed,
                         const std::vector<std::string> &known);

} // namespace offcpu
