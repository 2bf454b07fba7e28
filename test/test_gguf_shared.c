/* The GGUF reader on the real files in ../shared (skipped when absent): every model and
 * fixture parses, and a few shapes and types match fixtures/README.md. */
#include <glob.h>

#include "gguf.h"
#include "quant.h"
#include "zt.h"

static int open_shared(ZrGguf *g, const char *rel) {
    const char *p = zt_shared(rel);
    if (!p) { zt_skip("../shared is absent"); return 1; }
    ZrError e;
    if (zr_gguf_open(g, p, &e)) { fprintf(stderr, "  %s\n", e.msg); zt_failed_flag = 1; return 1; }
    return 0;
}

static int parse_all(const char *pattern) {
    const char *root = getenv("ZR_SHARED");
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/%s", root ? root : "../shared", pattern);
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
    int a = parse_all("models/*.gguf"), b = parse_all("fixtures/*.gguf");
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
int main(void) { return zt_run(); }
