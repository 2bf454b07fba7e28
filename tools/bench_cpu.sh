#!/usr/bin/env bash
# CPU decode benchmark (not a test): tokens/s of the CPU backend on stories260K and on a
# synthesized ~100M-parameter Q4_0 llama (embd 768, 12 layers, 12 heads, ff 2048, vocab 32000),
# with 1 thread and with all cores.
#   tools/bench_cpu.sh BUILD_DIR [SHARED_DIR]
# Run it on an otherwise idle machine: other processes on the cores change the figures.
set -eu
build=${1:?usage: tools/bench_cpu.sh BUILD_DIR [SHARED_DIR]}
shared=${2:-$(dirname "$0")/../../shared}
zrun="$build/zrun"
synth="$build/tools/zrun-synth"
model="$build/bench-llama100M-q4_0.gguf"
if [ ! -f "$model" ]; then
  "$synth" -o "$model" --arch llama --embd 768 --layers 12 --heads 12 --kv-heads 12 --ff 2048 \
    --vocab 32000 --ctx 2048 --untied --type q4_0 --seed 1 -q
fi
cores=$(nproc)
if [ -f "$shared/models/stories260K.gguf" ]; then
  for t in 1 "$cores"; do "$zrun" bench --device cpu -m "$shared/models/stories260K.gguf" -t "$t" -p 16 -n 256 -r 3; done
fi
for t in 1 "$cores"; do "$zrun" bench --device cpu -m "$model" -t "$t" -p 16 -n 32 -r 3; done
