#!/usr/bin/env bash
# tools/gpu_suite.sh: the GPU test programs of a build unpacked from tools/gpu_pack.sh, each under
# a time limit, with the environment meson test gives them; a line per program (exit status,
# seconds, its last counts) and every program's output in one log.
#   tools/gpu_suite.sh DIR SHARED [TESTS]
#     DIR     the unpacked folder (zrun, tools/, gpu/)
#     SHARED  a copy of ../shared (fixtures/, models/, vocab/: what the tests read)
#     TESTS   space-separated program names (default: all of DIR/gpu)
#   env: TLIM seconds per program (default 300); LOG the log (default $OUT/suite.log, else /tmp);
#   LD_LIBRARY_PATH as tools/gpu_pack.sh left it. Run from the source tree's root (ZR_SRC: the
#   committed goldens of test/data).
set -u
[ $# -ge 2 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
d=$(cd "$1" && pwd); shared=$(cd "$2" && pwd); tests=${3:-$(cd "$d/gpu" && ls)}
export ZR_SHARED="$shared" ZR_SRC="$(pwd)" ZR_BUILD="$(mktemp -d)" ZRUN="$d/zrun" ZRUN_SYNTH="$d/tools/zrun-synth" \
  ZRUN_LLAMA2C="$d/tools/zrun-llama2c"
export XDG_CACHE_HOME="$ZR_BUILD/xdg-cache" # zrun's plan cache (--plan-cache) goes there, not to the home
log=${LOG:-${OUT:-/tmp}/suite.log}; : > "$log"
bad=0
for t in $tests; do
  s=$(date +%s.%N)
  (cd "$ZR_BUILD" && timeout "${TLIM:-300}" "$d/gpu/$t") > "$ZR_BUILD/$t.out" 2>&1; rc=$?
  e=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "== $t rc=$rc ${e}s $(grep -E 'passed|failed' "$ZR_BUILD/$t.out" | tail -1)" | tee -a "$log"
  cat "$ZR_BUILD/$t.out" >> "$log"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || bad=$((bad + 1)) # 77: skipped (no usable GPU)
done
echo "$bad programs failed" | tee -a "$log"
[ "$bad" -eq 0 ]
