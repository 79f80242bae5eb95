// Reading offcpu's folded output back in tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace offcpu::test {

struct FoldedLine {
  std::vector<std::string> frames; // frames[0] is the comm
  uint64_t value = 0;
  std::string text;
};

// Parses "a;b;c 123" lines; a line that does not parse fails the test.
std::vector<FoldedLine> parse_folded(const std::string &text);

// Total value per comm (the first frame).
std::map<std::string, uint64_t>
totals_by_comm(const std::vector<FoldedLine> &lines);

// Index of `frame` in `line`, or -1.
int frame_index(const FoldedLine &line, const std::string &frame);

} // namespace offcpu::test
