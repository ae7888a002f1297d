/*
 * bench_cuda.c: one case of `radixmlp bench --device cuda` (see bench_cuda.h). Everything runs on
 * a non-blocking stream of the tool's own, handed to the context with rmlp_context_set_stream:
 * per run the plan is built and set (both timed on the host), then the forward is bracketed by
 * two events on that stream and the host waits for the second. Three sides alternate: radix off
 * (rmlp_forward, threshold 0), on (rmlp_forward, attention in full space) and on with attention in
 * compact space (rmlp_forward_compact: compact rows out, read through the plan's scatter when
 * compared). Each side has its planner, so its plan stays valid between its runs. Attention's
 * share is measured in separate runs through the attention callback, which brackets the library's
 * built-in attention (rmlp_attention or rmlp_attention_compact) with events per layer, so the
 * timed runs are the plain forward a host would call. The tool links its own static CUDA runtime
 * (the library's is hidden inside it); streams, events and device pointers are the driver's
 * handles, valid in both. Built without CUDA, the two entry points print that and fail.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "cli.h"

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
             (rmlp_build_flags() & RMLP_BUILD_FLASHINFER) ? "FlashInfer for f16/bf16 head_dim 64/128"
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
    rmlp_context *ctx;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    attn_timer timer;
    rmlp_planner *planner[BENCH_SIDES]; /* each side's plan stays valid between its runs */
    rmlp_plan plan[BENCH_SIDES];        /* each side's last plan */
    /* Device memory in the model's dtype: (n_tokens, hidden) batch rows; the compact side's
     * (n_tokens + RMLP_MAX_PAD_MULTIPLE, hidden), of which it writes n_compact_padded rows. */
    void *out[BENCH_SIDES];
    size_t hidden, elem_bytes, out_bytes; /* out_bytes: of the batch rows */
} bench_dev;

static const char *const SIDE_NAMES[BENCH_SIDES] = {"off", "on", "compact"};

typedef struct sample {
    double fwd_ms, attn_ms, plan_us, set_plan_us;
    uint32_t n_compact;
    bool use_radix;
} sample;

/* Plan, set_plan and forward of one side (BENCH_OFF: threshold 0; BENCH_ON, BENCH_COMPACT:
 * `threshold`), the forward timed with events; instrumented: through timed_attention, summing its
 * per-layer times into attn_ms. */
static int run_side(bench_dev *d, const workload *w, double threshold, int side, int instrumented, sample *s) {
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = side == BENCH_OFF ? 0.0 : threshold;
    rmlp_plan *plan = &d->plan[side];
    if (!rmlp_ok(rmlp_plan_build(d->planner[side], w->input_ids, w->position_ids, w->n_tokens, w->cu_seqlens,
                                 w->n_seqs, &params, plan),
                 "rmlp_plan_build"))
        return -1;
    double t0 = cli_now_ms();
    if (!rmlp_ok(rmlp_context_set_plan(d->ctx, plan), "rmlp_context_set_plan")) return -1;
    s->set_plan_us = (cli_now_ms() - t0) * 1e3;
    s->plan_us = plan->build_us;
    s->n_compact = plan->n_compact;
    s->use_radix = plan->use_radix;
    d->timer.error = cudaSuccess;
    rmlp_attention_fn attention = instrumented ? timed_attention : NULL;
    bool compact = side == BENCH_COMPACT;
    if (!cuda_ok(cudaEventRecord(d->start, d->stream), "cudaEventRecord") ||
        !rmlp_ok(compact ? rmlp_forward_compact(d->ctx, plan, attention, &d->timer, d->out[side])
                         : rmlp_forward(d->ctx, plan, attention, &d->timer, d->out[side]),
                 compact ? "rmlp_forward_compact" : "rmlp_forward") ||
        !cuda_ok(cudaEventRecord(d->stop, d->stream), "cudaEventRecord") ||
        !cuda_ok(cudaEventSynchronize(d->stop), "the forward (cudaEventSynchronize)") ||
        !cuda_ok(d->timer.error, "cudaEventRecord (attention timer)"))
        return -1;
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

/* max |off - x| and ||off - x|| / ||off|| of the off output against side `side`'s, both copied back
 * (the compact side's rows read through its plan's scatter); NaN anywhere (an unwritten row keeps
 * the 0xFF poison, NaN in every dtype) makes both NaN and says so. */
static int compare_outputs(bench_dev *d, rmlp_dtype dt, int side, double *max_abs_diff, double *rel_norm_diff) {
    bool compact = side == BENCH_COMPACT;
    size_t hsz = d->hidden, n = d->out_bytes / d->elem_bytes;
    size_t bytes = compact ? (size_t)d->plan[side].n_compact_padded * hsz * d->elem_bytes : d->out_bytes;
    unsigned char *host[2] = {malloc(d->out_bytes ? d->out_bytes : 1), malloc(bytes ? bytes : 1)};
    int rc = -1;
    if (host[0] == NULL || host[1] == NULL) {
        fprintf(stderr, "radixmlp bench: allocating %zu + %zu bytes for the outputs failed\n", d->out_bytes, bytes);
    } else if (cuda_ok(cudaMemcpyAsync(host[0], d->out[BENCH_OFF], d->out_bytes, cudaMemcpyDeviceToHost, d->stream),
                       "cudaMemcpyAsync (off output)") &&
               cuda_ok(cudaMemcpyAsync(host[1], d->out[side], bytes, cudaMemcpyDeviceToHost, d->stream),
                       side == BENCH_ON ? "cudaMemcpyAsync (on output)" : "cudaMemcpyAsync (compact output)") &&
               cuda_ok(cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (outputs)")) {
        double max_abs = 0.0, sq_diff = 0.0, sq_ref = 0.0;
        size_t nans = 0;
        for (size_t i = 0; i < n; i++) {
            size_t j = compact ? (size_t)d->plan[side].scatter[i / hsz] * hsz + i % hsz : i;
            double a = element(host[0], i, dt), b = element(host[1], j, dt), diff = fabs(a - b);
            if (isnan(a) || isnan(b)) {
                nans++;
                continue;
            }
            max_abs = diff > max_abs ? diff : max_abs;
            sq_diff += diff * diff;
            sq_ref += a * a;
        }
        if (nans)
            fprintf(stderr, "radixmlp bench: %zu of %zu output values are NaN (off or %s)\n", nans, n,
                    SIDE_NAMES[side]);
        *max_abs_diff = nans ? NAN : max_abs;
        *rel_norm_diff = nans ? NAN : sq_ref > 0.0 ? sqrt(sq_diff / sq_ref) : sqrt(sq_diff);
        rc = 0;
    }
    free(host[0]), free(host[1]);
    return rc;
}

static void bench_dev_free(bench_dev *d) {
    if (d->stream) cudaStreamSynchronize(d->stream);
    rmlp_context_free(d->ctx);
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

static int bench_dev_init(bench_dev *d, const rmlp_model *model, const rmlp_model_config *cfg, rmlp_dtype dt,
                          size_t n_tokens) {
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
    if (!rmlp_ok(rmlp_context_create(model, n_tokens, &d->ctx), "rmlp_context_create") ||
        !rmlp_ok(rmlp_context_set_stream(d->ctx, d->stream), "rmlp_context_set_stream"))
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

int bench_cuda_case(const rmlp_model *model, rmlp_dtype dtype, const workload *w, double threshold,
                    unsigned long repeat, float *pooled_last, float *pooled_mean, bench_cuda_result *r) {
    rmlp_model_config cfg;
    if (!rmlp_ok(rmlp_model_get_config(model, &cfg), "rmlp_model_get_config")) return -1;
    *r = (bench_cuda_result){.repeat = repeat};
    bench_dev d = {0};
    /* (BENCH_SIDES, 3, repeat): per side, its forward ms, plan build us and set_plan us of each round */
    double *samples = malloc(3 * BENCH_SIDES * (repeat ? repeat : 1) * sizeof(double));
    int rc = samples != NULL && bench_dev_init(&d, model, &cfg, dtype, w->n_tokens) == 0 ? 0 : -1;
    sample s[BENCH_SIDES];
    /* Warm-up: first launches, cuBLAS's heuristics, the weights into L2 where they fit. Then the
     * sides take turns, so a slow spell (clocks, a neighbour) hits all alike. */
    for (unsigned long i = 0; rc == 0 && i <= repeat; i++) {
        for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
            rc = run_side(&d, w, threshold, side, 0, &s[side]);
            double *fwd = samples + 3 * side * repeat, *plan = fwd + repeat, *set = plan + repeat;
            if (rc == 0 && i > 0)
                fwd[i - 1] = s[side].fwd_ms, plan[i - 1] = s[side].plan_us, set[i - 1] = s[side].set_plan_us;
        }
    }
    for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
        double *fwd = samples + 3 * side * repeat, *plan = fwd + repeat, *set = plan + repeat;
        r->ms[side] = cli_sort_median(fwd, repeat), r->ms_min[side] = fwd[0]; /* sorted */
        r->plan_us[side] = cli_sort_median(plan, repeat);
        r->set_plan_us[side] = cli_sort_median(set, repeat);
    }
    if (rc == 0) r->n_compact = s[BENCH_ON].n_compact, r->use_radix = s[BENCH_ON].use_radix;
    /* Attention's share: up to 2 instrumented rounds, the one with the fastest forward kept per side. */
    for (unsigned long i = 0; rc == 0 && i < (repeat < 2 ? repeat : 2); i++) {
        for (int side = 0; rc == 0 && side < BENCH_SIDES; side++) {
            rc = run_side(&d, w, threshold, side, 1, &s[side]);
            if (rc == 0 && (i == 0 || s[side].fwd_ms < r->fwd_ms[side]))
                r->fwd_ms[side] = s[side].fwd_ms, r->attn_ms[side] = s[side].attn_ms;
        }
    }
    for (int side = BENCH_ON; rc == 0 && side < BENCH_SIDES; side++)
        rc = compare_outputs(&d, dtype, side, &r->max_abs_diff[side], &r->rel_norm_diff[side]);
    if (rc == 0 && pooled_last)
        rc = rmlp_ok(rmlp_context_pool(d.ctx, d.out[BENCH_ON], w->n_tokens, w->cu_seqlens, w->n_seqs,
                                       RMLP_POOLING_LAST, false, pooled_last),
                     "rmlp_context_pool (last)")
                 ? 0
                 : -1;
    if (rc == 0 && pooled_mean)
        rc = rmlp_ok(rmlp_context_pool(d.ctx, d.out[BENCH_ON], w->n_tokens, w->cu_seqlens, w->n_seqs,
                                       RMLP_POOLING_MEAN, false, pooled_mean),
                     "rmlp_context_pool (mean)")
                 ? 0
                 : -1;
    bench_dev_free(&d);
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
                    unsigned long repeat, float *pooled_last, float *pooled_mean, bench_cuda_result *r) {
    (void)model, (void)dtype, (void)w, (void)threshold, (void)repeat, (void)pooled_last, (void)pooled_mean, (void)r;
    return bench_cuda_available(NULL, 0);
}

#endif
