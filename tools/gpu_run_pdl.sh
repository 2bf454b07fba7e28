#!/bin/bash
# One GPU-machine run for programmatic dependent launch (a helper for the device tool, not a
# test): the graph test programs with PDL on (the default), then zrun bench tg128 eager and
# graph with ZRUN_PDL=0 and with PDL, on synthesized models, in one table.
#   gpu_run_pdl.sh DIR [MODELS]
# DIR holds bin/ (zrun, zrun-synth, test_graph_pdl, test_graph, and any of test_graph_models,
# test_cuda_backend, test_kernels), lib/ (libpcre2-8.so.0) and, for the tests that read
# fixtures, shared/. MODELS: shape:type words, default the 1B and 8B Q4_0 models and 1B F16.
# Logs go to $OUT (or /tmp/zr-out); the summary is printed last.
set -u
D=$(cd "$1" && pwd)
MODELS=${2:-"llama3.2-1b:q4_0 llama3.2-1b:f16 llama3-8b:q4_0"}
O=${OUT:-/tmp/zr-out}
mkdir -p "$O"
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}" ZR_SHARED="$D/shared"
unset ZRUN_PDL CUDA_GRAPH_ENABLE
T0=$(date +%s)
el() { echo "$(( $(date +%s) - T0 )) s"; }
S="$O/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$S" 2>&1
for t in test_graph_pdl test_graph test_graph_models test_cuda_backend test_kernels; do
  [ -x "$D/bin/$t" ] || continue
  timeout 300 "$D/bin/$t" > "$O/tests.log.$t" 2>&1
  echo "$t: exit $? ($(el))" >> "$S"
done
cat "$O"/tests.log.* > "$O/tests.log" && rm -f "$O"/tests.log.*
grep -E "FAIL|check failed|edges|per kernel|griddepcontrol" "$O/tests.log" | head -30 >> "$S"
for spec in $MODELS; do
  IFS=: read -r s ty <<< "$spec"
  m=/tmp/zr-pdl-$s-$ty.gguf
  [ -f "$m" ] || "$D/bin/zrun-synth" --shape "$s" --type "$ty" -o "$m" > /dev/null 2>&1
  for pdl in 0 1; do
    echo "== $s $ty ZRUN_PDL=$pdl ($(el))" >> "$O/bench.txt"
    ZRUN_PDL=$pdl "$D/bin/zrun" bench -m "$m" --graph both -p 0 -n 128 -r 5 >> "$O/bench.txt" 2>&1
  done
  rm -f "$m"
done
grep -E "^==|tg128|fallback|programmatic" "$O/bench.txt" >> "$S"
echo "done ($(el))" >> "$S"
cat "$S"
