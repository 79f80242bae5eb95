// A small JSON reader for tests that check offcpu's JSON output (the
// timeline's trace events): values, arrays and objects, strings with the
// escapes offcpu writes. Throws std::runtime_error on malformed input.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace offcpu::test {

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  // The member `key` of an object; a null value when absent.
  const Json &operator[](const std::string &key) const;
  bool has(const std::string &key) const { return object.count(key) != 0; }
};

Json parse_json(const std::string &text);

} // namespace offcpu::test
