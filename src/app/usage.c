/* zrun --help, and each command's --help as a section of it (zr_print_help): one text, so the
 * commands' help cannot drift from the whole. Every option listed here is documented in
 * man/zrun.1 (checked by test/test_cli_docs). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

const char zr_usage_text[] =
    "usage: zrun [run] -m FILE (-p PROMPT | -f FILE) [options]   generate text ('run' may be left out)\n"
    "       zrun info FILE   (or: zrun info -m FILE)              metadata, tensors, sizes\n"
    "       zrun tokenize -m FILE (-p TEXT | -f FILE) [--ids] [--pieces] [--special] [--no-bos]\n"
    "       zrun eval -m FILE --tokens IDS_FILE --logits OUT.f32 [--device D] [-t N] [-c N]\n"
    "       zrun bench -m FILE [-p 512] [-n 128] [-r 5] [--graph on|off|both] [-o md|json|csv|jsonl]\n"
    "       zrun COMMAND --help                                   one command's options\n"
    "       zrun --help | --version\n"
    "\n"
    "generation options (zrun run):\n"
    "  -m, --model FILE        GGUF model file\n"
    "  -p, --prompt TEXT       prompt text ('-' reads standard input; \"\" starts from BOS alone)\n"
    "  -f, --file FILE         read the prompt from FILE\n"
    "  -e, --escape            process escapes in the prompt and -r texts: \\n \\r \\t \\' \\\" \\\\ \\xNN\n"
    "      --no-escape         take them as written (the default)\n"
    "  -n, --n-predict N       tokens to generate (default 128; -1 = until end of generation or context;\n"
    "                          also --predict)\n"
    "  -c, --ctx-size N        context size in tokens, prompt + generated (default: the model's, at most 4096)\n"
    "  -t, --threads N         CPU threads (default: all cores)\n"
    "  -s, --seed S            random seed (default or -1: from the clock; printed in the summary)\n"
    "      --temp T            temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K           keep the K most likely tokens (default 40; 0 = off)\n"
    "      --top-p P           nucleus sampling threshold (default 0.95; 1 = off)\n"
    "      --min-p P           drop tokens below P x the top probability (default 0.05; 0 = off)\n"
    "      --repeat-penalty R  penalty for tokens seen recently, > 0 (default 1.0 = off)\n"
    "      --repeat-last-n N   how many recent tokens the penalties consider (default 64; -1 = the context)\n"
    "      --presence-penalty F\n"
    "                          subtracted from the logit of every token seen recently (default 0 = off)\n"
    "      --frequency-penalty F\n"
    "                          subtracted once per time a token was seen recently (default 0 = off)\n"
    "      --ignore-eos        never stop at an end-of-generation token: it is never drawn\n"
    "  -r, --reverse-prompt TEXT\n"
    "                          stop when the generated text ends with TEXT (printed; up to 8 of them)\n"
    "      --no-display-prompt do not echo the prompt before the generated text\n"
    "      --special           recognise special-token text in the prompt (e.g. <|begin_of_text|>)\n"
    "      --color [WHEN]      the echoed prompt in color: on (the flag alone), auto (on a terminal\n"
    "                          without NO_COLOR), off (default)\n"
    "  -v, --verbose           the model, prompt and sampling settings on standard error first\n"
    "      --device D          auto | cpu | cuda (default auto: CUDA; the CPU, with a note, only when no GPU\n"
    "                          is usable; other CUDA errors are errors. cuda: an error, never the CPU)\n"
    "      --graph, --no-graph decode through a CUDA graph (default: CUDA_GRAPH_ENABLE=1 turns it on);\n"
    "                          on compute capability 9.0+ the decode kernels overlap through programmatic\n"
    "                          dependent launch, graph and eager alike (always, no switch)\n"
    "      --verify-graph N    compare N replayed graph tokens with eager bit for bit (default 1)\n"
    "      --profile           per-kernel GPU times (forces eager decode)\n"
    "      --log-launches      print the recorded kernel launches of the decode step\n"
    "      --graph-dot FILE    write the built decode graph as Graphviz dot\n"
    "      --quiet             no summary or notes on standard error (errors still go there)\n"
    "\n"
    "llama.cpp options (zrun run and bench):\n"
    "  -ngl N, -fa [on|off], -b N, -ub N, -mmp 0|1, --mmap, --no-mmap, -no-cnv  accepted; a note\n"
    "                          on standard error says why each does not apply to zrun\n"
    "  -cnv, -i, -sys TEXT     conversation mode: not available yet (issue 13): a usage error\n"
    "\n"
    "info (zrun info):\n"
    "  FILE, -m, --model FILE  the GGUF file to describe\n"
    "\n"
    "tokenize options (zrun tokenize):\n"
    "  -m, --model FILE        GGUF model (only its tokenizer.ggml.* metadata is read)\n"
    "  -p, --prompt TEXT       text to tokenize ('-' reads standard input)\n"
    "  -f, --file FILE         read the text from FILE\n"
    "      --ids               print only the ids, separated by spaces, on one line\n"
    "      --pieces            one line per token: id -> 'piece' (the default)\n"
    "      --special           recognise special-token text such as <|begin_of_text|>\n"
    "      --no-bos            do not add BOS/EOS even where the model asks for them\n"
    "\n"
    "eval options (zrun eval):\n"
    "  -m, --model FILE        GGUF model\n"
    "      --tokens FILE       the token ids, decimal, separated by white space\n"
    "      --logits FILE       where every position's logits go (float32, n_tokens x n_vocab); - = standard output\n"
    "      --device D          auto | cpu | cuda, as for generation (default auto)\n"
    "  -t, --threads N         CPU threads (default: all cores)\n"
    "  -c, --ctx-size N        context size (default: the number of tokens)\n"
    "\n"
    "bench options (zrun bench):\n"
    "  -m, --model FILE        a model to benchmark; repeat for several\n"
    "  -p, --n-prompt N[,N]    prefill tests: one forward of N tokens (default 512; 0 = none)\n"
    "  -n, --n-gen N[,N]       decode tests: BOS, then N timed decode steps with argmax (default 128; 0 = none;\n"
    "                          -p 0 -n 0 is a usage error)\n"
    "  -r, --repetitions N     timed repetitions per test (default 5); t/s is their median +- sd\n"
    "      --warmup N          untimed repetitions before them (default 1)\n"
    "      --graph on|off|both CUDA decode through the graph, eagerly, or both (default off; CUDA_GRAPH_ENABLE=1: on)\n"
    "      --argmax device|host  the decode tests' greedy pick: by the backend (GPU: only the token comes back;\n"
    "                          default) or on the host from the logits copied back every step\n"
    "  -o, --output FORMAT     md | json | csv | jsonl (default md)\n"
    "      --device D          auto | cpu | cuda, as for generation (default auto); every model runs there\n"
    "  -t, --threads N         CPU threads (default: all cores)\n"
    "  -c, --ctx-size N        context size (default: what the tests need: the longest pp, or tg + 1)\n"
    "      --bw-mib N          read-bandwidth probe buffer in MiB (default 1024; 0 = no probe)\n"
    "      --bw-reps N         probe repetitions (default 10 on a GPU, 5 on the CPU)\n"
    "      --profile           per-kernel GPU times of each pass (forces eager decode)\n"
    "      --progress          one line per finished test on standard error (also -v, --verbose)\n"
    "      --quiet             no notes on standard error\n"
    "\n"
    "environment:\n"
    "  CUDA_GRAPH_ENABLE=1     turn graph decode on (a --graph/--no-graph flag wins; bench: --graph on)\n"
    "  ZRUN_FAULT=KIND[:TOKEN] test hook: inject a graph fault (graph-build, graph-instantiate,\n"
    "                          graph-launch, graph-901, replay-mismatch, sticky), or context-lost[:TOKEN[,TOKEN]]:\n"
    "                          lose the CUDA context at decode step TOKEN (the run goes on in a new process)\n"
    "\n"
    "exit status: 0 ok, 1 runtime error, 2 usage error, 130 interrupted by Ctrl-C (after the summary)\n";

/* Writes text to standard output; a write error (a full disk, a closed pipe) is exit 1. */
int zr_print_text(const char *text) {
    fputs(text, stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "zrun: writing standard output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int zr_print_help(const char *usage_line, const char *section) {
    if (!section) return zr_print_text(zr_usage_text);
    const char *from = strstr(zr_usage_text, section);
    const char *to = from ? strstr(from, "\n\n") : NULL;
    if (!from || !to) return zr_print_text(zr_usage_text);
    fputs(usage_line, stdout);
    fputs("\n", stdout);
    fwrite(from, 1, (size_t)(to - from) + 1, stdout);
    return zr_print_text("\n(zrun --help: every command, the environment and the exit status)\n");
}
