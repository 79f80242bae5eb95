#include "symbolize/python_code.h"

#include <algorithm>
#include <cstring>

#include "util/utf8.h"

namespace offcpu {

namespace {

// Bounds on what one code object may make us read.
constexpr uint64_t kMaxNameChars = 4096;
constexpr uint64_t kMaxLineTableBytes = 1u << 20;

template <typename T> T field(const std::string &b, size_t off) {
  T v{};
  if (off + sizeof(T) <= b.size())
    memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

// A varint of the location table: 6 bits a byte, bit 6 says more follow.
struct TableReader {
  std::string_view t;
  size_t i = 0;
  bool bad = false;
  uint8_t byte() {
    if (i >= t.size()) {
      bad = true;
      return 0;
    }
    return static_cast<uint8_t>(t[i++]);
  }
  uint64_t varint() {
    uint8_t b = byte();
    uint64_t v = b & 63;
    for (unsigned shift = 6; (b & 64) && !bad && shift < 64; shift += 6) {
      b = byte();
      v |= uint64_t{b & 63u} << shift;
    }
    return v;
  }
  int64_t svarint() {
    uint64_t v = varint();
    return (v & 1) ? -static_cast<int64_t>(v >> 1)
                   : static_cast<int64_t>(v >> 1);
  }
};

void append_utf8(std::string &out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

} // namespace

uint32_t python_line(std::string_view table, uint32_t first_line,
                     uint32_t index) {
  TableReader r{table};
  int64_t line = first_line;
  uint64_t addr = 0;
  while (r.i < table.size()) {
    uint8_t first = r.byte();
    if (!(first & 0x80))
      return 0; // not at the start of an entry: malformed
    unsigned code = (first >> 3) & 15;
    uint64_t end = addr + (first & 7) + 1;
    bool known = true;
    if (code == 15) { // no location
      known = false;
    } else if (code == 14) { // long form
      line += r.svarint();
      r.varint();            // end line delta
      r.varint();            // column + 1
      r.varint();            // end column + 1
    } else if (code == 13) { // no column
      line += r.svarint();
    } else if (code >= 10) { // one-line form: two column bytes
      line += code - 10;
      r.byte();
      r.byte();
    } else { // short form: one column byte, same line
      r.byte();
    }
    if (r.bad)
      return 0;
    if (index >= addr && index < end)
      return known && line > 0 && line < UINT32_MAX
                 ? static_cast<uint32_t>(line)
                 : 0;
    addr = end;
  }
  return 0;
}

uint32_t python_line_pairs(std::string_view table, uint32_t first_line,
                           uint32_t index) {
  // Ranges of bytecode bytes; a zero-length range still moves the line.
  uint64_t at = uint64_t{index} * 2, start = 0;
  int64_t line = first_line;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    uint64_t end = start + static_cast<uint8_t>(table[i]);
    auto delta = static_cast<int8_t>(table[i + 1]);
    bool known = delta != -128;
    if (known)
      line += delta;
    if (at >= start && at < end)
      return known && line > 0 && line < UINT32_MAX
                 ? static_cast<uint32_t>(line)
                 : 0;
    start = end;
  }
  return 0;
}

std::vector<PythonFrameWord> python_frames_of(const std::vector<uint64_t> &ips,
                                              size_t *native) {
  std::vector<PythonFrameWord> out;
  size_t n = 0;
  while (n < ips.size() && !is_python_word(ips[n]))
    n++;
  *native = n;
  for (size_t i = n; i + 1 < ips.size(); i += 2) {
    if ((ips[i] & OFFCPU_PY_TAG_MASK) != OFFCPU_PY_CODE_TAG ||
        (ips[i + 1] & OFFCPU_PY_TAG_MASK) != OFFCPU_PY_INSTR_TAG)
      break;
    PythonFrameWord w;
    w.code = ips[i] & OFFCPU_PY_ADDR_MASK;
    w.index = static_cast<uint32_t>(ips[i + 1]);
    w.mark = static_cast<uint8_t>(ips[i + 1] >> OFFCPU_PY_INSTR_MARK_SHIFT);
    out.push_back(w);
  }
  return out;
}

std::vector<PythonFrameWord> python_chain(std::vector<PythonFrameWord> raw,
                                          PythonEntries entries) {
  if (entries != PythonEntries::Shim) {
    for (PythonFrameWord &w : raw)
      w.entry = entries == PythonEntries::Each || w.mark != 0;
    return raw;
  }
  std::vector<PythonFrameWord> out;
  out.reserve(raw.size());
  for (const PythonFrameWord &w : raw) {
    if (w.mark == OFFCPU_PY_OWNED_BY_CSTACK) {
      if (!out.empty())
        out.back().entry = true; // its callee began the C-level call
      continue;
    }
    out.push_back(w);
    out.back().entry = false;
  }
  return out;
}

std::vector<PythonFrameWord>
PythonNames::chain(uint32_t tgid, std::vector<PythonFrameWord> raw) const {
  auto l = layouts_.find(tgid);
  return python_chain(std::move(raw), l != layouts_.end() && l->second
                                          ? l->second->entries
                                          : PythonEntries::Flag);
}

std::optional<std::string> PythonNames::read_string(const std::string &mem,
                                                    const PythonLayout &l,
                                                    uint64_t obj) {
  auto head = files_.read_at(mem, obj, l.compact_data);
  if (!obj || !head || head->size() != l.compact_data)
    return std::nullopt;
  uint32_t state = field<uint32_t>(*head, l.unicode_state);
  int64_t length = field<int64_t>(*head, l.unicode_length);
  unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1,
           ascii = (state >> 6) & 1;
  if (!compact || length < 0 || static_cast<uint64_t>(length) > kMaxNameChars ||
      (kind != 1 && kind != 2 && kind != 4))
    return std::nullopt;
  size_t chars = static_cast<size_t>(length);
  auto data = files_.read_at(mem, obj + (ascii ? l.ascii_data : l.compact_data),
                             chars * (ascii ? 1 : kind));
  if (!data || data->size() != chars * (ascii ? 1 : kind))
    return std::nullopt;
  if (ascii)
    return valid_utf8(*data);
  std::string out;
  for (size_t i = 0; i < chars; i++) {
    uint32_t c = kind == 1   ? static_cast<uint8_t>((*data)[i])
                 : kind == 2 ? field<uint16_t>(*data, i * 2)
                             : field<uint32_t>(*data, i * 4);
    append_utf8(out, c > 0x10ffff ? 0xfffd : c);
  }
  return valid_utf8(out);
}

std::optional<std::string> PythonNames::read_bytes(const std::string &mem,
                                                   const PythonLayout &l,
                                                   uint64_t obj) {
  auto size = files_.read_at(mem, obj + l.bytes_size, sizeof(int64_t));
  if (!obj || !size || size->size() != sizeof(int64_t))
    return std::nullopt;
  int64_t n = field<int64_t>(*size, 0);
  if (n < 0 || static_cast<uint64_t>(n) > kMaxLineTableBytes)
    return std::nullopt;
  auto data = files_.read_at(mem, obj + l.bytes_data, static_cast<size_t>(n));
  if (!data || data->size() != static_cast<size_t>(n))
    return std::nullopt;
  return data;
}

std::optional<PythonCode>
PythonNames::read_code(uint32_t tgid, const PythonLayout &l, uint64_t addr) {
  std::string mem = proc_root_ + "/" + std::to_string(tgid) + "/mem";
  // The code object up to its last field we read.
  size_t header = std::max({l.co_filename, l.co_qualname, l.co_firstlineno,
                            l.co_linetable}) +
                  sizeof(uint64_t);
  auto head = files_.read_at(mem, addr, header);
  if (!head || head->size() != header)
    return std::nullopt;
  PythonCode c;
  c.lines = l.lines;
  auto qualname = read_string(mem, l, field<uint64_t>(*head, l.co_qualname));
  auto filename = read_string(mem, l, field<uint64_t>(*head, l.co_filename));
  if (!qualname || !filename)
    return std::nullopt;
  c.qualname = std::move(*qualname);
  c.filename = std::move(*filename);
  int32_t first = field<int32_t>(*head, l.co_firstlineno);
  c.first_line = first > 0 ? static_cast<uint32_t>(first) : 0;
  if (auto table = read_bytes(mem, l, field<uint64_t>(*head, l.co_linetable)))
    c.line_table = std::move(*table);
  return c;
}

void PythonNames::capture(uint32_t tgid,
                          const std::vector<PythonFrameWord> &frames) {
  for (const PythonFrameWord &f : chain(tgid, frames))
    code(tgid, f.code);
}

const PythonCode *PythonNames::code(uint32_t tgid, uint64_t addr) {
  auto key = std::make_pair(tgid, addr);
  auto it = codes_.find(key);
  if (it == codes_.end()) {
    auto l = layouts_.find(tgid);
    std::optional<PythonCode> c;
    uint64_t &held = bytes_[tgid];
    if (held >= kPythonBytesPerProcess) {
      stats_.code_over_budget++;
    } else {
      if (l != layouts_.end() && l->second)
        c = read_code(tgid, *l->second, addr);
      c ? stats_.code_objects++ : stats_.code_unreadable++;
      if (c)
        held += c->qualname.size() + c->filename.size() + c->line_table.size();
    }
    it = codes_.emplace(key, std::move(c)).first;
  }
  return it->second ? &*it->second : nullptr;
}

} // namespace offcpu
