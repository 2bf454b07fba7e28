#include "zt.h"

#include <sys/stat.h>
#include <unistd.h>

struct zt_entry zt_tests[ZT_MAX];
int zt_ntests;
int zt_failed_flag;
static int zt_skipped, zt_cur_skipped;

static const char *shared_root(void) {
    const char *root = getenv("ZR_SHARED");
    return root && *root ? root : "../shared";
}

const char *zt_shared(const char *rel) {
    static char buf[8][4096];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 4096, "%s/%s", shared_root(), rel);
    return access(p, R_OK) == 0 ? p : NULL;
}

const char *zt_shared_model(const char *rel) {
    const char *p = zt_shared(rel);
    if (!p) {
        char why[4400];
        snprintf(why, sizeof why, "%s is absent from %s (../shared, with the models and fixtures, is not beside "
                 "the checkout; ZR_SHARED names another place)", rel, shared_root());
        zt_skip(why);
    }
    return p;
}

void zt_skip(const char *why) {
    fprintf(stderr, "  skip: %s\n", why);
    zt_cur_skipped = 1;
}

void *zt_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

const char *zt_tmpdir(void) {
    static char dir[4096];
    if (!dir[0]) {
        const char *b = getenv("ZR_BUILD");
        snprintf(dir, sizeof dir, "%s/test-tmp-%d", b ? b : "/tmp", (int)getpid());
        mkdir(dir, 0755);
    }
    return dir;
}

int zt_skip_all(const char *why) {
    fprintf(stderr, "  skip: %s\n", why);
    for (int i = 0; i < zt_ntests; i++) fprintf(stderr, "SKIP %s\n", zt_tests[i].name);
    fprintf(stderr, "0 passed, 0 failed, %d skipped\n", zt_ntests);
    return 77;
}

int zt_run(void) {
    int failed = 0;
    for (int i = 0; i < zt_ntests; i++) {
        zt_failed_flag = 0;
        zt_cur_skipped = 0;
        zt_tests[i].fn();
        fprintf(stderr, "%s %s\n", zt_failed_flag ? "FAIL" : zt_cur_skipped ? "SKIP" : "ok  ", zt_tests[i].name);
        failed += zt_failed_flag;
        zt_skipped += zt_cur_skipped && !zt_failed_flag;
    }
    fprintf(stderr, "%d passed, %d failed, %d skipped\n", zt_ntests - failed - zt_skipped, failed, zt_skipped);
    if (failed) return 1;
    return zt_ntests > 0 && zt_skipped == zt_ntests ? 77 : 0;
}
