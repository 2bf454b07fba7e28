/* A conversation: the messages so far (role, content), owned; read from a JSON file (OpenAI's
 * messages: an array of {"role": ..., "content": ...}) through cJSON, or grown turn by turn by
 * the chat. And the choice of a chat template for a command: --chat-template NAME|FILE, else
 * the model's tokenizer.chat_template, else chatml (as llama.cpp does for a model without one). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "chat.h"
#include "err.h"
#include "gguf.h"

typedef struct ZrConversation {
    ZrChatMessage *msgs; /* [n], role and content malloc'ed */
    size_t n, cap;
} ZrConversation;

int zr_conversation_add(ZrConversation *c, const char *role, const char *content, ZrError *err);
/* Drops the last message (the chat's turn that was not answered). */
void zr_conversation_pop(ZrConversation *c);
/* Appends the messages of the JSON file at path ("-": standard input). Errors name the file, the
 * message's index and the field ("conv.json: message 2: \"content\": expected a string"). */
int zr_conversation_read_json(ZrConversation *c, const char *path, ZrError *err);
/* The same for the JSON text[0..len) (text[len] == 0), its errors naming it `name`. */
int zr_conversation_parse_json(ZrConversation *c, const char *text, size_t len, const char *name, ZrError *err);
void zr_conversation_free(ZrConversation *c);

/* The template for arg (--chat-template: a built-in name, else a file of Jinja text whose
 * family is detected), else model's tokenizer.chat_template (model may be NULL), else chatml.
 * *how says which ("built-in name", "detected in FILE", "the model's tokenizer.chat_template",
 * "chatml: the model has no tokenizer.chat_template"). */
int zr_chat_template_pick(const ZrChatTemplate **out, const char *arg, const ZrGguf *model, const char **how,
                          ZrError *err);
