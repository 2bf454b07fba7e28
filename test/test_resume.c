/* A run goes on in a new process after the CUDA context is lost (src/app/resume.h), on the CPU:
 * ZRUN_FAULT=context-lost:TOKEN loses the "context" at decode step TOKEN, zrun re-executes itself
 * with the saved state, and the text is byte for byte the text of a run without the loss.
 * Runs the built zrun ($ZRUN) on ../shared/models/stories260K.gguf. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/fault.h"
#include "resume.h"
#include "zt.h"
#include "zt_proc.h"

#define N_TOKENS 48 /* -n: decode steps 0..46 */
#define LINE "continuing in a new process, eager\n"

typedef ZtProc Run;
#define run_free zt_proc_free

/* $ZRUN with args (NULL-terminated), ZRUN_FAULT=fault (NULL: unset), stdin from in_path (or
 * /dev/null), and fd 3 open on state_path when given. */
static Run run_zrun(const char *fault, const char *in_path, const char *state_path, const char *const *args) {
    ZtProcOpts o = {.stdin_path = in_path, .fault = fault, .fd3_path = state_path};
    return zt_proc_zrun(NULL, args, &o);
}

#define RUN(fault, ...) run_zrun(fault, NULL, NULL, (const char *const[]){__VA_ARGS__, NULL})
/* sampled (temperature 0.8, top-k 40), fixed seed, on the CPU */
#define SAMPLED(m) "-m", m, "-p", "One day", "-n", "48", "--temp", "0.8", "--top-k", "40", "--seed", "1234", "--device", "cpu"

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* The model every run here uses; NULL after zt_skip without ../shared. */
static const char *stories(void) { return zt_shared_model("models/stories260K.gguf"); }

ZT_TEST(the_text_after_a_lost_context_is_the_text_without_the_loss_at_steps_0_1_7_and_the_last) {
    const char *m = stories();
    if (!m) return;
    Run e = RUN(NULL, SAMPLED(m));
    ZT_CHECKF(e.status == 0 && strlen(e.out) > 40, "exit %d: %s", e.status, e.err);
    ZT_CHECKF(count(e.err, LINE) == 0 && strstr(e.err, "generated 48 tokens, stop: -n limit; 47 decode steps"), "%s",
              e.err);
    static const char *const faults[] = {"context-lost:0", "context-lost:1", "context-lost:7", "context-lost:46"};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        Run f = RUN(faults[i], SAMPLED(m));
        ZT_CHECKF(f.status == 0, "%s: exit %d: %s", faults[i], f.status, f.err);
        ZT_CHECKF(!strcmp(e.out, f.out), "%s: the text differs:\n%s\n---\n%s", faults[i], e.out, f.out);
        char line[128];
        snprintf(line, sizeof line, "zrun: the CUDA context was lost (ZRUN_FAULT=%s): " LINE, faults[i]);
        ZT_CHECKF(count(f.err, line) == 1 && count(f.err, LINE) == 1, "%s: stderr:\n%s", faults[i], f.err);
        /* counted once: the tokens fed again in the new process are not generated again */
        ZT_CHECKF(strstr(f.err, "generated 48 tokens, stop: -n limit; 47 decode steps"), "%s: %s", faults[i], f.err);
        ZT_CHECKF(strstr(f.err, "the run went on in a new process"), "%s: %s", faults[i], f.err);
        run_free(&f);
    }
    run_free(&e);
}

/* A fixture with random weights prints byte tokens, so characters are split over tokens and the
 * detokenizer holds bytes back at some steps: a loss at every step keeps the text. */
ZT_TEST(the_text_is_kept_at_every_step_when_characters_are_split_over_tokens) {
    const char *m = zt_shared_model("fixtures/llama-F16.gguf");
    if (!m) return;
#define BYTES(m) "-m", m, "-p", "One day", "-n", "24", "--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "3", "--device", "cpu"
    Run e = RUN(NULL, BYTES(m));
    ZT_CHECKF(e.status == 0, "%s", e.err);
    bool multibyte = false;
    for (const char *p = e.out; *p; p++) multibyte |= (unsigned char)*p >= 0x80;
    ZT_CHECKF(multibyte, "no multi-byte character in '%s': the test would prove nothing", e.out);
    for (int t = 0; t < 23; t++) {
        char fault[32];
        snprintf(fault, sizeof fault, "context-lost:%d", t);
        Run f = RUN(fault, BYTES(m));
        ZT_CHECKF(f.status == 0 && count(f.err, LINE) == 1, "%s: exit %d: %s", fault, f.status, f.err);
        ZT_CHECKF(!strcmp(e.out, f.out), "%s: the text differs:\n%s\n---\n%s", fault, e.out, f.out);
        run_free(&f);
    }
#undef BYTES
    run_free(&e);
}

/* The new process opens its cache in the type the state records: with -ctk f32 -ctv f32 too the
 * text is the text without the loss. */
ZT_TEST(the_text_after_a_lost_context_is_kept_with_an_f32_cache) {
    const char *m = stories();
    if (!m) return;
    Run e = RUN(NULL, SAMPLED(m), "-ctk", "f32", "-ctv", "f32");
    Run f = RUN("context-lost:7", SAMPLED(m), "-ctk", "f32", "-ctv", "f32");
    ZT_CHECKF(e.status == 0 && f.status == 0 && count(f.err, LINE) == 1, "exit %d %d: %s", e.status, f.status, f.err);
    ZT_CHECKF(!strcmp(e.out, f.out), "the text differs:\n%s\n---\n%s", e.out, f.out);
    run_free(&e);
    run_free(&f);
}

ZT_TEST(a_fault_after_the_last_decode_step_changes_nothing) {
    const char *m = stories();
    if (!m) return;
    Run e = RUN(NULL, SAMPLED(m));
    Run f = RUN("context-lost:47", SAMPLED(m));
    ZT_CHECKF(f.status == 0 && !strcmp(e.out, f.out) && count(f.err, LINE) == 0, "%s", f.err);
    run_free(&e);
    run_free(&f);
}

ZT_TEST(a_prompt_from_standard_input_is_not_read_again_by_the_new_process) {
    const char *m = stories();
    if (!m) return;
    char in[4200];
    snprintf(in, sizeof in, "%s/prompt.txt", zt_tmpdir());
    FILE *f = fopen(in, "w");
    ZT_CHECK(f);
    fputs("The cat", f);
    fclose(f);
    const char *const args[] = {"-m", m, "-p", "-", "-n", "30", "--temp", "0.8", "--seed", "9", NULL};
    Run e = run_zrun(NULL, in, NULL, args);
    Run l = run_zrun("context-lost:5", in, NULL, args);
    ZT_CHECKF(e.status == 0 && l.status == 0, "exit %d %d: %s", e.status, l.status, l.err);
    ZT_CHECKF(!strncmp(e.out, "The cat", 7) && !strcmp(e.out, l.out), "%s\n---\n%s", e.out, l.out);
    ZT_CHECK(count(l.err, LINE) == 1);
    run_free(&e);
    run_free(&l);
}

ZT_TEST(a_second_loss_ends_the_run_with_a_clear_error_after_a_prefix_of_the_text) {
    const char *m = stories();
    if (!m) return;
    Run e = RUN(NULL, SAMPLED(m));
    Run f = RUN("context-lost:3,9", SAMPLED(m));
    ZT_CHECKF(f.status == 1, "exit %d: %s", f.status, f.err);
    ZT_CHECKF(count(f.err, LINE) == 1, "%s", f.err);
    ZT_CHECKF(strstr(f.err, "zrun: the CUDA context was lost (ZRUN_FAULT=context-lost:3,9): injected at decode step 9") &&
                  strstr(f.err, "a run goes on in a new process only once: stopping after 10 generated tokens"),
              "%s", f.err);
    /* nothing lost, nothing repeated: the tokens printed are the uninterrupted run's */
    ZT_CHECKF(strlen(f.out) > 9 && strlen(f.out) < strlen(e.out) && !strncmp(e.out, f.out, strlen(f.out)),
              "%s\n---\n%s", e.out, f.out);
    run_free(&e);
    run_free(&f);
}

ZT_TEST(a_malformed_context_lost_fault_is_a_usage_error) {
    const char *m = stories();
    if (!m) return;
    Run f = RUN("context-lost:3,x", SAMPLED(m));
    ZT_CHECKF(f.status == 2 && strstr(f.err, "ZRUN_FAULT=context-lost:3,x: expected context-lost:TOKEN"), "%d %s",
              f.status, f.err);
    ZT_CHECK(f.out[0] == 0);
    run_free(&f);
    /* the graph faults' parser leaves it to the wrapper (so a CUDA backend accepts it) */
    ZrFault k;
    ZrError err = {0};
    ZT_CHECK(zr_fault_parse("context-lost:3,9", &k, &err) == 0 && k.kind == ZR_FAULT_NONE);
    ZT_CHECK(zr_fault_parse("context-lostx", &k, &err) == ZR_E_USAGE);
}

/* ---- the state itself ---- */

static int32_t g_tokens[6] = {1, 403, 407, 261, 378, 286};
static uint8_t g_smp[44];

/* A consistent state for stories260K (2 prompt tokens, 4 decode steps). */
static int sample_state(ZrResumeState *st, const char *model) {
    memset(st, 0, sizeof *st);
    ZrError err = {0};
    if (zr_resume_stat_model(st, model, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return 1;
    }
    snprintf(st->backend, sizeof st->backend, "cpu");
    snprintf(st->cause, sizeof st->cause, "the CUDA context was lost (CUDA_ERROR_LAUNCH_FAILED)");
    st->n_vocab = 512;
    st->n_ctx = 512;
    st->kv_type = ZR_KV_F16;
    st->n_predict = 20;
    st->sampler = zr_sampler_defaults();
    st->sampler.repeat_last_n = 0;
    st->sampler.seed = 5;
    st->n_prompt = 2;
    st->n_fed = 6;
    st->tokens = g_tokens;
    st->pending = 400;
    st->n_gen = 5;
    st->n_decode = 4;
    memset(g_smp, 0, sizeof g_smp);
    g_smp[0] = 1; /* rng[0] = 1; repeat_last_n 0, no history */
    st->sampler_state = g_smp;
    st->sampler_state_len = 4 * 8 + 3 * 4;
    st->detok_n_pending = 1;
    st->detok_pending[0] = (char)0xe2;
    st->last = 'x';
    st->load_ms = 1.5;
    st->decode_ms = 7.25;
    st->lost_at_ms = 12345.0;
    return 0;
}

ZT_TEST(a_state_round_trips_and_every_damage_is_refused) {
    const char *m = stories();
    if (!m) return;
    ZrResumeState st, back;
    ZT_CHECK(sample_state(&st, m) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    ZrError err = {0};
    ZT_CHECK(zr_resume_encode(&st, &buf, &len, &err) == 0);
    ZT_CHECKF(zr_resume_decode(buf, len, &back, &err) == 0, "%s", err.msg);
    ZT_CHECK(!strcmp(back.model, m) && back.model_size == st.model_size && back.model_mtime_ns == st.model_mtime_ns);
    ZT_CHECK(!strcmp(back.backend, "cpu") && !strcmp(back.cause, st.cause));
    ZT_CHECK(back.n_ctx == 512 && back.kv_type == ZR_KV_F16);
    ZT_CHECK(back.n_fed == 6 && !memcmp(back.tokens, g_tokens, sizeof g_tokens) && back.pending == 400);
    ZT_CHECK(back.n_gen == 5 && back.n_decode == 4 && back.n_prompt == 2 && back.n_predict == 20);
    ZT_CHECK(back.sampler.seed == 5 && back.sampler.temp == st.sampler.temp && back.sampler.top_k == st.sampler.top_k);
    ZT_CHECK(back.sampler_state_len == st.sampler_state_len && !memcmp(back.sampler_state, g_smp, sizeof g_smp));
    ZT_CHECK(back.detok_n_pending == 1 && back.detok_pending[0] == (char)0xe2 && back.last == 'x');
    ZT_CHECK(back.load_ms == 1.5 && back.decode_ms == 7.25 && back.lost_at_ms == 12345.0);
    zr_resume_free(&back);
    /* every truncation, and every flipped byte, is an error naming what is wrong (never a crash) */
    for (size_t n = 0; n < len; n++) {
        ZT_CHECKF(zr_resume_decode(buf, n, &back, &err) == ZR_E_FORMAT, "truncated at %zu", n);
        buf[n] ^= 0x40;
        ZT_CHECKF(zr_resume_decode(buf, len, &back, &err) == ZR_E_FORMAT, "byte %zu flipped", n);
        buf[n] ^= 0x40;
    }
    ZT_CHECK(zr_resume_decode(buf, len, &back, &err) == 0);
    zr_resume_free(&back);
    free(buf);
    /* inconsistent counters are refused even with a right checksum */
    st.n_decode = 3;
    ZT_CHECK(zr_resume_encode(&st, &buf, &len, &err) == 0);
    ZT_CHECK(zr_resume_decode(buf, len, &back, &err) == ZR_E_FORMAT);
    ZT_CHECKF(strstr(err.msg, "counters"), "%s", err.msg);
    free(buf);
    st.n_decode = 4;
    g_tokens[3] = 512; /* outside the vocabulary */
    ZT_CHECK(zr_resume_encode(&st, &buf, &len, &err) == 0);
    ZT_CHECK(zr_resume_decode(buf, len, &back, &err) == ZR_E_FORMAT);
    ZT_CHECKF(strstr(err.msg, "token 3"), "%s", err.msg);
    g_tokens[3] = 261;
    free(buf);
    /* a cache type this zrun does not have */
    st.kv_type = (ZrKvType)5;
    ZT_CHECK(zr_resume_encode(&st, &buf, &len, &err) == 0);
    ZT_CHECK(zr_resume_decode(buf, len, &back, &err) == ZR_E_FORMAT);
    ZT_CHECKF(strstr(err.msg, "kv_type: expected 0 (f32) or 1 (f16), found 5"), "%s", err.msg);
    free(buf);
}

/* Writes st to path; 0 on success. */
static int save_state(const ZrResumeState *st, const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    ZrError err = {0};
    if (zr_resume_encode(st, &buf, &len, &err)) return 1;
    FILE *f = fopen(path, "wb");
    int rc = !f || fwrite(buf, 1, len, f) != len;
    if (f) fclose(f);
    free(buf);
    return rc;
}

ZT_TEST(a_state_for_another_model_is_refused) {
    const char *m = stories();
    if (!m) return;
    /* a copy of the model: the same bytes, but another file (path and modification time) */
    char other[4200], path[4200];
    snprintf(other, sizeof other, "%s/other.gguf", zt_tmpdir());
    size_t mlen = 0;
    void *bytes = zt_read_file(m, &mlen);
    ZT_CHECK(bytes);
    FILE *f = fopen(other, "wb");
    ZT_CHECK(f && fwrite(bytes, 1, mlen, f) == mlen);
    fclose(f);
    free(bytes);
    ZrResumeState st;
    ZT_CHECK(sample_state(&st, m) == 0);
    snprintf(path, sizeof path, "%s/state.bin", zt_tmpdir());
    ZT_CHECK(save_state(&st, path) == 0);
    const char *const args[] = {"-m", other, "-p", "One day", "--device", "cpu", "--resume-fd", "3", NULL};
    Run r = run_zrun(NULL, NULL, path, args);
    ZT_CHECKF(r.status == 2, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "refusing to continue it with another model") && strstr(r.err, other), "%s", r.err);
    ZT_CHECK(r.out[0] == 0);
    run_free(&r);
    /* and the same state with its own model goes on: 20 tokens in all (19 decode steps), 5 already printed */
    const char *const own[] = {"-m", m, "-p", "One day", "--device", "cpu", "--resume-fd", "3", NULL};
    r = run_zrun(NULL, NULL, path, own);
    ZT_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    ZT_CHECKF(strstr(r.err, "generated 20 tokens") && strstr(r.err, "19 decode steps"), "%s", r.err);
    ZT_CHECKF(r.out[0] != 0 && !strstr(r.out, "One day"), "%s", r.out); /* the prompt was printed before */
    run_free(&r);
}

ZT_TEST(a_damaged_or_missing_state_is_refused) {
    const char *m = stories();
    if (!m) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/garbage.bin", zt_tmpdir());
    FILE *f = fopen(path, "wb");
    ZT_CHECK(f);
    fputs("this is not a state", f);
    fclose(f);
    const char *const args[] = {"-m", m, "-p", "x", "--device", "cpu", "--resume-fd", "3", NULL};
    Run r = run_zrun(NULL, NULL, path, args);
    ZT_CHECKF(r.status == 1 && strstr(r.err, "not a zrun resume state"), "exit %d: %s", r.status, r.err);
    run_free(&r);
    const char *const closed[] = {"-m", m, "-p", "x", "--device", "cpu", "--resume-fd", "9", NULL};
    r = run_zrun(NULL, NULL, NULL, closed);
    ZT_CHECKF(r.status == 2 && strstr(r.err, "--resume-fd 9: Bad file descriptor"), "exit %d: %s", r.status, r.err);
    run_free(&r);
}

int main(void) { return zt_run(); }
