#include "support/json.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace offcpu::test {
namespace {

class Reader {
public:
  explicit Reader(const std::string &s) : s_(s) {}

  Json value() {
    skip();
    if (at_ >= s_.size())
      fail("unexpected end");
    char c = s_[at_];
    if (c == '{')
      return object();
    if (c == '[')
      return array();
    Json j;
    if (c == '"') {
      j.kind = Json::Kind::String;
      j.string = string();
    } else if (literal("true") || literal("false")) {
      j.kind = Json::Kind::Bool;
      j.boolean = c == 't';
    } else if (literal("null")) {
      j.kind = Json::Kind::Null;
    } else {
      j.kind = Json::Kind::Number;
      const char *begin = s_.c_str() + at_;
      char *end = nullptr;
      j.number = std::strtod(begin, &end);
      if (end == begin)
        fail("bad value");
      at_ += static_cast<size_t>(end - begin);
    }
    return j;
  }

  void end() {
    skip();
    if (at_ != s_.size())
      fail("trailing text");
  }

private:
  [[noreturn]] void fail(const char *what) const {
    throw std::runtime_error(std::string("JSON: ") + what + " at byte " +
                             std::to_string(at_));
  }
  void skip() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_])))
      at_++;
  }
  bool literal(const char *word) {
    std::string w(word);
    if (s_.compare(at_, w.size(), w) != 0)
      return false;
    at_ += w.size();
    return true;
  }
  void expect(char c) {
    skip();
    if (at_ >= s_.size() || s_[at_] != c)
      fail("unexpected character");
    at_++;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size())
        fail("bad escape");
      char e = s_[at_++];
      if (e == 'n')
        out += '\n';
      else if (e == 't')
        out += '\t';
      else if (e == 'u') {
        unsigned long cp = std::strtoul(s_.substr(at_, 4).c_str(), nullptr, 16);
        at_ += 4;
        out += cp < 0x80 ? static_cast<char>(cp) : '?';
      } else
        out += e;
    }
    expect('"');
    return out;
  }
  Json array() {
    Json j;
    j.kind = Json::Kind::Array;
    expect('[');
    skip();
    if (at_ < s_.size() && s_[at_] == ']') {
      at_++;
      return j;
    }
    for (;;) {
      j.array.push_back(value());
      skip();
      if (at_ < s_.size() && s_[at_] == ',') {
        at_++;
        continue;
      }
      expect(']');
      return j;
    }
  }
  Json object() {
    Json j;
    j.kind = Json::Kind::Object;
    expect('{');
    skip();
    if (at_ < s_.size() && s_[at_] == '}') {
      at_++;
      return j;
    }
    for (;;) {
      skip();
      std::string key = string();
      expect(':');
      j.object[key] = value();
      skip();
      if (at_ < s_.size() && s_[at_] == ',') {
        at_++;
        continue;
      }
      expect('}');
      return j;
    }
  }

  const std::string &s_;
  size_t at_ = 0;
};

} // namespace

const Json &Json::operator[](const std::string &key) const {
  static const Json null;
  auto it = object.find(key);
  return it == object.end() ? null : it->second;
}

Json parse_json(const std::string &text) {
  Reader r(text);
  Json j = r.value();
  r.end();
  return j;
}

} // namespace offcpu::test
