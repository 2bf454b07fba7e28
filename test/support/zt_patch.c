#include "zt_patch.h"

#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_write.h"
#include "quant.h"
#include "zt.h"

const char *zt_stories_patched(const char *tag, const char *tensor, int64_t at, float v) {
    static char path[4200];
    const char *src = zt_shared_model("models/stories260K.gguf");
    if (!src) return NULL;
    ZrGguf g;
    ZrError err;
    if (zr_gguf_open(&g, src, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    const ZrGgufTensor *t = zr_gguf_tensor(&g, tensor);
    float *copy = t && t->type == ZR_TYPE_F32 && at >= 0 && (uint64_t)at < t->nbytes / 4 ? malloc(t->nbytes) : NULL;
    if (!copy) {
        fprintf(stderr, "  stories260K.gguf: no f32 tensor '%s' with a value %lld\n", tensor, (long long)at);
        zr_gguf_close(&g);
        return NULL;
    }
    memcpy(copy, t->data, t->nbytes);
    copy[at] = v;
    ZrGgufWriter w;
    zr_gguf_w_init(&w);
    for (uint64_t i = 0; i < g.n_kv; i++)
        if (!zr_str_eq(g.kv[i].key, "general.alignment")) zr_gguf_w_copy_kv(&w, &g.kv[i]);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const ZrGgufTensor *ti = &g.tensors[i];
        char n[128];
        snprintf(n, sizeof n, "%.*s", (int)ti->name.len, ti->name.ptr);
        zr_gguf_w_tensor(&w, n, ti->type, ti->n_dims, ti->ne, ti == t ? copy : ti->data);
    }
    snprintf(path, sizeof path, "%s/stories260K-%s.gguf", zt_tmpdir(), tag);
    FILE *f = fopen(path, "wb");
    int rc = f ? zr_gguf_w_write(&w, f, &err) : -1;
    if (f) fclose(f);
    zr_gguf_w_free(&w);
    zr_gguf_close(&g);
    free(copy);
    return rc == 0 ? path : NULL;
}
