#include "resume.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char k_magic[8] = {'Z', 'R', 'R', 'E', 'S', 'U', 'M', 'E'};

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- writing ---- */

typedef struct Writer {
    uint8_t *buf;
    size_t len, cap;
    bool failed;
} Writer;

static void put(Writer *w, const void *p, size_t n) {
    if (w->failed) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb) {
            w->failed = true;
            return;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

#define PUT(w, v) put(w, &(v), sizeof(v))

static void put_blob(Writer *w, const void *p, uint32_t n) {
    PUT(w, n);
    put(w, p, n);
}

static void put_str(Writer *w, const char *s) { put_blob(w, s, (uint32_t)strlen(s)); }

int zr_resume_encode(const ZrResumeState *st, uint8_t **buf, size_t *len, ZrError *err) {
    Writer w = {0};
    const uint32_t version = ZR_RESUME_VERSION, rest = 0;
    put(&w, k_magic, sizeof k_magic);
    PUT(&w, version);
    PUT(&w, rest); /* patched below */
    PUT(&w, st->resumes);
    put_str(&w, st->model);
    PUT(&w, st->model_size);
    PUT(&w, st->model_mtime_s);
    PUT(&w, st->model_mtime_ns);
    put_str(&w, st->backend);
    put_str(&w, st->cause);
    PUT(&w, st->n_vocab);
    PUT(&w, st->n_ctx);
    const uint32_t kv_type = (uint32_t)st->kv_type;
    PUT(&w, kv_type);
    PUT(&w, st->n_predict);
    const ZrSamplerParams *sp = &st->sampler;
    PUT(&w, sp->temp);
    PUT(&w, sp->top_k);
    PUT(&w, sp->top_p);
    PUT(&w, sp->min_p);
    PUT(&w, sp->repeat_penalty);
    PUT(&w, sp->presence_penalty);
    PUT(&w, sp->frequency_penalty);
    PUT(&w, sp->repeat_last_n);
    PUT(&w, sp->seed);
    PUT(&w, st->n_prompt);
    PUT(&w, st->n_fed);
    PUT(&w, st->pending);
    PUT(&w, st->n_gen);
    PUT(&w, st->n_decode);
    put_blob(&w, st->sampler_state, st->sampler_state_len);
    put(&w, st->detok_pending, sizeof st->detok_pending);
    PUT(&w, st->detok_n_pending);
    const uint8_t flags[3] = {st->detok_at_start, st->detok_special, (uint8_t)st->last};
    put(&w, flags, sizeof flags);
    PUT(&w, st->load_ms);
    PUT(&w, st->prefill_ms);
    PUT(&w, st->decode_ms);
    PUT(&w, st->lost_at_ms);
    put(&w, st->tokens, (size_t)st->n_fed * sizeof *st->tokens);
    if (!w.failed) {
        const uint32_t n = (uint32_t)(w.len - 16 + sizeof(uint64_t));
        memcpy(w.buf + 12, &n, sizeof n);
        const uint64_t sum = fnv1a(w.buf, w.len);
        PUT(&w, sum);
    }
    if (w.failed) {
        free(w.buf);
        return zr_err(err, ZR_E_NOMEM, "resume state: out of memory for %d tokens", st->n_fed);
    }
    *buf = w.buf;
    *len = w.len;
    return ZR_OK;
}

/* ---- reading ---- */

typedef struct Reader {
    const uint8_t *p;
    size_t left;
    const char *field; /* the field that did not fit, for the message */
} Reader;

static bool get(Reader *r, void *out, size_t n, const char *field) {
    if (r->field) return false;
    if (n > r->left) {
        r->field = field;
        return false;
    }
    memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

#define GET(r, v) get(r, &(v), sizeof(v), #v)

static bool get_str(Reader *r, char *out, size_t cap, const char *field) {
    uint32_t n = 0;
    if (!get(r, &n, sizeof n, field)) return false;
    if (n >= cap) {
        r->field = field;
        return false;
    }
    if (!get(r, out, n, field)) return false;
    out[n] = 0;
    return memchr(out, 0, n) == NULL || (r->field = field, false);
}

void zr_resume_free(ZrResumeState *st) {
    free(st->tokens);
    free(st->sampler_state);
    st->tokens = NULL;
    st->sampler_state = NULL;
}

static int bad(ZrResumeState *st, ZrError *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(ZrResumeState *st, ZrError *err, const char *fmt, ...) {
    zr_resume_free(st);
    va_list ap;
    va_start(ap, fmt);
    zr_verr(err, ZR_E_FORMAT, fmt, ap);
    va_end(ap);
    return zr_err_wrap(err, "resume state");
}

int zr_resume_decode(const uint8_t *buf, size_t len, ZrResumeState *st, ZrError *err) {
    memset(st, 0, sizeof *st);
    if (len < 16 + sizeof(uint64_t) || memcmp(buf, k_magic, sizeof k_magic))
        return bad(st, err, "not a zrun resume state (magic \"ZRRESUME\" expected, %zu bytes found)", len);
    uint32_t version, rest;
    memcpy(&version, buf + 8, sizeof version);
    memcpy(&rest, buf + 12, sizeof rest);
    if (version != ZR_RESUME_VERSION)
        return bad(st, err, "version: expected %d (this zrun's), found %u", ZR_RESUME_VERSION, version);
    if ((size_t)rest != len - 16) return bad(st, err, "size: the header says %u bytes follow, found %zu", rest, len - 16);
    uint64_t sum;
    memcpy(&sum, buf + len - sizeof sum, sizeof sum);
    if (sum != fnv1a(buf, len - sizeof sum)) return bad(st, err, "checksum: the state is damaged");

    Reader r = {buf + 16, len - 16 - sizeof sum, NULL};
    ZrSamplerParams *sp = &st->sampler;
    uint32_t blob = 0, kv_type = 0;
    GET(&r, st->resumes);
    get_str(&r, st->model, sizeof st->model, "model");
    GET(&r, st->model_size);
    GET(&r, st->model_mtime_s);
    GET(&r, st->model_mtime_ns);
    get_str(&r, st->backend, sizeof st->backend, "backend");
    get_str(&r, st->cause, sizeof st->cause, "cause");
    GET(&r, st->n_vocab);
    GET(&r, st->n_ctx);
    GET(&r, kv_type);
    GET(&r, st->n_predict);
    GET(&r, sp->temp);
    GET(&r, sp->top_k);
    GET(&r, sp->top_p);
    GET(&r, sp->min_p);
    GET(&r, sp->repeat_penalty);
    GET(&r, sp->presence_penalty);
    GET(&r, sp->frequency_penalty);
    GET(&r, sp->repeat_last_n);
    GET(&r, sp->seed);
    GET(&r, st->n_prompt);
    GET(&r, st->n_fed);
    GET(&r, st->pending);
    GET(&r, st->n_gen);
    GET(&r, st->n_decode);
    if (GET(&r, blob)) {
        if (blob > r.left) {
            r.field = "sampler state";
        } else if (!(st->sampler_state = malloc(blob ? blob : 1))) {
            return bad(st, err, "out of memory for a sampler state of %u bytes", blob);
        } else {
            st->sampler_state_len = blob;
            get(&r, st->sampler_state, blob, "sampler state");
        }
    }
    get(&r, st->detok_pending, sizeof st->detok_pending, "detokenizer bytes");
    GET(&r, st->detok_n_pending);
    uint8_t flags[3] = {0};
    get(&r, flags, sizeof flags, "flags");
    st->detok_at_start = flags[0];
    st->detok_special = flags[1];
    st->last = (char)flags[2];
    GET(&r, st->load_ms);
    GET(&r, st->prefill_ms);
    GET(&r, st->decode_ms);
    GET(&r, st->lost_at_ms);
    if (r.field) return bad(st, err, "%s: the state ends inside it", r.field);

    if (strcmp(st->backend, "cpu") && strcmp(st->backend, "cuda"))
        return bad(st, err, "backend: expected cpu or cuda, found \"%s\"", st->backend);
    if (st->n_vocab <= 0) return bad(st, err, "n_vocab: expected > 0, found %d", st->n_vocab);
    if (st->n_ctx <= 0 || st->n_ctx > ZR_RESUME_MAX_TOKENS)
        return bad(st, err, "n_ctx: expected 1..%d, found %d", ZR_RESUME_MAX_TOKENS, st->n_ctx);
    if (kv_type != ZR_KV_F32 && kv_type != ZR_KV_F16)
        return bad(st, err, "kv_type: expected %d (f32) or %d (f16), found %u", ZR_KV_F32, ZR_KV_F16, kv_type);
    st->kv_type = (ZrKvType)kv_type;
    if (st->n_prompt < 1 || st->n_prompt > st->n_fed || st->n_fed >= st->n_ctx)
        return bad(st, err, "token counts: expected 1 <= prompt (%d) <= fed (%d) < context (%d)", st->n_prompt,
                   st->n_fed, st->n_ctx);
    if (st->n_decode != st->n_fed - st->n_prompt || st->n_gen != st->n_decode + 1)
        return bad(st, err, "counters: expected %d decode steps and %d generated tokens, found %d and %d",
                   st->n_fed - st->n_prompt, st->n_fed - st->n_prompt + 1, st->n_decode, st->n_gen);
    if (st->n_predict >= 0 && st->n_gen > st->n_predict)
        return bad(st, err, "n_gen: %d tokens generated, more than -n %d", st->n_gen, st->n_predict);
    if (st->pending < 0 || st->pending >= st->n_vocab)
        return bad(st, err, "pending token: expected 0..%d, found %d", st->n_vocab - 1, st->pending);
    if (st->detok_n_pending < 0 || st->detok_n_pending > (int32_t)sizeof st->detok_pending)
        return bad(st, err, "detokenizer: expected 0..%zu held-back bytes, found %d", sizeof st->detok_pending,
                   st->detok_n_pending);
    if (r.left != (size_t)st->n_fed * sizeof(int32_t))
        return bad(st, err, "tokens: expected %d (%zu bytes), found %zu bytes", st->n_fed,
                   (size_t)st->n_fed * sizeof(int32_t), r.left);
    st->tokens = malloc((size_t)st->n_fed * sizeof *st->tokens);
    if (!st->tokens) return bad(st, err, "out of memory for %d tokens", st->n_fed);
    memcpy(st->tokens, r.p, r.left);
    for (int i = 0; i < st->n_fed; i++)
        if (st->tokens[i] < 0 || st->tokens[i] >= st->n_vocab)
            return bad(st, err, "token %d: expected an id in 0..%d, found %d", i, st->n_vocab - 1, st->tokens[i]);
    return ZR_OK;
}

int zr_resume_read_fd(int fd, ZrResumeState *st, ZrError *err) {
    memset(st, 0, sizeof *st);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return zr_err(err, ZR_E_USAGE, "--resume-fd %d: %s", fd, strerror(e));
    }
    /* the header, checked before any large allocation */
    const size_t len = (size_t)sb.st_size;
    if (!S_ISREG(sb.st_mode) || len > 64u + 8u * ZR_RESUME_MAX_TOKENS + 8u * 1048576u) {
        close(fd);
        return zr_err(err, ZR_E_USAGE, "--resume-fd %d: not a zrun resume state (%s of %zu bytes)", fd,
                      S_ISREG(sb.st_mode) ? "a file" : "not a regular file", len);
    }
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return zr_err(err, ZR_E_NOMEM, "--resume-fd %d: out of memory for %zu bytes", fd, len);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    int rc = got == len ? zr_resume_decode(buf, len, st, err)
                        : zr_err(err, ZR_E_IO, "--resume-fd %d: read %zu of %zu bytes", fd, got, len);
    free(buf);
    return rc;
}

int zr_resume_stat_model(ZrResumeState *st, const char *path, ZrError *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return zr_err(err, ZR_E_IO, "%s: %s", path, strerror(errno));
    if (strlen(path) >= sizeof st->model)
        return zr_err(err, ZR_E_RANGE, "%s: the path is longer than %zu bytes", path, sizeof st->model - 1);
    snprintf(st->model, sizeof st->model, "%s", path);
    st->model_size = (uint64_t)sb.st_size;
    st->model_mtime_s = (int64_t)sb.st_mtim.tv_sec;
    st->model_mtime_ns = (int64_t)sb.st_mtim.tv_nsec;
    return ZR_OK;
}

int zr_resume_check_model(const ZrResumeState *st, const char *path, int n_vocab, ZrError *err) {
    ZrResumeState now = {0};
    int rc = zr_resume_stat_model(&now, path, err);
    if (rc) return rc;
    if (now.model_size != st->model_size || now.model_mtime_s != st->model_mtime_s ||
        now.model_mtime_ns != st->model_mtime_ns || strcmp(path, st->model))
        return zr_err(err, ZR_E_USAGE,
                      "the run to continue was made with %s (%llu bytes, modified at %lld.%09lld), not with %s "
                      "(%llu bytes, modified at %lld.%09lld): refusing to continue it with another model",
                      st->model, (unsigned long long)st->model_size, (long long)st->model_mtime_s,
                      (long long)st->model_mtime_ns, path, (unsigned long long)now.model_size,
                      (long long)now.model_mtime_s, (long long)now.model_mtime_ns);
    if (n_vocab != st->n_vocab)
        return zr_err(err, ZR_E_USAGE, "the run to continue had %d tokens in its vocabulary, %s has %d", st->n_vocab,
                      path, n_vocab);
    return ZR_OK;
}

/* An anonymous file without close-on-exec: memfd, else an unnamed file in /tmp. */
static int anon_fd(ZrError *err) {
    int fd = memfd_create("zrun-resume", 0);
    if (fd >= 0) return fd;
    int e = errno;
    fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
    if (fd >= 0) return fd;
    return zr_err(err, ZR_E_IO, "no file for the state: memfd_create: %s; O_TMPFILE in /tmp: %s", strerror(e),
                  strerror(errno)),
           -1;
}

int zr_resume_exec(const ZrResumeState *st, int argc, char **argv, ZrError *err) {
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = zr_resume_encode(st, &buf, &len, err);
    if (rc) return rc;
    int fd = anon_fd(err);
    if (fd < 0) {
        free(buf);
        return err->code;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    free(buf);
    if (done < len) {
        rc = zr_err(err, ZR_E_IO, "writing the state: %s", strerror(errno));
        close(fd);
        return rc;
    }
    /* memfd_create without MFD_CLOEXEC and open without O_CLOEXEC leave it open across exec;
     * say so anyway, in case a libc adds the flag by default */
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0) {
        rc = zr_err(err, ZR_E_IO, "keeping the state open across exec: %s", strerror(errno));
        close(fd);
        return rc;
    }
    char fd_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", fd);
    char **nargv = calloc((size_t)argc + 5, sizeof *nargv);
    if (!nargv) {
        close(fd);
        return zr_err(err, ZR_E_NOMEM, "out of memory");
    }
    /* "run" first, so the new arguments are options whatever argv holds; the user's own
     * --graph later on is overridden by the resumed run itself (it is always eager) */
    int n = 0;
    nargv[n++] = "zrun";
    nargv[n++] = "run";
    nargv[n++] = "--resume-fd";
    nargv[n++] = fd_text;
    nargv[n++] = "--no-graph";
    for (int i = 1; i < argc; i++) nargv[n++] = argv[i];
    nargv[n] = NULL;
    fflush(NULL);
    execv("/proc/self/exe", nargv);
    rc = zr_err(err, ZR_E_IO, "execv /proc/self/exe: %s", strerror(errno));
    free(nargv);
    close(fd);
    return rc;
}
