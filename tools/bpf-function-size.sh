#!/bin/bash
# Fails if a function in bpf/ is longer than the limit (default 100 lines,
# from its first signature line to its closing brace), listing each one.
# The C++ side is checked by clang-tidy (tools/tidy.sh); BPF code is
# compiled by clang for the BPF target, which clang-tidy's database does
# not cover, so a line count it is.
# Usage: tools/bpf-function-size.sh [LIMIT] [FILE...]
#        tools/bpf-function-size.sh --list [FILE...]   every function's size
set -euo pipefail
cd "$(dirname "$0")/.."
list=0
if [ "${1:-}" = --list ]; then
  list=1
  shift
fi
limit=100
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  limit=$1
  shift
fi
if [ $# -eq 0 ]; then
  set -- bpf/*.bpf.c bpf/*.bpf.h
fi
# A function starts at a line in column 0 that opens a declaration (not a
# comment, preprocessor line, or the body of a struct, enum or initializer)
# and whose declaration has a parameter list before its opening brace; it
# ends at the first "}" in column 0 after that.
awk -v limit="$limit" -v list="$list" '
  FNR == 1 { decl = ""; start = 0; infn = 0 }
  infn {
    if ($0 ~ /^}/) {
      n = FNR - start + 1
      if (list) printf "%5d %s:%d %s\n", n, FILENAME, start, name
      else if (n > limit) {
        printf "%s:%d: %s is %d lines (at most %d)\n", FILENAME, start, name, n, limit
        bad++
      }
      infn = 0
    }
    next
  }
  /^[A-Za-z_]/ && decl == "" { decl = $0; start = FNR }
  /^[A-Za-z_]/ || decl != "" {
    if (decl != "" && FNR != start) decl = decl " " $0
    if ($0 ~ /;[ \t]*$/ || $0 ~ /^}/) { decl = ""; next }
    if ($0 ~ /\{[ \t]*$/) {
      if (decl ~ /\(/ && decl !~ /^(struct|union|enum)[^(]*\{/ && decl !~ /=[ \t]*\{/) {
        infn = 1
        tmp = decl
        gsub(/SEC\("[^"]*"\)/, "", tmp)
        # BPF_PROG(name, ...) and its kin: the name is the first argument.
        if (match(tmp, /BPF_[A-Z_]+\([A-Za-z_0-9]+/)) {
          tmp = substr(tmp, RSTART, RLENGTH)
          sub(/.*\(/, "", tmp)
          tmp = tmp "("
        }
        sub(/\(.*/, "", tmp)
        k = split(tmp, parts, /[ \t*]+/)
        name = parts[k]
      }
      decl = ""
    }
  }
  END { if (bad) exit 1 }
' "$@" || {
  echo "BPF functions over $limit lines: split them (the verifier checks" \
    "each path anyway; short functions are read and reviewed faster)" >&2
  exit 1
}
