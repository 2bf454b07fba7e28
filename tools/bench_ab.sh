#!/bin/bash
# tools/bench_ab.sh: two (or more) zrun builds side by side on the same synthesized models, in one
# device call, for refactors that must keep speed and logits ("same t/s within noise, same
# hashes"). Each model is synthesized once (with ROOT/base/bin/zrun-synth), then every build in
# ORDER runs `zrun bench --graph both -p 512 -n 128 -r 5` on it; a trailing 2 in a name runs that
# build again (A B B2 A2 gives an ABBA order, so drift shows). Prints one line per build and
# model, then a markdown table of base against new with the logits hashes compared.
#   ORDER="base new new2 base2" tools/bench_ab.sh ROOT VOCAB.gguf 1b:q4_0,8b:q4_k_m
# ROOT/NAME/bin/zrun for each NAME; ROOT/lib is put on LD_LIBRARY_PATH (libpcre2-8 etc. where the
# GPU machine lacks them); SHAPE 8b, 1b or any zrun-synth --shape preset; TYPE any --type.
# The session-3 table of issue 11 was made with it (cu/PERF.md).
set -u
D=$(cd "${1:?usage: bench_ab.sh ROOT VOCAB MODELS}" && pwd); VOCAB=$2; shift 2
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=${OUT:-/tmp/bench-ab}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
S=/tmp/m; mkdir -p $S
for spec in ${1//,/ }; do
  shape=${spec%%:*}; type=${spec##*:}
  case $shape in 8b) preset=llama3-8b ;; 1b) preset=llama3.2-1b ;; *) preset=$shape ;; esac
  mf=$S/$shape-$type.gguf
  t0=$(date +%s)
  $D/base/bin/zrun-synth -o $mf --shape $preset --type $type --vocab "$VOCAB" -q --threads 16 || { echo "synth $spec failed"; continue; }
  echo "synth $spec $(( $(date +%s) - t0 )) s"
  for b in ${ORDER:-base new new2 base2}; do
    bb=${b%2}; pre=""
    [ "$bb" = nopdl ] && { bb=base; pre="env ZRUN_PDL=0"; }
    $pre $D/$bb/bin/zrun bench -m $mf --graph both -p 512 -n 128 -r 5 -o jsonl 2>>$O/$b.err | sed "s|^|$b |" >> $O/bench.txt
  done
  rm -f $mf
done
python3 - $O/bench.txt <<'PY'
import json, sys, collections
rows = collections.OrderedDict()
def f(r): return "%.1f ± %.1f" % (r["median_ts"], r["sd_ts"]) if r else "-"
for line in open(sys.argv[1]):
    b, _, js = line.partition(' ')
    if not js.startswith('{'): continue
    r = json.loads(js)
    k = r["model_filename"].split('/')[-1][:-5]
    rows.setdefault(k, {}).setdefault(b, {})[(r["mode"], r["test"])] = r
for k, bs in rows.items():
    for b, d in bs.items():
        e, g, p = d.get(("eager","tg128")), d.get(("graph","tg128")), d.get(("eager","pp512"))
        print("%-12s %-8s eager %-16s graph %-16s pp512 %-18s hash %s" % (k, b, f(e), f(g), f(p), g["logits_hash"] if g else "-"))
print("| model | GB/tok | base eager tg128 | new eager tg128 | base graph tg128 | new graph tg128 | graph %BW base/new | base pp512 | new pp512 | hashes equal (base=new, eager=graph) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
def f(r): return "%.1f ± %.1f" % (r["median_ts"], r["sd_ts"]) if r else "-"
for k, bs in rows.items():
    for rep in ("", "2"):
        B, N = bs.get("base"+rep, {}), bs.get("new"+rep, {})
        if not B and not N: continue
        g = lambda d, m, t: d.get((m, t))
        any_r = next(iter(N.values()), None) or next(iter(B.values()), None)
        hs = set(r["logits_hash"] for d in (B, N) for (m, t), r in d.items() if t.startswith("tg"))
        print("| %s%s | %.2f | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (k, " (rep 2)" if rep else "",
            any_r["bytes_per_token"]/1e9 if any_r else 0,
            f(g(B,"eager","tg128")), f(g(N,"eager","tg128")), f(g(B,"graph","tg128")), f(g(N,"graph","tg128")),
            "%.0f%%" % g(B,"graph","tg128")["bw_pct"] if g(B,"graph","tg128") else "-",
            "%.0f%%" % g(N,"graph","tg128")["bw_pct"] if g(N,"graph","tg128") else "-",
            f(g(B,"eager","pp512")), f(g(N,"eager","pp512")), "yes" if len(hs) == 1 else "NO %s" % sorted(hs)))
PY
grep -m1 -h '"device"' $O/bench.txt | head -c 400; echo
