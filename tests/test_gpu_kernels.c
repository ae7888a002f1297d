/*
 * test_gpu_kernels.c: every CUDA kernel of gpu/kernels.h against the CPU path of cpu/cpu_ops.h
 * (attention in both layouts, the compact one on planner-built plans; a decode step's attention by
 * chains against cpu/decode_attention.h),
 * in fp32, fp16 and bf16, on odd sizes (1, 3, 7, 19, 733 rows; row and head sizes that are and
 * are not multiples of 8, so both the 16-byte and the element paths run; misaligned strides
 * and pointers). Inputs are drawn in fp32 and rounded to the dtype; the GPU gets them in the
 * dtype and the CPU reference the same rounded values in fp32. Outputs are poisoned (0xFF
 * bytes: NaN in every dtype) before each launch, so an unwritten element fails; NaN always
 * fails. Tolerances per dtype are in TOLS. First, and on any machine, cuBLAS's loading (gpu/blas.cu,
 * no device needed); then without a CUDA device it prints SKIP and exits 77.
 * RMLP_GPU_KERNELS_QUICK=1 skips f16 (for the compute-sanitizer runs of gpu/first_run.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "blas.h"
#include "cpu_ops.h"
#include "decode_attention.h"
#include "kernels.h"
#include "test_util.h"
#include "gpu_test_util.h"
#include "rope_reference.h"

#define SKIP_CODE 77

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
static const size_t ROWS[] = {1, 3, 7, 19, 733};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Per dtype (tol: gpu_test_util.h). fp32: the GPU does the CPU's arithmetic in another order (and
 * with FMA); fp16/bf16: outputs rounded once (half an ulp: 2^-11, 2^-8 relative), the residual
 * once more before the norm. */
static const tol TOLS[] = {{1e-5, 1e-5, 1e-5}, {1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}};
static const tol EXACT = {0, 0, 0};

static cudaStream_t stream;

static int launched(cudaError_t error, const char *what) { return launched_on(error, what, stream); }

/* ---- the kernels ---------------------------------------------------------------------------- */

/* Rows of a table picked by a random index, at strides and offsets that do and do not allow
 * 16-byte vectors; a bitwise copy, so exact. */
static void test_gather_rows(uint64_t *rng, int di) {
    static const size_t dims[] = {64, 72, 100, 1000, 1001};
    rmlp_dtype dt = DTYPES[di];
    for (size_t a = 0; a < COUNT(dims); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++)
            for (int variant = 0; variant < 4; variant++) { /* dense; odd stride; padded; padded, pointers + 1 */
                size_t dim = dims[a], rows = ROWS[b], src_rows = 257;
                size_t stride = dim + (variant == 1 ? 3 : variant >= 2 ? 8 : 0), off = variant == 3;
                float *src = random_values(rng, src_rows * stride + off, -2, 2, dt), *ref = tu_xmalloc(rows * dim * 4);
                uint32_t *index = tu_xmalloc(rows * sizeof(uint32_t));
                for (size_t r = 0; r < rows; r++) index[r] = tu_rand_range(rng, 0, (uint32_t)src_rows - 1);
                cpu_gather_rows(src + off, stride, index, rows, dim, ref);

                unsigned char *d_src = upload(src, src_rows * stride + off, dt),
                              *d_dst = poisoned(rows * dim + off, dt);
                uint32_t *d_index = upload_u32(index, rows);
                size_t es = elem_size(dt);
                char what[128];
                snprintf(what, sizeof what, "gather_rows %s rows=%zu dim=%zu stride=%zu offset=%zu", DTYPE_NAMES[di],
                         rows, dim, stride, off);
                if (launched(
                        gpu_gather_rows(d_dst + off * es, d_src + off * es, stride, d_index, rows, dim, dt, stream),
                        what)) {
                    float *got = download_as(d_dst + off * es, rows * dim, dt);
                    compare(what, got, ref, rows * dim, EXACT);
                    free(got);
                }
                cudaFree(d_src), cudaFree(d_dst), cudaFree(d_index);
                free(src), free(ref), free(index);
            }
}

/* dst[r] += bias on rows at strides and offsets that do and do not allow 16-byte vectors: the
 * sum in fp32 rounded once to the dtype, so exact against the same rounding on the host; the
 * columns past dim (a padded stride) stay as they were. */
static void test_add_row(uint64_t *rng, int di) {
    static const size_t dims[] = {64, 72, 100, 1001};
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt);
    for (size_t a = 0; a < COUNT(dims); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++)
            for (int variant = 0; variant < 3; variant++) { /* dense; padded stride; padded, pointers + 1 */
                size_t dim = dims[a], rows = ROWS[b], stride = dim + (variant ? 8 : 0), off = variant == 2;
                size_t n = rows * stride + off;
                float *dst = random_values(rng, n, -2, 2, dt), *bias = random_values(rng, dim + off, -1, 1, dt);
                float *ref = tu_xmalloc(n * sizeof(float));
                memcpy(ref, dst, n * sizeof(float));
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < dim; c++)
                        ref[off + r * stride + c] = round_to(dt, dst[off + r * stride + c] + bias[off + c]);
                unsigned char *d_dst = upload(dst, n, dt), *d_bias = upload(bias, dim + off, dt);
                char what[128];
                snprintf(what, sizeof what, "add_row %s rows=%zu dim=%zu stride=%zu offset=%zu", DTYPE_NAMES[di], rows,
                         dim, stride, off);
                if (launched(gpu_add_row(d_dst + off * es, stride, d_bias + off * es, rows, dim, dt, stream), what)) {
                    float *got = download_as(d_dst, n, dt);
                    compare(what, got, ref, n, EXACT);
                    free(got);
                }
                cudaFree(d_dst), cudaFree(d_bias);
                free(dst), free(bias), free(ref);
            }
}

/* residual += add (or not), normed = rmsnorm(residual) * weight. */
static void test_add_rmsnorm(uint64_t *rng, int di) {
    static const size_t dims[] = {64, 72, 100, 1000, 1001, 5000};
    rmlp_dtype dt = DTYPES[di];
    const double eps = 1e-6;
    for (size_t a = 0; a < COUNT(dims); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++)
            for (int with_add = 0; with_add < 2; with_add++) {
                size_t dim = dims[a], rows = ROWS[b], n = rows * dim;
                float *res = random_values(rng, n, -2, 2, dt), *add = random_values(rng, n, -1, 1, dt);
                float *w = random_values(rng, dim, 0.5f, 1.5f, dt), *ref_res = tu_xmalloc(n * 4),
                      *ref = tu_xmalloc(n * 4);
                memcpy(ref_res, res, n * 4);
                if (with_add) cpu_add(ref_res, add, rows, dim);
                cpu_rmsnorm(ref_res, rows, dim, dim, w, eps, ref);

                void *d_res = upload(res, n, dt), *d_add = upload(add, n, dt), *d_w = upload(w, dim, dt);
                void *d_out = poisoned(n, dt);
                char what[128];
                snprintf(what, sizeof what, "add_rmsnorm %s rows=%zu dim=%zu add=%d", DTYPE_NAMES[di], rows, dim,
                         with_add);
                if (launched(gpu_add_rmsnorm(d_res, with_add ? d_add : NULL, d_w, rows, dim, eps, d_out, dt, stream),
                             what)) {
                    float *got = download_as(d_out, n, dt), *got_res = download_as(d_res, n, dt);
                    compare(what, got, ref, n, TOLS[di]);
                    strcat(what, " (residual)");
                    compare(what, got_res, ref_res, n, with_add ? TOLS[di] : EXACT);
                    free(got), free(got_res);
                }
                cudaFree(d_res), cudaFree(d_add), cudaFree(d_w), cudaFree(d_out);
                free(res), free(add), free(w), free(ref_res), free(ref);
            }
}

/* Columns [col, col + width) of x (rows, stride) into a dense (rows, width + pad) array. */
static float *columns(const float *x, size_t rows, size_t stride, size_t col, size_t width, size_t pad) {
    float *out = tu_xmalloc(rows * (width + pad) * sizeof(float) + 1);
    for (size_t r = 0; r < rows; r++) {
        memcpy(out + r * (width + pad), x + r * stride + col, width * sizeof(float));
        for (size_t c = 0; c < pad; c++) out[r * (width + pad) + width + c] = (float)c;
    }
    return out;
}

/* Per-head q/k RMSNorm (or none) and RoPE in place: on fused qkv rows (v and padding untouched),
 * and on separate q and k buffers (the identity plan's layout). */
static void test_qk_norm_rope(uint64_t *rng, int di) {
    static const size_t head_dims[] = {16, 20, 24, 64, 128, 256};
    static const size_t heads[][2] = {{4, 1}, {3, 3}};
    rmlp_dtype dt = DTYPES[di];
    const double eps = 1e-6;
    for (size_t a = 0; a < COUNT(head_dims); a++)
        for (size_t h = 0; h < COUNT(heads); h++)
            for (size_t b = 0; b < COUNT(ROWS); b++)
                for (int variant = 0; variant < 8; variant++) { /* bit 0: q/k norm; 1: padded rows; 2: split */
                    size_t hd = head_dims[a], nq = heads[h][0], nkv = heads[h][1], rows = ROWS[b];
                    int norm = variant & 1, split = (variant & 4) != 0;
                    size_t pad = variant & 2 ? 4 : 0, width = (nq + 2 * nkv) * hd, stride = width + pad;
                    size_t n = rows * stride;
                    double theta = norm ? 1e6 : 1e4;
                    float *qkv = random_values(rng, n, -2, 2, dt), *ref = tu_xmalloc(n * 4);
                    float *qn = random_values(rng, hd, 0.5f, 1.5f, dt), *kn = random_values(rng, hd, 0.5f, 1.5f, dt);
                    uint32_t *pos = tu_xmalloc(rows * sizeof(uint32_t));
                    for (size_t r = 0; r < rows; r++) pos[r] = r < 3 ? (uint32_t)r : tu_rand_range(rng, 0, 40959);
                    memcpy(ref, qkv, n * 4);
                    qk_norm_rope_reference(ref, rows, stride, nq, nkv, hd, norm ? qn : NULL, kn, eps, pos, theta);

                    void *d_qn = upload(qn, hd, dt), *d_kn = upload(kn, hd, dt);
                    uint32_t *d_pos = upload_u32(pos, rows);
                    char what[160];
                    snprintf(what, sizeof what,
                             "qk_norm_rope %s rows=%zu heads=%zu/%zu head_dim=%zu %s=%zu norm=%d", DTYPE_NAMES[di],
                             rows, nq, nkv, hd, split ? "split, pad" : "fused, stride", split ? pad : stride, norm);
                    if (!split) {
                        void *d_qkv = upload(qkv, n, dt);
                        char *base = d_qkv;
                        if (launched(gpu_qk_norm_rope(d_qkv, stride, base + nq * hd * elem_size(dt), stride, rows, nq,
                                                      nkv, hd, norm ? d_qn : NULL, norm ? d_kn : NULL, d_pos, NULL,
                                                      theta, eps, dt, stream),
                                     what)) {
                            float *got = download_as(d_qkv, n, dt);
                            compare(what, got, ref, n, TOLS[di]);
                            size_t changed = 0; /* v and padding: bit for bit */
                            for (size_t r = 0; r < rows; r++)
                                for (size_t c = (nq + nkv) * hd; c < stride; c++)
                                    changed += bits_of(got[r * stride + c]) != bits_of(qkv[r * stride + c]);
                            CHECK(changed == 0, "%s: %zu elements of v or padding changed", what, changed);
                            free(got);
                        }
                        cudaFree(d_qkv);
                    } else { /* q (rows, nq hd + pad) and k (rows, nkv hd + pad), two allocations */
                        size_t qs = nq * hd + pad, ks = nkv * hd + pad;
                        float *q = columns(qkv, rows, stride, 0, nq * hd, pad), *q_ref = columns(ref, rows, stride, 0, nq * hd, pad);
                        float *k = columns(qkv, rows, stride, nq * hd, nkv * hd, pad);
                        float *k_ref = columns(ref, rows, stride, nq * hd, nkv * hd, pad);
                        for (size_t r = 0; r < rows; r++) /* the padding stays as it was */
                            for (size_t c = 0; c < pad; c++)
                                q_ref[r * qs + nq * hd + c] = q[r * qs + nq * hd + c],
                                k_ref[r * ks + nkv * hd + c] = k[r * ks + nkv * hd + c];
                        void *d_q = upload(q, rows * qs, dt), *d_k = upload(k, rows * ks, dt);
                        if (launched(gpu_qk_norm_rope(d_q, qs, d_k, ks, rows, nq, nkv, hd, norm ? d_qn : NULL,
                                                      norm ? d_kn : NULL, d_pos, NULL, theta, eps, dt, stream),
                                     what)) {
                            float *got_q = download_as(d_q, rows * qs, dt), *got_k = download_as(d_k, rows * ks, dt);
                            compare(what, got_q, q_ref, rows * qs, TOLS[di]);
                            compare(what, got_k, k_ref, rows * ks, TOLS[di]);
                            free(got_q), free(got_k);
                        }
                        cudaFree(d_q), cudaFree(d_k);
                        free(q), free(q_ref), free(k), free(k_ref);
                    }
                    cudaFree(d_qn), cudaFree(d_kn), cudaFree(d_pos);
                    free(qkv), free(ref), free(qn), free(kn), free(pos);
                }
}

/* out = silu(gate) * up. */
static void test_silu_mul(uint64_t *rng, int di) {
    static const size_t inters[] = {64, 72, 100, 1000, 1001, 3072};
    rmlp_dtype dt = DTYPES[di];
    for (size_t a = 0; a < COUNT(inters); a++)
        for (size_t b = 0; b < COUNT(ROWS); b++) {
            size_t inter = inters[a], rows = ROWS[b];
            float *gu = random_values(rng, rows * 2 * inter, -6, 6, dt), *ref = tu_xmalloc(rows * inter * 4);
            cpu_silu_mul(gu, rows, inter, ref);
            void *d_gu = upload(gu, rows * 2 * inter, dt), *d_out = poisoned(rows * inter, dt);
            char what[128];
            snprintf(what, sizeof what, "silu_mul %s rows=%zu inter=%zu", DTYPE_NAMES[di], rows, inter);
            if (launched(gpu_silu_mul(d_gu, rows, inter, d_out, dt, stream), what)) {
                float *got = download_as(d_out, rows * inter, dt);
                compare(what, got, ref, rows * inter, TOLS[di]);
                free(got);
            }
            cudaFree(d_gu), cudaFree(d_out);
            free(gu), free(ref);
        }
}

/* Causal varlen attention over batches of uneven sequences (one empty), GQA 4:1 and 1:1. */
static void test_attention(uint64_t *rng, int di) {
    static const uint32_t batches[][4] = {{1, 5, 67, 130}, {17, 0, 64, 33}, {15, 16, 33, 1}, {16, 16, 0, 31}};
    static const size_t head_dims[] = {16, 20, 24, 128, 256};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    for (size_t bi = 0; bi < COUNT(batches); bi++)
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++) {
                size_t n_seqs = 4, max_len = 0, hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1];
                uint32_t cu[5] = {0};
                for (size_t s = 0; s < n_seqs; s++) {
                    cu[s + 1] = cu[s] + batches[bi][s];
                    if (batches[bi][s] > max_len) max_len = batches[bi][s];
                }
                size_t nt = cu[n_seqs], nq = nt * nh * hd, nk = nt * nkv * hd;
                float scale = 1.0f / sqrtf((float)hd);
                float *q = random_values(rng, nq, -3, 3, dt), *k = random_values(rng, nk, -1, 1, dt);
                float *v = random_values(rng, nk, -1, 1, dt), *ref = tu_xmalloc(nq * 4);
                float *scratch = tu_xmalloc(cpu_attention_scratch_floats(max_len, hd) * 4);
                cpu_attention(q, k, v, cu, n_seqs, nh, nkv, hd, scale, scratch, ref);

                void *d_q = upload(q, nq, dt), *d_k = upload(k, nk, dt), *d_v = upload(v, nk, dt);
                void *d_out = poisoned(nq, dt);
                uint32_t *d_cu = upload_u32(cu, n_seqs + 1);
                char what[160];
                snprintf(what, sizeof what, "attention %s lengths=%u,%u,%u,%u heads=%zu/%zu head_dim=%zu",
                         DTYPE_NAMES[di], batches[bi][0], batches[bi][1], batches[bi][2], batches[bi][3], nh, nkv, hd);
                if (launched(
                        gpu_attention(d_q, d_k, d_v, d_out, d_cu, n_seqs, nt, nh, nkv, hd, scale, dt, stream),
                        what)) {
                    float *got = download_as(d_out, nq, dt);
                    compare(what, got, ref, nq, TOLS[di]);
                    free(got);
                }
                cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_cu);
                free(q), free(k), free(v), free(ref), free(scratch);
            }
}

/* qo_indptr (n_seqs + 1): the compact rows whose first occurrence lies in sequence s. */
static void owned_ranges(const rmlp_plan *plan, uint32_t *qo_indptr) {
    uint32_t j = 0;
    for (uint32_t s = 0; s <= plan->n_seqs; s++) {
        while (j < plan->n_compact && plan->fold_gather[j] < plan->cu_seqlens[s]) j++;
        qo_indptr[s] = j;
    }
}

/* Attention in compact space against cpu_compact_attention on planner-built plans of batches
 * sharing prefixes (deep trees, empty sequences), GQA 4:1 and 1:1; q/k/v separate or the columns
 * of one fused buffer; the rows past n_compact must stay untouched. */
static void test_compact_attention(uint64_t *rng, int di) {
    static const tu_batch_shape shapes[] = {{1, 40, 3, 0, 0}, {9, 70, 2, 33, 0}, {24, 20, 2, 17, 0},
                                            {5, 150, 50, 100, 0}};
    static const size_t head_dims[] = {20, 64, 128};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt);
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    rmlp_plan_params params = tu_params(1.0, 0);
    for (size_t sh = 0; sh < COUNT(shapes); sh++) {
        tu_batch b = tu_random_batch(rng, &shapes[sh]);
        rmlp_plan plan;
        if (b.n_tokens == 0 ||
            !CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plan) == RMLP_OK,
                   "plan: %s", rmlp_last_error())) {
            tu_batch_free(&b);
            continue;
        }
        size_t nc = plan.n_compact, ns = plan.n_seqs, longest = 0;
        for (size_t s = 0; s < ns; s++)
            if (b.cu[s + 1] - b.cu[s] > longest) longest = b.cu[s + 1] - b.cu[s];
        uint32_t *qo = tu_xmalloc((ns + 1) * sizeof(uint32_t));
        owned_ranges(&plan, qo);
        uint32_t *d_qo = upload_u32(qo, ns + 1), *d_cu = upload_u32(b.cu, ns + 1);
        uint32_t *d_idx = upload_u32(plan.scatter, b.n_tokens);
        float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, 256) * 4);
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++)
                for (int fused = 0; fused < 2; fused++) {
                    size_t hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1];
                    size_t qd = nh * hd, kvd = nkv * hd, width = qd + 2 * kvd, extra = 3;
                    float *qkv = random_values(rng, nc * width, -3, 3, dt), *ref = tu_xmalloc(nc * qd * 4);
                    size_t qs = fused ? width : qd, ks = fused ? width : kvd;
                    /* separate: q, k, v packed one after the other, each dense */
                    const float *q = qkv, *k = fused ? qkv + qd : qkv + nc * qd;
                    const float *v = fused ? qkv + qd + kvd : qkv + nc * (qd + kvd);
                    cpu_attention_rows rows = {q, k, v, ref, qs, ks, ks, qd, 0};
                    float scale = 1.0f / sqrtf((float)hd);
                    cpu_compact_attention(&rows, qo, b.cu, plan.scatter, ns, nh, nkv, hd, scale, scratch);
                    void *d_qkv = upload(qkv, nc * width, dt), *d_out = poisoned((nc + extra) * qd, dt);
                    char *base = d_qkv;
                    gpu_compact_rows d_rows = {base, base + (size_t)(k - qkv) * es, base + (size_t)(v - qkv) * es,
                                               d_out, qs, ks, ks, qd};
                    char what[200];
                    snprintf(what, sizeof what, "compact attention %s N=%zu N'=%zu seqs=%zu heads=%zu/%zu "
                             "head_dim=%zu %s", DTYPE_NAMES[di], b.n_tokens, nc, ns, nh, nkv, hd,
                             fused ? "fused" : "separate");
                    if (launched(gpu_compact_attention(&d_rows, d_qo, d_cu, d_idx, ns, nc, nh, nkv, hd, scale, dt,
                                                       stream),
                                 what)) {
                        float *got = download_as(d_out, (nc + extra) * qd, dt);
                        compare(what, got, ref, nc * qd, TOLS[di]);
                        size_t written = 0;
                        for (size_t i = nc * qd; i < (nc + extra) * qd; i++) written += !isnan(got[i]);
                        CHECK(written == 0, "%s: %zu elements past the compact rows written", what, written);
                        free(got);
                    }
                    cudaFree(d_qkv), cudaFree(d_out);
                    free(qkv), free(ref);
                }
        cudaFree(d_qo), cudaFree(d_cu), cudaFree(d_idx);
        free(qo), free(scratch);
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
}

/* A decode step's attention by chains (gpu_chain_attention, then gpu_merge_states) against
 * cpu_decode_attention: queries whose paths share a prefix of P slots, subgroups sharing more, each
 * path ending in the query's own slot; the chains cut with and without shared prefixes
 * (decode_build_chains), GQA 4:1 and 1:1, head_dim 20, 128 and 256 (the kernel's largest tile and
 * its shared-memory opt-in); the device gets the chains packed as generate.c packs them. */
static void test_chain_attention(uint64_t *rng, int di) {
    enum { QUERIES = 40, SLOTS = 120 + QUERIES * 30, MAX_PATH = 120 }; /* > 16 queries: a chain over several tiles */
    static const size_t head_dims[] = {20, 128, 256};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    uint32_t paths[QUERIES * MAX_PATH], len[QUERIES], next = 0;
    uint32_t common = tu_rand_range(rng, 1, 60), group_len[3];
    for (int g = 0; g < 3; g++) group_len[g] = tu_rand_range(rng, 0, 20);
    for (uint32_t r = 0; r < QUERIES; r++) { /* common prefix, then the group's part, then its own */
        uint32_t *p = paths + r * MAX_PATH, g = r % 3, own = tu_rand_range(rng, 1, 30), n = 0;
        for (uint32_t i = 0; i < common; i++) p[n++] = i;
        for (uint32_t i = 0; i < group_len[g]; i++) p[n++] = 60 + g * 20 + i;
        for (uint32_t i = 0; i < own; i++) p[n++] = 120 + next++;
        len[r] = n;
    }
    uint32_t *below = calloc(SLOTS, 4), *chain_of = malloc(SLOTS * 4);
    memset(chain_of, 0xFF, SLOTS * 4);
    decode_chain *chains = malloc(decode_max_chains(QUERIES) * sizeof *chains);
    uint32_t *members = malloc(decode_max_members(QUERIES, MAX_PATH) * 4);
    for (int shared = 0; shared < 2; shared++)
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++) {
                size_t hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1], qd = nh * hd, kvd = nkv * hd;
                size_t nc = decode_build_chains(paths, MAX_PATH, len, QUERIES, shared, below, chain_of, chains, members);
                /* packed: keys and members by chain, memberships by row */
                uint32_t kptr[2 * QUERIES + 2] = {0}, mptr[2 * QUERIES + 2] = {0}, rptr[QUERIES + 1] = {0};
                uint32_t keys[QUERIES * MAX_PATH], rows_of[QUERIES * MAX_PATH], fill[QUERIES] = {0};
                for (size_t c = 0; c < nc; c++) {
                    memcpy(keys + kptr[c], chains[c].keys, chains[c].n_keys * 4);
                    kptr[c + 1] = kptr[c] + chains[c].n_keys, mptr[c + 1] = chains[c].first + chains[c].count;
                }
                uint32_t n_members = mptr[nc];
                for (uint32_t i = 0; i < n_members; i++) rptr[members[i] + 1]++;
                for (uint32_t r = 0; r < QUERIES; r++) rptr[r + 1] += rptr[r];
                for (uint32_t i = 0; i < n_members; i++) rows_of[rptr[members[i]] + fill[members[i]]++] = i;
                float *q = random_values(rng, QUERIES * qd, -3, 3, dt), *k = random_values(rng, SLOTS * kvd, -1, 1, dt);
                float *v = random_values(rng, SLOTS * kvd, -1, 1, dt), *ref = tu_xmalloc(QUERIES * qd * 4);
                float *scratch = tu_xmalloc(decode_scratch_floats(QUERIES, nh, nkv, hd, 1) * 4);
                float scale = 1.0f / sqrtf((float)hd);
                cpu_attention_rows rows = {q, k, v, ref, qd, kvd, kvd, qd, 0};
                cpu_decode_attention(&rows, chains, nc, members, QUERIES, nh, nkv, hd, scale, NULL, scratch);
                void *d_q = upload(q, QUERIES * qd, dt), *d_k = upload(k, SLOTS * kvd, dt), *d_v = upload(v, SLOTS * kvd, dt);
                void *d_out = poisoned(QUERIES * qd, dt);
                float *d_state = dev_alloc(n_members * nh * (hd + 2) * 4);
                uint32_t *d_kptr = upload_u32(kptr, nc + 1), *d_keys = upload_u32(keys, kptr[nc]);
                uint32_t *d_mptr = upload_u32(mptr, nc + 1), *d_members = upload_u32(members, n_members);
                uint32_t *d_rptr = upload_u32(rptr, QUERIES + 1), *d_rows = upload_u32(rows_of, n_members);
                gpu_compact_rows d_rows_at = {d_q, d_k, d_v, NULL, qd, kvd, kvd, qd};
                gpu_chain_layout lay = {d_kptr, d_keys, d_mptr, d_members, nc, n_members};
                char what[200];
                snprintf(what, sizeof what, "chain attention %s %s chains=%zu memberships=%u heads=%zu/%zu head_dim=%zu",
                         DTYPE_NAMES[di], shared ? "shared" : "per path", nc, n_members, nh, nkv, hd);
                if (launched(gpu_chain_attention(&d_rows_at, &lay, nh, nkv, hd, scale, d_state, dt, stream), what) &&
                    launched(gpu_merge_states(d_state, d_rptr, d_rows, QUERIES, nh, hd, d_out, qd, dt, stream), what)) {
                    float *got = download_as(d_out, QUERIES * qd, dt);
                    compare(what, got, ref, QUERIES * qd, TOLS[di]);
                    free(got);
                }
                cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_state);
                cudaFree(d_kptr), cudaFree(d_keys), cudaFree(d_mptr), cudaFree(d_members), cudaFree(d_rptr), cudaFree(d_rows);
                free(q), free(k), free(v), free(ref), free(scratch);
            }
    free(below), free(chain_of), free(chains), free(members);
    /* a row with no membership (no key at all) merges to zeros, not 0/0 */
    uint32_t no_members[2] = {0, 0};
    uint32_t *d_none = upload_u32(no_members, 2);
    void *d_out = poisoned(2 * 8, dt);
    if (launched(gpu_merge_states((const float *)d_none, d_none, d_none, 1, 2, 8, d_out, 16, dt, stream),
                 "merge of a row with no membership")) {
        float *got = download_as(d_out, 2 * 8, dt);
        int zeros = 1;
        for (int i = 0; i < 2 * 8; i++) zeros &= got[i] == 0.0f;
        CHECK(zeros, "%s: merge of a row with no membership: not all zeros (first %g)", DTYPE_NAMES[di], got[0]);
        free(got);
    }
    cudaFree(d_none), cudaFree(d_out);
}

/* The launchers recorded into a CUDA graph (stream capture, global mode) and replayed: RoPE
 * (its frequency table is a by-value kernel parameter) and attention at head_dim 256 (it raises
 * the kernel's shared-memory limit while capturing). */
static void test_graph_capture(uint64_t *rng) {
    const rmlp_dtype dt = RMLP_DTYPE_BF16;
    const int di = 2;
    const size_t rows = 19, nq = 4, nkv = 1, hd = 128, stride = (nq + 2 * nkv) * hd;
    const size_t ahd = 256, anh = 8, ankv = 2, n_seqs = 2;
    uint32_t cu[3] = {0, 67, 67 + 130};
    size_t nt = cu[2], an = nt * anh * ahd, ak = nt * ankv * ahd;
    float scale = 1.0f / sqrtf((float)ahd);

    float *qkv = random_values(rng, rows * stride, -2, 2, dt), *qkv_ref = tu_xmalloc(rows * stride * 4);
    float *qn = random_values(rng, hd, 0.5f, 1.5f, dt), *kn = random_values(rng, hd, 0.5f, 1.5f, dt);
    uint32_t pos[19];
    for (size_t r = 0; r < rows; r++) pos[r] = tu_rand_range(rng, 0, 4095);
    memcpy(qkv_ref, qkv, rows * stride * 4);
    qk_norm_rope_reference(qkv_ref, rows, stride, nq, nkv, hd, qn, kn, 1e-6, pos, 1e6);
    float *q = random_values(rng, an, -3, 3, dt), *k = random_values(rng, ak, -1, 1, dt);
    float *v = random_values(rng, ak, -1, 1, dt), *attn_ref = tu_xmalloc(an * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(130, ahd) * 4);
    cpu_attention(q, k, v, cu, n_seqs, anh, ankv, ahd, scale, scratch, attn_ref);

    void *d_qkv = upload(qkv, rows * stride, dt), *d_qn = upload(qn, hd, dt), *d_kn = upload(kn, hd, dt);
    uint32_t *d_pos = upload_u32(pos, rows), *d_cu = upload_u32(cu, n_seqs + 1);
    void *d_q = upload(q, an, dt), *d_k = upload(k, ak, dt), *d_v = upload(v, ak, dt), *d_out = poisoned(an, dt);
    CUDA_MUST(cudaDeviceSynchronize());

    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    cudaError_t e1 = gpu_qk_norm_rope(d_qkv, stride, (char *)d_qkv + nq * hd * elem_size(dt), stride, rows, nq, nkv, hd,
                                      d_qn, d_kn, d_pos, NULL, 1e6, 1e-6, dt, stream);
    cudaError_t e2 = gpu_attention(d_q, d_k, d_v, d_out, d_cu, n_seqs, nt, anh, ankv, ahd, scale, dt, stream);
    cudaError_t e3 = cudaStreamEndCapture(stream, &graph);
    CHECK(e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess, "graph capture: rope %s, attention %s, end %s",
          cudaGetErrorString(e1), cudaGetErrorString(e2), cudaGetErrorString(e3));
    if (e3 == cudaSuccess) {
        CUDA_MUST(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_MUST(cudaGraphLaunch(exec, stream));
        CUDA_MUST(cudaStreamSynchronize(stream));
        float *got_qkv = download_as(d_qkv, rows * stride, dt), *got_attn = download_as(d_out, an, dt);
        compare("graph: qk_norm_rope bf16 rows=19 heads=4/1 head_dim=128", got_qkv, qkv_ref, rows * stride, TOLS[di]);
        compare("graph: attention bf16 lengths=67,130 heads=8/2 head_dim=256", got_attn, attn_ref, an, TOLS[di]);
        free(got_qkv), free(got_attn);
        /* Replayed over other lengths of the same counts, the longest (187) beyond the captured
         * batch's (130): the launch is sized from the counts, so every row is computed. */
        uint32_t cu_b[3] = {0, 10, 10 + 187};
        CUDA_MUST(cudaMemcpy(d_cu, cu_b, sizeof cu_b, cudaMemcpyHostToDevice));
        float *scratch_b = tu_xmalloc(cpu_attention_scratch_floats(187, ahd) * 4);
        cpu_attention(q, k, v, cu_b, n_seqs, anh, ankv, ahd, scale, scratch_b, attn_ref);
        CUDA_MUST(cudaMemset(d_out, 0xFF, an * elem_size(dt)));
        CUDA_MUST(cudaGraphLaunch(exec, stream));
        CUDA_MUST(cudaStreamSynchronize(stream));
        got_attn = download_as(d_out, an, dt);
        compare("graph replayed over lengths 10,187: attention bf16", got_attn, attn_ref, an, TOLS[di]);
        free(got_attn), free(scratch_b);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }
    cudaFree(d_qkv), cudaFree(d_qn), cudaFree(d_kn), cudaFree(d_pos), cudaFree(d_cu);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out);
    free(qkv), free(qkv_ref), free(qn), free(kn), free(q), free(k), free(v), free(attn_ref), free(scratch);
}

/* Refused arguments launch nothing; empty work is a no-op. */
static void test_arguments(void) {
    const rmlp_dtype bad = 7;
    CHECK(gpu_gather_rows(NULL, NULL, 8, NULL, 1, 8, bad, stream) == cudaErrorInvalidValue, "gather_rows bad dtype");
    CHECK(gpu_gather_rows(NULL, NULL, 4, NULL, 1, 8, RMLP_DTYPE_F32, stream) == cudaErrorInvalidValue,
          "gather_rows stride < dim");
    CHECK(gpu_add_row(NULL, 8, NULL, 1, 8, bad, stream) == cudaErrorInvalidValue, "add_row bad dtype");
    CHECK(gpu_add_row(NULL, 4, NULL, 1, 8, RMLP_DTYPE_BF16, stream) == cudaErrorInvalidValue, "add_row stride < dim");
    CHECK(gpu_add_row(NULL, 8, NULL, 0, 8, RMLP_DTYPE_F32, stream) == cudaSuccess, "add_row 0 rows");
    CHECK(gpu_add_rmsnorm(NULL, NULL, NULL, 1, 8, 1e-6, NULL, bad, stream) == cudaErrorInvalidValue, "rmsnorm dtype");
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 1, 1, 1, 31, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F32,
                           stream) == cudaErrorInvalidValue,
          "rope odd head_dim");
    CHECK(gpu_qk_norm_rope(NULL, 1024, NULL, 1024, 1, 1, 1, 258, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F32,
                           stream) == cudaErrorInvalidValue,
          "rope head_dim > 256");
    CHECK(gpu_silu_mul(NULL, 1, 8, NULL, bad, stream) == cudaErrorInvalidValue, "silu_mul bad dtype");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 1, 1, 6, 4, 64, 1, RMLP_DTYPE_F32, stream) ==
              cudaErrorInvalidValue,
          "attention heads not a multiple of kv heads");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 1, 1, 4, 4, 257, 1, RMLP_DTYPE_F32, stream) ==
              cudaErrorInvalidValue,
          "attention head_dim > 256");
    CHECK(gpu_gather_rows(NULL, NULL, 8, NULL, 0, 8, RMLP_DTYPE_F16, stream) == cudaSuccess, "gather_rows 0 rows");
    CHECK(gpu_add_rmsnorm(NULL, NULL, NULL, 0, 8, 1e-6, NULL, RMLP_DTYPE_BF16, stream) == cudaSuccess,
          "rmsnorm 0 rows");
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 0, 1, 1, 32, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F16,
                           stream) == cudaSuccess,
          "rope 0 rows");
    CHECK(gpu_silu_mul(NULL, 0, 8, NULL, RMLP_DTYPE_F32, stream) == cudaSuccess, "silu_mul 0 rows");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 0, 0, 4, 4, 64, 1, RMLP_DTYPE_F32, stream) == cudaSuccess,
          "attention 0 sequences");
    CHECK(cudaGetLastError() == cudaSuccess, "no error left behind");
}

/* cuBLAS's loading (dlopen and the symbols of gpu/blas.cu) needs no device: checked on every
 * machine where the library is on the loader path (elsewhere a CUDA model load says so). */
static void test_blas_load(void) {
    rmlp_status status = gpu_blas_load("test_gpu_kernels");
    const char *msg = rmlp_last_error();
    if (status != RMLP_OK && strstr(msg, "dlopen") != NULL) {
        printf("cuBLAS not checked: %s\n", msg);
        return;
    }
    if (CHECK(status == RMLP_OK, "gpu_blas_load: status %d: %s", status, msg))
        printf("cuBLAS loaded: every entry point of gpu/blas.cu found\n");
}

int main(void) {
    test_blas_load();
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount reports 0 devices");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE; /* what ran without a device must not fail silently */
    }
    struct cudaDeviceProp prop;
    CUDA_MUST(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
    /* A blocking stream: it waits for the uploads and poisoning done on the legacy default stream. */
    CUDA_MUST(cudaStreamCreate(&stream));

    uint64_t rng = 0x5EEDu;
    test_arguments();
    /* RMLP_GPU_KERNELS_QUICK=1 (for compute-sanitizer, 10-100x slower): f32 and bf16, not f16 (bf16's
     * 2-byte paths are f16's). */
    const char *quick = getenv("RMLP_GPU_KERNELS_QUICK");
    int step = quick != NULL && strcmp(quick, "1") == 0 ? 2 : 1;
    for (int di = 0; di < (int)COUNT(DTYPES); di += step) {
        test_gather_rows(&rng, di);
        test_add_row(&rng, di);
        test_add_rmsnorm(&rng, di);
        test_qk_norm_rope(&rng, di);
        test_silu_mul(&rng, di);
        test_attention(&rng, di);
        test_compact_attention(&rng, di);
        test_chain_attention(&rng, di);
    }
    test_graph_capture(&rng);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
