/* libFuzzer target for the chat side's outside input: a chat template's Jinja text (a GGUF's
 * tokenizer.chat_template or --chat-template FILE) and a JSON conversation (zrun template -f,
 * --messages). Input: flags (1 byte: bit 0 add_ass, bits 1-7 a built-in template's index), the
 * template text's length (2 bytes, little-endian), the template text, then the JSON (the rest).
 * The family is detected in the text; the messages are parsed (the ones before an error kept);
 * they are rendered with the detected template and with the indexed built-in one, and every
 * rendering must be a NUL-terminated string of the length it reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "conversation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

static void render(const ZrChatTemplate *t, const ZrConversation *c, bool add_ass) {
    char *out = NULL;
    size_t len = 0;
    ZrError err = {0};
    if (zr_chat_render(t, c->msgs, c->n, add_ass, &out, &len, &err) == 0) {
        if (!out || strlen(out) != len) abort(); /* the contents hold no NUL: cJSON strings end at one */
        sink += len;
    }
    free(out);
    for (const char *const *s = zr_chat_template_stops(t); s && *s; s++) sink += strlen(*s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const bool add_ass = data[0] & 1;
    const int sel = data[0] >> 1;
    size_t tl = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (tl > size) tl = size;
    char *tmpl = malloc(tl + 1), *json = malloc(size - tl + 1);
    if (!tmpl || !json) {
        free(tmpl);
        free(json);
        return 0;
    }
    memcpy(tmpl, data, tl);
    tmpl[tl] = 0;
    memcpy(json, data + tl, size - tl);
    json[size - tl] = 0;
    ZrConversation c = {0};
    ZrError err = {0};
    zr_conversation_parse_json(&c, json, size - tl, "fuzz.json", &err);
    const ZrChatTemplate *detected = zr_chat_template_detect(tmpl);
    if (detected) render(detected, &c, add_ass);
    const int n = zr_chat_template_count();
    if (n > 0) {
        const ZrChatTemplate *t = zr_chat_template_by_name(zr_chat_template_name_at(sel % n));
        if (!t) abort(); /* every listed name is found */
        render(t, &c, add_ass);
    }
    zr_conversation_free(&c);
    free(tmpl);
    free(json);
    return 0;
}
