#!/usr/bin/env bash
# tools/bench_table.sh: the speed table of the bench issue, reproduced in one call on a GPU
# machine, over any shape and weight type. For each model of --models (default: the issue-7 table,
# Llama-3-8B and Llama-3.2-1B shapes, vocab 128256; F16, Q8_0, Q4_0, and Llama-3-8B Q4_K_M) it
# synthesizes the GGUF with zrun-synth (one at a time: the 8B F16 is 16 GB), runs
# `zrun bench --graph both` and llama.cpp (peer/run-peer.sh, CUDA graphs on and off) on it,
# deletes it, and at the end prints one table (a row per model, with its shape as `zrun info`
# reads it from the file).
#
#   tools/bench_table.sh [options]
#     --bin DIR           prebuilt zrun and zrun-synth (skip the build); else build with meson + ninja
#     --build DIR         the build directory (default build-bench)
#     --lib DIR           extra shared libraries for prebuilt binaries (LD_LIBRARY_PATH)
#     --peer DIR          llama.cpp made by peer/get-llama-cpp.sh (default .dev/peer); --no-peer: none
#     --peer-scripts DIR  run-peer.sh and llama_bench.c (default ../shared/peer)
#     --vocab FILE        a GGUF whose tokenizer the models get (.xz is decompressed), given only to
#                         the shapes whose vocabulary is that file's size (the others get a synthesized
#                         vocabulary of their own size); default ../shared/vocab/ggml-vocab-llama-bpe.gguf.xz
#                         (128256 tokens); "none": synthesized for all
#     --models LIST       comma-separated SHAPE:TYPE (default 8b:f16,8b:q8_0,8b:q4_0,8b:q4_k_m,1b:f16,1b:q8_0,1b:q4_0)
#                         TYPE: any of zrun-synth --type: f16 bf16 f32 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k
#                         q4_k q5_k q6_k (every matrix of that type) and llama.cpp's mixes q2_k_mix (its
#                         Q2_K file) q3_k_m q4_k_m q5_k_m
#                         SHAPE, one of
#                           8b, 1b                  Llama-3-8B, Llama-3.2-1B (the issue-7 rows)
#                           tiny                    zrun-synth's tiny llama, to try the script out (CPU)
#                           a zrun-synth preset     llama3.2-1b llama3.2-3b llama3-8b gemma3-4b gemma3-12b
#                                                   qwen3-30b-a3b mixtral-8x7b (with the preset's --arch)
#                           a named class           llama-3b (= llama3.2-3b), qwen2.5-3b, qwen2.5-7b,
#                                                   qwen2.5-14b, qwen3-4b, mistral-7b, phi3-mini (below)
#                           NAME=ARCH/EMBD/LAYERS/HEADS/KV/FF/VOCAB[/HEADDIM]
#                                                   explicit dims: zrun-synth --arch ARCH --embd EMBD ...
#                                                   (ARCH: llama qwen2 qwen3 gemma2 gemma3 phi3; NAME
#                                                   [A-Za-z0-9._-], names the file and the row)
#                         e.g. --models 8b:q4_k_m,qwen2.5-7b:q4_k_m,q14=qwen2/5120/48/40/8/13824/152064:q5_k
#     --scratch DIR       where models are made and deleted (default /tmp/zrun-bench-models)
#     --out DIR           raw outputs (default $OUT when set, else bench-table-out)
#     -p N -n N -r N      pp / tg sizes and repetitions (default 512 128 5)
#     --device D          zrun bench --device (auto, cuda, cpu; default auto): `--device cpu` tries the
#                         script on a machine without a GPU
#     -t N                zrun bench -t (CPU threads)
#     --keep              keep the models
#
# The named classes (random weights in the published configs' shapes; E/L/H/KV/FF/V):
#   qwen2.5-3b  qwen2 2048/36/16/2/11008/151936 tied     qwen2.5-7b  qwen2 3584/28/28/4/18944/152064
#   qwen2.5-14b qwen2 5120/48/40/8/13824/152064          qwen3-4b    qwen3 2560/36/32/8/9728/151936, head 128, tied
#   mistral-7b  llama 4096/32/32/8/14336/32768 (v0.3)    phi3-mini   phi3 3072/32/32/32/8192/32064
# The table's last column compares rows of the same table: a row's share of the bandwidth (graph)
# minus the 8B row's of the same type (the issue's "every shape within 5 points"), and minus the
# Q4_K_M row's of the same shape (its "other K types within 8 points").
#
# Building needs meson, ninja, gcc, pkg-config, libpcre2-8 (headers) and nvcc. Where the GPU
# machine lacks one (this workplace's have no libpcre2 headers), build on another x86-64 machine
# (meson setup B -Dcuda-arch=90 -Dtests=false && ninja -C B zrun tools/zrun-synth), copy zrun,
# zrun-synth and libpcre2-8.so.0 into a carried folder, and pass --bin and --lib, e.g.
#   tools/bench_table.sh --bin .dev/bench/bin --lib .dev/bench/lib --peer .dev/peer \
#     --peer-scripts .dev/bench/peer --vocab .dev/bench/vocab.gguf --scratch /tmp/m --out $OUT/t
# (the whole default table took 172 s on an H200: synthesis 1-2 GB/s with 16 threads).
# Without a GPU (a build, or --bin of one, and --device cpu --no-peer):
#   tools/bench_table.sh --bin build --no-peer --device cpu -p 32 -n 8 -r 2 \
#     --models tiny:q4_0,t2=qwen2/256/2/4/2/512/1000:q8_0
#
# Raw outputs (six files, so they fit a device call's $OUT): log.txt (every step, synthesis
# speed), models.tsv (each model's row name, shape and type), zrun.jsonl (zrun bench records),
# zrun.err (its stderr, with the device line), peer.txt (llama.cpp's RESULT lines, each prefixed
# with the model), table.md (the table).
set -u
here=$(cd "$(dirname "$0")" && pwd); src=$(cd "$here/.." && pwd)
bin=""; build="$src/build-bench"; lib=""; peer="$src/.dev/peer"; peer_scripts="$src/../shared/peer"
vocab="$src/../shared/vocab/ggml-vocab-llama-bpe.gguf.xz"
models="8b:f16,8b:q8_0,8b:q4_0,8b:q4_k_m,1b:f16,1b:q8_0,1b:q4_0"
scratch=/tmp/zrun-bench-models; out="${OUT:-bench-table-out}"; pp=512; tg=128; reps=5; keep=0; use_peer=1
device=auto; threads=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --no-peer) use_peer=0; shift ;;
    --peer-scripts) peer_scripts=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --scratch) scratch=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -p) pp=$2; shift 2 ;;
    -n) tg=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_table.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" "$scratch"
out=$(cd "$out" && pwd); scratch=$(cd "$scratch" && pwd)
log="$out/log.txt"; : > "$log"; : > "$out/models.tsv"; : > "$out/zrun.jsonl"; : > "$out/zrun.err"; : > "$out/peer.txt"
say() { echo "$*" | tee -a "$log" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }   # seconds since $1
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { a += 0; b += 0; printf "%.2f", (b > 0) ? a / b : 0 }'; }
[ -n "$lib" ] && export LD_LIBRARY_PATH="$(cd "$lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- zrun and zrun-synth ----
if [ -z "$bin" ]; then
  t0=$(now)
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  export PATH="$PATH:/usr/local/cuda/bin"
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$src" --buildtype=release -Dtests=false ${arch:+-Dcuda-arch=$arch} >>"$log" 2>&1 \
      || { say "meson setup failed (see log.txt)"; exit 1; }
  fi
  ninja -C "$build" zrun tools/zrun-synth >>"$log" 2>&1 || { say "build failed (see log.txt)"; exit 1; }
  bin="$build"
  say "built zrun (sm_${arch:-default}) in $(since "$t0") s"
fi
zrun="$bin/zrun"; synth="$bin/zrun-synth"; [ -x "$synth" ] || synth="$bin/tools/zrun-synth"
for x in "$zrun" "$synth"; do [ -x "$x" ] || { say "missing $x"; exit 1; }; done

# ---- the vocabulary both engines get ----
vocab_n=0   # its token count: the shapes of that vocabulary size get it
if [ "$vocab" != none ]; then
  case "$vocab" in
    *.xz) xz -dc "$vocab" > "$scratch/vocab.gguf" || { say "cannot decompress $vocab"; exit 1; }; vocab="$scratch/vocab.gguf" ;;
  esac
  vocab_n=$("$zrun" info "$vocab" 2>>"$log" | sed -n 's/^tokenizer: .*, \([0-9][0-9]*\) tokens,.*/\1/p')
  [ -n "$vocab_n" ] || { say "--vocab $vocab: no tokenizer found by zrun info (see log.txt)"; exit 1; }
fi

# ---- the shapes: zrun-synth's arguments and the vocabulary size ----
ctx=$(( pp + tg > 4096 ? pp + tg : 4096 ))   # the explicit shapes' context (the presets have their own)
dims() {   # ARCH EMBD LAYERS HEADS KV FF VOCAB [HEADDIM] -> synth_args, shape_vocab
  synth_args=(--arch "$1" --embd "$2" --layers "$3" --heads "$4" --kv-heads "$5" --ff "$6" --vocab "$7" --ctx "$ctx")
  [ $# -ge 8 ] && synth_args+=(--head-dim "$8")
  shape_vocab=$7
}
shape_of() {   # SHAPE -> synth_args, shape_vocab; 1 for an unknown or malformed shape
  case "$1" in
    8b|llama3-8b) synth_args=(--arch llama --shape llama3-8b); shape_vocab=128256 ;;
    1b|llama3.2-1b) synth_args=(--arch llama --shape llama3.2-1b); shape_vocab=128256 ;;
    llama-3b|llama3.2-3b) synth_args=(--arch llama --shape llama3.2-3b); shape_vocab=128256 ;;
    tiny) synth_args=(--arch llama --shape tiny); shape_vocab=512 ;;
    gemma3-4b|gemma3-12b) synth_args=(--arch gemma3 --shape "$1"); shape_vocab=262208 ;;
    qwen3-30b-a3b) synth_args=(--arch qwen3moe --shape qwen3-30b-a3b); shape_vocab=151936 ;;
    mixtral-8x7b) synth_args=(--arch llama --shape mixtral-8x7b); shape_vocab=32000 ;;
    # the published configs (Qwen/Qwen2.5-*, Qwen/Qwen3-4B, mistralai/Mistral-7B-v0.3,
    # microsoft/Phi-3-mini-4k-instruct config.json)
    qwen2.5-3b) dims qwen2 2048 36 16 2 11008 151936; synth_args+=(--tied --theta 1000000 --eps 1e-6) ;;
    qwen2.5-7b) dims qwen2 3584 28 28 4 18944 152064; synth_args+=(--untied --theta 1000000 --eps 1e-6) ;;
    qwen2.5-14b) dims qwen2 5120 48 40 8 13824 152064; synth_args+=(--untied --theta 1000000 --eps 1e-6) ;;
    qwen3-4b) dims qwen3 2560 36 32 8 9728 151936 128; synth_args+=(--tied --theta 1000000 --eps 1e-6) ;;
    mistral-7b) dims llama 4096 32 32 8 14336 32768; synth_args+=(--untied --theta 1000000) ;;
    phi3-mini) dims phi3 3072 32 32 32 8192 32064; synth_args+=(--untied) ;;
    *=*)
      local f i
      IFS=/ read -r -a f <<<"${1#*=}"
      if [ "${#f[@]}" -lt 7 ] || [ "${#f[@]}" -gt 8 ]; then
        say "shape '$1': expected NAME=ARCH/EMBD/LAYERS/HEADS/KV/FF/VOCAB[/HEADDIM], found ${#f[@]} fields"; return 1
      fi
      for i in "${f[@]:1}"; do
        case "$i" in ''|*[!0-9]*|0*) say "shape '$1': '$i' is not a positive integer"; return 1 ;; esac
      done
      dims "${f[@]}" ;;
    *) say "unknown shape '$1' (8b, 1b, tiny, a zrun-synth preset, a named class or NAME=ARCH/EMBD/LAYERS/HEADS/KV/FF/VOCAB[/HEADDIM]; see --help)"
       return 1 ;;
  esac
}
# The shape as the file says it: "ARCH EMBD/LAYERS/HEADS/KV/FF/VOCAB", then the head size where it
# is not EMBD/HEADS, "tied" without output.weight, the experts.
shape_text() {
  "$zrun" info "$1" 2>>"$log" | awk '
    /^architecture:/ { arch = $2 }
    $1 == "embedding_length" { e = $2 } $1 == "block_count" { l = $2 } $1 == "attention.head_count" { h = $2 }
    $1 == "attention.head_count_kv" { kv = $2 } $1 == "feed_forward_length" { ff = $2 } $1 == "vocab_size" { v = $2 }
    $1 == "attention.key_length" { hd = $2 } $1 == "expert_count" { ne = $2 } $1 == "expert_used_count" { nu = $2 }
    $1 == "expert_feed_forward_length" { fe = $2 } $1 == "output.weight" { untied = 1 }
    END {
      s = sprintf("%s %s/%s/%s/%s/%s/%s", arch, e, l, h, kv, ff, v)
      if (hd != "" && hd != "-" && h > 0 && hd * h != e) s = s ", head " hd
      if (!untied) s = s ", tied"
      if (ne != "") s = s sprintf(", %s experts (%s used)%s", ne, nu, fe != "" ? " of " fe : "")
      print s
    }'
}

if [ "$device" != cpu ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv >>"$log" 2>&1
  say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
fi
bench_args=(--device "$device"); [ -n "$threads" ] && bench_args+=(-t "$threads")

# ---- one model at a time ----
t_all=$(now)
for spec in ${models//,/ }; do
  case "$spec" in *:*) ;; *) say "'$spec': expected SHAPE:TYPE"; continue ;; esac
  shape=${spec%:*}; type=${spec##*:}
  shape_of "$shape" || continue
  name=${shape%%=*}
  case "$name" in ''|*[!A-Za-z0-9._-]*) say "'$shape': the name '$name' is not [A-Za-z0-9._-]+"; continue ;; esac
  case "$type" in ''|*[!A-Za-z0-9_]*) say "'$spec': the type '$type' is not a zrun-synth --type"; continue ;; esac
  vocab_arg=()
  [ "$vocab_n" = "$shape_vocab" ] && vocab_arg=(--vocab "$vocab")
  key="$name-$type"; model="$scratch/$key.gguf"
  t0=$(now)
  if ! "$synth" -o "$model" "${synth_args[@]}" --type "$type" "${vocab_arg[@]}" -q >>"$log" 2>&1; then
    say "$key: zrun-synth ${synth_args[*]} --type $type failed (see log.txt)"; rm -f "$model"; continue
  fi
  secs=$(since "$t0"); size=$(stat -c %s "$model"); dims_text=$(shape_text "$model")
  say "$key: synthesized $dims_text $type, $(ratio "$size" 1e9) GB in $secs s ($(ratio "$size" "${secs}e9") GB/s)"
  echo "SYNTH $key bytes=$size secs=$secs" >>"$log"
  printf '%s\t%s\t%s\t%s\n' "$key" "$name" "$type" "$dims_text" >>"$out/models.tsv"

  t0=$(now)
  "$zrun" bench -m "$model" "${bench_args[@]}" --graph both -p "$pp" -n "$tg" -r "$reps" -o jsonl >>"$out/zrun.jsonl" 2>>"$out/zrun.err" \
    || say "$key: zrun bench failed (exit $?; see zrun.err)"
  say "$key: zrun bench done in $(since "$t0") s"

  if [ "$use_peer" = 1 ]; then
    t0=$(now)
    bash "$peer_scripts/run-peer.sh" "$peer" "$model" -p "$pp" -n "$tg" -r "$reps" 2>>"$log" \
      | sed "s|^|$key |" >>"$out/peer.txt" || say "$key: run-peer.sh failed"
    say "$key: llama.cpp done in $(since "$t0") s"
  fi
  [ "$keep" = 1 ] || rm -f "$model"
done
say "all models in $(since "$t_all") s"

# ---- the table ----
python3 - "$out" "$pp" "$tg" <<'PY' | tee "$out/table.md"
import json, re, sys, os
out, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
labels = {"8b": "Llama-3-8B", "llama3-8b": "Llama-3-8B", "1b": "Llama-3.2-1B", "llama3.2-1b": "Llama-3.2-1B",
          "llama3.2-3b": "Llama-3.2-3B", "llama-3b": "Llama-3.2-3B", "gemma3-4b": "Gemma-3-4B",
          "gemma3-12b": "Gemma-3-12B", "qwen3-30b-a3b": "Qwen3-30B-A3B", "mixtral-8x7b": "Mixtral-8x7B",
          "qwen2.5-3b": "Qwen2.5-3B", "qwen2.5-7b": "Qwen2.5-7B", "qwen2.5-14b": "Qwen2.5-14B",
          "qwen3-4b": "Qwen3-4B", "mistral-7b": "Mistral-7B", "phi3-mini": "Phi-3-mini"}
eight_b = ("8b", "llama3-8b")   # the rows other shapes are compared with
# the issue's targets for tg128 (t/s) at batch 1 by (8B or 1B, type); Q4_K_M: 80% of the bandwidth ceiling
targets = {("8b", "f16"): 190, ("8b", "q8_0"): 340, ("8b", "q4_0"): 625,
           ("1b", "f16"): 1000, ("1b", "q8_0"): 1700, ("1b", "q4_0"): 2500}
canon = {"8b": "8b", "llama3-8b": "8b", "1b": "1b", "llama3.2-1b": "1b"}
models = []   # (key, shape name, type, shape text) in the order of --models
for line in open(os.path.join(out, "models.tsv")):
    f = line.rstrip("\n").split("\t")
    if len(f) == 4:
        models.append(tuple(f))
zr = {}
device = None
for line in open(os.path.join(out, "zrun.jsonl")):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    key = os.path.basename(r["model_filename"])[:-len(".gguf")]
    zr.setdefault(key, {})[(r["mode"], r["test"])] = r
    device = device or r
peer = {}
for line in open(os.path.join(out, "peer.txt")):
    m = re.match(r"(\S+) RESULT llama\.cpp graphs=(\w+) test=(\w+) tps_mean=([\d.]+) tps_sd=([\d.]+)", line)
    if m:
        peer[(m[1], m[2], m[3])] = (float(m[4]), float(m[5]))
bw = device["read_gbps"] if device else None

def ts(r):
    return "%.1f ± %.1f" % (r["median_ts"], r["sd_ts"]) if r else "-"

def pct(tps, gb):
    return " (%.0f%%)" % (100.0 * tps * gb / bw) if bw and gb else ""

def graph_row(key):
    rows = zr.get(key, {})
    return rows.get(("graph", "tg%d" % tg)) or rows.get(("graph-fallback", "tg%d" % tg))

def bw_row(key):   # the graph's tg record, else eager's (the CPU backend has no graph)
    return graph_row(key) or zr.get(key, {}).get(("eager", "tg%d" % tg))

def bw_pct(key):
    r = bw_row(key)
    return r["bw_pct"] if r and r["bw_pct"] is not None else None

if device and device["backend"] == "cuda":
    print("device: %s | driver %s | CUDA %s | read bandwidth %s GB/s (zrun bench's read_bw_probe over 1 GiB, median)"
          % (device["device"], device["driver"], device["cuda_version"], "%.0f" % bw if bw else "-"))
elif device:
    print("device: CPU %s | %d threads | read bandwidth %s GB/s (zrun bench's read loop, median)"
          % (device["device"], device["n_threads"], "%.1f" % bw if bw else "-"))
print()
print("| model | shape (arch embd/layers/heads/kv/ff/vocab) | GB / token | llama.cpp tg%d (graphs on) "
      "| llama.cpp tg%d (graphs off) | zrun tg%d eager | zrun tg%d graph | %% of BW (graph, else [eager]) | target "
      "| llama.cpp pp%d | zrun pp%d | logits eager = graph | points vs 8B (same type); vs Q4_K_M (same shape) |"
      % (tg, tg, tg, tg, pp, pp))
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---|")
for k, shape, typ, dims in models:
    rows = zr.get(k, {})
    any_r = next(iter(rows.values()), None)
    gb = any_r["bytes_per_token"] / 1e9 if any_r else None
    name = "%s %s" % (labels.get(shape, shape), typ.upper())
    e = rows.get(("eager", "tg%d" % tg))
    g = graph_row(k)
    p = rows.get(("eager", "pp%d" % pp))
    pon, poff = peer.get((k, "on", "tg%d" % tg)), peer.get((k, "off", "tg%d" % tg))
    ppp = peer.get((k, "on", "pp%d" % pp))
    c = canon.get(shape)
    if (c, typ) in targets:
        tgt = "≥ %d" % targets[(c, typ)]
    elif (c, typ) == ("8b", "q4_k_m") and bw and gb:
        tgt = "≥ %.0f (80%%)" % (0.8 * bw / gb)
    else:
        tgt = "-"
    if (c, typ) in (("8b", "f16"), ("8b", "q4_0")) and ppp:
        tgt += "; pp ≥ %.0f" % (1.2 * ppp[0])
    same = "-"
    if e and g:
        same = "yes" if e["logits_hash"] == g["logits_hash"] else "NO"
    # the issue's "every shape within 5 points of the 8B row, other K types within 8 of Q4_K_M"
    mine, deltas = bw_pct(k), []
    if mine is not None:
        ref = next((bw_pct(m[0]) for m in models if m[1] in eight_b and m[2] == typ and m[0] != k), None)
        if ref is not None:
            deltas.append("%+.1f vs 8B" % (mine - ref))
        ref = next((bw_pct(m[0]) for m in models if m[1] == shape and m[2] == "q4_k_m" and m[0] != k), None)
        if ref is not None:
            deltas.append("%+.1f vs Q4_K_M" % (mine - ref))
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name, dims, ("%.2f" if gb >= 0.1 else "%.4f") % gb if gb else "-",
        ("%.1f ± %.1f" % pon + pct(pon[0], gb)) if pon else "-",
        ("%.1f ± %.1f" % poff + pct(poff[0], gb)) if poff else "-",
        ts(e) + (pct(e["median_ts"], gb) if e else ""),
        ts(g) + (" [%s]" % g["mode"] if g and g["mode"] != "graph" else ""),
        ("%.1f%%" % mine + (" [%s]" % bw_row(k)["mode"] if bw_row(k)["mode"] != "graph" else "")) if mine is not None else "-",
        tgt,
        "%.0f ± %.0f" % ppp if ppp else "-",
        "%.0f ± %.0f" % (p["median_ts"], p["sd_ts"]) if p else "-",
        same, "; ".join(deltas) or "-"))
print()
print("t/s: median ± sd of %s timed repetitions after 1 warm-up (zrun); llama.cpp: mean ± sd (llama_bench.c)."
      % (device["reps"] if device else "?"))
if any(graph_row(m[0]) or zr.get(m[0], {}).get(("eager", "tg%d" % tg)) for m in models):
    print()
    print("| model | mode | kernels / token | host µs / token | graph build ms |")
    print("|---|---|---:|---:|---:|")
    for k, shape, typ, dims in models:
        for mode in ("eager", "graph", "graph-fallback"):
            r = zr.get(k, {}).get((mode, "tg%d" % tg))
            if r:
                f = lambda v, fmt: fmt % v if v is not None else "-"
                print("| %s | %s | %s | %s | %s |" % (k, mode, f(r["kernels_per_token"], "%d"),
                      f(r["host_us_per_token"], "%.1f"), f(r["graph_build_ms"], "%.1f")))
PY
