// Checks every fixed and auxiliary kernel of cu/kernels.def against its definition (the
// per-type families are checked where they are defined). Listed last in cu/meson.build: the
// kernels are compiled as one unity translation unit (tools/nvcc_fatbin.py), so every kernel is
// declared by now.
#include "kernels.cuh"

#define ZR_KFIXED(field, name, params) ZR_KCHECK(name, params);
#define ZR_KAUX(name, params) ZR_KCHECK(name, params);
#include "kernels.def"
