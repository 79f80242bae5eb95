#!/bin/bash
# Builds the libFuzzer targets with clang (ASan + UBSan + LeakSanitizer) and
# runs each for a bounded time on a corpus seeded with real files.
#   tools/fuzz.sh [seconds per target, default 60]
set -euo pipefail
secs=${1:-60}
src=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_BUILD:-$src/build-fuzz}
mkdir -p "$out"
flags="-g -O1 -std=c++17 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$src/src -I$src/include"
libs="$(pkg-config --libs libelf liblzma zlib)"
common="$src/src/symbolize/elf_file.cpp $src/src/symbolize/xz.cpp $src/src/util/safe_file.cpp"
text="$src/src/symbolize/proc_maps.cpp $src/src/symbolize/perf_map.cpp $src/src/symbolize/kallsyms.cpp $src/src/output/flamegraph.cpp $src/src/output/folded.cpp $src/src/util/utf8.cpp"
clang++ $flags -o "$out/fuzz_elf" "$src/tests/fuzz/fuzz_elf.cpp" $common $libs
clang++ $flags -o "$out/fuzz_text" "$src/tests/fuzz/fuzz_text.cpp" $text

# Seeds: real ELF files (with and without symbols), real /proc text.
mkdir -p "$out/corpus_elf" "$out/corpus_text"
for f in /bin/true /lib/x86_64-linux-gnu/libz.so.1 "$src/build/tests/fixture_pie" \
         "$src/build/tests/libfixture.so"; do
  [ -f "$f" ] && head -c 200000 "$f" > "$out/corpus_elf/$(basename "$f")"
done
cat /proc/self/maps > "$out/corpus_text/maps"
head -c 20000 /proc/kallsyms > "$out/corpus_text/kallsyms"
printf '7f0000001000 20 LazyCompile:*foo\n7f0000000000 100 Interpreter\n' > "$out/corpus_text/perfmap"
printf 'app;main;read 300\napp;main;write_[k] 100\n' > "$out/corpus_text/folded"
# Regression seed: a very deep stack once overflowed the SVG renderer.
{ head -c 20000 /dev/zero | tr '\0' ';'; echo " 5"; } > "$out/corpus_text/deep-stack"

status=0
for t in fuzz_elf fuzz_text; do
  corpus="$out/corpus_${t#fuzz_}"
  echo "fuzz: $t for ${secs}s"
  if ! "$out/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
       -artifact_prefix="$out/$t-" \
       -print_final_stats=1 "$corpus" > "$out/$t.log" 2>&1; then
    echo "fuzz: $t FAILED (see $out/$t.log)"; tail -40 "$out/$t.log"; status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$out/$t.log" | tail -2
  fi
done
exit $status
