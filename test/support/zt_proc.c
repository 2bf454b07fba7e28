#include "zt_proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zt.h"

/* Runs exe with argv (NULL-terminated) as the header describes. */
static ZtProc run(const char *exe, const char *const *argv, const ZtProcOpts *o) {
    static const ZtProcOpts none = {0};
    if (!o) o = &none;
    ZtProc r = {-1, NULL, NULL};
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/proc.out", zt_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/proc.err", zt_tmpdir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int in = open(o->stdin_path ? o->stdin_path : "/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0) _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        if (o->fd3_path) {
            int s = open(o->fd3_path, O_RDONLY);
            if (s < 0 || dup2(s, 3) != 3) _exit(126);
        }
        if (o->fault) setenv("ZRUN_FAULT", o->fault, 1);
        else unsetenv("ZRUN_FAULT");
        unsetenv("CUDA_GRAPH_ENABLE");
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = zt_read_file(out_path, NULL);
    r.err = zt_read_file(err_path, NULL);
    if (!r.out) r.out = calloc(1, 1);
    if (!r.err) r.err = calloc(1, 1);
    return r;
}

ZtProc zt_proc_zrun(const char *const *prefix, const char *const *args, const ZtProcOpts *o) {
    const char *zrun = getenv("ZRUN");
    if (!zrun) return (ZtProc){-1, NULL, NULL};
    const char *argv[96] = {"zrun"};
    int n = 1;
    for (int i = 0; prefix && prefix[i] && n < 94; i++) argv[n++] = prefix[i];
    for (int i = 0; args[i] && n < 95; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return run(zrun, argv, o);
}

ZtProc zt_proc_sh(const char *cmd, const ZtProcOpts *o) {
    const char *argv[] = {"sh", "-c", cmd, NULL};
    return run("/bin/sh", argv, o);
}

void zt_proc_free(ZtProc *p) {
    free(p->out);
    free(p->err);
    p->out = p->err = NULL;
}
