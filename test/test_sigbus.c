/* A model file truncated while zrun reads it: zrun's SIGBUS handler (src/app/sigbus.h) says
 * so and exits 1. This program runs itself as the child ("--child FILE"): the child installs
 * the handler as zrun's main does, maps the file as the GGUF reader does, truncates it, and
 * reads the page that is gone. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "sigbus.h"
#include "zt.h"
#include "zt_proc.h"

static char self[4096];

static int child(const char *path) {
    zr_sigbus_install();
    ZrGguf g;
    ZrError err;
    if (zr_gguf_open(&g, path, &err)) {
        fprintf(stderr, "child: %s\n", err.msg);
        return 3;
    }
    const ZrGgufTensor *t = &g.tensors[g.n_tensors - 1]; /* the last tensor: in the part cut off */
    if (truncate(path, 4096) != 0) return 4;
    volatile const uint8_t *p = t->data;
    unsigned sum = 0;
    for (uint64_t i = 0; i < t->nbytes; i += 4096) sum += p[i];
    fprintf(stderr, "child: read %u without a fault\n", sum);
    return 5;
}

ZT_TEST(a_model_file_truncated_while_mapped_is_reported_and_exits_1) {
    const char *src = zt_shared_model("models/stories260K.gguf");
    if (!src) return;
    size_t len;
    void *buf = zt_read_file(src, &len);
    ZT_CHECK(buf != NULL);
    char path[4200], cmd[8600];
    snprintf(path, sizeof path, "%s/shrinking.gguf", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    ZT_CHECK(f && fwrite(buf, 1, len, f) == len);
    fclose(f);
    free(buf);
    snprintf(cmd, sizeof cmd, "'%s' --child '%s'", self, path);
    ZtProc p = zt_proc_sh(cmd, NULL);
    int status = p.status;
    bool said = strstr(p.err, "zrun: the model file changed while zrun was running") != NULL;
    if (!said) fprintf(stderr, "  child stderr: %s\n", p.err);
    zt_proc_free(&p);
    ZT_CHECKF(status == 1, "exit status %d (128 + 7: killed by SIGBUS)", status);
    ZT_CHECK(said);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) return child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    return zt_run();
}
