/* llama.cpp's built-in chat templates (src/llama-chat.cpp at de3ff815), one small renderer
 * each, and its detection of a template family from Jinja text. Rendering follows llama.cpp's
 * code, not the models' Jinja: llama.cpp's output is the reference, quirks included (llama2
 * opens with "[INST] " even before a system message; orion, minicpm, hunyuan and the mistral
 * ones never open the assistant's turn; rwkv-world opens it after a final user message
 * whatever add_ass says). "Trim" is C's isspace on both ends, as llama.cpp's trim(). */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

/* A growing output string; a failed allocation sets oom and drops the rest. */
typedef struct Out {
    char *p;
    size_t n, cap;
    bool oom;
} Out;

static void put_n(Out *o, const char *s, size_t n) {
    if (o->oom) return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n + 1) cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

static void put(Out *o, const char *s) { put_n(o, s, strlen(s)); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

/* s without the white space at its ends */
static void put_trim(Out *o, const char *s) {
    size_t b = 0, e = strlen(s);
    while (b < e && is_space(s[b])) b++;
    while (e > b && is_space(s[e - 1])) e--;
    put_n(o, s + b, e - b);
}

static bool role_is(const ZrChatMessage *m, const char *role) { return !strcmp(m->role, role); }

typedef struct Chat {
    const ZrChatMessage *m;
    size_t n;
    bool add_ass;
    int variant; /* the table entry's: which of a family's templates */
} Chat;

typedef void (*RenderFn)(Out *o, const Chat *c);

static void r_chatml(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        put(o, "<|im_start|>"), put(o, c->m[i].role), put(o, "\n"), put(o, c->m[i].content), put(o, "<|im_end|>\n");
    }
    if (c->add_ass) put(o, "<|im_start|>assistant\n");
}

enum { V_PLAIN, V_TEKKEN, V_V1, V_V3, V_SYS, V_SYS_BOS, V_SYS_STRIP };

/* mistral-v7 (variant V_PLAIN: spaces after the tags) and mistral-v7-tekken */
static void r_mistral_v7(Out *o, const Chat *c) {
    const char *sp = c->variant == V_TEKKEN ? "" : " ";
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "[SYSTEM_PROMPT]"), put(o, sp), put(o, m->content), put(o, "[/SYSTEM_PROMPT]");
        else if (role_is(m, "user")) put(o, "[INST]"), put(o, sp), put(o, m->content), put(o, "[/INST]");
        else put(o, sp), put(o, m->content), put(o, "</s>");
    }
}

/* mistral-v1, -v3, -v3-tekken: a turn opens at the first message after an assistant's */
static void r_mistral(Out *o, const Chat *c) {
    const char *lead = c->variant == V_V1 ? " " : "";
    const char *trail = c->variant == V_TEKKEN ? "" : " ";
    bool inside = false;
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (!inside) {
            put(o, lead), put(o, "[INST]"), put(o, trail);
            inside = true;
        }
        if (role_is(m, "system")) {
            put(o, m->content), put(o, "\n\n");
        } else if (role_is(m, "user")) {
            put(o, m->content), put(o, lead), put(o, "[/INST]");
        } else {
            put(o, trail);
            if (c->variant == V_V3) put_trim(o, m->content);
            else put(o, m->content);
            put(o, "</s>");
            inside = false;
        }
    }
}

/* llama2 (system text without <<SYS>>), -sys, -sys-bos (<s> opens later turns), -sys-strip */
static void r_llama2(Out *o, const Chat *c) {
    bool inside = true; /* the first "[INST] " is written here, without BOS */
    put(o, "[INST] ");
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (!inside) {
            inside = true;
            put(o, c->variant == V_SYS_BOS ? "<s>[INST] " : "[INST] ");
        }
        Out content = {0};
        if (c->variant == V_SYS_STRIP) put_trim(&content, m->content);
        else put(&content, m->content);
        const char *text = content.p ? content.p : "";
        if (content.oom) o->oom = true;
        if (role_is(m, "system")) {
            if (c->variant != V_PLAIN) put(o, "<<SYS>>\n"), put(o, text), put(o, "\n<</SYS>>\n\n");
            else put(o, text), put(o, "\n");
        } else if (role_is(m, "user")) {
            put(o, text), put(o, " [/INST]");
        } else {
            put(o, text), put(o, "</s>");
            inside = false;
        }
        free(content.p);
    }
}

static void r_phi3(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n"), put(o, c->m[i].content), put(o, "<|end|>\n");
    if (c->add_ass) put(o, "<|assistant|>\n");
}

static void r_phi4(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|im_start|>"), put(o, c->m[i].role), put(o, "<|im_sep|>"), put(o, c->m[i].content), put(o, "<|im_end|>");
    if (c->add_ass) put(o, "<|im_start|>assistant<|im_sep|>");
}

static void r_falcon3(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n"), put(o, c->m[i].content), put(o, "\n");
    if (c->add_ass) put(o, "<|assistant|>\n");
}

static void r_zephyr(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n"), put(o, c->m[i].content), put(o, "<|endoftext|>\n");
    if (c->add_ass) put(o, "<|assistant|>\n");
}

/* mlabonne/AlphaMonarch-7B: <s> before every message but the first */
static void r_monarch(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, i ? "<s>" : ""), put(o, c->m[i].role), put(o, "\n"), put(o, c->m[i].content), put(o, "</s>\n");
    if (c->add_ass) put(o, "<s>assistant\n");
}

/* google/gemma-7b-it: system text (trimmed, concatenated) goes into the next non-model turn */
static void r_gemma(Out *o, const Chat *c) {
    Out sys = {0};
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) {
            put_trim(&sys, m->content);
            continue;
        }
        const char *role = role_is(m, "assistant") ? "model" : m->role;
        put(o, "<start_of_turn>"), put(o, role), put(o, "\n");
        if (sys.n && strcmp(role, "model")) {
            put(o, sys.p), put(o, "\n\n");
            sys.n = 0;
        }
        put_trim(o, m->content), put(o, "<end_of_turn>\n");
    }
    if (sys.oom) o->oom = true;
    free(sys.p);
    if (c->add_ass) put(o, "<start_of_turn>model\n");
}

/* OrionStarAI/Orion-14B-Chat: system text goes into the next user turn (untrimmed) */
static void r_orion(Out *o, const Chat *c) {
    Out sys = {0};
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) {
            put(&sys, m->content);
        } else if (role_is(m, "user")) {
            put(o, "Human: ");
            if (sys.n) {
                put(o, sys.p), put(o, "\n\n");
                sys.n = 0;
            }
            put(o, m->content), put(o, "\n\nAssistant: </s>");
        } else {
            put(o, m->content), put(o, "</s>");
        }
    }
    if (sys.oom) o->oom = true;
    free(sys.p);
}

/* openchat/openchat-3.5-0106: "GPT4 Correct User: ", the role's first letter in capitals */
static void r_openchat(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) {
            put(o, m->content), put(o, "<|end_of_turn|>");
            continue;
        }
        char first = m->role[0];
        if (first >= 'a' && first <= 'z') first = (char)(first - 'a' + 'A');
        put(o, "GPT4 Correct ");
        if (first) put_n(o, &first, 1), put(o, m->role + 1);
        put(o, ": "), put(o, m->content), put(o, "<|end_of_turn|>");
    }
    if (c->add_ass) put(o, "GPT4 Correct Assistant:");
}

/* eachadea/vicuna-13b-1.1 (V_PLAIN) and the Orca variant (V_SYS: "SYSTEM: ") */
static void r_vicuna(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) {
            if (c->variant == V_SYS) put(o, "SYSTEM: "), put(o, m->content), put(o, "\n");
            else put(o, m->content), put(o, "\n\n");
        } else if (role_is(m, "user")) {
            put(o, "USER: "), put(o, m->content), put(o, "\n");
        } else if (role_is(m, "assistant")) {
            put(o, "ASSISTANT: "), put(o, m->content), put(o, "</s>\n");
        }
    }
    if (c->add_ass) put(o, "ASSISTANT:");
}

/* deepseek-ai/deepseek-coder-33b-instruct */
static void r_deepseek(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, m->content);
        else if (role_is(m, "user")) put(o, "### Instruction:\n"), put(o, m->content), put(o, "\n");
        else if (role_is(m, "assistant")) put(o, "### Response:\n"), put(o, m->content), put(o, "\n<|EOT|>\n");
    }
    if (c->add_ass) put(o, "### Response:\n");
}

static void r_deepseek2(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, m->content), put(o, "\n\n");
        else if (role_is(m, "user")) put(o, "User: "), put(o, m->content), put(o, "\n\n");
        else if (role_is(m, "assistant")) put(o, "Assistant: "), put(o, m->content), put(o, "<｜end▁of▁sentence｜>");
    }
    if (c->add_ass) put(o, "Assistant:");
}

static void r_deepseek3(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, m->content), put(o, "\n\n");
        else if (role_is(m, "user")) put(o, "<｜User｜>"), put(o, m->content);
        else if (role_is(m, "assistant")) put(o, "<｜Assistant｜>"), put(o, m->content), put(o, "<｜end▁of▁sentence｜>");
    }
    if (c->add_ass) put(o, "<｜Assistant｜>");
}

/* deepseek-ocr: no template, the contents one after another */
static void r_deepseek_ocr(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) put(o, c->m[i].content);
}

/* CohereForAI/c4ai-command-r-plus */
static void r_command_r(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        const char *tag = role_is(m, "system") ? "<|SYSTEM_TOKEN|>"
                          : role_is(m, "user") ? "<|USER_TOKEN|>"
                          : role_is(m, "assistant") ? "<|CHATBOT_TOKEN|>"
                                                    : NULL;
        if (tag) put(o, "<|START_OF_TURN_TOKEN|>"), put(o, tag), put_trim(o, m->content), put(o, "<|END_OF_TURN_TOKEN|>");
    }
    if (c->add_ass) put(o, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
}

static void r_llama3(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|start_header_id|>"), put(o, c->m[i].role), put(o, "<|end_header_id|>\n\n"), put_trim(o, c->m[i].content),
            put(o, "<|eot_id|>");
    if (c->add_ass) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void r_chatglm3(Out *o, const Chat *c) {
    put(o, "[gMASK]sop");
    for (size_t i = 0; i < c->n; i++) put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n "), put(o, c->m[i].content);
    if (c->add_ass) put(o, "<|assistant|>");
}

static void r_chatglm4(Out *o, const Chat *c) {
    put(o, "[gMASK]<sop>");
    for (size_t i = 0; i < c->n; i++) put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n"), put(o, c->m[i].content);
    if (c->add_ass) put(o, "<|assistant|>\n");
}

static void r_glmedge(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) put(o, "<|"), put(o, c->m[i].role), put(o, "|>\n"), put(o, c->m[i].content);
    if (c->add_ass) put(o, "<|assistant|>");
}

/* MiniCPM-3B-OpenHermes-2.5-v2 */
static void r_minicpm(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        if (role_is(&c->m[i], "user")) put(o, "<用户>"), put_trim(o, c->m[i].content), put(o, "<AI>");
        else put_trim(o, c->m[i].content);
    }
}

/* EXAONE 3 (V_PLAIN) and 4 (V_SYS: also the tool role) */
static void r_exaone(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "[|system|]"), put_trim(o, m->content), put(o, "[|endofturn|]\n");
        else if (role_is(m, "user")) put(o, "[|user|]"), put_trim(o, m->content), put(o, "\n");
        else if (role_is(m, "assistant")) put(o, "[|assistant|]"), put_trim(o, m->content), put(o, "[|endofturn|]\n");
        else if (c->variant == V_SYS && role_is(m, "tool")) put(o, "[|tool|]"), put_trim(o, m->content), put(o, "[|endofturn|]\n");
    }
    if (c->add_ass) put(o, "[|assistant|]");
}

static void r_exaone_moe(Out *o, const Chat *c) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < c->n; i++) {
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) {
            if (!role_is(&c->m[i], roles[k])) continue;
            put(o, "<|"), put(o, roles[k]), put(o, "|>\n"), put_trim(o, c->m[i].content), put(o, "<|endofturn|>\n");
        }
    }
    if (c->add_ass) put(o, "<|assistant|>\n");
}

/* "\n\n" is the model's end of turn; the assistant's turn opens after a final user message */
static void r_rwkv_world(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) {
            put(o, "System: "), put_trim(o, m->content), put(o, "\n\n");
        } else if (role_is(m, "user")) {
            put(o, "User: "), put_trim(o, m->content), put(o, "\n\n");
            if (i == c->n - 1) put(o, "Assistant:");
        } else if (role_is(m, "assistant")) {
            put(o, "Assistant: "), put_trim(o, m->content), put(o, "\n\n");
        }
    }
}

/* IBM Granite 3.x (V_PLAIN) and 4.0 / 4.1 (V_SYS): the assistant_tool_call role */
static void r_granite(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        bool tool_call = role_is(m, "assistant_tool_call");
        if (tool_call && c->variant == V_SYS) {
            put(o, "<|start_of_role|>assistant<|end_of_role|><|tool_call|>");
        } else {
            put(o, "<|start_of_role|>"), put(o, m->role), put(o, "<|end_of_role|>");
            if (tool_call) put(o, "<|tool_call|>");
        }
        put(o, m->content), put(o, "<|end_of_text|>\n");
    }
    if (c->add_ass) put(o, "<|start_of_role|>assistant<|end_of_role|>");
}

static void r_gigachat(Out *o, const Chat *c) {
    bool sys = c->n && role_is(&c->m[0], "system");
    put(o, "<s>");
    if (sys) put(o, c->m[0].content), put(o, "<|message_sep|>");
    for (size_t i = sys ? 1 : 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "user"))
            put(o, "user<|role_sep|>"), put(o, m->content), put(o, "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
        else if (role_is(m, "assistant")) put(o, "assistant<|role_sep|>"), put(o, m->content), put(o, "<|message_sep|>");
    }
    if (c->add_ass) put(o, "assistant<|role_sep|>");
}

static void r_megrez(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|role_start|>"), put(o, c->m[i].role), put(o, "<|role_end|>"), put(o, c->m[i].content), put(o, "<|turn_end|>");
    if (c->add_ass) put(o, "<|role_start|>assistant<|role_end|>");
}

/* "\n\n" is the model's end of turn; system messages are dropped */
static void r_yandex(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "user")) put(o, " Пользователь: "), put(o, m->content), put(o, "\n\n");
        else if (role_is(m, "assistant")) put(o, " Ассистент: "), put(o, m->content), put(o, "\n\n");
    }
    if (c->add_ass) put(o, " Ассистент:[SEP]");
}

/* "<role>HUMAN</role>" for user, else the role in ASCII capitals */
static void put_bailing_role(Out *o, const char *role) {
    put(o, "<role>");
    if (!strcmp(role, "user")) {
        put(o, "HUMAN");
    } else {
        for (const char *p = role; *p; p++) {
            char ch = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
            put_n(o, &ch, 1);
        }
    }
    put(o, "</role>");
}

/* Ling / Ring: bailing (V_PLAIN) and bailing-think (V_SYS: "<think>" opens the reply) */
static void r_bailing(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) put_bailing_role(o, c->m[i].role), put(o, c->m[i].content);
    if (c->add_ass) {
        put(o, "<role>ASSISTANT</role>");
        if (c->variant == V_SYS) put(o, "<think>");
    }
}

/* Ling 2.0: a default system turn when the first message is not one */
static void r_bailing2(Out *o, const Chat *c) {
    if (!(c->n && role_is(&c->m[0], "system"))) put(o, "<role>SYSTEM</role>detailed thinking off<|role_end|>");
    for (size_t i = 0; i < c->n; i++) put_bailing_role(o, c->m[i].role), put(o, c->m[i].content), put(o, "<|role_end|>");
    if (c->add_ass) put(o, "<role>ASSISTANT</role>");
}

static void r_llama4(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|header_start|>"), put(o, c->m[i].role), put(o, "<|header_end|>\n\n"), put_trim(o, c->m[i].content), put(o, "<|eot|>");
    if (c->add_ass) put(o, "<|header_start|>assistant<|header_end|>\n\n");
}

/* SmolVLM: <|im_start|> is its BOS; the rest is not chatml */
static void r_smolvlm(Out *o, const Chat *c) {
    put(o, "<|im_start|>");
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, m->content), put(o, "\n\n");
        else if (role_is(m, "user")) put(o, "User: "), put(o, m->content), put(o, "<end_of_utterance>\n");
        else put(o, "Assistant: "), put(o, m->content), put(o, "<end_of_utterance>\n");
    }
    if (c->add_ass) put(o, "Assistant:");
}

/* dots.llm1.inst: detected only (llama.cpp has no name for it) */
static void r_dots1(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "<|system|>"), put(o, m->content), put(o, "<|endofsystem|>");
        else if (role_is(m, "user")) put(o, "<|userprompt|>"), put(o, m->content), put(o, "<|endofuserprompt|>");
        else put(o, "<|response|>"), put(o, m->content), put(o, "<|endofresponse|>");
    }
    if (c->add_ass) put(o, "<|response|>");
}

/* tencent/Hunyuan-A13B-Instruct */
static void r_hunyuan_moe(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "<|startoftext|>"), put(o, m->content), put(o, "<|extra_4|>");
        else if (role_is(m, "assistant")) put(o, m->content), put(o, "<|eos|>");
        else put(o, "<|startoftext|>"), put(o, m->content), put(o, "<|extra_0|>");
    }
}

/* OpenAI gpt-oss (Harmony) */
static void r_gpt_oss(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        put(o, "<|start|>"), put(o, m->role), put(o, "<|message|>"), put(o, m->content);
        put(o, role_is(m, "assistant") ? "<|return|>" : "<|end|>");
    }
    if (c->add_ass) put(o, "<|start|>assistant");
}

/* tencent/Hunyuan-4B-Instruct: only a first system message is kept */
static void r_hunyuan_dense(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (i == 0 && role_is(m, "system")) put(o, m->content), put(o, "<｜hy_place▁holder▁no▁3｜>");
        if (role_is(m, "assistant")) put(o, "<｜hy_Assistant｜>"), put(o, m->content), put(o, "<｜hy_place▁holder▁no▁2｜>");
        else if (role_is(m, "user")) put(o, "<｜hy_User｜>"), put(o, m->content), put(o, "<｜hy_Assistant｜>");
    }
}

/* tencent/HunyuanOCR, HunyuanVL: the tag follows the content */
static void r_hunyuan_vl(Out *o, const Chat *c) {
    put(o, "<｜hy_begin▁of▁sentence｜>");
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (i == 0 && role_is(m, "system")) put(o, m->content), put(o, "<｜hy_place▁holder▁no▁3｜>");
        else if (role_is(m, "user")) put(o, m->content), put(o, "<｜hy_User｜>");
        else if (role_is(m, "assistant")) put(o, m->content), put(o, "<｜hy_Assistant｜>");
    }
}

/* moonshotai/Kimi-K2-Instruct: an unknown role gets no header, only its content */
static void r_kimi_k2(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "<|im_system|>system<|im_middle|>");
        else if (role_is(m, "user")) put(o, "<|im_user|>user<|im_middle|>");
        else if (role_is(m, "assistant")) put(o, "<|im_assistant|>assistant<|im_middle|>");
        else if (role_is(m, "tool")) put(o, "<|im_system|>tool<|im_middle|>");
        put(o, m->content), put(o, "<|im_end|>");
    }
    if (c->add_ass) put(o, "<|im_assistant|>assistant<|im_middle|>");
}

/* ByteDance Seed-OSS: the assistant's text is trimmed */
static void r_seed_oss(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        put(o, "<seed:bos>"), put(o, m->role), put(o, "\n");
        if (role_is(m, "assistant")) put_trim(o, m->content);
        else put(o, m->content);
        put(o, "<seed:eos>");
    }
    if (c->add_ass) put(o, "<seed:bos>assistant\n");
}

/* xAI Grok 2: system and user text trimmed, the assistant's not */
static void r_grok2(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (role_is(m, "system")) put(o, "System: "), put_trim(o, m->content), put(o, "<|separator|>\n\n");
        else if (role_is(m, "user")) put(o, "Human: "), put_trim(o, m->content), put(o, "<|separator|>\n\n");
        else if (role_is(m, "assistant")) put(o, "Assistant: "), put(o, m->content), put(o, "<|separator|>\n\n");
    }
    if (c->add_ass) put(o, "Assistant:");
}

/* openPangu-Embedded: an empty system turn first when the first message is not one */
static void r_pangu(Out *o, const Chat *c) {
    static const char *const roles[][2] = {
        {"system", "系统"}, {"user", "用户"}, {"assistant", "助手"}, {"tool", "工具"}, {"function", "方法"},
    };
    for (size_t i = 0; i < c->n; i++) {
        const ZrChatMessage *m = &c->m[i];
        if (i == 0 && !role_is(m, "system")) put(o, "[unused9]系统：[unused10]");
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) {
            if (!role_is(m, roles[k][0])) continue;
            put(o, "[unused9]"), put(o, roles[k][1]), put(o, "："), put(o, m->content), put(o, "[unused10]");
        }
    }
    if (c->add_ass) put(o, "[unused9]助手：");
}

static void r_solar_open(Out *o, const Chat *c) {
    for (size_t i = 0; i < c->n; i++)
        put(o, "<|begin|>"), put(o, c->m[i].role), put(o, "<|content|>"), put(o, c->m[i].content), put(o, "<|end|>");
    if (c->add_ass) put(o, "<|begin|>assistant");
}

struct ZrChatTemplate {
    const char *name;
    bool builtin; /* a name llama.cpp accepts (dots1 is only detected) */
    RenderFn render;
    int variant;
    const char *stops[4]; /* end-of-turn texts, NULL-ended */
};

/* llama.cpp's names in its (sorted) order */
static const ZrChatTemplate templates[] = {
    {"bailing", true, r_bailing, V_PLAIN, {"<|endoftext|>", NULL}},
    {"bailing-think", true, r_bailing, V_SYS, {"<|endoftext|>", NULL}},
    {"bailing2", true, r_bailing2, V_PLAIN, {"<|role_end|>", "<|endoftext|>", NULL}},
    {"chatglm3", true, r_chatglm3, V_PLAIN, {"<|user|>", "<|observation|>", NULL}},
    {"chatglm4", true, r_chatglm4, V_PLAIN, {"<|user|>", "<|observation|>", "<|endoftext|>", NULL}},
    {"chatml", true, r_chatml, V_PLAIN, {"<|im_end|>", NULL}},
    {"command-r", true, r_command_r, V_PLAIN, {"<|END_OF_TURN_TOKEN|>", NULL}},
    {"deepseek", true, r_deepseek, V_PLAIN, {"<|EOT|>", NULL}},
    {"deepseek-ocr", true, r_deepseek_ocr, V_PLAIN, {NULL}},
    {"deepseek2", true, r_deepseek2, V_PLAIN, {"<｜end▁of▁sentence｜>", NULL}},
    {"deepseek3", true, r_deepseek3, V_PLAIN, {"<｜end▁of▁sentence｜>", NULL}},
    {"exaone-moe", true, r_exaone_moe, V_PLAIN, {"<|endofturn|>", NULL}},
    {"exaone3", true, r_exaone, V_PLAIN, {"[|endofturn|]", NULL}},
    {"exaone4", true, r_exaone, V_SYS, {"[|endofturn|]", NULL}},
    {"falcon3", true, r_falcon3, V_PLAIN, {"<|endoftext|>", NULL}},
    {"gemma", true, r_gemma, V_PLAIN, {"<end_of_turn>", NULL}},
    {"gigachat", true, r_gigachat, V_PLAIN, {"<|message_sep|>", NULL}},
    {"glmedge", true, r_glmedge, V_PLAIN, {"<|user|>", "<|endoftext|>", NULL}},
    {"gpt-oss", true, r_gpt_oss, V_PLAIN, {"<|return|>", "<|call|>", "<|end|>", NULL}},
    {"granite", true, r_granite, V_PLAIN, {"<|end_of_text|>", NULL}},
    {"granite-4.0", true, r_granite, V_SYS, {"<|end_of_text|>", NULL}},
    {"granite-4.1", true, r_granite, V_SYS, {"<|end_of_text|>", NULL}},
    {"grok-2", true, r_grok2, V_PLAIN, {"<|separator|>", NULL}},
    {"hunyuan-dense", true, r_hunyuan_dense, V_PLAIN, {"<｜hy_place▁holder▁no▁2｜>", NULL}},
    {"hunyuan-moe", true, r_hunyuan_moe, V_PLAIN, {"<|eos|>", NULL}},
    {"hunyuan-vl", true, r_hunyuan_vl, V_PLAIN, {"<｜hy_Assistant｜>", NULL}},
    {"kimi-k2", true, r_kimi_k2, V_PLAIN, {"<|im_end|>", NULL}},
    {"llama2", true, r_llama2, V_PLAIN, {"</s>", NULL}},
    {"llama2-sys", true, r_llama2, V_SYS, {"</s>", NULL}},
    {"llama2-sys-bos", true, r_llama2, V_SYS_BOS, {"</s>", NULL}},
    {"llama2-sys-strip", true, r_llama2, V_SYS_STRIP, {"</s>", NULL}},
    {"llama3", true, r_llama3, V_PLAIN, {"<|eot_id|>", "<|eom_id|>", NULL}},
    {"llama4", true, r_llama4, V_PLAIN, {"<|eot|>", "<|eom|>", NULL}},
    {"megrez", true, r_megrez, V_PLAIN, {"<|turn_end|>", NULL}},
    {"minicpm", true, r_minicpm, V_PLAIN, {"<用户>", NULL}},
    {"mistral-v1", true, r_mistral, V_V1, {"</s>", NULL}},
    {"mistral-v3", true, r_mistral, V_V3, {"</s>", NULL}},
    {"mistral-v3-tekken", true, r_mistral, V_TEKKEN, {"</s>", NULL}},
    {"mistral-v7", true, r_mistral_v7, V_PLAIN, {"</s>", NULL}},
    {"mistral-v7-tekken", true, r_mistral_v7, V_TEKKEN, {"</s>", NULL}},
    {"monarch", true, r_monarch, V_PLAIN, {"</s>", NULL}},
    {"openchat", true, r_openchat, V_PLAIN, {"<|end_of_turn|>", NULL}},
    {"orion", true, r_orion, V_PLAIN, {"</s>", NULL}},
    {"pangu-embedded", true, r_pangu, V_PLAIN, {"[unused10]", NULL}},
    {"phi3", true, r_phi3, V_PLAIN, {"<|end|>", NULL}},
    {"phi4", true, r_phi4, V_PLAIN, {"<|im_end|>", NULL}},
    {"rwkv-world", true, r_rwkv_world, V_PLAIN, {NULL}},
    {"seed_oss", true, r_seed_oss, V_PLAIN, {"<seed:eos>", NULL}},
    {"smolvlm", true, r_smolvlm, V_PLAIN, {"<end_of_utterance>", NULL}},
    {"solar-open", true, r_solar_open, V_PLAIN, {"<|end|>", NULL}},
    {"vicuna", true, r_vicuna, V_PLAIN, {"</s>", NULL}},
    {"vicuna-orca", true, r_vicuna, V_SYS, {"</s>", NULL}},
    {"yandex", true, r_yandex, V_PLAIN, {NULL}},
    {"zephyr", true, r_zephyr, V_PLAIN, {"<|endoftext|>", NULL}},
    {"dots1", false, r_dots1, V_PLAIN, {"<|endofresponse|>", NULL}},
};
enum { N_TEMPLATES = sizeof templates / sizeof templates[0] };

int zr_chat_template_count(void) {
    int n = 0;
    for (int i = 0; i < N_TEMPLATES; i++) n += templates[i].builtin;
    return n;
}

const char *zr_chat_template_name_at(int i) {
    for (int k = 0; k < N_TEMPLATES; k++)
        if (templates[k].builtin && i-- == 0) return templates[k].name;
    return NULL;
}

static const ZrChatTemplate *by_name_any(const char *name) {
    for (int i = 0; i < N_TEMPLATES; i++)
        if (!strcmp(templates[i].name, name)) return &templates[i];
    return NULL;
}

const ZrChatTemplate *zr_chat_template_by_name(const char *name) {
    const ZrChatTemplate *t = by_name_any(name);
    return t && t->builtin ? t : NULL;
}

const char *zr_chat_template_name(const ZrChatTemplate *t) { return t->name; }

const char *const *zr_chat_template_stops(const ZrChatTemplate *t) { return t->stops; }

int zr_chat_render(const ZrChatTemplate *t, const ZrChatMessage *msgs, size_t n, bool add_ass, char **out,
                   size_t *len, ZrError *err) {
    Out o = {0};
    Chat c = {msgs, n, add_ass, t->variant};
    t->render(&o, &c);
    put(&o, ""); /* an empty render is still a string */
    if (o.oom) {
        free(o.p);
        return zr_err(err, ZR_E_NOMEM, "chat template %s: out of memory rendering %zu messages", t->name, n);
    }
    *out = o.p;
    *len = o.n;
    return 0;
}

static bool has(const char *text, const char *s) { return strstr(text, s) != NULL; }

/* llm_chat_detect_template's tests, in its order: the first that holds names the family. */
static const char *detect_family(const char *t) {
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? "phi4" : has(t, "<end_of_utterance>") ? "smolvlm" : "chatml";
    if (!strncmp(t, "mistral", 7) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return "mistral-v7";
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) return "mistral-v1";
            if (has(t, "\"[INST]\"")) return "mistral-v3-tekken";
            return "mistral-v3";
        }
        if (has(t, "content.strip()")) return "llama2-sys-strip";
        if (has(t, "bos_token + '[INST]")) return "llama2-sys-bos";
        if (has(t, "<<SYS>>")) return "llama2-sys";
        return "llama2";
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return "phi3";
    if (has(t, "[gMASK]<sop>")) return "chatglm4";
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) return "exaone-moe";
        return has(t, "</s>") ? "falcon3" : "glmedge";
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return "glmedge";
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return "zephyr";
    if (has(t, "bos_token + message['role']")) return "monarch";
    if (has(t, "<start_of_turn>")) return "gemma";
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return "orion";
    if (has(t, "GPT4 Correct ")) return "openchat";
    if (has(t, "USER: ") && has(t, "ASSISTANT: ")) return has(t, "SYSTEM: ") ? "vicuna-orca" : "vicuna";
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return "deepseek";
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return "command-r";
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return "llama3";
    if (has(t, "[gMASK]sop")) return "chatglm3";
    if (has(t, "<用户>")) return "minicpm";
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return "deepseek2";
    if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>") && has(t, "<｜end▁of▁sentence｜>")) return "deepseek3";
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? "exaone4" : "exaone3";
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return "rwkv-world";
    if (has(t, "<|start_of_role|>")) {
        if (has(t, "<tool_call>") || has(t, "<tools>"))
            return has(t, "g4_default_system_message") ? "granite-4.0" : "granite-4.1";
        return "granite";
    }
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
        return "gigachat";
    if (has(t, "<|role_start|>")) return "megrez";
    if (has(t, " Ассистент:")) return "yandex";
    if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'")) return "bailing";
    if (has(t, "<role>ASSISTANT</role>") && has(t, "\"HUMAN\"") && has(t, "<think>")) return "bailing-think";
    if (has(t, "<role>ASSISTANT</role>") && has(t, "<role>HUMAN</role>") && has(t, "<|role_end|>")) return "bailing2";
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return "llama4";
    if (has(t, "<|endofuserprompt|>")) return "dots1";
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return "hunyuan-moe";
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return "gpt-oss";
    if (has(t, "<｜hy_Assistant｜>") && has(t, "<｜hy_begin▁of▁sentence｜>")) return "hunyuan-vl";
    if (has(t, "<｜hy_Assistant｜>") && has(t, "<｜hy_place▁holder▁no▁3｜>")) return "hunyuan-dense";
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return "kimi-k2";
    if (has(t, "<seed:bos>")) return "seed_oss";
    if (has(t, "'Assistant: '  + message['content'] + '<|separator|>")) return "grok-2";
    if (has(t, "[unused9]系统：[unused10]")) return "pangu-embedded";
    if (has(t, "<|begin|>") && has(t, "<|end|>") && has(t, "<|content|>")) return "solar-open";
    return NULL;
}

const ZrChatTemplate *zr_chat_template_detect(const char *text) {
    const ZrChatTemplate *t = zr_chat_template_by_name(text);
    if (t) return t;
    const char *family = detect_family(text);
    return family ? by_name_any(family) : NULL;
}
