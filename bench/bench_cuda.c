/*
 * bench_cuda.c: one case of `radixmlp bench --device cuda` (see bench_cuda.h). Everything runs on
 * a non-blocking stream of the tool's own, handed to the context with rmlp_context_set_stream:
 * per run the plan is built and set (both timed on the host), then the forward is bracketed by
 * two events on that stream and the host waits for the second. Four sides alternate: radix off
 * (rmlp_forward, threshold 0), on (rmlp_forward, attention in full space), on with attention in
 * compact space (rmlp_forward_compact: compact rows out, read through the plan's scatter when
 * compared) and last (rmlp_forward_last on a second context, attention in compact space: each
 * sequence's last row, compared with the off run's last rows). Each side has its planner, so its plan stays valid between its runs. Attention's
 * share is measured in separate runs through the attention callback, which brackets the library's
 * built-in attention (rmlp_attention or rmlp_attention_compact) with events per layer, so the
 * timed runs are the plain forward a host would call. The tool links its own static CUDA runtime
 * (the library's is hidden inside it); streams, events and device pointers are the driver's
 * handles, valid in both. Built without CUDA, the two entry points print that and fail.
 * Each --gpu-variant has a bench_dev of its own (context, planners, outputs), made with its
 * variables set; a round runs every variant's four sides before the next round.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "cli.h"

#include "gpu/options.h"

/* ---- variants (no CUDA needed) ------------------------------------------------------------------ */

/* Calls `each(name, value, ctx)` for the NAME=VALUE pairs of spec (copied, at most 255 bytes);
 * stops at the first that returns nonzero and returns it, or -1 for a pair without '='. */
static int each_pair(const char *spec, int (*each)(const char *name, const char *value, void *ctx), void *ctx) {
    char copy[256];
    if (strlen(spec) >= sizeof copy) return -1;
    strcpy(copy, spec);
    for (char *save = NULL, *pair = strtok_r(copy, ",", &save); pair != NULL; pair = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pair, '=');
        if (eq == NULL) return -1;
        *eq = '\0';
        int rc = each(pair, eq + 1, ctx);
        if (rc != 0) return rc;
    }
    return 0;
}

static int check_pair(const char *name, const char *value, void *ctx) {
    unsigned *seen = ctx;
    const gpu_option_var *var = gpu_option_find(name);
    if (var == NULL || gpu_option_value(var, value) < 0 || (*seen >> (var - GPU_OPTION_VARS) & 1u)) return 1;
    *seen |= 1u << (var - GPU_OPTION_VARS);
    return 0;
}

int bench_cuda_variant_check(const char *spec) {
    unsigned seen = 0;
    if (*spec != '\0' && spec[strlen(spec) - 1] != ',' && each_pair(spec, check_pair, &seen) == 0 && seen != 0)
        return 0;
    fprintf(stderr, "radixmlp: --gpu-variant expects NAME=VALUE[,NAME=VALUE...], each NAME once, got '%s'; the "
                    "names and their values:", spec);
    for (int i = 0; i < GPU_OPT_COUNT; i++) {
        fprintf(stderr, "%s %s=", i ? ";" : "", GPU_OPTION_VARS[i].name);
        for (int k = 0; k < 3 && GPU_OPTION_VARS[i].values[k] != NULL; k++)
            fprintf(stderr, "%s%s", k ? "|" : "", GPU_OPTION_VARS[i].values[k]);
    }
    fputc('\n', stderr);
    return -1;
}

typedef struct apply_state {
    bench_env_saved *saved;
    size_t n;
} apply_state;

static int apply_pair(const char *name, const char *value, void *ctx) {
    apply_state *st = ctx;
    if (st->n >= BENCH_VARIANT_MAX_VARS) return 1;
    bench_env_saved *sv = &st->saved[st->n++];
    snprintf(sv->name, sizeof sv->name, "%s", name);
    const char *old = getenv(name);
    sv->old = old != NULL ? strdup(old) : NULL;
    setenv(name, value, 1);
    return 0;
}

size_t bench_cuda_variant_apply(const char *spec, bench_env_saved saved[BENCH_VARIANT_MAX_VARS]) {
    apply_state st = {saved, 0};
    (void)each_pair(spec, apply_pair, &st); /* checked by bench_cuda_variant_check */
    return st.n;
}

void bench_cuda_variant_restore(bench_env_saved *saved, size_t n) {
    for (size_t i = n; i-- > 0;) { /* in reverse: a name set twice gets its first old value back */
        if (saved[i].old != NULL) setenv(saved[i].name, saved[i].old, 1);
        else unsetenv(saved[i].name);
        free(saved[i].old);
        saved[i].old = NULL;
    }
}

static const char *const SIDE_NAMES[BENCH_SIDES] = {"off", "on", "compact", "last"};

const char *bench_cuda_json_keys(const bench_cuda_result *r, char *buf, size_t cap) {
    int used = snprintf(buf, cap, ", \"variant\": \"%s\", \"attention\": \"%s\", \"flashinfer\": %s, \"sm90\": %s",
                        r->variant, r->attention, r->flashinfer ? "true" : "false", r->sm90 ? "true" : "false");
    for (int s = 0; s < BENCH_SIDES && used > 0 && (size_t)used < cap; s++)
        used += snprintf(buf + used, cap - (size_t)used, ", \"kernel_%s\": \"%s\", \"layout_%s\": \"%s\"",
                         SIDE_NAMES[s], r->kernel[s], SIDE_NAMES[s], r->layout[s]);
    for (int s = 0; s < BENCH_SIDES && used > 0 && (size_t)used < cap; s++)
        used += isfinite(r->rel_norm_vs_default[s])
                    ? snprintf(buf + used, cap - (size_t)used, ", \"rel_norm_vs_default_%s\": %.3g", SIDE_NAMES[s],
                               r->rel_norm_vs_default[s])
                    : snprintf(buf + used, cap - (size_t)used, ", \"rel_norm_vs_default_%s\": null", SIDE_NAMES[s]);
    if (used > 0 && (size_t)used < cap)
        snprintf(buf + used, cap - (size_t)used,
                 ", \"fallbacks\": %llu, \"sm90_fallbacks\": %llu, \"plan_errors\": %llu", r->fallbacks,
                 r->sm90_fallbacks, r->plan_errors);
    return buf;
}

const char *bench_cuda_text_keys(const bench_cuda_result *r, char *buf, size_t cap) {
    snprintf(buf, cap, "  %s: %s/%s/%s/%s%s", r->variant, r->kernel[BENCH_OFF], r->kernel[BENCH_ON],
             r->kernel[BENCH_COMPACT], r->kernel[BENCH_LAST], r->fallbacks ? " (fallbacks)" : "");
    return buf;
}

#ifdef RMLP_WITH_CUDA

#include <cuda_runtime_api.h>

static int cuda_ok(cudaError_t error, const char *what) {
    if (error == cudaSuccess) return 1;
    fprintf(stderr, "radixmlp bench: %s failed: %s (%s)\n", what, cudaGetErrorName(error), cudaGetErrorString(error));
    return 0;
}

static int rmlp_ok(rmlp_status status, const char *what) {
    if (status == RMLP_OK) return 1;
    fprintf(stderr, "radixmlp bench: %s: %s: %s\n", what, rmlp_status_string(status), rmlp_last_error());
    return 0;
}

int bench_cuda_available(char *name, size_t cap) {
    if ((rmlp_build_flags() & RMLP_BUILD_CUDA) == 0) {
        fprintf(stderr, "radixmlp bench: --device cuda: libradix_mlp %s was built without CUDA\n",
                rmlp_version_string());
        return -1;
    }
    int32_t count = 0;
    rmlp_status status = rmlp_cuda_device_count(&count);
    if (status != RMLP_OK || count < 1) {
        fprintf(stderr, "radixmlp bench: --device cuda: no CUDA device: %s (status %d: %s)\n", rmlp_last_error(),
                status, rmlp_status_string(status));
        return -1;
    }
    struct cudaDeviceProp prop;
    if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice(0)") ||
        !cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties(0)"))
        return -1;
    snprintf(name, cap, "%s (sm_%d%d, %d SMs, %.0f GiB; attention: %s)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, (double)prop.totalGlobalMem / 1073741824.0,
             (rmlp_build_flags() & RMLP_BUILD_FLASHINFER) ? "FlashInfer for f16/bf16 head_dim 64/128/256"
                                                         : "the reference kernel, no FlashInfer in this build");
    return 0;
}

/* The attention callback of the instrumented runs: the built-in attention between two events. */
typedef struct attn_timer {
    rmlp_context *ctx;
    cudaEvent_t *events; /* (2 * layers): start and stop of each layer's attention */
    uint32_t layers;
    cudaError_t error; /* first failed event record */
} attn_timer;

static rmlp_status timed_attention(void *user_data, const rmlp_attention_args *args) {
    attn_timer *t = user_data;
    bool timed = args->layer < t->layers;
    cudaStream_t stream = args->stream;
    cudaError_t error = timed ? cudaEventRecord(t->events[2 * args->layer], stream) : cudaSuccess;
    rmlp_status status = args->layout == RMLP_ATTENTION_COMPACT ? rmlp_attention_compact(t->ctx, args)
                                                                 : rmlp_attention(t->ctx, args);
    if (timed && error == cudaSuccess) error = cudaEventRecord(t->events[2 * args->layer + 1], stream);
    if (error != cudaSuccess && t->error == cudaSuccess) t->error = error;
    return status;
}

typedef struct bench_dev {
    rmlp_context *ctx, *ctx_last; /* ctx_last: attention in compact space, for BENCH_LAST */
    cudaStream_t stream;
    cudaEvent_t start, stop;
    attn_timer timer;
    rmlp_planner *planner[BENCH_SIDES]; /* each side's plan stays valid between its runs */
    rmlp_plan plan[BENCH_SIDES];        /* each side's last plan */
    /* Device memory in the model's dtype: (n_tokens, hidden) batch rows; the compact side's
     * (n_tokens + RMLP_MAX_PAD_MULTIPLE, hidden), of which it writes n_compact_padded rows; the
     * last side writes n_seqs rows. */
    void *out[BENCH_SIDES];
    size_t hidden, elem_bytes, out_bytes; /* out_bytes: of the batch rows */
    /* the timed forwards' attention launches per side: [side][0 FlashInfer, 1 reference, 2 of the
     * FlashInfer ones its Hopper kernels'][layout: full, full_paged, compact] (rmlp_gpu_stats) */
    unsigned long long launches[BENCH_SIDES][3][3];
} bench_dev;

static int gpu_stats(rmlp_context *ctx, rmlp_gpu_stats *s) {
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    return rmlp_ok(rmlp_context_gpu_stats(ctx, s), "rmlp_context_gpu_stats");
}

/* d's launch counters of `side` += what happened between the stats `a` and `b`. */
static void count_launches(bench_dev *d, int side, const rmlp_gpu_stats *a, const rmlp_gpu_stats *b) {
    unsigned long long(*l)[3] = d->launches[side];
    l[0][0] += b->flashinfer_full - a->flashinfer_full, l[0][1] += b->flashinfer_full_paged - a->flashinfer_full_paged;
    l[0][2] += b->flashinfer_compact - a->flashinfer_compact, l[1][0] += b->reference_full - a->reference_full;
    l[1][1] += b->reference_full_paged - a->reference_full_paged;
    l[1][2] += b->reference_compact - a->reference_compact;
    l[2][1] += b->flashinfer_sm90_full_paged - a->flashinfer_sm90_full_paged;
    l[2][2] += b->flashinfer_sm90_compact - a->flashinfer_sm90_compact;
}

/* What a side's launches l ran: "flashinfer" (on its Hopper kernels: "flashinfer_sm90", some of
 * them: "flashinfer_part_sm90"), "reference", "mixed" (both), "none". */
static const char *kernel_name(const unsigned long long (*l)[3]) {
    unsigned long long fi = l[0][0] + l[0][1] + l[0][2], ref = l[1][0] + l[1][1] + l[1][2];
    unsigned long long sm90 = l[2][1] + l[2][2];
    if (fi && ref) return "mixed";
    if (fi) return sm90 == fi ? "flashinfer_sm90" : sm90 ? "flashinfer_part_sm90" : "flashinfer";
    return ref ? "reference" : "none";
}

/* r's attention keys from d's counters and the contexts' stats (the setting of ctx; the fallbacks
 * and plan errors of both). */
static int describe_attention(const bench_dev *d, bench_cuda_result *r) {
    static const char *const layouts[3] = {"full", "full_paged", "compact"};
    rmlp_gpu_stats s, t; /* t: ctx_last's */
    if (!gpu_stats(d->ctx, &s) || !gpu_stats(d->ctx_last, &t)) return -1;
    snprintf(r->attention, sizeof r->attention, "%s",
             s.attention == RMLP_GPU_ATTENTION_FLASHINFER  ? "flashinfer"
             : s.attention == RMLP_GPU_ATTENTION_REFERENCE ? "reference"
                                                            : "auto");
    r->flashinfer = s.flashinfer, r->sm90 = s.sm90;
    r->plan_errors = s.plan_errors + t.plan_errors, r->sm90_fallbacks = s.sm90_fallbacks + t.sm90_fallbacks;
    r->fallbacks = s.fallback_plan_error + s.fallback_small_batch + s.fallback_too_large + s.fallback_unplanned +
                   s.fallback_buffers + s.fallback_launcher + t.fallback_plan_error + t.fallback_small_batch +
                   t.fallback_too_large + t.fallback_unplanned + t.fallback_buffers + t.fallback_launcher;
    for (int side = 0; side < BENCH_SIDES; side++) {
        const unsigned long long(*l)[3] = d->launches[side];
        snprintf(r->kernel[side], sizeof r->kernel[side], "%s", kernel_name(l));
        r->layout[side][0] = '\0';
        for (int k = 0; k < 3; k++)
            if (l[0][k] + l[1][k] > 0)
                snprintf(r->layout[side] + strlen(r->layout[side]), sizeof r->layout[side] - strlen(r->layout[side]),
                         "%s%s", r->layout[side][0] ? "+" : "", layouts[k]);
    }
    return 0;
}

typedef struct sample {
    double fwd_ms, attn_ms, plan_us, set_plan_us;
    uint32_t n_compact;
    bool use_radix;
} sample;

/* Plan, set_plan and forward of one side (BENCH_OFF: threshold 0; the others: `threshold`; on
 * ctx_last for BENCH_LAST), the forward timed with events; instrumented: through timed_attention, summing its
 * per-layer times into attn_ms. */
static int run_side(bench_dev *d, const workload *w, double threshold, int side, int instrumented, sample *s) {
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = side == BENCH_OFF ? 0.0 : threshold;
    rmlp_plan *plan = &d->plan[side];
    if (!rmlp_ok(rmlp_plan_build(d->planner[side], w->input_ids, w->position_ids, w->n_tokens, w->cu_seqlens,
                                 w->n_seqs, &params, plan),
                 "rmlp_plan_build"))
        return -1;
    rmlp_context *ctx = side == BENCH_LAST ? d->ctx_last : d->ctx;
    double t0 = cli_now_ms();
    if (!rmlp_ok(rmlp_context_set_plan(ctx, plan), "rmlp_context_set_plan")) return -1;
    s->set_plan_us = (cli_now_ms() - t0) * 1e3;
    s->plan_us = plan->build_us;
    s->n_compact = plan->n_compact;
    s->use_radix = plan->use_radix;
    d->timer.error = cudaSuccess;
    d->timer.ctx = ctx; /* a callback may call the attention of the context running it */
    rmlp_attention_fn attention = instrumented ? timed_attention : NULL;
    rmlp_gpu_stats before, after;
    if (!gpu_stats(ctx, &before) || !cuda_ok(cudaEventRecord(d->start, d->stream), "cudaEventRecord") ||
        !rmlp_ok(side == BENCH_COMPACT ? rmlp_forward_compact(ctx, plan, attention, &d->timer, d->out[side])
                 : side == BENCH_LAST  ? rmlp_forward_last(ctx, plan, attention, &d->timer, d->out[side])
                                       : rmlp_forward(ctx, plan, attention, &d->timer, d->out[side]),
                 side == BENCH_COMPACT ? "rmlp_forward_compact"
                 : side == BENCH_LAST  ? "rmlp_forward_last"
                                       : "rmlp_forward") ||
        !cuda_ok(cudaEventRecord(d->stop, d->stream), "cudaEventRecord") ||
        !cuda_ok(cudaEventSynchronize(d->stop), "the forward (cudaEventSynchronize)") ||
        !cuda_ok(d->timer.error, "cudaEventRecord (attention timer)") || !gpu_stats(ctx, &after))
        return -1;
    if (!instrumented) count_launches(d, side, &before, &after);
    float ms = 0.0f;
    if (!cuda_ok(cudaEventElapsedTime(&ms, d->start, d->stop), "cudaEventElapsedTime")) return -1;
    s->fwd_ms = ms;
    s->attn_ms = 0.0;
    for (uint32_t l = 0; instrumented && l < d->timer.layers; l++) {
        if (!cuda_ok(cudaEventElapsedTime(&ms, d->timer.events[2 * l], d->timer.events[2 * l + 1]),
                     "cudaEventElapsedTime (attention)"))
            return -1;
        s->attn_ms += ms;
    }
    return 0;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of a host copy of device output in dtype dt, as f32. */
static float element(const unsigned char *p, size_t i, rmlp_dtype dt) {
    if (dt == RMLP_DTYPE_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint32_t h = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
    if (dt == RMLP_DTYPE_BF16) return from_bits(h << 16);
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -v : v;
}

/* Side `side` of d's output copied back (batch rows, the compact side's padded compact rows, the
 * last side's n_seqs rows), NULL after printing why. */
static unsigned char *download_side(bench_dev *d, int side) {
    size_t row_bytes = d->hidden * d->elem_bytes;
    size_t bytes = side == BENCH_COMPACT ? (size_t)d->plan[side].n_compact_padded * row_bytes
                   : side == BENCH_LAST  ? (size_t)d->plan[side].n_seqs * row_bytes
                                         : d->out_bytes;
    unsigned char *host = malloc(bytes ? bytes : 1);
    if (host == NULL) {
        fprintf(stderr, "radixmlp bench: allocating %zu bytes for the %s output failed\n", bytes, SIDE_NAMES[side]);
    } else if (!cuda_ok(cudaMemcpyAsync(host, d->out[side], bytes, cudaMemcpyDeviceToHost, d->stream),
                        "cudaMemcpyAsync (output)") ||
               !cuda_ok(cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (output)")) {
        free(host);
        host = NULL;
    }
    return host;
}

/* Where batch row b's element j is in side s of d's output: a compact side's rows read through its
 * plan's scatter, the last side's row r holding sequence r's last row (b = cu_seqlens[r + 1] - 1). */
static size_t output_index(const bench_dev *d, int s, size_t r, size_t b, size_t j) {
    size_t row = s == BENCH_COMPACT ? d->plan[s].scatter[b] : s == BENCH_LAST ? r : b;
    return row * d->hidden + j;
}

/* max |x - y| and ||x - y|| / ||x|| over every batch row (each sequence's last row where a side is
 * BENCH_LAST), x side sa of a's output, y side sb of b's; NaN anywhere (an unwritten row keeps the
 * 0xFF poison, NaN in every dtype) makes both NaN and says so. */
static int compare_outputs(bench_dev *a, int sa, bench_dev *b, int sb, rmlp_dtype dt, double *max_abs_diff,
                           double *rel_norm_diff) {
    unsigned char *x = download_side(a, sa), *y = x != NULL ? download_side(b, sb) : NULL;
    if (x == NULL || y == NULL) {
        free(x);
        return -1;
    }
    bool last = sa == BENCH_LAST || sb == BENCH_LAST;
    const rmlp_plan *p = &a->plan[sa];
    size_t hsz = a->hidden, rows = last ? p->n_seqs : a->out_bytes / a->elem_bytes / hsz, n = rows * hsz, nans = 0;
    double max_abs = 0.0, sq_diff = 0.0, sq_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        size_t r = i / hsz, row = last ? (size_t)p->cu_seqlens[r + 1] - 1 : r;
        size_t ix = output_index(a, sa, r, row, i % hsz), iy = output_index(b, sb, r, row, i % hsz);
        double u = element(x, ix, dt), v = element(y, iy, dt), diff = fabs(u - v);
        if (isnan(u) || isnan(v)) {
            nans++;
            continue;
        }
        max_abs = diff > max_abs ? diff : max_abs;
        sq_diff += diff * diff;
        sq_ref += u * u;
    }
    if (nans)
        fprintf(stderr, "radixmlp bench: %zu of %zu output values are NaN (%s or %s)\n", nans, n, SIDE_NAMES[sa],
                SIDE_NAMES[sb]);
    *max_abs_diff = nans ? NAN : max_abs;
    *rel_norm_diff = nans ? NAN : sq_ref > 0.0 ? sqrt(sq_diff / sq_ref) : sqrt(sq_diff);
    free(x), free(y);
    return 0;
}

static void bench_dev_free(bench_dev *d) {
    if (d->stream) cudaStreamSynchronize(d->stream);
    rmlp_context_free(d->ctx);
    rmlp_context_free(d->ctx_last);
    for (int s = 0; s < BENCH_SIDES; s++) {
        rmlp_planner_free(d->planner[s]);
        if (d->out[s]) cudaFree(d->out[s]);
    }
    for (uint32_t i = 0; d->timer.events && i < 2 * d->timer.layers; i++)
        if (d->timer.events[i]) cudaEventDestroy(d->timer.events[i]);
    free(d->timer.events);
    if (d->start) cudaEventDestroy(d->start);
    if (d->stop) cudaEventDestroy(d->stop);
    if (d->stream) cudaStreamDestroy(d->stream);
}

/* d's context is made with the variables of `variant` set (NULL: the environment as it is). */
static int bench_dev_init(bench_dev *d, const rmlp_model *model, const rmlp_model_config *cfg, rmlp_dtype dt,
                          size_t n_tokens, const char *variant) {
    d->hidden = cfg->hidden_size, d->elem_bytes = dt == RMLP_DTYPE_F32 ? 4 : 2;
    d->out_bytes = n_tokens * d->hidden * d->elem_bytes;
    d->timer.layers = cfg->num_hidden_layers;
    d->timer.events = calloc(2 * (size_t)cfg->num_hidden_layers + 1, sizeof(cudaEvent_t));
    if (d->timer.events == NULL) return -1;
    if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice(0)") ||
        !cuda_ok(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
        !cuda_ok(cudaEventCreate(&d->start), "cudaEventCreate") ||
        !cuda_ok(cudaEventCreate(&d->stop), "cudaEventCreate"))
        return -1;
    for (uint32_t i = 0; i < 2 * d->timer.layers; i++)
        if (!cuda_ok(cudaEventCreate(&d->timer.events[i]), "cudaEventCreate")) return -1;
    bench_env_saved saved[BENCH_VARIANT_MAX_VARS];
    size_t n_saved = variant != NULL ? bench_cuda_variant_apply(variant, saved) : 0;
    rmlp_context_params last_params = rmlp_context_default_params();
    last_params.attention_space = RMLP_ATTENTION_COMPACT;
    rmlp_status created = rmlp_context_create(model, n_tokens, &d->ctx);
    if (created == RMLP_OK) created = rmlp_context_create_with_params(model, n_tokens, &last_params, &d->ctx_last);
    bench_cuda_variant_restore(saved, n_saved);
    if (!rmlp_ok(created, variant != NULL ? variant : "rmlp_context_create") ||
        !rmlp_ok(rmlp_context_set_stream(d->ctx, d->stream), "rmlp_context_set_stream") ||
        !rmlp_ok(rmlp_context_set_stream(d->ctx_last, d->stream), "rmlp_context_set_stream"))
        return -1;
    d->timer.ctx = d->ctx;
    for (int s = 0; s < BENCH_SIDES; s++) { /* poisoned: a row no forward writes stays NaN */
        size_t rows = s == BENCH_COMPACT ? n_tokens + RMLP_MAX_PAD_MULTIPLE : n_tokens;
        size_t bytes = rows * d->hidden * d->elem_bytes;
        if (!rmlp_ok(rmlp_planner_create(&d->planner[s]), "rmlp_planner_create") ||
            !cuda_ok(cudaMalloc(&d->out[s], bytes ? bytes : 1), "cudaMalloc (output)") ||
            !cuda_ok(cudaMemsetAsync(d->out[s], 0xFF, bytes, d->stream), "cudaMemsetAsync (poison)"))
            return -1;
    }
    return 0;
}

/* Per side (BENCH_SIDES, 3, repeat): its forward ms, plan build us and set_plan us of each round. */
static double *side_samples(double *samples, unsigned long repeat, int side, int what) {
    return samples + (3 * (size_t)side + (size_t)what) * repeat;
}

/* Up to 2 instrumented rounds (attention's share), the one with the fastest forward kept per side;
 * then the outputs compared, with the default context's (base; NULL for the default itself) too. */
static int finish_variant(bench_dev *d, bench_dev *base, const workload *w, double threshold, rmlp_dtype dtype,
                          unsigned long repeat, bench_cuda_result *r) {
    sample s;
    int rc = 0;
    for (unsigned long i = 0; rc == 0 && i < (repeat < 2 ? repeat : 2); i++) {
        for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
            rc = run_side(d, w, threshold, side, 1, &s);
            if (rc == 0 && (i == 0 || s.fwd_ms < r->fwd_ms[side]))
                r->fwd_ms[side] = s.fwd_ms, r->attn_ms[side] = s.attn_ms;
        }
    }
    for (int side = BENCH_ON; rc == 0 && side < BENCH_SIDES; side++)
        rc = compare_outputs(d, BENCH_OFF, d, side, dtype, &r->max_abs_diff[side], &r->rel_norm_diff[side]);
    for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
        double max_abs;
        r->rel_norm_vs_default[side] = 0.0;
        if (base != NULL) rc = compare_outputs(base, side, d, side, dtype, &max_abs, &r->rel_norm_vs_default[side]);
    }
    return rc == 0 ? describe_attention(d, r) : rc;
}

int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, const char *const *variants, size_t n_variants, float *pooled_last,
                    float *pooled_mean, bench_cuda_result *r) {
    rmlp_model_config cfg;
    if (!rmlp_ok(rmlp_model_get_config(model, &cfg), "rmlp_model_get_config")) return -1;
    size_t nv = 1 + n_variants;
    bench_dev *d = calloc(nv, sizeof *d);
    double *samples = malloc(nv * 3 * BENCH_SIDES * (repeat ? repeat : 1) * sizeof(double));
    int rc = d != NULL && samples != NULL ? 0 : -1;
    for (size_t v = 0; v < nv; v++)
        r[v] = (bench_cuda_result){.repeat = repeat, .variant = v ? variants[v - 1] : "default"};
    for (size_t v = 0; rc == 0 && v < nv; v++)
        rc = bench_dev_init(&d[v], model, &cfg, dtype, w->n_tokens, v ? variants[v - 1] : NULL);
    sample s;
    /* Warm-up: first launches, cuBLAS's heuristics, the weights into L2 where they fit. Then the
     * sides of every context take turns, so a slow spell (clocks, a neighbour) hits all alike. */
    for (unsigned long i = 0; rc == 0 && i <= repeat; i++) {
        for (size_t v = 0; rc == 0 && v < nv; v++)
            for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
                rc = run_side(&d[v], w, threshold, side, 0, &s);
                double *at = samples + v * 3 * BENCH_SIDES * repeat;
                if (rc == 0 && i > 0) {
                    side_samples(at, repeat, side, 0)[i - 1] = s.fwd_ms;
                    side_samples(at, repeat, side, 1)[i - 1] = s.plan_us;
                    side_samples(at, repeat, side, 2)[i - 1] = s.set_plan_us;
                }
                if (rc == 0 && side == BENCH_ON) r[v].n_compact = s.n_compact, r[v].use_radix = s.use_radix;
            }
    }
    for (size_t v = 0; rc == 0 && v < nv; v++)
        for (int side = 0; side < BENCH_SIDES; side++) {
            double *at = samples + v * 3 * BENCH_SIDES * repeat, *fwd = side_samples(at, repeat, side, 0);
            r[v].ms[side] = cli_sort_median(fwd, repeat), r[v].ms_min[side] = fwd[0]; /* sorted */
            r[v].plan_us[side] = cli_sort_median(side_samples(at, repeat, side, 1), repeat);
            r[v].set_plan_us[side] = cli_sort_median(side_samples(at, repeat, side, 2), repeat);
        }
    for (size_t v = 0; rc == 0 && v < nv; v++)
        rc = finish_variant(&d[v], v ? &d[0] : NULL, w, threshold, dtype, repeat, &r[v]);
    if (rc == 0 && pooled_last)
        rc = rmlp_ok(rmlp_context_pool(d[0].ctx, d[0].out[BENCH_ON], w->n_tokens, w->cu_seqlens, w->n_seqs,
                                       RMLP_POOLING_LAST, false, pooled_last),
                     "rmlp_context_pool (last)")
                 ? 0
                 : -1;
    if (rc == 0 && pooled_mean)
        rc = rmlp_ok(rmlp_context_pool(d[0].ctx, d[0].out[BENCH_ON], w->n_tokens, w->cu_seqlens, w->n_seqs,
                                       RMLP_POOLING_MEAN, false, pooled_mean),
                     "rmlp_context_pool (mean)")
                 ? 0
                 : -1;
    for (size_t v = 0; d != NULL && v < nv; v++) bench_dev_free(&d[v]);
    free(d);
    free(samples);
    return rc;
}

#else /* no CUDA in this build */

int bench_cuda_available(char *name, size_t cap) {
    (void)name, (void)cap;
    fprintf(stderr, "radixmlp bench: --device cuda: this radixmlp was built without CUDA (configure with "
                    "-DRMLP_CUDA=ON where nvcc is installed)\n");
    return -1;
}

int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, const char *const *variants, size_t n_variants, float *pooled_last,
                    float *pooled_mean, bench_cuda_result *r) {
    (void)model, (void)dtype, (void)w, (void)threshold, (void)repeat, (void)variants, (void)n_variants,
        (void)pooled_last, (void)pooled_mean, (void)r;
    return bench_cuda_available(NULL, 0);
}

#endif
