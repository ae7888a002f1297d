/*
 * test_gpu_model.c: the whole model on a CUDA device (RMLP_DEVICE_CUDA) against the CPU path
 * and the Hugging Face transformers fixtures, in F32, F16 and BF16. For every fixture in
 * integration_tests/fixtures, a random model whose sizes are not multiples of 8 and one of
 * head_dim 64 (whose built-in attention in F16/BF16 is FlashInfer's, gpu/flashinfer.h):
 *   - which attention kernel the built-in attention takes, in both layouts;
 *   - rmlp_forward, radix off and on, against the CPU path's rmlp_forward and (F32) against
 *     transformers' last_hidden; radix on against radix off on the device;
 *   - rmlp_context_pool (last, mean, normalised) and rmlp_score_pair on the device output;
 *   - the per-layer entry points with rmlp_attention between them, and rmlp_forward with a host
 *     attention callback (which also checks what the callback is handed);
 * then: models bound from device pointers (separate, stacked and back-to-back tensors) against
 * the loaded model; error statuses (no plan set, another plan, a plan rebuilt in place, host
 * pointers, a capturing stream, bad bindings) with the context still working afterwards; and a
 * forward captured in a CUDA graph, replayed, and replayed again after setting another plan of
 * the same shape; and attention in compact space (rmlp_forward_compact, the compact per-layer
 * calls and callback, read-outs through scatter, a compact context's graph).
 *
 * Every device output is poisoned (0xFF bytes: NaN in every dtype) before each run; NaN anywhere
 * fails. Tolerances (see TOLS): F32 within 1e-4 of the largest reference value (the GPU does the
 * CPU's fp32 arithmetic in another order, GEMMs in fp32 without TF32), and 1e-4 absolute against
 * transformers as the CPU path is held to. F16/BF16 by relative norm error ||got - ref|| / ||ref||:
 * every weight and every stored activation is rounded to the dtype (relative error up to 2^-11
 * for F16, 2^-8 for BF16, half of that on average), about ten stored tensors per layer, 2-3
 * layers plus the final norm; such roundings add like a random walk, expected ~1.5e-3 (F16) and
 * ~6e-3 (BF16), so the bounds 5e-3 and 2e-2 leave a factor ~3, while a real fault (a wrong row,
 * head, bias, residual or rounding of a whole tensor) gives errors of 1e-1 or more. The errors
 * measured are printed on every run. Without a CUDA device it prints SKIP and exits 77.
 * Usage: test_gpu_model FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ffi/src/model_internal.h"
#include "../gpu/flashinfer.h"
#include "../gpu/runner.h"
#include "../model/checkpoint.h"
#include "../model/safetensors.h"
#include "../tools/tiny_model.h"
#include "fixtures.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define SCORE_A 3u
#define SCORE_B 7u

static const char *const FIXTURES[] = FIXTURE_NAMES;
static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
/* F32: max |got - ref| <= rel * max |ref|; F16/BF16: ||got - ref|| <= rel * ||ref||. */
static const double TOLS[] = {1e-4, 5e-3, 2e-2};
#define FIXTURE_ATOL 1e-4 /* F32 against transformers, as the CPU path */

static cudaStream_t stream; /* non-blocking: the library must order everything on the stream it is given */

/* ---- device buffers ------------------------------------------------------------------------- */

/* Every byte 0xFF: NaN in F32, F16 and BF16. */
static void poison(void *d, size_t bytes) { CUDA_MUST(cudaMemsetAsync(d, 0xFF, bytes, stream)); }

/* n values of dtype dt at device address d, as f32, after the stream has drained. */
static float *download(const void *d, size_t n, rmlp_dtype dt) {
    CUDA_MUST(cudaStreamSynchronize(stream));
    return download_as(d, n, dt);
}

/* ---- comparisons ---------------------------------------------------------------------------- */

typedef struct error_stats {
    double max_abs, max_ref, rel_norm;
    size_t nan_at; /* index of the first NaN/inf in got, or SIZE_MAX */
} error_stats;

static error_stats measure(const float *got, const float *ref, size_t n) {
    error_stats e = {0, 0, 0, SIZE_MAX};
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) && e.nan_at == SIZE_MAX) e.nan_at = i;
        double d = fabs((double)got[i] - (double)ref[i]);
        if (d > e.max_abs) e.max_abs = d;
        if (fabs(ref[i]) > e.max_ref) e.max_ref = fabs(ref[i]);
        err2 += d * d;
        ref2 += (double)ref[i] * ref[i];
    }
    e.rel_norm = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    return e;
}

/* got vs ref under the dtype's tolerance; prints the measured error. Returns 1 when it passed. */
static int expect_close(const char *what, int di, const float *got, const float *ref, size_t n) {
    error_stats e = measure(got, ref, n);
    printf("  %-58s %s: max abs %.3g (max |ref| %.3g), rel norm %.3g\n", what, DTYPE_NAMES[di], e.max_abs, e.max_ref,
           e.rel_norm);
    if (!CHECK(e.nan_at == SIZE_MAX, "%s %s: element %zu is %g (unwritten or NaN)", what, DTYPE_NAMES[di],
               e.nan_at, e.nan_at == SIZE_MAX ? 0.0 : (double)got[e.nan_at]))
        return 0;
    if (di == 0)
        return CHECK(e.max_abs <= TOLS[0] * e.max_ref, "%s f32: max abs error %.3g > %.0e * max |ref| %.3g", what,
                     e.max_abs, TOLS[0], e.max_ref);
    return CHECK(e.rel_norm <= TOLS[di], "%s %s: relative norm error %.3g > %.0e", what, DTYPE_NAMES[di], e.rel_norm,
                 TOLS[di]);
}

/* Bitwise equality of two downloads (reported, and checked when `must`). */
static void expect_identical(const char *what, const float *a, const float *b, size_t n, int di, int must) {
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += bits_of(a[i]) != bits_of(b[i]);
    printf("  %-58s %s: %s (%zu of %zu differ)\n", what, DTYPE_NAMES[di], differ ? "differs" : "bit-identical", differ,
           n);
    if (must) CHECK(differ == 0, "%s %s: %zu of %zu values differ, want bit-identical", what, DTYPE_NAMES[di], differ, n);
    else expect_close(what, di, a, b, n);
}

static void expect_status(rmlp_status got, rmlp_status want, const char *substring, const char *what) {
    const char *msg = rmlp_last_error();
    CHECK(got == want && strstr(msg, substring) != NULL, "%s: status %d (want %d), message \"%s\" (want \"%s\")", what,
          got, want, msg, substring);
}

/* ---- batches and plans ---------------------------------------------------------------------- */

/* Radix off (identity) or on (always, padded to 8), as a plan the test owns. */
static rmlp_plan make_plan(rmlp_planner *planner, const fixture_batch *b, int radix) {
    rmlp_plan_params params = tu_params(radix ? 1.0 : 0.0, radix ? 8 : 0);
    rmlp_plan plan;
    memset(&plan, 0, sizeof plan);
    rmlp_status status = rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &plan);
    CHECK(status == RMLP_OK, "plan radix=%d: %s", radix, rmlp_last_error());
    return tu_plan_copy(&plan);
}

/* ---- a model under test --------------------------------------------------------------------- */

typedef struct reference {
    rmlp_model_config cfg;
    fixture_batch b;
    float *cpu_out[2];  /* (n_tokens, hidden) CPU rmlp_forward, radix off / on */
    float *cpu_logits;  /* (n_seqs, 2) CPU rmlp_score_pair on cpu_out[1], when the model has an LM head */
    st_file *expected;  /* transformers' outputs, NULL for the random model */
    rmlp_plan plans[2]; /* radix off / on */
} reference;

/* A context on the test's stream. */
static rmlp_context *cuda_context(rmlp_model *model, size_t max_tokens) {
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create(model, max_tokens, &ctx);
    if (status == RMLP_OK) status = rmlp_context_set_stream(ctx, stream);
    if (CHECK(status == RMLP_OK, "context: %s", rmlp_last_error())) return ctx;
    rmlp_context_free(ctx);
    return NULL;
}

/* *model = the checkpoint at path loaded on the device in dt (NULL if that failed); returns a
 * context for max_tokens on the test's stream, NULL on failure. */
static rmlp_context *load_cuda(const char *path, rmlp_dtype dt, size_t max_tokens, rmlp_model **model) {
    rmlp_model_params params = rmlp_model_default_params();
    params.device = RMLP_DEVICE_CUDA;
    params.dtype = dt;
    *model = NULL;
    rmlp_status status = rmlp_model_load(path, &params, model);
    if (!CHECK(status == RMLP_OK && *model != NULL, "load %s on CUDA in dtype %d: status %d: %s", path, dt, status,
               rmlp_last_error()))
        return NULL;
    return cuda_context(*model, max_tokens);
}

/* set_plan + rmlp_forward into a poisoned device buffer; returns the download (NULL on failure). */
static float *device_forward(rmlp_context *ctx, const reference *r, const rmlp_plan *plan, rmlp_dtype dt, void *d_out,
                             rmlp_attention_fn attention, void *user_data, const char *what) {
    size_t n = plan->n_tokens * (size_t)r->cfg.hidden_size;
    poison(d_out, n * elem_size(dt));
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = rmlp_forward(ctx, plan, attention, user_data, d_out);
    if (!CHECK(status == RMLP_OK, "%s: forward: %s", what, rmlp_last_error())) return NULL;
    cudaError_t error = cudaStreamSynchronize(stream);
    if (!CHECK(error == cudaSuccess, "%s: the forward's kernels failed: %s", what, cudaGetErrorString(error)))
        exit((tu_summary(), 1)); /* a device fault poisons the CUDA context: nothing after it is meaningful */
    return download(d_out, n, dt);
}

/* What the host callback saw. */
typedef struct callback_state {
    rmlp_context *ctx;
    rmlp_dtype dtype;
    uint32_t calls, max_seqlen;
    int bad; /* first problem found, 0 if none */
    char why[200];
} callback_state;

static int is_device_pointer(const void *p) {
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice;
}

/* The host's attention: checks what it is handed, then runs the library's own attention. */
static rmlp_status host_attention(void *user_data, const rmlp_attention_args *a) {
    callback_state *st = user_data;
    if (st->bad == 0) {
        if (a->stream != (void *)stream)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->stream %p, want the context's %p", a->stream,
                                  (void *)stream);
        else if (a->dtype != st->dtype)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->dtype %d, want %d", a->dtype, st->dtype);
        else if (a->max_seqlen != st->max_seqlen)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->max_seqlen %u, want %u", a->max_seqlen, st->max_seqlen);
        else if (a->layer != st->calls)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->layer %u at call %u", a->layer, st->calls);
        else if (!is_device_pointer(a->q) || !is_device_pointer(a->k) || !is_device_pointer(a->v) ||
                 !is_device_pointer(a->out) || !is_device_pointer(a->cu_seqlens_device))
            st->bad = 1, snprintf(st->why, sizeof st->why, "q/k/v/out/cu_seqlens_device are not all device memory");
    }
    st->calls++;
    return rmlp_attention(st->ctx, a);
}

static rmlp_status failing_attention(void *user_data, const rmlp_attention_args *a) {
    (void)user_data, (void)a;
    return RMLP_ERR_CUDA;
}

/* embed, pre-attention, rmlp_attention, post-attention per layer, final norm: a host keeping attention. */
static float *per_layer(rmlp_context *ctx, const reference *r, const rmlp_plan *plan, rmlp_dtype dt) {
    const rmlp_model_config *c = &r->cfg;
    size_t es = elem_size(dt), nt = plan->n_tokens, nc = plan->n_compact_padded, h = c->hidden_size;
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    void *hidden = dev_alloc(nc * h * es), *q = dev_alloc(nt * qd * es), *k = dev_alloc(nt * kvd * es);
    void *v = dev_alloc(nt * kvd * es), *attn = dev_alloc(nt * qd * es), *out = dev_alloc(nt * h * es);
    poison(hidden, nc * h * es), poison(q, nt * qd * es), poison(k, nt * kvd * es), poison(v, nt * kvd * es);
    poison(attn, nt * qd * es), poison(out, nt * h * es);
    rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs, .n_heads = c->num_attention_heads,
                                .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim,
                                .scale = 1.0f / sqrtf((float)c->head_dim), .dtype = dt, .cu_seqlens = plan->cu_seqlens,
                                .out = attn, .cu_seqlens_device = NULL};
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = fixture_run_per_layer(ctx, plan, c->num_hidden_layers, &args, hidden, q, k, v, out, false);
    float *got = NULL;
    if (CHECK(status == RMLP_OK, "per-layer entry points: %s", rmlp_last_error())) got = download(out, nt * h, dt);
    cudaFree(hidden), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(attn), cudaFree(out);
    return got;
}

/* Compact rows (n_compact_padded, hidden) of a download, read through scatter into batch rows. */
static float *batch_rows(const float *compact, const rmlp_plan *plan, size_t hsz) {
    float *rows = tu_xmalloc(plan->n_tokens * hsz * sizeof(float));
    for (size_t i = 0; i < plan->n_tokens; i++)
        memcpy(rows + i * hsz, compact + (size_t)plan->scatter[i] * hsz, hsz * sizeof(float));
    return rows;
}

/* The host's attention in the compact layout: checks that it gets device arrays, then runs the
 * library's compact attention on them. */
static rmlp_status host_compact_attention(void *user_data, const rmlp_attention_args *a) {
    callback_state *st = user_data;
    if (st->bad == 0 && (a->layout != RMLP_ATTENTION_COMPACT || !is_device_pointer(a->qo_indptr_device) ||
                         !is_device_pointer(a->kv_indptr_device) || !is_device_pointer(a->kv_indices_device) ||
                         !is_device_pointer(a->q) || !is_device_pointer(a->out)))
        st->bad = 1, snprintf(st->why, sizeof st->why, "layout %d, or host pointers among q/out/layout arrays",
                              a->layout);
    st->calls++;
    return rmlp_attention_compact(st->ctx, a);
}

/* Attention in compact space on the device: rmlp_forward_compact against the CPU path and the
 * device's full-space forward (`full`, may be NULL), the compact per-layer calls, a compact-layout
 * callback, and the read-outs through scatter. */
static void test_compact_dtype(rmlp_context *ctx, const reference *r, int radix, rmlp_dtype dt, int di,
                               const char *name, const float *full) {
    const rmlp_plan *plan = &r->plans[radix];
    const rmlp_model_config *c = &r->cfg;
    size_t hsz = c->hidden_size, nc = plan->n_compact_padded, n = plan->n_tokens * hsz, es = elem_size(dt);
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    char what[160];
    void *d_out = dev_alloc(nc * hsz * es);
    poison(d_out, nc * hsz * es);
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = rmlp_forward_compact(ctx, plan, NULL, NULL, d_out);
    float *compact = NULL, *rows = NULL;
    if (CHECK(status == RMLP_OK, "%s: forward_compact radix=%d: %s", name, radix, rmlp_last_error())) {
        compact = download(d_out, nc * hsz, dt);
        rows = batch_rows(compact, plan, hsz);
        snprintf(what, sizeof what, "%s: compact attention radix %s vs CPU", name, radix ? "on" : "off");
        expect_close(what, di, rows, r->cpu_out[radix], n);
        if (full != NULL) {
            snprintf(what, sizeof what, "%s: compact vs full attention radix %s", name, radix ? "on" : "off");
            expect_close(what, di, rows, full, n);
        }
    }
    if (compact != NULL && radix) { /* read-outs through scatter, against the CPU's of the full output */
        float *pooled = tu_xmalloc(plan->n_seqs * hsz * sizeof(float)), *want = tu_xmalloc(plan->n_seqs * hsz * 4);
        CHECK(rmlp_context_pool_compact(ctx, plan, d_out, RMLP_POOLING_MEAN, false, pooled) == RMLP_OK &&
                  rmlp_pool(r->cpu_out[1], plan->n_tokens, (uint32_t)hsz, plan->cu_seqlens, plan->n_seqs,
                            RMLP_POOLING_MEAN, false, want) == RMLP_OK,
              "%s: pool_compact: %s", name, rmlp_last_error());
        expect_close("rmlp_context_pool_compact mean", di, pooled, want, plan->n_seqs * hsz);
        free(pooled), free(want);
        /* the compact per-layer calls with rmlp_attention_compact between them */
        void *hidden = dev_alloc(nc * hsz * es), *q = dev_alloc(nc * qd * es), *k = dev_alloc(nc * kvd * es);
        void *v = dev_alloc(nc * kvd * es), *attn = dev_alloc(nc * qd * es), *out = dev_alloc(nc * hsz * es);
        poison(out, nc * hsz * es), poison(attn, nc * qd * es);
        rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs,
                                    .n_heads = c->num_attention_heads, .n_kv_heads = c->num_key_value_heads,
                                    .head_dim = c->head_dim, .scale = 1.0f / sqrtf((float)c->head_dim), .dtype = dt,
                                    .cu_seqlens = plan->cu_seqlens, .out = attn};
        status = fixture_run_per_layer(ctx, plan, c->num_hidden_layers, &args, hidden, q, k, v, out, true);
        if (CHECK(status == RMLP_OK, "%s: compact per-layer: %s", name, rmlp_last_error())) {
            float *pl = download(out, plan->n_compact * hsz, dt);
            expect_identical("compact per-layer calls + rmlp_attention_compact", pl, compact, plan->n_compact * hsz, di,
                             0);
            free(pl);
        }
        cudaFree(hidden), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(attn), cudaFree(out);
        callback_state st = {.ctx = ctx, .dtype = dt};
        poison(d_out, nc * hsz * es);
        status = rmlp_forward_compact(ctx, plan, host_compact_attention, &st, d_out);
        if (CHECK(status == RMLP_OK && st.bad == 0, "%s: compact callback: %s %s", name, rmlp_last_error(), st.why)) {
            float *cb = download(d_out, plan->n_compact * hsz, dt);
            expect_identical("rmlp_forward_compact with a compact callback", cb, compact, plan->n_compact * hsz, di, 0);
            free(cb);
        }
    }
    free(compact), free(rows);
    cudaFree(d_out);
}

/* Pooling and scores of the device output d_out (radix on) against the CPU path's. */
static void check_readouts(rmlp_context *ctx, const reference *r, const void *d_out, int di, const char *name) {
    const fixture_batch *b = &r->b;
    size_t h = r->cfg.hidden_size, ns = b->n_seqs;
    float *pooled = tu_xmalloc(ns * h * sizeof(float)), *want = tu_xmalloc(ns * h * sizeof(float));
    static const rmlp_pooling poolings[] = {RMLP_POOLING_LAST, RMLP_POOLING_MEAN, RMLP_POOLING_FIRST};
    static const char *const pooling_names[] = {"last", "mean", "first"};
    char what[160];
    for (size_t p = 0; p < COUNT(poolings); p++)
        for (int normalize = 0; normalize < 2; normalize++) {
            for (size_t i = 0; i < ns * h; i++) pooled[i] = NAN;
            rmlp_status status =
                rmlp_context_pool(ctx, d_out, b->n_tokens, b->cu, ns, poolings[p], normalize != 0, pooled);
            snprintf(what, sizeof what, "%s: rmlp_context_pool %s%s", name, pooling_names[p],
                     normalize ? " normalized" : "");
            if (!CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) continue;
            CHECK(rmlp_pool(r->cpu_out[1], b->n_tokens, (uint32_t)h, b->cu, ns, poolings[p], normalize != 0, want) ==
                      RMLP_OK,
                  "cpu pool: %s", rmlp_last_error());
            expect_close(what, di, pooled, want, ns * h);
        }
    float *logits = tu_xmalloc(2 * ns * sizeof(float)), *prob = tu_xmalloc(ns * sizeof(float));
    for (size_t i = 0; i < 2 * ns; i++) logits[i] = NAN;
    rmlp_status status = rmlp_score_pair(ctx, d_out, b->n_tokens, b->cu, ns, SCORE_A, SCORE_B, logits, prob);
    snprintf(what, sizeof what, "%s: rmlp_score_pair logits", name);
    if (!r->cfg.has_lm_head) {
        expect_status(status, RMLP_ERR_UNSUPPORTED, "no LM head", "score without an LM head on CUDA");
    } else if (CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) {
        expect_close(what, di, logits, r->cpu_logits, 2 * ns);
        for (size_t s = 0; s < ns; s++)
            CHECK(fabsf(prob[s] - 1.0f / (1.0f + expf(logits[2 * s + 1] - logits[2 * s]))) <= 1e-6f,
                  "%s: prob_a[%zu]=%g is not the softmax of its logits (%g, %g)", what, s, prob[s], logits[2 * s],
                  logits[2 * s + 1]);
    }
    free(pooled), free(want), free(logits), free(prob);
}

/* The CPU path's outputs (radix off and on), the plans, and transformers' when there are some. */
static int reference_setup(const char *path, const char *expected_path, fixture_batch b, reference *r) {
    memset(r, 0, sizeof *r);
    r->b = b;
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_status status = rmlp_model_load(path, NULL, &model);
    if (status == RMLP_OK) status = rmlp_model_get_config(model, &r->cfg);
    if (status == RMLP_OK) status = rmlp_context_create(model, b.n_tokens, &ctx);
    if (status == RMLP_OK) status = rmlp_planner_create(&planner);
    if (status == RMLP_OK && expected_path != NULL) status = st_open(expected_path, &r->expected);
    int ok = CHECK(status == RMLP_OK, "%s: CPU reference setup: %s", path, rmlp_last_error());
    size_t n = b.n_tokens * (size_t)r->cfg.hidden_size;
    for (int radix = 0; ok && radix < 2; radix++) {
        r->plans[radix] = make_plan(planner, &b, radix);
        r->cpu_out[radix] = tu_xmalloc(n * sizeof(float));
        ok = CHECK(rmlp_forward(ctx, &r->plans[radix], NULL, NULL, r->cpu_out[radix]) == RMLP_OK,
                   "%s: CPU forward: %s", path, rmlp_last_error());
    }
    if (ok && r->cfg.has_lm_head) {
        float *prob = tu_xmalloc(b.n_seqs * sizeof(float));
        r->cpu_logits = tu_xmalloc(2 * b.n_seqs * sizeof(float));
        ok = CHECK(rmlp_score_pair(ctx, r->cpu_out[1], b.n_tokens, b.cu, b.n_seqs, SCORE_A, SCORE_B, r->cpu_logits,
                                   prob) == RMLP_OK,
                   "%s: CPU score: %s", path, rmlp_last_error());
        free(prob);
    }
    if (ok) ok = CHECK(r->plans[1].use_radix && r->plans[1].n_compact < b.n_tokens, "%s: the batch shares nothing",
                       path);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    return ok;
}

static void reference_free(reference *r) {
    for (int radix = 0; radix < 2; radix++) {
        free(r->cpu_out[radix]);
        if (r->plans[radix].scatter != NULL) tu_plan_copy_free(&r->plans[radix]);
    }
    free(r->cpu_logits);
    st_close(r->expected);
    fixture_batch_free(&r->b);
}

#define PATH_LEN 1024

/* reference_setup on fixture `name` in `dir` (with transformers' outputs when with_expected);
 * path (PATH_LEN) receives the fixture's folder. Returns 1, or 0 with nothing left to free. */
static int fixture_reference(const char *dir, const char *name, int with_expected, char *path, reference *r) {
    char file[PATH_LEN + 64], why[PATH_LEN + 200];
    fixture_batch b;
    snprintf(path, PATH_LEN, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/batch.json", path);
    if (!CHECK(fixture_read_batch(file, &b, why, sizeof why) == 0, "%s", why)) return 0;
    snprintf(file, sizeof file, "%s/expected.safetensors", path);
    if (reference_setup(path, with_expected ? file : NULL, b, r)) return 1;
    reference_free(r);
    return 0;
}

/* Attention arguments over `plan` with cu as its offsets; the buffers are d (only pointers are looked at). */
static rmlp_attention_args kernel_args(const rmlp_plan *plan, const uint32_t *cu, const rmlp_model_config *c,
                                       rmlp_dtype dt, void *d) {
    return (rmlp_attention_args){.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs, .n_heads = c->num_attention_heads,
                                 .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim, .scale = 1.0f,
                                 .dtype = dt, .cu_seqlens = cu, .q = d, .k = d, .v = d, .out = d,
                                 .n_compact = plan->n_compact, .qo_indptr = plan->qo_indptr, .kv_indptr = cu,
                                 .kv_indices = plan->scatter};
}

/* The built-in attention of ctx takes FlashInfer's kernel exactly where it should (gpu/flashinfer.h:
 * f16/bf16, head_dim 64 or 128, a build with FlashInfer, batches it tiles by 128 rows), in both
 * layouts, on `plan` once set (internal: the context's CUDA half); and not after the plan's offsets
 * change in place (a planner rebuilding it with the same counts) until it is set again. */
static void check_attention_kernel(rmlp_context *ctx, const rmlp_plan *plan, const rmlp_model_config *c,
                                   rmlp_dtype dt, const char *name) {
    if (!CHECK(rmlp_context_set_plan(ctx, plan) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error())) return;
    void *d = dev_alloc(256); /* aligned: only the pointers are looked at */
    size_t group = c->num_attention_heads / c->num_key_value_heads;
    int fi = gpu_flashinfer_supports(dt, c->num_attention_heads, c->num_key_value_heads, c->head_dim);
    for (int compact = 0; compact < 2; compact++) {
        rmlp_attention_args a = kernel_args(plan, plan->cu_seqlens, c, dt, d);
        int want = fi && flashinfer_tiles_128(compact ? plan->n_compact : plan->n_tokens, plan->n_seqs, group);
        int got = gpu_attention_uses_flashinfer(ctx->gpu, &a, compact);
        CHECK(got == want, "%s: %s attention (radix %s) takes %s, want %s", name, compact ? "compact" : "full",
              plan->use_radix ? "on" : "off", got ? "FlashInfer" : "the reference kernel",
              want ? "FlashInfer" : "the reference kernel");
        printf("  %-58s %s\n", compact ? "attention kernel, compact" : "attention kernel, full space",
               got ? "FlashInfer" : "reference");
    }
    uint32_t *cu = tu_xmalloc((plan->n_seqs + 1) * sizeof *cu);
    memcpy(cu, plan->cu_seqlens, (plan->n_seqs + 1) * sizeof *cu);
    rmlp_plan moved = *plan;
    moved.cu_seqlens = cu;
    if (plan->n_seqs >= 2 && cu[2] > cu[0] &&
        CHECK(rmlp_context_set_plan(ctx, &moved) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error())) {
        cu[1] = cu[1] > cu[0] ? cu[1] - 1 : cu[1] + 1; /* two lengths change, the counts stay */
        for (int compact = 0; compact < 2; compact++) {
            rmlp_attention_args a = kernel_args(&moved, cu, c, dt, d);
            CHECK(!gpu_attention_uses_flashinfer(ctx->gpu, &a, compact), "%s: %s attention takes FlashInfer's work "
                  "split of the offsets set before they changed in place", name, compact ? "compact" : "full");
        }
        CHECK(rmlp_context_set_plan(ctx, plan) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error());
    }
    free(cu);
    cudaFree(d);
}

/* Everything a loaded CUDA model must do, in one dtype. */
static void test_model_dtype(const char *path, const char *name, const reference *r, int di) {
    rmlp_dtype dt = DTYPES[di];
    rmlp_model *model = NULL;
    rmlp_context *ctx = load_cuda(path, dt, r->b.n_tokens, &model);
    if (ctx == NULL) {
        rmlp_model_free(model);
        return;
    }
    rmlp_model_config cfg;
    CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK && cfg.has_lm_head == r->cfg.has_lm_head &&
              cfg.hidden_size == r->cfg.hidden_size,
          "%s: the CUDA model's config differs from the CPU model's", name);
    size_t n = r->b.n_tokens * (size_t)r->cfg.hidden_size;
    void *d_out = dev_alloc(n * elem_size(dt));
    char what[160];
    float *got[2] = {NULL, NULL};
    for (int radix = 0; radix < 2; radix++) {
        snprintf(what, sizeof what, "%s: forward radix %s vs CPU", name, radix ? "on" : "off");
        got[radix] = device_forward(ctx, r, &r->plans[radix], dt, d_out, NULL, NULL, what);
        if (got[radix] == NULL) continue;
        expect_close(what, di, got[radix], r->cpu_out[radix], n);
        const st_tensor *want = r->expected ? st_find(r->expected, "last_hidden") : NULL;
        if (di == 0 && want != NULL && CHECK(want->nbytes == n * sizeof(float), "%s: last_hidden size", name)) {
            error_stats e = measure(got[radix], want->data, n);
            CHECK(e.max_abs <= FIXTURE_ATOL, "%s radix=%d f32: max abs error %.3g against transformers > %.0e", name,
                  radix, e.max_abs, FIXTURE_ATOL);
            printf("  %-58s f32: max abs %.3g\n", radix ? "vs transformers (radix on)" : "vs transformers (radix off)",
                   e.max_abs);
        }
    }
    if (got[0] && got[1]) {
        snprintf(what, sizeof what, "%s: radix on vs off on the device", name);
        expect_close(what, di, got[1], got[0], n);
    }
    if (got[1]) {
        /* d_out holds the radix-on output again after this forward (same plan, same result). */
        float *again = device_forward(ctx, r, &r->plans[1], dt, d_out, NULL, NULL, "repeat");
        if (again) expect_identical("forward repeated", got[1], again, n, di, 1);
        free(again);
        check_readouts(ctx, r, d_out, di, name);

        callback_state st = {.ctx = ctx, .dtype = dt};
        for (uint32_t s = 0; s < r->b.n_seqs; s++)
            if (r->b.cu[s + 1] - r->b.cu[s] > st.max_seqlen) st.max_seqlen = r->b.cu[s + 1] - r->b.cu[s];
        float *cb = device_forward(ctx, r, &r->plans[1], dt, d_out, host_attention, &st, "callback");
        CHECK(st.bad == 0, "%s: the attention callback was handed: %s", name, st.why);
        CHECK(st.calls == r->cfg.num_hidden_layers, "%s: callback called %u times for %u layers", name, st.calls,
              r->cfg.num_hidden_layers);
        if (cb) expect_identical("forward with the host attention callback", cb, got[1], n, di, 1);
        free(cb);
        float *pl = per_layer(ctx, r, &r->plans[1], dt);
        if (pl) expect_identical("per-layer entry points + rmlp_attention", pl, got[1], n, di, 0);
        free(pl);
    }
    for (int radix = 0; radix < 2; radix++) check_attention_kernel(ctx, &r->plans[radix], &r->cfg, dt, name);
    for (int radix = 0; radix < 2; radix++) test_compact_dtype(ctx, r, radix, dt, di, name, got[radix]);
    free(got[0]), free(got[1]);
    cudaFree(d_out);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

static void test_fixture(const char *dir, const char *name) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, name, 1, path, &r)) return;
    printf("%s: N=%zu N'=%u\n", name, r.b.n_tokens, r.plans[1].n_compact);
    for (int di = 0; di < (int)COUNT(DTYPES); di++) test_model_dtype(path, name, &r, di);
    reference_free(&r);
}

/* A random Qwen3-shaped model (tools/tiny_model.c) on 733 tokens in 19 sequences sharing a 16-token
 * prefix: test_model_dtype in each dtype. */
static void test_random_model(const rmlp_model_config *config, const char *name) {
    rmlp_model_config cfg = *config;
    char dir[] = "/tmp/rmlp_gpu_random_XXXXXX", file[96];
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 11) == 0, "writing the %s", name)) return;
    /* 19 sequences of 20-56 tokens (the last fills up to 733), all starting with the same 16. */
    uint64_t rng = 0x0DDu;
    fixture_batch b = {tu_xmalloc(733 * 4), tu_xmalloc(733 * 4), tu_xmalloc(20 * 4), 733, 19};
    uint32_t prefix[16];
    for (int i = 0; i < 16; i++) prefix[i] = tu_rand_range(&rng, 1, 100);
    b.cu[0] = 0;
    for (uint32_t s = 0; s < 19; s++) {
        b.cu[s + 1] = s < 18 ? b.cu[s] + 20 + (s * 13) % 37 : 733;
        for (uint32_t i = b.cu[s]; i < b.cu[s + 1]; i++) {
            uint32_t t = i - b.cu[s];
            b.ids[i] = t < 16 ? prefix[t] : tu_rand_range(&rng, 1, 100);
            b.pos[i] = t;
        }
    }
    reference r;
    if (reference_setup(dir, NULL, b, &r)) {
        printf("%s: N=%zu N'=%u\n", name, r.b.n_tokens, r.plans[1].n_compact);
        for (int di = 0; di < (int)COUNT(DTYPES); di++) test_model_dtype(dir, name, &r, di);
    }
    reference_free(&r);
    snprintf(file, sizeof file, "%s/model.safetensors", dir), remove(file);
    snprintf(file, sizeof file, "%s/config.json", dir), remove(file);
    remove(dir);
}

/* ---- models bound from device pointers ------------------------------------------------------ */

typedef struct binding_set {
    rmlp_weight_binding t[512];
    char names[512][128];
    void *allocs[512];
    size_t n, n_allocs;
} binding_set;

/* The checkpoint tensor `name` as f32 (NULL when absent); its element count in *count. */
static float *read_tensor(const checkpoint *ck, const char *name, size_t *count) {
    const st_tensor *t = checkpoint_find(ck, name);
    if (t == NULL) return NULL;
    size_t n = (size_t)(t->nbytes / (t->dtype == RMLP_DTYPE_F32 ? 4 : 2));
    float *x = tu_xmalloc(n * sizeof(float));
    dtype_to_f32(t->data, t->dtype, n, x);
    *count = n;
    return x;
}

static void *set_alloc(binding_set *set, size_t bytes) {
    void *d = dev_alloc(bytes);
    set->allocs[set->n_allocs++] = d;
    return d;
}

static void bind_one(binding_set *set, const char *name, const void *data, rmlp_dtype dt, uint64_t rows, uint64_t cols) {
    rmlp_weight_binding *b = &set->t[set->n];
    snprintf(set->names[set->n], sizeof set->names[0], "%s", name);
    b->name = set->names[set->n];
    b->data = data;
    b->dtype = dt;
    b->ndim = cols ? 2 : 1;
    b->shape[0] = rows;
    b->shape[1] = cols;
    set->n++;
}

/* Uploads the named checkpoint tensors (n of them, each rows[i] x cols) back to back into one
 * allocation, binding them under names[i] separately, or (stacked_name) as one stacked tensor. */
static void bind_group(binding_set *set, const checkpoint *ck, const char *const *ckpt_names,
                       const char *const *bind_names, const uint64_t *rows, uint64_t cols, size_t n,
                       const char *stacked_name, int one_allocation, rmlp_dtype dt) {
    size_t total = 0, es = elem_size(dt), per = cols ? cols : 1;
    for (size_t i = 0; i < n; i++) total += rows[i] * per;
    char *block = one_allocation ? set_alloc(set, total * es) : NULL;
    uint64_t stacked_rows = 0;
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t count = 0;
        float *x = read_tensor(ck, ckpt_names[i], &count);
        if (!CHECK(x != NULL && count == rows[i] * per, "checkpoint tensor %s", ckpt_names[i])) {
            free(x);
            return;
        }
        char *dst = one_allocation ? block + at * es : set_alloc(set, count * es);
        upload_as(dst, x, count, dt);
        if (stacked_name == NULL) bind_one(set, bind_names[i], dst, dt, rows[i], cols);
        stacked_rows += rows[i];
        at += count;
        free(x);
    }
    if (stacked_name != NULL) bind_one(set, stacked_name, block, dt, stacked_rows, cols);
}

/* mode 0: every tensor separate, checkpoint names; 1: Q/K/V and gate/up stacked (TEI's layout),
 * names without "model."; 2: separate names, but Q/K/V and gate/up back to back in memory. */
static void make_bindings(binding_set *set, const char *path, const rmlp_model_config *c, int mode, rmlp_dtype dt) {
    memset(set, 0, sizeof *set);
    checkpoint *ck = NULL;
    if (!CHECK(checkpoint_open(path, &ck) == RMLP_OK, "%s: %s", path, rmlp_last_error())) return;
    const char *p = checkpoint_find(ck, "model.embed_tokens.weight") ? "model." : "";
    const char *bp = mode == 1 ? "" : p; /* binding names' prefix */
    uint64_t h = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim;
    uint64_t qd = c->num_attention_heads * hd, kvd = c->num_key_value_heads * hd;
    char cn[4][128], bn[4][128], stacked[128];
    const char *cnp[4] = {cn[0], cn[1], cn[2], cn[3]}, *bnp[4] = {bn[0], bn[1], bn[2], bn[3]};
#define NAMES(i, fmt, ...) (snprintf(cn[i], 128, "%s" fmt, p, __VA_ARGS__), snprintf(bn[i], 128, "%s" fmt, bp, __VA_ARGS__))
    uint64_t one[1];
    NAMES(0, "%s", "embed_tokens.weight");
    one[0] = c->vocab_size;
    bind_group(set, ck, cnp, bnp, one, h, 1, NULL, 0, dt);
    NAMES(0, "%s", "norm.weight");
    one[0] = h;
    bind_group(set, ck, cnp, bnp, one, 0, 1, NULL, 0, dt);
    if (checkpoint_find(ck, "lm_head.weight")) {
        static const char *const lm[1] = {"lm_head.weight"};
        one[0] = c->vocab_size;
        bind_group(set, ck, lm, lm, one, h, 1, NULL, 0, dt);
    }
    for (uint32_t l = 0; l < c->num_hidden_layers; l++) {
        static const char *const singles[] = {"input_layernorm.weight",  "post_attention_layernorm.weight",
                                              "self_attn.o_proj.weight", "mlp.down_proj.weight",
                                              "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                              "self_attn.o_proj.bias",   "mlp.down_proj.bias"};
        const uint64_t single_rows[] = {h, h, h, h, hd, hd, h, h}, single_cols[] = {0, 0, qd, inter, 0, 0, 0, 0};
        for (size_t i = 0; i < COUNT(singles); i++) {
            if ((i == 4 || i == 5) && !c->qk_norm) continue;
            if ((i == 6 && !c->o_proj_bias) || (i == 7 && !c->mlp_bias)) continue;
            NAMES(0, "layers.%u.%s", l, singles[i]);
            one[0] = single_rows[i];
            bind_group(set, ck, cnp, bnp, one, single_cols[i], 1, NULL, 0, dt);
        }
        const uint64_t qkv_rows[3] = {qd, kvd, kvd}, gu_rows[2] = {inter, inter};
        static const char *const qkv[3] = {"q", "k", "v"}, *const gu[2] = {"gate", "up"};
        for (int i = 0; i < 3; i++) NAMES(i, "layers.%u.self_attn.%s_proj.weight", l, qkv[i]);
        snprintf(stacked, sizeof stacked, "layers.%u.self_attn.qkv_proj.weight", l);
        bind_group(set, ck, cnp, bnp, qkv_rows, h, 3, mode == 1 ? stacked : NULL, mode != 0, dt);
        if (c->attention_bias) {
            for (int i = 0; i < 3; i++) NAMES(i, "layers.%u.self_attn.%s_proj.bias", l, qkv[i]);
            snprintf(stacked, sizeof stacked, "layers.%u.self_attn.qkv_proj.bias", l);
            bind_group(set, ck, cnp, bnp, qkv_rows, 0, 3, mode == 1 ? stacked : NULL, mode == 1, dt);
        }
        for (int i = 0; i < 2; i++) NAMES(i, "layers.%u.mlp.%s_proj.weight", l, gu[i]);
        snprintf(stacked, sizeof stacked, "layers.%u.mlp.gate_up_proj.weight", l);
        bind_group(set, ck, cnp, bnp, gu_rows, h, 2, mode == 1 ? stacked : NULL, mode != 0, dt);
        if (c->mlp_bias) {
            for (int i = 0; i < 2; i++) NAMES(i, "layers.%u.mlp.%s_proj.bias", l, gu[i]);
            snprintf(stacked, sizeof stacked, "layers.%u.mlp.gate_up_proj.bias", l);
            bind_group(set, ck, cnp, bnp, gu_rows, 0, 2, mode == 1 ? stacked : NULL, mode == 1, dt);
        }
    }
#undef NAMES
    checkpoint_close(ck);
    /* cudaMemcpy from pageable memory may return before its DMA lands; the forwards run on a
     * non-blocking stream that does not wait for the legacy stream's copies. */
    CUDA_MUST(cudaDeviceSynchronize());
}

static void free_bindings(binding_set *set) {
    for (size_t i = 0; i < set->n_allocs; i++) cudaFree(set->allocs[i]);
    set->n_allocs = set->n = 0;
}

static rmlp_status bind(const rmlp_model_config *c, const binding_set *set, rmlp_dtype dt, rmlp_model **out) {
    rmlp_model_params params = rmlp_model_default_params();
    params.device = RMLP_DEVICE_CUDA;
    params.dtype = dt;
    *out = NULL;
    return rmlp_model_bind_cuda(c, set->t, set->n, &params, out);
}

/* Bad bindings: each a status naming the tensor, no model. */
static void test_bind_errors(const char *path, const rmlp_model_config *c) {
    static binding_set set;
    make_bindings(&set, path, c, 0, RMLP_DTYPE_F32);
    if (set.n < 4) return;
    rmlp_model *model = (rmlp_model *)1;
    rmlp_weight_binding saved = set.t[1];
    char name[128];

    snprintf(name, sizeof name, "%s", set.t[1].name);
    size_t len = strlen(name);
    if (len + 1 < sizeof set.names[1]) set.names[1][len] = 'x', set.names[1][len + 1] = '\0'; /* "...weightx" */
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "is not a tensor of this model",
                  "bind: unknown name");
    CHECK(model == NULL, "out is NULL after a failed bind");
    snprintf(set.names[1], sizeof set.names[1], "%s", name);

    set.t[1].shape[0] += 1;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "has shape", "bind: wrong shape");
    set.t[1] = saved;
    set.t[1].dtype = RMLP_DTYPE_BF16;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "has dtype", "bind: wrong dtype");
    set.t[1] = saved;
    float *host = tu_xmalloc(4096);
    set.t[1].data = host;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_INVALID_ARGUMENT, "is not device memory",
                  "bind: a host pointer");
    set.t[1] = saved;
    free(host);
    set.t[set.n] = set.t[1];
    set.n++;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "binds the same tensor", "bind: duplicate");
    set.n--;
    /* the final norm (bound second) missing */
    rmlp_weight_binding last = set.t[set.n - 1];
    set.t[1] = last;
    set.n--;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "missing tensor", "bind: a missing tensor");
    set.n++;
    set.t[1] = saved;
    set.t[set.n - 1] = last;
    rmlp_model_params params = rmlp_model_default_params();
    expect_status(rmlp_model_bind_cuda(c, set.t, set.n, &params, &model), RMLP_ERR_INVALID_ARGUMENT,
                  "needs RMLP_DEVICE_CUDA", "bind with device CPU");
    /* and the set as it is binds */
    CHECK(bind(c, &set, RMLP_DTYPE_F32, &model) == RMLP_OK, "bind after the errors: %s", rmlp_last_error());
    rmlp_model_free(model);
    free_bindings(&set);
}

static void test_bind(const char *dir, const char *name) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, name, 0, path, &r)) return;
    static const char *const modes[] = {"separate tensors", "stacked qkv_proj/gate_up_proj", "back-to-back tensors"};
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    for (int di = 0; di < (int)COUNT(DTYPES); di += 2) { /* F32 and BF16 */
        rmlp_dtype dt = DTYPES[di];
        rmlp_model *loaded = NULL;
        rmlp_context *lctx = load_cuda(path, dt, r.b.n_tokens, &loaded);
        void *d_out = dev_alloc(n * elem_size(dt));
        float *want = lctx ? device_forward(lctx, &r, &r.plans[1], dt, d_out, NULL, NULL, "loaded") : NULL;
        for (int mode = 0; want != NULL && mode < 3; mode++) {
            static binding_set set;
            make_bindings(&set, path, &r.cfg, mode, dt);
            rmlp_model *model = NULL;
            rmlp_status status = bind(&r.cfg, &set, dt, &model);
            char what[160];
            snprintf(what, sizeof what, "%s: bound (%s) vs loaded", name, modes[mode]);
            if (CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) {
                rmlp_model_config bc;
                CHECK(rmlp_model_get_config(model, &bc) == RMLP_OK && bc.has_lm_head == r.cfg.has_lm_head,
                      "%s: has_lm_head %d, want %d", what, bc.has_lm_head, r.cfg.has_lm_head);
                rmlp_context *ctx = cuda_context(model, r.b.n_tokens);
                float *got = ctx ? device_forward(ctx, &r, &r.plans[1], dt, d_out, NULL, NULL, what) : NULL;
                /* same weights, same GEMM shapes: identical; separate Q/K/V run 3 GEMMs: close */
                int same_shapes = mode == 1 || (mode == 2 && !r.cfg.attention_bias && !r.cfg.mlp_bias);
                if (got) expect_identical(what, got, want, n, di, same_shapes);
                free(got);
                rmlp_context_free(ctx);
                rmlp_model_free(model);
            }
            free_bindings(&set);
        }
        free(want);
        cudaFree(d_out);
        rmlp_context_free(lctx);
        rmlp_model_free(loaded);
    }
    if (strcmp(name, "qwen3_tiny") == 0) test_bind_errors(path, &r.cfg);
    reference_free(&r);
}

/* ---- errors on the device ------------------------------------------------------------------- */

static void test_errors(const char *dir) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, "qwen3_tiny", 0, path, &r)) return;
    rmlp_model_params params = rmlp_model_default_params();
    rmlp_model *model = (rmlp_model *)1;
    params.device = RMLP_DEVICE_CUDA;
    params.device_index = 99;
    expect_status(rmlp_model_load(path, &params, &model), RMLP_ERR_NO_DEVICE, "device_index=99", "device_index 99");
    CHECK(model == NULL, "out is NULL after a failed load");
    params.device_index = 0;
    params.dtype = 7;
    expect_status(rmlp_model_load(path, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "params->dtype=7", "dtype 7");

    const rmlp_dtype dt = RMLP_DTYPE_F32;
    rmlp_context *ctx = load_cuda(path, dt, r.b.n_tokens, &model);
    rmlp_planner *planner = NULL;
    if (ctx == NULL || !CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner")) goto done;
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    void *d_out = dev_alloc(n * 4);
    const rmlp_plan *on = &r.plans[1], *off = &r.plans[0];

    expect_status(rmlp_forward(ctx, on, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "no plan is set",
                  "forward before rmlp_context_set_plan");
    CHECK(rmlp_context_set_plan(ctx, on) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    expect_status(rmlp_forward(ctx, off, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "is not the one set",
                  "forward with another plan");
    expect_status(rmlp_layer_pre_attention(ctx, 0, off, d_out, d_out, d_out, d_out), RMLP_ERR_INVALID_ARGUMENT,
                  "is not the one set", "pre-attention with another plan");
    float *host_out = tu_xmalloc(n * 4);
    expect_status(rmlp_forward(ctx, on, NULL, NULL, host_out), RMLP_ERR_INVALID_ARGUMENT, "is not device memory",
                  "forward into host memory");
    expect_status(rmlp_forward(ctx, on, failing_attention, NULL, d_out), RMLP_ERR_CUDA,
                  "host attention failed at layer 0", "a failing host attention");

    /* A plan rebuilt in place by its planner after set_plan: identity plans of the same batch with
     * other token ids have the same counts (and, the planner reusing its arrays, the same pointers). */
    rmlp_plan_params identity = tu_params(0.0, 0);
    rmlp_plan live;
    CHECK(rmlp_plan_build(planner, r.b.ids, r.b.pos, r.b.n_tokens, r.b.cu, r.b.n_seqs, &identity, &live) == RMLP_OK,
          "plan");
    CHECK(rmlp_context_set_plan(ctx, &live) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    uint32_t *other_ids = tu_xmalloc(r.b.n_tokens * sizeof(uint32_t));
    for (size_t i = 0; i < r.b.n_tokens; i++) other_ids[i] = (r.b.ids[i] + 1) % r.cfg.vocab_size;
    CHECK(rmlp_plan_build(planner, other_ids, r.b.pos, r.b.n_tokens, r.b.cu, r.b.n_seqs, &identity, &live) == RMLP_OK,
          "plan");
    expect_status(rmlp_forward(ctx, &live, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "rmlp_context_set_plan",
                  "forward with a plan rebuilt after set_plan");
    printf("  plan rebuilt in place: %s\n", rmlp_last_error());
    free(other_ids);

    /* Attention arguments the device cannot take. */
    CHECK(rmlp_context_set_plan(ctx, on) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    uint32_t *cu_copy = tu_xmalloc((r.b.n_seqs + 1) * sizeof(uint32_t));
    memcpy(cu_copy, on->cu_seqlens, (r.b.n_seqs + 1) * sizeof(uint32_t));
    size_t qd = (size_t)r.cfg.num_attention_heads * r.cfg.head_dim;
    void *q = dev_alloc(r.b.n_tokens * qd * 4);
    rmlp_attention_args args = {.n_tokens = on->n_tokens, .n_seqs = on->n_seqs, .n_heads = r.cfg.num_attention_heads,
                                .n_kv_heads = r.cfg.num_key_value_heads, .head_dim = r.cfg.head_dim, .scale = 0.25f,
                                .dtype = RMLP_DTYPE_BF16, .cu_seqlens = on->cu_seqlens, .q = q, .k = q, .v = q,
                                .out = d_out};
    expect_status(rmlp_attention(ctx, &args), RMLP_ERR_UNSUPPORTED, "CUDA model's dtype", "attention dtype");
    args.dtype = dt;
    args.cu_seqlens = cu_copy;
    expect_status(rmlp_attention(ctx, &args), RMLP_ERR_INVALID_ARGUMENT, "cu_seqlens_device is NULL",
                  "attention without device offsets");

    /* A stream that is capturing: the calls that wait on the host refuse, nothing is enqueued. */
    cudaGraph_t graph = NULL;
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    expect_status(rmlp_context_set_plan(ctx, on), RMLP_ERR_INVALID_ARGUMENT, "capturing", "set_plan while capturing");
    float *pooled = tu_xmalloc(r.b.n_seqs * r.cfg.hidden_size * sizeof(float));
    expect_status(rmlp_context_pool(ctx, d_out, r.b.n_tokens, r.b.cu, r.b.n_seqs, RMLP_POOLING_LAST, false, pooled),
                  RMLP_ERR_INVALID_ARGUMENT, "capturing", "pool while capturing");
    free(pooled);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    CHECK(end == cudaSuccess, "the capture survived the refused calls: %s", cudaGetErrorString(end));
    if (graph) cudaGraphDestroy(graph);

    /* The context still works. */
    float *got = device_forward(ctx, &r, on, dt, d_out, NULL, NULL, "after the errors");
    if (got) expect_close("qwen3_tiny: forward after the errors vs CPU", 0, got, r.cpu_out[1], n);
    free(got), free(host_out), free(cu_copy);
    cudaFree(q), cudaFree(d_out);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    reference_free(&r);
}

/* ---- CUDA graphs ---------------------------------------------------------------------------- */

/* Captures rmlp_forward of `plan` into a graph; replays it into d_out. NULL exec on failure. */
static cudaGraphExec_t capture_forward(rmlp_context *ctx, const rmlp_plan *plan, void *d_out, const char *what) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_MUST(cudaStreamSynchronize(stream));
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmlp_status status = rmlp_forward(ctx, plan, NULL, NULL, d_out);
    char message[600];
    snprintf(message, sizeof message, "%s", rmlp_last_error());
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (CHECK(status == RMLP_OK && end == cudaSuccess, "%s: forward under capture: status %d (%s), end capture: %s",
              what, status, message, cudaGetErrorString(end))) {
        cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
        if (!CHECK(e == cudaSuccess, "%s: instantiate: %s", what, cudaGetErrorString(e))) exec = NULL;
    }
    if (graph) cudaGraphDestroy(graph);
    return exec;
}

static float *replay(cudaGraphExec_t exec, void *d_out, size_t n, rmlp_dtype dt) {
    poison(d_out, n * elem_size(dt));
    CUDA_MUST(cudaGraphLaunch(exec, stream));
    return download(d_out, n, dt);
}

/* Two sequences of lens[0] and lens[1] tokens whose first `share` tokens are the same, positions
 * from 0, ids below vocab. */
static fixture_batch two_sequences(const uint32_t lens[2], uint32_t share, uint32_t vocab) {
    size_t n = lens[0] + lens[1];
    fixture_batch b = {tu_xmalloc(n * 4), tu_xmalloc(n * 4), tu_xmalloc(3 * 4), n, 2};
    b.cu[0] = 0, b.cu[1] = lens[0], b.cu[2] = (uint32_t)n;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t t = 0; t < lens[s]; t++) {
            b.ids[b.cu[s] + t] = (t < share ? 5 + 7 * t : 5 + 7 * t + 11 * (s + 1)) % vocab;
            b.pos[b.cu[s] + t] = t;
        }
    return b;
}

/* Captures rmlp_forward of `captured` into a graph, checks its replay against the direct forward,
 * then (when `next` is given: a plan of the same counts) sets `next` and checks the replay against
 * next's direct forward, and that the two batches' outputs differ enough for that to mean something. */
static void graph_case(rmlp_context *ctx, const reference *r, const rmlp_plan *captured, const rmlp_plan *next,
                       rmlp_dtype dt, int di, void *d_out, const char *what) {
    CHECK(next == NULL || (next->n_tokens == captured->n_tokens && next->n_seqs == captured->n_seqs &&
                           next->n_compact == captured->n_compact &&
                           next->n_compact_padded == captured->n_compact_padded),
          "%s: the test's two plans must have the same counts", what);
    size_t n = captured->n_tokens * (size_t)r->cfg.hidden_size;
    char line[200];
    float *direct = device_forward(ctx, r, captured, dt, d_out, NULL, NULL, what);
    float *direct_next = next ? device_forward(ctx, r, next, dt, d_out, NULL, NULL, what) : NULL;
    CHECK(rmlp_context_set_plan(ctx, captured) == RMLP_OK, "%s: set_plan: %s", what, rmlp_last_error());
    cudaGraphExec_t exec = capture_forward(ctx, captured, d_out, what);
    if (exec != NULL && direct != NULL) {
        float *got = replay(exec, d_out, n, dt);
        snprintf(line, sizeof line, "%s: replay vs direct", what);
        expect_identical(line, got, direct, n, di, 0);
        free(got);
        if (next != NULL && direct_next != NULL) {
            CHECK(rmlp_context_set_plan(ctx, next) == RMLP_OK, "%s: set_plan of the next batch: %s", what,
                  rmlp_last_error());
            got = replay(exec, d_out, n, dt);
            snprintf(line, sizeof line, "%s: replay, next plan set, vs its direct", what);
            expect_identical(line, got, direct_next, n, di, 0);
            error_stats e = measure(direct, direct_next, n);
            CHECK(e.rel_norm > 0.1, "%s: the two batches give nearly the same output (rel %.3g): the replay check "
                  "would not see a stale plan", what, e.rel_norm);
            free(got);
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    free(direct), free(direct_next);
}

/* CUDA graphs: a forward captured and replayed (radix on); replayed after setting another plan of
 * the same counts: other token ids (identity plans), and longer sequences than at capture, whose
 * rows a launch sized from the captured lengths would skip (identity and radix plans: 2 x 24
 * tokens sharing 12 captured, 36 + 12 sharing 12 replayed; N = 48, N' = 36 in both). */
static void test_graph(const char *dir) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, "qwen3_tiny", 0, path, &r)) return;
    /* Batch B: batch A's shape with other token ids, so its identity plan has A's shapes. */
    fixture_batch other = {tu_xmalloc(r.b.n_tokens * 4), tu_xmalloc(r.b.n_tokens * 4),
                   tu_xmalloc((r.b.n_seqs + 1) * 4), r.b.n_tokens, r.b.n_seqs};
    for (size_t i = 0; i < r.b.n_tokens; i++) other.ids[i] = (r.b.ids[i] * 7 + 3) % r.cfg.vocab_size;
    memcpy(other.pos, r.b.pos, r.b.n_tokens * 4);
    memcpy(other.cu, r.b.cu, (r.b.n_seqs + 1) * 4);
    static const uint32_t short_lens[2] = {24, 24}, long_lens[2] = {36, 12};
    fixture_batch shorter = two_sequences(short_lens, 12, r.cfg.vocab_size);
    fixture_batch longer = two_sequences(long_lens, 12, r.cfg.vocab_size);
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner");
    rmlp_plan plan_b = make_plan(planner, &other, 0);
    rmlp_plan short_plans[2], long_plans[2];
    for (int radix = 0; radix < 2; radix++) {
        short_plans[radix] = make_plan(planner, &shorter, radix);
        long_plans[radix] = make_plan(planner, &longer, radix);
    }
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    if (n < 48 * (size_t)r.cfg.hidden_size) n = 48 * (size_t)r.cfg.hidden_size;
    for (int di = 0; di < (int)COUNT(DTYPES); di += 2) { /* F32 and BF16 */
        rmlp_dtype dt = DTYPES[di];
        rmlp_model *model = NULL;
        rmlp_context *ctx = load_cuda(path, dt, n / r.cfg.hidden_size, &model);
        void *d_out = dev_alloc(n * elem_size(dt));
        if (ctx != NULL) {
            graph_case(ctx, &r, &r.plans[1], NULL, dt, di, d_out, "graph of a forward (radix on)");
            graph_case(ctx, &r, &r.plans[0], &plan_b, dt, di, d_out, "graph of plan A (radix off), plan B set");
            graph_case(ctx, &r, &short_plans[0], &long_plans[0], dt, di, d_out,
                       "graph of 24+24 (radix off), 36+12 set");
            graph_case(ctx, &r, &short_plans[1], &long_plans[1], dt, di, d_out, "graph of 24+24 (radix on), 36+12 set");
        }
        /* rmlp_forward of a context in compact space: the graph holds its compact attention too */
        rmlp_context_params cp = rmlp_context_default_params();
        cp.attention_space = RMLP_ATTENTION_COMPACT;
        rmlp_context *compact = NULL;
        if (model != NULL && CHECK(rmlp_context_create_with_params(model, n / r.cfg.hidden_size, &cp, &compact) ==
                                           RMLP_OK &&
                                       rmlp_context_set_stream(compact, stream) == RMLP_OK,
                                   "compact context: %s", rmlp_last_error()))
            graph_case(compact, &r, &short_plans[1], &long_plans[1], dt, di, d_out,
                       "graph of 24+24 (compact attention), 36+12 set");
        rmlp_context_free(compact);
        cudaFree(d_out);
        rmlp_context_free(ctx);
        rmlp_model_free(model);
    }
    tu_plan_copy_free(&plan_b);
    for (int radix = 0; radix < 2; radix++) tu_plan_copy_free(&short_plans[radix]), tu_plan_copy_free(&long_plans[radix]);
    rmlp_planner_free(planner);
    fixture_batch_free(&other), fixture_batch_free(&shorter), fixture_batch_free(&longer);
    reference_free(&r);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gpu_model FIXTURES_DIR\n");
        return 2;
    }
    int32_t count = 0;
    rmlp_status status = rmlp_cuda_device_count(&count);
    if (status == RMLP_ERR_NO_DEVICE || status == RMLP_ERR_UNSUPPORTED) {
        printf("SKIP: no CUDA device: %s\n", rmlp_last_error());
        return SKIP_CODE;
    }
    if (!CHECK(status == RMLP_OK && count > 0, "rmlp_cuda_device_count: %s", rmlp_last_error())) return tu_summary();
    struct cudaDeviceProp prop;
    CUDA_MUST(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
    CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    /* RMLP_GPU_MODEL_QUICK=1 (for compute-sanitizer, 10-100x slower): two fixtures instead of all. */
    const char *quick = getenv("RMLP_GPU_MODEL_QUICK");
    size_t n_fixtures = quick != NULL && strcmp(quick, "1") == 0 ? 3 : COUNT(FIXTURES);
    for (size_t f = 0; f < n_fixtures; f++)
        if (n_fixtures == COUNT(FIXTURES) || f != 1) test_fixture(argv[1], FIXTURES[f]); /* quick: tiny, sharded */
    /* sizes that are not multiples of 8 (hidden 60, head_dim 12, 5 query heads over 1 KV head,
     * intermediate 100): the kernels' element paths, odd GEMM shapes, the reference attention */
    const rmlp_model_config odd = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 101, .hidden_size = 60,
                                   .intermediate_size = 100, .num_hidden_layers = 2, .num_attention_heads = 5,
                                   .num_key_value_heads = 1, .head_dim = 12, .max_position_embeddings = 1024,
                                   .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    test_random_model(&odd, "odd-sized model");
    /* 4 query heads of 64 over 2 KV heads: FlashInfer's attention in f16/bf16 (gpu/flashinfer.h) */
    rmlp_model_config fi_shaped = odd;
    fi_shaped.hidden_size = 96, fi_shaped.intermediate_size = 160, fi_shaped.num_attention_heads = 4;
    fi_shaped.num_key_value_heads = 2, fi_shaped.head_dim = 64;
    test_random_model(&fi_shaped, "model of head_dim 64");
    test_bind(argv[1], "qwen3_tiny");
    test_bind(argv[1], "qwen2_sharded");
    test_bind(argv[1], "qwen3_bf16");
    test_bind(argv[1], "llama_bias"); /* every bias: q/k/v and gate/up stacked or not, o_proj and down */
    test_errors(argv[1]);
    test_graph(argv[1]);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
