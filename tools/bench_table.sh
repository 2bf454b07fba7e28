#!/usr/bin/env bash
# tools/bench_table.sh: the speed table of the bench issue, reproduced in one call on a GPU
# machine. For each model of the table (Llama-3-8B and Llama-3.2-1B shapes, vocab 128256; F16,
# Q8_0, Q4_0, and Llama-3-8B Q4_K_M) it synthesizes the GGUF with zrun-synth (one at a time:
# the 8B F16 is 16 GB), runs `zrun bench --graph both` and llama.cpp (peer/run-peer.sh, CUDA
# graphs on and off) on it, deletes it, and at the end prints one table.
#
#   tools/bench_table.sh [options]
#     --bin DIR           prebuilt zrun and zrun-synth (skip the build); else build with meson + ninja
#     --build DIR         the build directory (default build-bench)
#     --lib DIR           extra shared libraries for prebuilt binaries (LD_LIBRARY_PATH)
#     --peer DIR          llama.cpp made by peer/get-llama-cpp.sh (default .dev/peer); --no-peer: none
#     --peer-scripts DIR  run-peer.sh and llama_bench.c (default ../shared/peer)
#     --vocab FILE        a GGUF whose tokenizer the models get (.xz is decompressed);
#                         default ../shared/vocab/ggml-vocab-llama-bpe.gguf.xz; "none": synthesized
#     --models LIST       comma-separated SHAPE:TYPE, SHAPE 8b, 1b (or tiny, to try the script),
#                         TYPE any of zrun-synth's (f16 q8_0 q4_0 q4_k_m ...)
#                         (default 8b:f16,8b:q8_0,8b:q4_0,8b:q4_k_m,1b:f16,1b:q8_0,1b:q4_0)
#     --scratch DIR       where models are made and deleted (default /tmp/zrun-bench-models)
#     --out DIR           raw outputs (default $OUT when set, else bench-table-out)
#     -p N -n N -r N      pp / tg sizes and repetitions (default 512 128 5)
#     --keep              keep the models
#
# Building needs meson, ninja, gcc, pkg-config, libpcre2-8 (headers) and nvcc. Where the GPU
# machine lacks one (this workplace's have no libpcre2 headers), build on another x86-64 machine
# (meson setup B -Dcuda-arch=90 -Dtests=false && ninja -C B zrun tools/zrun-synth), copy zrun,
# zrun-synth and libpcre2-8.so.0 into a carried folder, and pass --bin and --lib, e.g.
#   tools/bench_table.sh --bin .dev/bench/bin --lib .dev/bench/lib --peer .dev/peer \
#     --peer-scripts .dev/bench/peer --vocab .dev/bench/vocab.gguf --scratch /tmp/m --out $OUT/t
# (the whole table took 172 s on an H200: synthesis 1-2 GB/s with 16 threads).
#
# Raw outputs (five files, so they fit a device call's $OUT): log.txt (every step, synthesis
# speed), zrun.jsonl (zrun bench records), zrun.err (its stderr, with the device line),
# peer.txt (llama.cpp's RESULT lines, each prefixed with the model), table.md (the table).
set -u
here=$(cd "$(dirname "$0")" && pwd); src=$(cd "$here/.." && pwd)
bin=""; build="$src/build-bench"; lib=""; peer="$src/.dev/peer"; peer_scripts="$src/../shared/peer"
vocab="$src/../shared/vocab/ggml-vocab-llama-bpe.gguf.xz"
models="8b:f16,8b:q8_0,8b:q4_0,8b:q4_k_m,1b:f16,1b:q8_0,1b:q4_0"
scratch=/tmp/zrun-bench-models; out="${OUT:-bench-table-out}"; pp=512; tg=128; reps=5; keep=0; use_peer=1
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
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_table.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" "$scratch"
out=$(cd "$out" && pwd); scratch=$(cd "$scratch" && pwd)
log="$out/log.txt"; : > "$log"; : > "$out/zrun.jsonl"; : > "$out/zrun.err"; : > "$out/peer.txt"
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
vocab_arg=()
if [ "$vocab" != none ]; then
  case "$vocab" in
    *.xz) xz -dc "$vocab" > "$scratch/vocab.gguf" || { say "cannot decompress $vocab"; exit 1; }; vocab="$scratch/vocab.gguf" ;;
  esac
  vocab_arg=(--vocab "$vocab")
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv >>"$log" 2>&1
say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# ---- one model at a time ----
t_all=$(now)
for spec in ${models//,/ }; do
  shape=${spec%%:*}; type=${spec##*:}
  case "$shape" in 8b) preset=llama3-8b; label="Llama-3-8B" ;; 1b) preset=llama3.2-1b; label="Llama-3.2-1B" ;;
    tiny) preset=tiny; label="tiny" ;;   # for trying the script out on the CPU
    *) say "unknown shape '$shape' (8b, 1b or tiny)"; continue ;; esac
  name="$shape-$type"; model="$scratch/$name.gguf"
  t0=$(now)
  if ! "$synth" -o "$model" --shape "$preset" --type "$type" "${vocab_arg[@]}" -q >>"$log" 2>&1; then
    say "$name: zrun-synth failed (see log.txt)"; rm -f "$model"; continue
  fi
  secs=$(since "$t0"); size=$(stat -c %s "$model")
  say "$name: synthesized $label $type, $(ratio "$size" 1e9) GB in $secs s ($(ratio "$size" "${secs}e9") GB/s)"
  echo "SYNTH $name bytes=$size secs=$secs" >>"$log"

  t0=$(now)
  "$zrun" bench -m "$model" --graph both -p "$pp" -n "$tg" -r "$reps" -o jsonl >>"$out/zrun.jsonl" 2>>"$out/zrun.err" \
    || say "$name: zrun bench failed (exit $?; see zrun.err)"
  say "$name: zrun bench done in $(since "$t0") s"

  if [ "$use_peer" = 1 ]; then
    t0=$(now)
    bash "$peer_scripts/run-peer.sh" "$peer" "$model" -p "$pp" -n "$tg" -r "$reps" 2>>"$log" \
      | sed "s|^|$name |" >>"$out/peer.txt" || say "$name: run-peer.sh failed"
    say "$name: llama.cpp done in $(since "$t0") s"
  fi
  [ "$keep" = 1 ] || rm -f "$model"
done
say "all models in $(since "$t_all") s"

# ---- the table ----
python3 - "$out" "$pp" "$tg" <<'PY' | tee "$out/table.md"
import json, re, sys, os
out, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
order = ["8b-f16", "8b-q8_0", "8b-q4_0", "8b-q4_k_m", "1b-f16", "1b-q8_0", "1b-q4_0"]
labels = {"8b": "Llama-3-8B", "1b": "Llama-3.2-1B"}
# the issue's targets for tg128 (t/s) at batch 1; Q4_K_M: 80% of the bandwidth ceiling
targets = {"8b-f16": 190, "8b-q8_0": 340, "8b-q4_0": 625, "1b-f16": 1000, "1b-q8_0": 1700, "1b-q4_0": 2500}
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
keys = [k for k in order if k in zr or any(p[0] == k for p in peer)]
keys += sorted(k for k in zr if k not in keys)
bw = device["read_gbps"] if device else None

def ts(r):
    return "%.1f ± %.1f" % (r["median_ts"], r["sd_ts"]) if r else "-"

def pct(tps, gb):
    return " (%.0f%%)" % (100.0 * tps * gb / bw) if bw and gb else ""

if device and device["backend"] == "cuda":
    print("device: %s | driver %s | CUDA %s | read bandwidth %s GB/s (zrun bench's read_bw_probe over 1 GiB, median)"
          % (device["device"], device["driver"], device["cuda_version"], "%.0f" % bw if bw else "-"))
elif device:
    print("device: CPU %s | %d threads | read bandwidth %s GB/s (zrun bench's read loop, median)"
          % (device["device"], device["n_threads"], "%.1f" % bw if bw else "-"))
print()
print("| model (vocab 128256) | GB / token | llama.cpp tg%d (graphs on) | llama.cpp tg%d (graphs off) "
      "| zrun tg%d eager | zrun tg%d graph | %% of BW (graph) | target | llama.cpp pp%d | zrun pp%d | "
      "logits eager = graph |" % (tg, tg, tg, tg, pp, pp))
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
for k in keys:
    rows = zr.get(k, {})
    any_r = next(iter(rows.values()), None)
    gb = any_r["bytes_per_token"] / 1e9 if any_r else None
    shape, typ = k.split("-", 1)
    name = "%s %s" % (labels.get(shape, shape), typ.upper())
    e = rows.get(("eager", "tg%d" % tg))
    g = rows.get(("graph", "tg%d" % tg)) or rows.get(("graph-fallback", "tg%d" % tg))
    p = rows.get(("eager", "pp%d" % pp))
    pon, poff = peer.get((k, "on", "tg%d" % tg)), peer.get((k, "off", "tg%d" % tg))
    ppp = peer.get((k, "on", "pp%d" % pp))
    if k in targets:
        tgt = "≥ %d" % targets[k]
    elif k == "8b-q4_k_m" and bw and gb:
        tgt = "≥ %.0f (80%%)" % (0.8 * bw / gb)
    else:
        tgt = "-"
    if k in ("8b-f16", "8b-q4_0") and ppp:
        tgt += "; pp ≥ %.0f" % (1.2 * ppp[0])
    same = "-"
    if e and g:
        same = "yes" if e["logits_hash"] == g["logits_hash"] else "NO"
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name, "%.2f" % gb if gb else "-",
        ("%.1f ± %.1f" % pon + pct(pon[0], gb)) if pon else "-",
        ("%.1f ± %.1f" % poff + pct(poff[0], gb)) if poff else "-",
        ts(e) + (pct(e["median_ts"], gb) if e else ""),
        ts(g) + (" [%s]" % g["mode"] if g and g["mode"] != "graph" else ""),
        "%.1f%%" % g["bw_pct"] if g and g["bw_pct"] is not None else "-",
        tgt,
        "%.0f ± %.0f" % ppp if ppp else "-",
        "%.0f ± %.0f" % (p["median_ts"], p["sd_ts"]) if p else "-",
        same))
print()
print("t/s: median ± sd of %s timed repetitions after 1 warm-up (zrun); llama.cpp: mean ± sd (llama_bench.c)."
      % (device["reps"] if device else "?"))
stats = {}
for k, rows in zr.items():
    g = rows.get(("graph", "tg%d" % tg)) or rows.get(("eager", "tg%d" % tg))
    if g:
        stats[k] = g
if stats:
    print()
    print("| model | mode | kernels / token | host µs / token | graph build ms |")
    print("|---|---|---:|---:|---:|")
    for k in keys:
        for mode in ("eager", "graph", "graph-fallback"):
            r = zr.get(k, {}).get((mode, "tg%d" % tg))
            if r:
                f = lambda v, fmt: fmt % v if v is not None else "-"
                print("| %s | %s | %s | %s | %s |" % (k, mode, f(r["kernels_per_token"], "%d"),
                      f(r["host_us_per_token"], "%.1f"), f(r["graph_build_ms"], "%.1f")))
PY
