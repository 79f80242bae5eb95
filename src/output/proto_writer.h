// Protobuf's wire format, as much as offcpu writes: varints, fixed64 and
// length-delimited fields (strings, packed arrays, nested messages). Used
// by the pprof and the Perfetto writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace offcpu {

class ProtoWriter {
public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    buf_ += static_cast<char>(v);
  }
  void tag(int field, int wire_type) {
    varint(static_cast<uint64_t>(field) << 3 |
           static_cast<uint64_t>(wire_type));
  }
  // Left out when 0, proto3's default.
  void uint_field(int field, uint64_t v) {
    if (v == 0)
      return;
    varint_field(field, v);
  }
  // Written even when 0 (proto2 optional fields, where presence counts).
  void varint_field(int field, uint64_t v) {
    tag(field, 0);
    varint(v);
  }
  void fixed64_field(int field, uint64_t v) {
    tag(field, 1);
    for (int i = 0; i < 8; i++)
      buf_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void double_field(int field, double d) {
    uint64_t bits;
    static_assert(sizeof(bits) == sizeof(d));
    __builtin_memcpy(&bits, &d, sizeof(bits));
    fixed64_field(field, bits);
  }
  void bytes_field(int field, const std::string &bytes) {
    tag(field, 2);
    varint(bytes.size());
    buf_ += bytes;
  }
  void message_field(int field, const ProtoWriter &m) {
    bytes_field(field, m.buf_);
  }
  void packed_field(int field, const std::vector<uint64_t> &values) {
    if (values.empty())
      return;
    ProtoWriter inner;
    for (uint64_t v : values)
      inner.varint(v);
    bytes_field(field, inner.buf_);
  }
  const std::string &data() const { return buf_; }
  void clear() { buf_.clear(); }

private:
  std::string buf_;
};

} // namespace offcpu
