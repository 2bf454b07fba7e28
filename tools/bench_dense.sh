#!/bin/bash
# tools/bench_dense.sh: issue 14's speed table in one device call: Llama-3.2-3B-, Gemma-3-4B-,
# Gemma-3-12B- and Phi-3-mini-shaped models (random weights, synthesized on the device with the
# new build's zrun-synth presets), Q4_K_M and Q8_0, zrun `bench --graph on -p 512 -n 128 -r 3`
# and llama.cpp (shared/peer/run-peer.sh, graphs on and off) on the same file, then a markdown
# table: GB/token, zrun tg128 and its fraction of the measured read bandwidth, llama.cpp tg128,
# pp512 of both, and zrun's launches per token. With ROOT/base/bin/zrun present (BASE=1) the
# base build runs too (a "before" column on the same files).
#   tools/bench_dense.sh ROOT PEERDIR [MODELS]      MODELS: comma list of NAME:TYPE, default
#     llama-3b:q4_k_m,g3-4b:q4_k_m,g3-12b:q4_k_m,phi3-mini:q4_k_m,llama-3b:q8_0,g3-4b:q8_0,g3-12b:q8_0,phi3-mini:q8_0
# ROOT/new/bin/{zrun,zrun-synth}; ROOT/lib on LD_LIBRARY_PATH; PEERDIR as get-llama-cpp.sh made it;
# run-peer.sh is taken from beside PEERDIR or $PEERSCRIPT. Logs and the table go to $OUT.
set -u
D=$(cd "${1:?usage: bench_dense.sh ROOT PEERDIR [MODELS]}" && pwd); P=${2:?PEERDIR}
MODELS=${3:-llama-3b:q4_k_m,g3-4b:q4_k_m,g3-12b:q4_k_m,phi3-mini:q4_k_m,llama-3b:q8_0,g3-4b:q8_0,g3-12b:q8_0,phi3-mini:q8_0}
PEERSCRIPT=${PEERSCRIPT:-$(dirname "$P")/run-peer.sh}
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=${OUT:-/tmp/bench-dense}; mkdir -p "$O"; S=/tmp/m; mkdir -p $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
declare -A shape
shape[llama-3b]="--arch llama --shape llama3.2-3b"
shape[g3-4b]="--arch gemma3 --shape gemma3-4b"
shape[g3-12b]="--arch gemma3 --shape gemma3-12b"
shape[phi3-mini]="--arch phi3 --embd 3072 --layers 32 --heads 32 --kv-heads 32 --ff 8192 --vocab 32064"
builds="new"; [ "${BASE:-0}" = 1 ] && [ -x "$D/base/bin/zrun" ] && builds="base new"
for spec in ${MODELS//,/ }; do
  s=${spec%%:*}; t=${spec##*:}; m=$S/$s-$t.gguf
  t0=$(date +%s)
  "$D/new/bin/zrun-synth" -o "$m" ${shape[$s]} --type "$t" -q -t 16 || { echo "synth $spec failed"; continue; }
  echo "synth $spec $(( $(date +%s) - t0 )) s"
  for b in $builds; do
    "$D/$b/bin/zrun" bench -m "$m" --graph on -p 512 -n 128 -r 3 -o jsonl 2>>"$O/zrun.err" | sed "s|^|$b $s-$t |" >> "$O/zrun.txt"
  done
  timeout 300 bash "$PEERSCRIPT" "$P" "$m" -p 512 -n 128 -r 3 2>>"$O/peer.err" | sed "s|^|$s-$t |" >> "$O/peer.txt"
  rm -f "$m"
done
python3 - "$O" <<'PY' | tee "$O/table.md"
import json, re, sys, os
o = sys.argv[1]; z = {}; p = {}
for l in open(os.path.join(o, 'zrun.txt')):
    b, k, js = l.split(' ', 2)
    if js.startswith('{'):
        r = json.loads(js); z.setdefault(k, {}).setdefault(b, {})[r['test']] = r
if os.path.exists(os.path.join(o, 'peer.txt')):
    for l in open(os.path.join(o, 'peer.txt')):
        m = re.match(r"(\S+) RESULT llama\.cpp graphs=(\w+) test=(\w+) tps_mean=([\d.]+)", l)
        if m: p[(m[1], m[2], m[3])] = float(m[4])
print("| model | build | GB/tok | zrun tg128 (graph) | % BW | kernels/token | llama.cpp tg128 | zrun pp512 | llama.cpp pp512 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for k, bs in z.items():
    for b, d in bs.items():
        tg, pp = d.get('tg128'), d.get('pp512')
        print("| %s | %s | %.2f | %s | %s | %s | %s | %s | %s |" % (k, b, tg['bytes_per_token'] / 1e9 if tg else 0,
            "%.1f ± %.1f" % (tg['median_ts'], tg['sd_ts']) if tg else '-',
            "%.0f%%" % tg['bw_pct'] if tg and tg.get('bw_pct') else '-', tg.get('kernels_per_token', '-') if tg else '-',
            "%.1f" % p[(k, 'on', 'tg128')] if (k, 'on', 'tg128') in p else '-', "%.0f" % pp['median_ts'] if pp else '-',
            "%.0f" % p[(k, 'on', 'pp512')] if (k, 'on', 'pp512') in p else '-'))
PY
grep -m3 -i 'error\|fail' "$O/zrun.err" "$O/peer.err" 2>/dev/null
