/* zrun chat as a user drives it: lines through a pipe (standard input a file here), stories260K
 * on the CPU, greedy. The second turn reuses the cache: it prefills exactly the tokens of what
 * it adds to the rendered conversation; Ctrl-C during a reply returns to the prompt, at the
 * prompt it ends the conversation with the summary. (test/gpu/test_chat_gpu: the same on CUDA,
 * with the decode graph.) */
#include <poll.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zt.h"
#include "zt_proc.h"

static const char *stories(void) { return zt_shared_model("models/stories260K.gguf"); }

/* A file holding text, for standard input. */
static const char *input_file(const char *name, const char *text) {
    static char path[8][4096];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 4096, "%s/%s", zt_tmpdir(), name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

/* The number after `key` in text, or -1. */
static int number_after(const char *text, const char *key) {
    const char *p = strstr(text, key);
    return p ? atoi(p + strlen(key)) : -1;
}

/* How many tokens zrun tokenize makes of text (special-token text parsed; BOS with bos). */
static int n_tokens(const char *m, const char *text, int bos) {
    const char *args[] = {"tokenize", "-m", m, "-p", text, "--ids", "--special", bos ? NULL : "--no-bos", NULL};
    ZtProc p = zt_proc_zrun(NULL, args, NULL);
    int n = 0;
    for (char *s = strtok(p.out, " \n"); s; s = strtok(NULL, " \n")) n++;
    zt_proc_free(&p);
    return n;
}

ZT_TEST(the_second_turn_prefills_only_the_tokens_it_adds) {
    const char *m = stories();
    if (!m) return;
    const char *in = input_file("two.txt", "Hello there\nWhat next\n");
    const char *args[] = {"chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "12", "-c", "256", "-v", NULL};
    ZtProcOpts o = {.stdin_path = in};
    ZtProc p = zt_proc_zrun(NULL, args, &o);
    ZT_CHECKF(p.status == 0, "exit %d: %s", p.status, p.err);
    /* stories260K has no tokenizer.chat_template: chatml */
    const int t1 = n_tokens(m, "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", 1);
    const int t2 = n_tokens(m, "<|im_end|>\n<|im_start|>user\nWhat next<|im_end|>\n<|im_start|>assistant\n", 0);
    ZT_CHECKF(number_after(p.err, "turn 1: prefilled ") == t1, "want %d: %s", t1, p.err);
    ZT_CHECKF(number_after(p.err, "turn 2: prefilled ") == t2, "want %d: %s", t2, p.err);
    /* the cache: turn 1, the 12 tokens of the first reply (the 12th fed too), turn 2 */
    char want[64];
    snprintf(want, sizeof want, "(only the new turn's; cache %d of 256)", t1 + 12 + t2);
    ZT_CHECKF(strstr(p.err, want), "%s: %s", want, p.err);
    snprintf(want, sizeof want, "tokens prefilled per turn: %d %d", t1, t2);
    ZT_CHECKF(strstr(p.err, want) && strstr(p.err, "chat: 2 turns fed (template chatml"), "%s", p.err);
    fprintf(stderr, "  prefilled per turn: %d %d\n", t1, t2);
    /* two replies, one line each */
    int lines = 0;
    for (const char *s = p.out; (s = strchr(s, '\n')); s++) lines++;
    ZT_CHECKF(lines == 2, "'%s'", p.out);
    zt_proc_free(&p);
}

ZT_TEST(ctrl_c_during_a_reply_stops_it_and_returns_to_the_prompt) {
    const char *m = stories();
    if (!m) return;
    const char *in = input_file("ctrlc.txt", "Hello there\nWhat next\n");
    const char *args[] = {"chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "12", "-c", "256", NULL};
    ZtProcOpts o = {.stdin_path = in, .fault = "chat-sigint:3"};
    ZtProc p = zt_proc_zrun(NULL, args, &o);
    ZT_CHECKF(p.status == 0, "exit %d: %s", p.status, p.err);
    ZT_CHECKF(strstr(p.err, "zrun: reply stopped (Ctrl-C)") && strstr(p.err, "chat: 2 turns fed"), "%s", p.err);
    /* the first reply has 3 tokens and its line; the second is whole (12 tokens) */
    ZT_CHECKF(number_after(p.err, "generated ") == 15, "%s", p.err);
    const char *nl = strchr(p.out, '\n');
    ZT_CHECKF(nl && strchr(nl + 1, '\n') && strlen(nl + 1) > (size_t)(nl - p.out), "'%s'", p.out);
    zt_proc_free(&p);
}

ZT_TEST(ctrl_c_at_the_prompt_ends_the_conversation_with_the_summary) {
    const char *m = stories();
    if (!m) return;
    const char *zrun = getenv("ZRUN");
    if (!zrun) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    char cmd[8192];
    /* standard input stays open after the first line; Ctrl-C comes while zrun waits for the next */
    /* the writer waits for the reply's line (stdout goes to a file, shown at the end), then
     * gives zrun a moment to be back at the prompt */
    snprintf(cmd, sizeof cmd,
             "d=%s; rm -f $d/chat.out; : > $d/chat.out; { printf 'Hello\\n'; i=0; "
             "while [ $(wc -l < $d/chat.out) -lt 1 ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; "
             "sleep 0.5; kill -INT $(cat $d/chat.pid); sleep 1; } | "
             "sh -c 'echo $$ > '$d'/chat.pid; exec \"%s\" chat -m \"%s\" --device cpu --temp 0 -n 4 -c 128 > '$d'/chat.out'; "
             "s=$?; cat $d/chat.out; exit $s",
             zt_tmpdir(), zrun, m);
    ZtProc p = zt_proc_sh(cmd, NULL);
    ZT_CHECKF(p.status == 130, "exit %d: %s", p.status, p.err);
    ZT_CHECKF(strstr(p.err, "chat: 1 turns fed") && strstr(p.err, "zrun: generated 4 tokens"), "%s", p.err);
    zt_proc_free(&p);
}

ZT_TEST(exit_ends_the_conversation_and_empty_lines_are_no_turn) {
    const char *m = stories();
    if (!m) return;
    const char *in = input_file("exit.txt", "\nHello\n\n/exit\nnever read\n");
    const char *args[] = {"chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "4", "-c", "128", NULL};
    ZtProcOpts o = {.stdin_path = in};
    ZtProc p = zt_proc_zrun(NULL, args, &o);
    ZT_CHECKF(p.status == 0 && strstr(p.err, "chat: 1 turns fed"), "exit %d: %s", p.status, p.err);
    zt_proc_free(&p);
}

ZT_TEST(cnv_with_a_system_prompt_and_a_first_message_feeds_them_as_one_render) {
    const char *m = stories();
    if (!m) return;
    const char *args[] = {"-m", m, "-cnv", "-sys", "Be kind", "-p", "Hi", "--device", "cpu", "--temp", "0", "-n", "4",
                          "-c", "128", "-v", NULL};
    ZtProc p = zt_proc_zrun(NULL, args, NULL); /* standard input: /dev/null, the end after the first reply */
    ZT_CHECKF(p.status == 0, "exit %d: %s", p.status, p.err);
    const int t1 = n_tokens(m, "<|im_start|>system\nBe kind<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 1);
    ZT_CHECKF(number_after(p.err, "turn 1: prefilled ") == t1 && strstr(p.err, "chat: 1 turns fed"), "want %d: %s", t1, p.err);
    zt_proc_free(&p);
}

ZT_TEST(a_full_context_ends_the_conversation_and_says_so) {
    const char *m = stories();
    if (!m) return;
    const char *in = input_file("full.txt", "Hello there\nWhat next\n");
    const char *args[] = {"chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "-1", "-c", "64", NULL};
    ZtProcOpts o = {.stdin_path = in};
    ZtProc p = zt_proc_zrun(NULL, args, &o);
    ZT_CHECKF(p.status == 0, "exit %d: %s", p.status, p.err);
    ZT_CHECKF(strstr(p.err, "the context is full") && strstr(p.err, "larger -c") && strstr(p.err, "chat: 1 turns fed"),
              "%s", p.err);
    zt_proc_free(&p);
}

ZT_TEST(a_template_file_is_detected_and_a_bad_name_is_a_usage_error) {
    const char *m = stories();
    if (!m) return;
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/test/chat/detect/t12.jinja", getenv("ZR_SRC") ? getenv("ZR_SRC") : ".");
    const char *in = input_file("one.txt", "Hello\n");
    const char *args[] = {"chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "2", "--chat-template", tmpl, NULL};
    ZtProcOpts o = {.stdin_path = in};
    ZtProc p = zt_proc_zrun(NULL, args, &o);
    ZT_CHECKF(p.status == 0 && strstr(p.err, "template llama3, detected in the file"), "exit %d: %s", p.status, p.err);
    zt_proc_free(&p);
    const char *bad[] = {"chat", "-m", m, "--chat-template", "llama9", NULL};
    p = zt_proc_zrun(NULL, bad, &o);
    ZT_CHECKF(p.status == 2 && strstr(p.err, "--chat-template llama9: not a built-in template name"), "exit %d: %s", p.status, p.err);
    zt_proc_free(&p);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* Appends what the terminal shows to out[0..*n) until it shows `lines` line ends and then the
 * prompt ("> " at the end), or closes (lines < 0), or 20 s pass (a slow, shared machine). */
static void pty_until(int fd, char *out, size_t cap, size_t *n, int lines) {
    for (int waited = 0; waited < 20000;) {
        if (lines >= 0 && count(out, "\r\n") >= lines && *n >= 2 && !memcmp(out + *n - 2, "> ", 2)) return;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 100);
        if (r == 0) {
            waited += 100;
            continue;
        }
        ssize_t k = r > 0 ? read(fd, out + *n, cap - 1 - *n) : -1;
        if (k <= 0) return;
        *n += (size_t)k;
        out[*n] = 0;
    }
}

/* On a terminal: libedit edits the line (UTF-8 included), the up arrow brings the last line
 * back, and Ctrl-C at the prompt ends the conversation with the summary and exit status 130. */
ZT_TEST(a_terminal_gets_line_editing_history_and_ctrl_c_at_the_prompt) {
    const char *m = stories();
    if (!m) return;
    const char *zrun = getenv("ZRUN");
    if (!zrun) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    int fd;
    pid_t pid = forkpty(&fd, NULL, NULL, NULL);
    ZT_CHECK(pid >= 0);
    if (pid == 0) {
        execl(zrun, "zrun", "chat", "-m", m, "--device", "cpu", "--temp", "0", "-n", "8", "-c", "256", (char *)NULL);
        _exit(127);
    }
    static char out[65536];
    size_t n = 0;
    pty_until(fd, out, sizeof out, &n, 0);
    ZT_CHECK(write(fd, "Hell\xc3\xa9 X\x7fthere\r", 15) == 15); /* a backspace takes the X back */
    pty_until(fd, out, sizeof out, &n, 2); /* the line, the reply, the prompt */
    ZT_CHECK(write(fd, "\x1b[A\r", 4) == 4); /* up: the last line again */
    pty_until(fd, out, sizeof out, &n, 4);
    ZT_CHECK(write(fd, "\x03", 1) == 1);
    pty_until(fd, out, sizeof out, &n, -1);
    int st = 0;
    waitpid(pid, &st, 0);
    close(fd);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, out);
    ZT_CHECKF(strstr(out, "chat: 2 turns fed") && strstr(out, "zrun: generated 16 tokens"), "%s", out);
    ZT_CHECKF(strstr(out, "> Hell\xc3\xa9 there"), "%s", out);
}

int main(void) { return zt_run(); }
