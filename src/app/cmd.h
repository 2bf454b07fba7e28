/* Subcommands. Each returns the process exit code: 0 ok, 1 runtime error, 2 usage error.
 * argv[0] is the subcommand name (or "zrun" for the default run command). */
#pragma once

#include <stddef.h>

#include "env.h"

/* run, chat, bench and eval take the environment main read (env.h); the others need none of it. */
int zr_cmd_run(int argc, char **argv, const ZrEnv *env); /* zrun -m FILE -p PROMPT ... (cmd_run.c; resumed: cmd_resume.c) */
int zr_cmd_info(int argc, char **argv);     /* zrun info FILE               (cmd_info.c) */
int zr_cmd_tokenize(int argc, char **argv); /* zrun tokenize -m FILE -p TEXT (cmd_tokenize.c) */
int zr_cmd_eval(int argc, char **argv, const ZrEnv *env); /* zrun eval -m FILE --tokens IDS --logits OUT (cmd_eval.c) */
int zr_cmd_bench(int argc, char **argv, const ZrEnv *env); /* zrun bench -m FILE ... (bench.c) */
int zr_cmd_template(int argc, char **argv); /* zrun template -m FILE -f CONV.json (cmd_template.c) */
int zr_cmd_chat(int argc, char **argv, const ZrEnv *env); /* zrun chat -m FILE [-sys TEXT] (cmd_chat.c) */

/* The full usage text (--help); kept in step with man/zrun.1 by test/test_cli_docs. */
extern const char zr_usage_text[];
/* zrun --version: "zrun 0.1.0 (commit ...)", the compiler, and the CUDA kernels built in (version.c). */
void zr_version_text(char *out, size_t cap);
/* Text to standard output, flushed: 0, or 1 after saying why the write failed (> /dev/full). */
int zr_print_text(const char *text);
/* A command's --help: usage_line, then the section of zr_usage_text that starts with section
 * ("bench options (zrun bench):") up to its blank line; section NULL: all of zr_usage_text.
 * Returns the exit code (1 on a write error). */
int zr_print_help(const char *usage_line, const char *section);
