/* zrun bench: its statistics and hash, and a CPU smoke run of the binary ($ZRUN) on a tiny
 * model built here, in every output format: md has the device line and the rows, json parses,
 * jsonl parses line by line, csv rows have the header's columns. Bench is not timed here. */
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "gguf_write.h"
#include "quant.h"
#include "zt.h"
#include "zt_proc.h"

/* ---- statistics, hash, argmax ---- */

ZT_TEST(stats_give_the_median_and_the_sample_standard_deviation) {
    const double odd[] = {3.0, 1.0, 2.0};
    ZrBenchStats s = zr_bench_stats(odd, 3);
    ZT_NEAR(s.median, 2.0, 0);
    ZT_NEAR(s.mean, 2.0, 1e-12);
    ZT_NEAR(s.sd, 1.0, 1e-12);
    ZT_NEAR(s.min, 1.0, 0);
    ZT_NEAR(s.max, 3.0, 0);
    const double even[] = {10.0, 1.0, 4.0, 2.0};
    s = zr_bench_stats(even, 4);
    ZT_NEAR(s.median, 3.0, 0);
    ZT_NEAR(s.sd, sqrt((5.75 * 5.75 + 3.25 * 3.25 + 0.25 * 0.25 + 2.25 * 2.25) / 3.0), 1e-12);
    const double one[] = {7.0};
    s = zr_bench_stats(one, 1);
    ZT_NEAR(s.median, 7.0, 0);
    ZT_NEAR(s.sd, 0.0, 0);
}

ZT_TEST(fnv1a64_matches_the_published_test_vectors) {
    ZT_CHECK(zr_bench_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    ZT_CHECK(zr_bench_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    ZT_CHECK(zr_bench_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
}

ZT_TEST(argmax_takes_the_lowest_index_on_a_tie_and_orders_negative_values) {
    const float a[] = {-3.0f, -1.0f, -2.0f, -1.0f};
    ZT_CHECK(zr_bench_argmax(a, 4) == 1);
    const float b[] = {-INFINITY, -0.5f, 0.0f, -0.0f, 0.25f, 0.25f, -7.0f};
    ZT_CHECK(zr_bench_argmax(b, 7) == 4);
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)((i * 37) % 1000) - 500.0f;
    big[613] = 1e30f;
    ZT_CHECK(zr_bench_argmax(big, 1000) == 613);
    ZT_CHECK(zr_bench_format_parse("csv") == ZR_BENCH_CSV && zr_bench_format_parse("xml") == -1);
}

/* ---- a tiny model ---- */

/* llama: embd 64, 2 layers, 4/2 heads, ff 128, vocab 256 (106,816 parameters); F32 weights
 * from a fixed LCG. */
enum { E = 64, LAYERS = 2, HEADS = 4, KV = 2, FF = 128, VOCAB = 256 };

typedef struct Tiny {
    ZrGgufWriter w;
    float *data[64]; /* each tensor's values, alive until the file is written */
    int n;
    uint32_t state;  /* LCG */
} Tiny;

/* An F32 tensor [ne0, ne1] (ne1 0: 1-D) of offset + scale * U(-0.5, 0.5). */
static void add(Tiny *t, const char *name, int64_t ne0, int64_t ne1, float scale, float offset) {
    const int64_t n = ne0 * (ne1 ? ne1 : 1);
    float *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; v && i < n; i++) {
        t->state = t->state * 1664525u + 1013904223u;
        v[i] = offset + scale * ((float)(t->state >> 8) / 16777216.0f - 0.5f);
    }
    t->data[t->n++] = v;
    zr_gguf_w_tensor(&t->w, name, ZR_TYPE_F32, ne1 ? 2 : 1, (int64_t[]){ne0, ne1 ? ne1 : 1}, v);
}

static const char *tiny_model(void) {
    static char path[4200];
    if (path[0]) return path;
    snprintf(path, sizeof path, "%s/bench_tiny.gguf", zt_tmpdir());
    Tiny t = {.state = 12345};
    ZrGgufWriter *w = &t.w;
    zr_gguf_w_init(w);
    zr_gguf_w_str(w, "general.architecture", "llama");
    zr_gguf_w_u32(w, "general.file_type", 0);
    zr_gguf_w_u32(w, "llama.embedding_length", E);
    zr_gguf_w_u32(w, "llama.block_count", LAYERS);
    zr_gguf_w_u32(w, "llama.feed_forward_length", FF);
    zr_gguf_w_u32(w, "llama.attention.head_count", HEADS);
    zr_gguf_w_u32(w, "llama.attention.head_count_kv", KV);
    zr_gguf_w_u32(w, "llama.context_length", 256);
    zr_gguf_w_u32(w, "llama.vocab_size", VOCAB);
    zr_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    zr_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    add(&t, "token_embd.weight", E, VOCAB, 1.0f, 0.0f);
    add(&t, "output_norm.weight", E, 0, 0.1f, 1.0f);
    add(&t, "output.weight", E, VOCAB, 0.5f, 0.0f);
    for (int il = 0; il < LAYERS; il++) {
        static const struct { const char *name; int ne0, ne1; float scale, offset; } k[] = {
            {"attn_norm.weight", E, 0, 0.1f, 1.0f},         {"attn_q.weight", E, HEADS * (E / HEADS), 0.5f, 0},
            {"attn_k.weight", E, KV * (E / HEADS), 0.5f, 0}, {"attn_v.weight", E, KV * (E / HEADS), 0.5f, 0},
            {"attn_output.weight", E, E, 0.5f, 0},          {"ffn_norm.weight", E, 0, 0.1f, 1.0f},
            {"ffn_gate.weight", E, FF, 0.5f, 0},            {"ffn_up.weight", E, FF, 0.5f, 0},
            {"ffn_down.weight", FF, E, 0.5f, 0},
        };
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            char n[64];
            snprintf(n, sizeof n, "blk.%d.%s", il, k[i].name);
            add(&t, n, k[i].ne0, k[i].ne1, k[i].scale, k[i].offset);
        }
    }
    FILE *f = fopen(path, "wb");
    ZrError err;
    int rc = f ? zr_gguf_w_write(w, f, &err) : -1;
    if (f && fclose(f)) rc = -1;
    zr_gguf_w_free(w);
    for (int i = 0; i < t.n; i++) {
        if (!t.data[i]) rc = -1;
        free(t.data[i]);
    }
    if (rc) {
        fprintf(stderr, "  cannot write %s\n", path);
        path[0] = 0;
        return NULL;
    }
    return path;
}

/* ---- running the binary ---- */

typedef ZtProc Run;
#define run_free zt_proc_free

/* Runs `$ZRUN bench` with args (NULL-terminated). */
static Run run_zrun(const char *const *args) {
    static const char *const bench[] = {"bench", NULL};
    return zt_proc_zrun(bench, args, NULL);
}

/* The smoke run: CPU, 2 threads, pp8 and tg4, 2 repetitions, a small bandwidth probe. */
#define SMOKE(model, fmt) \
    run_zrun((const char *const[]){"-m", model, "-p", "8", "-n", "4", "-r", "2", "--device", "cpu", "-t", "2", \
                                   "--bw-mib", "16", "-o", fmt, NULL})

/* ---- a JSON checker (RFC 8259 grammar; values are not kept) ---- */

static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_string(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i])) return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_number(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (isdigit((unsigned char)*p)) while (isdigit((unsigned char)*p)) p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return NULL;
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return NULL;
        while (isdigit((unsigned char)*p)) p++;
    }
    return p;
}

static const char *json_value(const char *p, int depth) {
    if (depth > 64) return NULL;
    p = ws(p);
    if (*p == '{' || *p == '[') {
        const char close = *p == '{' ? '}' : ']';
        const bool obj = *p == '{';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = json_string(ws(p)))) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = json_value(p, depth + 1))) return NULL;
            p = ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return json_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return json_number(p);
}

/* The whole text is one JSON value. */
static bool json_valid(const char *text) {
    const char *e = json_value(text, 0);
    return e && *ws(e) == 0;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* A logits hash of a record: "logits_hash": "<16 hex>" */
static bool hash_of(const char *rec, const char *test, char out[17]) {
    char key[64];
    snprintf(key, sizeof key, "\"test\": \"%s\"", test);
    const char *t = strstr(rec, key);
    const char *h = t ? strstr(t, "\"logits_hash\": \"") : NULL;
    if (!h) return false;
    h += strlen("\"logits_hash\": \"");
    for (int i = 0; i < 16; i++)
        if (!isxdigit((unsigned char)h[i])) return false;
    memcpy(out, h, 16);
    out[16] = 0;
    return h[16] == '"';
}

ZT_TEST(md_output_has_the_device_line_and_a_row_per_test) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = SMOKE(m, "md");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(!strncmp(r.out, "device: CPU ", 12), "%s", r.out);
    ZT_CHECK(strstr(r.out, "read bandwidth ") && strstr(r.out, "GB/s"));
    static const char *const cols[] = {"model", "size", "params", "backend", "threads", "mode", "test", "t/s",
                                       "GB/s", "% BW", "kern/tok", "host µs/tok", "graph ms", "load ms",
                                       "TTFT ms", "logits hash"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) ZT_CHECKF(strstr(r.out, cols[i]), "no column %s", cols[i]);
    ZT_CHECKF(count(r.out, "| llama 107K F32 ") == 2, "%s", r.out);
    ZT_CHECK(strstr(r.out, "|            pp8 |") && strstr(r.out, "|            tg4 |"));
    ZT_CHECK(count(r.out, " ± ") == 2);
    ZT_CHECK(count(r.out, "| cpu     |       2 | eager ") == 2);
    run_free(&r);
}

ZT_TEST(json_output_is_one_valid_array_with_a_record_per_test) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = SMOKE(m, "json");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(json_valid(r.out), "not JSON: %s", r.out);
    ZT_CHECK(*ws(r.out) == '[');
    ZT_CHECK(count(r.out, "\"model_filename\"") == 2);
    ZT_CHECK(strstr(r.out, "\"test\": \"pp8\"") && strstr(r.out, "\"test\": \"tg4\""));
    ZT_CHECK(count(r.out, "\"hash_stable\": true") == 2);
    ZT_CHECK(count(r.out, "\"backend\": \"cpu\"") == 2);
    ZT_CHECK(count(r.out, "\"pdl\": false") == 2);  /* the CPU has no programmatic launches */
    char h[17];
    ZT_CHECK(hash_of(r.out, "pp8", h) && hash_of(r.out, "tg4", h));
    /* the device line goes to stderr for the machine-readable formats */
    ZT_CHECKF(strstr(r.err, "device: CPU"), "%s", r.err);
    run_free(&r);
}

/* The number after "key": in rec, or -1 when absent or null. */
static double json_field(const char *rec, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(rec, k);
    if (!p || !strncmp(p + strlen(k), "null", 4)) return -1;
    return strtod(p + strlen(k), NULL);
}

/* Start-up is in every record: load (the file to a ready backend) and the first prompt's token,
 * both measured (> 0); json and csv name the fields. */
ZT_TEST(every_record_gives_load_time_and_time_to_first_token) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = SMOKE(m, "jsonl");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    int lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        const double load = json_field(line, "load_ms"), ttft = json_field(line, "ttft_ms");
        ZT_CHECKF(load > 0 && load < 60000, "load_ms %g: %s", load, line);
        ZT_CHECKF(ttft > 0 && ttft < 60000, "ttft_ms %g: %s", ttft, line);
    }
    ZT_CHECK(lines == 2);
    run_free(&r);
    r = SMOKE(m, "csv");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.out, ",warmup,load_ms,ttft_ms,"), "%s", r.out);
    ZT_CHECKF(!strstr(r.out, ",2,1,,"), "an empty load or TTFT field: %s", r.out); /* reps 2, warm-up 1, then load */
    run_free(&r);
}

ZT_TEST(jsonl_output_is_one_valid_object_per_line) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = SMOKE(m, "jsonl");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    int lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        ZT_CHECKF(line[0] == '{' && json_valid(line), "line %d: %s", lines + 1, line);
        lines++;
    }
    ZT_CHECK(lines == 2);
    run_free(&r);
}

/* Splits one CSV line (RFC 4180 quoting) and returns the number of fields. */
static int csv_fields(const char *line) {
    int n = 1;
    bool q = false;
    for (const char *p = line; *p; p++) {
        if (*p == '"') q = !q;
        else if (*p == ',' && !q) n++;
    }
    return q ? -1 : n;
}

ZT_TEST(csv_rows_have_the_columns_of_the_header) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = SMOKE(m, "csv");
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    char *save = NULL;
    char *header = strtok_r(r.out, "\n", &save);
    ZT_CHECK(header && !strncmp(header, "build,backend,device,", 21));
    ZT_CHECK(strstr(header, ",median_ts,sd_ts,") && strstr(header, ",logits_hash,"));
    const int cols = csv_fields(header);
    ZT_CHECK(cols >= 30);
    int rows = 0;
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ZT_CHECKF(csv_fields(line) == cols, "row %d has %d fields, the header %d: %s", rows + 1, csv_fields(line), cols,
                  line);
        rows++;
    }
    ZT_CHECK(rows == 2);
    run_free(&r);
}

ZT_TEST(the_same_model_and_tests_give_the_same_logits_hash_on_one_thread) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    char h[2][2][17];
    for (int i = 0; i < 2; i++) {
        Run r = run_zrun((const char *const[]){"-m", m, "-p", "8", "-n", "4", "-r", "1", "--device", "cpu", "-t", "1",
                                               "--bw-mib", "0", "-o", "jsonl", NULL});
        ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
        ZT_CHECK(hash_of(r.out, "pp8", h[i][0]) && hash_of(r.out, "tg4", h[i][1]));
        /* --bw-mib 0: no probe, so no share of the bandwidth */
        ZT_CHECK(strstr(r.out, "\"bw_pct\": null") && strstr(r.out, "\"read_gbps\": null"));
        run_free(&r);
    }
    ZT_CHECK(!strcmp(h[0][0], h[1][0]) && !strcmp(h[0][1], h[1][1]));
    ZT_CHECK(strcmp(h[0][0], h[0][1]) != 0);
}

/* The backend's pick (the default) and the host's argmax choose the same tokens: same hash. */
ZT_TEST(argmax_device_and_host_give_the_same_logits_hash) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    static const char *const how[2] = {"device", "host"};
    char h[2][17];
    for (int i = 0; i < 2; i++) {
        Run r = run_zrun((const char *const[]){"-m", m, "-p", "0", "-n", "6", "-r", "1", "--device", "cpu", "-t", "1",
                                               "--bw-mib", "0", "-o", "jsonl", "--argmax", how[i], NULL});
        ZT_CHECKF(r.status == 0, "--argmax %s: exit %d: %s", how[i], r.status, r.err);
        ZT_CHECK(hash_of(r.out, "tg6", h[i]));
        run_free(&r);
    }
    ZT_CHECKF(!strcmp(h[0], h[1]), "device %s, host %s", h[0], h[1]);
    Run r = run_zrun((const char *const[]){"-m", m, "--argmax", "gpu", NULL});
    ZT_CHECKF(r.status == 2 && strstr(r.err, "--argmax: expected device or host, found 'gpu'"), "%d %s", r.status, r.err);
    run_free(&r);
}

/* --sampling: every format names it; greedy is the default and equals "--temp 0"; a sampled
 * setting picks other tokens (another hash) and the same ones on every repetition (stable), and
 * --argmax host picks the same tokens as the backend's own loop. */
ZT_TEST(sampling_is_named_in_every_format_and_its_tokens_repeat) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    static const char *const fmts[] = {"md", "json", "jsonl", "csv"};
    static const char *const want[] = {"| greedy ", "\"sampling\": \"greedy\"", "\"sampling\": \"greedy\"", ",\"greedy\","};
    for (int i = 0; i < 4; i++) {
        Run r = run_zrun((const char *const[]){"-m", m, "-p", "4", "-n", "3", "-r", "1", "--device", "cpu",
                                               "--bw-mib", "0", "-o", fmts[i], NULL});
        ZT_CHECKF(r.status == 0, "%s: exit %d: %s", fmts[i], r.status, r.err);
        ZT_CHECKF(strstr(r.out, want[i]) && strstr(r.out, "sampling"), "%s: %s", fmts[i], r.out);
        run_free(&r);
    }
    static const char *const how[][3] = {{"greedy", "device"}, {"--temp 0", "device"}, {"default", "device"},
                                         {"--temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 4", "device"},
                                         {"--temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 4", "host"}};
    char h[5][17];
    for (int i = 0; i < 5; i++) {
        Run r = run_zrun((const char *const[]){"-m", m, "-p", "0", "-n", "12", "-r", "3", "--device", "cpu", "-t", "1",
                                               "--bw-mib", "0", "-o", "jsonl", "--sampling", how[i][0], "--argmax",
                                               how[i][1], NULL});
        ZT_CHECKF(r.status == 0, "--sampling %s: exit %d: %s", how[i][0], r.status, r.err);
        ZT_CHECK(hash_of(r.out, "tg12", h[i]));
        ZT_CHECKF(strstr(r.out, "\"hash_stable\": true") && strstr(r.out, "\"host_steps\": 12"), "%s: %s", how[i][0], r.out);
        char field[128];
        snprintf(field, sizeof field, "\"sampling\": \"%s\"", how[i][0]);
        ZT_CHECKF(strstr(r.out, field), "%s: %s", how[i][0], r.out);
        run_free(&r);
    }
    ZT_CHECKF(!strcmp(h[0], h[1]), "greedy %s, --temp 0 %s", h[0], h[1]);
    ZT_CHECKF(strcmp(h[0], h[3]) != 0, "temperature 1.5 picked the greedy tokens (%s)", h[3]);
    ZT_CHECKF(!strcmp(h[3], h[4]), "the backend's loop %s, the host's %s", h[3], h[4]);
}

ZT_TEST(bad_sampling_is_a_usage_error_naming_the_flag) {
    static const char *const bad[] = {"--top-k -1", "--presence-penalty nan", "--top-k", "-n 5", "sampled", ""};
    static const char *const want[] = {"--sampling: --top-k: expected an integer >= 0, found '-1'",
                                       "--sampling: --presence-penalty: expected a number, found 'nan'",
                                       "each with its value", "found '-n' in '-n 5'", "found 'sampled'",
                                       "each with its value, found ''"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_zrun((const char *const[]){"-m", "x.gguf", "--sampling", bad[i], NULL});
        ZT_CHECKF(r.status == 2 && strstr(r.err, want[i]), "--sampling '%s': exit %d: %s", bad[i], r.status, r.err);
        run_free(&r);
    }
}

ZT_TEST(a_list_of_tests_and_several_models_give_a_row_each) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", m, "-m", m, "-p", "0,4", "-n", "2,3", "-r", "1", "--warmup", "0",
                                           "--device", "cpu", "--bw-mib", "0", "-o", "jsonl", NULL});
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECK(count(r.out, "\"test\": \"pp4\"") == 2 && count(r.out, "\"test\": \"tg2\"") == 2 &&
             count(r.out, "\"test\": \"tg3\"") == 2 && count(r.out, "\"test\": \"pp0\"") == 0);
    ZT_CHECK(count(r.out, "\"warmup\": 0") == 6);
    run_free(&r);
}

/* -d (llama-bench's depth): every test again after a context of D tokens. The context is really
 * in the cache at positions 0..D-1: "pp4 @ d24" (4 ids at positions 24..27 after the 24 of the
 * context: the first 28 of the same id stream) ends on the logits of "pp28" bit for bit (one
 * thread), and decoding after it gives other logits than after BOS alone; each repetition
 * prefills the context again (stable hashes); a -c too small for context and test is a usage
 * error naming both. */
ZT_TEST(depth_runs_each_test_after_a_context_in_the_cache) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", m, "-p", "4,28", "-n", "3", "-d", "0,24", "-r", "2", "--device", "cpu",
                                           "-t", "1", "--bw-mib", "0", "-o", "jsonl", NULL});
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    char pp28[17], pp4d[17], tg[17], tgd[17];
    ZT_CHECK(hash_of(r.out, "pp28", pp28) && hash_of(r.out, "pp4 @ d24", pp4d));
    ZT_CHECK(hash_of(r.out, "tg3", tg) && hash_of(r.out, "tg3 @ d24", tgd));
    ZT_CHECKF(!strcmp(pp28, pp4d), "pp28 %s, pp4 @ d24 %s", pp28, pp4d);
    ZT_CHECKF(strcmp(tg, tgd) != 0, "tg3 after BOS and after 24 tokens: the same logits %s", tg);
    ZT_CHECK(count(r.out, "\"n_depth\": 24") == 3 && count(r.out, "\"n_depth\": 0") == 3);
    ZT_CHECK(count(r.out, "\"hash_stable\": true") == 6);
    run_free(&r);
    r = run_zrun((const char *const[]){"-m", m, "-p", "8", "-n", "16", "-d", "64", "-c", "32", "--device", "cpu",
                                       "--bw-mib", "0", NULL});
    ZT_CHECKF(r.status == 1 && strstr(r.err, "the tests need a context of 81 tokens (-d 64, then -p 8 / -n 16); -c gives 32"),
              "exit %d: %s", r.status, r.err);
    run_free(&r);
    r = run_zrun((const char *const[]){"-m", m, "-d", "-3", NULL});
    ZT_CHECKF(r.status == 2 && strstr(r.err, "-d"), "exit %d: %s", r.status, r.err);
    run_free(&r);
}

/* -ctk/-ctv (llama-bench's): every json, jsonl and csv record names the KV cache's types next to
 * n_ctx, f16 by default; the md table adds type_k and type_v columns only when they are not f16
 * (as llama-bench does); the type reaches the backend (an f32 cache gives other logits); types
 * that differ or that zrun lacks are usage errors. */
ZT_TEST(the_kv_cache_type_is_in_every_record_and_in_the_md_table_when_not_f16) {
    const char *m = tiny_model();
    ZT_CHECK(m);
#define KV_RUN(fmt, ...)                                                                                             \
    run_zrun((const char *const[]){"-m", m, "-p", "8", "-n", "3", "-r", "1", "--device", "cpu", "-t", "1", "--bw-mib", \
                                   "0", "-o", fmt, __VA_ARGS__ NULL})
    char h16[2][17], h32[2][17];
    Run r = KV_RUN("jsonl", );
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(count(r.out, "\"type_k\": \"f16\", \"type_v\": \"f16\", \"reps\"") == 2, "%s", r.out);
    ZT_CHECK(count(r.out, "\"n_ctx\": ") == 2 && strstr(r.out, "\"n_ctx\": 8, \"type_k\""));
    ZT_CHECK(hash_of(r.out, "pp8", h16[0]) && hash_of(r.out, "tg3", h16[1]));
    run_free(&r);
    r = KV_RUN("jsonl", "-ctk", "f32", "-ctv", "f32", );
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(count(r.out, "\"type_k\": \"f32\", \"type_v\": \"f32\"") == 2, "%s", r.out);
    ZT_CHECK(hash_of(r.out, "pp8", h32[0]) && hash_of(r.out, "tg3", h32[1]));
    ZT_CHECKF(strcmp(h16[0], h32[0]) != 0, "pp8: f16 and f32 caches give the same logits %s", h16[0]);
    run_free(&r);
    r = KV_RUN("json", "--cache-type-k", "f32", );
    ZT_CHECKF(r.status == 0 && json_valid(r.out), "exit %d: %s", r.status, r.err);
    ZT_CHECK(count(r.out, "\"type_k\": \"f32\", \"type_v\": \"f32\"") == 2);
    run_free(&r);
    r = KV_RUN("csv", );
    ZT_CHECKF(r.status == 0 && strstr(r.out, ",n_ctx,type_k,type_v,reps,warmup,"), "exit %d: %s", r.status, r.out);
    ZT_CHECKF(count(r.out, ",8,\"f16\",\"f16\",1,1,") == 2, "%s", r.out); /* n_ctx 8 (pp8's), reps 1, warm-up 1 */
    run_free(&r);
    r = KV_RUN("csv", "-ctk", "f32", "-ctv", "f32", );
    ZT_CHECKF(r.status == 0 && count(r.out, ",\"f32\",\"f32\",1,1,") == 2, "exit %d: %s", r.status, r.out);
    run_free(&r);
    r = KV_RUN("md", );
    ZT_CHECKF(r.status == 0 && !strstr(r.out, "type_k") && !strstr(r.out, "f16"), "exit %d: %s", r.status, r.out);
    run_free(&r);
    r = KV_RUN("md", "-ctk", "f32", "-ctv", "f32", );
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.out, "|       1 | type_k | type_v | mode ") || strstr(r.out, "| threads | type_k | type_v |"), "%s",
              r.out);
    ZT_CHECKF(count(r.out, "|       1 | f32    | f32    | eager ") == 2, "%s", r.out);
    /* the separator row has as many columns as the head */
    const char *head = strstr(r.out, "| model"), *sep = head ? strchr(head, '\n') + 1 : NULL;
    ZT_CHECK(head && sep);
    if (head && sep) {
        int bars_head = 0, bars_sep = 0;
        for (const char *p = head; *p != '\n'; p++) bars_head += *p == '|';
        for (const char *p = sep; *p != '\n'; p++) bars_sep += *p == '|';
        ZT_CHECKF(bars_head == bars_sep && bars_head == 21, "head %d, separator %d columns", bars_head - 1, bars_sep - 1);
    }
    run_free(&r);
#undef KV_RUN
    r = run_zrun((const char *const[]){"-m", m, "-ctk", "f16", "-ctv", "f32", NULL});
    ZT_CHECKF(r.status == 2 && strstr(r.err, "-ctk f16 and -ctv f32: zrun keeps K and V in one type; give the same to both") &&
                  strstr(r.err, "usage: zrun bench") && r.out[0] == 0,
              "exit %d: %s", r.status, r.err);
    run_free(&r);
    r = run_zrun((const char *const[]){"-m", m, "-ctv", "q8_0", NULL});
    ZT_CHECKF(r.status == 2 && strstr(r.err, "-ctv/--cache-type-v q8_0: a llama.cpp cache type zrun does not have; zrun keeps "
                                             "the KV cache in f16 (the default) or f32"),
              "exit %d: %s", r.status, r.err);
    run_free(&r);
}

ZT_TEST(a_missing_model_is_reported_and_the_others_still_run) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", "/nonexistent/x.gguf", "-m", m, "-p", "4", "-n", "2", "-r", "1",
                                           "--device", "cpu", "--bw-mib", "0", "-o", "jsonl", NULL});
    ZT_CHECKF(r.status == 1, "exit %d", r.status);
    ZT_CHECKF(strstr(r.err, "/nonexistent/x.gguf"), "%s", r.err);
    ZT_CHECK(count(r.out, "\"model_filename\"") == 2);
    run_free(&r);
}

ZT_TEST(usage_errors_exit_2_naming_the_option) {
    static const char *const cases[][4] = {
        {"-m", "x.gguf", "-o", "xml"},      {"-m", "x.gguf", "--graph", "maybe"}, {"-p", "512", NULL, NULL},
        {"-m", "x.gguf", "-p", "5x"},       {"-m", "x.gguf", "-r", "0"},          {"-m", "x.gguf", "--device", "gpu"},
        {"-m", "x.gguf", "--frob", NULL},
    };
    static const char *const want[] = {"-o", "--graph", "-m FILE", "-p", "-r", "--device", "--frob"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[6] = {0};
        for (int j = 0; j < 4 && cases[i][j]; j++) args[j] = cases[i][j];
        Run r = run_zrun(args);
        ZT_CHECKF(r.status == 2, "case %zu: exit %d", i, r.status);
        ZT_CHECKF(strstr(r.err, want[i]) && strstr(r.err, "usage: zrun bench"), "case %zu: %s", i, r.err);
        ZT_CHECK(r.out[0] == 0);
        run_free(&r);
    }
}

ZT_TEST(no_test_at_all_is_a_usage_error_not_an_empty_table) {
    Run r = run_zrun((const char *const[]){"-m", "x.gguf", "-p", "0", "-n", "0", NULL});
    ZT_CHECKF(r.status == 2 && strstr(r.err, "-p and -n are all 0") && r.out[0] == 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
}

/* llama-bench's -fa 1, -mmp 0, -ngl 99 run (with a note each), never read as other options */
ZT_TEST(llama_bench_options_are_accepted_with_a_note) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", m, "-p", "4", "-n", "2", "-r", "1", "--device", "cpu", "--bw-mib", "0",
                                           "-fa", "1", "-mmp", "0", "-ngl", "99", "-ub", "512", "-o", "jsonl", NULL});
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECK(count(r.out, "\"model_filename\"") == 2);
    ZT_CHECKF(strstr(r.err, "note: -fa/--flash-attn 1 ignored") && strstr(r.err, "note: -mmp/--mmap 0 ignored") &&
                  strstr(r.err, "note: -ngl/--n-gpu-layers 99 ignored"),
              "%s", r.err);
    run_free(&r);
}

/* The tiny model stays in the CPU caches: its tg GB/s beats the memory probe, and a share above
 * 100 % would not mean anything about the memory. */
ZT_TEST(cpu_bw_share_above_100_is_left_out_with_a_note) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", m, "-p", "0", "-n", "16", "-r", "2", "--device", "cpu", "--bw-mib", "64",
                                           "-o", "jsonl", NULL});
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *p = strstr(r.out, "\"bw_pct\": ");
    ZT_CHECK(p);
    const double pct = p && strncmp(p + 10, "null", 4) ? atof(p + 10) : -1.0;
    ZT_CHECKF(pct <= 100.0, "bw_pct %.1f", pct);
    if (pct < 0) ZT_CHECKF(strstr(r.err, "% BW left out") && strstr(r.err, "CPU caches"), "%s", r.err);
    run_free(&r);
}

ZT_TEST(device_cuda_without_a_gpu_is_an_error_and_with_one_runs_there) {
    const char *m = tiny_model();
    ZT_CHECK(m);
    Run r = run_zrun((const char *const[]){"-m", m, "-p", "4", "-n", "2", "-r", "1", "--device", "cuda", "--bw-mib",
                                           "0", "-o", "jsonl", NULL});
    if (r.status == 0) {
        ZT_CHECKF(count(r.out, "\"backend\": \"cuda\"") == 2, "%s", r.out);
    } else {
        ZT_CHECKF(r.status == 1, "exit %d", r.status);
        ZT_CHECKF(strstr(r.err, "--device cuda"), "%s", r.err);
        ZT_CHECK(r.out[0] == 0);
    }
    run_free(&r);
}

int main(void) { return zt_run(); }
