// The kinds of lock `offcpu lock` tells apart (offcpu_lock_kind, from
// lock:contention_begin's flags) by the names its reports and -Y use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace offcpu {

// "mutex", "rwsem:write", "mutex:spin"... ; "lock" for a kind out of range.
std::string lock_kind_name(uint32_t kind);

// The kind of a name lock_kind_name gives, or of a family without its side
// ("rwsem" for both sides): a set of offcpu_lock_kind bits; none if unknown.
std::optional<uint32_t> lock_kinds_named(const std::string &name);

// Every name -Y accepts, comma separated (for messages and help).
std::string lock_kind_names();

} // namespace offcpu
