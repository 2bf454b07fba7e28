// Streaming decode matrix-vector products (cu/matvec_stream.cuh) for F16, Q8_0 and Q4_0, named
// mvs_TYPE_rRBkKC: tiles of RB rows, stages of KC elements of each row (16-18 KiB per stage).
// The host mirrors the geometry in src/cuda/forward.c (zr_cuf_mvs_list) and picks a kernel and
// its stages per matrix; tools/mv_bench.c times every one, test_kernels checks every one.
#include "matvec_stream.cuh"

ZR_MATVEC_STREAM(mvs_f16_r8k1024, ZR_T_F16, 8, 1024)
ZR_MATVEC_STREAM(mvs_f16_r16k512, ZR_T_F16, 16, 512)
ZR_MATVEC_STREAM(mvs_q8_0_r8k2048, ZR_T_Q8_0, 8, 2048)
ZR_MATVEC_STREAM(mvs_q8_0_r16k1024, ZR_T_Q8_0, 16, 1024)
ZR_MATVEC_STREAM(mvs_q4_0_r8k4096, ZR_T_Q4_0, 8, 4096)
ZR_MATVEC_STREAM(mvs_q4_0_r16k2048, ZR_T_Q4_0, 16, 2048)
