/* Chat templates: llama.cpp's built-in ones (llama_chat_apply_template, llama.cpp de3ff815),
 * rendered byte for byte as llama.cpp renders them, and the family of a model's Jinja
 * tokenizer.chat_template found as llama.cpp's llm_chat_detect_template finds it (substring
 * tests in a fixed order; no Jinja is evaluated).
 *
 * One table (chat.c) holds each template's name, its renderer and its end-of-turn texts. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

typedef struct ZrChatTemplate ZrChatTemplate; /* an entry of the table in chat.c; never freed */

typedef struct ZrChatMessage {
    const char *role;    /* "system", "user", "assistant", or any other (templates differ) */
    const char *content; /* NUL-terminated UTF-8 */
} ZrChatMessage;

/* The built-in names in llama.cpp's order (sorted, as `llama_chat_builtin_templates`): i in
 * [0, zr_chat_template_count()); NULL past the end. */
int zr_chat_template_count(void);
const char *zr_chat_template_name_at(int i);
/* The template called name ("chatml", "llama3", ...), or NULL. */
const ZrChatTemplate *zr_chat_template_by_name(const char *name);
/* What llama.cpp makes of a template argument: a built-in name, else the family detected in
 * the text (Jinja of tokenizer.chat_template). NULL: unknown (llama.cpp renders nothing). */
const ZrChatTemplate *zr_chat_template_detect(const char *text);
/* The name zrun uses for t ("dots1" is detected but is not a built-in name). */
const char *zr_chat_template_name(const ZrChatTemplate *t);
/* The texts that end an assistant turn in t ("<|im_end|>", "<|eot_id|>", ...), NULL-ended: the
 * chat stops at a vocabulary token with one of these texts (besides the tokenizer's EOG ids). */
const char *const *zr_chat_template_stops(const ZrChatTemplate *t);

/* Renders msgs[0..n) as llama_chat_apply_template(t, msgs, n, add_ass): *out is malloc'ed and
 * NUL-terminated (caller frees), *len its length. Fails only for lack of memory. */
int zr_chat_render(const ZrChatTemplate *t, const ZrChatMessage *msgs, size_t n, bool add_ass, char **out,
                   size_t *len, ZrError *err);
