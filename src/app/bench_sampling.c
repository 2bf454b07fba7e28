/* zrun bench --sampling (bench.h): the run's own option parser on the flags given, so a value is
 * checked exactly as `zrun -m` checks it, and only sampling flags are let through. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

#define MAX_WORDS 32

/* The run's flags that set the sampling, each taking a value. */
static const char *const k_flags[] = {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                      "--repeat-last-n", "--presence-penalty", "--frequency-penalty", "-s",
                                      "--seed"};

static bool sampling_flag(const char *w) {
    for (size_t i = 0; i < sizeof k_flags / sizeof k_flags[0]; i++)
        if (!strcmp(w, k_flags[i])) return true;
    return false;
}

int zr_bench_sampling_parse(const char *arg, ZrSamplerParams *sp, ZrError *err) {
    *sp = zr_sampler_defaults();
    if (!strcmp(arg, "greedy")) {
        sp->temp = 0.0f;
        return ZR_OK;
    }
    if (!strcmp(arg, "default")) return ZR_OK;
    /* words separated by blanks, in a copy: argv for the run's parser behind a model and prompt */
    char buf[512];
    if (strlen(arg) >= sizeof buf)
        return zr_err(err, ZR_E_USAGE, "--sampling: expected greedy, default or sampling flags of at most %zu bytes, found %zu",
                      sizeof buf - 1, strlen(arg));
    snprintf(buf, sizeof buf, "%s", arg);
    char *argv[5 + MAX_WORDS] = {"zrun bench --sampling", "-m", "-", "-p", ""};
    int argc = 5, words = 0;
    for (char *save = NULL, *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        if (words == MAX_WORDS)
            return zr_err(err, ZR_E_USAGE, "--sampling: expected at most %d words, found more in '%s'", MAX_WORDS, arg);
        /* a flag, or the value after one */
        if (words % 2 == 0 && !sampling_flag(w))
            return zr_err(err, ZR_E_USAGE,
                          "--sampling: expected greedy, default or sampling flags (--temp, --top-k, --top-p, --min-p, "
                          "--repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty, --seed) each "
                          "with its value; found '%s' in '%s'",
                          w, arg);
        argv[argc++] = w;
        words++;
    }
    if (words == 0 || words % 2)
        return zr_err(err, ZR_E_USAGE, "--sampling: expected greedy, default or sampling flags each with its value, found '%s'",
                      arg);
    ZrRunSettings s;
    zr_run_settings_defaults(&s);
    if (zr_cli_parse_run(&s, argc, argv, err)) return zr_err_wrap(err, "--sampling");
    *sp = s.sampler;
    sp->repeat_last_n = s.repeat_last_n;
    if (!s.seed_given) sp->seed = zr_sampler_defaults().seed;
    return ZR_OK;
}
