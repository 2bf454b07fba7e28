/* The timeline build's stamps (cu/timeline.cuh: each block's grid wait, exit and the products'
 * phases, on %globaltimer) read back and written as CSV for tools/timeline.py. Only kernels built with meson -Dtimeline=true
 * have them; zrun-cuda-timing -T asks for them (ZrBackendOptions.timeline). */
#pragma once
#include <stdbool.h>
#include <stdio.h>

#include "cuda/launch.h"
#include "cuda/module.h"
#include "cuda/timeline_rec.h"

/* True when the loaded kernels stamp (the timeline build) and the driver can find the stamps. */
bool zr_cuda_timeline_built(const ZrCuda *c);

/* Writes to f: "# launch I NAME BLOCKS" for each launch of rec (the decode step the graph
 * replays; NULL: none), then "grid,block,sm,t_enter_ns,t_wait_ns,t_exit_ns,t_staged_ns,
 * t_summed_ns" and a row per stamp still in the rings, in order of wait return.
 * ZR_E_UNSUPPORTED without the timeline build. */
int zr_cuda_timeline_write(ZrCuda *c, const ZrRecording *rec, FILE *f, ZrError *err);
