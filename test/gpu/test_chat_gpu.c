/* zrun chat on CUDA (stories260K, two turns through a pipe, greedy): the second turn prefills
 * only the tokens it adds, exactly as on the CPU; with --graph the decode step is recorded once
 * and replayed across both replies (a prefill between the replies does not make it record
 * again), and the replies are the eager ones token for token. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_env.h"
#include "zt.h"
#include "zt_proc.h"

static const char *stories(void) { return zt_shared_model("models/stories260K.gguf"); }

static const char *two_lines(void) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/two.txt", zt_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("Hello there\nWhat next\n", f);
    fclose(f);
    return path;
}

static ZtProc chat(const char *m, const char *device, const char *graph) {
    const char *args[] = {"chat", "-m", m, "--device", device, graph, "--temp", "0", "-n", "12", "-c", "256", "-v",
                          "--log-launches", NULL};
    ZtProcOpts o = {.stdin_path = two_lines()};
    return zt_proc_zrun(NULL, args, &o);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

static int number_after(const char *text, const char *key) {
    const char *p = strstr(text, key);
    return p ? atoi(p + strlen(key)) : -1;
}

ZT_TEST(the_graph_is_recorded_once_and_replayed_across_turns) {
    const char *m = stories();
    if (!m) return;
    ZtProc g = chat(m, "cuda", "--graph");
    ZT_CHECKF(g.status == 0, "exit %d: %s", g.status, g.err);
    ZT_CHECKF(count(g.err, "recorded decode step") == 1, "%s", g.err);
    ZT_CHECKF(!strstr(g.err, "decode graph off") && strstr(g.err, "(graph on,"), "%s", g.err);
    ZT_CHECKF(strstr(g.err, "chat: 2 turns fed"), "%s", g.err);
    zt_proc_free(&g);
}

ZT_TEST(the_second_turn_prefills_what_it_adds_as_on_the_cpu) {
    const char *m = stories();
    if (!m) return;
    ZtProc c = chat(m, "cpu", "--no-graph");
    ZtProc g = chat(m, "cuda", "--graph");
    ZT_CHECKF(c.status == 0 && g.status == 0, "exit %d / %d: %s", c.status, g.status, g.err);
    const int t1 = number_after(c.err, "turn 1: prefilled "), t2 = number_after(c.err, "turn 2: prefilled ");
    ZT_CHECKF(t1 > 0 && t2 > 0, "%s", c.err);
    ZT_CHECKF(number_after(g.err, "turn 1: prefilled ") == t1 && number_after(g.err, "turn 2: prefilled ") == t2,
              "cpu %d %d: %s", t1, t2, g.err);
    char want[64];
    snprintf(want, sizeof want, "cache %d of 256", t1 + 12 + t2);
    ZT_CHECKF(strstr(g.err, want), "%s: %s", want, g.err);
    if (strcmp(c.out, g.out)) fprintf(stderr, "  note: the CPU's replies differ from CUDA's:\n%s---\n%s", c.out, g.out);
    zt_proc_free(&c);
    zt_proc_free(&g);
}

ZT_TEST(graph_replies_equal_eager_replies_token_for_token) {
    const char *m = stories();
    if (!m) return;
    ZtProc e = chat(m, "cuda", "--no-graph");
    ZtProc g = chat(m, "cuda", "--graph");
    ZT_CHECKF(e.status == 0 && g.status == 0, "exit %d / %d: %s", e.status, g.status, e.err);
    ZT_CHECKF(!strcmp(e.out, g.out), "eager:\n%s---\ngraph:\n%s", e.out, g.out);
    ZT_CHECKF(strstr(e.err, "(graph off,"), "%s", e.err);
    zt_proc_free(&e);
    zt_proc_free(&g);
}

int main(void) { return gpu_main(); }
