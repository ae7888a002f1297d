/*
 * test_gpu_flashinfer.c: FlashInfer's batch prefill behind gpu/flashinfer.h, in both layouts, against
 * the reference CUDA kernels (gpu/attention.cu) and the CPU path (cpu/attention.c), in f16 and bf16,
 * head_dim 64 and 128, GQA 4:1, 2:1 and 1:1, full causal attention (the cases: gpu_flashinfer_cases.h;
 * head_dim 256, sliding windows and soft-caps: test_gpu_flashinfer_variants.c):
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
 * Inputs, poisoning and tolerances: gpu_flashinfer_cases.h. Without FlashInfer in the build, or
 * without a device, it says SKIP and exits 77 after the checks that need neither.
 * RMLP_GPU_KERNELS_QUICK=1 skips f16 (for compute-sanitizer).
 */
#define FN "test_gpu_flashinfer"

#include "gpu_flashinfer_cases.h"

static const size_t HEAD_DIMS[] = {64, 128};

/* ---- what needs no device ------------------------------------------------------------------ */

static void test_without_device(void) {
    CHECK(gpu_flashinfer_built() == (RMLP_EXPECT_FLASHINFER != 0), "gpu_flashinfer_built() says %d, the build %d",
          gpu_flashinfer_built(), RMLP_EXPECT_FLASHINFER);
    int built = gpu_flashinfer_built();
    static const struct {
        rmlp_dtype dt;
        size_t nh, nkv, hd;
        int want;
    } shapes[] = {{RMLP_DTYPE_BF16, 16, 8, 128, 1}, {RMLP_DTYPE_F16, 9, 3, 64, 1},   {RMLP_DTYPE_BF16, 4, 4, 64, 1},
                  {RMLP_DTYPE_F16, 8, 4, 256, 1},   {RMLP_DTYPE_F32, 16, 8, 128, 0},  {RMLP_DTYPE_BF16, 16, 8, 96, 0},
                  {RMLP_DTYPE_BF16, 16, 8, 512, 0}, {RMLP_DTYPE_F32, 16, 8, 256, 0},  {RMLP_DTYPE_F16, 6, 4, 64, 0},
                  {RMLP_DTYPE_BF16, 4, 0, 64, 0},   {RMLP_DTYPE_BF16, 2, 4, 64, 0}};
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
    CHECK(gpu_flashinfer_run(NULL, GPU_FI_FULL, &rows, cu, cu, NULL, fi_layer(64, 0, 0.0f), NULL, NULL) ==
              cudaErrorInvalidValue,
          "run on NULL refused");
}

/* ---- full space ------------------------------------------------------------------------------ */

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
                full_case(rng, di, fi, batches[b], n_seqs[b], heads[h][0], heads[h][1], HEAD_DIMS[a],
                          fi_layer(HEAD_DIMS[a], 0, 0.0f));
            gpu_flashinfer_free(fi);
        }
}

/* ---- compact space ---------------------------------------------------------------------------- */

static void test_compact(uint64_t *rng, int di) {
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    for (size_t sh = 0; sh < COUNT(COMPACT_SHAPES); sh++) {
        tu_batch b;
        rmlp_plan plan;
        if (compact_batch(rng, planner, sh, &b, &plan))
            for (size_t a = 0; a < COUNT(HEAD_DIMS); a++)
                for (size_t h = 0; h < COUNT(heads); h++)
                    for (int fused = 0; fused < 2; fused++)
                        compact_case(rng, di, &plan, heads[h][0], heads[h][1], HEAD_DIMS[a], fused,
                                     fi_layer(HEAD_DIMS[a], 0, 0.0f));
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
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
    CHECK(gpu_flashinfer_run(fi, GPU_FI_FULL, &rows, cu, cu, NULL, fi_layer(hd, 0, 0.0f), stream, NULL) ==
              cudaErrorInvalidValue,
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
    int rc = fi_test_begin();
    if (rc >= 0) return rc;
    uint64_t rng = 0xF1A5u;
    for (int di = fi_first_dtype(); di < (int)COUNT(DTYPES); di++) {
        test_full(&rng, di);
        test_compact(&rng, di);
    }
    graph_cases(&rng, 128, fi_layer(128, 0, 0.0f), fi_layer(128, 0, 0.0f));
    test_bounds();
    test_plan_error();
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
