/*
 * gpu_flashinfer_cases.h: the cases test_gpu_flashinfer.c (head_dim 64 and 128, full causal
 * attention) and test_gpu_flashinfer_variants.c (head_dim 256, sliding windows, logit soft-caps)
 * run FlashInfer's batch prefill (gpu/flashinfer.h) through, for one layer's attention `la`
 * (model/model_ext.h: its scale, window and soft-cap), against the CPU path (cpu/attention.c) and
 * the reference kernel (gpu/attention.cu), in f16 and bf16:
 *   - full_case: full space (ragged KV) over sequences of the given lengths, and the same keys
 *     read as pages of one row from storage in another order (paged_full);
 *   - compact_case: compact space (paged KV, page size 1) over a planner-built plan, q/k/v
 *     separate or the columns of one fused qkv buffer, the rows past the compact ones left
 *     untouched; and (q/k/v separate) compact against full space on the same batch;
 *   - graph_case: the plan/run split under CUDA-graph capture, replayed over another batch.
 * A layer the instantiated variants do not take (gpu_flashinfer_takes_layer) must be refused by
 * gpu_flashinfer_run (cudaErrorInvalidValue), never run. Inputs are drawn in fp32 and rounded to
 * the dtype; outputs are poisoned (0xFF bytes: NaN) first; tolerances as test_gpu_kernels' for
 * f16/bf16 (FlashInfer also rounds the softmax weights to the dtype before P V: at most 2^-9 of
 * max|v| more for bf16, inside the bound). Every comparison prints its measured error. Define FN
 * (the test's name) before including; one translation unit per test executable.
 */
#ifndef RMLP_TESTS_GPU_FLASHINFER_CASES_H
#define RMLP_TESTS_GPU_FLASHINFER_CASES_H

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

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f16", "bf16"};
static const tol TOLS[] = {{1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}};

static cudaStream_t stream;

static int launched(cudaError_t error, const char *what) { return launched_on(error, what, stream); }

/* The compact cases' batches: deep trees (vocab 2-3), many short sequences, long shared prefixes
 * (17 to 200 rows: the paper's shape, smaller). */
static const tu_batch_shape COMPACT_SHAPES[] = {{9, 70, 2, 33, 0}, {24, 20, 2, 17, 0}, {5, 150, 50, 100, 0},
                                                {16, 300, 3, 200, 0}};

/* Draws the batch of COMPACT_SHAPES[i] into *b (free it with tu_batch_free either way) and plans it,
 * radix on, into *plan; 0 when the batch is empty or the planner failed (a failed check). */
static int compact_batch(uint64_t *rng, rmlp_planner *planner, size_t i, tu_batch *b, rmlp_plan *plan) {
    rmlp_plan_params params = tu_params(1.0, 0);
    *b = tu_random_batch(rng, &COMPACT_SHAPES[i]);
    return b->n_tokens > 0 &&
           CHECK(rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, plan) == RMLP_OK &&
                     plan->qo_indptr != NULL,
                 "plan: %s", rmlp_last_error());
}

/* After the checks that need no device: FlashInfer in the build, a device of sm_80 or newer, the
 * test's stream. -1 to go on, else the exit code: SKIP (77), saying why, unless a check failed. */
static int fi_test_begin(void) {
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
    return -1;
}

/* The first of DTYPES to run: bf16 alone with RMLP_GPU_KERNELS_QUICK=1 (compute-sanitizer runs,
 * scripts/device/first_run.sh). */
static int fi_first_dtype(void) {
    const char *quick = getenv("RMLP_GPU_KERNELS_QUICK");
    return quick != NULL && strcmp(quick, "1") == 0 ? 1 : 0;
}

/* A layer of head_dim hd scaled by 1 / sqrt(hd), with a window (0: none) and soft-cap (0: none). */
static layer_attention fi_layer(size_t hd, uint32_t window, float softcap) {
    layer_attention la = {window, softcap, 1.0f / sqrtf((float)hd), 0};
    return la;
}

/* " window=W softcap=C" for the layer's variant, "" for full causal attention. */
static void layer_name(const layer_attention *la, char *out, size_t cap) {
    out[0] = '\0';
    if (la->window != 0) snprintf(out, cap, " window=%u", la->window);
    if (la->softcap != 0.0f) snprintf(out + strlen(out), cap - strlen(out), " softcap=%g", la->softcap);
}

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

/* gpu_flashinfer_run on a ready layout, for layer la: launched where the variant is instantiated
 * (then 1), refused with cudaErrorInvalidValue, touching nothing, where it is not (then 0). */
static int run_layer(gpu_flashinfer *fi, gpu_fi_layout layout, const gpu_compact_rows *rows, const uint32_t *d_qo,
                     const uint32_t *d_kv, const uint32_t *d_idx, size_t hd, layer_attention la, const char *what) {
    cudaError_t error = gpu_flashinfer_run(fi, layout, rows, d_qo, d_kv, d_idx, la, stream, NULL);
    if (gpu_flashinfer_takes_layer(hd, la.window, la.softcap)) return launched(error, what);
    CHECK(error == cudaErrorInvalidValue, "%s: a variant not instantiated: run says %s, want it refused", what,
          cudaGetErrorString(error));
    return 0;
}

/* Elements of a and b (n) that differ in any bit (NaN counts as a difference). */
static size_t differing(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

/* Full space with K/V read as pages of one row through kv_indices (what a forward does with the
 * compact rows): the keys stored in reverse order and found through the indices. The reference
 * kernel so must give the ragged reference kernel's output bit for bit (the same kernel reading
 * other addresses); FlashInfer's paged kernel, ready where the ragged one was (`ready`), its
 * ragged kernel's output (d_ragged, NULL when that did not run) within the tolerance, saying
 * whether bit for bit; or, for a variant not instantiated, refused as the ragged run was. */
static void paged_full(int di, gpu_flashinfer *fi, const uint32_t *cu, size_t n_seqs, size_t nh, size_t nkv, size_t hd,
                       layer_attention la, const float *k, const float *v, void *d_q, void *d_k, void *d_v,
                       uint32_t *d_cu, int ready, const void *d_ragged, const char *what) {
    rmlp_dtype dt = DTYPES[di];
    size_t nt = cu[n_seqs], qd = nh * hd, kvd = nkv * hd;
    float *kp = tu_xmalloc(nt * kvd * 4 + 4), *vp = tu_xmalloc(nt * kvd * 4 + 4);
    uint32_t *perm = tu_xmalloc(nt * 4 + 4);
    for (size_t i = 0; i < nt; i++) {
        perm[i] = (uint32_t)(nt - 1 - i);
        memcpy(kp + perm[i] * kvd, k + i * kvd, kvd * 4), memcpy(vp + perm[i] * kvd, v + i * kvd, kvd * 4);
    }
    void *d_kp = upload(kp, nt * kvd, dt), *d_vp = upload(vp, nt * kvd, dt), *d_a = poisoned(nt * qd, dt);
    void *d_b = poisoned(nt * qd, dt), *d_c = poisoned(nt * qd, dt);
    uint32_t *d_idx = upload_u32(perm, nt);
    gpu_compact_rows paged = {d_q, d_kp, d_vp, d_b, qd, kvd, kvd, qd};
    char line[300];
    if (nt > 0 && launched(gpu_attention(d_q, d_k, d_v, d_a, d_cu, n_seqs, nt, nh, nkv, hd, la, dt, stream), what) &&
        launched(gpu_compact_attention(&paged, d_cu, d_cu, d_idx, n_seqs, nt, nh, nkv, hd, la, dt, stream), what)) {
        float *a = download_as(d_a, nt * qd, dt), *b = download_as(d_b, nt * qd, dt);
        size_t d = differing(a, b, nt * qd);
        CHECK(d == 0, "%s: the reference kernel through kv_indices differs from its ragged run in %zu of %zu", what, d,
              nt * qd);
        free(a), free(b);
    }
    paged.out = d_c;
    gpu_fi_reason reason = gpu_flashinfer_ready(fi, GPU_FI_FULL, true, &paged, n_seqs, nt, nh, nkv, hd);
    CHECK((reason == GPU_FI_OK) == (ready != 0), "%s: paged K/V ready says %d", what, reason);
    if (reason == GPU_FI_OK && run_layer(fi, GPU_FI_FULL, &paged, d_cu, d_cu, d_idx, hd, la, what) &&
        d_ragged != NULL) {
        float *got = download_as(d_c, nt * qd, dt), *ragged = download_as(d_ragged, nt * qd, dt);
        snprintf(line, sizeof line, "flashinfer %s, K/V as pages vs ragged (%zu of %zu differ in a bit)", what,
                 differing(got, ragged, nt * qd), nt * qd);
        compare_report(line, got, ragged, nt * qd, TOLS[di]);
        free(got), free(ragged);
    }
    cudaFree(d_kp), cudaFree(d_vp), cudaFree(d_a), cudaFree(d_b), cudaFree(d_c), cudaFree(d_idx);
    free(kp), free(vp), free(perm);
}

/* Full space over sequences of lengths lens (n_seqs, at most 15), layer la. */
static void full_case(uint64_t *rng, int di, gpu_flashinfer *fi, const uint32_t *lens, size_t n_seqs, size_t nh,
                      size_t nkv, size_t hd, layer_attention la) {
    rmlp_dtype dt = DTYPES[di];
    uint32_t cu[16] = {0};
    size_t longest = 0;
    char lengths[96] = "", variant[64], what[240];
    for (size_t s = 0; s < n_seqs; s++) {
        cu[s + 1] = cu[s] + lens[s];
        if (lens[s] > longest) longest = lens[s];
        snprintf(lengths + strlen(lengths), sizeof lengths - strlen(lengths), "%s%u", s ? "," : "", lens[s]);
    }
    size_t nt = cu[n_seqs], nq = nt * nh * hd, nk = nt * nkv * hd;
    float *q = random_values(rng, nq, -3, 3, dt), *k = random_values(rng, nk, -1, 1, dt);
    float *v = random_values(rng, nk, -1, 1, dt), *ref = tu_xmalloc(nq * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, hd) * 4);
    cpu_attention(q, k, v, cu, n_seqs, nh, nkv, hd, &la, scratch, ref);
    void *d_q = upload(q, nq, dt), *d_k = upload(k, nk, dt), *d_v = upload(v, nk, dt);
    void *d_out = poisoned(nq, dt), *d_ref = poisoned(nq, dt);
    uint32_t *d_cu = upload_u32(cu, n_seqs + 1);
    gpu_compact_rows rows = {d_q, d_k, d_v, d_out, nh * hd, nkv * hd, nkv * hd, nh * hd};
    layer_name(&la, variant, sizeof variant);
    snprintf(what, sizeof what, "full %s lengths=%s heads=%zu/%zu head_dim=%zu%s", DTYPE_NAMES[di], lengths, nh, nkv,
             hd, variant);
    int ready = plan_layout(fi, GPU_FI_FULL, cu, cu, n_seqs, &rows, nh, nkv, hd, what);
    int want = flashinfer_tiles(nt, n_seqs, nh / nkv, hd);
    CHECK(ready == want, "%s: ready %d, want %d (FlashInfer's tile choice)", what, ready, want);
    int ran = ready && run_layer(fi, GPU_FI_FULL, &rows, d_cu, d_cu, NULL, hd, la, what);
    if (ran && launched(gpu_attention(d_q, d_k, d_v, d_ref, d_cu, n_seqs, nt, nh, nkv, hd, la, dt, stream), what)) {
        float *got = download_as(d_out, nq, dt), *kernel = download_as(d_ref, nq, dt);
        char line[300];
        snprintf(line, sizeof line, "flashinfer %s vs CPU", what);
        compare_report(line, got, ref, nq, TOLS[di]);
        snprintf(line, sizeof line, "flashinfer %s vs the reference kernel", what);
        compare_report(line, got, kernel, nq, TOLS[di]);
        free(got), free(kernel);
    } else if (ready && !ran) { /* refused: out untouched */
        float *got = download_as(d_out, nq, dt);
        size_t written = 0;
        for (size_t i = 0; i < nq; i++) written += !isnan(got[i]);
        CHECK(written == 0, "%s: a refused run wrote %zu elements", what, written);
        free(got);
    }
    paged_full(di, fi, cu, n_seqs, nh, nkv, hd, la, k, v, d_q, d_k, d_v, d_cu, ready, ran ? d_out : NULL, what);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_ref), cudaFree(d_cu);
    free(q), free(k), free(v), free(ref), free(scratch);
}

/* Compact space over `plan` (built with qo_indptr), layer la; q/k/v separate or fused. */
static void compact_case(uint64_t *rng, int di, const rmlp_plan *plan, size_t nh, size_t nkv, size_t hd, int fused,
                         layer_attention la) {
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt), nc = plan->n_compact, nt = plan->n_tokens, ns = plan->n_seqs, extra = 3, longest = 0;
    const uint32_t *cu = plan->cu_seqlens, *qo = plan->qo_indptr, *scatter = plan->scatter;
    for (size_t s = 0; s < ns; s++)
        if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    size_t qd = nh * hd, kvd = nkv * hd, width = qd + 2 * kvd;
    float *qkv = random_values(rng, nc * width, -3, 3, dt), *ref = tu_xmalloc(nc * qd * 4);
    size_t qs = fused ? width : qd, ks = fused ? width : kvd;
    /* separate: q, k, v one after the other, each dense */
    const float *q = qkv, *k = fused ? qkv + qd : qkv + nc * qd, *v = fused ? qkv + qd + kvd : qkv + nc * (qd + kvd);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, hd) * 4);
    cpu_attention_rows cpu_rows = {q, k, v, ref, qs, ks, ks, qd, 0};
    cpu_compact_attention(&cpu_rows, qo, cu, scatter, ns, nh, nkv, hd, &la, scratch);

    void *d_qkv = upload(qkv, nc * width, dt), *d_out = poisoned((nc + extra) * qd, dt);
    void *d_ref = poisoned((nc + extra) * qd, dt);
    uint32_t *d_qo = upload_u32(qo, ns + 1), *d_cu = upload_u32(cu, ns + 1), *d_idx = upload_u32(scatter, nt);
    char *base = d_qkv, variant[64], what[240], line[300];
    gpu_compact_rows rows = {base, base + (size_t)(k - qkv) * es, base + (size_t)(v - qkv) * es, d_out, qs, ks, ks, qd};
    gpu_compact_rows ref_rows = rows;
    ref_rows.out = d_ref;
    layer_name(&la, variant, sizeof variant);
    snprintf(what, sizeof what, "compact %s N=%zu N'=%zu seqs=%zu heads=%zu/%zu head_dim=%zu %s%s", DTYPE_NAMES[di],
             nt, nc, ns, nh, nkv, hd, fused ? "fused" : "separate", variant);
    gpu_flashinfer *fi = NULL;
    rmlp_status status = gpu_flashinfer_create(FN, dt, nh, nkv, hd, nt, ns, NULL, false, &fi);
    if (CHECK(status == RMLP_OK && fi != NULL, "%s: create: %s", what, rmlp_last_error())) {
        int ready = plan_layout(fi, GPU_FI_COMPACT, qo, cu, ns, &rows, nh, nkv, hd, what);
        int want = flashinfer_tiles(nc, ns, nh / nkv, hd);
        CHECK(ready == want, "%s: ready %d, want %d (FlashInfer's tile choice)", what, ready, want);
        if (ready && run_layer(fi, GPU_FI_COMPACT, &rows, d_qo, d_cu, d_idx, hd, la, what) &&
            launched(gpu_compact_attention(&ref_rows, d_qo, d_cu, d_idx, ns, nc, nh, nkv, hd, la, dt, stream), what)) {
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
                CHECK(full_ready == flashinfer_tiles(nt, ns, nh / nkv, hd), "%s: full space ready %d", what,
                      full_ready);
                if (full_ready && run_layer(fi, GPU_FI_FULL, &full_rows, d_cu, d_cu, NULL, hd, la, what)) {
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

/* The plan/run split under CUDA-graph capture, bf16, 8 query heads over 2, layer la of head_dim
 * hd: each layout's run captured, then replayed after planning another batch of the same counts
 * (197 query rows in 2 sequences, and the same number of keys in all, which the launch's window
 * depends on: gpu/flashinfer.h) with longer sequences than at capture. With `sm90` (a state that
 * has FlashInfer's Hopper kernels: gpu/flashinfer_sm90.h), the compact layout's launch must run
 * them where the layer is plain, the full (ragged) one FA2's. */
static void graph_case(uint64_t *rng, bool sm90, size_t hd, layer_attention la) {
    const int di = 1;
    const rmlp_dtype dt = DTYPES[di];
    const size_t nh = 8, nkv = 2, qd = nh * hd, kvd = nkv * hd, rows_n = 197, max_keys = 400;
    float *q = random_values(rng, rows_n * qd, -3, 3, dt), *k = random_values(rng, max_keys * kvd, -1, 1, dt);
    float *v = random_values(rng, max_keys * kvd, -1, 1, dt), *ref = tu_xmalloc(rows_n * qd * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(max_keys, hd) * 4);
    void *d_q = upload(q, rows_n * qd, dt), *d_k = upload(k, max_keys * kvd, dt), *d_v = upload(v, max_keys * kvd, dt);
    void *d_out = poisoned(rows_n * qd, dt);
    uint32_t *d_qo = dev_alloc(3 * 4), *d_kv = dev_alloc(3 * 4), *d_idx = dev_alloc(max_keys * 4);
    bool plain = la.window == 0 && la.softcap == 0.0f;
    char variant[64];
    layer_name(&la, variant, sizeof variant);
    gpu_flashinfer *fi = NULL;
    if (!CHECK(gpu_flashinfer_create(FN, dt, nh, nkv, hd, max_keys, 2, NULL, sm90, &fi) == RMLP_OK && fi != NULL &&
                   gpu_flashinfer_has_sm90(fi) == sm90,
               "create (Hopper %d): %s", sm90, rmlp_last_error()))
        return;
    /* full space: lengths 67, 130 at capture, then 10, 187; compact: (l0, shared, l1) = (120, 50, 77),
     * then (20, 50, 177): the same 197 query rows over 247 keys in 2 sequences, longer paths after
     * the capture. */
    static const uint32_t full_lens[2][2] = {{67, 130}, {10, 187}};
    static const uint32_t paths[2][3] = {{120, 50, 77}, {20, 50, 177}};
    for (int layout = 0; layout < 2; layout++) {
        cudaGraphExec_t exec = NULL;
        for (int round = 0; round < 2; round++) {
            uint32_t qo[3], kv[3], idx[400];
            if (layout == GPU_FI_FULL) {
                qo[0] = kv[0] = 0, qo[1] = kv[1] = full_lens[round][0], qo[2] = kv[2] = qo[1] + full_lens[round][1];
                cpu_attention(q, k, v, qo, 2, nh, nkv, hd, &la, scratch, ref);
            } else {
                two_paths(paths[round][0], paths[round][1], paths[round][2], qo, kv, idx);
                cpu_attention_rows cr = {q, k, v, ref, qd, kvd, kvd, qd, 0};
                cpu_compact_attention(&cr, qo, kv, idx, 2, nh, nkv, hd, &la, scratch);
                CUDA_MUST(cudaMemcpy(d_idx, idx, kv[2] * 4, cudaMemcpyHostToDevice));
            }
            CUDA_MUST(cudaMemcpy(d_qo, qo, sizeof qo, cudaMemcpyHostToDevice));
            CUDA_MUST(cudaMemcpy(d_kv, kv, sizeof kv, cudaMemcpyHostToDevice));
            CUDA_MUST(cudaMemset(d_out, 0xFF, rows_n * qd * elem_size(dt)));
            uploads_landed();
            gpu_compact_rows rows = {d_q, d_k, d_v, d_out, qd, kvd, kvd, qd};
            char what[200];
            snprintf(what, sizeof what, "graph %s%s bf16 heads=8/2 head_dim=%zu%s, %s", sm90 ? "hopper " : "",
                     layout ? "compact" : "full", hd, variant,
                     round ? "replayed after planning another batch of the same counts" : "captured");
            if (!CHECK(plan_layout(fi, layout, qo, kv, 2, &rows, nh, nkv, hd, what), "%s: not ready", what)) break;
            if (round == 0) {
                cudaGraph_t graph = NULL;
                bool used_sm90 = false, want_sm90 = sm90 && plain && layout == GPU_FI_COMPACT;
                CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
                cudaError_t e1 =
                    gpu_flashinfer_run(fi, layout, &rows, d_qo, d_kv, layout ? d_idx : NULL, la, stream, &used_sm90);
                cudaError_t e2 = cudaStreamEndCapture(stream, &graph);
                if (!CHECK(e1 == cudaSuccess && e2 == cudaSuccess && used_sm90 == want_sm90,
                           "%s: run %s (Hopper kernels %d, want %d), end capture %s", what, cudaGetErrorString(e1),
                           used_sm90, want_sm90, cudaGetErrorString(e2)))
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

/* graph_case on FA2 (head_dim hd, layer la), then on a state with FlashInfer's Hopper kernels at
 * head_dim 128 (layer la128) where the build and the device have them. */
static void graph_cases(uint64_t *rng, size_t hd, layer_attention la, layer_attention la128) {
    graph_case(rng, false, hd, la);
    gpu_flashinfer *probe = NULL;
    if (gpu_flashinfer_create(FN, RMLP_DTYPE_BF16, 8, 2, 128, 256, 4, NULL, true, &probe) == RMLP_OK &&
        gpu_flashinfer_has_sm90(probe))
        graph_case(rng, true, 128, la128);
    else
        printf("  no FlashInfer Hopper kernels in this build or on this device: their graph replay skipped\n");
    gpu_flashinfer_free(probe);
}

#endif
