/* Option parsing for the run command: values land in the settings, bad ones are usage
 * errors that name the option; llama.cpp's spellings are read as llama.cpp reads them. */
#include "cli.h"
#include "opt.h"
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
                       "--log-launches", "--graph-dot", "g.dot", "--graph-steps", "3", "--quiet"};
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
    ZT_CHECK(s.profile && s.log_launches && !strcmp(s.graph_dot, "g.dot") && s.graph_steps == 3 && s.quiet);
    const char *b[] = {"zrun", "-m", "m", "-p", "-", "--no-graph", "--device=cuda", "--seed", "-1"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0, "%s", err.msg);
    ZT_CHECK(!strcmp(s.prompt, "-") && s.graph == 0 && s.device == ZR_DEVICE_CUDA && !s.seed_given);
}

ZT_TEST(plan_cache_flags_reach_the_settings_and_the_last_wins) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-p", "x"};
    ZT_CHECK(parse(&s, &err, ARGC(a), a) == 0 && !s.plan_cache && !s.no_plan_cache);
    const char *b[] = {"zrun", "-m", "m", "-p", "x", "--plan-cache", "/tmp/p.bin"};
    ZT_CHECK(parse(&s, &err, ARGC(b), b) == 0 && !strcmp(s.plan_cache, "/tmp/p.bin") && !s.no_plan_cache);
    const char *c[] = {"zrun", "-m", "m", "-p", "x", "--plan-cache", "/tmp/p.bin", "--no-plan-cache"};
    ZT_CHECK(parse(&s, &err, ARGC(c), c) == 0 && !s.plan_cache && s.no_plan_cache);
    const char *d[] = {"zrun", "-m", "m", "-p", "x", "--no-plan-cache", "--plan-cache", "q.bin"};
    ZT_CHECK(parse(&s, &err, ARGC(d), d) == 0 && !strcmp(s.plan_cache, "q.bin") && !s.no_plan_cache);
    const char *e[] = {"zrun", "-m", "m", "-p", "x", "--plan-cache", ""};
    ZT_CHECK(parse(&s, &err, ARGC(e), e) == ZR_E_USAGE && strstr(err.msg, "--plan-cache"));
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
    REFUSED("--graph-steps", "-m", "m", "-p", "x", "--graph-steps", "9");
}

ZT_TEST(numbers_are_decimal_only) {
    REFUSED("--temp: expected a number >= 0, found '0x10'", "-m", "m", "-p", "x", "--temp", "0x10");
    REFUSED("--temp", "-m", "m", "-p", "x", "--temp", " 1");
    REFUSED("--top-k", "-m", "m", "-p", "x", "--top-k", "0x10");
    REFUSED("--top-k", "-m", "m", "-p", "x", "--top-k", " 7");
    REFUSED("--seed", "-m", "m", "-p", "x", "--seed", "0x10");
    REFUSED("--seed", "-m", "m", "-p", "x", "--seed", "+5");
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-p", "x", "--temp", ".5", "--top-p", "1e-1", "--top-k", "+3"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0, "%s", err.msg);
    ZT_CHECK(s.sampler.temp == 0.5f && s.sampler.top_k == 3);
    ZT_NEAR(s.sampler.top_p, 0.1f, 0);
}

ZT_TEST(repeat_penalty_has_one_message_for_every_value_not_above_0) {
    REFUSED("--repeat-penalty: expected a number > 0, found '0'", "-m", "m", "-p", "x", "--repeat-penalty", "0");
    REFUSED("--repeat-penalty: expected a number > 0, found '-1'", "-m", "m", "-p", "x", "--repeat-penalty", "-1");
    REFUSED("--repeat-penalty: expected a number > 0, found 'x'", "-m", "m", "-p", "x", "--repeat-penalty", "x");
}

ZT_TEST(llama_cpp_single_dash_long_options_are_read_whole_before_bundles) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-p", "x", "-ngl", "99", "-fa", "-mmp", "0", "-b", "512", "-ub", "128",
                       "-no-cnv", "-n", "5"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0, "%s", err.msg);
    ZT_CHECK(s.n_predict == 5); /* -ngl was not "-n gl" */
    ZT_CHECKF(s.n_notes == 5, "%d notes", s.n_notes);
    ZT_CHECKF(strstr(s.notes[0], "-ngl/--gpu-layers 99 ignored: ") && strstr(s.notes[0], "--device"), "%s", s.notes[0]);
    ZT_CHECKF(strstr(s.notes[1], "-fa/--flash-attn ignored"), "%s", s.notes[1]);
    ZT_CHECKF(strstr(s.notes[2], "-mmp/--mmap 0 ignored"), "%s", s.notes[2]);
    /* -fa takes llama.cpp's values when they follow, and leaves anything else alone */
    const char *b[] = {"zrun", "-m", "m", "-fa", "on", "-p", "x", "--flash-attn", "--no-mmap", "--gpu-layers=7"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0, "%s", err.msg);
    ZT_CHECK(s.n_notes == 4 && strstr(s.notes[0], "-fa/--flash-attn on ignored") && !strcmp(s.prompt, "x"));
    REFUSED("-ngl/--gpu-layers: expected an integer >= -1, found 'all'", "-m", "m", "-p", "x", "-ngl", "all");
}

ZT_TEST(one_letter_options_still_bundle_with_their_value) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-mmodel.gguf", "-n64", "-c512", "-t2", "-px", "-s7"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0, "%s", err.msg);
    ZT_CHECK(!strcmp(s.model, "model.gguf") && s.n_predict == 64 && s.n_ctx == 512 && s.n_threads == 2);
    ZT_CHECK(!strcmp(s.prompt, "x") && s.seed_given && s.sampler.seed == 7);
    const char *b[] = {"zrun", "-m", "m", "-p", "x", "-ve"}; /* two flags */
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0, "%s", err.msg);
    ZT_CHECK(s.verbose && s.escape);
    REFUSED("unknown option '-z' in '-vz'", "-m", "m", "-p", "x", "-vz");
    REFUSED("-n/--n-predict: expected an integer >= -1, found 'gx'", "-m", "m", "-p", "x", "-ngx");
}

ZT_TEST(conversation_options_start_a_chat_without_a_prompt) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-cnv"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0 && s.chat && !s.prompt, "%s", err.msg);
    const char *b[] = {"zrun", "-m", "m", "-i", "-p", "Hi", "--chat-template", "llama3"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0 && s.chat && !strcmp(s.prompt, "Hi") && !strcmp(s.chat_template, "llama3"), "%s", err.msg);
    const char *c[] = {"zrun", "-m", "m", "-sys", "You are kind"};
    ZT_CHECKF(parse(&s, &err, ARGC(c), c) == 0 && s.chat && !strcmp(s.system_prompt, "You are kind"), "%s", err.msg);
    const char *d[] = {"zrun", "-m", "m", "-st", "-p", "x"};
    ZT_CHECKF(parse(&s, &err, ARGC(d), d) == 0 && s.chat && s.single_turn, "%s", err.msg);
    REFUSED("-p -: in a conversation standard input holds the user's lines", "-m", "m", "-cnv", "-p", "-");
    REFUSED("no prompt", "-m", "m");
}

ZT_TEST(llama_cpp_generation_flags_reach_the_settings) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-p", "x", "-s", "42", "--ignore-eos", "-e", "-r", "User:", "-r", "\\n\\n",
                       "--color", "-v", "--presence-penalty", "0.5", "--frequency-penalty", "-0.25", "--predict", "9"};
    ZT_CHECKF(parse(&s, &err, ARGC(a), a) == 0, "%s", err.msg);
    ZT_CHECK(s.seed_given && s.sampler.seed == 42 && s.ignore_eos && s.escape && s.color == 1 && s.verbose);
    ZT_CHECK(s.n_reverse == 2 && !strcmp(s.reverse[0], "User:") && s.n_predict == 9);
    ZT_CHECK(s.sampler.presence_penalty == 0.5f && s.sampler.frequency_penalty == -0.25f);
    const char *b[] = {"zrun", "-m", "m", "-p", "x", "--color", "auto", "-e", "--no-escape"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0, "%s", err.msg);
    ZT_CHECK(s.color == -1 && !s.escape);
    REFUSED("--color: expected on, off or auto, found 'blue'", "-m", "m", "-p", "x", "--color=blue");
    REFUSED("-r/--reverse-prompt: expected a text", "-m", "m", "-p", "x", "-r", "");
}

/* -ctk/-ctv, llama.cpp's spellings and default (f16): zrun keeps K and V in one type, so one
 * flag alone sets it and two that differ are refused naming both */
ZT_TEST(cache_type_flags_reach_the_settings_and_f16_is_the_default) {
    ZrRunSettings s;
    ZrError err;
    const char *a[] = {"zrun", "-m", "m", "-p", "x"};
    ZT_CHECK(parse(&s, &err, ARGC(a), a) == 0 && s.kv_type == ZR_KV_F16);
    const char *b[] = {"zrun", "-m", "m", "-p", "x", "-ctk", "f32", "-ctv", "f32"};
    ZT_CHECKF(parse(&s, &err, ARGC(b), b) == 0 && s.kv_type == ZR_KV_F32, "%s", err.msg);
    const char *c[] = {"zrun", "-m", "m", "-p", "x", "--cache-type-k=f32", "--cache-type-v", "f32"};
    ZT_CHECKF(parse(&s, &err, ARGC(c), c) == 0 && s.kv_type == ZR_KV_F32, "%s", err.msg);
    const char *d[] = {"zrun", "-m", "m", "-p", "x", "-ctk", "f32"};
    ZT_CHECKF(parse(&s, &err, ARGC(d), d) == 0 && s.kv_type == ZR_KV_F32, "%s", err.msg);
    const char *e[] = {"zrun", "-m", "m", "-p", "x", "-ctv", "f32"};
    ZT_CHECKF(parse(&s, &err, ARGC(e), e) == 0 && s.kv_type == ZR_KV_F32, "%s", err.msg);
    const char *f[] = {"zrun", "-m", "m", "-p", "x", "-ctk", "f16", "-ctv", "f16", "-c", "64"};
    ZT_CHECKF(parse(&s, &err, ARGC(f), f) == 0 && s.kv_type == ZR_KV_F16 && s.n_ctx == 64, "%s", err.msg); /* not "-c tk" */
    /* zrun chat reads them too */
    const char *g[] = {"chat", "-m", "m", "-ctk", "f32", "-ctv", "f32"};
    ZT_CHECKF(zr_cli_parse_chat(&s, ARGC(g), (char **)g, &err) == 0 && s.chat && s.kv_type == ZR_KV_F32, "%s", err.msg);
    ZT_CHECK(!strcmp(zr_kv_type_name(ZR_KV_F16), "f16") && !strcmp(zr_kv_type_name(ZR_KV_F32), "f32"));
}

ZT_TEST(cache_types_that_differ_are_a_usage_error_naming_both_flags) {
    REFUSED("-ctk f16 and -ctv f32: zrun keeps K and V in one type; give the same to both", "-m", "m", "-p", "x", "-ctk",
            "f16", "-ctv", "f32");
    REFUSED("-ctk f32 and -ctv f16: zrun keeps K and V in one type", "-m", "m", "-p", "x", "--cache-type-v", "f16",
            "--cache-type-k", "f32");
}

ZT_TEST(cache_types_zrun_lacks_are_usage_errors_naming_the_ones_it_has) {
    static const char *const llama_only[] = {"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "bf16"};
    for (size_t i = 0; i < sizeof llama_only / sizeof llama_only[0]; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "-ctk/--cache-type-k %s: a llama.cpp cache type zrun does not have; zrun keeps the KV cache in f16 (the "
                 "default) or f32",
                 llama_only[i]);
        REFUSED(want, "-m", "m", "-p", "x", "-ctk", llama_only[i]);
        snprintf(want, sizeof want, "-ctv/--cache-type-v %s: a llama.cpp cache type zrun does not have", llama_only[i]);
        REFUSED(want, "-m", "m", "-p", "x", "-ctv", llama_only[i]);
    }
    REFUSED("-ctk/--cache-type-k: expected f16 or f32, found 'F16'", "-m", "m", "-p", "x", "-ctk", "F16");
    REFUSED("--cache-type-v: expected f16 or f32, found 'half'", "-m", "m", "-p", "x", "--cache-type-v", "half");
    REFUSED("-ctk/--cache-type-k: expected f16 or f32, found ''", "-m", "m", "-p", "x", "-ctk", "");
    REFUSED("-ctk needs a value", "-m", "m", "-p", "x", "-ctk");
}

ZT_TEST(escapes_are_processed_as_llama_cpp_does) {
    char t[] = "a\\nb\\t\\\\c\\x41\\q\\";
    size_t n = zr_cli_unescape(t, strlen(t));
    ZT_CHECKF(n == 10 && !memcmp(t, "a\nb\t\\cA\\q\\", n), "%zu '%.*s'", n, (int)n, t);
}

ZT_TEST(the_reader_stops_at_double_dash_and_passes_arguments) {
    static const ZrOpt opts[] = {{1, "-x|--ex", ZR_OPT_FLAG, NULL}, {2, "-y", ZR_OPT_VALUE, NULL}, {0, NULL, 0, NULL}};
    const char *argv[] = {"t", "FILE", "-x", "-", "--", "-y"};
    ZrOptReader r;
    zr_opt_init(&r, ARGC(argv), (char **)argv);
    const char *v;
    ZrError err;
    ZT_CHECK(zr_opt_next(&r, opts, &v, &err) == ZR_OPT_ARG && !strcmp(v, "FILE"));
    ZT_CHECK(zr_opt_next(&r, opts, &v, &err) == 1 && !strcmp(zr_opt_label(&r), "-x/--ex"));
    ZT_CHECK(zr_opt_next(&r, opts, &v, &err) == ZR_OPT_ARG && !strcmp(v, "-"));
    ZT_CHECK(zr_opt_next(&r, opts, &v, &err) == ZR_OPT_ARG && !strcmp(v, "-y"));
    ZT_CHECK(zr_opt_next(&r, opts, &v, &err) == ZR_OPT_END);
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
