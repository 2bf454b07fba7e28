/* Chat templates render every conversation of test/chat/conv exactly as llama.cpp de3ff815 does
 * (test/chat/golden, made by test/chat/make_goldens.py from the oracle), for every built-in
 * name, with and without the assistant's turn opened; in process and through `zrun template`.
 * And llama.cpp's detection of the family from real Jinja template texts. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "conversation.h"
#include "zt.h"
#include "zt_proc.h"

static char *path2(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static const char *chat_dir(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/test/chat", getenv("ZR_SRC") ? getenv("ZR_SRC") : ".");
    return dir;
}

/* The names golden/ was made for (names.txt, llama_chat_builtin_templates' order). */
static int golden_names(char names[][32], int cap) {
    char *p = path2(chat_dir(), "names.txt");
    FILE *f = fopen(p, "r");
    free(p);
    int n = 0;
    while (f && n < cap && fscanf(f, "%31s", names[n]) == 1) n++;
    if (f) fclose(f);
    return n;
}

ZT_TEST(the_builtin_names_are_llama_cpps_in_its_order) {
    char names[128][32];
    int n = golden_names(names, 128);
    ZT_CHECKF(n == 54, "names.txt: %d names", n);
    ZT_CHECKF(zr_chat_template_count() == n, "%d vs %d", zr_chat_template_count(), n);
    for (int i = 0; i < n; i++) ZT_CHECKF(!strcmp(zr_chat_template_name_at(i), names[i]), "%d: %s vs %s", i, zr_chat_template_name_at(i), names[i]);
    ZT_CHECK(zr_chat_template_name_at(n) == NULL);
    ZT_CHECK(zr_chat_template_by_name("dots1") == NULL); /* detected only, as in llama.cpp */
}

/* Every conversation x name x add_ass: the render equals the golden's bytes. */
ZT_TEST(every_template_renders_every_conversation_as_llama_cpp) {
    char names[128][32];
    int n_names = golden_names(names, 128);
    char *conv_dir = path2(chat_dir(), "conv");
    DIR *d = opendir(conv_dir);
    ZT_CHECKF(d != NULL, "%s", conv_dir);
    int cases = 0, bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t L = strlen(e->d_name);
        if (L < 6 || strcmp(e->d_name + L - 5, ".json")) continue;
        char conv[256];
        snprintf(conv, sizeof conv, "%.*s", (int)(L - 5), e->d_name);
        char *cp = path2(conv_dir, e->d_name);
        ZrConversation c = {0};
        ZrError err;
        int rc = zr_conversation_read_json(&c, cp, &err);
        free(cp);
        ZT_CHECKF(rc == 0, "%s", err.msg);
        for (int i = 0; i < n_names; i++) {
            for (int add = 0; add < 2; add++) {
                char rel[8192];
                snprintf(rel, sizeof rel, "%s/golden/%s/%s.%s", chat_dir(), conv, names[i], add ? "add" : "noadd");
                size_t glen = 0;
                char *want = zt_read_file(rel, &glen);
                ZT_CHECKF(want != NULL, "missing %s", rel);
                char *got;
                size_t len;
                ZT_CHECK(zr_chat_render(zr_chat_template_by_name(names[i]), c.msgs, c.n, add, &got, &len, &err) == 0);
                if (len != glen || memcmp(got, want, len)) {
                    fprintf(stderr, "  %s %s add=%d:\n    want [%.*s]\n    got  [%.*s]\n", conv, names[i], add, (int)glen, want, (int)len, got);
                    bad++;
                }
                cases++;
                free(got);
                free(want);
            }
        }
        zr_conversation_free(&c);
    }
    closedir(d);
    free(conv_dir);
    fprintf(stderr, "  %d cases, %d differ\n", cases, bad);
    ZT_CHECK(cases >= 54 * 2 * 10);
    ZT_CHECK(bad == 0);
}

/* zrun template --chat-template NAME -f CONV [--no-add-assistant]: the golden bytes on stdout. */
ZT_TEST(zrun_template_prints_the_golden_render) {
    char names[128][32];
    int n_names = golden_names(names, 128);
    const char *convs[] = {"turns", "spaces", "multiline", "consecutive", "none"};
    for (size_t k = 0; k < sizeof convs / sizeof convs[0]; k++) {
        char cp[2048];
        snprintf(cp, sizeof cp, "%s/conv/%s.json", chat_dir(), convs[k]);
        for (int i = 0; i < n_names; i++) {
            for (int add = 0; add < 2; add++) {
                const char *args[] = {"template", "--chat-template", names[i], "-f", cp, add ? "--add-assistant" : "--no-add-assistant", NULL};
                ZtProc p = zt_proc_zrun(NULL, args, NULL);
                char rel[8192];
                snprintf(rel, sizeof rel, "%s/golden/%s/%s.%s", chat_dir(), convs[k], names[i], add ? "add" : "noadd");
                size_t glen = 0;
                char *want = zt_read_file(rel, &glen);
                bool same = p.status == 0 && want && strlen(p.out) == glen && !memcmp(p.out, want, glen);
                if (!same) fprintf(stderr, "  %s %s add=%d: status %d, stderr %s", convs[k], names[i], add, p.status, p.err);
                free(want);
                zt_proc_free(&p);
                ZT_CHECK(same);
            }
        }
    }
}

ZT_TEST(zrun_template_names_the_field_of_a_bad_conversation) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bad.json", zt_tmpdir());
    FILE *f = fopen(path, "w");
    fputs("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"user\", \"content\": 3}]", f);
    fclose(f);
    const char *args[] = {"template", "--chat-template", "chatml", "-f", path, NULL};
    ZtProc p = zt_proc_zrun(NULL, args, NULL);
    ZT_CHECKF(p.status == 1 && strstr(p.err, "message 2") && strstr(p.err, "\"content\"") && strstr(p.err, "bad.json"), "%d %s", p.status, p.err);
    zt_proc_free(&p);
    const char *args2[] = {"template", "--chat-template", "no-such-template", "-f", path, NULL};
    p = zt_proc_zrun(NULL, args2, NULL);
    ZT_CHECKF(p.status == 2 && strstr(p.err, "no-such-template"), "%d %s", p.status, p.err);
    zt_proc_free(&p);
}

/* detect/expected.tsv: FILE<TAB>NAMES<TAB>LABEL, NAMES the built-in names whose render equals
 * llama.cpp's render of the text (comma-separated; UNKNOWN: llama.cpp refuses the text). */
ZT_TEST(the_family_is_detected_from_real_template_texts_as_llama_cpp_does) {
    char *p = path2(chat_dir(), "detect/expected.tsv");
    FILE *f = fopen(p, "r");
    free(p);
    ZT_CHECK(f != NULL);
    char line[4096];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char *file = strtok(line, "\t"), *want = strtok(NULL, "\t"), *label = strtok(NULL, "\n");
        if (!file || !want) continue;
        char rel[600];
        snprintf(rel, sizeof rel, "detect/%s", file);
        char *tp = path2(chat_dir(), rel);
        size_t len;
        char *text = zt_read_file(tp, &len);
        free(tp);
        ZT_CHECKF(text != NULL, "%s", file);
        char *z = malloc(len + 1);
        memcpy(z, text, len), z[len] = 0;
        const ZrChatTemplate *t = zr_chat_template_detect(z);
        const char *got = t ? zr_chat_template_name(t) : "UNKNOWN";
        char set[512];
        snprintf(set, sizeof set, ",%s,", want);
        char needle[64];
        snprintf(needle, sizeof needle, ",%s,", got);
        if (!strstr(set, needle)) {
            fprintf(stderr, "  %s (%s): detected %s, llama.cpp: %s\n", file, label ? label : "", got, want);
            bad++;
        }
        n++;
        free(z), free(text);
    }
    fclose(f);
    fprintf(stderr, "  %d template texts\n", n);
    ZT_CHECK(n >= 50);
    ZT_CHECK(bad == 0);
}

/* The Jinja tokenizer.chat_template of real GGUF metadata (llama.cpp's vocab files phi-3 and
 * qwen2): zrun template -m renders as llama.cpp does with that file (checked against the oracle
 * when the goldens were made: phi3 and chatml). */
ZT_TEST(zrun_template_reads_the_models_chat_template) {
    static const char *const cases[][2] = {{"phi-3", "phi3"}, {"qwen2", "chatml"}};
    for (size_t i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.xz", cases[i][0]);
        const char *xz = zt_shared_model(rel);
        if (!xz) return;
        char gguf[4096], cmd[12288];
        snprintf(gguf, sizeof gguf, "%s/%s.gguf", zt_tmpdir(), cases[i][0]);
        snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s'", xz, gguf);
        ZtProc x = zt_proc_sh(cmd, NULL);
        int ok = x.status == 0;
        zt_proc_free(&x);
        if (!ok) {
            zt_skip("xz -dc failed (is xz-utils installed?)");
            return;
        }
        char conv[2048], golden[8192];
        snprintf(conv, sizeof conv, "%s/conv/turns.json", chat_dir());
        snprintf(golden, sizeof golden, "%s/golden/turns/%s.add", chat_dir(), cases[i][1]);
        const char *args[] = {"template", "-m", gguf, "-f", conv, NULL};
        ZtProc p = zt_proc_zrun(NULL, args, NULL);
        size_t glen = 0;
        char *want = zt_read_file(golden, &glen);
        bool same = p.status == 0 && want && strlen(p.out) == glen && !memcmp(p.out, want, glen);
        free(want);
        ZT_CHECKF(same, "%s: status %d, '%s' %s", cases[i][0], p.status, p.out, p.err);
        zt_proc_free(&p);
    }
}

ZT_TEST(a_builtin_name_is_taken_as_a_name_before_any_detection) {
    ZT_CHECK(!strcmp(zr_chat_template_name(zr_chat_template_detect("llama2-sys")), "llama2-sys"));
    ZT_CHECK(!strcmp(zr_chat_template_name(zr_chat_template_detect("chatml")), "chatml"));
    ZT_CHECK(zr_chat_template_detect("dots1") == NULL);
    ZT_CHECK(zr_chat_template_detect("") == NULL);
}

int main(void) { return zt_run(); }
