/*
 * test_gpu_decode.c: generation steps' attention through FlashInfer's batch decode
 * (RADIX_MLP_GPU_DECODE=flashinfer: gpu/flashinfer_decode.h over gpu/decode_split.h's layout)
 * against the chain kernels it replaces (=own: gpu_chain_attention and gpu_merge_states) and the
 * CPU path (cpu_decode_attention):
 *   - the kernel, on steps of rows sharing prefixes (tests/decode_steps.h: one row over a path of
 *     thousands of slots, 40 rows in 3 groups, 64 rows under a prefix of 2,100 slots), chains cut
 *     with and without shared prefixes, each step split at the device's target and at 1 and 1,000
 *     chunks (one chunk per row; dozens per row, the merge over more states than it holds at once),
 *     in f16 and bf16, head_dim 64, 128 and 256, 1, 2, 4 and 8 query heads per KV head: within
 *     test_gpu_kernels' bounds of both (each comparison prints its error); at head_dim 256 also
 *     with a sliding window of 40 keys (shorter than the shared prefixes, and on the long paths whole
 *     chunks fall before it) and with Gemma 2's soft-cap, with and without the window, against the
 *     CPU (and the chain kernels where there is no window: theirs needs the chains' depths);
 *   - a whole model (bench/tiny_model.c's, a Qwen3 and a Gemma 2 with a window and soft-caps, on the
 *     device in f16 and bf16): the logits of generation
 *     sessions in contexts made with RADIX_MLP_GPU_DECODE=flashinfer and =own, in lockstep on the
 *     same tokens, against each other (2e-2) and a CPU session (f32; 2e-2, bf16 4e-2), with
 *     and without shared-prefix attention; rmlp_context_gpu_stats counts the steps each ran.
 * The checks that need no device run first; without FlashInfer's decode in the build or without a
 * device (or one older than sm_80, which it does not serve) it says SKIP and exits 77.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cpu/cpu_ops.h"
#include "gpu/decode_split.h"
#include "gpu/flashinfer_decode.h"
#include "gpu/kernels.h"
#include "test_util.h"
#include "gpu_test_util.h"
#include "decode_steps.h"
#include "bench/tiny_model.h"

#define SKIP_CODE 77
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FN "test_gpu_decode"

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f16", "bf16"};
static const tol TOLS[] = {{1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}}; /* test_gpu_kernels' */

static cudaStream_t stream;

/* ---- what needs no device --------------------------------------------------------------------- */

static void test_without_device(void) {
    int built = gpu_fi_decode_built();
    static const struct {
        rmlp_dtype dt;
        size_t nh, nkv, hd;
        int want;
    } shapes[] = {{RMLP_DTYPE_BF16, 16, 8, 128, 1}, {RMLP_DTYPE_F16, 8, 8, 64, 1},  {RMLP_DTYPE_BF16, 32, 8, 128, 1},
                  {RMLP_DTYPE_F16, 16, 2, 64, 1},   {RMLP_DTYPE_F32, 16, 8, 128, 0}, {RMLP_DTYPE_BF16, 16, 8, 96, 0},
                  {RMLP_DTYPE_BF16, 12, 4, 128, 0}, {RMLP_DTYPE_BF16, 28, 4, 128, 0}, {RMLP_DTYPE_BF16, 32, 2, 64, 0},
                  {RMLP_DTYPE_BF16, 4, 0, 64, 0},   {RMLP_DTYPE_BF16, 8, 1, 256, 1}, {RMLP_DTYPE_F16, 16, 8, 256, 1},
                  {RMLP_DTYPE_BF16, 8, 1, 192, 0}};
    for (size_t i = 0; i < COUNT(shapes); i++)
        CHECK(gpu_fi_decode_supports(shapes[i].dt, shapes[i].nh, shapes[i].nkv, shapes[i].hd) ==
                  (built && shapes[i].want),
              "supports(dtype %d, heads %zu/%zu, head_dim %zu)", shapes[i].dt, shapes[i].nh, shapes[i].nkv,
              shapes[i].hd);
    CHECK(gpu_fi_decode_takes_layer(256, 50.0f) == built && !gpu_fi_decode_takes_layer(128, 50.0f) &&
              gpu_fi_decode_takes_layer(128, 0.0f) == built && gpu_fi_decode_takes_layer(64, 0.0f) == built,
          "takes_layer: a soft-cap at head_dim 256 only");
    gpu_fi_decode *fi = (gpu_fi_decode *)(uintptr_t)16; /* must come back NULL, touching no device */
    CHECK(gpu_fi_decode_create(FN, RMLP_DTYPE_F32, 16, 8, 128, 64, &fi) == RMLP_OK && fi == NULL,
          "create for f32: no state");
    gpu_fi_decode_step none = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1};
    gpu_compact_rows rows = {NULL, NULL, NULL, NULL, 128, 64, 64, 128};
    const layer_attention plain = {0, 0.0f, 1.0f, 0};
    CHECK(!gpu_fi_decode_ready(&none, &rows) && gpu_fi_decode_run(&none, &rows, plain, NULL) == cudaErrorInvalidValue,
          "a step without state is never ready, and refused");
}

/* ---- the kernel ----------------------------------------------------------------------------------- */

typedef struct step_shape {
    size_t rows;
    uint32_t groups, common, group, own;
} step_shape;

/* One step of `shape` on fi's shape, each layer's attention as `window` and `softcap` say (0: none):
 * FlashInfer split at each target against the CPU and, without a window, the chain kernels. */
static void kernel_case(uint64_t *rng, int di, size_t nh, size_t nkv, size_t hd, const step_shape *shape,
                        bool shared, uint32_t window, float softcap) {
    rmlp_dtype dt = DTYPES[di];
    size_t qd = nh * hd, kvd = nkv * hd;
    decode_step st;
    decode_step_make(rng, shape->rows, shape->groups, shape->common, shape->group, shape->own, shared, &st);
    size_t n = st.n_rows, total = 0;
    for (size_t r = 0; r < n; r++) total += st.path_len[r];
    float scale = 1.0f / sqrtf((float)hd);
    const layer_attention la = {window, softcap, scale, 0};
    float *q = random_values(rng, n * qd, -3, 3, dt), *k = random_values(rng, st.n_slots * kvd, -1, 1, dt);
    float *v = random_values(rng, st.n_slots * kvd, -1, 1, dt), *ref = tu_xmalloc(n * qd * 4);
    float *scratch = tu_xmalloc(decode_scratch_floats(n, nh, nkv, hd, 1) * 4);
    cpu_attention_rows cpu_rows = {q, k, v, ref, qd, kvd, kvd, qd, 0};
    cpu_decode_attention(&cpu_rows, st.chains, st.n_chains, st.members, n, nh, nkv, hd, &la, st.path_len, NULL,
                         scratch);
    void *d_q = upload(q, n * qd, dt), *d_k = upload(k, st.n_slots * kvd, dt), *d_v = upload(v, st.n_slots * kvd, dt);
    void *d_own = poisoned(n * qd, dt), *d_out = poisoned(n * qd, dt);
    /* the chain kernels */
    float *d_state = dev_alloc(st.n_members * nh * (hd + 2) * 4);
    uint32_t *d_kptr = upload_u32(st.key_indptr, st.n_chains + 1);
    uint32_t *d_keys = upload_u32(st.keys, st.key_indptr[st.n_chains] + 1);
    uint32_t *d_mptr = upload_u32(st.member_indptr, st.n_chains + 1), *d_members = upload_u32(st.members, st.n_members);
    uint32_t *d_rptr = upload_u32(st.row_indptr, n + 1), *d_rows = upload_u32(st.row_members, st.n_members);
    gpu_compact_rows own_rows = {d_q, d_k, d_v, NULL, qd, kvd, kvd, qd};
    gpu_chain_layout lay = {d_kptr, d_keys, d_mptr, d_members, st.n_chains, st.n_members, NULL, NULL};
    char what[200];
    snprintf(what, sizeof what, "%s heads=%zu/%zu head_dim=%zu rows=%zu keys=%zu %s window=%u softcap=%g",
             DTYPE_NAMES[di], nh, nkv, hd, n, total, shared ? "shared" : "per path", window, softcap);
    float *own = NULL; /* the chain kernels' (without a window) */
    bool chains_ok = window != 0 ||
                     (launched_on(gpu_chain_attention(&own_rows, &lay, nh, nkv, hd, la, d_state, dt, stream), what,
                                  stream) &&
                      launched_on(gpu_merge_states(d_state, d_rptr, d_rows, n, nh, hd, d_own, qd, dt, stream), what,
                                  stream));
    if (window == 0 && chains_ok) own = download_as(d_own, n * qd, dt);
    /* FlashInfer, split at the device's target, then at 1 and 1,000 chunks */
    static const size_t targets[] = {0, 1, 1000};
    for (size_t t = 0; t < COUNT(targets) && chains_ok; t++) {
        gpu_fi_decode *fi = NULL;
        rmlp_status status = gpu_fi_decode_create(FN, dt, nh, nkv, hd, n + targets[t], &fi);
        if (!CHECK(status == RMLP_OK && fi != NULL, "%s: gpu_fi_decode_create: %s", what,
                   status != RMLP_OK ? rmlp_last_error() : "no state on an sm_80+ device"))
            break;
        size_t target = targets[t] ? targets[t] : gpu_fi_decode_target_chunks(fi);
        size_t room = decode_split_words(n, total, target);
        uint32_t *words = tu_xmalloc(room * 4);
        decode_split s;
        CHECK(decode_split_build(st.key_indptr, st.keys, st.member_indptr, st.n_chains, st.row_indptr,
                                 st.row_members, n, target, words, room, &s),
              "%s: split at %zu chunks", what, target);
        uint32_t *d = upload_u32(words, s.words);
        gpu_fi_decode_step step = {fi, d + s.at_kv_indptr, d + s.at_kv_indices, d + s.at_request, d + s.at_tile,
                                   d + s.at_o_indptr, d + s.at_chunk, n, s.n_chunks};
        gpu_compact_rows fi_rows = {d_q, d_k, d_v, d_out, qd, kvd, kvd, qd};
        CUDA_MUST(cudaMemset(d_out, 0xFF, n * qd * elem_size(dt)));
        uploads_landed();
        char line[300];
        snprintf(line, sizeof line, "flashinfer %s, %u chunks of %u", what, s.n_chunks, s.chunk);
        if (CHECK(gpu_fi_decode_ready(&step, &fi_rows), "%s: not ready", line) &&
            launched_on(gpu_fi_decode_run(&step, &fi_rows, la, stream), line, stream)) {
            float *got = download_as(d_out, n * qd, dt);
            char vs[340];
            snprintf(vs, sizeof vs, "%s vs CPU", line);
            compare_report(vs, got, ref, n * qd, TOLS[di]);
            if (own != NULL) {
                snprintf(vs, sizeof vs, "%s vs the chain kernels", line);
                compare_report(vs, got, own, n * qd, TOLS[di]);
            }
            free(got);
        }
        cudaFree(d), free(words);
        gpu_fi_decode_free(fi);
    }
    free(own);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_own), cudaFree(d_out), cudaFree(d_state);
    cudaFree(d_kptr), cudaFree(d_keys), cudaFree(d_mptr), cudaFree(d_members), cudaFree(d_rptr), cudaFree(d_rows);
    free(q), free(k), free(v), free(ref), free(scratch);
    decode_step_free(&st);
}

static void test_kernel(uint64_t *rng) {
    static const step_shape small = {40, 3, 60, 20, 30};
    static const step_shape long_ones[] = {{1, 1, 4000, 0, 5}, {64, 8, 2100, 40, 20}};
    static const size_t head_dims[] = {64, 128};
    static const size_t heads[][2] = {{4, 4}, {8, 4}, {8, 2}, {16, 2}}; /* groups 1, 2, 4, 8 */
    for (int di = 0; di < 2; di++)
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++)
                for (int shared = 0; shared < 2; shared++)
                    kernel_case(rng, di, heads[h][0], heads[h][1], head_dims[a], &small, shared, 0, 0.0f);
    for (size_t s = 0; s < COUNT(long_ones); s++) {
        kernel_case(rng, 1, 32, 8, 128, &long_ones[s], true, 0, 0.0f);
        kernel_case(rng, 0, 8, 8, 64, &long_ones[s], false, 0, 0.0f);
    }
    /* head_dim 256 (Gemma): plain, a window of 40 keys (the shared prefix is 60), a soft-cap of 2
     * (the scores here are of order 1, so a cap of 2 bends them), both */
    static const struct {
        uint32_t window;
        float softcap;
    } layers[] = {{0, 0.0f}, {40, 0.0f}, {0, 2.0f}, {40, 2.0f}};
    for (int di = 0; di < 2; di++)
        for (size_t h = 0; h < COUNT(heads); h++)
            for (size_t l = 0; l < COUNT(layers); l++)
                for (int shared = 0; shared < 2; shared++)
                    kernel_case(rng, di, heads[h][0], heads[h][1], 256, &small, shared, layers[l].window,
                                layers[l].softcap);
    for (size_t s = 0; s < COUNT(long_ones); s++) /* whole chunks before the window: empty partial states */
        kernel_case(rng, 1, 8, 1, 256, &long_ones[s], true, 40, 2.0f);
}

/* ---- a whole model ----------------------------------------------------------------------------------- */

#define SEQS 6
#define PREFIX 300
#define SUFFIX 20
#define STEPS 8

/* A context for the model with a prefix cache, made with RADIX_MLP_GPU_DECODE=value (restored
 * after) unless value is NULL (a CPU model). */
static rmlp_context *context_with(rmlp_model *model, const rmlp_model_config *cfg, size_t elem_bytes,
                                  const char *value) {
    const char *old = getenv("RADIX_MLP_GPU_DECODE");
    char *saved = old ? strdup(old) : NULL;
    if (value) setenv("RADIX_MLP_GPU_DECODE", value, 1);
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = (uint64_t)(PREFIX + SEQS * (SUFFIX + STEPS) + 64) *
                         (2ull * cfg->num_hidden_layers * cfg->num_key_value_heads * cfg->head_dim + cfg->hidden_size) *
                         elem_bytes;
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create_with_params(model, SEQS * (PREFIX + SUFFIX), &params, &ctx);
    if (saved) setenv("RADIX_MLP_GPU_DECODE", saved, 1);
    else unsetenv("RADIX_MLP_GPU_DECODE");
    free(saved);
    CHECK(status == RMLP_OK, "context (RADIX_MLP_GPU_DECODE=%s): %s", value ? value : "-", rmlp_last_error());
    return ctx;
}

/* Relative norm of got - ref (inf where got is not finite). */
static double rel_norm(const float *got, const float *ref, size_t n) {
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = (double)got[i] - ref[i];
        d2 += d * d, r2 += (double)ref[i] * ref[i];
    }
    return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

static void test_model(uint64_t *rng, const rmlp_model_config *model_cfg, const char *name) {
    rmlp_model_config cfg = *model_cfg;
    char dir[] = "/tmp/test_gpu_decode-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 11) == 0, "writing the model in %s", dir)) return;
    uint32_t ids[SEQS * (PREFIX + SUFFIX)], pos[SEQS * (PREFIX + SUFFIX)], cu[SEQS + 1], tokens[SEQS];
    for (uint32_t s = 0; s <= SEQS; s++) cu[s] = s * (PREFIX + SUFFIX);
    for (uint32_t i = 0; i < SEQS * (PREFIX + SUFFIX); i++) {
        uint32_t t = i % (PREFIX + SUFFIX);
        pos[i] = t, ids[i] = t < PREFIX ? (t * 7919u + 3) % cfg.vocab_size : tu_rand_range(rng, 0, cfg.vocab_size - 1);
    }
    rmlp_model *cpu_model = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 0);
    if (!CHECK(rmlp_model_load(dir, NULL, &cpu_model) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, ids, pos, SEQS * (PREFIX + SUFFIX), cu, SEQS, &pp, &plan) == RMLP_OK,
               "CPU model and plan: %s", rmlp_last_error()))
        goto done;
    for (int di = 0; di < 2; di++) {
        rmlp_model_params mp = rmlp_model_default_params();
        mp.device = RMLP_DEVICE_CUDA, mp.dtype = DTYPES[di];
        rmlp_model *model = NULL;
        if (!CHECK(rmlp_model_load(dir, &mp, &model) == RMLP_OK, "load %s: %s", DTYPE_NAMES[di], rmlp_last_error()))
            continue;
        for (int shared = 0; shared < 2; shared++) {
            rmlp_context *ctx[3] = {context_with(model, &cfg, 2, "flashinfer"), context_with(model, &cfg, 2, "own"),
                                    context_with(cpu_model, &cfg, 4, NULL)};
            float *logits[3];
            for (int c = 0; c < 3; c++) logits[c] = tu_xmalloc((size_t)SEQS * cfg.vocab_size * 4);
            rmlp_generate_params gp = rmlp_generate_default_params();
            gp.max_new_tokens = STEPS;
            gp.shared_prefix_attention = shared;
            rmlp_status status = ctx[0] && ctx[1] && ctx[2] ? RMLP_OK : RMLP_ERR_INTERNAL;
            for (int c = 0; c < 3 && status == RMLP_OK; c++) {
                if (c < 2) status = rmlp_context_set_plan(ctx[c], &plan);
                if (status == RMLP_OK) status = rmlp_generate_begin(ctx[c], &plan, &gp, logits[c]);
            }
            double worst_own = 0, worst_cpu = 0;
            for (int step = 0; step <= STEPS && CHECK(status == RMLP_OK, "%s: %s", DTYPE_NAMES[di], rmlp_last_error());
                 step++) {
                size_t nl = (size_t)SEQS * cfg.vocab_size;
                double e_own = rel_norm(logits[0], logits[1], nl), e_cpu = rel_norm(logits[0], logits[2], nl);
                worst_own = e_own > worst_own ? e_own : worst_own, worst_cpu = e_cpu > worst_cpu ? e_cpu : worst_cpu;
                /* vs CPU: test_gpu_model's bounds (bf16's 4e-2: 3 mantissa bits fewer than f16) */
                double cpu_bound = DTYPES[di] == RMLP_DTYPE_BF16 ? 4e-2 : 2e-2;
                CHECK(e_own <= 2e-2 && e_cpu <= cpu_bound,
                      "%s %s %s, step %d: flashinfer's logits vs own %.3g, vs CPU %.3g", name, DTYPE_NAMES[di],
                      shared ? "shared" : "per path", step, e_own, e_cpu);
                if (step == STEPS) break;
                for (uint32_t s = 0; s < SEQS; s++) tokens[s] = tu_rand_range(rng, 0, cfg.vocab_size - 1);
                for (int c = 0; c < 3 && status == RMLP_OK; c++)
                    status = rmlp_generate_step(ctx[c], tokens, SEQS, logits[c]);
            }
            for (int c = 0; c < 2 && ctx[c] != NULL; c++) {
                rmlp_gpu_stats gs;
                memset(&gs, 0, sizeof gs);
                gs.struct_size = sizeof gs;
                CHECK(rmlp_context_gpu_stats(ctx[c], &gs) == RMLP_OK &&
                          gs.decode_steps_flashinfer == (c == 0 ? STEPS : 0) &&
                          gs.decode_steps_chains == (c == 0 ? 0 : STEPS),
                      "%s %s %s: %s context ran %llu steps on FlashInfer, %llu on the chains", name, DTYPE_NAMES[di],
                      shared ? "shared" : "per path", c == 0 ? "flashinfer" : "own",
                      (unsigned long long)gs.decode_steps_flashinfer, (unsigned long long)gs.decode_steps_chains);
            }
            printf("%s %s, shared-prefix attention %s: %d steps, flashinfer's logits vs own %.3g, vs CPU %.3g\n", name,
                   DTYPE_NAMES[di], shared ? "on" : "off", STEPS, worst_own, worst_cpu);
            for (int c = 0; c < 3; c++) {
                if (ctx[c] != NULL) rmlp_generate_end(ctx[c]);
                rmlp_context_free(ctx[c]);
                free(logits[c]);
            }
        }
        rmlp_model_free(model);
    }
done:
    rmlp_planner_free(planner);
    rmlp_model_free(cpu_model);
    tiny_model_remove(dir);
}

int main(void) {
    test_without_device();
    int count = 0, major = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error == cudaSuccess && count > 0) error = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (!gpu_fi_decode_built() || error != cudaSuccess || count == 0 || major < 8) {
        printf("SKIP: %s\n", !gpu_fi_decode_built() ? "libradix_mlp was built without FlashInfer's decode headers "
                                                      "(scripts/setup.sh fetches them)"
                             : error != cudaSuccess ? cudaGetErrorString(error)
                             : count == 0           ? "no CUDA device"
                                                    : "a device older than sm_80 (FlashInfer's decode needs sm_80)");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE;
    }
    CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint64_t rng = 29;
    test_kernel(&rng);
    const rmlp_model_config qwen3 = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 512, .hidden_size = 256,
                                     .intermediate_size = 512, .num_hidden_layers = 2, .num_attention_heads = 4,
                                     .num_key_value_heads = 2, .head_dim = 64, .max_position_embeddings = 4096,
                                     .rms_norm_eps = 1e-6, .rope_theta = 1e6, .tie_word_embeddings = true,
                                     .qk_norm = true};
    test_model(&rng, &qwen3, "Qwen3 model");
    /* Gemma 2 (head_dim 256, a window of 40 keys on layer 0, shorter than the shared prefix, the
     * soft-cap on both layers): its steps take FlashInfer's decode too */
    const rmlp_model_config gemma2 = {.architecture = RMLP_ARCH_GEMMA2, .vocab_size = 512, .hidden_size = 256,
                                      .intermediate_size = 512, .num_hidden_layers = 2, .num_attention_heads = 4,
                                      .num_key_value_heads = 2, .head_dim = 256, .max_position_embeddings = 4096,
                                      .rms_norm_eps = 1e-6, .rope_theta = 1e4, .tie_word_embeddings = true,
                                      .activation = RMLP_ACTIVATION_GELU_TANH, .sliding_window = 40,
                                      .query_pre_attn_scalar = 256, .attn_logit_softcapping = 2};
    test_model(&rng, &gemma2, "Gemma 2 model");
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
