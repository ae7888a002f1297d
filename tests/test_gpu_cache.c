/*
 * test_gpu_cache.c: the prefix KV cache of a CUDA context (gpu/cache.cu), in F32 and BF16, on the
 * qwen3_tiny fixture, over the random traces of test_prefix_cache (batches that share, extend,
 * diverge from and re-enter cached paths):
 *   - caches of 0 (smaller than one slot), 3, 60, 300 and 3000 slots against a CUDA context without
 *     one: every batch's output (rmlp_forward, batch rows; every fifth batch rmlp_forward_compact)
 *     within the dtype's tolerance of the uncached one, and of the CPU's uncached output;
 *   - the same trace through a CPU context with a cache of as many slots: the counters (hits,
 *     computed, evicted, bypassed) equal, since one index decides both, and slot bytes in the
 *     model's dtype; after every batch nothing is locked (kv_pool_check);
 *   - a cached forward on a capturing stream is refused (RMLP_ERR_UNSUPPORTED) and the context
 *     works afterwards; a host callback is refused;
 *   - generation (gpu/decode.cu) on the fixtures with greedy ids (generate.json): a CUDA session and
 *     a CPU one in lockstep on the device's tokens, every logits row of begin and of each step
 *     within the dtype's tolerance of the CPU's, the device's attention by shared chains (F32, BF16)
 *     and per path (F32); in F32 the greedy ids equal transformers'; after the session nothing is
 *     locked; rmlp_generate_begin needs no rmlp_context_set_plan (gen_check_begin_plan: with none
 *     set, with another batch's plan set, with its own, the same logits within the tolerance).
 * Tolerances: F32 1e-4 of the largest value (cuBLAS sums another number of rows in another order
 * when fewer rows are computed), BF16 4e-2 relative norm (test_gpu_model.c explains both).
 * Without a CUDA device it prints SKIP and exits 77.
 * Usage: test_gpu_cache FIXTURES_DIR
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_cache.h"
#include "ffi/src/model_internal.h"
#include "test_util.h"
#include "gen_fixture.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define BATCHES 30
#define CAP (16 * 40)

static cudaStream_t stream;

/* The relative error of got against ref: max-abs over the largest value (F32), else the norm. */
static double error_of(const float *got, const float *ref, size_t n, rmlp_dtype dt) {
    double max_abs = 0, max_ref = 0, d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = fabs((double)got[i] - ref[i]);
        max_abs = d > max_abs ? d : max_abs;
        max_ref = fabs(ref[i]) > max_ref ? fabs(ref[i]) : max_ref;
        d2 += d * d, r2 += (double)ref[i] * ref[i];
    }
    return dt == RMLP_DTYPE_F32 ? max_abs / (max_ref > 0 ? max_ref : 1) : sqrt(d2 / (r2 > 0 ? r2 : 1));
}

/* rmlp_forward (or _compact, then mapped to batch rows) on a CUDA context into d_out; the batch rows
 * in fp32, NULL on failure. */
static float *run_cuda(rmlp_context *ctx, const rmlp_plan *plan, int compact, void *d_out, size_t hsz, rmlp_dtype dt,
                       const char *what) {
    size_t rows = compact ? plan->n_compact_padded : plan->n_tokens;
    CUDA_MUST(cudaMemsetAsync(d_out, 0xFF, rows * hsz * elem_size(dt), stream)); /* NaN in every dtype */
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK)
        status = compact ? rmlp_forward_compact(ctx, plan, NULL, NULL, d_out) : rmlp_forward(ctx, plan, NULL, NULL, d_out);
    if (!CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) return NULL;
    cudaError_t error = cudaStreamSynchronize(stream);
    if (!CHECK(error == cudaSuccess, "%s: the kernels failed: %s", what, cudaGetErrorString(error)))
        exit((tu_summary(), 1)); /* a device fault poisons the CUDA context */
    float *got = download_as(d_out, rows * hsz, dt);
    if (!compact) return got;
    float *batch = tu_xmalloc(plan->n_tokens * hsz * 4);
    for (size_t i = 0; i < plan->n_tokens; i++) memcpy(batch + i * hsz, got + (size_t)plan->scatter[i] * hsz, hsz * 4);
    free(got);
    return batch;
}

static rmlp_status callback(void *user_data, const rmlp_attention_args *args) {
    return rmlp_attention(user_data, args);
}

static rmlp_context *context_with_cache(rmlp_model *model, uint64_t bytes, int on_stream) {
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = bytes;
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create_with_params(model, CAP, &params, &ctx);
    if (status == RMLP_OK && on_stream) status = rmlp_context_set_stream(ctx, stream);
    if (CHECK(status == RMLP_OK, "context with a %llu-byte cache: %s", (unsigned long long)bytes, rmlp_last_error()))
        return ctx;
    rmlp_context_free(ctx);
    return NULL;
}

static void test_dtype(const char *path, rmlp_model *cpu_model, rmlp_dtype dt, const char *dt_name) {
    static const uint64_t slot_budgets[] = {0, 3, 60, 300, 3000};
    double limit = dt == RMLP_DTYPE_F32 ? 1e-4 : 4e-2;
    rmlp_model_params mp = rmlp_model_default_params();
    mp.device = RMLP_DEVICE_CUDA, mp.dtype = dt;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    if (!CHECK(rmlp_model_load(path, &mp, &model) == RMLP_OK && rmlp_model_get_config(model, &cfg) == RMLP_OK,
               "load %s in %s: %s", path, dt_name, rmlp_last_error()))
        return;
    size_t hsz = cfg.hidden_size;
    uint64_t gpu_slot = kv_cache_slot_bytes(&cfg, elem_size(dt)), cpu_slot = kv_cache_slot_bytes(&cfg, sizeof(float));
    rmlp_context *cold = context_with_cache(model, 0, 1), *cpu_cold = context_with_cache(cpu_model, 0, 0);
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner");
    void *d_out = dev_alloc((CAP + 8) * hsz * elem_size(dt));
    float *cpu_ref = tu_xmalloc(CAP * hsz * 4), *cpu_got = tu_xmalloc(CAP * hsz * 4);
    for (size_t k = 0; cold != NULL && cpu_cold != NULL && k < sizeof slot_budgets / sizeof slot_budgets[0]; k++) {
        uint64_t extra = k == 0 ? gpu_slot / 2 : 0; /* 0 slots: a budget under one slot */
        rmlp_context *warm = context_with_cache(model, slot_budgets[k] * gpu_slot + extra, 1);
        rmlp_context *cpu_warm = context_with_cache(cpu_model, slot_budgets[k] * cpu_slot + extra, 0);
        if (warm == NULL || cpu_warm == NULL) {
            rmlp_context_free(warm), rmlp_context_free(cpu_warm);
            continue;
        }
        uint64_t rng = 0x6C0DE + k;
        double worst_cold = 0, worst_cpu = 0;
        for (int batch = 0; batch < BATCHES; batch++) {
            tu_batch b = tu_trace_batch(&rng, 16, 40);
            rmlp_plan_params pp = tu_params(batch % 4 == 0 ? 0.0 : 1.0, batch % 3 == 0 ? 8 : 0);
            rmlp_plan plan;
            char what[96];
            snprintf(what, sizeof what, "%s, cache of %llu slots, batch %d", dt_name,
                     (unsigned long long)slot_budgets[k], batch);
            if (!CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK &&
                           rmlp_forward(cpu_cold, &plan, NULL, NULL, cpu_ref) == RMLP_OK &&
                           rmlp_forward(cpu_warm, &plan, NULL, NULL, cpu_got) == RMLP_OK,
                       "%s: CPU: %s", what, rmlp_last_error())) {
                tu_batch_free(&b);
                continue;
            }
            rmlp_plan owned = tu_plan_copy(&plan); /* the CUDA contexts check it stays what was set */
            float *want = run_cuda(cold, &owned, 0, d_out, hsz, dt, what);
            float *got = run_cuda(warm, &owned, batch % 5 == 4, d_out, hsz, dt, what);
            if (want != NULL && got != NULL) {
                size_t n = b.n_tokens * hsz;
                double e_cold = error_of(got, want, n, dt), e_cpu = error_of(got, cpu_ref, n, dt);
                worst_cold = e_cold > worst_cold ? e_cold : worst_cold;
                worst_cpu = e_cpu > worst_cpu ? e_cpu : worst_cpu;
                CHECK(e_cold <= limit && e_cpu <= limit, "%s: warm vs cold on the device %.3g, vs the CPU %.3g (tolerance %g)",
                      what, e_cold, e_cpu, limit);
            }
            rmlp_cache_stats g, c;
            char why[200];
            if (CHECK(rmlp_context_cache_stats(warm, &g) == RMLP_OK && rmlp_context_cache_stats(cpu_warm, &c) == RMLP_OK,
                      "%s: stats: %s", what, rmlp_last_error()))
                CHECK(g.batches == c.batches && g.bypassed == c.bypassed && g.lookups == c.lookups &&
                          g.hit_tokens == c.hit_tokens && g.computed_tokens == c.computed_tokens &&
                          g.evicted_tokens == c.evicted_tokens && g.slots == c.slots && g.slots_used == c.slots_used &&
                          g.bytes_per_slot == gpu_slot,
                      "%s: device counters (hits %llu, computed %llu, evicted %llu, bypassed %llu) differ from the "
                      "CPU's (%llu, %llu, %llu, %llu), or slot bytes %llu != %llu",
                      what, (unsigned long long)g.hit_tokens, (unsigned long long)g.computed_tokens,
                      (unsigned long long)g.evicted_tokens, (unsigned long long)g.bypassed,
                      (unsigned long long)c.hit_tokens, (unsigned long long)c.computed_tokens,
                      (unsigned long long)c.evicted_tokens, (unsigned long long)c.bypassed,
                      (unsigned long long)g.bytes_per_slot, (unsigned long long)gpu_slot);
            CHECK(kv_pool_check(warm->cache->pool, why, sizeof why) == 0, "%s: %s", what, why);
            free(want), free(got);
            tu_plan_copy_free(&owned);
            tu_batch_free(&b);
        }
        rmlp_cache_stats st;
        if (rmlp_context_cache_stats(warm, &st) == RMLP_OK)
            printf("%s, cache of %llu slots: %llu of %llu rows hit, %llu evicted, %llu bypassed; worst warm vs cold "
                   "%.3g, vs the CPU %.3g\n", dt_name, (unsigned long long)slot_budgets[k],
                   (unsigned long long)st.hit_tokens, (unsigned long long)st.lookups,
                   (unsigned long long)st.evicted_tokens, (unsigned long long)st.bypassed, worst_cold, worst_cpu);
        rmlp_context_free(warm), rmlp_context_free(cpu_warm);
    }
    /* refusals: a capturing stream, a host callback; the context works afterwards */
    rmlp_context *warm = cold != NULL ? context_with_cache(model, 100 * gpu_slot, 1) : NULL;
    uint64_t rng = 5;
    tu_batch b = tu_trace_batch(&rng, 4, 10);
    rmlp_plan_params pp = tu_params(1.0, 0);
    rmlp_plan plan;
    if (warm != NULL &&
        CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK &&
                  rmlp_context_set_plan(warm, &plan) == RMLP_OK,
              "setup: %s", rmlp_last_error())) {
        CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        rmlp_status status = rmlp_forward(warm, &plan, NULL, NULL, d_out);
        cudaGraph_t graph = NULL;
        CUDA_MUST(cudaStreamEndCapture(stream, &graph));
        if (graph != NULL) cudaGraphDestroy(graph);
        CHECK(status == RMLP_ERR_UNSUPPORTED && strstr(rmlp_last_error(), "captur") != NULL,
              "%s: a cached forward while capturing: status %d, %s", dt_name, status, rmlp_last_error());
        status = rmlp_forward(warm, &plan, callback, warm, d_out);
        CHECK(status == RMLP_ERR_UNSUPPORTED && strstr(rmlp_last_error(), "prefix cache") != NULL,
              "%s: a callback with a cache: status %d, %s", dt_name, status, rmlp_last_error());
        rmlp_cache_stats st;
        CHECK(rmlp_forward(warm, &plan, NULL, NULL, d_out) == RMLP_OK && cudaStreamSynchronize(stream) == cudaSuccess &&
                  rmlp_context_cache_stats(warm, &st) == RMLP_OK && st.slots_used == plan.n_compact,
              "%s: after the refusals: %s", dt_name, rmlp_last_error());
    }
    tu_batch_free(&b);
    rmlp_context_free(warm);
    CUDA_MUST(cudaFree(d_out));
    free(cpu_ref), free(cpu_got);
    rmlp_planner_free(planner);
    rmlp_context_free(cold), rmlp_context_free(cpu_cold);
    rmlp_model_free(model);
}

/* ---- generation on the device against the CPU's, on a fixture's prompts ----------------------- */

/* What test_generate's lockstep compares each row with: the CPU session's logits. */
typedef struct device_vs_cpu {
    const char *label;
    rmlp_dtype dt;
    double limit, worst;
} device_vs_cpu;

/* Row i (sequence s) of a step: the device's logits (g->la) vs the CPU's (g->lb) within the limit. */
static int compare_device(void *arg, const gen_lockstep *g, int step, size_t i, uint32_t s) {
    device_vs_cpu *c = arg;
    double e = error_of(g->la + i * g->vocab, g->lb + i * g->vocab, g->vocab, c->dt);
    c->worst = e > c->worst ? e : c->worst;
    CHECK(e <= c->limit, "%s, step %d, seq %u: device logits vs the CPU's %.3g (tolerance %g)", c->label, step, s, e,
          c->limit);
    return 1;
}

static void test_generate(const char *dir, const char *name, rmlp_dtype dt, const char *dt_name, bool shared) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gen_fixture f;
    if (!CHECK(read_fixture(path, &f) == 0, "%s: generate.json", name)) return;
    double limit = dt == RMLP_DTYPE_F32 ? 1e-4 : 4e-2;
    rmlp_model_params mp = rmlp_model_default_params();
    mp.device = RMLP_DEVICE_CUDA, mp.dtype = dt;
    rmlp_model *model = NULL, *cpu_model = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_model_load(path, &mp, &model) == RMLP_OK && rmlp_model_load(path, NULL, &cpu_model) == RMLP_OK &&
                   rmlp_model_get_config(model, &cfg) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK,
               "%s %s: load: %s", name, dt_name, rmlp_last_error())) {
        rmlp_model_free(model), rmlp_model_free(cpu_model);
        return;
    }
    size_t vocab = cfg.vocab_size;
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = 4096 * kv_cache_slot_bytes(&cfg, elem_size(dt));
    rmlp_context *dev = NULL, *cpu = NULL;
    rmlp_status status = rmlp_context_create_with_params(model, CAP, &params, &dev);
    if (status == RMLP_OK) status = rmlp_context_set_stream(dev, stream);
    params.cache_bytes = 4096 * kv_cache_slot_bytes(&cfg, sizeof(float));
    if (status == RMLP_OK) status = rmlp_context_create_with_params(cpu_model, CAP, &params, &cpu);
    float *ld = tu_xmalloc(MAX_SEQS * vocab * 4), *lc = tu_xmalloc(MAX_SEQS * vocab * 4);
    char label[200];
    snprintf(label, sizeof label, "%s %s", name, dt_name);
    if (status == RMLP_OK && shared) gen_check_begin_plan(dev, &f, vocab, limit, label); /* no plan set on dev yet */
    rmlp_plan plan, owned = {0};
    if (status == RMLP_OK) status = gen_plan(planner, &f, f.n, &plan);
    if (status == RMLP_OK) owned = tu_plan_copy(&plan), status = rmlp_context_set_plan(dev, &owned);
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = f.max_new;
    gp.shared_prefix_attention = shared; /* the device's chains: shared prefixes, or one per path */
    if (status == RMLP_OK) status = rmlp_generate_begin(dev, &owned, &gp, ld);
    if (status == RMLP_OK) status = rmlp_generate_begin(cpu, &owned, &gp, lc);
    int ok = CHECK(status == RMLP_OK, "%s %s: setup and begin: %s", name, dt_name, rmlp_last_error());
    device_vs_cpu c = {label, dt, limit, 0.0};
    gen_lockstep g = {.f = &f, .a = dev, .b = cpu, .la = ld, .lb = lc, .vocab = vocab};
    if (ok) ok = gen_run_lockstep(&g, label, compare_device, &c);
    if (ok && dt == RMLP_DTYPE_F32) gen_check_generated(&g, label);
    CHECK(rmlp_generate_end(dev) == RMLP_OK && rmlp_generate_end(cpu) == RMLP_OK, "%s: end", name);
    char why[200];
    if (dev != NULL) CHECK(kv_pool_check(dev->cache->pool, why, sizeof why) == 0, "%s %s: %s", name, dt_name, why);
    printf("%s %s, shared-prefix attention %s: generation, worst device vs CPU logits %.3g\n", name, dt_name,
           shared ? "on" : "off", c.worst);
    if (owned.fold_gather != NULL) tu_plan_copy_free(&owned);
    free(ld), free(lc);
    rmlp_context_free(dev), rmlp_context_free(cpu);
    rmlp_planner_free(planner);
    rmlp_model_free(model), rmlp_model_free(cpu_model);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gpu_cache FIXTURES_DIR\n");
        return 2;
    }
    int32_t count = 0;
    rmlp_status status = rmlp_cuda_device_count(&count);
    if (status == RMLP_ERR_NO_DEVICE || status == RMLP_ERR_UNSUPPORTED || (status == RMLP_OK && count == 0)) {
        printf("SKIP: no CUDA device: %s\n", rmlp_last_error());
        return SKIP_CODE;
    }
    if (!CHECK(status == RMLP_OK, "rmlp_cuda_device_count: %s", rmlp_last_error())) return tu_summary();
    CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", argv[1]);
    rmlp_model *cpu_model = NULL;
    if (CHECK(rmlp_model_load(path, NULL, &cpu_model) == RMLP_OK, "load %s: %s", path, rmlp_last_error())) {
        test_dtype(path, cpu_model, RMLP_DTYPE_F32, "f32");
        test_dtype(path, cpu_model, RMLP_DTYPE_BF16, "bf16");
    }
    static const char *const generating[] = {"qwen3_tiny", "qwen2_bias", "llama_bias", "mistral_bias",
                                             "qwen2_window", "mistral_window", "qwen2_yarn"};
    for (size_t i = 0; i < sizeof generating / sizeof generating[0]; i++) {
        test_generate(argv[1], generating[i], RMLP_DTYPE_F32, "f32", true);
        test_generate(argv[1], generating[i], RMLP_DTYPE_F32, "f32", false);
        test_generate(argv[1], generating[i], RMLP_DTYPE_BF16, "bf16", true);
    }
    rmlp_model_free(cpu_model);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
