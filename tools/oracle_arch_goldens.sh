#!/usr/bin/env bash
# Regenerates test/data/oracle_archs/*.f32: llama.cpp's logits (the oracle, ../shared/oracle:
# llama.cpp de3ff815, CPU, n_ctx 512, F32 KV cache, one batch) for the gemma2 / gemma3 / phi3
# models test_arch_oracle synthesizes, on the F32 twin of each (every tensor dequantized by ggml),
# so zrun's F32 reference is compared with llama.cpp's math alone. Only the rows of the positions
# in ROWS are kept (before, at and past the sliding window of 16).
#   tools/oracle_arch_goldens.sh ZRUN_SYNTH ZFX_DIR     (ZFX_DIR: ../shared/oracle/build.sh DEST)
# (tools/oracle_goldens.sh makes them, with the tokens and rows test_moe and test_archs read.)
set -euo pipefail
exec "$(dirname "$0")/oracle_goldens.sh" "$1" "$2" oracle_archs <<'CASES'
gemma2-F32 --arch gemma2 --layers 4 --seed 3 --type f32
gemma2-F16 --arch gemma2 --layers 4 --seed 3 --type f16
gemma2-Q4_K_M --arch gemma2 --layers 4 --seed 3 --type q4_k_m
gemma3-F32 --arch gemma3 --layers 7 --seed 4 --type f32
gemma3-F16 --arch gemma3 --layers 7 --seed 4 --type f16
gemma3-Q4_K_M --arch gemma3 --layers 7 --seed 4 --type q4_k_m
gemma2-caps-F32 --arch gemma2 --layers 4 --seed 9 --attn-softcap 0.5 --final-softcap 5 --type f32
gemma3-cap-F32 --arch gemma3 --layers 7 --seed 10 --final-softcap 5 --type f32
phi3-F32 --arch phi3 --layers 3 --seed 5 --orig-ctx 256 --type f32
phi3-F16 --arch phi3 --layers 3 --seed 5 --orig-ctx 256 --type f16
phi3-Q4_K_M --arch phi3 --layers 3 --seed 5 --orig-ctx 256 --type q4_k_m
phi3-short-F32 --arch phi3 --layers 2 --seed 6 --orig-ctx 1024 --type f32
phi3-plain-F32 --arch phi3 --layers 2 --seed 7 --type f32
phi3-partial-F32 --arch phi3 --layers 3 --seed 11 --orig-ctx 256 --rope-dim 48 --type f32
CASES
