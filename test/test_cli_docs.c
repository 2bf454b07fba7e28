/* The documentation stays true: every long option of `zrun --help` is explained in
 * man/zrun.1, and every option of the generation section is accepted by the parser. */
#include <ctype.h>
#include <stdlib.h>

#include "cli.h"
#include "cmd.h"
#include "zt.h"

/* man/zrun.1 with roff's escaped hyphens ("\-") turned into plain ones; NULL if unreadable. */
static char *man_text(void) {
    const char *src = getenv("ZR_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/man/zrun.1", src ? src : ".");
    char *t = zt_read_file(path, NULL);
    if (!t) {
        fprintf(stderr, "  cannot read %s\n", path);
        return NULL;
    }
    char *w = t;
    for (const char *r = t; *r; r++) {
        if (r[0] == '\\' && r[1] == '-') continue;
        *w++ = *r;
    }
    *w = 0;
    return t;
}

/* Is "--name" in text as a whole option (not a prefix of a longer one)? */
static int has_option(const char *text, const char *opt, size_t n) {
    for (const char *p = text; (p = strstr(p, opt)) != NULL; p++) {
        char after = p[n];
        if (!(isalnum((unsigned char)after) || after == '-')) return 1;
    }
    return 0;
}

ZT_TEST(every_long_option_of_the_help_is_in_the_man_page) {
    char *man = man_text();
    ZT_CHECK(man);
    int missing = 0, seen = 0;
    for (const char *p = zr_usage_text; (p = strstr(p, "--")) != NULL;) {
        const char *e = p + 2;
        while (isalnum((unsigned char)*e) || *e == '-') e++;
        size_t n = (size_t)(e - p);
        if (n > 2) {
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)n, p);
            seen++;
            if (!has_option(man, opt, n)) {
                fprintf(stderr, "  %s is in zrun --help but not in man/zrun.1\n", opt);
                missing++;
            }
        }
        p = e;
    }
    free(man);
    ZT_CHECK(seen > 20);
    ZT_CHECK(missing == 0);
}

ZT_TEST(the_environment_and_exit_status_are_in_the_man_page) {
    char *man = man_text();
    ZT_CHECK(man);
    static const char *const words[] = {"CUDA_GRAPH_ENABLE", "ZRUN_FAULT", "graph-build", "graph-instantiate",
                                        "graph-launch", "graph-901", "replay-mismatch", "sticky",
                                        ".SH ENVIRONMENT", ".SH EXIT STATUS", ".B 130", ".B 2\n", ".B 1\n"};
    int missing = 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strstr(man, words[i])) {
            fprintf(stderr, "  man/zrun.1 lacks '%s'\n", words[i]);
            missing++;
        }
    free(man);
    ZT_CHECK(missing == 0);
}

/* A value for a metavariable of the usage text. */
static const char *sample_value(const char *meta) {
    static const struct { const char *meta, *value; } v[] = {
        {"FILE", "x.txt"}, {"TEXT", "hi"}, {"N", "3"}, {"T", "0.5"}, {"K", "7"},
        {"P", "0.5"},      {"R", "1.1"},   {"S", "9"}, {"D", "cpu"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(meta, v[i].meta)) return v[i].value;
    return NULL;
}

ZT_TEST(every_generation_option_of_the_help_is_accepted_by_the_parser) {
    const char *sec = strstr(zr_usage_text, "generation options:\n");
    ZT_CHECK(sec);
    const char *end = strstr(sec, "\n\n");
    ZT_CHECK(end);
    int checked = 0;
    for (const char *line = sec; line && line < end; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        /* "  -m, --model FILE   text" or "      --graph, --no-graph   text": the option
         * column ends at two spaces */
        const char *start = line;
        while (*start == ' ') start++;
        const char *nl = strchr(line, '\n');
        const char *col_end = strstr(start, "  ");
        if (!col_end || col_end > nl) col_end = nl; /* "--graph, --no-graph decode ..." */
        if (strncmp(start, "-", 1)) continue;
        for (const char *p = start; (p = strstr(p, "--")) != NULL && p < col_end;) {
            const char *e = p + 2;
            while (isalnum((unsigned char)*e) || *e == '-') e++;
            char opt[64], meta[16] = "";
            snprintf(opt, sizeof opt, "%.*s", (int)(e - p), p);
            if (*e == ' ' && isupper((unsigned char)e[1])) {
                const char *m = e + 1, *me = m;
                while (isupper((unsigned char)*me)) me++;
                snprintf(meta, sizeof meta, "%.*s", (int)(me - m), m);
            }
            const char *argv[8] = {"zrun", "-m", "m.gguf", "-p", "hi", opt, NULL, NULL};
            int argc = 6;
            if (meta[0]) {
                const char *v = sample_value(meta);
                ZT_CHECKF(v, "%s: no sample value for %s", opt, meta);
                argv[argc++] = v;
            }
            /* -p/-f exclude each other: give the file instead of the prompt */
            if (!strcmp(opt, "--file")) argv[3] = "--special", argv[4] = "--quiet";
            ZrRunSettings s;
            ZrError err;
            ZT_CHECKF(zr_cli_parse_run(&s, argc, (char **)argv, &err) == 0, "%s %s: %s", opt, meta, err.msg);
            checked++;
            p = e;
        }
    }
    ZT_CHECKF(checked == 23, "%d options found in the generation section, expected 23", checked);
}

int main(void) { return zt_run(); }
