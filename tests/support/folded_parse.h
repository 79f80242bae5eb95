// Reading offcpu's folded output back in tests.
#pragma once

#include <cstdint>
#include <functional>
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

// A workload's waits (its lines, by `comm`, that hold the frame `wait`:
// a kernel frame, there even when the user stack is cut short) and the
// part of their time on stacks `whole` accepts.
struct WholeShare {
  uint64_t sleep_us = 0, whole_us = 0;
  std::string worst; // the largest line of a wait that is not whole
  uint64_t worst_us = 0;
  double whole() const {
    return sleep_us ? static_cast<double>(whole_us) / sleep_us : 0.0;
  }
  // "N of M us whole; largest not:\n<worst>\n", for a failed check.
  std::string describe() const {
    return std::to_string(whole_us) + " of " + std::to_string(sleep_us) +
           " us whole; largest not:\n" + worst + "\n";
  }
};
WholeShare whole_share(const std::string &folded, const std::string &comm,
                       const std::string &wait,
                       const std::function<bool(const FoldedLine &)> &whole);

} // namespace offcpu::test
