/* Conversations (JSON through cJSON) and the choice of a chat template (conversation.h). */
#include "conversation.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zr_conversation_add(ZrConversation *c, const char *role, const char *content, ZrError *err) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        ZrChatMessage *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return zr_err(err, ZR_E_NOMEM, "conversation: out of memory at message %zu", c->n + 1);
        c->msgs = m;
        c->cap = cap;
    }
    char *r = strdup(role), *t = strdup(content);
    if (!r || !t) {
        free(r), free(t);
        return zr_err(err, ZR_E_NOMEM, "conversation: out of memory at message %zu", c->n + 1);
    }
    c->msgs[c->n++] = (ZrChatMessage){r, t};
    return 0;
}

void zr_conversation_pop(ZrConversation *c) {
    if (!c->n) return;
    c->n--;
    free((char *)c->msgs[c->n].role);
    free((char *)c->msgs[c->n].content);
}

void zr_conversation_free(ZrConversation *c) {
    while (c->n) zr_conversation_pop(c);
    free(c->msgs);
    memset(c, 0, sizeof *c);
}

/* The whole of f, NUL-terminated (malloc'ed); NULL with errno set. */
static char *slurp(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                errno = ENOMEM;
                return NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static char *read_path(const char *path, size_t *len, ZrError *err) {
    bool in = !strcmp(path, "-");
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f) {
        zr_err(err, ZR_E_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = slurp(f, len);
    int e = errno;
    if (!in) fclose(f);
    if (!text) zr_err(err, ZR_E_IO, "%s: %s", path, strerror(e ? e : EIO));
    return text;
}

int zr_conversation_parse_json(ZrConversation *c, const char *text, size_t len, const char *name, ZrError *err) {
    const char *where = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &where, true); /* the NUL counted: it must end the JSON */
    int rc = 0;
    if (!root) {
        rc = zr_err(err, ZR_E_FORMAT, "%s: not valid JSON at byte %td (expected an array of {\"role\", \"content\"})",
                    name, where ? where - text : (ptrdiff_t)0);
    } else if (!cJSON_IsArray(root)) {
        rc = zr_err(err, ZR_E_FORMAT, "%s: expected a JSON array of {\"role\": ..., \"content\": ...} messages", name);
    } else {
        int i = 0;
        const cJSON *m;
        cJSON_ArrayForEach(m, root) {
            i++;
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsObject(m)) rc = zr_err(err, ZR_E_FORMAT, "%s: message %d: expected an object", name, i);
            else if (!cJSON_IsString(role))
                rc = zr_err(err, ZR_E_FORMAT, "%s: message %d: \"role\": expected a string", name, i);
            else if (!cJSON_IsString(content))
                rc = zr_err(err, ZR_E_FORMAT, "%s: message %d: \"content\": expected a string", name, i);
            else rc = zr_conversation_add(c, role->valuestring, content->valuestring, err);
            if (rc) break;
        }
    }
    cJSON_Delete(root);
    return rc;
}

int zr_conversation_read_json(ZrConversation *c, const char *path, ZrError *err) {
    size_t len;
    char *text = read_path(path, &len, err);
    if (!text) return err->code;
    const int rc = zr_conversation_parse_json(c, text, len, path, err);
    free(text);
    return rc;
}

int zr_chat_template_pick(const ZrChatTemplate **out, const char *arg, const ZrGguf *model, const char **how,
                          ZrError *err) {
    if (arg) {
        *out = zr_chat_template_by_name(arg);
        *how = "built-in name";
        if (*out) return 0;
        size_t len;
        ZrError ferr;
        char *text = read_path(arg, &len, &ferr);
        if (!text)
            return zr_err(err, ZR_E_USAGE,
                          "--chat-template %s: not a built-in template name (zrun template --list) nor a readable file (%s)",
                          arg, ferr.msg);
        *out = zr_chat_template_detect(text);
        free(text);
        *how = "detected in the file";
        if (!*out)
            return zr_err(err, ZR_E_UNSUPPORTED,
                          "--chat-template %s: no built-in template family found in this text (llama.cpp's "
                          "detection); give a name instead (zrun template --list)",
                          arg);
        return 0;
    }
    ZrStr s = {0};
    if (model && zr_gguf_get_str_opt(model, "tokenizer.chat_template", &s, err)) return err->code;
    if (!s.ptr) {
        *out = zr_chat_template_by_name("chatml");
        *how = "chatml: the model has no tokenizer.chat_template";
        return 0;
    }
    char *text = malloc(s.len + 1);
    if (!text) return zr_err(err, ZR_E_NOMEM, "tokenizer.chat_template: out of memory (%llu bytes)", (unsigned long long)s.len);
    memcpy(text, s.ptr, s.len);
    text[s.len] = 0;
    *out = zr_chat_template_detect(text);
    free(text);
    *how = "the model's tokenizer.chat_template";
    if (!*out)
        return zr_err(err, ZR_E_UNSUPPORTED,
                      "tokenizer.chat_template: no built-in template family found in the model's template "
                      "(llama.cpp's detection); give --chat-template NAME (zrun template --list)");
    return 0;
}
