/* Option parsing for the run command: values land in the settings, bad ones are usage
 * errors that name the option. */
#include "cli.h"
#include "zt.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof(a[0])))

static int parse(ZrRunSettings *s, ZrError *err, int argc, const char **argv) {
    return zr_cli_parse_run(s, argc, (char **)argv, err);
}

ZT_TEST(defaults_follow_llama_cpp) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "x.gguf", "-p", "hi"};
    ZT_CHECK(parse(&s, &err, ARGC(a), a) == 0);
    ZT_CHECK(!strcmp(s.model, "x.gguf") && !strcmp(s.prompt, "hi") && !s.prompt_file);
    ZT_CHECK(s.n_predict == 128 && s.n_ctx == 0 && s.n_threads == 0);
    ZT_NEAR(s.sampler.temp, 0.8f, 0);
    ZT_CHECK(s.sampler.top_k == 40);
    ZT_NEAR(s.sampler.top_p, 0.95f, 0);
    ZT_NEAR(s.sampler.min_p, 0.05f, 0);
    ZT_NEAR(s.sampler.repeat_penalty, 1.0, 0);
    ZT_CHECK(s.repeat_last_n == 64);
    ZT_CHECK(!s.seed_given && s.device == ZR_DEVICE_AUTO && s.graph == -1 && s.verify_graph == 1);
    ZT_CHECK(!s.quiet && !s.special && !s.profile && !s.log_launches && !s.graph_dot && !s.help);
}

ZT_TEST(every_option_reaches_the_settings) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "--model", "m.gguf", "-f", "p.txt", "-n", "-1", "-c", "512", "-t", "3",
                       "--temp", "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1",
                       "--repeat-penalty", "1.1", "--repeat-last-n", "-1", "--seed", "18446744073709551615",
                       "--special", "--device", "cpu", "--graph", "--verify-graph", "4", "--profile",
                       "--log-launches", "--graph-dot", "g.dot", "--quiet"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0, "%s", err.msg);
    ZT_CHECK(!strcmp(s.model, "m.gguf") && !strcmp(s.prompt_file, "p.txt") && !s.prompt);
    ZT_CHECK(s.n_predict == -1 && s.n_ctx == 512 && s.n_threads == 3);
    ZT_CHECK(s.sampler.temp == 0.0f && s.sampler.top_k == 5);
    ZT_NEAR(s.sampler.top_p, 0.5, 0);
    ZT_NEAR(s.sampler.min_p, 0.1f, 0);
    ZT_NEAR(s.sampler.repeat_penalty, 1.1f, 0);
    ZT_CHECK(s.repeat_last_n == -1);
    ZT_CHECK(s.seed_given && s.sampler.seed == UINT64_MAX);
    ZT_CHECK(s.special && s.device == ZR_DEVICE_CPU && s.graph == 1 && s.verify_graph == 4);
    ZT_CHECK(s.profile && s.log_launches && !strcmp(s.graph_dot, "g.dot") && s.quiet);
    const char *b[] = {"zrun", "-m", "m", "-p", "-", "--no-graph", "--device=cuda", "--seed", "-1"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0, "%s", err.msg);
    ZT_CHECK(!strcmp(s.prompt, "-") && s.graph == 0 && s.device == ZR_DEVICE_CUDA && !s.seed_given);
}

ZT_TEST(help_needs_nothing_else) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "--help"};
    ZT_CHECK(parse(&s, &err, ARGC(a), a) == 0 && s.help);
    const char *b[] = {"run", "-h"};
    ZT_CHECK(parse(&s, &err, ARGC(b), b) == 0 && s.help);
}

/* Each bad command line must fail with ZR_E_USAGE and a message containing `want`. */
static int refused(const char *want, int argc, const char **argv) {
    ZrRunSettings s;
    ZrError err = {0};
    int rc = parse(&s, &err, argc, argv);
    if (rc != ZR_E_USAGE || !strstr(err.msg, want)) {
        fprintf(stderr, "  rc %d, message '%s', wanted '%s'\n", rc, err.msg, want);
        return 0;
    }
    return 1;
}

#define REFUSED(want, ...)                                              \
    do {                                                                \
        const char *a_[] = {"zrun", __VA_ARGS__};                       \
        ZT_CHECK(refused(want, ARGC(a_), a_));                          \
    } while (0)

ZT_TEST(bad_values_are_usage_errors_naming_the_option) {
    REFUSED("--temp", "-m", "m", "-p", "x", "--temp", "-0.5");
    REFUSED("--temp", "-m", "m", "-p", "x", "--temp", "hot");
    REFUSED("--temp", "-m", "m", "-p", "x", "--temp", "nan");
    REFUSED("--temp", "-m", "m", "-p", "x", "--temp", "inf");
    REFUSED("--top-p", "-m", "m", "-p", "x", "--top-p", "1.01");
    REFUSED("--min-p", "-m", "m", "-p", "x", "--min-p", "-0.1");
    REFUSED("--top-k", "-m", "m", "-p", "x", "--top-k", "-1");
    REFUSED("--top-k", "-m", "m", "-p", "x", "--top-k", "4x");
    REFUSED("--repeat-penalty", "-m", "m", "-p", "x", "--repeat-penalty", "0");
    REFUSED("--repeat-last-n", "-m", "m", "-p", "x", "--repeat-last-n", "-2");
    REFUSED("n-predict", "-m", "m", "-p", "x", "-n", "-2");
    REFUSED("n-predict", "-m", "m", "-p", "x", "-n", "99999999999");
    REFUSED("ctx-size", "-m", "m", "-p", "x", "-c", "");
    REFUSED("threads", "-m", "m", "-p", "x", "-t", "-3");
    REFUSED("--seed", "-m", "m", "-p", "x", "--seed", "-5");
    REFUSED("--seed", "-m", "m", "-p", "x", "--seed", "99999999999999999999");
    REFUSED("--device", "-m", "m", "-p", "x", "--device", "tpu");
    REFUSED("--verify-graph", "-m", "m", "-p", "x", "--verify-graph", "-1");
}

ZT_TEST(bad_command_lines_are_usage_errors) {
    REFUSED("unknown option '--frobnicate'", "-m", "m", "-p", "x", "--frobnicate");
    REFUSED("unknown option '-z'", "-m", "m", "-p", "x", "-z");
    REFUSED("takes no value", "-m", "m", "-p", "x", "--quiet=1");
    REFUSED("--temp needs a value", "-m", "m", "-p", "x", "--temp");
    REFUSED("-p needs a value", "-m", "m", "-p");
    REFUSED("no model", "-p", "x");
    REFUSED("no prompt", "-m", "m");
    REFUSED("-p and -f", "-m", "m", "-p", "x", "-f", "y");
    REFUSED("unexpected argument 'hello'", "-m", "m", "-p", "x", "hello");
}

ZT_TEST(number_parsers_check_the_whole_string_and_the_range) {
    ZrError err;
    int i;
    float f;
    uint64_t u;
    ZT_CHECK(zr_cli_int("-x", "42", 0, 100, &i, &err) == 0 && i == 42);
    ZT_CHECK(zr_cli_int("-x", "101", 0, 100, &i, &err) == ZR_E_USAGE);
    ZT_CHECK(strstr(err.msg, "0..100") && strstr(err.msg, "'101'"));
    ZT_CHECK(zr_cli_int("-x", "1 ", 0, 100, &i, &err) == ZR_E_USAGE);
    ZT_CHECK(zr_cli_float("-y", "0.25", 0, 1, &f, &err) == 0 && f == 0.25f);
    ZT_CHECK(zr_cli_float("-y", "1e400", 0, 1e30, &f, &err) == ZR_E_USAGE);
    ZT_CHECK(zr_cli_u64("-s", "0", &u, &err) == 0 && u == 0);
    ZT_CHECK(zr_cli_u64("-s", " -1", &u, &err) == ZR_E_USAGE);
}

int main(void) { return zt_run(); }
