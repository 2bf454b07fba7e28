#!/usr/bin/env bash
# tools/gpu_pack.sh: a build's programs for a GPU machine that cannot build zrun (this workplace's
# GPU machines have no libpcre2 headers): zrun, the tools and the GPU test programs, stripped, in
# one NAME/ folder of a .tar.xz, and the non-system shared libraries they load beside it.
#   tools/gpu_pack.sh BUILD OUT.tar.xz LIBDIR [--bench]
#     BUILD   a meson build directory (e.g. meson setup build -Dcuda-arch=90 -Dwerror=true)
#     OUT     the archive; its folder is named after OUT (build.tar.xz -> build/)
#     LIBDIR  where libpcre2-8, libcjson, libedit and theirs are copied
#     --bench zrun and the tools only (no GPU tests: a smaller archive)
# On the GPU machine: tar -C /tmp -xJf OUT; LD_LIBRARY_PATH=LIBDIR; then tools/gpu_suite.sh.
set -eu
[ $# -ge 3 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
b=$(cd "$1" && pwd); out=$2; lib=$3; bench=${4:-}
name=$(basename "$out"); name=${name%%.*}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/$name/tools" "$tmp/$name/gpu" "$lib"
cp "$b/zrun" "$tmp/$name/"
for t in zrun-synth zrun-llama2c zrun-mv-bench zrun-mm-bench zrun-cuda-timing; do
  [ -x "$b/tools/$t" ] && cp "$b/tools/$t" "$tmp/$name/tools/"
done
if [ "$bench" != --bench ]; then
  for t in "$b"/test/gpu/test_*; do [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$tmp/$name/gpu/"; done
fi
progs=$(find "$tmp/$name" -type f)
strip $progs 2>/dev/null || true
for f in $progs; do ldd "$f" | awk '/=>/ {print $3}'; done | grep -E "pcre2|cjson|libedit|tinfo|libbsd|libmd" | sort -u |
  while read -r l; do cp -L "$l" "$lib/"; done
tar -C "$tmp" -cJf "$out" "$name"
ls -la "$out"
