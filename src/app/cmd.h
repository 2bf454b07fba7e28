/* Subcommands. Each returns the process exit code: 0 ok, 1 runtime error, 2 usage error.
 * argv[0] is the subcommand name (or "zrun" for the default run command). */
#pragma once

#include "env.h"

/* run and bench take the environment main read (env.h); the others need none of it. */
int zr_cmd_run(int argc, char **argv, const ZrEnv *env); /* zrun -m FILE -p PROMPT ... (cmd_run.c; resumed: cmd_resume.c) */
int zr_cmd_info(int argc, char **argv);     /* zrun info FILE               (cmd_info.c) */
int zr_cmd_tokenize(int argc, char **argv); /* zrun tokenize -m FILE -p TEXT (cmd_tokenize.c) */
int zr_cmd_eval(int argc, char **argv);     /* zrun eval -m FILE --tokens IDS --logits OUT (cmd_eval.c) */
int zr_cmd_bench(int argc, char **argv, const ZrEnv *env); /* zrun bench -m FILE ... (bench.c) */

/* The full usage text (--help); kept in step with man/zrun.1 by test/test_cli_docs. */
extern const char zr_usage_text[];
