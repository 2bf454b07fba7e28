#!/usr/bin/env python3
"""Compile kernel sources into one fatbin: nvcc_fatbin.py [-DNAME...] NVCC ARCHS OUT SRC...

nvcc makes one fatbin from one translation unit, so the sources (one concern per file) are
included into a generated unity file next to OUT. ARCHS is comma-separated SM versions:
SASS for each, plus PTX for the last one so newer GPUs can JIT the kernels. Leading -DNAME
arguments are passed to nvcc (meson -Dtimeline=true: -DZR_TIMELINE, cu/timeline.cuh)."""
import os, subprocess, sys

def main():
    args = sys.argv[1:]
    defines = []
    while args and args[0].startswith('-D'):
        defines.append(args.pop(0))
    nvcc, archs, out, srcs = args[0], args[1].split(','), args[2], args[3:]
    unity = out + '.unity.cu'
    with open(unity, 'w') as f:
        for s in srcs:
            f.write('#include "%s"\n' % os.path.abspath(s))
    # not compressed: the driver loads a compressed image (nvcc's default) in 54-75 ms on an
    # H100, this one in 17-18 ms (cu/PERF.md, session 7); the binary is 42 MB instead of 7
    cmd = [nvcc, '--fatbin', '--compress-mode=none', '-O3', '-std=c++17', '-lineinfo',
           '-Xptxas=-warn-spills'] + defines
    for a in archs:
        cmd += ['-gencode', 'arch=compute_%s,code=sm_%s' % (a, a)]
    cmd += ['-gencode', 'arch=compute_%s,code=compute_%s' % (archs[-1], archs[-1])]
    srcdir = os.path.dirname(os.path.abspath(srcs[0])) if srcs else '.'
    cmd += ['-I', srcdir, '-o', out, unity]
    sys.exit(subprocess.call(cmd))

main()
