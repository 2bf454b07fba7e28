/* The command-line reader (opt.h): whole names first, then one-letter bundles. */
#include "opt.h"

#include <stdio.h>
#include <string.h>

void zr_opt_init(ZrOptReader *r, int argc, char **argv) {
    memset(r, 0, sizeof *r);
    r->argc = argc;
    r->argv = argv;
    r->i = 1;
}

/* Whether s[0..n) is one of the '|'-separated names. */
static bool has_name(const char *names, const char *s, size_t n) {
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, s, n)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static const ZrOpt *find(const ZrOpt *opts, const char *s, size_t n) {
    for (const ZrOpt *o = opts; o->id; o++)
        if (has_name(o->names, s, n)) return o;
    return NULL;
}

/* The first name of o that starts with exactly `dashes` dashes, into out; false if none. */
static bool first_name(const ZrOpt *o, int dashes, char *out, size_t cap) {
    for (const char *p = o->names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        int d = p[0] == '-' ? (p[1] == '-' ? 2 : 1) : 0;
        if (d == dashes) {
            snprintf(out, cap, "%.*s", (int)len, p);
            return true;
        }
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static void set_label(ZrOptReader *r, const ZrOpt *o, const char *written, size_t n) {
    char lng[64];
    if (n >= 2 && written[1] != '-' && first_name(o, 2, lng, sizeof lng))
        snprintf(r->label, sizeof r->label, "%.*s/%s", (int)n, written, lng);
    else
        snprintf(r->label, sizeof r->label, "%.*s", (int)n, written);
}

const char *zr_opt_label(const ZrOptReader *r) { return r->label; }

static bool is_choice(const char *choices, const char *s) {
    return choices && s && has_name(choices, s, strlen(s));
}

/* o was written as written[0..n) (eq: its "=value", or NULL): its value. */
static int take(ZrOptReader *r, const ZrOpt *o, const char *written, size_t n, const char *eq, const char **value,
                ZrError *err) {
    set_label(r, o, written, n);
    *value = NULL;
    if (o->kind == ZR_OPT_FLAG) {
        if (eq) {
            zr_err(err, ZR_E_USAGE, "option '%.*s' takes no value", (int)n, written);
            return ZR_OPT_ERROR;
        }
        return o->id;
    }
    if (eq) {
        *value = eq;
        return o->id;
    }
    if (o->kind == ZR_OPT_MAYBE) {
        if (r->i < r->argc && is_choice(o->choices, r->argv[r->i])) *value = r->argv[r->i++];
        return o->id;
    }
    if (r->i >= r->argc) {
        zr_err(err, ZR_E_USAGE, "%.*s needs a value", (int)n, written);
        return ZR_OPT_ERROR;
    }
    *value = r->argv[r->i++];
    return o->id;
}

/* The next letter of a bundle. */
static int next_in_bundle(ZrOptReader *r, const ZrOpt *opts, const char **value, ZrError *err) {
    const char *whole = r->argv[r->i - 1];
    char one[3] = {'-', *r->bundle, 0};
    const ZrOpt *o = find(opts, one, 2);
    if (!o) {
        if (r->bundle == whole + 1) zr_err(err, ZR_E_USAGE, "unknown option '%s'", whole);
        else zr_err(err, ZR_E_USAGE, "unknown option '%s' in '%s'", one, whole);
        r->bundle = NULL;
        return ZR_OPT_ERROR;
    }
    const char *rest = r->bundle + 1;
    r->bundle = NULL;
    if (o->kind == ZR_OPT_VALUE && *rest) { /* "-n64" */
        set_label(r, o, one, 2);
        *value = rest;
        return o->id;
    }
    if (*rest) r->bundle = rest; /* "-qv": the flag, then the rest */
    if (o->kind != ZR_OPT_FLAG && r->bundle) {
        r->bundle = NULL;
        zr_err(err, ZR_E_USAGE, "option '%s' cannot be followed by '%s' in '%s'", one, rest, whole);
        return ZR_OPT_ERROR;
    }
    return take(r, o, one, 2, NULL, value, err);
}

int zr_opt_next(ZrOptReader *r, const ZrOpt *opts, const char **value, ZrError *err) {
    *value = NULL;
    if (r->bundle) return next_in_bundle(r, opts, value, err);
    for (;;) {
        if (r->i >= r->argc) return ZR_OPT_END;
        const char *a = r->argv[r->i++];
        if (r->only_args || a[0] != '-' || a[1] == 0) { /* "-" alone is an argument (standard input) */
            *value = a;
            return ZR_OPT_ARG;
        }
        if (!strcmp(a, "--")) {
            r->only_args = true;
            continue;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const ZrOpt *o = find(opts, a, n);
        if (o) return take(r, o, a, n, eq ? eq + 1 : NULL, value, err);
        if (a[1] == '-') {
            zr_err(err, ZR_E_USAGE, "unknown option '%.*s'", (int)n, a);
            return ZR_OPT_ERROR;
        }
        r->bundle = a + 1;
        return next_in_bundle(r, opts, value, err);
    }
}
