/* Placeholder until this command lands (skeleton commit). */
#include <stdio.h>

#include "cmd.h"

int zr_cmd_tokenize(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "zrun: '%s' is not available in this build yet\n", argv[0]);
    return 1;
}
