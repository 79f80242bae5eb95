#!/bin/bash
# clang-tidy over offcpu's own sources with the checks in .clang-tidy.
#   tools/tidy.sh [--function-size] [build dir, default build]
# --function-size: only readability-function-size (what CI runs: every
# function within .clang-tidy's limits; faster than all the checks).
# Exits non-zero on any finding (.clang-tidy makes every warning an error).
set -euo pipefail
checks=()
if [ "${1:-}" = "--function-size" ]; then
  checks=(--checks=-*,readability-function-size)
  shift
fi
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
tidy=$(command -v clang-tidy || command -v clang-tidy-14)
if [ ! -f "$build/compile_commands.json" ]; then
  cmake -B "$build" -S "$src" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi
cd "$src"
out=$(ls src/*/*.cpp src/main.cpp |
  xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet "${checks[@]}" 2>&1 ||
  true)
printf '%s\n' "$out" | grep -v "warnings\? generated\|Suppressed\|header-filter" |
  grep -v '^$' || true
if printf '%s\n' "$out" | grep -q ": error: "; then
  echo "tidy: findings above"
  exit 1
fi
echo "tidy: clean"
