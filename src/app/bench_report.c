/* zrun bench: the report as a markdown table (llama-bench's look), JSON (one array), JSON
 * lines, or CSV. Every record of the machine-readable formats carries the device fields too,
 * so a file of results stands on its own. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "bench.h"
#include "config.h"

int zr_bench_format_parse(const char *s) {
    if (!strcmp(s, "md")) return ZR_BENCH_MD;
    if (!strcmp(s, "json")) return ZR_BENCH_JSON;
    if (!strcmp(s, "csv")) return ZR_BENCH_CSV;
    if (!strcmp(s, "jsonl")) return ZR_BENCH_JSONL;
    return -1;
}

static void cuda_version_text(int v, char *out, size_t len) {
    snprintf(out, len, "%d.%d", v / 1000, v % 1000 / 10);
}

void zr_bench_device_line(const ZrBenchDevice *d, char *out, size_t len) {
    char bw[256];
    if (d->read_gbps > 0)
        snprintf(bw, sizeof bw, "read bandwidth %.1f GB/s (%s)", d->read_gbps, d->read_how);
    else
        snprintf(bw, sizeof bw, "read bandwidth not measured (%s): %% BW is '-'", d->read_how);
    if (!strcmp(d->backend, "cuda")) {
        char cv[16];
        cuda_version_text(d->cuda_version, cv, sizeof cv);
        snprintf(out, len, "device: %s | driver %s | CUDA %s | %s", d->name, d->driver, cv, bw);
    } else {
        snprintf(out, len, "device: CPU %s | %d threads | %s", d->name, d->n_threads, bw);
    }
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* A finite number, or null when not applicable (negative / zero where `zero_is_null`). */
static void json_num(FILE *f, double v, bool zero_is_null) {
    if (!isfinite(v) || v < 0 || (zero_is_null && v == 0)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static void json_record(FILE *f, const ZrBenchDevice *d, const ZrBenchRow *r) {
    char cv[16];
    cuda_version_text(d->cuda_version, cv, sizeof cv);
    fputs("{\"build\": ", f);
    json_str(f, ZR_VERSION);
    fputs(", \"backend\": ", f);
    json_str(f, d->backend);
    fputs(", \"device\": ", f);
    json_str(f, d->name);
    fputs(", \"driver\": ", f);
    if (d->cuda_version) json_str(f, d->driver); else fputs("null", f);
    fputs(", \"cuda_version\": ", f);
    if (d->cuda_version) json_str(f, cv); else fputs("null", f);
    fprintf(f, ", \"n_threads\": %d, \"read_gbps\": ", d->n_threads);
    json_num(f, d->read_gbps, true);
    fputs(", \"model_filename\": ", f);
    json_str(f, r->model_path);
    fputs(", \"model_type\": ", f);
    json_str(f, r->model_type);
    fprintf(f, ", \"model_size\": %" PRIu64 ", \"model_n_params\": %" PRIu64 ", \"bytes_per_token\": %" PRIu64,
            r->model_bytes, r->n_params, r->bytes_per_token);
    fputs(", \"mode\": ", f);
    json_str(f, r->mode);
    fputs(", \"test\": ", f);
    json_str(f, r->test);
    fputs(", \"sampling\": ", f);
    json_str(f, r->sampling);
    fprintf(f, ", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"n_ctx\": %d", r->n_prompt, r->n_gen, r->n_depth,
            r->n_ctx);
    fputs(", \"type_k\": ", f);
    json_str(f, r->type_k);
    fputs(", \"type_v\": ", f);
    json_str(f, r->type_v);
    fprintf(f, ", \"reps\": %d, \"warmup\": %d", r->reps, r->warmup);
    fputs(", \"load_ms\": ", f);
    json_num(f, r->load_ms, true);
    fputs(", \"ttft_ms\": ", f);
    json_num(f, r->ttft_ms, true);
    fputs(", \"median_ts\": ", f);
    json_num(f, r->ts.median, false);
    fputs(", \"sd_ts\": ", f);
    json_num(f, r->ts.sd, false);
    fputs(", \"avg_ts\": ", f);
    json_num(f, r->ts.mean, false);
    fputs(", \"min_ts\": ", f);
    json_num(f, r->ts.min, false);
    fputs(", \"max_ts\": ", f);
    json_num(f, r->ts.max, false);
    fputs(", \"samples_ts\": [", f);
    for (int i = 0; i < r->reps; i++) {
        if (i) fputs(", ", f);
        json_num(f, r->samples_ts[i], false);
    }
    fputs("], \"gbps\": ", f);
    json_num(f, r->gbps, false);
    fputs(", \"bw_pct\": ", f);
    json_num(f, r->bw_pct, false);
    fputs(", \"kernels_per_token\": ", f);
    json_num(f, (double)r->kernels_per_token, true);
    fputs(", \"host_us_per_token\": ", f);
    json_num(f, r->host_us_per_token, true);
    fprintf(f, ", \"host_steps\": %" PRIu64, r->host_steps);
    fputs(", \"gap_us_min\": ", f);
    json_num(f, r->gap_us_min, false);
    fputs(", \"gap_us_median\": ", f);
    json_num(f, r->gap_us_median, false);
    fputs(", \"graph_build_ms\": ", f);
    json_num(f, r->graph_build_ms, true);
    fprintf(f, ", \"pdl\": %s", r->pdl ? "true" : "false");
    fprintf(f, ", \"logits_hash\": \"%016" PRIx64 "\", \"hash_stable\": %s}", r->logits_hash,
            r->hash_stable ? "true" : "false");
}

/* ---- CSV ---- */

static const char *const csv_cols[] = {
    "build", "backend", "device", "driver", "cuda_version", "n_threads", "read_gbps", "model_filename",
    "model_type", "model_size", "model_n_params", "bytes_per_token", "mode", "test", "sampling", "n_prompt", "n_gen", "n_depth", "n_ctx",
    "type_k", "type_v", "reps", "warmup", "load_ms", "ttft_ms", "median_ts", "sd_ts", "avg_ts", "min_ts", "max_ts", "samples_ts", "gbps", "bw_pct",
    "kernels_per_token", "host_us_per_token", "host_steps", "gap_us_min", "gap_us_median", "graph_build_ms", "pdl", "logits_hash", "hash_stable",
};

static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Empty when not applicable. */
static void csv_num(FILE *f, double v, bool zero_is_empty) {
    if (isfinite(v) && v >= 0 && !(zero_is_empty && v == 0)) fprintf(f, "%.6g", v);
}

static void csv_record(FILE *f, const ZrBenchDevice *d, const ZrBenchRow *r) {
    char cv[16] = "";
    if (d->cuda_version) cuda_version_text(d->cuda_version, cv, sizeof cv);
    csv_str(f, ZR_VERSION);
    fputc(',', f);
    csv_str(f, d->backend);
    fputc(',', f);
    csv_str(f, d->name);
    fputc(',', f);
    csv_str(f, d->driver);
    fputc(',', f);
    csv_str(f, cv);
    fprintf(f, ",%d,", d->n_threads);
    csv_num(f, d->read_gbps, true);
    fputc(',', f);
    csv_str(f, r->model_path);
    fputc(',', f);
    csv_str(f, r->model_type);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", r->model_bytes, r->n_params, r->bytes_per_token);
    csv_str(f, r->mode);
    fputc(',', f);
    csv_str(f, r->test);
    fputc(',', f);
    csv_str(f, r->sampling);
    fprintf(f, ",%d,%d,%d,%d,", r->n_prompt, r->n_gen, r->n_depth, r->n_ctx);
    csv_str(f, r->type_k);
    fputc(',', f);
    csv_str(f, r->type_v);
    fprintf(f, ",%d,%d,", r->reps, r->warmup);
    csv_num(f, r->load_ms, true);
    fputc(',', f);
    csv_num(f, r->ttft_ms, true);
    fputc(',', f);
    const double st[] = {r->ts.median, r->ts.sd, r->ts.mean, r->ts.min, r->ts.max};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        csv_num(f, st[i], false);
        fputc(',', f);
    }
    fputc('"', f);
    for (int i = 0; i < r->reps; i++) fprintf(f, i ? " %.6g" : "%.6g", r->samples_ts[i]);
    fputs("\",", f);
    csv_num(f, r->gbps, false);
    fputc(',', f);
    csv_num(f, r->bw_pct, false);
    fputc(',', f);
    csv_num(f, (double)r->kernels_per_token, true);
    fputc(',', f);
    csv_num(f, r->host_us_per_token, true);
    fprintf(f, ",%" PRIu64 ",", r->host_steps);
    csv_num(f, r->gap_us_min, false);
    fputc(',', f);
    csv_num(f, r->gap_us_median, false);
    fputc(',', f);
    csv_num(f, r->graph_build_ms, true);
    fprintf(f, ",%s", r->pdl ? "true" : "false");
    fprintf(f, ",%016" PRIx64 ",%s\n", r->logits_hash, r->hash_stable ? "true" : "false");
}

/* ---- markdown ---- */

/* md: "| f32    | f32    " after the threads column when the cache is not f16 (ZrBenchOut.md_kv_columns) */
static void md_kv(FILE *f, const ZrBenchOut *o, const char *type_k, const char *type_v) {
    if (o->md_kv_columns) fprintf(f, " %-6s | %-6s |", type_k, type_v);
}

static void md_row(const ZrBenchOut *o, const ZrBenchDevice *d, const ZrBenchRow *r) {
    FILE *f = o->f;
    char ts[64], gbps[32] = "-", pct[32] = "-", kern[32] = "-", host[32] = "-", graph[32] = "-", thr[16] = "-",
         gap[48] = "-";
    if (r->gap_us_median >= 0) snprintf(gap, sizeof gap, "%.2f (%.2f)", r->gap_us_median, r->gap_us_min);
    char load[32] = "-", ttft[32] = "-";
    if (r->load_ms > 0) snprintf(load, sizeof load, "%.1f", r->load_ms);
    if (r->ttft_ms > 0) snprintf(ttft, sizeof ttft, "%.1f", r->ttft_ms);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->ts.median, r->ts.sd);
    if (r->gbps >= 0) snprintf(gbps, sizeof gbps, "%.1f", r->gbps);
    if (r->bw_pct >= 0) snprintf(pct, sizeof pct, "%.1f", r->bw_pct);
    if (r->kernels_per_token) snprintf(kern, sizeof kern, "%" PRIu64, r->kernels_per_token);
    if (r->host_us_per_token > 0) snprintf(host, sizeof host, "%.1f", r->host_us_per_token);
    if (r->graph_build_ms > 0) snprintf(graph, sizeof graph, "%.1f", r->graph_build_ms);
    if (d->n_threads > 0) snprintf(thr, sizeof thr, "%d", d->n_threads);
    char mode[32];  /* "+pdl": decode launches overlap through programmatic dependent launch */
    snprintf(mode, sizeof mode, "%s%s", r->mode, r->pdl ? "+pdl" : "");
    char params[32], size[32];
    const double np = (double)r->n_params, mb = (double)r->model_bytes;
    if (np >= 1e9) snprintf(params, sizeof params, "%.2f B", np / 1e9);
    else if (np >= 1e6) snprintf(params, sizeof params, "%.2f M", np / 1e6);
    else snprintf(params, sizeof params, "%.2f K", np / 1e3);
    if (mb >= 1024.0 * 1024.0 * 1024.0) snprintf(size, sizeof size, "%.2f GiB", mb / (1024.0 * 1024.0 * 1024.0));
    else snprintf(size, sizeof size, "%.2f MiB", mb / (1024.0 * 1024.0));
    fprintf(f, "| %-24s | %14s | %10s | %-7s | %7s |", r->model_type, size, params, d->backend, thr);
    md_kv(f, o, r->type_k, r->type_v);
    fprintf(f,
            " %-14s | %14s | %-8s | %20s | %8s | %6s | %8s | %11s | %13s | %8s | %7s | %7s | %016" PRIx64 "%s |\n",
            mode, r->test, r->sampling, ts, gbps, pct, kern, host, gap, graph, load, ttft, r->logits_hash,
            r->hash_stable ? "" : " (varies)");
}

void zr_bench_out_begin(ZrBenchOut *o, const ZrBenchDevice *dev) {
    FILE *f = o->f;
    o->n_rows = 0;
    switch (o->format) {
    case ZR_BENCH_MD: {
        char line[768];
        zr_bench_device_line(dev, line, sizeof line);
        fprintf(f, "%s\n\n", line);
        fprintf(f, "| %-24s | %14s | %10s | %-7s | %7s |", "model", "size", "params", "backend", "threads");
        md_kv(f, o, "type_k", "type_v");
        fprintf(f, " %-14s | %14s | %-8s | %20s | %8s | %6s | %8s | %11s | %13s | %8s | %7s | %7s | %-16s |\n", "mode",
                "test", "sampling", "t/s", "GB/s", "% BW", "kern/tok", "host µs/tok", "gap µs (min)", "graph ms", "load ms",
                "TTFT ms", "logits hash");
        fprintf(f, "| %s | %s: | %s: | %s | %s: |", "------------------------", "-------------", "---------", "-------",
                "------");
        md_kv(f, o, "------", "------");
        fprintf(f, " %s | %s: | %s | %s: | %s: | %s: | %s: | %s: | %s: | %s: | %s: | %s: | %s |\n", "--------------",
                "-------------", "--------", "-------------------", "-------", "-----", "-------", "----------",
                "------------", "-------", "------", "------", "----------------");
        break;
    }
    case ZR_BENCH_JSON: fputs("[\n", f); break;
    case ZR_BENCH_CSV:
        for (size_t i = 0; i < sizeof csv_cols / sizeof csv_cols[0]; i++) fprintf(f, i ? ",%s" : "%s", csv_cols[i]);
        fputc('\n', f);
        break;
    case ZR_BENCH_JSONL: break;
    }
    fflush(f);
}

void zr_bench_out_row(ZrBenchOut *o, const ZrBenchDevice *dev, const ZrBenchRow *r) {
    FILE *f = o->f;
    switch (o->format) {
    case ZR_BENCH_MD: md_row(o, dev, r); break;
    case ZR_BENCH_JSON:
        if (o->n_rows) fputs(",\n", f);
        fputs("  ", f);
        json_record(f, dev, r);
        break;
    case ZR_BENCH_CSV: csv_record(f, dev, r); break;
    case ZR_BENCH_JSONL:
        json_record(f, dev, r);
        fputc('\n', f);
        break;
    }
    o->n_rows++;
    fflush(f);
}

void zr_bench_out_end(ZrBenchOut *o) {
    if (o->format == ZR_BENCH_JSON) fputs(o->n_rows ? "\n]\n" : "]\n", o->f);
    fflush(o->f);
}
