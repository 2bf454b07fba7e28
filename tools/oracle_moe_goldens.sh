#!/usr/bin/env bash
# Regenerates test/data/oracle_moe/*.f32: llama.cpp's logits (the oracle, ../shared/oracle:
# llama.cpp de3ff815, CPU, n_ctx 512, F32 KV cache, one batch) for the mixture-of-experts models
# test_moe synthesizes (qwen3moe, and llama with Mixtral's expert layout), on the F32 twin of each
# (every tensor dequantized by ggml), so zrun's F32 reference is compared with llama.cpp's math
# alone. Only the rows of the positions in ROWS are kept.
#   tools/oracle_moe_goldens.sh ZRUN_SYNTH ZFX_DIR     (ZFX_DIR: ../shared/oracle/build.sh DEST)
# (tools/oracle_goldens.sh makes them, with the tokens and rows test_moe and test_archs read.)
set -euo pipefail
exec "$(dirname "$0")/oracle_goldens.sh" "$1" "$2" oracle_moe <<'CASES'
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
