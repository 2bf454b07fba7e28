#!/bin/bash
# One GPU-machine run for the prefill (a helper for the device tool, not a test): the kernel
# tests and the backend tests, then zrun bench pp512 on synthesized models, then the per-kernel
# prefill profile (zrun-cuda-timing -g -P) of the first model.
#   gpu_run_prefill.sh DIR [MODELS]
# DIR holds bin/ (zrun, zrun-synth, zrun-cuda-timing, and any of test_kernels, test_cuda_backend),
# lib/ (libpcre2-8.so.0) and, for the tests that read fixtures, shared/. MODELS: shape:type words,
# default llama3-8b f16 and q4_0, llama3.2-1b f16. Logs go to $OUT (or /tmp/zr-out); the
# summary is printed last.
set -u
D=$(cd "$1" && pwd)
MODELS=${2:-"llama3-8b:q4_0 llama3-8b:f16 llama3.2-1b:f16"}
O=${OUT:-/tmp/zr-out}
mkdir -p "$O"
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}" ZR_SHARED="$D/shared" ZRUN="$D/bin/zrun"
T0=$(date +%s)
el() { echo "$(( $(date +%s) - T0 )) s"; }
S="$O/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$S" 2>&1
if [ -x "$D/bin/test_kernels" ]; then
  timeout 300 "$D/bin/test_kernels" > "$O/tests.log" 2>&1
  echo "test_kernels: exit $? ($(el))" >> "$S"
fi
if [ -x "$D/bin/test_cuda_backend" ]; then
  timeout 300 "$D/bin/test_cuda_backend" > "$O/backend.log" 2>&1
  echo "test_cuda_backend: exit $? ($(el))" >> "$S"
fi
grep -E "FAIL|check failed|attn_prefill.*(M 200|M  65)|prefill_f16" "$O/tests.log" 2>/dev/null | head -20 >> "$S"
[ -f "$O/backend.log" ] && { echo "-- backend:"; grep -E "FAIL|check failed|^  prefill " "$O/backend.log" | head -24; } >> "$S"
for spec in $MODELS; do
  IFS=: read -r s ty <<< "$spec"
  m=/tmp/zr-pre-$s-$ty.gguf
  [ -f "$m" ] || "$D/bin/zrun-synth" --shape "$s" --type "$ty" -o "$m" > /dev/null 2>&1
  echo "== $s $ty ($(el))" >> "$O/bench.txt"
  "$D/bin/zrun" bench -m "$m" -p 512 -n 0 -r 3 >> "$O/bench.txt" 2>&1
  if [ "$spec" = "${MODELS%% *}" ] && [ -x "$D/bin/zrun-cuda-timing" ]; then
    "$D/bin/zrun-cuda-timing" -m "$m" -p 512 -n 1 -r 1 -g -P > "$O/profile.txt" 2>&1
    echo "profile $s $ty: exit $? ($(el))" >> "$S"
  fi
  rm -f "$m"
done
grep -E "^==|pp512|rror" "$O/bench.txt" >> "$S"
echo "done ($(el))" >> "$S"
cat "$S"
