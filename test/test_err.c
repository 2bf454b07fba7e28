#include "err.h"
#include "zt.h"

ZT_TEST(err_returns_its_code_and_formats_the_message) {
    ZrError e;
    int rc = zr_err(&e, ZR_E_FORMAT, "%s: key '%s': expected %s, found %s", "m.gguf", "k", "u32", "string");
    ZT_CHECK(rc == ZR_E_FORMAT);
    ZT_CHECK(e.code == ZR_E_FORMAT);
    ZT_CHECK(strcmp(e.msg, "m.gguf: key 'k': expected u32, found string") == 0);
}

ZT_TEST(err_wrap_prefixes_context_and_keeps_the_code) {
    ZrError e;
    zr_err(&e, ZR_E_IO, "cannot read");
    int rc = zr_err_wrap(&e, "loading %s", "x.gguf");
    ZT_CHECK(rc == ZR_E_IO);
    ZT_CHECK(strcmp(e.msg, "loading x.gguf: cannot read") == 0);
}

ZT_TEST(err_accepts_null_error_pointer) {
    ZT_CHECK(zr_err(NULL, ZR_E_NOMEM, "x") == ZR_E_NOMEM);
}

int main(void) { return zt_run(); }
