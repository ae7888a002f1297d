/*
 * test_gpu_flashinfer.c: FlashInfer's batch prefill behind gpu/flashinfer.h, in both layouts, against
 * the reference CUDA kernels (gpu/attention.cu) and the CPU path (cpu/attention.c), in f16 and bf16,
 * head_dim 64 and 128, GQA 4:1, 2:1 and 1:1:
 *   - full space (ragged KV): sequences of 1, 3, 7, 19 and 733 rows and an empty one, lengths that
 *     are and are not multiples of the 128-row query tile; and the same keys read as pages of one
 *     row from storage in another order (kv_indices: what a forward does with the compact rows),
 *     against the ragged run, and the reference kernel through the same indices bit for bit;
 *   - compact space (paged KV, page size 1): planner-built plans of batches sharing prefixes (deep
 *     trees, sequences that own no row), q/k/v separate or the columns of one fused qkv buffer, the
 *     rows past the compact ones left untouched; and compact against full space on the same batch
 *     (batch row i of the full-space output is compact row scatter[i] of the compact one);
 *   - the plan/run split under CUDA-graph capture: a captured run replayed after planning another
 *     batch of the same counts (longer sequences than at capture), each layout, and again with
 *     FlashInfer's Hopper kernels taking the compact one where they are (test_gpu_flashinfer_sm90
 *     checks them otherwise);
 *   - the plan workspace's bound at the capacity's extremes, and the cases that must take the
 *     reference kernel instead, each with its reason (tiny batches FlashInfer would tile otherwise,
 *     unaligned or strided buffers, other shapes, other counts);
 *   - a plan FlashInfer's planner fails (the test hook starves its workspace): a reason and a
 *     message, no error, and the next plan works.
 * Inputs are drawn in fp32 and rounded to the dtype; outputs are poisoned (0xFF bytes: NaN) first;
 * tolerances as test_gpu_kernels' for f16/bf16 (FlashInfer also rounds the softmax weights to the
 * dtype before P V: at most 2^-9 of max|v| more for bf16, inside the bound). Every comparison prints
 * its measured error. Without FlashInfer in the build, or without a device, it says SKIP and exits
 * 77 after the checks that need neither. RMLP_GPU_KERNELS_QUICK=1 skips f16 (for compute-sanitizer).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cpu/cpu_ops.h"
#include "gpu/flashinfer.h"
#include "gpu/kernels.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FN "test_gpu_flashinfer"

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f16", "bf16"};
static const tol TOLS[] = {{1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}};
static const size_t HEAD_DIMS[] = {64, 128};

static cudaStream_t stream;

static int launched(cudaError_t error, const char *what) { return launched_on(error, what, stream); }

/* Plans `layout` on fi and says whether it is ready for the counts (K/V read as pages in compact
 * space, as ragged rows in full space). */
static int plan_layout(gpu_flashinfer *fi, gpu_fi_layout layout, const uint32_t *qo, const uint32_t *kv, size_t n_seqs,
                       const gpu_compact_rows *rows, size_t nh, size_t nkv, size_t hd, const char *what) {
    char error[384] = "";
    gpu_fi_reason reason = gpu_flashinfer_plan(fi, layout, qo, kv, n_seqs, stream, error, sizeof error, NULL);
    if (!CHECK(reason != GPU_FI_PLAN_ERROR, "%s: gpu_flashinfer_plan: %s", what, error)) return 0;
    CUDA_MUST(cudaStreamSynchronize(stream));
    return gpu_flashinfer_ready(fi, layout, layout == GPU_FI_COMPACT, rows, n_seqs, qo[n_seqs], nh, nkv, hd) ==
           GPU_FI_OK;
}

/* ---- what needs no device ------------------------------------------------------------------ */

static void test_without_device(void) {
    CHECK(gpu_flashinfer_built() == (RMLP_EXPECT_FLASHINFER != 0), "gpu_flashinfer_built() says %d, the build %d",
          gpu_flashinfer_built(), RMLP_EXPECT_FLASHINFER);
    int built = gpu_flashinfer_built();
    static const struct {
        rmlp_dtype dt;
        size_t nh, nkv, hd;
        int want;
    } shapes[] = {{RMLP_DTYPE_BF16, 16, 8, 128, 1}, {RMLP_DTYPE_F16, 9, 3, 64, 1},  {RMLP_DTYPE_BF16, 4, 4, 64, 1},
                  {RMLP_DTYPE_F32, 16, 8, 128, 0},  {RMLP_DTYPE_BF16, 16, 8, 96, 0}, {RMLP_DTYPE_BF16, 16, 8, 256, 0},
                  {RMLP_DTYPE_F16, 6, 4, 64, 0},    {RMLP_DTYPE_BF16, 4, 0, 64, 0},  {RMLP_DTYPE_BF16, 2, 4, 64, 0}};
    for (size_t i = 0; i < COUNT(shapes); i++)
        CHECK(gpu_flashinfer_supports(shapes[i].dt, shapes[i].nh, shapes[i].nkv, shapes[i].hd) ==
                  (built && shapes[i].want),
              "supports(dtype %d, heads %zu/%zu, head_dim %zu)", shapes[i].dt, shapes[i].nh, shapes[i].nkv,
              shapes[i].hd);
    /* An unsupported shape gets no state and touches no device; asked for by name, it is refused,
     * saying why and naming the setting. */
    gpu_flashinfer *fi = (gpu_flashinfer *)(uintptr_t)16; /* must come back NULL */
    CHECK(gpu_flashinfer_create(FN, RMLP_DTYPE_F32, 16, 8, 128, 1024, 64, NULL, false, &fi) == RMLP_OK && fi == NULL,
          "create for f32: no state");
    fi = (gpu_flashinfer *)(uintptr_t)16;
    rmlp_status status = gpu_flashinfer_create(FN, RMLP_DTYPE_F32, 16, 8, 128, 1024, 64, "the setting", false, &fi);
    const char *msg = rmlp_last_error();
    CHECK(status == RMLP_ERR_UNSUPPORTED && fi == NULL && strstr(msg, "the setting asks for FlashInfer") != NULL &&
              strstr(msg, built ? "this model: f32" : "built without it") != NULL,
          "create for f32, required: status %d, message \"%s\"", status, msg);
    uint32_t cu[2] = {0, 100};
    char error[64] = "";
    CHECK(gpu_flashinfer_plan(NULL, GPU_FI_FULL, cu, cu, 1, NULL, error, sizeof error, NULL) == GPU_FI_UNPLANNED,
          "plan on NULL is a no-op");
    gpu_compact_rows rows = {NULL, NULL, NULL, NULL, 128, 64, 64, 128};
    CHECK(gpu_flashinfer_ready(NULL, GPU_FI_FULL, false, &rows, 1, 100, 2, 1, 64) == GPU_FI_UNPLANNED,
          "NULL is never ready");
    CHECK(gpu_flashinfer_run(NULL, GPU_FI_FULL, &rows, cu, cu, NULL, 1.0f, NULL, NULL) == cudaErrorInvalidValue,
          "run on NULL refused");
}

/* ---- full space ------------------------------------------------------------------------------ */

/* Elements of a and b (n) that differ in any bit (NaN counts as a difference). */
static size_t differing(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

/* Full space with K/V read as pages of one row through kv_indices (what a forward does with the
 * compact rows): the keys stored in reverse order and found through the indices. The reference
 * kernel so must give the ragged reference kernel's output bit for bit (the same kernel reading
 * other addresses); FlashInfer's paged kernel, where ready, its ragged kernel's (d_ragged, NULL
 * when not run) within the tolerance, saying whether bit for bit. */
static void paged_full(int di, gpu_flashinfer *fi, const uint32_t *cu, size_t n_seqs, size_t nh, size_t nkv, size_t hd,
                       const float *k, const float *v, void *d_q, void *d_k, void *d_v, uint32_t *d_cu,
                       const void *d_ragged, const char *what) {
    rmlp_dtype dt = DTYPES[di];
    size_t nt = cu[n_seqs], qd = nh * hd, kvd = nkv * hd;
    float scale = 1.0f / sqrtf((float)hd), *kp = tu_xmalloc(nt * kvd * 4 + 4), *vp = tu_xmalloc(nt * kvd * 4 + 4);
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */
    uint32_t *perm = tu_xmalloc(nt * 4 + 4);
    for (size_t i = 0; i < nt; i++) {
        perm[i] = (uint32_t)(nt - 1 - i);
        memcpy(kp + perm[i] * kvd, k + i * kvd, kvd * 4), memcpy(vp + perm[i] * kvd, v + i * kvd, kvd * 4);
    }
    void *d_kp = upload(kp, nt * kvd, dt), *d_vp = upload(vp, nt * kvd, dt), *d_a = poisoned(nt * qd, dt);
    void *d_b = poisoned(nt * qd, dt), *d_c = poisoned(nt * qd, dt);
    uint32_t *d_idx = upload_u32(perm, nt);
    gpu_compact_rows paged = {d_q, d_kp, d_vp, d_b, qd, kvd, kvd, qd};
    char line[260];
    if (nt > 0 && launched(gpu_attention(d_q, d_k, d_v, d_a, d_cu, n_seqs, nt, nh, nkv, hd, plain, dt, stream), what) &&
        launched(gpu_compact_attention(&paged, d_cu, d_cu, d_idx, n_seqs, nt, nh, nkv, hd, plain, dt, stream), what)) {
        float *a = download_as(d_a, nt * qd, dt), *b = download_as(d_b, nt * qd, dt);
        size_t d = differing(a, b, nt * qd);
        CHECK(d == 0, "%s: the reference kernel through kv_indices differs from its ragged run in %zu of %zu", what, d,
              nt * qd);
        free(a), free(b);
    }
    paged.out = d_c;
    gpu_fi_reason reason = gpu_flashinfer_ready(fi, GPU_FI_FULL, true, &paged, n_seqs, nt, nh, nkv, hd);
    CHECK((reason == GPU_FI_OK) == (d_ragged != NULL), "%s: paged K/V ready says %d", what, reason);
    if (reason == GPU_FI_OK && d_ragged != NULL &&
        launched(gpu_flashinfer_run(fi, GPU_FI_FULL, &paged, d_cu, d_cu, d_idx, scale, stream, NULL), what)) {
        float *got = download_as(d_c, nt * qd, dt), *ragged = download_as(d_ragged, nt * qd, dt);
        snprintf(line, sizeof line, "flashinfer %s, K/V as pages vs ragged (%zu of %zu differ in a bit)", what,
                 differing(got, ragged, nt * qd), nt * qd);
        compare_report(line, got, ragged, nt * qd, TOLS[di]);
        free(got), free(ragged);
    }
    cudaFree(d_kp), cudaFree(d_vp), cudaFree(d_a), cudaFree(d_b), cudaFree(d_c), cudaFree(d_idx);
    free(kp), free(vp), free(perm);
}

static void full_case(uint64_t *rng, int di, gpu_flashinfer *fi, const uint32_t *lens, size_t n_seqs, size_t nh,
                      size_t nkv, size_t hd) {
    rmlp_dtype dt = DTYPES[di];
    uint32_t cu[16] = {0};
    size_t longest = 0;
    char lengths[96] = "", what[200];
    for (size_t s = 0; s < n_seqs; s++) {
        cu[s + 1] = cu[s] + lens[s];
        if (lens[s] > longest) longest = lens[s];
        snprintf(lengths + strlen(lengths), sizeof lengths - strlen(lengths), "%s%u", s ? "," : "", lens[s]);
    }
    size_t nt = cu[n_seqs], nq = nt * nh * hd, nk = nt * nkv * hd;
    float scale = 1.0f / sqrtf((float)hd);
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */
    float *q = random_values(rng, nq, -3, 3, dt), *k = random_values(rng, nk, -1, 1, dt);
    float *v = random_values(rng, nk, -1, 1, dt), *ref = tu_xmalloc(nq * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, hd) * 4);
    cpu_attention(q, k, v, cu, n_seqs, nh, nkv, hd, &plain, scratch, ref);
    void *d_q = upload(q, nq, dt), *d_k = upload(k, nk, dt), *d_v = upload(v, nk, dt);
    void *d_out = poisoned(nq, dt), *d_ref = poisoned(nq, dt);
    uint32_t *d_cu = upload_u32(cu, n_seqs + 1);
    gpu_compact_rows rows = {d_q, d_k, d_v, d_out, nh * hd, nkv * hd, nkv * hd, nh * hd};
    snprintf(what, sizeof what, "full %s lengths=%s heads=%zu/%zu head_dim=%zu", DTYPE_NAMES[di], lengths, nh, nkv, hd);
    int ready = plan_layout(fi, GPU_FI_FULL, cu, cu, n_seqs, &rows, nh, nkv, hd, what);
    int want = flashinfer_tiles_128(nt, n_seqs, nh / nkv);
    CHECK(ready == want, "%s: ready %d, want %d (FlashInfer's tile choice)", what, ready, want);
    if (ready && launched(gpu_flashinfer_run(fi, GPU_FI_FULL, &rows, d_cu, d_cu, NULL, scale, stream, NULL), what) &&
        launched(gpu_attention(d_q, d_k, d_v, d_ref, d_cu, n_seqs, nt, nh, nkv, hd, plain, dt, stream), what)) {
        float *got = download_as(d_out, nq, dt), *kernel = download_as(d_ref, nq, dt);
        char line[240];
        snprintf(line, sizeof line, "flashinfer %s vs CPU", what);
        compare_report(line, got, ref, nq, TOLS[di]);
        snprintf(line, sizeof line, "flashinfer %s vs the reference kernel", what);
        compare_report(line, got, kernel, nq, TOLS[di]);
        free(got), free(kernel);
    }
    paged_full(di, fi, cu, n_seqs, nh, nkv, hd, k, v, d_q, d_k, d_v, d_cu, ready ? d_out : NULL, what);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_ref), cudaFree(d_cu);
    free(q), free(k), free(v), free(ref), free(scratch);
}

static void test_full(uint64_t *rng, int di) {
    static const uint32_t batches[][6] = {{0, 1, 3, 7, 19, 733}, {130, 67, 0, 1, 0, 0}, {64, 128, 0, 0, 0, 0},
                                          {20, 30, 0, 0, 0, 0}};
    static const size_t n_seqs[] = {6, 4, 2, 2};
    static const size_t heads[][2] = {{8, 2}, {4, 4}, {16, 8}};
    for (size_t a = 0; a < COUNT(HEAD_DIMS); a++)
        for (size_t h = 0; h < COUNT(heads); h++) {
            gpu_flashinfer *fi = NULL;
            rmlp_status status = gpu_flashinfer_create(FN, DTYPES[di], heads[h][0], heads[h][1], HEAD_DIMS[a], 1024,
                                                       16, NULL, false, &fi);
            if (!CHECK(status == RMLP_OK && fi != NULL, "create %s heads %zu/%zu head_dim %zu: %s", DTYPE_NAMES[di],
                       heads[h][0], heads[h][1], HEAD_DIMS[a], rmlp_last_error()))
                continue;
            for (size_t b = 0; b < COUNT(batches); b++)
                full_case(rng, di, fi, batches[b], n_seqs[b], heads[h][0], heads[h][1], HEAD_DIMS[a]);
            gpu_flashinfer_free(fi);
        }
}

/* ---- compact space ---------------------------------------------------------------------------- */

static void compact_case(uint64_t *rng, int di, const rmlp_plan *plan, size_t nh, size_t nkv, size_t hd, int fused) {
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt), nc = plan->n_compact, nt = plan->n_tokens, ns = plan->n_seqs, extra = 3, longest = 0;
    const uint32_t *cu = plan->cu_seqlens, *qo = plan->qo_indptr, *scatter = plan->scatter;
    for (size_t s = 0; s < ns; s++)
        if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    size_t qd = nh * hd, kvd = nkv * hd, width = qd + 2 * kvd;
    float scale = 1.0f / sqrtf((float)hd);
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */
    float *qkv = random_values(rng, nc * width, -3, 3, dt), *ref = tu_xmalloc(nc * qd * 4);
    size_t qs = fused ? width : qd, ks = fused ? width : kvd;
    /* separate: q, k, v one after the other, each dense */
    const float *q = qkv, *k = fused ? qkv + qd : qkv + nc * qd, *v = fused ? qkv + qd + kvd : qkv + nc * (qd + kvd);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, hd) * 4);
    cpu_attention_rows cpu_rows = {q, k, v, ref, qs, ks, ks, qd, 0};
    cpu_compact_attention(&cpu_rows, qo, cu, scatter, ns, nh, nkv, hd, &plain, scratch);

    void *d_qkv = upload(qkv, nc * width, dt), *d_out = poisoned((nc + extra) * qd, dt);
    void *d_ref = poisoned((nc + extra) * qd, dt);
    uint32_t *d_qo = upload_u32(qo, ns + 1), *d_cu = upload_u32(cu, ns + 1), *d_idx = upload_u32(scatter, nt);
    char *base = d_qkv, what[200], line[260];
    gpu_compact_rows rows = {base, base + (size_t)(k - qkv) * es, base + (size_t)(v - qkv) * es, d_out, qs, ks, ks, qd};
    gpu_compact_rows ref_rows = rows;
    ref_rows.out = d_ref;
    snprintf(what, sizeof what, "compact %s N=%zu N'=%zu seqs=%zu heads=%zu/%zu head_dim=%zu %s", DTYPE_NAMES[di], nt,
             nc, ns, nh, nkv, hd, fused ? "fused" : "separate");
    gpu_flashinfer *fi = NULL;
    rmlp_status status = gpu_flashinfer_create(FN, dt, nh, nkv, hd, nt, ns, NULL, false, &fi);
    if (CHECK(status == RMLP_OK && fi != NULL, "%s: create: %s", what, rmlp_last_error())) {
        int ready = plan_layout(fi, GPU_FI_COMPACT, qo, cu, ns, &rows, nh, nkv, hd, what);
        int want = flashinfer_tiles_128(nc, ns, nh / nkv);
        CHECK(ready == want, "%s: ready %d, want %d (FlashInfer's tile choice)", what, ready, want);
        if (ready &&
            launched(gpu_flashinfer_run(fi, GPU_FI_COMPACT, &rows, d_qo, d_cu, d_idx, scale, stream, NULL), what) &&
            launched(gpu_compact_attention(&ref_rows, d_qo, d_cu, d_idx, ns, nc, nh, nkv, hd, plain, dt, stream),
                     what)) {
            float *got = download_as(d_out, (nc + extra) * qd, dt), *kernel = download_as(d_ref, nc * qd, dt);
            snprintf(line, sizeof line, "flashinfer %s vs CPU", what);
            compare_report(line, got, ref, nc * qd, TOLS[di]);
            snprintf(line, sizeof line, "flashinfer %s vs the reference kernel", what);
            compare_report(line, got, kernel, nc * qd, TOLS[di]);
            size_t written = 0;
            for (size_t i = nc * qd; i < (nc + extra) * qd; i++) written += !isnan(got[i]);
            CHECK(written == 0, "%s: %zu elements past the compact rows written", what, written);

            /* The same batch in full space: batch row i has compact row scatter[i]'s q, k, v, and
             * its output must be compact row scatter[i]'s. */
            if (!fused) {
                float *fq = tu_xmalloc(nt * qd * 4), *fk = tu_xmalloc(nt * kvd * 4), *fv = tu_xmalloc(nt * kvd * 4);
                cpu_gather_rows(q, qd, scatter, nt, qd, fq);
                cpu_gather_rows(k, kvd, scatter, nt, kvd, fk);
                cpu_gather_rows(v, kvd, scatter, nt, kvd, fv);
                void *d_fq = upload(fq, nt * qd, dt), *d_fk = upload(fk, nt * kvd, dt);
                void *d_fv = upload(fv, nt * kvd, dt), *d_full = poisoned(nt * qd, dt);
                gpu_compact_rows full_rows = {d_fq, d_fk, d_fv, d_full, qd, kvd, kvd, qd};
                int full_ready = plan_layout(fi, GPU_FI_FULL, cu, cu, ns, &full_rows, nh, nkv, hd, what);
                CHECK(full_ready == flashinfer_tiles_128(nt, ns, nh / nkv), "%s: full space ready %d", what,
                      full_ready);
                if (full_ready &&
                    launched(gpu_flashinfer_run(fi, GPU_FI_FULL, &full_rows, d_cu, d_cu, NULL, scale, stream, NULL),
                             what)) {
                    float *full = download_as(d_full, nt * qd, dt), *as_batch = tu_xmalloc(nt * qd * 4);
                    cpu_gather_rows(got, qd, scatter, nt, qd, as_batch);
                    snprintf(line, sizeof line, "flashinfer %s: compact vs full space, batch rows", what);
                    compare_report(line, as_batch, full, nt * qd, TOLS[di]);
                    free(full), free(as_batch);
                }
                cudaFree(d_fq), cudaFree(d_fk), cudaFree(d_fv), cudaFree(d_full);
                free(fq), free(fk), free(fv);
            }
            free(got), free(kernel);
        }
        gpu_flashinfer_free(fi);
    }
    cudaFree(d_qkv), cudaFree(d_out), cudaFree(d_ref), cudaFree(d_qo), cudaFree(d_cu), cudaFree(d_idx);
    free(qkv), free(ref), free(scratch);
}

static void test_compact(uint64_t *rng, int di) {
    /* deep trees (vocab 2-3), many short sequences, a long shared prefix (the paper's shape, smaller) */
    static const tu_batch_shape shapes[] = {{9, 70, 2, 33, 0}, {24, 20, 2, 17, 0}, {5, 150, 50, 100, 0},
                                            {16, 300, 3, 200, 0}};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    rmlp_plan_params params = tu_params(1.0, 0);
    for (size_t sh = 0; sh < COUNT(shapes); sh++) {
        tu_batch b = tu_random_batch(rng, &shapes[sh]);
        rmlp_plan plan;
        if (b.n_tokens > 0 &&
            CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plan) == RMLP_OK &&
                      plan.qo_indptr != NULL,
                  "plan: %s", rmlp_last_error()))
            for (size_t a = 0; a < COUNT(HEAD_DIMS); a++)
                for (size_t h = 0; h < COUNT(heads); h++)
                    for (int fused = 0; fused < 2; fused++)
                        compact_case(rng, di, &plan, heads[h][0], heads[h][1], HEAD_DIMS[a], fused);
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
}

/* ---- capture: planned on the host, run from a graph --------------------------------------------- */

/* With `sm90` (a state that has FlashInfer's Hopper kernels: gpu/flashinfer_sm90.h), the compact
 * layout's launch must run them, the full (ragged) one FA2's. */
static void test_graph(uint64_t *rng, bool sm90) {
    const int di = 1;
    const rmlp_dtype dt = DTYPES[di];
    const size_t nh = 8, nkv = 2, hd = 128, qd = nh * hd, kvd = nkv * hd, rows_n = 197, max_keys = 400;
    float scale = 1.0f / sqrtf((float)hd);
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */
    float *q = random_values(rng, rows_n * qd, -3, 3, dt), *k = random_values(rng, max_keys * kvd, -1, 1, dt);
    float *v = random_values(rng, max_keys * kvd, -1, 1, dt), *ref = tu_xmalloc(rows_n * qd * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(max_keys, hd) * 4);
    void *d_q = upload(q, rows_n * qd, dt), *d_k = upload(k, max_keys * kvd, dt), *d_v = upload(v, max_keys * kvd, dt);
    void *d_out = poisoned(rows_n * qd, dt);
    uint32_t *d_qo = dev_alloc(3 * 4), *d_kv = dev_alloc(3 * 4), *d_idx = dev_alloc(max_keys * 4);
    gpu_flashinfer *fi = NULL;
    if (!CHECK(gpu_flashinfer_create(FN, dt, nh, nkv, hd, max_keys, 2, NULL, sm90, &fi) == RMLP_OK && fi != NULL &&
                   gpu_flashinfer_has_sm90(fi) == sm90,
               "create (Hopper %d): %s", sm90, rmlp_last_error()))
        return;
    /* full space: lengths 67, 130 at capture, then 10, 187; compact: (l0, shared, l1) = (120, 50, 77),
     * then (20, 19, 177): the same 197 query rows in 2 sequences, longer paths after the capture. */
    static const uint32_t full_lens[2][2] = {{67, 130}, {10, 187}};
    static const uint32_t paths[2][3] = {{120, 50, 77}, {20, 19, 177}};
    for (int layout = 0; layout < 2; layout++) {
        cudaGraphExec_t exec = NULL;
        for (int round = 0; round < 2; round++) {
            uint32_t qo[3], kv[3], idx[400];
            if (layout == GPU_FI_FULL) {
                qo[0] = kv[0] = 0, qo[1] = kv[1] = full_lens[round][0], qo[2] = kv[2] = qo[1] + full_lens[round][1];
                cpu_attention(q, k, v, qo, 2, nh, nkv, hd, &plain, scratch, ref);
            } else {
                two_paths(paths[round][0], paths[round][1], paths[round][2], qo, kv, idx);
                cpu_attention_rows cr = {q, k, v, ref, qd, kvd, kvd, qd, 0};
                cpu_compact_attention(&cr, qo, kv, idx, 2, nh, nkv, hd, &plain, scratch);
                CUDA_MUST(cudaMemcpy(d_idx, idx, kv[2] * 4, cudaMemcpyHostToDevice));
            }
            CUDA_MUST(cudaMemcpy(d_qo, qo, sizeof qo, cudaMemcpyHostToDevice));
            CUDA_MUST(cudaMemcpy(d_kv, kv, sizeof kv, cudaMemcpyHostToDevice));
            CUDA_MUST(cudaMemset(d_out, 0xFF, rows_n * qd * elem_size(dt)));
            uploads_landed();
            gpu_compact_rows rows = {d_q, d_k, d_v, d_out, qd, kvd, kvd, qd};
            char what[160];
            snprintf(what, sizeof what, "graph %s%s bf16 heads=8/2 head_dim=128, %s", sm90 ? "hopper " : "",
                     layout ? "compact" : "full",
                     round ? "replayed after planning another batch of the same counts" : "captured");
            if (!CHECK(plan_layout(fi, layout, qo, kv, 2, &rows, nh, nkv, hd, what), "%s: not ready", what)) break;
            if (round == 0) {
                cudaGraph_t graph = NULL;
                bool used_sm90 = false;
                CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
                cudaError_t e1 = gpu_flashinfer_run(fi, layout, &rows, d_qo, d_kv, layout ? d_idx : NULL, scale,
                                                    stream, &used_sm90);
                cudaError_t e2 = cudaStreamEndCapture(stream, &graph);
                if (!CHECK(e1 == cudaSuccess && e2 == cudaSuccess && used_sm90 == (sm90 && layout == GPU_FI_COMPACT),
                           "%s: run %s (Hopper kernels %d), end capture %s", what, cudaGetErrorString(e1), used_sm90,
                           cudaGetErrorString(e2)))
                    break;
                CUDA_MUST(cudaGraphInstantiate(&exec, graph, 0));
                cudaGraphDestroy(graph);
            }
            CUDA_MUST(cudaGraphLaunch(exec, stream));
            CUDA_MUST(cudaStreamSynchronize(stream));
            float *got = download_as(d_out, rows_n * qd, dt);
            compare_report(what, got, ref, rows_n * qd, TOLS[di]);
            free(got);
        }
        if (exec != NULL) cudaGraphExecDestroy(exec);
    }
    gpu_flashinfer_free(fi);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_qo), cudaFree(d_kv), cudaFree(d_idx);
    free(q), free(k), free(v), free(ref), free(scratch);
}

/* ---- the plan workspace, and what FlashInfer must not take ------------------------------------- */

/* The reason gpu_flashinfer_plan gives (the plan's copy waited for). */
static gpu_fi_reason plan_reason(gpu_flashinfer *fi, gpu_fi_layout layout, const uint32_t *qo, const uint32_t *kv,
                                 size_t n_seqs, char *error, size_t cap) {
    gpu_fi_reason reason = gpu_flashinfer_plan(fi, layout, qo, kv, n_seqs, stream, error, cap, NULL);
    CUDA_MUST(cudaStreamSynchronize(stream));
    return reason;
}

static void test_bounds(void) {
    const size_t cap = 4096, nh = 8, nkv = 2, hd = 64, qd = nh * hd, kvd = nkv * hd;
    gpu_flashinfer *fi = NULL;
    if (!CHECK(gpu_flashinfer_create(FN, RMLP_DTYPE_BF16, nh, nkv, hd, cap, cap, NULL, false, &fi) == RMLP_OK &&
                   fi != NULL,
               "create: %s", rmlp_last_error()))
        return;
    void *buf = dev_alloc(cap * (qd + 2 * kvd) * 2 + 64);
    char *b = buf, error[384];
    gpu_compact_rows rows = {b, b + cap * qd * 2, b + cap * (qd + kvd) * 2, b, qd, kvd, kvd, qd};
    uint32_t *cu = tu_xmalloc((cap + 2) * 4), one[2] = {0, (uint32_t)cap}, over[2] = {0, (uint32_t)cap + 1};
    for (size_t i = 0; i <= cap; i++) cu[i] = (uint32_t)i;
    /* every row its own sequence: the most work items the plan can have (and 16-row tiles: the
     * reference kernel's), in both layouts */
    for (int layout = 0; layout < 2; layout++) {
        gpu_fi_reason reason = plan_reason(fi, layout, cu, cu, cap, error, sizeof error);
        CHECK(reason == GPU_FI_SMALL_BATCH, "%zu singletons, layout %d: reason %d", cap, layout, reason);
        reason = gpu_flashinfer_ready(fi, layout, layout == GPU_FI_COMPACT, &rows, cap, cap, nh, nkv, hd);
        CHECK(reason == GPU_FI_SMALL_BATCH, "%zu singletons, layout %d: ready says %d", cap, layout, reason);
    }
    CHECK(plan_layout(fi, GPU_FI_FULL, one, one, 1, &rows, nh, nkv, hd, "one sequence"), "one sequence of %zu", cap);
    CHECK(plan_layout(fi, GPU_FI_COMPACT, one, one, 1, &rows, nh, nkv, hd, "one path"), "one path of %zu", cap);
    gpu_fi_reason reason = plan_reason(fi, GPU_FI_FULL, over, over, 1, error, sizeof error);
    CHECK(reason == GPU_FI_TOO_LARGE, "%zu rows > capacity: reason %d", cap + 1, reason);
    /* buffers it must leave to the reference kernel, on a planned batch */
    CHECK(plan_layout(fi, GPU_FI_FULL, one, one, 1, &rows, nh, nkv, hd, "one sequence"), "replanned: not ready");
    static const struct {
        const char *what;
        int change; /* 0: none, 1: q unaligned, 2: out strided, 3: k/v stride odd, 4: k/v strides differ */
        size_t rows, hd, nkv;
        bool paged;
        gpu_fi_reason want;
    } cases[] = {
        {"the aligned dense buffers", 0, 4096, 64, 2, false, GPU_FI_OK},
        {"the same, K/V read as pages", 0, 4096, 64, 2, true, GPU_FI_OK},
        {"q not 16-byte aligned", 1, 4096, 64, 2, false, GPU_FI_BUFFERS},
        {"out not dense", 2, 4096, 64, 2, false, GPU_FI_BUFFERS},
        {"k/v stride not a multiple of 8", 3, 4096, 64, 2, false, GPU_FI_BUFFERS},
        {"k and v strides differ", 4, 4096, 64, 2, true, GPU_FI_BUFFERS},
        {"other row count than planned", 0, 4095, 64, 2, false, GPU_FI_UNPLANNED},
        {"other head_dim than created for", 0, 4096, 128, 2, false, GPU_FI_BUFFERS},
        {"other kv heads than created for", 0, 4096, 64, 4, false, GPU_FI_BUFFERS},
    };
    for (size_t k = 0; k < COUNT(cases); k++) {
        gpu_compact_rows r = rows;
        if (cases[k].change == 1) r.q = b + 2;
        if (cases[k].change == 2) r.out_stride = qd + 8;
        if (cases[k].change == 3) r.k_stride = r.v_stride = kvd + 4;
        if (cases[k].change == 4) r.v_stride = kvd + 8;
        reason = gpu_flashinfer_ready(fi, GPU_FI_FULL, cases[k].paged, &r, 1, cases[k].rows, nh, cases[k].nkv,
                                      cases[k].hd);
        CHECK(reason == cases[k].want, "%s: ready says %d, want %d", cases[k].what, reason, cases[k].want);
    }
    reason = gpu_flashinfer_ready(fi, GPU_FI_COMPACT, true, &rows, 2, cap, nh, nkv, hd);
    CHECK(reason == GPU_FI_UNPLANNED, "other sequence count than planned: %d", reason);
    reason = gpu_flashinfer_ready(fi, GPU_FI_COMPACT, false, &rows, 1, cap, nh, nkv, hd);
    CHECK(reason == GPU_FI_UNPLANNED, "compact space read as ragged rows: %d", reason);
    gpu_flashinfer_unplan(fi);
    reason = gpu_flashinfer_ready(fi, GPU_FI_FULL, false, &rows, 1, cap, nh, nkv, hd);
    CHECK(reason == GPU_FI_UNPLANNED, "unplanned: %d", reason);
    CHECK(gpu_flashinfer_run(fi, GPU_FI_FULL, &rows, cu, cu, NULL, 1.0f, stream, NULL) == cudaErrorInvalidValue,
          "run unplanned refused");
    gpu_flashinfer_free(fi);
    cudaFree(buf);
    free(cu);
}

/* A plan FlashInfer's planner fails: its out-of-space error (the test hook hands it a workspace of
 * 16 bytes) is a reason and a message, not an error, the layout stays unplanned, and the next plan
 * (a workspace of the right size again) is ready. */
static void test_plan_error(void) {
    const size_t nh = 8, nkv = 2, hd = 128, cap = 1024;
    gpu_flashinfer *fi = NULL;
    if (!CHECK(gpu_flashinfer_create(FN, RMLP_DTYPE_BF16, nh, nkv, hd, cap, 4, NULL, false, &fi) == RMLP_OK &&
                   fi != NULL,
               "create: %s", rmlp_last_error()))
        return;
    void *buf = dev_alloc(cap * (nh + 2 * nkv) * hd * 2);
    char *b = buf, error[384] = "";
    gpu_compact_rows rows = {b, b + cap * nh * hd * 2, b + cap * (nh + nkv) * hd * 2, b, nh * hd, nkv * hd, nkv * hd,
                             nh * hd};
    uint32_t cu[3] = {0, 300, 700};
    for (int layout = 0; layout < 2; layout++) {
        gpu_flashinfer_test_starve(fi, 1);
        gpu_fi_reason reason = plan_reason(fi, layout, cu, cu, 2, error, sizeof error);
        printf("  forced plan failure, layout %d: %s\n", layout, error);
        CHECK(reason == GPU_FI_PLAN_ERROR && strstr(error, "FlashInfer's PrefillPlan") != NULL &&
                  strstr(error, "700 rows, 2 sequences") != NULL,
              "starved plan, layout %d: reason %d, message \"%s\"", layout, reason, error);
        reason = gpu_flashinfer_ready(fi, layout, layout == GPU_FI_COMPACT, &rows, 2, 700, nh, nkv, hd);
        CHECK(reason == GPU_FI_PLAN_ERROR, "starved plan, layout %d: ready says %d", layout, reason);
        CHECK(plan_layout(fi, layout, cu, cu, 2, &rows, nh, nkv, hd, "replanned"), "layout %d replanned: not ready",
              layout);
    }
    gpu_flashinfer_free(fi);
    cudaFree(buf);
}

int main(void) {
    test_without_device();
    if (!gpu_flashinfer_built()) {
        printf("SKIP: libradix_mlp was built without FlashInfer (no headers in third_party/flashinfer: "
               "scripts/setup.sh fetches them; or RMLP_FLASHINFER=OFF)\n");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE;
    }
    struct cudaDeviceProp prop;
    if (!gpu_test_device(&prop)) return tu_failed > 0 ? tu_summary() : SKIP_CODE;
    if (prop.major < 8) {
        printf("SKIP: FlashInfer's kernels need sm_80 or newer\n");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE;
    }
    CUDA_MUST(cudaStreamCreate(&stream));
    uint64_t rng = 0xF1A5u;
    /* RMLP_GPU_KERNELS_QUICK=1 (compute-sanitizer runs, scripts/device/first_run.sh): bf16 only */
    const char *quick = getenv("RMLP_GPU_KERNELS_QUICK");
    for (int di = quick != NULL && strcmp(quick, "1") == 0 ? 1 : 0; di < (int)COUNT(DTYPES); di++) {
        test_full(&rng, di);
        test_compact(&rng, di);
    }
    test_graph(&rng, false);
    gpu_flashinfer *probe = NULL; /* the Hopper kernels' graph replay where they are */
    if (gpu_flashinfer_create(FN, RMLP_DTYPE_BF16, 8, 2, 128, 256, 4, NULL, true, &probe) == RMLP_OK &&
        gpu_flashinfer_has_sm90(probe))
        test_graph(&rng, true);
    else
        printf("  no FlashInfer Hopper kernels in this build or on this device: their graph replay skipped\n");
    gpu_flashinfer_free(probe);
    test_bounds();
    test_plan_error();
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
