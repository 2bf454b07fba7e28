#!/usr/bin/env bash
# tools/check_grid_wait.sh FATBIN: checks in the SASS of the kernels that load weights before
# zr_grid_wait() (every matvec_* but the experts' matvec_id_*, and attn_decode_f32) that the wait (ACQBULK) comes after their
# first global load, i.e. that ptxas kept the prologue loads in flight during the wait
# (cu/common.cuh zr_grid_enter_after_loads). Needs cuobjdump (the CUDA toolkit); prints one
# line per kernel and exits 1 if any kernel waits first.
#   tools/check_grid_wait.sh build/cu/kernels.fatbin
set -u
fatbin=${1:?usage: check_grid_wait.sh FATBIN}
command -v cuobjdump >/dev/null || { echo "check_grid_wait.sh: cuobjdump not found" >&2; exit 77; }
cuobjdump -sass "$fatbin" | awk '
  /Function : / { flush(); name = $3; n = 0; wait = 0; load = 0; next }
  /^ *\/\*[0-9a-f]+\*\// {
    n++
    if (!wait && $0 ~ /ACQBULK/) wait = n
    if (!load && $0 ~ / LDG/) load = n
  }
  function flush() {
    # matvec_id_* (cu/moe_matvec.cu) must wait first: the rows they load depend on the expert ids
    if (name ~ /^(matvec_|attn_decode_f32)/ && name !~ /^matvec_id_/) {
      ok = wait && load && load < wait
      printf "%-20s first load %4d, wait %4d: %s\n", name, load, wait, ok ? "ok" : "WAIT FIRST"
      if (!ok) bad++
    }
    name = ""
  }
  END { flush(); exit bad ? 1 : 0 }'
