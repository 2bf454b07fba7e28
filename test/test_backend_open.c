/* How the commands get a backend (src/app/backend_open.h): --device values, the one CPU
 * fallback rule, the one default context; and the environment read once at the edge. */
#include <stdlib.h>

#include "backend_open.h"
#include "env.h"
#include "zt.h"

static ZrModel model_trained_with(int n_ctx_train) {
    ZrModel m;
    memset(&m, 0, sizeof m);
    m.hp.n_ctx_train = n_ctx_train;
    return m;
}

ZT_TEST(default_ctx_is_what_the_command_will_feed_when_it_knows) {
    ZrModel m = model_trained_with(2048);
    ZT_CHECK(zr_backend_default_ctx(&m, 33) == 33);
    ZT_CHECK(zr_backend_default_ctx(&m, 9000) == 9000);
}

ZT_TEST(default_ctx_for_open_ended_generation_is_the_models_at_most_4096) {
    ZrModel a = model_trained_with(2048), b = model_trained_with(131072), c = model_trained_with(0);
    ZT_CHECK(zr_backend_default_ctx(&a, 0) == 2048);
    ZT_CHECK(zr_backend_default_ctx(&b, 0) == ZR_DEFAULT_CTX);
    ZT_CHECK(zr_backend_default_ctx(&c, 0) == ZR_DEFAULT_CTX); /* the model does not say */
}

ZT_TEST(device_values_parse_and_others_name_the_option) {
    ZrDevice d = ZR_DEVICE_CPU;
    ZrError err = {0};
    ZT_CHECK(zr_device_parse("--device", "auto", &d, &err) == 0 && d == ZR_DEVICE_AUTO);
    ZT_CHECK(zr_device_parse("--device", "cuda", &d, &err) == 0 && d == ZR_DEVICE_CUDA);
    ZT_CHECK(zr_device_parse("--device", "cpu", &d, &err) == 0 && d == ZR_DEVICE_CPU);
    ZT_CHECK(zr_device_parse("--device", "gpu", &d, &err) == ZR_E_USAGE);
    ZT_CHECKF(strstr(err.msg, "--device") && strstr(err.msg, "'gpu'"), "%s", err.msg);
}

/* Needs a model; which rule applies depends on the machine: with a GPU, both open CUDA. */
ZT_TEST(device_cuda_never_falls_back_and_auto_falls_back_only_without_a_gpu) {
    const char *path = zt_shared("models/stories260K.gguf");
    if (!path) {
        zt_skip("no stories260K");
        return;
    }
    ZrModel m;
    ZrError err = {0};
    ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s", err.msg);
    const ZrBackendOptions o = {.n_ctx = 16, .n_threads = 1, .verify_graph = 1, .quiet = true};
    ZrBackend *cuda = zr_backend_open(ZR_DEVICE_CUDA, &m, &o, NULL, &err);
    const bool gpu = cuda != NULL;
    if (!gpu) ZT_CHECKF(err.code == ZR_E_NODEV && strstr(err.msg, "--device cuda"), "%d %s", err.code, err.msg);
    if (cuda) cuda->destroy(cuda);
    ZrBackend *aut = zr_backend_open(ZR_DEVICE_AUTO, &m, &o, NULL, &err);
    ZT_CHECKF(aut, "%s", err.msg);
    ZT_CHECK(!strcmp(aut->name, gpu ? "cuda" : "cpu"));
    /* the CPU has no bandwidth probe of its own; CUDA measures on its own context */
    ZT_CHECK(gpu ? aut->read_bandwidth != NULL : aut->read_bandwidth == NULL);
    aut->destroy(aut);
    zr_model_free(&m);
}

/* The driver and context opened early (ZrBackendOptions.cuda_early, beside the model's parse)
 * change nothing the rule decides: the same backend, or the same reason for the CPU; the CPU
 * drops one it is given, and one no backend took is dropped. */
ZT_TEST(a_context_opened_early_opens_the_same_backend_for_the_same_reason) {
    const char *path = zt_shared("models/stories260K.gguf");
    if (!path) {
        zt_skip("no stories260K");
        return;
    }
    ZrModel m;
    ZrError err = {0}, err2 = {0};
    ZT_CHECKF(zr_model_load(&m, path, &err) == 0, "%s", err.msg);
    const ZrBackendOptions o = {.n_ctx = 16, .n_threads = 1, .verify_graph = 1, .quiet = true};
    ZrBackend *late = zr_backend_open(ZR_DEVICE_CUDA, &m, &o, NULL, &err);
    ZrBackendOptions oe = o;
    oe.cuda_early = zr_cuda_early_start();
    ZT_CHECK(oe.cuda_early);
    ZrBackend *early = zr_backend_open(ZR_DEVICE_CUDA, &m, &oe, NULL, &err2);
    ZT_CHECK(!late == !early);
    if (!late) ZT_CHECKF(err2.code == err.code && !strcmp(err.msg, err2.msg), "'%s' vs '%s'", err.msg, err2.msg);
    if (late) late->destroy(late);
    if (early) early->destroy(early);
    oe.cuda_early = zr_cuda_early_start();
    ZrBackend *aut = zr_backend_open(ZR_DEVICE_AUTO, &m, &oe, NULL, &err);
    ZT_CHECKF(aut && !strcmp(aut->name, late ? "cuda" : "cpu"), "%s", err.msg);
    if (aut) aut->destroy(aut);
    oe.cuda_early = zr_cuda_early_start();
    ZrBackend *cpu = zr_backend_open(ZR_DEVICE_CPU, &m, &oe, NULL, &err);
    ZT_CHECKF(cpu && !strcmp(cpu->name, "cpu"), "%s", err.msg);
    if (cpu) cpu->destroy(cpu);
    zr_cuda_early_drop(zr_cuda_early_start());
    zr_cuda_early_drop(NULL);
    zr_model_free(&m);
}

ZT_TEST(the_environment_is_read_into_values) {
    ZrEnv e;
    ZT_CHECK(setenv("CUDA_GRAPH_ENABLE", "1", 1) == 0 && setenv("ZRUN_FAULT", "graph-launch:3", 1) == 0);
    zr_env_read(&e);
    ZT_CHECK(e.graph && e.fault && !strcmp(e.fault, "graph-launch:3"));
    ZT_CHECK(setenv("CUDA_GRAPH_ENABLE", "yes", 1) == 0 && setenv("ZRUN_FAULT", "", 1) == 0);
    zr_env_read(&e);
    ZT_CHECK(!e.graph && !e.fault); /* only "1" turns graphs on; an empty hook is none */
    ZT_CHECK(unsetenv("CUDA_GRAPH_ENABLE") == 0 && unsetenv("ZRUN_FAULT") == 0);
    zr_env_read(&e);
    ZT_CHECK(!e.graph && !e.fault);
}

/* The plan cache a command gives the CUDA backend: the flag, else XDG_CACHE_HOME (absolute),
 * else HOME; --no-plan-cache and a place-less environment give none. */
ZT_TEST(the_plan_cache_is_the_flags_else_under_xdg_cache_home_else_under_home) {
    char buf[256];
    ZT_CHECK(!strcmp(zr_backend_plan_cache("p.bin", false, "/x", "/h", buf, sizeof buf), "p.bin"));
    ZT_CHECK(!zr_backend_plan_cache("p.bin", true, "/x", "/h", buf, sizeof buf));
    ZT_CHECK(!strcmp(zr_backend_plan_cache(NULL, false, "/x", "/h", buf, sizeof buf), "/x/zrun/cublaslt-plans.bin"));
    ZT_CHECK(!strcmp(zr_backend_plan_cache(NULL, false, NULL, "/h", buf, sizeof buf), "/h/.cache/zrun/cublaslt-plans.bin"));
    /* a relative XDG_CACHE_HOME is ignored, as the base directory specification says */
    ZT_CHECK(!strcmp(zr_backend_plan_cache(NULL, false, "rel", "/h", buf, sizeof buf), "/h/.cache/zrun/cublaslt-plans.bin"));
    ZT_CHECK(!zr_backend_plan_cache(NULL, false, NULL, NULL, buf, sizeof buf));
    char tiny[8];
    ZT_CHECK(!zr_backend_plan_cache(NULL, false, "/x", "/h", tiny, sizeof tiny)); /* cut short: none */
}

ZT_TEST(the_plan_caches_places_are_read_from_the_environment) {
    ZrEnv e;
    ZT_CHECK(setenv("XDG_CACHE_HOME", "/c", 1) == 0 && setenv("HOME", "/home/u", 1) == 0);
    zr_env_read(&e);
    ZT_CHECK(e.xdg_cache_home && !strcmp(e.xdg_cache_home, "/c") && e.home && !strcmp(e.home, "/home/u"));
    ZT_CHECK(setenv("XDG_CACHE_HOME", "", 1) == 0 && unsetenv("HOME") == 0);
    zr_env_read(&e);
    ZT_CHECK(!e.xdg_cache_home && !e.home);
}

int main(void) { return zt_run(); }
