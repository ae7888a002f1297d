/*
 * test_gpu_flashinfer_variants.c: FlashInfer's batch prefill (gpu/flashinfer.h) for the layers
 * beyond test_gpu_flashinfer.c's plain head_dim 64 and 128: head_dim 256 (Gemma, Gemma 2, Gemma 3),
 * sliding windows (Gemma 2 and 3's local layers, Qwen2, Mistral) and logit soft-caps (Gemma 2), in
 * both layouts, against the CPU path and the reference kernel (the cases: gpu_flashinfer_cases.h):
 *   - which variants are instantiated (gpu_flashinfer_takes_layer), without a device;
 *   - full space (ragged rows, and pages through indices) over sequences of 0-733 rows, GQA 4:1
 *     and 1:1 at head_dim 256 (64-row query tiles: a batch of 9 rows in 2 sequences is FlashInfer's
 *     at 4:1 and too small at 1:1); windows of 1 key (each query sees itself), 40 keys (cutting the
 *     long sequences) and 5000 (past every key of the batch: no mask), soft-caps of 50 (Gemma 2's,
 *     barely touching these scores) and 2 (capping most of them), alone and with a window; a
 *     soft-cap at head_dim 64 or 128, which no variant has, refused;
 *   - compact space over planner-built batches whose shared prefixes (17 to 200 rows) are longer
 *     than the window of 24 keys, q/k/v separate and fused, and the same batch in full space;
 *   - a windowed, soft-capped launch captured in a CUDA graph and replayed over another batch of
 *     the same counts (longer sequences), and on a Hopper device a windowed head_dim-128 launch,
 *     which must run FA2, not the Hopper kernels (they have no window).
 * Without FlashInfer in the build, or without a device, it says SKIP and exits 77 after the checks
 * that need neither. RMLP_GPU_KERNELS_QUICK=1 skips f16 (for compute-sanitizer).
 */
#define FN "test_gpu_flashinfer_variants"

#include "gpu_flashinfer_cases.h"

/* ---- what needs no device ------------------------------------------------------------------ */

static void test_without_device(void) {
    int built = gpu_flashinfer_built();
    static const struct {
        size_t hd;
        uint32_t window;
        float softcap;
        int want;
    } layers[] = {{64, 0, 0.0f, 1},     {64, 40, 0.0f, 1},     {64, 0, 50.0f, 0},     {64, 40, 50.0f, 0},
                  {128, 4096, 0.0f, 1}, {128, 0, 50.0f, 0},    {128, 4096, 50.0f, 0}, {256, 0, 0.0f, 1},
                  {256, 1, 0.0f, 1},    {256, 4096, 50.0f, 1}, {256, 0, 30.0f, 1},    {96, 0, 0.0f, 0},
                  {512, 0, 0.0f, 0},    {512, 4096, 0.0f, 0}};
    for (size_t i = 0; i < COUNT(layers); i++)
        CHECK(gpu_flashinfer_takes_layer(layers[i].hd, layers[i].window, layers[i].softcap) ==
                  (built && layers[i].want),
              "takes_layer(head_dim %zu, window %u, softcap %g)", layers[i].hd, layers[i].window, layers[i].softcap);
}

/* ---- full space -------------------------------------------------------------------------------- */

static void test_full(uint64_t *rng, int di) {
    static const uint32_t batches[][6] = {{0, 1, 3, 7, 19, 733}, {130, 67, 0, 1, 0, 0}, {20, 30, 0, 0, 0, 0},
                                          {5, 4, 0, 0, 0, 0}};
    static const size_t n_seqs[] = {6, 4, 2, 2};
    static const struct {
        size_t hd, nh, nkv;
        uint32_t window;
        float softcap;
    } cases[] = {
        /* Gemma (plain), Gemma 3 (windows), Gemma 2 (soft-cap 50 on every layer, a window on half) */
        {256, 8, 2, 0, 0.0f},   {256, 4, 4, 0, 0.0f},    {256, 8, 2, 40, 0.0f},   {256, 4, 4, 1, 0.0f},
        {256, 8, 2, 5000, 0.0f}, {256, 8, 2, 40, 50.0f}, {256, 4, 4, 0, 50.0f},   {256, 8, 2, 40, 2.0f},
        /* Mistral, Qwen2 and Gemma 3 27B: head_dim 128; small Qwen2: 64; soft-caps there (Gemma 2
         * 27B) refused: no variant */
        {128, 8, 2, 40, 0.0f},  {128, 8, 2, 1, 0.0f},    {128, 8, 2, 40, 50.0f},  {64, 8, 2, 40, 0.0f},
        {64, 4, 4, 1, 0.0f},    {64, 8, 2, 0, 2.0f},
    };
    for (size_t c = 0; c < COUNT(cases); c++) {
        gpu_flashinfer *fi = NULL;
        rmlp_status status = gpu_flashinfer_create(FN, DTYPES[di], cases[c].nh, cases[c].nkv, cases[c].hd, 1024, 16,
                                                   NULL, false, &fi);
        if (!CHECK(status == RMLP_OK && fi != NULL, "create %s heads %zu/%zu head_dim %zu: %s", DTYPE_NAMES[di],
                   cases[c].nh, cases[c].nkv, cases[c].hd, rmlp_last_error()))
            continue;
        for (size_t b = 0; b < COUNT(batches); b++)
            full_case(rng, di, fi, batches[b], n_seqs[b], cases[c].nh, cases[c].nkv, cases[c].hd,
                      fi_layer(cases[c].hd, cases[c].window, cases[c].softcap));
        gpu_flashinfer_free(fi);
    }
}

/* ---- compact space ------------------------------------------------------------------------------ */

/* Over COMPACT_SHAPES, whose shared prefixes are all longer than the window of 24 keys. */
static void test_compact(uint64_t *rng, int di) {
    static const struct {
        size_t hd;
        uint32_t window;
        float softcap;
    } layers[] = {{256, 0, 0.0f}, {256, 24, 0.0f}, {256, 24, 50.0f}, {256, 0, 2.0f}, {128, 24, 0.0f}, {64, 24, 0.0f},
                  {128, 0, 2.0f}}; /* the last refused: no variant */
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    for (size_t sh = 0; sh < COUNT(COMPACT_SHAPES); sh++) {
        tu_batch b;
        rmlp_plan plan;
        if (compact_batch(rng, planner, sh, &b, &plan))
            for (size_t l = 0; l < COUNT(layers); l++)
                for (int fused = 0; fused < 2; fused++)
                    compact_case(rng, di, &plan, 8, 2, layers[l].hd, fused,
                                 fi_layer(layers[l].hd, layers[l].window, layers[l].softcap));
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
}

int main(void) {
    test_without_device();
    int rc = fi_test_begin();
    if (rc >= 0) return rc;
    uint64_t rng = 0x6E33Au;
    for (int di = fi_first_dtype(); di < (int)COUNT(DTYPES); di++) {
        test_full(&rng, di);
        test_compact(&rng, di);
    }
    graph_cases(&rng, 256, fi_layer(256, 30, 2.0f), fi_layer(128, 30, 0.0f)); /* a window on Hopper: FA2 */
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
