/* ZRUN_FAULT=context-lost[:TOKEN[,TOKEN...]]: a test hook for going on in a new process after
 * the CUDA context was lost (src/app/resume.h), with or without a GPU. It wraps any backend: the
 * forward of decode step TOKEN (0 = the step that feeds the first generated token; default 1)
 * fails with ZR_E_CONTEXT_LOST and feeds nothing, as a CUDA decode step does when the driver
 * keeps a sticky error for the whole process. Steps are counted over the whole run, so a run
 * that went on in a new process at step T fires only at the listed steps after T:
 * context-lost:3,9 loses the context at step 3 and, in the new process, again at step 9. */
#pragma once
#include <stdbool.h>

#include "backend.h"

/* Is spec (ZRUN_FAULT's value, may be NULL) a context-lost fault? */
bool zr_fault_lost_is(const char *spec);
/* When spec is a context-lost fault, replaces *be with a wrapper that owns it (destroying the
 * wrapper destroys it); else leaves *be alone. n_prompt: the prompt's tokens (decode step k
 * feeds position n_prompt + k); after_step: steps <= after_step never fire (-1: none). A
 * malformed spec is ZR_E_USAGE and *be is left alone. */
int zr_fault_lost_wrap(ZrBackend **be, const char *spec, int n_prompt, int after_step, ZrError *err);
