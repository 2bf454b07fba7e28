/* zrun template: a conversation rendered by a chat template, exactly as llama.cpp's
 * llama_chat_apply_template renders it (src/chat.c), for debugging prompts and for tests.
 *   zrun template (-m FILE | --chat-template NAME|FILE) -f CONVERSATION.json [--no-add-assistant]
 *   zrun template --list
 * The prompt goes to standard output as it is: no newline is added. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "conversation.h"
#include "gguf.h"
#include "opt.h"

static const char k_usage[] =
    "usage: zrun template (-m FILE | --chat-template NAME|FILE) -f CONVERSATION.json [--no-add-assistant]\n"
    "       zrun template --list\n";

enum { OPT_MODEL = 1, OPT_TEMPLATE, OPT_FILE, OPT_ADD, OPT_NO_ADD, OPT_LIST, OPT_HELP };

static const ZrOpt template_options[] = {
    {OPT_MODEL, "-m|--model", ZR_OPT_VALUE, NULL},
    {OPT_TEMPLATE, "--chat-template", ZR_OPT_VALUE, NULL},
    {OPT_FILE, "-f|--file", ZR_OPT_VALUE, NULL},
    {OPT_ADD, "--add-assistant", ZR_OPT_FLAG, NULL},
    {OPT_NO_ADD, "--no-add-assistant", ZR_OPT_FLAG, NULL},
    {OPT_LIST, "--list", ZR_OPT_FLAG, NULL},
    {OPT_HELP, "-h|--help", ZR_OPT_FLAG, NULL},
    {0, NULL, 0, NULL},
};

static int list_names(void) {
    for (int i = 0; i < zr_chat_template_count(); i++) printf("%s\n", zr_chat_template_name_at(i));
    return zr_print_text("");
}

int zr_cmd_template(int argc, char **argv) {
    const char *model = NULL, *tmpl_arg = NULL, *conv_path = NULL;
    bool add_ass = true;
    ZrOptReader rd;
    zr_opt_init(&rd, argc, argv);
    ZrError err;
    for (;;) {
        const char *v;
        int id = zr_opt_next(&rd, template_options, &v, &err);
        if (id == ZR_OPT_END) break;
        switch (id) {
        case ZR_OPT_ERROR: fprintf(stderr, "zrun template: %s\n%s", err.msg, k_usage); return 2;
        case ZR_OPT_ARG: fprintf(stderr, "zrun template: unexpected argument '%s'\n%s", v, k_usage); return 2;
        case OPT_MODEL: model = v; break;
        case OPT_TEMPLATE: tmpl_arg = v; break;
        case OPT_FILE: conv_path = v; break;
        case OPT_ADD: add_ass = true; break;
        case OPT_NO_ADD: add_ass = false; break;
        case OPT_LIST: return list_names();
        case OPT_HELP: return zr_print_help(k_usage, "template options (zrun template):");
        }
    }
    if ((!model && !tmpl_arg) || !conv_path) {
        fprintf(stderr, "zrun template: %s\n%s",
                !conv_path ? "-f CONVERSATION.json is required" : "give -m FILE or --chat-template NAME|FILE", k_usage);
        return 2;
    }

    ZrConversation conv = {0};
    ZrGguf g;
    bool g_open = false;
    const ZrChatTemplate *t = NULL;
    const char *how;
    char *text = NULL;
    size_t len = 0;
    int status = 1;
    if (!tmpl_arg) {
        if (zr_gguf_open(&g, model, &err)) goto fail;
        g_open = true;
    }
    if (zr_chat_template_pick(&t, tmpl_arg, g_open ? &g : NULL, &how, &err)) {
        if (err.code == ZR_E_USAGE) status = 2;
        goto fail;
    }
    if (zr_conversation_read_json(&conv, conv_path, &err)) goto fail;
    if (zr_chat_render(t, conv.msgs, conv.n, add_ass, &text, &len, &err)) goto fail;
    fwrite(text, 1, len, stdout);
    status = zr_print_text("");
    goto done;
fail:
    fprintf(stderr, "zrun template: %s%s%s\n", g_open ? model : "", g_open ? ": " : "", err.msg);
done:
    free(text);
    zr_conversation_free(&conv);
    if (g_open) zr_gguf_close(&g);
    return status;
}
