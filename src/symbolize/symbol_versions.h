// glibc's symbol versions as people do not write them. A debug file's
// .symtab names versioned functions "clock_nanosleep@@GLIBC_2.17" (the
// default version) and "pthread_cond_wait@GLIBC_2.2.5" (an old one kept
// for old binaries); perf and BCC show the plain name.
#pragma once

#include <string_view>
#include <vector>

#include "symbolize/elf_file.h"

namespace offcpu {

// Among aliases of one address, whether `a` is the better name: fewer
// leading underscores (the public name: clock_nanosleep, not
// __clock_nanosleep), then the default version or none before an old one,
// then the shorter.
bool better_alias(const ElfSymbol &a, const ElfSymbol &b);

// Sorted symbols, one per address: each name without its version, except
// an old version whose plain name another function of the file has (the
// current pthread_cond_wait and pthread_cond_wait@GLIBC_2.2.5 stay apart).
void drop_symbol_versions(std::vector<ElfSymbol> &symbols);

// The name before "@" or "@@" (the whole name if none).
std::string_view unversioned(std::string_view name);

} // namespace offcpu
