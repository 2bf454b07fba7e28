/* The GGUF reader on the real files in ../shared (skipped when absent): every model and
 * fixture parses, and a few shapes and types match fixtures/README.md. */
#include <glob.h>

#include "gguf.h"
#include "quant.h"
#include "zt.h"

static int open_shared(ZrGguf *g, const char *rel) {
    const char *p = zt_shared_model(rel);
    if (!p) return 1;
    ZrError e;
    if (zr_gguf_open(g, p, &e)) { fprintf(stderr, "  %s\n", e.msg); zt_failed_flag = 1; return 1; }
    return 0;
}

static int parse_all(const char *dir) {
    const char *path = zt_shared(dir);
    if (!path) return -1;
    char pat[4200];
    snprintf(pat, sizeof pat, "%s/*.gguf", path);
    glob_t gl;
    if (glob(pat, 0, NULL, &gl) != 0) return -1;
    int bad = 0;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        ZrGguf g;
        ZrError e;
        if (zr_gguf_open(&g, gl.gl_pathv[i], &e)) { fprintf(stderr, "  %s\n", e.msg); bad++; continue; }
        zr_gguf_close(&g);
    }
    int n = (int)gl.gl_pathc;
    globfree(&gl);
    return bad ? -2 - bad : n;
}

ZT_TEST(every_shared_model_and_fixture_parses) {
    int a = parse_all("models"), b = parse_all("fixtures");
    if (a == -1 && b == -1) { zt_skip("no GGUF files in ../shared"); return; }
    ZT_CHECKF(a >= -1 && b >= -1, "models %d fixtures %d", a, b);
}

ZT_TEST(stories260K_has_48_f32_tensors) {
    ZrGguf g;
    if (open_shared(&g, "models/stories260K.gguf")) return;
    int n = (int)g.n_tensors, f32 = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) f32 += g.tensors[i].type == ZR_TYPE_F32;
    const ZrGgufTensor *t = zr_gguf_tensor(&g, "token_embd.weight");
    ZrStr arch = {0};
    ZrError e;
    int rc = zr_gguf_get_str(&g, "general.architecture", &arch, &e);
    zr_gguf_close(&g);
    ZT_CHECK(n == 48 && f32 == 48);
    ZT_CHECK(t != NULL);
    ZT_CHECK(rc == 0);
}

ZT_TEST(llama_q4_k_m_has_q4_k_embedding_and_q6_k_output) {
    ZrGguf g;
    if (open_shared(&g, "fixtures/llama-Q4_K_M.gguf")) return;
    const ZrGgufTensor *emb = zr_gguf_tensor(&g, "token_embd.weight");
    const ZrGgufTensor *out = zr_gguf_tensor(&g, "output.weight");
    const ZrGgufTensor *v0 = zr_gguf_tensor(&g, "blk.0.attn_v.weight");
    const ZrGgufTensor *v1 = zr_gguf_tensor(&g, "blk.1.attn_v.weight");
    const ZrGgufTensor *k0 = zr_gguf_tensor(&g, "blk.0.attn_k.weight");
    bool ok = emb && out && v0 && v1 && k0;
    bool shapes = ok && emb->type == ZR_TYPE_Q4_K && emb->ne[0] == 256 && emb->ne[1] == 512 && emb->n_dims == 2 &&
                  out->type == ZR_TYPE_Q6_K && v0->type == ZR_TYPE_Q4_K && v1->type == ZR_TYPE_Q6_K &&
                  k0->ne[0] == 256 && k0->ne[1] == 128 && emb->nbytes == 512 * 144;
    zr_gguf_close(&g);
    ZT_CHECK(ok);
    ZT_CHECK(shapes);
}
/* fixtures.json lists, per model, its gguf file and the type of every tensor: check them all
 * (a small scanner for that one layout: "gguf": "F", ... "tensor_types": {"name": "type", ...}). */
static int check_fixture_types(const char *json, const char *dir, int *n_models, int *n_tensors) {
    int bad = 0;
    for (const char *p = json; (p = strstr(p, "\"tensor_types\": {")) != NULL;) {
        /* the model's file: the nearest "gguf": "..." before this */
        const char *q = p, *file = NULL;
        while (q > json && !file) {
            q--;
            if (!strncmp(q, "\"gguf\": \"", 9)) file = q + 9;
        }
        p += strlen("\"tensor_types\": {");
        if (!file) { bad++; continue; }
        char path[4096];
        int pn = snprintf(path, sizeof path, "%s/%.*s", dir, (int)strcspn(file, "\""), file);
        if (pn < 0 || (size_t)pn >= sizeof path) { bad++; continue; }
        ZrGguf g;
        ZrError e;
        if (zr_gguf_open(&g, path, &e)) { fprintf(stderr, "  %s\n", e.msg); bad++; continue; }
        (*n_models)++;
        int listed = 0;
        while (*p && *p != '}') {
            char name[128], type[32];
            int used = 0;
            while (*p == ' ' || *p == ',' || *p == '\n') p++;
            if (*p == '}') break;
            if (sscanf(p, "\"%127[^\"]\": \"%31[^\"]\"%n", name, type, &used) != 2 || !used) { bad++; break; }
            p += used;
            listed++;
            const ZrGgufTensor *t = zr_gguf_tensor(&g, name);
            if (!t || strcmp(zr_type_name(t->type), type) != 0) {
                fprintf(stderr, "  %s: %s: expected %s, found %s\n", path, name, type, t ? zr_type_name(t->type) : "no tensor");
                bad++;
            }
            (*n_tensors)++;
        }
        if ((uint64_t)listed != g.n_tensors) {
            fprintf(stderr, "  %s: fixtures.json lists %d tensors, the file has %llu\n", path, listed, (unsigned long long)g.n_tensors);
            bad++;
        }
        zr_gguf_close(&g);
    }
    return bad;
}

ZT_TEST(every_fixture_tensor_has_the_type_fixtures_json_lists) {
    const char *jp = zt_shared_model("fixtures/fixtures.json");
    if (!jp) return;
    char *json = zt_read_file(jp, NULL);
    ZT_CHECK(json != NULL);
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(strlen(jp) - strlen("/fixtures.json")), jp);
    int models = 0, tensors = 0;
    int bad = check_fixture_types(json, dir, &models, &tensors);
    free(json);
    ZT_CHECKF(bad == 0, "%d mismatches", bad);
    ZT_CHECKF(models == 21 && tensors > 400, "%d models, %d tensors", models, tensors);
}

ZT_TEST(stories260K_shapes_match_its_readme) {
    ZrGguf g;
    if (open_shared(&g, "models/stories260K.gguf")) return;
    const ZrGgufTensor *down = zr_gguf_tensor(&g, "blk.4.ffn_down.weight"), *k = zr_gguf_tensor(&g, "blk.0.attn_k.weight");
    uint32_t embd = 0, ff = 0, layers = 0, heads = 0, kv_heads = 0, rope = 0, ctx = 0;
    float eps = 0;
    ZrError e;
    int rc = zr_gguf_get_u32(&g, "llama.embedding_length", &embd, &e) | zr_gguf_get_u32(&g, "llama.feed_forward_length", &ff, &e) |
             zr_gguf_get_u32(&g, "llama.block_count", &layers, &e) | zr_gguf_get_u32(&g, "llama.attention.head_count", &heads, &e) |
             zr_gguf_get_u32(&g, "llama.attention.head_count_kv", &kv_heads, &e) |
             zr_gguf_get_u32(&g, "llama.rope.dimension_count", &rope, &e) | zr_gguf_get_u32(&g, "llama.context_length", &ctx, &e) |
             zr_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &eps, &e);
    bool no_theta = zr_gguf_find(&g, "llama.rope.freq_base") == NULL;
    bool shapes = down && k && down->ne[0] == 172 && down->ne[1] == 64 && k->ne[0] == 64 && k->ne[1] == 32;
    const ZrGgufKv *toks = zr_gguf_find(&g, "tokenizer.ggml.tokens");
    ZrStr t3[300];
    bool vocab = toks && toks->type == ZR_GGUF_ARRAY && toks->elem_type == ZR_GGUF_STRING && toks->n == 512;
    if (vocab) {
        ZrStr *all = malloc(512 * sizeof *all);
        zr_gguf_arr_strings(toks, all);
        memcpy(t3, all, sizeof t3);
        free(all);
        vocab = zr_str_eq(t3[0], "<unk>") && zr_str_eq(t3[1], "<s>") && zr_str_eq(t3[2], "</s>") && zr_str_eq(t3[3], "<0x00>") &&
                zr_str_eq(t3[258], "<0xFF>");
    }
    zr_gguf_close(&g);
    ZT_CHECKF(rc == 0, "%s", e.msg);
    ZT_CHECK(embd == 64 && ff == 172 && layers == 5 && heads == 8 && kv_heads == 4 && rope == 8 && ctx == 2048);
    ZT_CHECK(eps == 9.9999997e-06f && no_theta);
    ZT_CHECK(shapes);
    ZT_CHECK(vocab);
}

int main(void) { return zt_run(); }
