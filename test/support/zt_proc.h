/* The one process runner of the tests: a program (the zrun binary, usually) run as a user would,
 * its stdout, stderr and exit status captured, with stdin from a file, an optional ZRUN_FAULT
 * and an optional fd 3. */
#pragma once

typedef struct ZtProc {
    int status; /* exit code; 128 + signal when killed; -1 when it did not run */
    char *out;  /* stdout (never NULL after a run) */
    char *err;  /* stderr (never NULL after a run) */
} ZtProc;

typedef struct ZtProcOpts {
    const char *stdin_path; /* NULL: /dev/null */
    const char *fault;      /* ZRUN_FAULT for the child; NULL: unset */
    const char *fd3_path;   /* opened read-only as fd 3 in the child; NULL: none */
} ZtProcOpts;

/* Runs $ZRUN with prefix[] then args[] (both NULL-terminated; prefix may be NULL).
 * CUDA_GRAPH_ENABLE is unset in the child so results do not depend on the caller's shell. */
ZtProc zt_proc_zrun(const char *const *prefix, const char *const *args, const ZtProcOpts *o);
/* Runs the shell command line cmd (sh -c: quoting, redirections, VAR=value prefixes), with the
 * same capture and environment as zt_proc_zrun; for tools other than zrun and prepared lines. */
ZtProc zt_proc_sh(const char *cmd, const ZtProcOpts *o);
void zt_proc_free(ZtProc *p);
