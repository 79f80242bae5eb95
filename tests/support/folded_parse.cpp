#include "support/folded_parse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace offcpu::test {

std::vector<FoldedLine> parse_folded(const std::string &text) {
  std::vector<FoldedLine> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << "bad folded line: " << line;
    if (space == std::string::npos)
      continue;
    std::string value = line.substr(space + 1);
    EXPECT_TRUE(!value.empty() &&
                std::all_of(value.begin(), value.end(), ::isdigit))
        << "bad value in: " << line;
    FoldedLine f;
    f.text = line;
    f.value = std::stoull(value);
    std::string stack = line.substr(0, space);
    size_t start = 0;
    for (;;) {
      size_t semi = stack.find(';', start);
      f.frames.push_back(stack.substr(start, semi - start));
      if (semi == std::string::npos)
        break;
      start = semi + 1;
    }
    lines.push_back(std::move(f));
  }
  return lines;
}

std::map<std::string, uint64_t>
totals_by_comm(const std::vector<FoldedLine> &lines) {
  std::map<std::string, uint64_t> t;
  for (const auto &l : lines)
    t[l.frames.at(0)] += l.value;
  return t;
}

int frame_index(const FoldedLine &line, const std::string &frame) {
  for (size_t i = 0; i < line.frames.size(); i++)
    if (line.frames[i] == frame)
      return static_cast<int>(i);
  return -1;
}

WholeShare whole_share(const std::string &folded, const std::string &comm,
                       const std::string &wait,
                       const std::function<bool(const FoldedLine &)> &whole) {
  WholeShare s;
  for (const FoldedLine &l : parse_folded(folded)) {
    if (l.frames.empty() || l.frames[0] != comm ||
        l.text.find(wait) == std::string::npos)
      continue;
    s.sleep_us += l.value;
    if (whole(l))
      s.whole_us += l.value;
    else if (l.value > s.worst_us) {
      s.worst_us = l.value;
      s.worst = l.text;
    }
  }
  return s;
}

} // namespace offcpu::test
