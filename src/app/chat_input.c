/* User lines for the chat (chat_input.h): libedit on a terminal, plain reads elsewhere. */
#include "chat_input.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

struct ZrLineInput {
    bool tty;
    int wake_fd;
    bool interrupted;  /* the wake fd fired while libedit waited for a key */
    EditLine *el;
    History *hist;
    const char *prompt;
    char *buf;         /* pipe: bytes read, [0, n); a line returned is [0, line_end) */
    size_t n, cap, consumed;
    bool eof;
};

/* Waits until fd 0 or the wake fd is readable: 1 input, 0 Ctrl-C, -1 error. */
static int wait_input(ZrLineInput *in) {
    for (;;) {
        struct pollfd p[2] = {{0, POLLIN, 0}, {in->wake_fd, POLLIN, 0}};
        int n = poll(p, in->wake_fd >= 0 ? 2 : 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (in->wake_fd >= 0 && (p[1].revents & POLLIN)) {
            char drain[16];
            if (read(in->wake_fd, drain, sizeof drain) < 0) { /* nothing to do */ }
            return 0;
        }
        return 1;
    }
}

/* libedit's character reader: one character from the terminal, or end of input at Ctrl-C. */
static int getc_fn(EditLine *el, wchar_t *wc) {
    ZrLineInput *in;
    el_get(el, EL_CLIENTDATA, &in);
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (;;) {
        int w = wait_input(in);
        if (w == 0) {
            in->interrupted = true;
            return 0;
        }
        if (w < 0) return -1;
        char c;
        ssize_t k = read(0, &c, 1);
        if (k == 0) return 0;
        if (k < 0) return errno == EINTR ? 0 : -1;
        size_t r = mbrtowc(wc, &c, 1, &st);
        if (r == (size_t)-2) continue;  /* more bytes of one character */
        if (r == (size_t)-1) {          /* not in the locale's charset: take the byte alone */
            memset(&st, 0, sizeof st);
            *wc = (unsigned char)c;
        }
        return 1;
    }
}

static char *prompt_fn(EditLine *el) {
    ZrLineInput *in;
    el_get(el, EL_CLIENTDATA, &in);
    return (char *)in->prompt;
}

ZrLineInput *zr_line_open(const char *prog, bool tty, int wake_fd) {
    ZrLineInput *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->tty = tty;
    in->wake_fd = wake_fd;
    in->prompt = "";
    if (!tty) return in;
    setlocale(LC_CTYPE, ""); /* libedit shows and returns the terminal's multibyte text */
    in->el = el_init(prog, stdin, stdout, stderr);
    in->hist = history_init();
    if (!in->el || !in->hist) {
        zr_line_close(in);
        return NULL;
    }
    HistEvent ev;
    history(in->hist, &ev, H_SETSIZE, 1000);
    history(in->hist, &ev, H_SETUNIQUE, 1);
    el_set(in->el, EL_CLIENTDATA, in);
    el_set(in->el, EL_EDITOR, "emacs");
    el_set(in->el, EL_HIST, history, in->hist);
    el_set(in->el, EL_PROMPT, prompt_fn);
    el_set(in->el, EL_GETCFN, getc_fn);
    el_source(in->el, NULL); /* ~/.editrc, as every libedit program */
    return in;
}

static ZrLineStatus read_tty(ZrLineInput *in, const char *prompt, const char **line, size_t *len) {
    in->prompt = prompt;
    in->interrupted = false;
    int count = 0;
    const char *s = el_gets(in->el, &count);
    if (in->interrupted) {
        fputc('\n', stdout);
        return ZR_LINE_INTERRUPT;
    }
    if (!s || count <= 0) return ZR_LINE_EOF;
    size_t n = (size_t)count;
    if (n && s[n - 1] == '\n') n--;
    if (n + 1 > in->cap) {
        char *b = realloc(in->buf, n + 1);
        if (!b) return ZR_LINE_ERROR;
        in->buf = b;
        in->cap = n + 1;
    }
    memcpy(in->buf, s, n);
    in->buf[n] = 0;
    if (n) {
        HistEvent ev;
        history(in->hist, &ev, H_ENTER, in->buf);
    }
    *line = in->buf;
    *len = n;
    return ZR_LINE_OK;
}

/* Plain reads: bytes up to a newline (or the end of input). */
static ZrLineStatus read_plain(ZrLineInput *in, const char **line, size_t *len) {
    if (in->consumed) { /* drop the line returned last time */
        memmove(in->buf, in->buf + in->consumed, in->n - in->consumed);
        in->n -= in->consumed;
        in->consumed = 0;
    }
    for (;;) {
        char *nl = in->n ? memchr(in->buf, '\n', in->n) : NULL;
        if (nl || (in->eof && in->n)) {
            size_t k = nl ? (size_t)(nl - in->buf) : in->n;
            in->consumed = nl ? k + 1 : k;
            if (nl) *nl = 0;
            else in->buf[k] = 0; /* cap > n always (see below) */
            *line = in->buf;
            *len = k;
            return ZR_LINE_OK;
        }
        if (in->eof) return ZR_LINE_EOF;
        int w = wait_input(in);
        if (w == 0) return ZR_LINE_INTERRUPT;
        if (w < 0) return ZR_LINE_ERROR;
        if (in->cap - in->n < 4097) {
            size_t cap = in->cap ? in->cap * 2 : 8192;
            char *b = realloc(in->buf, cap);
            if (!b) return ZR_LINE_ERROR;
            in->buf = b;
            in->cap = cap;
        }
        ssize_t k = read(0, in->buf + in->n, 4096);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return ZR_LINE_ERROR;
        if (k == 0) in->eof = true;
        in->n += (size_t)k;
    }
}

ZrLineStatus zr_line_read(ZrLineInput *in, const char *prompt, const char **line, size_t *len) {
    return in->tty ? read_tty(in, prompt, line, len) : read_plain(in, line, len);
}

void zr_line_close(ZrLineInput *in) {
    if (!in) return;
    if (in->el) el_end(in->el);
    if (in->hist) history_end(in->hist);
    free(in->buf);
    free(in);
}
