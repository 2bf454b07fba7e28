/* libFuzzer target for the command line: the input's NUL-separated pieces are the arguments after
 * "zrun" (at most 64), read as `zrun -m ...` (zr_cli_parse_run) and as `zrun chat`
 * (zr_cli_parse_chat); each piece is also read as `zrun bench --sampling` reads its argument. A
 * refusal must say why (a non-empty message), and what is accepted stays in its bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 64 };

static void check(int rc, const ZrError *err) {
    if (rc != 0 && err->msg[0] == 0) abort(); /* a refusal without a message */
}

static void parse(int argc, char **argv, bool chat) {
    ZrRunSettings s;
    zr_run_settings_defaults(&s);
    ZrError err = {0};
    const int rc = chat ? zr_cli_parse_chat(&s, argc, argv, &err) : zr_cli_parse_run(&s, argc, argv, &err);
    check(rc, &err);
    if (rc == 0 && (s.n_reverse < 0 || s.n_reverse > ZR_MAX_REVERSE || s.n_notes < 0 || s.n_notes > ZR_MAX_NOTES ||
                    (s.graph_steps != 0 && (s.graph_steps < 1 || s.graph_steps > 8))))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"zrun";
    for (size_t i = 0; i < size && argc <= MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    parse(argc, argv, false);
    parse(argc, argv, true);
    for (int i = 1; i < argc; i++) {
        ZrSamplerParams sp;
        ZrError err = {0};
        check(zr_bench_sampling_parse(argv[i], &sp, &err), &err);
    }
    free(buf);
    return 0;
}
