#!/usr/bin/env bash
# llama.cpp's logits as golden files (the oracle, ../shared/oracle: llama.cpp de3ff815, CPU, n_ctx
# 512, F32 KV cache, one batch) for models zrun-synth writes, on the F32 twin of each (every tensor
# dequantized by ggml), so zrun's F32 reference is compared with llama.cpp's math alone. Reads
# "NAME ZRUN-SYNTH-ARGS" lines on standard input and writes test/data/OUT/NAME.f32: the rows of the
# positions in ROWS of the logits of TOKENS (keep both in step with the tests that read them).
#   tools/oracle_goldens.sh ZRUN_SYNTH ZFX_DIR OUT < CASES   (ZFX_DIR: ../shared/oracle/build.sh DEST)
# tools/oracle_arch_goldens.sh and tools/oracle_moe_goldens.sh hold the cases.
set -euo pipefail
synth=$1; zfx_dir=$2
here=$(cd "$(dirname "$0")/.." && pwd); out=$here/test/data/$3
mkdir -p "$out"
export ZFX_LIBDIR=$zfx_dir/lib/cpu
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
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
done
