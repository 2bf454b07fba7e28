#!/usr/bin/env bash
# tools/bench_moe.sh: issue 15's speed check on a GPU machine: mixture-of-experts models of
# Qwen3-30B-A3B's shape (Q4_K_M, Q8_0) and Mixtral-8x7B's (Q4_K_M), synthesized one at a time
# (the 30B Q8_0 is ~32 GB), `zrun bench --graph both` (tg GB/s and % BW over the bytes a token
# reads: the chosen experts only) and llama.cpp on the same file (peer/run-peer.sh), then deleted.
#
#   tools/bench_moe.sh BIN PEER [MODELS]
#     BIN     a folder with zrun and zrun-synth (or a build folder: BIN/zrun, BIN/tools/zrun-synth)
#     PEER    llama.cpp made by ../shared/peer/get-llama-cpp.sh ("none": zrun alone)
#     MODELS  comma-separated SHAPE:TYPE (default qwen3-30b-a3b:q4_k_m,qwen3-30b-a3b:q8_0,mixtral-8x7b:q4_k_m;
#             tiny-moe:q4_k_m tries the script out)
# Environment: PP, TG, REPS (default 512, 128, 3), GRAPH (zrun bench --graph, default both),
# PEER_SCRIPTS (the folder of run-peer.sh, default ../shared/peer), SCRATCH (default /tmp/zrun-moe-models), OUT
# (raw outputs: zrun.jsonl, zrun.err, peer.txt, log.txt; default ./bench-moe-out).
set -u
bin=$(cd "$1" && pwd); peer=$2; models=${3:-qwen3-30b-a3b:q4_k_m,qwen3-30b-a3b:q8_0,mixtral-8x7b:q4_k_m}
here=$(cd "$(dirname "$0")" && pwd); peer_scripts=${PEER_SCRIPTS:-"$here/../../shared/peer"}
[ -d "$peer_scripts" ] || peer_scripts="$here/../shared/peer"
pp=${PP:-512}; tg=${TG:-128}; reps=${REPS:-3}; scratch=${SCRATCH:-/tmp/zrun-moe-models}; out=${OUT:-bench-moe-out}
zrun="$bin/zrun"; synth="$bin/zrun-synth"; [ -x "$synth" ] || synth="$bin/tools/zrun-synth"
mkdir -p "$out" "$scratch"; : > "$out/zrun.jsonl"; : > "$out/zrun.err"; : > "$out/peer.txt"; : > "$out/log.txt"
say() { echo "$*" | tee -a "$out/log.txt" >&2; }
for spec in ${models//,/ }; do
  shape=${spec%%:*}; type=${spec##*:}; model="$scratch/$shape-$type.gguf"
  case "$shape" in
    qwen3-30b-a3b) args=(--arch qwen3moe --shape qwen3-30b-a3b) ;;
    mixtral-8x7b) args=(--arch llama --shape mixtral-8x7b) ;;
    tiny-moe) args=(--arch qwen3moe) ;;
    *) say "unknown shape '$shape'"; continue ;;
  esac
  t0=$(date +%s)
  "$synth" -q -o "$model" "${args[@]}" --type "$type" >>"$out/log.txt" 2>&1 || { say "$spec: zrun-synth failed"; rm -f "$model"; continue; }
  say "$spec: synthesized $(stat -c %s "$model") bytes in $(( $(date +%s) - t0 )) s"
  "$zrun" info "$model" | grep -E "experts:|layers" >>"$out/log.txt"
  "$zrun" bench -m "$model" --graph "${GRAPH:-both}" -p "$pp" -n "$tg" -r "$reps" -o jsonl >>"$out/zrun.jsonl" 2>>"$out/zrun.err" \
    || say "$spec: zrun bench failed (exit $?; see zrun.err)"
  if [ "$peer" != none ]; then
    bash "$peer_scripts/run-peer.sh" "$peer" "$model" -p "$pp" -n "$tg" -r "$reps" 2>>"$out/log.txt" | sed "s|^|$spec |" >>"$out/peer.txt" \
      || say "$spec: run-peer.sh failed"
  fi
  rm -f "$model"
done
# one line per test: zrun's t/s, GB/s and % BW (over the chosen experts' bytes), then llama.cpp's RESULT lines
python3 - "$out/zrun.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    bw = "%.0f GB/s, %.0f%% BW" % (r["gbps"], r["bw_pct"]) if r.get("gbps") else ""
    print("zrun %-28s %-6s %-6s %8.1f t/s  %s  (%.2f GB/token read)" % (r["model_type"], r["mode"], r["test"], r["median_ts"], bw, r["bytes_per_token"] / 1e9))
PY
cat "$out/peer.txt"
