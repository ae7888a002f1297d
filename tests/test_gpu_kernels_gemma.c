/*
 * test_gpu_kernels_gemma.c: the CUDA kernels the Gemma layers add (gpu/kernels.h) against the CPU
 * path's arithmetic (cpu/cpu_ops.h), in fp32, fp16 and bf16, on odd sizes (row and head sizes that
 * are and are not multiples of 8, so both the 16-byte and the element paths run):
 *   - gpu_add_rmsnorm with weight offset 1 (Gemma's 1 + w, the sum in fp32);
 *   - gpu_norm_add_rmsnorm: a sublayer's output normed and added onto the residual, then (or not)
 *     the next norm, with the output written over the sublayer's buffer as the layer does;
 *   - gpu_head_rmsnorm: Gemma 3's per-head q/k norm in place, on rows of fused qkv width;
 *   - gpu_gated_mul: GeGLU with GELU's tanh form and the exact GELU (and an unknown activation
 *     refused);
 *   - gpu_scale: the embedding times sqrt(hidden_size), the scale rounded to the dtype.
 * Outputs are poisoned (NaN) before each launch, so an unwritten element fails. Tolerances per dtype
 * are gpu_kernels_util.h's. Without a CUDA device it prints SKIP and exits 77.
 */
#include "gpu_kernels_util.h"

static const size_t DIMS[] = {64, 72, 100, 1000, 1001};

/* weight + 1, as GemmaRMSNorm forms it in fp32 (the CPU loader holds it so: model/weights.h). */
static float *plus_one(const float *w, size_t n) {
    float *out = tu_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) out[i] = w[i] + 1.0f;
    return out;
}

/* normed = rmsnorm(residual) * (1 + w): gpu_add_rmsnorm with offset 1. */
static void test_norm_plus_one(uint64_t *rng, int di) {
    rmlp_dtype dt = DTYPES[di];
    for (size_t a = 0; a < COUNT(DIMS); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++) {
            size_t dim = DIMS[a], rows = ROWS[b], n = rows * dim;
            float *res = random_values(rng, n, -2, 2, dt), *w = random_values(rng, dim, -0.3f, 0.3f, dt);
            float *w1 = plus_one(w, dim), *ref = tu_xmalloc(n * 4);
            cpu_rmsnorm(res, rows, dim, dim, w1, 1e-6, ref);
            void *d_res = upload(res, n, dt), *d_w = upload(w, dim, dt), *d_out = poisoned(n, dt);
            char what[128];
            snprintf(what, sizeof what, "add_rmsnorm offset 1 %s rows=%zu dim=%zu", DTYPE_NAMES[di], rows, dim);
            if (launched(gpu_add_rmsnorm(d_res, NULL, d_w, 1.0f, rows, dim, 1e-6, d_out, dt, stream), what)) {
                float *got = download_as(d_out, n, dt);
                compare(what, got, ref, n, TOLS[di]);
                free(got);
            }
            cudaFree(d_res), cudaFree(d_w), cudaFree(d_out);
            free(res), free(w), free(w1), free(ref);
        }
}

/* residual += rmsnorm(sub) * (1 + w_sub); normed = rmsnorm(residual) * (1 + w), normed over sub. */
static void test_norm_add_rmsnorm(uint64_t *rng, int di) {
    rmlp_dtype dt = DTYPES[di];
    for (size_t a = 0; a < COUNT(DIMS); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++)
            for (int with_next = 0; with_next < 2; with_next++) {
                size_t dim = DIMS[a], rows = ROWS[b], n = rows * dim;
                float *res = random_values(rng, n, -2, 2, dt), *sub = random_values(rng, n, -3, 3, dt);
                float *ws = random_values(rng, dim, -0.3f, 0.3f, dt), *wn = random_values(rng, dim, -0.3f, 0.3f, dt);
                float *ws1 = plus_one(ws, dim), *wn1 = plus_one(wn, dim);
                float *ref_res = tu_xmalloc(n * 4), *normed_sub = tu_xmalloc(n * 4), *ref = tu_xmalloc(n * 4);
                cpu_rmsnorm(sub, rows, dim, dim, ws1, 1e-6, normed_sub);
                for (size_t i = 0; i < n; i++) ref_res[i] = res[i] + round_to(dt, normed_sub[i]);
                cpu_rmsnorm(ref_res, rows, dim, dim, wn1, 1e-6, ref);
                void *d_res = upload(res, n, dt), *d_sub = upload(sub, n, dt), *d_ws = upload(ws, dim, dt);
                void *d_wn = upload(wn, dim, dt);
                char what[128];
                snprintf(what, sizeof what, "norm_add_rmsnorm %s rows=%zu dim=%zu next=%d", DTYPE_NAMES[di], rows,
                         dim, with_next);
                if (launched(gpu_norm_add_rmsnorm(d_res, d_sub, d_ws, with_next ? d_wn : NULL, 1.0f, rows, dim, 1e-6,
                                                  with_next ? d_sub : NULL, dt, stream),
                             what)) {
                    float *got_res = download_as(d_res, n, dt);
                    if (with_next) {
                        float *got = download_as(d_sub, n, dt);
                        compare(what, got, ref, n, TOLS[di]);
                        free(got);
                    }
                    strcat(what, " (residual)");
                    compare(what, got_res, ref_res, n, TOLS[di]);
                    free(got_res);
                }
                cudaFree(d_res), cudaFree(d_sub), cudaFree(d_ws), cudaFree(d_wn);
                free(res), free(sub), free(ws), free(wn), free(ws1), free(wn1), free(ref_res), free(normed_sub),
                    free(ref);
            }
}

/* Each of the first `heads` heads of qkv-wide rows normed in place with 1 + w; the rest untouched. */
static void test_head_rmsnorm(uint64_t *rng, int di) {
    static const size_t head_dims[] = {16, 24, 100, 256};
    rmlp_dtype dt = DTYPES[di];
    for (size_t a = 0; a < COUNT(head_dims); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++) {
            size_t hd = head_dims[a], rows = ROWS[b], heads = 3, stride = (heads + 2) * hd, n = rows * stride;
            float *x = random_values(rng, n, -2, 2, dt), *w = random_values(rng, hd, -0.3f, 0.3f, dt);
            float *w1 = plus_one(w, hd), *ref = tu_xmalloc(n * 4);
            memcpy(ref, x, n * 4);
            for (size_t h = 0; h < heads; h++) cpu_rmsnorm(x + h * hd, rows, hd, stride, w1, 1e-6, ref + h * hd);
            void *d_x = upload(x, n, dt), *d_w = upload(w, hd, dt);
            char what[128];
            snprintf(what, sizeof what, "head_rmsnorm %s rows=%zu head_dim=%zu", DTYPE_NAMES[di], rows, hd);
            if (launched(gpu_head_rmsnorm(d_x, stride, rows, heads, hd, d_w, 1.0f, 1e-6, dt, stream), what)) {
                float *got = download_as(d_x, n, dt);
                compare(what, got, ref, n, TOLS[di]);
                free(got);
            }
            cudaFree(d_x), cudaFree(d_w);
            free(x), free(w), free(w1), free(ref);
        }
}

/* out = act(gate) * up for GELU's tanh form and the exact GELU. */
static void test_gated_mul(uint64_t *rng, int di) {
    static const rmlp_activation acts[] = {RMLP_ACTIVATION_GELU_TANH, RMLP_ACTIVATION_GELU};
    rmlp_dtype dt = DTYPES[di];
    for (size_t k = 0; k < COUNT(acts); k++)
        for (size_t a = 0; a < COUNT(DIMS); a++)
            for (size_t b = 0; b < COUNT(ROWS); b++) {
                size_t inter = DIMS[a], rows = ROWS[b];
                float *gu = random_values(rng, rows * 2 * inter, -6, 6, dt), *ref = tu_xmalloc(rows * inter * 4);
                (acts[k] == RMLP_ACTIVATION_GELU ? cpu_gelu_mul : cpu_gelu_tanh_mul)(gu, rows, inter, ref);
                void *d_gu = upload(gu, rows * 2 * inter, dt), *d_out = poisoned(rows * inter, dt);
                char what[128];
                snprintf(what, sizeof what, "gated_mul %s %s rows=%zu inter=%zu",
                         acts[k] == RMLP_ACTIVATION_GELU ? "gelu" : "gelu_tanh", DTYPE_NAMES[di], rows, inter);
                if (launched(gpu_gated_mul(d_gu, rows, inter, d_out, acts[k], dt, stream), what)) {
                    float *got = download_as(d_out, rows * inter, dt);
                    compare(what, got, ref, rows * inter, TOLS[di]);
                    free(got);
                }
                cudaFree(d_gu), cudaFree(d_out);
                free(gu), free(ref);
            }
}

/* x *= sqrt(hidden) rounded to the dtype (bf16: 55.5 for 3072, as transformers' normalizer). */
static void test_scale(uint64_t *rng, int di) {
    rmlp_dtype dt = DTYPES[di];
    const size_t n = 3 * 1001;
    const double scale = sqrt(3072.0);
    float *x = random_values(rng, n, -2, 2, dt), *ref = tu_xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) ref[i] = x[i] * round_to(dt, (float)scale);
    void *d_x = upload(x, n, dt);
    char what[64];
    snprintf(what, sizeof what, "scale %s", DTYPE_NAMES[di]);
    if (launched(gpu_scale(d_x, n, scale, dt, stream), what)) {
        float *got = download_as(d_x, n, dt);
        compare(what, got, ref, n, TOLS[di]);
        free(got);
    }
    cudaFree(d_x);
    free(x), free(ref);
}

static void test_arguments(void) {
    CHECK(gpu_gated_mul(NULL, 1, 8, NULL, (rmlp_activation)7, RMLP_DTYPE_F32, stream) == cudaErrorInvalidValue,
          "gated_mul: an unknown activation");
    CHECK(gpu_head_rmsnorm(NULL, 15, 1, 2, 8, NULL, 1.0f, 1e-6, RMLP_DTYPE_F32, stream) == cudaErrorInvalidValue,
          "head_rmsnorm: stride < heads * head_dim");
    CHECK(gpu_norm_add_rmsnorm(NULL, NULL, NULL, (void *)1, 1.0f, 1, 8, 1e-6, NULL, RMLP_DTYPE_F32, stream) ==
              cudaErrorInvalidValue,
          "norm_add_rmsnorm: a next norm without its output");
    CHECK(gpu_scale(NULL, 0, 2.0, RMLP_DTYPE_BF16, stream) == cudaSuccess, "scale: nothing to do");
}

int main(void) {
    int rc = gpu_kernels_begin();
    if (rc >= 0) return rc;
    uint64_t rng = 0x6E77Au;
    test_arguments();
    for (int di = 0; di < (int)COUNT(DTYPES); di += gpu_kernels_dtype_step()) {
        test_norm_plus_one(&rng, di);
        test_norm_add_rmsnorm(&rng, di);
        test_head_rmsnorm(&rng, di);
        test_gated_mul(&rng, di);
        test_scale(&rng, di);
    }
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
