/*
 * test_gpu_rope.c: RoPE from a cos/sin table (RADIX_MLP_GPU_ROPE=table, gpu_rope_table of
 * gpu/kernels.h) against sincosf per element (=sincos, the path it replaces):
 *   - the kernel: gpu_qk_norm_rope with a table and without, bit for bit the same output, in f32,
 *     f16 and bf16, head_dim 16 to 256 (the 16-byte and the element paths), with and without q/k
 *     norm, theta 1e4 and 1e6, positions below the table's end and past it (sincosf there), and
 *     both within test_gpu_kernels' bounds of the CPU path (cpu_rope);
 *   - the table itself: gpu_rope_table_fill's (cos, sin) pairs against cos and sin in double of
 *     the fp32 angle (1e-6: sincosf's error), and a table of another theta or head_dim refused;
 *   - scaled RoPE (gpu_qk_norm_rope_freqs, model/rope_scaling.h's yarn frequencies and attention
 *     factor, and llama3's): with a table and without, bit for bit the same, and both within
 *     test_gpu_kernels' bounds of the CPU path's rows_rope_table + rows_qk_norm_rope;
 *   - a whole model (tools/tiny_model.c's, loaded on the device in f32 and bf16): the forward's
 *     hidden states of a context made with RADIX_MLP_GPU_ROPE=table and of one made with =sincos,
 *     bit for bit the same, and the setting reported by rmlp_context_gpu_stats.
 * The argument checks run first, on any machine; then without a CUDA device it says SKIP and
 * exits 77.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cpu/cpu_ops.h"
#include "cpu/rows.h"
#include "gpu/kernels.h"
#include "model/rope_scaling.h"
#include "test_util.h"
#include "gpu_test_util.h"
#include "rope_reference.h"
#include "tools/tiny_model.h"

#define SKIP_CODE 77
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
static const tol TOLS[] = {{1e-5, 1e-5, 1e-5}, {1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}}; /* test_gpu_kernels' */
#define TABLE_POSITIONS 1000 /* drawn positions reach 40,959: most lie past the table */

static cudaStream_t stream;

/* ---- what needs no device ---------------------------------------------------------------------- */

static void test_arguments(void) {
    float *fake = (float *)(uintptr_t)256; /* never dereferenced: every call below is refused first */
    CHECK(gpu_rope_table_fill(NULL, 4, 64, 1e4, NULL) == cudaErrorInvalidValue, "fill into NULL");
    CHECK(gpu_rope_table_fill(fake, 4, 63, 1e4, NULL) == cudaErrorInvalidValue, "fill an odd head_dim");
    CHECK(gpu_rope_table_fill(fake, 4, 258, 1e4, NULL) == cudaErrorInvalidValue, "fill head_dim > 256");
    CHECK(gpu_rope_table_fill(fake + 1, 4, 64, 1e4, NULL) == cudaErrorInvalidValue, "fill unaligned");
    CHECK(gpu_rope_table_fill(fake, 0, 64, 1e4, NULL) == cudaSuccess, "fill no positions: nothing to do");
    gpu_rope_table other_dim = {fake, 16, 128, 1e4, NULL}, other_theta = {fake, 16, 64, 1e6, NULL};
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 1, 1, 1, 64, NULL, NULL, NULL, &other_dim, 1e4, 1e-6, RMLP_DTYPE_F32,
                           NULL) == cudaErrorInvalidValue,
          "a table of another head_dim is refused");
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 1, 1, 1, 64, NULL, NULL, NULL, &other_theta, 1e4, 1e-6, RMLP_DTYPE_F32,
                           NULL) == cudaErrorInvalidValue,
          "a table of another theta is refused");
}

/* ---- the kernel ------------------------------------------------------------------------------------ */

/* d_table (TABLE_POSITIONS, hd / 2, 2) for theta, its pairs checked against double precision. */
static float *make_table(size_t hd, double theta) {
    size_t n = (size_t)TABLE_POSITIONS * (hd / 2) * 2;
    float *d_table = dev_alloc(n * sizeof(float));
    CUDA_MUST(gpu_rope_table_fill(d_table, TABLE_POSITIONS, hd, theta, stream));
    CUDA_MUST(cudaStreamSynchronize(stream));
    float *table = tu_xmalloc(n * sizeof(float));
    CUDA_MUST(cudaMemcpy(table, d_table, n * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t p = 0; p < TABLE_POSITIONS; p++)
        for (size_t i = 0; i < hd / 2; i++) {
            float inv_freq = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd), angle = (float)p * inv_freq;
            const float *cs = table + (p * (hd / 2) + i) * 2;
            double e = fmax(fabs(cs[0] - cos((double)angle)), fabs(cs[1] - sin((double)angle)));
            worst = e > worst ? e : worst;
        }
    CHECK(worst <= 1e-6, "table head_dim %zu theta %g: (cos, sin) off by %.3g", hd, theta, worst);
    free(table);
    return d_table;
}

static void test_kernel(uint64_t *rng, int di) {
    static const size_t head_dims[] = {16, 20, 64, 128, 256};
    static const size_t heads[][2] = {{4, 1}, {3, 3}};
    static const size_t rows_list[] = {1, 7, 733};
    rmlp_dtype dt = DTYPES[di];
    const double eps = 1e-6;
    size_t compared = 0, differing = 0;
    for (size_t a = 0; a < COUNT(head_dims); a++)
        for (int norm = 0; norm < 2; norm++) {
            size_t hd = head_dims[a];
            double theta = norm ? 1e6 : 1e4;
            float *d_table = make_table(hd, theta);
            gpu_rope_table table = {d_table, TABLE_POSITIONS, (uint32_t)hd, theta, NULL};
            for (size_t h = 0; h < COUNT(heads); h++)
                for (size_t b = 0; b < COUNT(rows_list); b++) {
                    size_t nq = heads[h][0], nkv = heads[h][1], rows = rows_list[b], stride = (nq + 2 * nkv) * hd;
                    size_t n = rows * stride;
                    float *qkv = random_values(rng, n, -2, 2, dt), *ref = tu_xmalloc(n * 4);
                    float *qn = random_values(rng, hd, 0.5f, 1.5f, dt), *kn = random_values(rng, hd, 0.5f, 1.5f, dt);
                    uint32_t *pos = tu_xmalloc(rows * sizeof(uint32_t));
                    for (size_t r = 0; r < rows; r++)
                        pos[r] = r < 3 ? (uint32_t)(r == 2 ? TABLE_POSITIONS - 1 : r)
                                       : tu_rand_range(rng, 0, r % 2 ? TABLE_POSITIONS : 40959);
                    memcpy(ref, qkv, n * 4);
                    qk_norm_rope_reference(ref, rows, stride, nq, nkv, hd, norm ? qn : NULL, kn, eps, pos, theta);
                    void *d_qn = upload(qn, hd, dt), *d_kn = upload(kn, hd, dt);
                    void *d_tabled = upload(qkv, n, dt), *d_sincos = upload(qkv, n, dt);
                    uint32_t *d_pos = upload_u32(pos, rows);
                    size_t es = elem_size(dt), bytes = n * es;
                    char what[160];
                    snprintf(what, sizeof what, "rope %s rows=%zu heads=%zu/%zu head_dim=%zu norm=%d", DTYPE_NAMES[di],
                             rows, nq, nkv, hd, norm);
                    char *t = d_tabled, *s = d_sincos;
                    if (launched_on(gpu_qk_norm_rope(t, stride, t + nq * hd * es, stride, rows, nq, nkv, hd,
                                                     norm ? d_qn : NULL, norm ? d_kn : NULL, d_pos, &table, theta, eps,
                                                     dt, stream),
                                    what, stream) &&
                        launched_on(gpu_qk_norm_rope(s, stride, s + nq * hd * es, stride, rows, nq, nkv, hd,
                                                     norm ? d_qn : NULL, norm ? d_kn : NULL, d_pos, NULL, theta, eps,
                                                     dt, stream),
                                    what, stream)) {
                        unsigned char *ht = tu_xmalloc(bytes), *hs = tu_xmalloc(bytes);
                        CUDA_MUST(cudaMemcpy(ht, d_tabled, bytes, cudaMemcpyDeviceToHost));
                        CUDA_MUST(cudaMemcpy(hs, d_sincos, bytes, cudaMemcpyDeviceToHost));
                        size_t diff = 0;
                        for (size_t i = 0; i < bytes; i += es) diff += memcmp(ht + i, hs + i, es) != 0;
                        CHECK(diff == 0, "%s: %zu of %zu elements differ between table and sincosf", what, diff, n);
                        compared += n, differing += diff;
                        float *got = tu_xmalloc(n * 4);
                        dtype_to_f32(ht, dt, n, got);
                        compare(what, got, ref, n, TOLS[di]);
                        free(got), free(ht), free(hs);
                    }
                    cudaFree(d_qn), cudaFree(d_kn), cudaFree(d_tabled), cudaFree(d_sincos), cudaFree(d_pos);
                    free(qkv), free(ref), free(qn), free(kn), free(pos);
                }
            cudaFree(d_table);
        }
    printf("rope %s: table vs sincosf, %zu elements compared, %zu differ\n", DTYPE_NAMES[di], compared, differing);
}

/* Scaled RoPE (yarn with its attention factor, llama3) on the device, table and sincosf, against the
 * CPU path's table and rotation (q/k norm on). */
static void test_scaled(uint64_t *rng, int di) {
    static const rope_spec specs[] = {
        {ROPE_YARN, 1e4, 4.0, 0, 0, 64, false, 0, 0, 0, 32, 1, true},
        {ROPE_LLAMA3, 5e5, 8.0, 1.0, 4.0, 96, false, 0, 0, 0, 0, 0, false},
    };
    rmlp_dtype dt = DTYPES[di];
    size_t hd = 64, nq = 4, nkv = 2, rows = 300, stride = (nq + 2 * nkv) * hd, n = rows * stride, es = elem_size(dt);
    for (size_t k = 0; k < COUNT(specs); k++) {
        float inv_freq[32], factor, *cs = tu_xmalloc(rows * hd * 4);
        rope_scaling_frequencies(&specs[k], (uint32_t)hd, inv_freq, &factor);
        model_rope rope = {inv_freq, factor, specs[k].theta};
        gpu_rope_freqs freqs = {inv_freq, factor, specs[k].theta};
        float *d_table = dev_alloc((size_t)TABLE_POSITIONS * hd * sizeof(float));
        CUDA_MUST(gpu_rope_table_fill_freqs(d_table, TABLE_POSITIONS, hd, &freqs, stream));
        gpu_rope_table table = {d_table, TABLE_POSITIONS, (uint32_t)hd, specs[k].theta, inv_freq};
        float *qkv = random_values(rng, n, -2, 2, dt), *ref = tu_xmalloc(n * 4);
        float *qn = random_values(rng, hd, 0.5f, 1.5f, dt), *kn = random_values(rng, hd, 0.5f, 1.5f, dt);
        uint32_t *pos = tu_xmalloc(rows * sizeof(uint32_t));
        for (size_t r = 0; r < rows; r++) pos[r] = tu_rand_range(rng, 0, r % 2 ? TABLE_POSITIONS - 1 : 20000);
        memcpy(ref, qkv, n * 4);
        rows_rope_table(pos, rows, hd, &rope, cs);
        rows_qk_norm_rope(NULL, ref, rows, stride, nq, nkv, hd, qn, kn, 1e-6, cs);
        void *d_qn = upload(qn, hd, dt), *d_kn = upload(kn, hd, dt);
        char *t = upload(qkv, n, dt), *sc = upload(qkv, n, dt);
        uint32_t *d_pos = upload_u32(pos, rows);
        char what[120];
        snprintf(what, sizeof what, "scaled rope (%s, factor %.3g) %s", k ? "llama3" : "yarn", factor, DTYPE_NAMES[di]);
        if (launched_on(gpu_qk_norm_rope_freqs(t, stride, t + nq * hd * es, stride, rows, nq, nkv, hd, d_qn, d_kn,
                                               d_pos, &table, &freqs, 1e-6, dt, stream),
                        what, stream) &&
            launched_on(gpu_qk_norm_rope_freqs(sc, stride, sc + nq * hd * es, stride, rows, nq, nkv, hd, d_qn, d_kn,
                                               d_pos, NULL, &freqs, 1e-6, dt, stream),
                        what, stream)) {
            unsigned char *ht = tu_xmalloc(n * es), *hs = tu_xmalloc(n * es);
            CUDA_MUST(cudaMemcpy(ht, t, n * es, cudaMemcpyDeviceToHost));
            CUDA_MUST(cudaMemcpy(hs, sc, n * es, cudaMemcpyDeviceToHost));
            CHECK(memcmp(ht, hs, n * es) == 0, "%s: the table and sincosf differ", what);
            float *got = tu_xmalloc(n * 4);
            dtype_to_f32(ht, dt, n, got);
            compare(what, got, ref, n, TOLS[di]);
            free(got), free(ht), free(hs);
        }
        cudaFree(d_table), cudaFree(d_qn), cudaFree(d_kn), cudaFree(t), cudaFree(sc), cudaFree(d_pos);
        free(cs), free(qkv), free(ref), free(qn), free(kn), free(pos);
    }
}

/* n_seqs sequences of a shared prefix and a suffix of their own, positions from 0. */
static tu_batch shared_prefix_batch(uint64_t *rng, size_t n_seqs, uint32_t prefix, uint32_t suffix, uint32_t vocab) {
    tu_batch b = {0};
    b.n_seqs = n_seqs, b.n_tokens = n_seqs * (prefix + suffix);
    b.ids = tu_xmalloc(b.n_tokens * 4), b.pos = tu_xmalloc(b.n_tokens * 4), b.cu = tu_xmalloc((n_seqs + 1) * 4);
    for (size_t s = 0; s <= n_seqs; s++) b.cu[s] = (uint32_t)(s * (prefix + suffix));
    for (size_t i = 0; i < b.n_tokens; i++) {
        uint32_t t = (uint32_t)(i % (prefix + suffix));
        b.pos[i] = t;
        b.ids[i] = t < prefix ? (t * 7919u + 1) % vocab : tu_rand_range(rng, 0, vocab - 1);
    }
    return b;
}

/* ---- a whole model ------------------------------------------------------------------------------- */

/* A context made with RADIX_MLP_GPU_ROPE=value (the variable restored after). */
static rmlp_context *context_with(rmlp_model *model, size_t cap, const char *value) {
    const char *old = getenv("RADIX_MLP_GPU_ROPE");
    char *saved = old ? strdup(old) : NULL;
    setenv("RADIX_MLP_GPU_ROPE", value, 1);
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create(model, cap, &ctx);
    if (saved) setenv("RADIX_MLP_GPU_ROPE", saved, 1);
    else unsetenv("RADIX_MLP_GPU_ROPE");
    free(saved);
    CHECK(status == RMLP_OK, "context with RADIX_MLP_GPU_ROPE=%s: %s", value, rmlp_last_error());
    rmlp_gpu_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (ctx != NULL)
        CHECK(rmlp_context_gpu_stats(ctx, &st) == RMLP_OK && st.cuda && st.rope_table == (strcmp(value, "table") == 0),
              "RADIX_MLP_GPU_ROPE=%s: stats say rope_table %d", value, st.rope_table);
    return ctx;
}

/* rmlp_forward's last hidden states (n_tokens, hidden) in the model's dtype, on the host; NULL on failure. */
static unsigned char *forward_bytes(rmlp_context *ctx, const rmlp_plan *plan, size_t bytes) {
    void *d_out = dev_alloc(bytes);
    unsigned char *out = NULL;
    if (CHECK(rmlp_context_set_plan(ctx, plan) == RMLP_OK && rmlp_forward(ctx, plan, NULL, NULL, d_out) == RMLP_OK,
              "forward: %s", rmlp_last_error())) {
        out = tu_xmalloc(bytes);
        CUDA_MUST(cudaDeviceSynchronize());
        CUDA_MUST(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
    }
    cudaFree(d_out);
    return out;
}

static void test_model(uint64_t *rng) {
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 512, .hidden_size = 256,
                             .intermediate_size = 512, .num_hidden_layers = 2, .num_attention_heads = 4,
                             .num_key_value_heads = 2, .head_dim = 64, .max_position_embeddings = 4096,
                             .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    char dir[] = "/tmp/test_gpu_rope-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 7) == 0, "writing the model in %s", dir)) return;
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error());
    for (int di = 0; di < 3 && planner != NULL; di += 2) { /* f32, bf16 */
        rmlp_model_params mp = rmlp_model_default_params();
        mp.device = RMLP_DEVICE_CUDA, mp.dtype = DTYPES[di];
        rmlp_model *model = NULL;
        if (!CHECK(rmlp_model_load(dir, &mp, &model) == RMLP_OK, "load %s: %s", DTYPE_NAMES[di], rmlp_last_error()))
            continue;
        tu_batch b = shared_prefix_batch(rng, 6, 300, 40, cfg.vocab_size); /* positions up to 339 */
        rmlp_plan plan;
        rmlp_plan_params pp = tu_params(1.0, 0);
        rmlp_context *table = context_with(model, b.n_tokens, "table");
        rmlp_context *sincos = context_with(model, b.n_tokens, "sincos");
        if (table != NULL && sincos != NULL &&
            CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK, "plan: %s",
                  rmlp_last_error())) {
            size_t bytes = b.n_tokens * cfg.hidden_size * elem_size(DTYPES[di]);
            unsigned char *a = forward_bytes(table, &plan, bytes), *s = forward_bytes(sincos, &plan, bytes);
            if (a != NULL && s != NULL)
                CHECK(memcmp(a, s, bytes) == 0, "model %s: the forward with the RoPE table differs from sincosf's",
                      DTYPE_NAMES[di]);
            printf("model %s: forward with the RoPE table and with sincosf: %s\n", DTYPE_NAMES[di],
                   a && s && memcmp(a, s, bytes) == 0 ? "identical" : "different");
            free(a), free(s);
        }
        rmlp_context_free(table), rmlp_context_free(sincos);
        tu_batch_free(&b);
        rmlp_model_free(model);
    }
    rmlp_planner_free(planner);
    tiny_model_remove(dir);
}

int main(void) {
    test_arguments();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%d passed before)\n", tu_passed);
        return tu_failed ? 1 : SKIP_CODE;
    }
    CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint64_t rng = 29;
    for (int di = 0; di < 3; di++) test_kernel(&rng, di), test_scaled(&rng, di);
    test_model(&rng);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
