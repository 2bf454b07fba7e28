#!/bin/bash
# One GPU-machine run of the kernels work (a helper for the device tool, not a test): device
# line, the gpu test programs, then a first speed measurement on synthesized models.
#   gpu_run_kernels.sh DIR [SHAPES] [TYPES]
# DIR holds bin/ (zrun, test_kernels, test_cuda_backend, zrun-cuda-timing, zrun-synth), lib/
# and shared/ (fixtures/, models/stories260K.gguf). Logs go to $OUT (or /tmp/zr-out).
set -u
D=$(cd "$1" && pwd)
SHAPES=${2:-"llama3.2-1b llama3-8b"}
TYPES=${3:-"f16 q8_0 q4_0 q4_k_m"}
O=${OUT:-/tmp/zr-out}
mkdir -p "$O" /tmp/zrb
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}" ZR_SHARED="$D/shared" ZR_BUILD=/tmp/zrb ZRUN="$D/bin/zrun"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$O/device.txt" 2>&1
nvidia-smi 2>&1 | sed -n 1,12p >> "$O/device.txt"
cat "$O/device.txt"
for t in test_kernels test_cuda_backend; do
  timeout 240 "$D/bin/$t" > "$O/$t.log" 2>&1
  echo "$t: exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$O/summary.txt"
done
grep -hE "check failed|FAIL|passed|failed" "$O"/test_*.log | head -40
# machine code of the hottest kernels (for instruction counts), when the fatbin came along
if [ -f "$D/kernels.fatbin" ] && command -v cuobjdump >/dev/null; then
  for k in matvec_q4_0 matvec_f16 matvec_q4_k; do
    echo "== $k"; cuobjdump -sass -fun "$k" "$D/kernels.fatbin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed 's/;.*//'
  done > "$O/sass.txt" 2>&1
fi
echo "== timing" | tee -a "$O/summary.txt"
for s in $SHAPES; do
  for ty in $TYPES; do
    if [ $(( $(date +%s) - T0 )) -gt ${DEADLINE:-450} ]; then echo "deadline: skipping $s $ty" | tee -a "$O/timing.txt"; continue; fi
    m=/tmp/zr-$s-$ty.gguf
    t1=$(date +%s)
    "$D/bin/zrun-synth" -o "$m" --shape "$s" --type "$ty" -q -t "$(nproc)" || { echo "synth $s $ty failed"; continue; }
    t2=$(date +%s)
    timeout 180 "$D/bin/zrun-cuda-timing" -m "$m" -p 512 -n 128 -r 3 ${PROFILE:+-P} 2>>"$O/timing.err" | sed "s/^/$s-$ty /" | tee -a "$O/timing.txt"
    echo "  ($s $ty: synth $((t2 - t1)) s, timing $(( $(date +%s) - t2 )) s)" | tee -a "$O/timing.txt"
    rm -f "$m"
  done
done
tail -5 "$O/timing.err" 2>/dev/null
