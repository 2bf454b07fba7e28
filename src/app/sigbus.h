/* A model is read through mmap: when the file is truncated or rewritten while zrun runs, a read
 * of a page that is gone raises SIGBUS, which would kill zrun without a word. The handler says
 * what happened and exits 1. */
#pragma once

/* Installs the handler (main does, first thing). */
void zr_sigbus_install(void);
