/*
 * test_gpu_kernels.c: the CUDA kernels of gpu/kernels.h but attention (test_gpu_kernels_attention.c)
 * against the CPU path of cpu/cpu_ops.h: row gathers, residual adds, norms, q/k norms with RoPE,
 * activations, a capture in a CUDA graph and argument checks, in fp32, fp16 and bf16, on odd
 * sizes (1, 3, 7, 19, 733 rows; row and head sizes that are and are not multiples of 8, so both
 * the 16-byte and the element paths run; misaligned strides and pointers). Inputs are drawn in fp32 and rounded to the dtype; the GPU gets them in the
 * dtype and the CPU reference the same rounded values in fp32. Outputs are poisoned (0xFF
 * bytes: NaN in every dtype) before each launch, so an unwritten element fails; NaN always
 * fails. Tolerances per dtype are in TOLS. First, and on any machine, cuBLAS's loading (gpu/blas.cu,
 * no device needed); then without a CUDA device it prints SKIP and exits 77.
 * RMLP_GPU_KERNELS_QUICK=1 skips f16 (for the compute-sanitizer runs of scripts/device/first_run.sh).
 */
#include "gpu_kernels_util.h"
#include "gpu/blas.h"
#include "rope_reference.h"

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
                if (launched(gpu_add_rmsnorm(d_res, with_add ? d_add : NULL, d_w, 0.0f, rows, dim, eps, d_out, dt, stream),
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
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */

    float *qkv = random_values(rng, rows * stride, -2, 2, dt), *qkv_ref = tu_xmalloc(rows * stride * 4);
    float *qn = random_values(rng, hd, 0.5f, 1.5f, dt), *kn = random_values(rng, hd, 0.5f, 1.5f, dt);
    uint32_t pos[19];
    for (size_t r = 0; r < rows; r++) pos[r] = tu_rand_range(rng, 0, 4095);
    memcpy(qkv_ref, qkv, rows * stride * 4);
    qk_norm_rope_reference(qkv_ref, rows, stride, nq, nkv, hd, qn, kn, 1e-6, pos, 1e6);
    float *q = random_values(rng, an, -3, 3, dt), *k = random_values(rng, ak, -1, 1, dt);
    float *v = random_values(rng, ak, -1, 1, dt), *attn_ref = tu_xmalloc(an * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(130, ahd) * 4);
    cpu_attention(q, k, v, cu, n_seqs, anh, ankv, ahd, &plain, scratch, attn_ref);

    void *d_qkv = upload(qkv, rows * stride, dt), *d_qn = upload(qn, hd, dt), *d_kn = upload(kn, hd, dt);
    uint32_t *d_pos = upload_u32(pos, rows), *d_cu = upload_u32(cu, n_seqs + 1);
    void *d_q = upload(q, an, dt), *d_k = upload(k, ak, dt), *d_v = upload(v, ak, dt), *d_out = poisoned(an, dt);
    CUDA_MUST(cudaDeviceSynchronize());

    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    cudaError_t e1 = gpu_qk_norm_rope(d_qkv, stride, (char *)d_qkv + nq * hd * elem_size(dt), stride, rows, nq, nkv, hd,
                                      d_qn, d_kn, d_pos, NULL, 1e6, 1e-6, dt, stream);
    cudaError_t e2 = gpu_attention(d_q, d_k, d_v, d_out, d_cu, n_seqs, nt, anh, ankv, ahd, plain, dt, stream);
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
        cpu_attention(q, k, v, cu_b, n_seqs, anh, ankv, ahd, &plain, scratch_b, attn_ref);
        CUDA_MUST(cudaMemset(d_out, 0xFF, an * elem_size(dt)));
        uploads_landed();
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
    const layer_attention unit = {0, 0.0f, 1.0f, 0}; /* scale 1, no window or soft-cap */
    const rmlp_dtype bad = 7;
    CHECK(gpu_gather_rows(NULL, NULL, 8, NULL, 1, 8, bad, stream) == cudaErrorInvalidValue, "gather_rows bad dtype");
    CHECK(gpu_gather_rows(NULL, NULL, 4, NULL, 1, 8, RMLP_DTYPE_F32, stream) == cudaErrorInvalidValue,
          "gather_rows stride < dim");
    CHECK(gpu_add_row(NULL, 8, NULL, 1, 8, bad, stream) == cudaErrorInvalidValue, "add_row bad dtype");
    CHECK(gpu_add_row(NULL, 4, NULL, 1, 8, RMLP_DTYPE_BF16, stream) == cudaErrorInvalidValue, "add_row stride < dim");
    CHECK(gpu_add_row(NULL, 8, NULL, 0, 8, RMLP_DTYPE_F32, stream) == cudaSuccess, "add_row 0 rows");
    CHECK(gpu_add_rmsnorm(NULL, NULL, NULL, 0.0f, 1, 8, 1e-6, NULL, bad, stream) == cudaErrorInvalidValue, "rmsnorm dtype");
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 1, 1, 1, 31, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F32,
                           stream) == cudaErrorInvalidValue,
          "rope odd head_dim");
    CHECK(gpu_qk_norm_rope(NULL, 1024, NULL, 1024, 1, 1, 1, 258, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F32,
                           stream) == cudaErrorInvalidValue,
          "rope head_dim > 256");
    CHECK(gpu_silu_mul(NULL, 1, 8, NULL, bad, stream) == cudaErrorInvalidValue, "silu_mul bad dtype");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 1, 1, 6, 4, 64, unit, RMLP_DTYPE_F32, stream) ==
              cudaErrorInvalidValue,
          "attention heads not a multiple of kv heads");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 1, 1, 4, 4, 257, unit, RMLP_DTYPE_F32, stream) ==
              cudaErrorInvalidValue,
          "attention head_dim > 256");
    CHECK(gpu_gather_rows(NULL, NULL, 8, NULL, 0, 8, RMLP_DTYPE_F16, stream) == cudaSuccess, "gather_rows 0 rows");
    CHECK(gpu_add_rmsnorm(NULL, NULL, NULL, 0.0f, 0, 8, 1e-6, NULL, RMLP_DTYPE_BF16, stream) == cudaSuccess,
          "rmsnorm 0 rows");
    CHECK(gpu_qk_norm_rope(NULL, 64, NULL, 64, 0, 1, 1, 32, NULL, NULL, NULL, NULL, 1e4, 1e-6, RMLP_DTYPE_F16,
                           stream) == cudaSuccess,
          "rope 0 rows");
    CHECK(gpu_silu_mul(NULL, 0, 8, NULL, RMLP_DTYPE_F32, stream) == cudaSuccess, "silu_mul 0 rows");
    CHECK(gpu_attention(NULL, NULL, NULL, NULL, NULL, 0, 0, 4, 4, 64, unit, RMLP_DTYPE_F32, stream) == cudaSuccess,
          "attention 0 sequences");
    CHECK(cudaGetLastError() == cudaSuccess, "no error left behind");
}

/* cuBLAS's loading (gpu/cublas_loader.h and the symbols of gpu/blas.cu) needs no device: checked on
 * every machine where a libcublas is found (elsewhere a CUDA model load says so). */
static void test_blas_load(void) {
    rmlp_status status = gpu_blas_load("test_gpu_kernels");
    const char *msg = rmlp_last_error();
    if (status != RMLP_OK && strstr(msg, "has no symbol") == NULL && strstr(msg, "older than") == NULL) {
        printf("cuBLAS not checked: %s\n", msg);
        return;
    }
    if (CHECK(status == RMLP_OK, "gpu_blas_load: status %d: %s", status, msg))
        printf("cuBLAS loaded: every entry point of gpu/blas.cu found\n");
}

int main(void) {
    test_blas_load();
    int rc = gpu_kernels_begin();
    if (rc >= 0) return rc;
    uint64_t rng = 0x5EEDu;
    test_arguments();
    for (int di = 0; di < (int)COUNT(DTYPES); di += gpu_kernels_dtype_step()) {
        test_gather_rows(&rng, di);
        test_add_row(&rng, di);
        test_add_rmsnorm(&rng, di);
        test_qk_norm_rope(&rng, di);
        test_silu_mul(&rng, di);
    }
    test_graph_capture(&rng);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
