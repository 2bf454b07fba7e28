/* The documentation stays true: every long option of `zrun --help` is explained in
 * man/zrun.1, and every option of the generation section is accepted by the parser; each
 * command's --help is its part of the whole, and help and version report write errors. */
#include <ctype.h>
#include <stdlib.h>

#include <unistd.h>

#include "cli.h"
#include "cmd.h"
#include "zt.h"
#include "zt_proc.h"

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
        {"P", "0.5"},      {"R", "1.1"},   {"S", "9"}, {"D", "cpu"}, {"F", "0.5"}, {"TYPE", "f32"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(meta, v[i].meta)) return v[i].value;
    return NULL;
}

ZT_TEST(every_generation_option_of_the_help_is_accepted_by_the_parser) {
    const char *sec = strstr(zr_usage_text, "generation options (zrun run):\n");
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
    ZT_CHECKF(checked == 36, "%d options found in the generation section, expected 36", checked);
}

ZT_TEST(the_llama_cpp_single_dash_options_of_the_help_are_in_the_man_page) {
    char *man = man_text();
    ZT_CHECK(man);
    static const char *const names[] = {"-ngl", "-fa", "-mmp", "-ub", "-cnv", "-sys", "-no-cnv", "-ctk", "-ctv"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ZT_CHECKF(has_option(zr_usage_text, names[i], strlen(names[i])), "%s is not in zrun --help", names[i]);
        ZT_CHECKF(has_option(man, names[i], strlen(names[i])), "%s is not in man/zrun.1", names[i]);
    }
    free(man);
}

/* `zrun COMMAND --help` prints its own usage line and its section, and exits 0. */
ZT_TEST(each_command_has_its_own_help) {
    if (!getenv("ZRUN")) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    static const struct { const char *cmd, *usage, *option; } c[] = {
        {"run", "usage: zrun [run]", "--repeat-penalty"}, {"bench", "usage: zrun bench", "--bw-mib"},
        {"eval", "usage: zrun eval", "--logits"},          {"tokenize", "usage: zrun tokenize", "--no-bos"},
        {"info", "usage: zrun info", "-m, --model"},
        {"chat", "usage: zrun chat", "--system-prompt"},   {"template", "usage: zrun template", "--no-add-assistant"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ZtProc p = zt_proc_zrun(NULL, (const char *const[]){c[i].cmd, "--help", NULL}, NULL);
        ZT_CHECKF(p.status == 0, "%s --help: exit %d", c[i].cmd, p.status);
        ZT_CHECKF(strstr(p.out, c[i].usage) && strstr(p.out, c[i].option), "%s --help: %s", c[i].cmd, p.out);
        ZT_CHECKF(!strstr(p.out, "environment:"), "%s --help prints the whole help", c[i].cmd);
        zt_proc_free(&p);
    }
    ZtProc all = zt_proc_zrun(NULL, (const char *const[]){"--help", NULL}, NULL);
    ZT_CHECK(all.status == 0 && strstr(all.out, "zrun [run] -m FILE") && strstr(all.out, "environment:"));
    zt_proc_free(&all);
}

ZT_TEST(help_version_and_info_report_a_full_standard_output_with_exit_1) {
    if (!getenv("ZRUN")) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    if (access("/dev/full", W_OK) != 0) { zt_skip("no /dev/full"); return; }
    static const char *const lines[] = {"\"$ZRUN\" --help > /dev/full", "\"$ZRUN\" bench --help > /dev/full",
                                        "\"$ZRUN\" --version > /dev/full"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        ZtProc p = zt_proc_sh(lines[i], NULL);
        ZT_CHECKF(p.status == 1 && strstr(p.err, "No space left"), "%s: exit %d, %s", lines[i], p.status, p.err);
        zt_proc_free(&p);
    }
    const char *m = zt_shared_model("models/stories260K.gguf");
    if (!m) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "\"$ZRUN\" info -m '%s' > /dev/full", m);
    ZtProc p = zt_proc_sh(cmd, NULL);
    ZT_CHECKF(p.status == 1 && strstr(p.err, "No space left"), "info: exit %d, %s", p.status, p.err);
    zt_proc_free(&p);
}

ZT_TEST(version_names_the_commit_and_whether_the_cuda_kernels_are_built_in) {
    if (!getenv("ZRUN")) { zt_skip("$ZRUN is not set (run through meson test)"); return; }
    ZtProc p = zt_proc_zrun(NULL, (const char *const[]){"--version", NULL}, NULL);
    ZT_CHECK(p.status == 0);
    ZT_CHECKF(!strncmp(p.out, "zrun 0.", 7) && strstr(p.out, "(commit ") && strstr(p.out, "built with "), "%s", p.out);
    ZT_CHECKF(strstr(p.out, "CUDA kernels: built in, SASS for sm ") || strstr(p.out, "CUDA kernels: not built in"), "%s",
              p.out);
    zt_proc_free(&p);
}

/* The README's quick start works on a fresh Debian image as root and as a sudo user: sudo only
 * when not root, the package lists fetched first, and the packages .ci/run installs. */
ZT_TEST(the_readme_quick_start_updates_the_package_lists_and_needs_sudo_only_when_not_root) {
    const char *src = getenv("ZR_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", src ? src : ".");
    char *readme = zt_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/.ci/run", src ? src : ".");
    char *ci = zt_read_file(path, NULL);
    ZT_CHECK(readme && ci);
    if (!readme || !ci) return;
    const char *need = strstr(ci, "need=\"");
    ZT_CHECK(need);
    char pkgs[256] = "";
    if (need) sscanf(need + 6, "%255[^\"]", pkgs);
    int lines = 0;
    for (const char *p = readme; (p = strstr(p, "\n    S=$(")) != NULL; p++) {
        const char *end = strchr(p + 1, '\n');
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(end ? end - p - 1 : (long)strlen(p + 1)), p + 1);
        ZT_CHECKF(strstr(line, "S=$([ \"$(id -u)\" = 0 ] || echo sudo); $S apt-get update && $S apt-get install -y "),
                  "%s", line);
        char want[300];
        snprintf(want, sizeof want, "apt-get install -y %s && meson setup build", pkgs);
        ZT_CHECKF(strstr(line, want), "the packages differ from .ci/run's (%s): %s", pkgs, line);
        ZT_CHECK(!strstr(line, "sudo apt-get"));
        lines++;
    }
    ZT_CHECKF(lines == 2, "%d quick-start lines", lines);
    ZT_CHECK(strstr(readme, "-Dcuda=disabled") && strstr(readme, "-Dcuda=auto"));
    free(readme);
    free(ci);
}

int main(void) { return zt_run(); }
