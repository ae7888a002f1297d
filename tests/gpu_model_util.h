/*
 * gpu_model_util.h: what the tests of the whole model on a CUDA device share (test_gpu_model.c:
 * forwards against the CPU path and transformers; test_gpu_bind.c: models bound from device
 * pointers; test_gpu_graph.c: errors on the device and CUDA graphs): the test's stream, device
 * buffers poisoned and downloaded, comparisons under each dtype's tolerance (test_gpu_model.c
 * explains them), plans, a fixture's CPU reference, a model loaded on the device, a forward.
 * Included by one translation unit per test executable.
 */
#ifndef RMLP_TESTS_GPU_MODEL_UTIL_H
#define RMLP_TESTS_GPU_MODEL_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi/src/model_internal.h"
#include "gpu/flashinfer.h"
#include "gpu/runner.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "bench/tiny_model.h"
#include "fixtures.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define SCORE_A 3u
#define SCORE_B 7u

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
/* F32: max |got - ref| <= rel * max |ref|; F16/BF16: ||got - ref|| <= rel * ||ref||. */
static const double TOLS[] = {1e-4, 5e-3, 4e-2};
#define FIXTURE_ATOL 1e-4 /* F32 against transformers, as the CPU path */

static cudaStream_t stream; /* non-blocking: the library must order everything on the stream it is given */

/* ---- device buffers ------------------------------------------------------------------------- */

/* Every byte 0xFF: NaN in F32, F16 and BF16. */
static inline void poison(void *d, size_t bytes) { CUDA_MUST(cudaMemsetAsync(d, 0xFF, bytes, stream)); }

/* n values of dtype dt at device address d, as f32, after the stream has drained. */
static inline float *download(const void *d, size_t n, rmlp_dtype dt) {
    CUDA_MUST(cudaStreamSynchronize(stream));
    return download_as(d, n, dt);
}

/* ---- comparisons ---------------------------------------------------------------------------- */

typedef struct error_stats {
    double max_abs, max_ref, rel_norm;
    size_t nan_at; /* index of the first NaN/inf in got, or SIZE_MAX */
} error_stats;

static inline error_stats measure(const float *got, const float *ref, size_t n) {
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
static inline int expect_close(const char *what, int di, const float *got, const float *ref, size_t n) {
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
static inline void expect_identical(const char *what, const float *a, const float *b, size_t n, int di, int must) {
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += bits_of(a[i]) != bits_of(b[i]);
    printf("  %-58s %s: %s (%zu of %zu differ)\n", what, DTYPE_NAMES[di], differ ? "differs" : "bit-identical", differ,
           n);
    if (must) CHECK(differ == 0, "%s %s: %zu of %zu values differ, want bit-identical", what, DTYPE_NAMES[di], differ, n);
    else expect_close(what, di, a, b, n);
}

static inline void expect_status(rmlp_status got, rmlp_status want, const char *substring, const char *what) {
    const char *msg = rmlp_last_error();
    CHECK(got == want && strstr(msg, substring) != NULL, "%s: status %d (want %d), message \"%s\" (want \"%s\")", what,
          got, want, msg, substring);
}

/* ---- batches and plans ---------------------------------------------------------------------- */

/* Radix off (identity) or on (always, padded to 8), as a plan the test owns. */
static inline rmlp_plan make_plan(rmlp_planner *planner, const fixture_batch *b, int radix) {
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
static inline rmlp_context *cuda_context(rmlp_model *model, size_t max_tokens) {
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create(model, max_tokens, &ctx);
    if (status == RMLP_OK) status = rmlp_context_set_stream(ctx, stream);
    if (CHECK(status == RMLP_OK, "context: %s", rmlp_last_error())) return ctx;
    rmlp_context_free(ctx);
    return NULL;
}

/* *model = the checkpoint at path loaded on the device in dt (NULL if that failed); returns a
 * context for max_tokens on the test's stream, NULL on failure. */
static inline rmlp_context *load_cuda(const char *path, rmlp_dtype dt, size_t max_tokens, rmlp_model **model) {
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

/* A whole forward's entry point (rmlp_forward, rmlp_forward_compact, rmlp_forward_last). */
typedef rmlp_status (*forward_fn)(rmlp_context *, const rmlp_plan *, rmlp_attention_fn, void *, void *);

/* set_plan + `forward` (named `name` in failures) into a poisoned device buffer of `rows` rows of
 * `hidden`; returns the download (NULL on failure). */
static inline float *device_run(rmlp_context *ctx, const rmlp_plan *plan, forward_fn forward, const char *name,
                                size_t rows, size_t hidden, rmlp_dtype dt, void *d_out, rmlp_attention_fn attention,
                                void *user_data, const char *what) {
    size_t n = rows * hidden;
    poison(d_out, n * elem_size(dt));
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = forward(ctx, plan, attention, user_data, d_out);
    if (!CHECK(status == RMLP_OK, "%s: %s: %s", what, name, rmlp_last_error())) return NULL;
    cudaError_t error = cudaStreamSynchronize(stream);
    if (!CHECK(error == cudaSuccess, "%s: the forward's kernels failed: %s", what, cudaGetErrorString(error)))
        exit((tu_summary(), 1)); /* a device fault poisons the CUDA context: nothing after it is meaningful */
    return download(d_out, n, dt);
}

/* set_plan + rmlp_forward (batch rows) into a poisoned device buffer; the download (NULL on failure). */
static inline float *device_forward(rmlp_context *ctx, const reference *r, const rmlp_plan *plan, rmlp_dtype dt, void *d_out,
                             rmlp_attention_fn attention, void *user_data, const char *what) {
    return device_run(ctx, plan, rmlp_forward, "forward", plan->n_tokens, r->cfg.hidden_size, dt, d_out, attention,
                      user_data, what);
}

static inline rmlp_status failing_attention(void *user_data, const rmlp_attention_args *a) {
    (void)user_data, (void)a;
    return RMLP_ERR_CUDA;
}

/* The CPU path's outputs (radix off and on), the plans, and transformers' when there are some. */
static inline int reference_setup(const char *path, const char *expected_path, fixture_batch b, reference *r) {
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

static inline void reference_free(reference *r) {
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
static inline int fixture_reference(const char *dir, const char *name, int with_expected, char *path, reference *r) {
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

/* The start of every test of the model on the device: its one argument (FIXTURES_DIR), a device
 * (else SKIP and 77: returned, for main to return), device 0's name, the test's stream. Returns
 * -1 to go on. */
static inline int gpu_model_begin(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
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
    return -1;
}

/* The end of such a test: the stream destroyed, the summary's exit code. */
static inline int gpu_model_end(void) {
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}

#endif
