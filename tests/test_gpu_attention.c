/*
 * test_gpu_attention.c: the built-in attention of CUDA contexts as a run-time choice, end to end
 * through rmlp_forward and rmlp_forward_compact on a random Qwen3-shaped model (head_dim 128,
 * 8 query / 2 KV heads, 2 layers) and a batch of 8 sequences sharing a prefix, in f32, f16, bf16:
 *   - contexts made with gpu_attention = reference, flashinfer and auto, and with
 *     RADIX_MLP_GPU_ATTENTION=reference: the kernel and layout of every launch, as
 *     rmlp_context_gpu_stats counts them; FlashInfer's outputs against the reference kernel's
 *     within test_gpu_model's bounds (relative norm 5e-3 for f16, 4e-2 for bf16);
 *   - full space reading K/V from the compact rows through the scatter (RADIX_MLP_GPU_FULL_KV=paged,
 *     the default) against scattered copies (=scatter): bit for bit with the reference kernel (the
 *     same kernel and GEMMs), within the bounds with FlashInfer (its paged and ragged kernels);
 *   - a FlashInfer plan that fails (the test hook starves the planner's workspace):
 *     rmlp_context_set_plan returns RMLP_OK, says so once in rmlp_last_error() (not again for the
 *     next failure), the forward runs on the reference kernel (bit for bit the reference
 *     context's output), counted by reason with the message kept; the next plan runs FlashInfer;
 *   - FlashInfer required where it cannot run (f32): RMLP_ERR_UNSUPPORTED naming the parameter or
 *     the variable and why; a RADIX_MLP_GPU_* value outside its list refused naming it.
 * Without a device it prints SKIP and exits 77 (the device-free checks are test_gpu_options').
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi/src/model_internal.h"
#include "gpu/flashinfer.h"
#include "gpu/options.h"
#include "gpu/runner.h"
#include "bench/tiny_model.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define LAYERS 2u

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
static const double REL_NORM[] = {1e-4, 5e-3, 4e-2}; /* test_gpu_model's bounds; f32 never meets FlashInfer */

static cudaStream_t stream;

/* A context of `attention` (the parameter) on the test's stream, made with the variable of
 * `setting` ("NAME=VALUE", NULL for none) set. NULL, with the status in *status, when refused. */
static rmlp_context *make_context(rmlp_model *model, size_t max_tokens, rmlp_gpu_attention attention,
                                  const char *setting, rmlp_status *status) {
    char name[64] = "";
    const char *eq = setting != NULL ? strchr(setting, '=') : NULL;
    if (eq != NULL) {
        snprintf(name, sizeof name, "%.*s", (int)(eq - setting), setting);
        setenv(name, eq + 1, 1);
    }
    rmlp_context_params params = rmlp_context_default_params();
    params.gpu_attention = attention;
    rmlp_context *ctx = NULL;
    *status = rmlp_context_create_with_params(model, max_tokens, &params, &ctx);
    if (eq != NULL) unsetenv(name);
    if (*status == RMLP_OK) *status = rmlp_context_set_stream(ctx, stream);
    if (*status == RMLP_OK) return ctx;
    rmlp_context_free(ctx);
    return NULL;
}

/* The forward (full space: batch rows; compact: the n_compact compact rows) into a poisoned buffer,
 * downloaded; with `set`, the plan set first (else it is the one set). NULL on failure. */
static float *forward(rmlp_context *ctx, const rmlp_plan *plan, bool compact, bool set, rmlp_dtype dt, size_t hidden,
                      void *d_out, const char *what) {
    size_t rows = compact ? plan->n_compact_padded : plan->n_tokens;
    CUDA_MUST(cudaMemsetAsync(d_out, 0xFF, rows * hidden * elem_size(dt), stream));
    rmlp_status status = set ? rmlp_context_set_plan(ctx, plan) : RMLP_OK;
    if (status == RMLP_OK)
        status = compact ? rmlp_forward_compact(ctx, plan, NULL, NULL, d_out)
                         : rmlp_forward(ctx, plan, NULL, NULL, d_out);
    if (!CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) return NULL;
    cudaError_t error = cudaStreamSynchronize(stream);
    if (!CHECK(error == cudaSuccess, "%s: the forward's kernels failed: %s", what, cudaGetErrorString(error)))
        exit((tu_summary(), 1)); /* a device fault poisons the CUDA context: nothing after it is meaningful */
    return download_as(d_out, (compact ? plan->n_compact : plan->n_tokens) * hidden, dt);
}

/* ||got - ref|| / ||ref|| within the dtype's bound, NaN failing; prints the error and the number
 * of elements that differ in any bit. must_match: bit for bit. */
static void expect_close(const char *what, int di, const float *got, const float *ref, size_t n, bool must_match) {
    double err2 = 0, ref2 = 0;
    size_t differ = 0, nan = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        nan += isnan(got[i]) || isnan(ref[i]);
        differ += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
        err2 += d * d, ref2 += (double)ref[i] * ref[i];
    }
    double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
    printf("  %-90s rel norm %.3g, %zu of %zu differ\n", what, rel, differ, n);
    CHECK(nan == 0 && rel <= REL_NORM[di], "%s %s: %zu NaN, relative norm error %.3g > %.0e", what, DTYPE_NAMES[di],
          nan, rel, REL_NORM[di]);
    if (must_match) CHECK(differ == 0, "%s: %zu of %zu elements differ, want bit for bit", what, differ, n);
}

/* The launch counters of s minus those of before: [kernel 0 flashinfer, 1 reference][layout]. */
static void launches(const rmlp_gpu_stats *s, const rmlp_gpu_stats *before, uint64_t out[2][3]) {
    out[0][0] = s->flashinfer_full - before->flashinfer_full;
    out[0][1] = s->flashinfer_full_paged - before->flashinfer_full_paged;
    out[0][2] = s->flashinfer_compact - before->flashinfer_compact;
    out[1][0] = s->reference_full - before->reference_full;
    out[1][1] = s->reference_full_paged - before->reference_full_paged;
    out[1][2] = s->reference_compact - before->reference_compact;
}

/* A forward on ctx (forward()), and that its LAYERS launches all ran `kernel` (0 FlashInfer, 1
 * reference) in `layout` (0 full, 1 full paged, 2 compact). */
static float *counted_forward(rmlp_context *ctx, const rmlp_plan *plan, bool compact, bool set, int di, size_t hidden,
                              void *d_out, int kernel, int layout, const char *what) {
    rmlp_gpu_stats before = gpu_stats_of(ctx);
    float *out = forward(ctx, plan, compact, set, DTYPES[di], hidden, d_out, what);
    rmlp_gpu_stats after = gpu_stats_of(ctx);
    uint64_t got[2][3];
    launches(&after, &before, got);
    for (int k = 0; k < 2; k++)
        for (int l = 0; l < 3; l++)
            CHECK(got[k][l] == (k == kernel && l == layout ? LAYERS : 0),
                  "%s: %llu launches of kernel %d in layout %d, want %u of kernel %d in layout %d", what,
                  (unsigned long long)got[k][l], k, l, LAYERS, kernel, layout);
    return out;
}

/* The contexts of one dtype: reference (K/V paged or scattered), and FlashInfer where it runs, else
 * auto (the same). */
typedef struct contexts {
    rmlp_context *ref, *ref_scatter, *fast, *fast_scatter;
    rmlp_context *fa2; /* FlashInfer without its Hopper kernels (RADIX_MLP_GPU_FLASHINFER_SM90=off) */
} contexts;

/* FlashInfer's plan failing on ctx (fast, FlashInfer required): the failure said once, the forward
 * on the reference kernel bit for bit as the reference context's (ref_out), counted; FlashInfer
 * again on the next plan (bit for bit its earlier output, fast_out). */
static void test_plan_failure(rmlp_context *fast, const rmlp_plan *plan, int di, size_t hidden, void *d_out,
                              const float *ref_out, const float *fast_out) {
    char what[160];
    size_t n = plan->n_tokens * hidden;
    gpu_flashinfer_test_starve(gpu_context_flashinfer(fast->backend_ctx), 1); /* the full layout's, planned first */
    rmlp_gpu_stats before = gpu_stats_of(fast);
    rmlp_status status = rmlp_context_set_plan(fast, plan);
    const char *msg = rmlp_last_error();
    printf("  forced plan failure: status %d, \"%s\"\n", status, msg);
    CHECK(status == RMLP_OK && strstr(msg, "FlashInfer's PrefillPlan (full layout") != NULL &&
              strstr(msg, "said once per context") != NULL,
          "a failed plan: status %d, message \"%s\"", status, msg);
    snprintf(what, sizeof what, "%s full space after a failed plan vs the reference context", DTYPE_NAMES[di]);
    float *out = counted_forward(fast, plan, false, false, di, hidden, d_out, 1, 1, what);
    if (out && ref_out) expect_close(what, di, out, ref_out, n, true);
    free(out);
    rmlp_gpu_stats after = gpu_stats_of(fast);
    CHECK(after.plan_errors == before.plan_errors + 1 &&
              after.fallback_plan_error == before.fallback_plan_error + LAYERS &&
              strstr(after.first_plan_error, "FlashInfer's PrefillPlan (full layout") != NULL,
          "a failed plan: %llu plan errors, %llu fallbacks, first \"%s\"", (unsigned long long)after.plan_errors,
          (unsigned long long)after.fallback_plan_error, after.first_plan_error);
    snprintf(what, sizeof what, "%s compact space beside a failed full-space plan", DTYPE_NAMES[di]);
    free(counted_forward(fast, plan, true, false, di, hidden, d_out, 0, 2, what)); /* planned: FlashInfer's */
    gpu_flashinfer_test_starve(gpu_context_flashinfer(fast->backend_ctx), 2); /* both layouts */
    status = rmlp_context_set_plan(fast, plan);
    CHECK(status == RMLP_OK && rmlp_last_error()[0] == '\0', "a second failed plan: status %d, said again \"%s\"",
          status, rmlp_last_error());
    CHECK(gpu_stats_of(fast).plan_errors == before.plan_errors + 3, "both layouts failing: 2 more plan errors");
    snprintf(what, sizeof what, "%s compact space after both plans failed", DTYPE_NAMES[di]);
    free(counted_forward(fast, plan, true, false, di, hidden, d_out, 1, 2, what));
    snprintf(what, sizeof what, "%s full space, FlashInfer again after the failed plans", DTYPE_NAMES[di]);
    out = counted_forward(fast, plan, false, true, di, hidden, d_out, 0, 1, what);
    if (out && fast_out) expect_close(what, di, out, fast_out, n, true);
    free(out);
}

/* Where FlashInfer's Hopper kernels serve c->fast: they ran its paged layouts (full space through
 * the scatter, compact), every launch, and agree with FA2's (c->fa2) within the bounds. */
static void test_sm90(const contexts *c, const rmlp_plan *plan, int di, size_t hidden, void *d_out,
                      const float *f_paged, const float *f_compact) {
    char what[160];
    rmlp_gpu_stats s = gpu_stats_of(c->fast), t = gpu_stats_of(c->fa2);
    CHECK(s.flashinfer_sm90_full_paged >= LAYERS && s.flashinfer_sm90_compact >= LAYERS && s.sm90_fallbacks == 0,
          "%s: Hopper launches %llu full paged, %llu compact, %llu fallbacks", DTYPE_NAMES[di],
          (unsigned long long)s.flashinfer_sm90_full_paged, (unsigned long long)s.flashinfer_sm90_compact,
          (unsigned long long)s.sm90_fallbacks);
    CHECK(!t.sm90 && !t.flashinfer_sm90 && t.flashinfer, "RADIX_MLP_GPU_FLASHINFER_SM90=off: sm90 %d", t.sm90);
    snprintf(what, sizeof what, "%s full space, FlashInfer's Hopper kernels vs FA2", DTYPE_NAMES[di]);
    float *fa2 = counted_forward(c->fa2, plan, false, true, di, hidden, d_out, 0, 1, what);
    if (fa2 && f_paged) expect_close(what, di, f_paged, fa2, plan->n_tokens * hidden, false);
    free(fa2);
    snprintf(what, sizeof what, "%s compact space, FlashInfer's Hopper kernels vs FA2", DTYPE_NAMES[di]);
    fa2 = counted_forward(c->fa2, plan, true, true, di, hidden, d_out, 0, 2, what);
    if (fa2 && f_compact) expect_close(what, di, f_compact, fa2, plan->n_compact * hidden, false);
    free(fa2);
    CHECK(gpu_stats_of(c->fa2).flashinfer_sm90_full_paged == 0, "FA2 context: no Hopper launches");
}

static void test_contexts(const contexts *c, const rmlp_plan *plan, int di, size_t hidden, void *d_out, bool fi) {
    char what[160];
    const char *name = DTYPE_NAMES[di], *fast_name = fi ? "FlashInfer" : "auto (the reference kernel)";
    size_t n = plan->n_tokens * hidden;
    rmlp_gpu_stats s = gpu_stats_of(c->fast);
    CHECK(s.flashinfer == fi && s.full_kv_paged && !gpu_stats_of(c->fast_scatter).full_kv_paged &&
              gpu_stats_of(c->ref).attention == RMLP_GPU_ATTENTION_REFERENCE && !gpu_stats_of(c->ref).flashinfer,
          "%s: stats say flashinfer %d, paged %d", name, s.flashinfer, s.full_kv_paged);
    int fk = fi ? 0 : 1; /* the kernel the fast contexts run */
    snprintf(what, sizeof what, "%s full space, reference kernel, K/V paged vs scattered", name);
    float *r_paged = counted_forward(c->ref, plan, false, true, di, hidden, d_out, 1, 1, what);
    float *r_scatter = counted_forward(c->ref_scatter, plan, false, true, di, hidden, d_out, 1, 0, what);
    if (r_paged && r_scatter) expect_close(what, di, r_paged, r_scatter, n, true);
    snprintf(what, sizeof what, "%s full space, %s, K/V paged vs scattered", name, fast_name);
    float *f_paged = counted_forward(c->fast, plan, false, true, di, hidden, d_out, fk, 1, what);
    float *f_scatter = counted_forward(c->fast_scatter, plan, false, true, di, hidden, d_out, fk, 0, what);
    if (f_paged && f_scatter) expect_close(what, di, f_paged, f_scatter, n, !fi);
    snprintf(what, sizeof what, "%s full space, %s vs the reference kernel", name, fast_name);
    if (f_paged && r_paged) expect_close(what, di, f_paged, r_paged, n, !fi);
    snprintf(what, sizeof what, "%s compact space, %s vs the reference kernel", name, fast_name);
    float *r_compact = counted_forward(c->ref, plan, true, true, di, hidden, d_out, 1, 2, what);
    float *f_compact = counted_forward(c->fast, plan, true, true, di, hidden, d_out, fk, 2, what);
    if (r_compact && f_compact) expect_close(what, di, f_compact, r_compact, plan->n_compact * hidden, !fi);
    s = gpu_stats_of(c->fast);
    uint64_t fallbacks = s.fallback_plan_error + s.fallback_small_batch + s.fallback_too_large + s.fallback_unplanned +
                         s.fallback_buffers + s.fallback_launcher;
    CHECK(s.plan_errors == 0 && fallbacks == 0, "%s: %llu fallbacks counted where there were none", name,
          (unsigned long long)fallbacks);
    if (s.sm90) test_sm90(c, plan, di, hidden, d_out, f_paged, f_compact);
    else printf("  %s: no FlashInfer Hopper kernels on this device or build: their whole-forward checks skipped\n",
                name);
    if (fi) test_plan_failure(c->fast, plan, di, hidden, d_out, r_paged, f_paged);
    free(r_paged), free(r_scatter), free(f_paged), free(f_scatter), free(r_compact), free(f_compact);
}

/* The model in dtype di: reference vs FlashInfer, paged vs scattered K/V, fallbacks. */
static void test_dtype(const char *dir, int di, const rmlp_plan *plan, size_t hidden) {
    rmlp_dtype dt = DTYPES[di];
    rmlp_model_params mp = rmlp_model_default_params();
    mp.device = RMLP_DEVICE_CUDA, mp.dtype = dt;
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(dir, &mp, &model) == RMLP_OK, "load %s: %s", DTYPE_NAMES[di], rmlp_last_error()))
        return;
    size_t cap = plan->n_tokens;
    void *d_out = dev_alloc((cap + RMLP_MAX_PAD_MULTIPLE) * hidden * elem_size(dt));
    bool fi = (rmlp_build_flags() & RMLP_BUILD_FLASHINFER) && dt != RMLP_DTYPE_F32;
    rmlp_status status;
    contexts c = {
        make_context(model, cap, RMLP_GPU_ATTENTION_REFERENCE, NULL, &status),
        make_context(model, cap, RMLP_GPU_ATTENTION_REFERENCE, "RADIX_MLP_GPU_FULL_KV=scatter", &status),
        make_context(model, cap, fi ? RMLP_GPU_ATTENTION_FLASHINFER : RMLP_GPU_ATTENTION_AUTO, NULL, &status),
        make_context(model, cap, RMLP_GPU_ATTENTION_AUTO, "RADIX_MLP_GPU_FULL_KV=scatter", &status),
        make_context(model, cap, RMLP_GPU_ATTENTION_AUTO, "RADIX_MLP_GPU_FLASHINFER_SM90=off", &status),
    };
    if (CHECK(c.ref && c.ref_scatter && c.fast && c.fast_scatter && c.fa2, "%s contexts: %s", DTYPE_NAMES[di],
              rmlp_last_error()))
        test_contexts(&c, plan, di, hidden, d_out, fi);
    rmlp_context_free(c.ref), rmlp_context_free(c.ref_scatter);
    rmlp_context_free(c.fast), rmlp_context_free(c.fast_scatter), rmlp_context_free(c.fa2);
    cudaFree(d_out);
    rmlp_model_free(model);
}

/* Settings refused at creation: FlashInfer required on f32, a variable outside its list; and the
 * variable choosing the reference kernel where the parameter is auto. */
static void test_refused(const char *dir) {
    rmlp_model_params mp = rmlp_model_default_params();
    mp.device = RMLP_DEVICE_CUDA, mp.dtype = RMLP_DTYPE_F32;
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(dir, &mp, &model) == RMLP_OK, "load f32: %s", rmlp_last_error())) return;
    bool built = (rmlp_build_flags() & RMLP_BUILD_FLASHINFER) != 0;
    const char *why = built ? "its kernels here are for f16 and bf16 models" : "built without it";
    rmlp_status status;
    rmlp_context *ctx = make_context(model, 64, RMLP_GPU_ATTENTION_FLASHINFER, NULL, &status);
    const char *msg = rmlp_last_error();
    CHECK(ctx == NULL && status == RMLP_ERR_UNSUPPORTED &&
              strstr(msg, "params->gpu_attention=RMLP_GPU_ATTENTION_FLASHINFER asks for FlashInfer") != NULL &&
              strstr(msg, why) != NULL,
          "flashinfer required on f32: status %d, \"%s\"", status, msg);
    setenv("RADIX_MLP_GPU_ATTENTION", "flashinfer", 1);
    ctx = make_context(model, 64, RMLP_GPU_ATTENTION_AUTO, NULL, &status);
    msg = rmlp_last_error();
    CHECK(ctx == NULL && status == RMLP_ERR_UNSUPPORTED &&
              strstr(msg, "RADIX_MLP_GPU_ATTENTION=flashinfer asks for FlashInfer") != NULL,
          "RADIX_MLP_GPU_ATTENTION=flashinfer on f32: status %d, \"%s\"", status, msg);
    ctx = make_context(model, 64, RMLP_GPU_ATTENTION_REFERENCE, NULL, &status); /* the parameter wins */
    CHECK(ctx != NULL, "reference over the variable flashinfer: %s", rmlp_last_error());
    rmlp_context_free(ctx);
    setenv("RADIX_MLP_GPU_ATTENTION", "reference", 1);
    ctx = make_context(model, 64, RMLP_GPU_ATTENTION_AUTO, NULL, &status);
    if (CHECK(ctx != NULL, "RADIX_MLP_GPU_ATTENTION=reference: %s", rmlp_last_error())) {
        rmlp_gpu_stats s = gpu_stats_of(ctx);
        CHECK(s.attention == RMLP_GPU_ATTENTION_REFERENCE && !s.flashinfer, "the variable: attention %d", s.attention);
    }
    rmlp_context_free(ctx);
    unsetenv("RADIX_MLP_GPU_ATTENTION");
    ctx = make_context(model, 64, RMLP_GPU_ATTENTION_AUTO, "RADIX_MLP_GPU_FULL_KV=pages", &status);
    msg = rmlp_last_error();
    CHECK(ctx == NULL && status == RMLP_ERR_INVALID_ARGUMENT &&
              strstr(msg, "RADIX_MLP_GPU_FULL_KV='pages' is neither 'paged' nor 'scatter'") != NULL,
          "RADIX_MLP_GPU_FULL_KV=pages: status %d, \"%s\"", status, msg);
    rmlp_model_free(model);
}

int main(void) {
    struct cudaDeviceProp prop;
    if (!gpu_test_device(&prop)) return SKIP_CODE;
    printf("FlashInfer in the build: %s\n", (rmlp_build_flags() & RMLP_BUILD_FLASHINFER) ? "yes" : "no");
    if (prop.major < 8 && (rmlp_build_flags() & RMLP_BUILD_FLASHINFER)) {
        printf("SKIP: FlashInfer's kernels need sm_80 or newer, and this test expects them to run\n");
        return SKIP_CODE;
    }
    CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < GPU_OPT_COUNT; i++) unsetenv(GPU_OPTION_VARS[i].name); /* the defaults */
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 128, .hidden_size = 256,
                             .intermediate_size = 384, .num_hidden_layers = LAYERS, .num_attention_heads = 8,
                             .num_key_value_heads = 2, .head_dim = 128, .max_position_embeddings = 4096,
                             .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    char dir[] = "/tmp/rmlp_gpu_attention_XXXXXX", file[96];
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 29) == 0, "writing the model")) return tu_summary();
    /* 8 sequences of 100-270 tokens, the first 64 shared */
    uint32_t ids[2048], pos[2048], cu[9] = {0};
    uint64_t rng = 0xA77u;
    for (uint32_t s = 0; s < 8; s++) {
        cu[s + 1] = cu[s] + 100 + (s * 53) % 171;
        for (uint32_t i = cu[s]; i < cu[s + 1]; i++) {
            uint32_t t = i - cu[s];
            ids[i] = t < 64 ? 1 + (t * 7) % 120 : tu_rand_range(&rng, 1, 127);
            pos[i] = t;
        }
    }
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 8);
    if (CHECK(rmlp_planner_create(&planner) == RMLP_OK &&
                  rmlp_plan_build(planner, ids, pos, cu[8], cu, 8, &params, &plan) == RMLP_OK && plan.use_radix,
              "plan: %s", rmlp_last_error())) {
        printf("batch: N=%u N'=%u in %u sequences\n", plan.n_tokens, plan.n_compact, plan.n_seqs);
        for (int di = 0; di < 3; di++) test_dtype(dir, di, &plan, cfg.hidden_size);
        test_refused(dir);
    }
    rmlp_planner_free(planner);
    snprintf(file, sizeof file, "%s/model.safetensors", dir), remove(file);
    snprintf(file, sizeof file, "%s/config.json", dir), remove(file);
    remove(dir);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
