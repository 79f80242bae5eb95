#!/bin/bash
# The folders of src/ in layers: a file may include its own folder's headers
# and those of lower layers, never a higher or same-layer folder's. This
# keeps the folder graph free of loops (README, "How it works").
#   tools/layering.sh [source dir]          check; lists each offending include
#   tools/layering.sh --graph [source dir]  the folder graph from #include lines
#   tools/layering.sh --self-test           an upward include must be caught
set -euo pipefail

# Bottom to top; folders on one line are one layer. offcpu is include/offcpu/,
# the structs shared with the BPF side; main is src/main.cpp.
LAYERS=(
  "offcpu"
  "util"
  "model"
  "probe output"
  "collect"
  "symbolize"
  "unwind"
  "cli"
  "run"
  "main"
)

# Every quoted include of src/ and include/offcpu/ naming a folder, as
# "file:line from to".
edges() {
  local root=$1
  (cd "$root" && grep -rn --include='*.h' --include='*.cpp' --include='*.c' \
    -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' src include) |
    sed -E 's#^(([^/]+)/([^/:]+)(/[^:]*)?):([0-9]+):.*include[[:space:]]+"([a-z_]+)/.*#\1:\5 \3 \6#' |
    awk '{ from = $2; if ($1 ~ /^src\/main\.cpp:/) from = "main";
           print $1, from, $3 }'
}

rank_of() {
  local i
  for i in "${!LAYERS[@]}"; do
    for f in ${LAYERS[$i]}; do
      [ "$f" = "$1" ] && { echo "$i"; return; }
    done
  done
  echo -1
}

check() {
  local root=$1 bad=0 where from to rf rt
  declare -A rank
  while read -r where from to; do
    [ "$from" = "$to" ] && continue
    [ -n "${rank[$from]:-}" ] || rank[$from]=$(rank_of "$from")
    [ -n "${rank[$to]:-}" ] || rank[$to]=$(rank_of "$to")
    rf=${rank[$from]} rt=${rank[$to]}
    if [ "$rf" -lt 0 ] || [ "$rt" -lt 0 ]; then
      echo "layering: $where: $from/ includes $to/: a folder without a layer" \
        "(add it to LAYERS in tools/layering.sh and to the README)"
      bad=1
    elif [ "$rt" -ge "$rf" ]; then
      echo "layering: $where: $from/ includes $to/, which is not below it" \
        "(move what both need into a lower folder)"
      bad=1
    fi
  done < <(edges "$root")
  if [ $bad -ne 0 ]; then
    return 1
  fi
  echo "layering: clean"
}

graph() {
  edges "$1" | awk '$2 != $3 { n[$2 " -> " $3]++ }
    END { for (e in n) printf "%s (%d)\n", e, n[e] }' | sort
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/src/util" "$tmp/src/run" "$tmp/include/offcpu"
  echo '#include "offcpu/shared.h"' >"$tmp/src/util/a.h"
  echo '#include "util/a.h"' >"$tmp/src/run/b.cpp"
  check "$tmp" >/dev/null || { echo "self-test: a clean tree failed"; return 1; }
  printf '#include <x.h>\n  #include "run/b.h"\n' >>"$tmp/src/util/a.h"
  local out
  if out=$(check "$tmp"); then
    echo "self-test: an upward include passed"
    return 1
  fi
  grep -q '^layering: src/util/a.h:3: util/ includes run/' <<<"$out" ||
    { echo "self-test: the offence was not named: $out"; return 1; }
  echo "layering self-test: ok"
}

case "${1:-}" in
--graph) graph "${2:-$(dirname "$0")/..}" ;;
--self-test) self_test ;;
*) check "${1:-$(dirname "$0")/..}" ;;
esac
