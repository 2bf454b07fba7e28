/* `zrun info` as a user runs it: the built binary ($ZRUN) on stories260K.gguf and on files
 * it must refuse. */
#include <glob.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"

#include "gguf_write.h"
#include "quant.h"
#include "zt.h"
#include "zt_proc.h"

/* The binary comes from meson test's environment; run by hand without it, the tests skip. */
#define NEED_BINARY()                                                             \
    do {                                                                          \
        if (!getenv("ZRUN")) {                                                   \
            zt_skip("ZRUN is not set (run through meson test)");                 \
            return;                                                              \
        }                                                                         \
    } while (0)

/* Runs `$ZRUN info ARGS` with stdout and stderr into *out (malloc'ed); returns the exit code. */
static int run_info(const char *args, char **out) {
    const char *zrun = getenv("ZRUN");
    if (!zrun) return -1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' info %s 2>&1", zrun, args);
    ZtProc p = zt_proc_sh(cmd, NULL);
    *out = p.out;
    free(p.err);
    return p.status;
}

ZT_TEST(info_prints_stories260K_hyper_parameters_tensors_and_totals) {
    NEED_BINARY();
    const char *path = zt_shared_model("models/stories260K.gguf");
    if (!path) return;
    char *out = NULL;
    char args[4200];
    snprintf(args, sizeof args, "'%s'", path);
    int rc = run_info(args, &out);
    ZT_CHECK(out != NULL);
    static const char *const want[] = {
        "(GGUF v3, 1185376 bytes, 19 keys, alignment 32)",
        "\narchitecture:  llama\n",
        "\n  embedding_length                   64\n",
        "\n  block_count                        5\n",
        "\n  feed_forward_length                172\n",
        "\n  attention.head_count               8\n",
        "\n  attention.head_count_kv            4\n",
        "\n  rope.dimension_count               8\n",
        "\n  rope.freq_base                     -\n",
        "\n  attention.layer_norm_rms_epsilon   9.99999975e-06\n",
        "\n  context_length                     2048\n",
        "\n  vocab_size                         512 (tokenizer)\n",
        "\ntokenizer:     llama (pre: -), 512 tokens, bos 1, eos 2, unknown 0\n",
        "\ntensors: 48\n",
        "\n  token_embd.weight         [64, 512]                  f32              131072\n",
        "\n  blk.4.ffn_down.weight     [172, 64]                  f32               44032\n",
        "\n  parameters                         292800\n",
        "\n  bytes                              1171200 (1.12 MiB)\n",
        /* everything but token_embd (1040128) plus one 256-byte row of it */
        "\n  bytes read per token               1040384 (1016.00 KiB)\n",
    };
    int missing = -1;
    for (int i = 0; i < (int)(sizeof want / sizeof want[0]) && missing < 0; i++)
        if (!strstr(out, want[i])) missing = i;
    if (rc != 0 || missing >= 0) fprintf(stderr, "%s", out);
    free(out);
    ZT_CHECKF(rc == 0, "exit %d", rc);
    ZT_CHECKF(missing < 0, "missing: %s", want[missing]);
}

ZT_TEST(info_counts_a_tied_embedding_once_as_the_output) {
    NEED_BINARY();
    static float embd[8 * 4], q[8 * 8];
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    zr_gguf_w_str(&w, "general.architecture", "llama");
    zr_gguf_w_u32(&w, "llama.block_count", 1);
    zr_gguf_w_tensor(&w, "token_embd.weight", ZR_TYPE_F32, 2, (const int64_t[]){8, 4}, embd);
    zr_gguf_w_tensor(&w, "blk.0.attn_q.weight", ZR_TYPE_F32, 2, (const int64_t[]){8, 8}, q);
    char path[4200];
    snprintf(path, sizeof path, "%s/tied.gguf", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    ZrError e;
    ZT_CHECK(f && zr_gguf_w_write(&w, f, &e) == 0);
    fclose(f);
    zr_gguf_w_free(&w);
    char *out = NULL, args[4300];
    snprintf(args, sizeof args, "'%s'", path);
    int rc = run_info(args, &out);
    ZT_CHECK(out != NULL);
    /* 256 (q) + 128 (embedding as output) + 32 (one embedding row) */
    bool ok = rc == 0 && strstr(out, "\n  bytes read per token               416 (416 B) (output tied to token_embd)\n") &&
              strstr(out, "\n  parameters                         96\n") && strstr(out, "\n  block_count                        1\n") &&
              strstr(out, "\n  embedding_length                   -\n");
    if (!ok) fprintf(stderr, "%s", out);
    free(out);
    ZT_CHECK(ok);
}

ZT_TEST(info_exits_1_naming_the_file_and_field_of_a_bad_file) {
    NEED_BINARY();
    char path[4200], args[4300];
    snprintf(path, sizeof path, "%s/bad.gguf", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    ZT_CHECK(f != NULL);
    fwrite("GGUF\x01\x00\x00\x00", 1, 8, f);
    fclose(f);
    snprintf(args, sizeof args, "'%s'", path);
    char *out = NULL;
    int rc = run_info(args, &out);
    ZT_CHECK(out != NULL);
    bool ok = rc == 1 && strstr(out, "bad.gguf: header: version: expected 2 or 3, found 1") != NULL;
    if (!ok) fprintf(stderr, "%s", out);
    free(out);
    ZT_CHECK(ok);
}

/* after the file, the facts zrun computes with: per model, then per run of equal layers */
ZT_TEST(info_prints_the_facts_zrun_reads_from_the_model) {
    NEED_BINARY();
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    char args[4200], *out = NULL;
    snprintf(args, sizeof args, "'%s'", m);
    ZT_CHECK(run_info(args, &out) == 0 && out);
    ZT_CHECKF(out && strstr(out, "\nmodel:         rope norm, embedding scale 1, attention scale 0.353553385\n"
                                 "  layers 0-4: silu, rope base 10000 scale 1, global attention\n"),
              "%s", out ? out : "");
    free(out);
}

/* a file zrun reads as GGUF but does not run: the tensor table, then why */
ZT_TEST(info_says_why_a_model_does_not_load) {
    NEED_BINARY();
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    char path[4200], args[4300], *out = NULL;
    snprintf(path, sizeof path, "%s/noarch.gguf", zt_tmpdir());
    /* the same file with its architecture renamed (same length: every offset stays); the value
     * follows the key's name, its u32 type and its u64 length */
    size_t n = 0;
    char *b = zt_read_file(m, &n);
    ZT_CHECK(b != NULL);
    if (!b) return;
    char *k = memmem(b, n, "general.architecture", 20);
    char *a = k && (size_t)(k - b) + 20 + 12 + 5 <= n ? k + 20 + 12 : NULL;
    ZT_CHECK(a && !memcmp(a, "llama", 5));
    if (a) memcpy(a, "lmaol", 5);
    FILE *f = fopen(path, "wb");
    ZT_CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0);
    free(b);
    snprintf(args, sizeof args, "'%s'", path);
    ZT_CHECK(run_info(args, &out) == 0 && out);
    ZT_CHECKF(out && strstr(out, "tensors: ") && strstr(out, "\nmodel:         not loadable: ") &&
                  strstr(out, "lmaol"),
              "%s", out ? out : "");
    free(out);
}

/* every other command names its model with -m; info takes it too, as FILE does */
ZT_TEST(info_takes_the_model_as_FILE_or_as_dash_m) {
    NEED_BINARY();
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    char args[4200], *a = NULL, *b = NULL;
    snprintf(args, sizeof args, "'%s'", m);
    int ra = run_info(args, &a);
    snprintf(args, sizeof args, "-m '%s'", m);
    int rb = run_info(args, &b);
    snprintf(args, sizeof args, "--model='%s'", m);
    char *c = NULL;
    int rc = run_info(args, &c);
    ZT_CHECK(ra == 0 && rb == 0 && rc == 0 && a && b && c && !strcmp(a, b) && !strcmp(a, c));
    ZT_CHECK(a && strstr(a, "architecture:  llama"));
    free(a);
    free(b);
    free(c);
}

ZT_TEST(info_and_run_refuse_a_fifo_as_the_model_without_waiting_for_a_writer) {
    NEED_BINARY();
    char fifo[4200], args[4300];
    snprintf(fifo, sizeof fifo, "%s/model.fifo", zt_tmpdir());
    unlink(fifo);
    ZT_CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(args, sizeof args, "'%s'", fifo);
    char *out = NULL;
    int rc = run_info(args, &out); /* (the test's own timeout ends a hang) */
    bool ok = rc == 1 && out && strstr(out, "model.fifo: expected a regular file (a GGUF model), found a FIFO (named pipe)");
    if (!ok && out) fprintf(stderr, "%s", out);
    free(out);
    const char *a2[] = {"-m", fifo, "-p", "x", "--device", "cpu", NULL};
    ZtProc p = zt_proc_zrun(NULL, a2, NULL);
    bool ok2 = p.status == 1 && strstr(p.err, "model.fifo: expected a regular file (a GGUF model), found a FIFO");
    if (!ok2) fprintf(stderr, "%s", p.err);
    zt_proc_free(&p);
    unlink(fifo);
    ZT_CHECK(ok);
    ZT_CHECK(ok2);
}

ZT_TEST(info_usage_errors_exit_2) {
    NEED_BINARY();
    char *out = NULL;
    int r1 = run_info("", &out);
    bool m1 = out && strstr(out, "usage: zrun info FILE");
    free(out);
    int r2 = run_info("a.gguf b.gguf", &out);
    bool m2 = out && strstr(out, "expected one FILE");
    free(out);
    int r3 = run_info("--frobnicate x.gguf", &out);
    bool m3 = out && strstr(out, "unknown option '--frobnicate'");
    free(out);
    ZT_CHECK(r1 == 2 && m1);
    ZT_CHECK(r2 == 2 && m2);
    ZT_CHECK(r3 == 2 && m3);
}

/* Every model and fixture in ../shared: exit 0, and the tensor table has every tensor with the
 * type and shape the reader sees. */
ZT_TEST(info_prints_every_shared_file_with_all_its_tensors) {
    NEED_BINARY();
    const char *dir[2] = {zt_shared("models"), zt_shared("fixtures")};
    int files = 0, bad = 0;
    for (int k = 0; k < 2; k++) {
        char pat[4200];
        glob_t gl;
        snprintf(pat, sizeof pat, "%s/*.gguf", dir[k]);
        if (!dir[k] || glob(pat, 0, NULL, &gl) != 0) continue;
        for (size_t i = 0; i < gl.gl_pathc; i++, files++) {
            char args[4200], *out = NULL;
            snprintf(args, sizeof args, "'%s'", gl.gl_pathv[i]);
            int rc = run_info(args, &out);
            ZrGguf g;
            ZrError e;
            if (!out || rc != 0 || zr_gguf_open(&g, gl.gl_pathv[i], &e)) {
                fprintf(stderr, "  %s: exit %d\n%s", gl.gl_pathv[i], rc, out ? out : "");
                bad++;
                free(out);
                continue;
            }
            int w = 4; /* the name column: as wide as the longest name */
            for (uint64_t t = 0; t < g.n_tensors; t++)
                if ((int)g.tensors[t].name.len > w) w = (int)g.tensors[t].name.len;
            for (uint64_t t = 0; t < g.n_tensors; t++) {
                const ZrGgufTensor *x = &g.tensors[t];
                char line[512], shape[128] = "[";
                for (uint32_t d = 0; d < x->n_dims; d++)
                    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)x->ne[d]);
                snprintf(line, sizeof line, "\n  %-*.*s  %-26s %-8s %14llu\n", w, (int)x->name.len, x->name.ptr,
                         strcat(shape, "]"), zr_type_name(x->type), (unsigned long long)x->nbytes);
                if (!strstr(out, line)) {
                    fprintf(stderr, "  %s: no line%s", gl.gl_pathv[i], line);
                    bad++;
                    break;
                }
            }
            zr_gguf_close(&g);
            free(out);
        }
        globfree(&gl);
    }
    if (!files) { zt_skip("no GGUF files in ../shared"); return; }
    ZT_CHECKF(bad == 0, "%d of %d files", bad, files);
}

int main(void) { return zt_run(); }
