#include "unwind/cfi.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "util/clock.h"

namespace offcpu::unwind {
namespace {

// DWARF register numbers on x86-64.
constexpr unsigned kRegBp = 6;
constexpr unsigned kRegSp = 7;
constexpr unsigned kRegRa = 16;

// Caps against hostile input: real FDEs have a few dozen instructions.
constexpr size_t kMaxInstructions = 100000;
constexpr size_t kMaxStateStack = 64;

// A bounded little-endian reader; any overrun sets `bad` and yields 0.
class Reader {
public:
  Reader(std::string_view d, size_t pos = 0) : d_(d), pos_(pos) {}
  bool bad() const { return bad_; }
  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ >= d_.size(); }
  size_t limit() const { return d_.size(); }
  void set_end(size_t end) { d_ = d_.substr(0, std::min(end, d_.size())); }

  template <typename T> T fixed() {
    T v{};
    if (d_.size() - pos_ < sizeof(T) || pos_ > d_.size()) {
      bad_ = true;
      pos_ = d_.size();
      return v;
    }
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      uint8_t b = fixed<uint8_t>();
      if (bad_)
        return 0;
      if (shift < 64)
        v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80))
        return v;
    }
  }
  int64_t sleb() {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      b = fixed<uint8_t>();
      if (bad_)
        return 0;
      if (shift < 64)
        v |= static_cast<int64_t>(uint64_t{b & 0x7fu} << shift);
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
      v |= static_cast<int64_t>(~uint64_t{0} << shift);
    return v;
  }
  std::string_view bytes(uint64_t n) {
    if (n > d_.size() - std::min(pos_, d_.size())) {
      bad_ = true;
      pos_ = d_.size();
      return {};
    }
    std::string_view v = d_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  std::string_view cstr() {
    size_t end = d_.find('\0', pos_);
    if (end == std::string_view::npos) {
      bad_ = true;
      pos_ = d_.size();
      return {};
    }
    std::string_view v = d_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return v;
  }

  // A pointer in DW_EH_PE_* encoding; `section_vaddr` makes pc-relative
  // ones absolute.
  uint64_t pointer(uint8_t enc, uint64_t section_vaddr) {
    if (enc == 0xff) // DW_EH_PE_omit
      return 0;
    uint64_t here = section_vaddr + pos_;
    uint64_t v = 0;
    switch (enc & 0x0f) {
    case 0x00:
      v = fixed<uint64_t>();
      break;
    case 0x01:
      v = uleb();
      break;
    case 0x02:
      v = fixed<uint16_t>();
      break;
    case 0x03:
      v = fixed<uint32_t>();
      break;
    case 0x04:
      v = fixed<uint64_t>();
      break;
    case 0x09:
      v = static_cast<uint64_t>(sleb());
      break;
    case 0x0a:
      v = static_cast<uint64_t>(static_cast<int64_t>(fixed<int16_t>()));
      break;
    case 0x0b:
      v = static_cast<uint64_t>(static_cast<int64_t>(fixed<int32_t>()));
      break;
    case 0x0c:
      v = static_cast<uint64_t>(fixed<int64_t>());
      break;
    default:
      bad_ = true;
      return 0;
    }
    switch (enc & 0x70) {
    case 0x00:
      break;
    case 0x10: // pcrel
      v += here;
      break;
    default: // textrel, datarel, funcrel, aligned: not used on x86-64
      bad_ = true;
      return 0;
    }
    return v; // DW_EH_PE_indirect would need the process's memory: unused
  }

private:
  std::string_view d_;
  size_t pos_;
  bool bad_ = false;
};

// Counts what one file's CFI costs against its budget; once over, every
// later charge fails and the parse stops.
class Meter {
public:
  Meter(const CfiBudget &b, CfiStats &st) : b_(b), st_(st) {}
  bool ok() const { return st_.over == OverBudget::None; }
  bool step() {
    if (!ok())
      return false;
    if (++st_.steps > b_.max_steps)
      return over(OverBudget::Steps);
    // The clock is read every 4096 steps: a few microseconds apart.
    if ((st_.steps & 4095) == 0 &&
        (b_.deadline_ns || b_.stop_ns || b_.stop_requested)) {
      const uint64_t now = monotonic_ns();
      if ((b_.stop_ns && now >= b_.stop_ns) ||
          (b_.stop_requested && b_.stop_requested()))
        return over(OverBudget::Interrupted);
      if (b_.deadline_ns && now >= b_.deadline_ns)
        return over(OverBudget::Time);
    }
    return true;
  }
  bool row() {
    if (!ok())
      return false;
    return ++rows_ <= b_.max_rows || over(OverBudget::Rows);
  }

private:
  bool over(OverBudget why) {
    st_.over = why;
    return false;
  }
  const CfiBudget &b_;
  CfiStats &st_;
  uint64_t rows_ = 0;
};

struct State;

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = kRegRa;
  uint8_t fde_enc = 0; // absptr
  bool has_z = false;
  bool signal = false;
  std::string_view instructions;
  // The state after the initial instructions, run once for every FDE of
  // this CIE (a long CIE shared by many FDEs costs its length once).
  std::shared_ptr<const State> initial;
  bool initial_bad = false;
};

// How a register is recovered, as far as this walker cares.
struct RegRule {
  enum Kind : uint8_t { Same, Undefined, Offset, Expr, Other } kind = Same;
  int64_t off = 0;
  std::string_view expr;
};

struct State {
  bool cfa_expr = false;
  uint64_t cfa_reg = kRegSp;
  int64_t cfa_off = 8;
  std::string_view cfa_expression;
  RegRule bp, ra, sp;
};

template <typename S> auto *tracked(S &s, uint64_t reg, uint64_t ra_reg) {
  decltype(&s.ra) out = nullptr;
  if (reg == ra_reg)
    out = &s.ra;
  else if (reg == kRegBp)
    out = &s.bp;
  else if (reg == kRegSp)
    out = &s.sp;
  return out;
}

// DW_OP_bregN off as the whole expression (optionally then DW_OP_deref):
// the register and offset; nullopt for anything else.
std::optional<std::pair<unsigned, int64_t>>
breg_expression(std::string_view expr, bool deref) {
  Reader r(expr);
  uint8_t op = r.fixed<uint8_t>();
  if (r.bad() || op < 0x70 || op > 0x8f) // DW_OP_breg0..31
    return std::nullopt;
  int64_t off = r.sleb();
  if (deref && r.fixed<uint8_t>() != 0x06) // DW_OP_deref
    return std::nullopt;
  if (r.bad() || !r.at_end())
    return std::nullopt;
  return std::make_pair(static_cast<unsigned>(op - 0x70), off);
}

// The expression the linker writes for PLT entries: rsp + 8, plus 8 once
// the stub has pushed (from byte 11 of each 16-byte entry).
bool is_plt_expression(std::string_view e) {
  static const unsigned char plt[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a,
                                      0x3b, 0x2a, 0x33, 0x24, 0x22};
  return e.size() == sizeof(plt) && std::memcmp(e.data(), plt, e.size()) == 0;
}

bool fits16(int64_t v) {
  return v >= INT16_MIN && v <= INT16_MAX;
}
bool fits32(int64_t v) {
  return v >= INT32_MIN && v <= INT32_MAX;
}

Rule unsupported() {
  Rule r;
  r.kind = UW_RULE_UNSUPPORTED;
  return r;
}

// The caller's rbp: saved relative to the CFA, or not recoverable.
bool set_bp(Rule &r, const RegRule &bp) {
  switch (bp.kind) {
  case RegRule::Same:
    return true;
  case RegRule::Offset:
    if (!fits16(bp.off))
      return false;
    r.flags |= UW_BP_SAVED;
    r.bp_off = static_cast<int16_t>(bp.off);
    return true;
  default:
    r.flags |= UW_BP_UNDEFINED;
    return true;
  }
}

Rule to_rule(const State &s, bool signal_fde) {
  Rule r;
  if (s.ra.kind == RegRule::Undefined) {
    r.kind = UW_RULE_END;
    return r;
  }
  if (s.cfa_expr) {
    if (is_plt_expression(s.cfa_expression) && s.ra.kind == RegRule::Offset &&
        s.ra.off == -8) {
      r.kind = UW_RULE_PLT;
      return r;
    }
    auto cfa = breg_expression(s.cfa_expression, true);
    if (!cfa || !fits32(cfa->second))
      return unsupported();
    // A sigreturn trampoline: every register at a fixed place above rsp
    // (glibc's __restore_rt: rsp, then rip, in the ucontext).
    if (signal_fde && cfa->first == kRegSp && s.ra.kind == RegRule::Expr) {
      auto ra = breg_expression(s.ra.expr, false);
      auto bp = breg_expression(s.bp.expr, false);
      if (s.bp.kind != RegRule::Expr || !ra || !bp || ra->first != kRegSp ||
          ra->second != cfa->second + 8 || bp->first != kRegSp ||
          !fits16(bp->second))
        return unsupported();
      r.kind = UW_RULE_SIGNAL;
      r.cfa_off = static_cast<int32_t>(cfa->second);
      r.bp_off = static_cast<int16_t>(bp.value().second);
      r.flags = UW_BP_SAVED;
      return r;
    }
    if (cfa->first != kRegSp && cfa->first != kRegBp)
      return unsupported();
    r.kind = UW_RULE_CFA_DEREF;
    r.cfa_off = static_cast<int32_t>(cfa->second);
    if (cfa->first == kRegBp)
      r.flags |= UW_CFA_FROM_BP;
  } else {
    if ((s.cfa_reg != kRegSp && s.cfa_reg != kRegBp) || !fits32(s.cfa_off))
      return unsupported();
    r.kind = UW_RULE_CFA;
    r.cfa_off = static_cast<int32_t>(s.cfa_off);
    if (s.cfa_reg == kRegBp)
      r.flags |= UW_CFA_FROM_BP;
  }
  if (s.ra.kind != RegRule::Offset || s.ra.off != -8 || !set_bp(r, s.bp))
    return unsupported();
  return r;
}

struct FdeRows {
  uint64_t begin = 0, end = 0;
  std::vector<Row> rows;
};

// Where an FDE is: its range and its entry in the section. The entries are
// found first and run in address order, each FDE's rows merged into the
// result as they come: no store of every FDE's rows before sorting (a
// large file's was tens of MiB, the peak of offcpu's memory at the start
// of a whole-system run, issue #27).
struct FdeRef {
  uint64_t begin = 0, end = 0;
  uint64_t cie_at = 0;
  size_t body = 0, end_pos = 0; // the entry's body, after its length
  bool dwarf64 = false;
};

// Runs CFA instructions from `state`, appending a row at each location
// change. `initial` is the state after the CIE's own instructions
// (DW_CFA_restore goes back to it). False on malformed input.
class Interpreter {
public:
  Interpreter(const Cie &cie, uint64_t section_vaddr, bool eh_frame,
              Meter &meter)
      : cie_(cie), vaddr_(section_vaddr), eh_(eh_frame), meter_(meter) {}

  bool run(std::string_view code, State &s, const State *initial, uint64_t &loc,
           FdeRows *out) {
    Program p{Reader(code), s, initial, loc, out, {}};
    size_t steps = 0;
    while (!p.r.at_end()) {
      if (++steps > kMaxInstructions || !meter_.step())
        return false;
      if (!execute(p.r.fixed<uint8_t>(), p) || p.r.bad())
        return false;
    }
    return !p.r.bad();
  }

private:
  // One run over a CIE's or FDE's instructions: where it reads, the state
  // it changes, and the states remember_state saved.
  struct Program {
    Reader r;
    State &s;
    const State *initial; // the CIE's state, for restore (null: in the CIE)
    uint64_t &loc;
    FdeRows *out; // rows emitted as the location advances (null: none)
    std::vector<State> saved;
  };

  // One instruction; false when the rest cannot be trusted (unknown or
  // invalid instruction).
  bool execute(uint8_t op, Program &p) {
    uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
    case 0x40: // advance_loc
      advance(p, low * cie_.code_align);
      return true;
    case 0x80: // offset
      set_offset(p.s, low, factored(p.r.uleb()));
      return true;
    case 0xc0: // restore
      restore(p.s, low, p.initial);
      return true;
    default:
      break;
    }
    switch (op) {
    case 0x00: // nop
      return true;
    case 0x01: // set_loc
    case 0x02: // advance_loc1
    case 0x03: // advance_loc2
    case 0x04: // advance_loc4
      return location(op, p);
    case 0x0a: // remember_state
    case 0x0b: // restore_state
      return state_stack(op, p);
    case 0x0c: // def_cfa
    case 0x0d: // def_cfa_register
    case 0x0e: // def_cfa_offset
    case 0x0f: // def_cfa_expression
    case 0x12: // def_cfa_sf
    case 0x13: // def_cfa_offset_sf
      cfa(op, p.r, p.s);
      return true;
    case 0x2e: // GNU_args_size
      p.r.uleb();
      return true;
    default:
      return register_rule(op, p);
    }
  }

  // set_loc and advance_loc1/2/4: rows up to the new location.
  bool location(uint8_t op, Program &p) {
    switch (op) {
    case 0x01: {
      uint64_t to = p.r.pointer(eh_ ? cie_.fde_enc : 0x00, vaddr_);
      if (to < p.loc)
        return false;
      advance(p, to - p.loc);
      return true;
    }
    case 0x02:
      advance(p, p.r.fixed<uint8_t>() * cie_.code_align);
      return true;
    case 0x03:
      advance(p, p.r.fixed<uint16_t>() * cie_.code_align);
      return true;
    default:
      advance(p, p.r.fixed<uint32_t>() * cie_.code_align);
      return true;
    }
  }

  // remember_state and restore_state (the CFA rule too, as libgcc and GCC
  // do), within a bounded stack.
  static bool state_stack(uint8_t op, Program &p) {
    if (op == 0x0a) {
      if (p.saved.size() >= kMaxStateStack)
        return false;
      p.saved.push_back(p.s);
      return true;
    }
    if (p.saved.empty())
      return false;
    p.s = p.saved.back();
    p.saved.pop_back();
    return true;
  }

  // The def_cfa family: how the CFA is computed.
  void cfa(uint8_t op, Reader &r, State &s) const {
    switch (op) {
    case 0x0c: // def_cfa
      s.cfa_expr = false;
      s.cfa_reg = r.uleb();
      s.cfa_off = static_cast<int64_t>(r.uleb());
      break;
    case 0x0d: // def_cfa_register
      s.cfa_expr = false;
      s.cfa_reg = r.uleb();
      break;
    case 0x0e: // def_cfa_offset
      s.cfa_off = static_cast<int64_t>(r.uleb());
      break;
    case 0x0f: // def_cfa_expression
      s.cfa_expr = true;
      s.cfa_expression = r.bytes(r.uleb());
      break;
    case 0x12: // def_cfa_sf
      s.cfa_expr = false;
      s.cfa_reg = r.uleb();
      s.cfa_off = factored(static_cast<uint64_t>(r.sleb()));
      break;
    default: // def_cfa_offset_sf
      s.cfa_off = factored(static_cast<uint64_t>(r.sleb()));
      break;
    }
  }

  // How a register is recovered; false for an unknown instruction.
  bool register_rule(uint8_t op, Program &p) {
    Reader &r = p.r;
    uint64_t reg = 0;
    switch (op) {
    case 0x05: // offset_extended
      reg = r.uleb();
      set_offset(p.s, reg, factored(r.uleb()));
      return true;
    case 0x06: // restore_extended
      restore(p.s, r.uleb(), p.initial);
      return true;
    case 0x07: // undefined
      set_kind(p.s, r.uleb(), RegRule::Undefined);
      return true;
    case 0x08: // same_value
      set_kind(p.s, r.uleb(), RegRule::Same);
      return true;
    case 0x09: // register
      reg = r.uleb();
      r.uleb();
      set_kind(p.s, reg, RegRule::Other);
      return true;
    case 0x10: // expression
      reg = r.uleb();
      set_expr(p.s, reg, r.bytes(r.uleb()));
      return true;
    case 0x11: // offset_extended_sf
      reg = r.uleb();
      set_offset(p.s, reg, factored(static_cast<uint64_t>(r.sleb())));
      return true;
    default:
      return other_register_rule(op, p);
    }
  }

  // The register rules offcpu does not follow (val_*), and GNU's negative
  // offset; false for an unknown instruction.
  bool other_register_rule(uint8_t op, Program &p) {
    Reader &r = p.r;
    uint64_t reg = 0;
    switch (op) {
    case 0x14: // val_offset
    case 0x15: // val_offset_sf
      reg = r.uleb();
      if (op == 0x14)
        r.uleb();
      else
        r.sleb();
      set_kind(p.s, reg, RegRule::Other);
      return true;
    case 0x16: // val_expression
      reg = r.uleb();
      r.bytes(r.uleb());
      set_kind(p.s, reg, RegRule::Other);
      return true;
    case 0x2f: { // GNU_negative_offset_extended
      reg = r.uleb();
      uint64_t n = r.uleb();
      set_offset(p.s, reg, factored(0 - n));
      return true;
    }
    default:
      return false; // unknown: the rest cannot be trusted
    }
  }

  // An operand times the data alignment, wrapping as the unsigned product
  // (hostile operands must not overflow a signed multiplication; such
  // offsets fit no rule and are refused later).
  int64_t factored(uint64_t v) const {
    return static_cast<int64_t>(v * static_cast<uint64_t>(cie_.data_align));
  }
  void advance(Program &p, uint64_t delta) {
    if (p.out && delta)
      emit(p.s, p.loc, p.out);
    p.loc += delta;
  }
  void emit(const State &s, uint64_t loc, FdeRows *out) {
    Row row{loc, to_rule(s, cie_.signal)};
    if (!out->rows.empty() && out->rows.back().pc == loc)
      out->rows.back() = row;
    else if (meter_.row())
      out->rows.push_back(row);
  }
  void set_offset(State &s, uint64_t reg, int64_t off) {
    if (RegRule *rr = tracked(s, reg, cie_.ra_reg)) {
      rr->kind = RegRule::Offset;
      rr->off = off;
    }
  }
  void set_kind(State &s, uint64_t reg, RegRule::Kind k) {
    if (RegRule *rr = tracked(s, reg, cie_.ra_reg))
      rr->kind = k;
  }
  void set_expr(State &s, uint64_t reg, std::string_view e) {
    if (RegRule *rr = tracked(s, reg, cie_.ra_reg)) {
      rr->kind = RegRule::Expr;
      rr->expr = e;
    }
  }
  void restore(State &s, uint64_t reg, const State *initial) {
    RegRule *rr = tracked(s, reg, cie_.ra_reg);
    if (!rr)
      return;
    if (initial)
      *rr = *tracked(*initial, reg, cie_.ra_reg);
    else
      *rr = RegRule{};
  }

  const Cie &cie_;
  uint64_t vaddr_;
  bool eh_;
  Meter &meter_;
};

class Parser {
public:
  Parser(const CfiSection &s, CfiStats &st, Meter &meter)
      : sec_(s), st_(st), meter_(meter) {}

  // Every FDE entry of the section, in section order.
  std::vector<FdeRef> entries() {
    std::vector<FdeRef> refs;
    Reader r(sec_.data);
    while (!r.at_end() && meter_.step()) { // an entry costs a step
      uint64_t len = r.fixed<uint32_t>();
      bool dwarf64 = len == 0xffffffffu;
      if (dwarf64)
        len = r.fixed<uint64_t>();
      if (r.bad())
        break;
      if (len == 0) {
        if (sec_.eh_frame)
          break; // the terminator
        continue;
      }
      size_t body = r.pos();
      if (len > sec_.data.size() - body) {
        st_.bad_entries++;
        break;
      }
      size_t end = body + len;
      Reader e(sec_.data, body);
      e.set_end(end);
      uint64_t id = dwarf64 ? e.fixed<uint64_t>() : e.fixed<uint32_t>();
      bool is_cie = sec_.eh_frame
                        ? id == 0
                        : id == (dwarf64 ? ~uint64_t{0} : 0xffffffffu);
      if (!is_cie) {
        uint64_t cie_at = sec_.eh_frame ? body - id : id;
        if (sec_.eh_frame && id > body)
          cie_at = UINT64_MAX;
        FdeRef f;
        f.cie_at = cie_at;
        f.body = body;
        f.end_pos = end;
        f.dwarf64 = dwarf64;
        if (fde_range(f))
          refs.push_back(f);
        else
          st_.bad_entries++;
      }
      r = Reader(sec_.data, end);
    }
    return refs;
  }

  // One FDE's rows (its range already read by fde_range); false if bad.
  bool rows_of(const FdeRef &f, FdeRows &out) {
    out.begin = out.end = 0;
    out.rows.clear();
    Reader e = after_cie_pointer(f);
    return parse_fde(e, f.cie_at, out);
  }

private:
  // A reader of an FDE's body, past its CIE pointer.
  Reader after_cie_pointer(const FdeRef &f) const {
    Reader e(sec_.data, f.body);
    e.set_end(f.end_pos);
    if (f.dwarf64)
      e.fixed<uint64_t>();
    else
      e.fixed<uint32_t>();
    return e;
  }

  // The range an FDE covers, from its header (no instruction run).
  bool fde_range(FdeRef &f) {
    FdeRows none;
    Reader e = after_cie_pointer(f);
    if (!fde_header(e, f.cie_at, none))
      return false;
    f.begin = none.begin;
    f.end = none.end;
    return true;
  }

  Cie *cie_at(uint64_t off) {
    auto it = cies_.find(off);
    if (it != cies_.end())
      return it->second ? &*it->second : nullptr;
    auto &slot = cies_[off];
    if (off >= sec_.data.size())
      return nullptr;
    Reader r(sec_.data, off);
    uint64_t len = r.fixed<uint32_t>();
    bool dwarf64 = len == 0xffffffffu;
    if (dwarf64)
      len = r.fixed<uint64_t>();
    size_t body = r.pos();
    if (r.bad() || len == 0 || len > sec_.data.size() - body)
      return nullptr;
    r.set_end(body + len);
    uint64_t id = dwarf64 ? r.fixed<uint64_t>() : r.fixed<uint32_t>();
    if (sec_.eh_frame ? id != 0 : id != (dwarf64 ? ~uint64_t{0} : 0xffffffffu))
      return nullptr;
    Cie c;
    uint8_t version = r.fixed<uint8_t>();
    if (version != 1 && version != 3 && version != 4)
      return nullptr;
    std::string_view aug = r.cstr();
    if (version == 4) {
      uint8_t addr_size = r.fixed<uint8_t>();
      r.fixed<uint8_t>(); // segment selector size
      if (addr_size != 8)
        return nullptr;
    }
    c.code_align = r.uleb();
    c.data_align = r.sleb();
    c.ra_reg = version == 1 ? r.fixed<uint8_t>() : r.uleb();
    if (!aug.empty() && aug[0] == 'z') {
      c.has_z = true;
      uint64_t aug_len = r.uleb();
      size_t aug_end = r.pos() + aug_len;
      for (size_t i = 1; i < aug.size() && !r.bad(); i++) {
        switch (aug[i]) {
        case 'L':
          r.fixed<uint8_t>();
          break;
        case 'R':
          c.fde_enc = r.fixed<uint8_t>();
          break;
        case 'P': {
          uint8_t enc = r.fixed<uint8_t>();
          r.pointer(enc & 0x7f, sec_.vaddr);
          break;
        }
        case 'S':
          c.signal = true;
          break;
        case 'B':
          break;
        default:
          i = aug.size(); // unknown: the length lets us skip it
        }
      }
      r = Reader(sec_.data.substr(0, body + len), aug_end);
    } else if (!aug.empty() && aug != "eh") {
      return nullptr; // cannot skip what it does not know
    }
    if (r.bad() || r.pos() > body + len)
      return nullptr;
    c.instructions = sec_.data.substr(r.pos(), body + len - r.pos());
    slot = c;
    return &*slot;
  }

  // The FDE's CIE and range; `e` left at its instructions.
  Cie *fde_header(Reader &e, uint64_t cie_off, FdeRows &out) {
    Cie *cie = cie_at(cie_off);
    if (!cie)
      return nullptr;
    uint8_t enc = sec_.eh_frame ? cie->fde_enc : 0x00;
    uint64_t begin = e.pointer(enc, sec_.vaddr);
    uint64_t range = e.pointer(enc & 0x0f, sec_.vaddr);
    if (cie->has_z)
      e.bytes(e.uleb());
    if (e.bad() || range > (uint64_t{1} << 32) || begin + range < begin)
      return nullptr;
    out.begin = begin;
    out.end = begin + range;
    return cie;
  }

  bool parse_fde(Reader &e, uint64_t cie_off, FdeRows &out) {
    Cie *cie = fde_header(e, cie_off, out);
    if (!cie)
      return false;
    // The rest of the entry (e was limited to the entry's end).
    size_t pos = e.pos();
    std::string_view code = sec_.data.substr(pos, e.limit() - pos);
    const uint64_t begin = out.begin;

    Interpreter in(*cie, sec_.vaddr, sec_.eh_frame, meter_);
    if (!cie->initial && !cie->initial_bad) {
      auto initial = std::make_shared<State>();
      uint64_t cie_loc = 0;
      if (in.run(cie->instructions, *initial, nullptr, cie_loc, nullptr))
        cie->initial = std::move(initial);
      else
        cie->initial_bad = true;
    }
    if (!cie->initial)
      return false;
    const State &initial = *cie->initial;
    State s = initial;
    uint64_t loc = begin;
    if (!in.run(code, s, &initial, loc, &out))
      return false;
    if (loc < out.end) {
      Row last{loc, to_rule(s, cie->signal)};
      if (!out.rows.empty() && out.rows.back().pc == loc)
        out.rows.back() = last;
      else if (meter_.row())
        out.rows.push_back(last);
      else
        return false;
    }
    // Rows past the FDE's end (bad advance) are dropped.
    while (!out.rows.empty() && out.rows.back().pc >= out.end)
      out.rows.pop_back();
    return true;
  }

  const CfiSection &sec_;
  CfiStats &st_;
  Meter &meter_;
  std::map<uint64_t, std::optional<Cie>> cies_;
};

} // namespace

std::vector<Row> parse_cfi(const CfiSection &section, CfiStats *stats,
                           const CfiBudget &budget) {
  CfiStats local;
  CfiStats &st = stats ? *stats : local;
  Meter meter(budget, st);
  Parser parser(section, st, meter);
  std::vector<FdeRef> refs = parser.entries();
  // In address order; of FDEs that begin together, the first in the
  // section is kept.
  std::stable_sort(
      refs.begin(), refs.end(),
      [](const FdeRef &a, const FdeRef &b) { return a.begin < b.begin; });
  // Room for the rows at once (large files hold about a row per 3.5 bytes
  // of .eh_frame: libLLVM 1.44M rows in 5 MB): reserved pages never
  // written cost no memory, and growing by doubling held two copies.
  std::vector<Row> out;
  out.reserve(std::min<uint64_t>(section.data.size() / 2, budget.max_rows) +
              refs.size() + 1);
  uint64_t covered_to = 0;
  auto push = [&](const Row &r) {
    if (!out.empty() && out.back().pc == r.pc)
      out.back() = r;
    else if (out.empty() || out.back().rule != r.rule)
      out.push_back(r);
  };
  FdeRows rows; // one FDE's, reused
  for (const FdeRef &f : refs) {
    if (!meter.ok())
      break;
    if (!parser.rows_of(f, rows)) {
      st.bad_entries++;
      continue;
    }
    st.fdes++;
    if (rows.end <= rows.begin || rows.begin == 0)
      continue;
    if (f.begin < covered_to)
      continue; // overlaps the previous FDE: keep the first
    if (!out.empty() && f.begin > covered_to)
      push(Row{covered_to, Rule{}}); // a gap
    for (const Row &r : rows.rows) {
      if (r.rule.kind == UW_RULE_UNSUPPORTED)
        st.unsupported_rows++;
      push(r);
    }
    covered_to = f.end;
  }
  if (!meter.ok())
    return {};
  if (!out.empty())
    push(Row{covered_to, Rule{}});
  return out;
}

std::vector<Row> clip_rows(std::vector<Row> rows,
                           std::vector<std::pair<uint64_t, uint64_t>> ranges,
                           uint64_t *dropped) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto &r : ranges) {
    if (r.second <= r.first)
      continue;
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  // Rows that all lie in one range, in order, each rule differing from the
  // one before, begun by a rule and ended by a gap (as parse_cfi and
  // merge_rows leave them): clipping would copy them as they are. Not
  // copied: a large file's rows twice were the peak of its table's build.
  auto as_clipped = [&rows] {
    if (rows.empty() || rows.front().rule.kind == UW_RULE_NONE ||
        rows.back().rule.kind != UW_RULE_NONE)
      return false;
    for (size_t i = 1; i < rows.size(); i++)
      if (rows[i].pc <= rows[i - 1].pc || rows[i].rule == rows[i - 1].rule)
        return false;
    return true;
  };
  for (const auto &r : merged)
    if (!rows.empty() && rows.front().pc >= r.first &&
        rows.back().pc <= r.second && as_clipped())
      return rows;
  std::vector<Row> out;
  auto push = [&](uint64_t pc, const Rule &rule) {
    if (!out.empty() && out.back().pc == pc)
      out.back().rule = rule;
    else if (out.empty() || out.back().rule != rule)
      out.push_back(Row{pc, rule});
  };
  size_t k = 0; // the first range that may still meet a row
  for (size_t i = 0; i < rows.size(); i++) {
    if (rows[i].rule.kind == UW_RULE_NONE)
      continue; // gaps need no rows: each piece below ends itself
    const uint64_t lo = rows[i].pc;
    const uint64_t hi = i + 1 < rows.size() ? rows[i + 1].pc : lo;
    while (k < merged.size() && merged[k].second <= lo)
      k++;
    bool kept = false;
    for (size_t j = k; j < merged.size() && merged[j].first < hi; j++) {
      uint64_t a = std::max(lo, merged[j].first);
      uint64_t b = std::min(hi, merged[j].second);
      if (a >= b)
        continue;
      push(a, rows[i].rule);
      push(b, Rule{});
      kept = true;
    }
    if (!kept && dropped)
      (*dropped)++;
  }
  return out;
}

uint64_t covered_bytes(const std::vector<Row> &rows) {
  uint64_t n = 0;
  for (size_t i = 0; i + 1 < rows.size(); i++)
    if (rows[i].rule.kind != UW_RULE_NONE)
      n += rows[i + 1].pc - rows[i].pc;
  return n;
}

std::vector<Row> merge_rows(const std::vector<Row> &primary,
                            const std::vector<Row> &secondary) {
  // The rule each list gives at `pc`, walking both forward.
  std::vector<uint64_t> points;
  for (const Row &r : primary)
    points.push_back(r.pc);
  for (const Row &r : secondary)
    points.push_back(r.pc);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  size_t a = 0, b = 0;
  std::vector<Row> out;
  for (uint64_t pc : points) {
    while (a < primary.size() && primary[a].pc <= pc)
      a++;
    while (b < secondary.size() && secondary[b].pc <= pc)
      b++;
    Rule ra = a ? primary[a - 1].rule : Rule{};
    Rule rb = b ? secondary[b - 1].rule : Rule{};
    Rule r = ra.kind != UW_RULE_NONE ? ra : rb;
    if (out.empty() || out.back().rule != r)
      out.push_back(Row{pc, r});
  }
  return out;
}

} // namespace offcpu::unwind
