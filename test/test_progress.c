/* The load progress line: its text, drawn in place and cleared on a terminal, nothing when off. */
#include <stdlib.h>
#include <unistd.h>

#include "progress.h"
#include "zt.h"

ZT_TEST(the_line_gives_bytes_total_share_and_rate) {
    char line[160];
    zr_progress_format(line, sizeof line, "zrun: loading", 3200000000ull, 16000000000ull, 0.5);
    ZT_CHECKF(!strcmp(line, "zrun: loading 3.20 / 16.00 GB (20%), 6.4 GB/s"), "%s", line);
    zr_progress_format(line, sizeof line, "zrun: loading", 0, 1000, 0.0);
    ZT_CHECKF(!strcmp(line, "zrun: loading 0.00 / 0.00 GB (0%)"), "%s", line);
}

/* Drawn with a carriage return and erased to the end of the line, rate-limited, and cleared at
 * the end; a reporter that is off (a pipe, --quiet) writes nothing. */
ZT_TEST(the_line_is_redrawn_in_place_and_cleared_only_when_on) {
    for (int on = 0; on <= 1; on++) {
        FILE *f = tmpfile();
        ZT_CHECK(f);
        ZrProgress p;
        zr_progress_init(&p, "zrun: loading", on);
        p.out = f;
        p.t0_ms -= 1000.0; /* as if the upload had been going for a second */
        zr_progress_cb(&p, 100, 1000);
        zr_progress_cb(&p, 200, 1000); /* within ZR_PROGRESS_EVERY_MS of the last: skipped */
        zr_progress_cb(&p, 1000, 1000); /* the end is always drawn */
        zr_progress_end(&p);
        long n = ftell(f);
        char buf[512] = "";
        rewind(f);
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        fclose(f);
        if (!on) {
            ZT_CHECKF(n == 0, "%ld bytes written while off", n);
            continue;
        }
        ZT_CHECKF(strstr(buf, "\rzrun: loading 0.00 / 0.00 GB (10%)") && !strstr(buf, "(20%)"), "%s", buf);
        ZT_CHECKF(strstr(buf, "(100%)"), "%s", buf);
        size_t len = strlen(buf);
        ZT_CHECKF(len > 4 && !strcmp(buf + len - 4, "\r\033[K"), "does not end cleared: %s", buf);
    }
}

int main(void) { return zt_run(); }
