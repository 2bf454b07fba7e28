#!/bin/bash
# One GPU-machine run of the decode-speed work (a helper for the device tool, not a test): device
# line, the gpu test programs, the matrix-vector kernels alone (zrun-mv-bench: every launch
# shape on the 1B and 8B matrices), then decode speed on synthesized models.
#   gpu_run_perf.sh DIR [MODELS]
# DIR holds bin/ (zrun, test_kernels, test_cuda_backend, zrun-cuda-timing, zrun-synth,
# zrun-mv-bench), lib/, shared/ (fixtures/, models/stories260K.gguf) and kernels.fatbin.
# MODELS: shape:type[:P] words (P: also the per-kernel profile), default the 1B and 8B
# Q4_0/Q8_0/F16 models with profiles of the Q4_0 ones. Environment: MVBENCH (zrun-mv-bench
# flags, default all shapes; -q: the forward pass's only), TIMING (extra
# zrun-cuda-timing flags, e.g. -g: graph pass only), DEADLINE (s: later models are skipped).
# Logs go to $OUT (or /tmp/zr-out), at most 8 files (what the device tool brings back); the
# summary (the last lines printed) is what the reply carries.
set -u
D=$(cd "$1" && pwd)
MODELS=${2:-"llama3.2-1b:q4_0:P llama3.2-1b:q8_0 llama3.2-1b:f16 llama3-8b:q4_0:P llama3-8b:q8_0 llama3-8b:f16"}
O=${OUT:-/tmp/zr-out}
mkdir -p "$O" /tmp/zrb
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}" ZR_SHARED="$D/shared" ZR_BUILD=/tmp/zrb ZRUN="$D/bin/zrun"
T0=$(date +%s)
el() { echo "$(( $(date +%s) - T0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader > "$O/device.txt" 2>&1
for t in test_kernels test_cuda_backend; do
  timeout 200 "$D/bin/$t" > "$O/$t.log" 2>&1
  echo "$t: exit $? ($(el))" >> "$O/summary.txt"
done
grep -hE "check failed|FAIL" "$O"/test_*.log | head -20 >> "$O/summary.txt"
# registers and machine code of the hot kernels
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-resource-usage "$D/kernels.fatbin" 2>&1 | grep -A1 -E "Function matvec" > "$O/sass.txt"
  for k in matvec_q4_0 matvec_q8_0 matvec_f16; do
    echo "== $k"; cuobjdump -sass -fun "$k" "$D/kernels.fatbin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed 's/;.*//'
  done >> "$O/sass.txt" 2>&1
fi
timeout 150 "$D/bin/zrun-mv-bench" ${MVBENCH:-} > "$O/mv_bench.txt" 2>&1
echo "mv-bench: exit $? ($(el))" >> "$O/summary.txt"
for spec in $MODELS; do
  IFS=: read -r s ty prof <<< "$spec"
  if [ $(( $(date +%s) - T0 )) -gt ${DEADLINE:-400} ]; then echo "deadline: skipped $s $ty" >> "$O/summary.txt"; continue; fi
  m=/tmp/zr-$s-$ty.gguf
  t1=$(date +%s)
  "$D/bin/zrun-synth" -o "$m" --shape "$s" --type "$ty" -q -t "$(nproc)" || { echo "synth $s $ty failed" >> "$O/summary.txt"; continue; }
  t2=$(date +%s)
  timeout 150 "$D/bin/zrun-cuda-timing" -m "$m" -p 512 -n 128 -r 3 ${prof:+-P} ${TIMING:-} 2>>"$O/timing.err" | sed "s/^/$s-$ty /" >> "$O/timing.txt"
  echo "  ($s $ty: synth $((t2 - t1)) s, timing $(( $(date +%s) - t2 )) s)" >> "$O/timing.txt"
  rm -f "$m"
done
echo "== device: $(cat "$O/device.txt")"
cat "$O/summary.txt"
grep -E "per token" "$O/mv_bench.txt"
grep -E "t/s" "$O/timing.txt" | sed -E 's/ +/ /g'
echo "total $(el)"
