/* zrun: subcommand dispatch. The commands live beside it in src/app; the library below them in src. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "run.h"
#include "sigbus.h"
#include "zr_clock.h"

int main(int argc, char **argv) {
    /* the start "first token after start" counts from (zrun -v): before anything else runs */
    const double t_start = zr_clock_ms();
    zr_sigbus_install(); /* the model is mmap'ed: a file truncated under zrun is reported, not a silent crash */
    /* the edge: the environment is read here, once, and handed down as values */
    ZrEnv env;
    zr_env_read(&env);
    env.t_start_ms = t_start;
    if (argc >= 2) {
        const char *c = argv[1];
        if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) return zr_print_help(NULL, NULL);
        if (!strcmp(c, "--version")) {
            char v[1024];
            zr_version_text(v, sizeof v);
            return zr_print_text(v);
        }
        if (!strcmp(c, "template")) return zr_cmd_template(argc - 1, argv + 1);
        if (!strcmp(c, "chat")) return zr_cmd_chat(argc - 1, argv + 1, &env);
        if (!strcmp(c, "info")) return zr_cmd_info(argc - 1, argv + 1);
        if (!strcmp(c, "tokenize")) return zr_cmd_tokenize(argc - 1, argv + 1);
        if (!strcmp(c, "eval")) return zr_cmd_eval(argc - 1, argv + 1, &env);
        if (!strcmp(c, "bench")) return zr_cmd_bench(argc - 1, argv + 1, &env);
        if (!strcmp(c, "run")) return zr_cmd_run(argc - 1, argv + 1, &env);
    }
    return zr_cmd_run(argc, argv, &env);
}
