#!/usr/bin/env bash
# Regenerates test/data/oracle_moe/*.f32: llama.cpp's logits (the oracle, ../shared/oracle:
# llama.cpp de3ff815, CPU, n_ctx 512, F32 KV cache, one batch) for the mixture-of-experts models
# test_moe synthesizes (qwen3moe, and llama with Mixtral's expert layout), on the F32 twin of each
# (every tensor dequantized by ggml), so zrun's F32 reference is compared with llama.cpp's math
# alone. Only the rows of the positions in ROWS are kept.
#   tools/oracle_moe_goldens.sh ZRUN_SYNTH ZFX_DIR     (ZFX_DIR: ../shared/oracle/build.sh DEST)
set -euo pipefail
synth=$1; zfx_dir=$2
here=$(cd "$(dirname "$0")/.." && pwd); out=$here/test/data/oracle_moe
mkdir -p "$out"
export ZFX_LIBDIR=$zfx_dir/lib/cpu
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# keep in step with test/test_moe.c
TOKENS="2 71 294 436 413 394 35 133 63 256 392 233 244 336 197 406 110 51 252 17 460 430 202 224 314 393 395 45 88 301 19 477 150 222 9 380 265 128 499 64"
ROWS="0 5 15 16 17 24 31 32 39"
echo "$TOKENS" > "$work/tokens"
while read -r name args; do
  [ -z "$name" ] && continue
  "$synth" -q -o "$work/m.gguf" $args
  model=$work/m.gguf
  case "$args" in *"--type f32"*) ;; *) "$zfx_dir/zfx" dequant "$work/m.gguf" "$work/twin.gguf" >/dev/null; model=$work/twin.gguf ;; esac
  timeout 300 "$zfx_dir/zfx" eval "$model" "$work/tokens" "$work/all.f32" >/dev/null 2>&1 || { echo "$name: zfx eval failed or hung" >&2; exit 1; }
  : > "$out/$name.f32"
  for r in $ROWS; do dd if="$work/all.f32" bs=2048 skip="$r" count=1 status=none >> "$out/$name.f32"; done
  echo "$name: $(stat -c %s "$out/$name.f32") bytes"
done <<'CASES'
qwen3moe-F32 --arch qwen3moe --layers 3 --seed 5 --type f32
qwen3moe-F16 --arch qwen3moe --layers 3 --seed 5 --type f16
qwen3moe-Q4_K_M --arch qwen3moe --layers 3 --seed 5 --type q4_k_m
qwen3moe-wide-F32 --arch qwen3moe --layers 2 --seed 7 --experts 64 --experts-used 8 --ff-expert 32 --type f32
llama-moe-F32 --arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type f32
llama-moe-F16 --arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type f16
llama-moe-Q4_K_M --arch llama --layers 3 --seed 6 --experts 8 --experts-used 2 --type q4_k_m
llama-moe-top1-F32 --arch llama --layers 2 --seed 8 --experts 4 --experts-used 1 --ff-expert 128 --type f32
qwen3moe-mixed-Q4_K --arch qwen3moe --layers 2 --seed 12 --type q4_k --up-type q8_0
CASES
