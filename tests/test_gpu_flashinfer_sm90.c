/*
 * test_gpu_flashinfer_sm90.c: FlashInfer's Hopper batch prefill (gpu/flashinfer_sm90.h) behind
 * gpu/flashinfer.h, in the layouts it takes (K/V read as pages of one row), in f16 and bf16, head_dim
 * 128, GQA 4:1 and 1:1, against the reference CUDA kernels and the CPU path with the tolerances of
 * test_gpu_flashinfer, and against FA2 on the same batch:
 *   - compact space on planner-built plans of batches sharing prefixes (deep trees, sequences that
 *     own no row, a long shared prefix);
 *   - full space reading K/V stored in reverse order through kv_indices;
 *   (their graph replay is test_gpu_flashinfer's, which runs it again with them where they are);
 *   - that each launch really ran the Hopper kernels (gpu_flashinfer_run's flag), and that a state
 *     made without them (what RADIX_MLP_GPU_FLASHINFER_SM90=off asks for) has none and runs FA2.
 * Needs a build with them (RMLP_FLASHINFER_SM90) and a device of compute capability 9.0: elsewhere
 * it says which is missing and exits 77 (SKIP).
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
#define FN "test_gpu_flashinfer_sm90"
#define HD 128

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f16", "bf16"};
static const tol TOLS[] = {{1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}};

static cudaStream_t stream;

static int launched(cudaError_t error, const char *what) { return launched_on(error, what, stream); }

/* A layout's compact-space arrays and where its K/V live: queries qo (n_seqs + 1), keys kv
 * (n_seqs + 1) through idx (kv[n_seqs]) into n_kv stored rows. */
typedef struct layout_case {
    const uint32_t *qo, *kv, *idx;
    size_t n_seqs, n_rows, n_kv;
} layout_case;

/* Runs case c in `layout` on fi's Hopper kernels (which must take it) and checks the output against
 * the reference kernel over the same indices and the CPU, and against FA2 on the same buffers. */
static void check_case(int di, size_t nh, size_t nkv, gpu_fi_layout layout, const layout_case *c, uint64_t *rng,
                       const char *what) {
    rmlp_dtype dt = DTYPES[di];
    size_t qd = nh * HD, kvd = nkv * HD, longest = 0;
    for (size_t s = 0; s < c->n_seqs; s++)
        if (c->kv[s + 1] - c->kv[s] > longest) longest = c->kv[s + 1] - c->kv[s];
    float scale = 1.0f / sqrtf((float)HD);
    const layer_attention plain = {0, 0.0f, scale, 0}; /* full causal attention, no soft-cap */
    float *q = random_values(rng, c->n_rows * qd, -3, 3, dt), *k = random_values(rng, c->n_kv * kvd, -1, 1, dt);
    float *v = random_values(rng, c->n_kv * kvd, -1, 1, dt), *ref = tu_xmalloc(c->n_rows * qd * 4);
    float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, HD) * 4);
    cpu_attention_rows cr = {q, k, v, ref, qd, kvd, kvd, qd, 0};
    cpu_compact_attention(&cr, c->qo, c->kv, c->idx, c->n_seqs, nh, nkv, HD, &plain, scratch);
    void *d_q = upload(q, c->n_rows * qd, dt), *d_k = upload(k, c->n_kv * kvd, dt), *d_v = upload(v, c->n_kv * kvd, dt);
    void *d_out[3] = {poisoned(c->n_rows * qd, dt), poisoned(c->n_rows * qd, dt), poisoned(c->n_rows * qd, dt)};
    uint32_t *d_qo = upload_u32(c->qo, c->n_seqs + 1), *d_kv = upload_u32(c->kv, c->n_seqs + 1);
    uint32_t *d_idx = upload_u32(c->idx, c->kv[c->n_seqs]);
    gpu_fi_reason reasons[2];
    char error[384] = "", line[300];
    /* [0] the Hopper kernels, [1] FA2, [2] the reference kernel */
    gpu_flashinfer *fis[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++) {
        CHECK(gpu_flashinfer_create(FN, dt, nh, nkv, HD, c->n_rows > c->n_kv ? c->n_rows : c->n_kv, c->n_seqs, NULL,
                                    f == 0, &fis[f]) == RMLP_OK &&
                  fis[f] != NULL && gpu_flashinfer_has_sm90(fis[f]) == (f == 0),
              "%s: create (Hopper %d): %s", what, f == 0, rmlp_last_error());
        if (fis[f] == NULL) continue;
        reasons[0] = gpu_flashinfer_plan(fis[f], layout, c->qo, c->kv, c->n_seqs, stream, error, sizeof error,
                                         &reasons[1]);
        CUDA_MUST(cudaStreamSynchronize(stream));
        CHECK(reasons[0] == GPU_FI_OK && reasons[1] == (f == 0 ? GPU_FI_OK : GPU_FI_UNPLANNED),
              "%s (Hopper %d): plan reasons %d %d (%s)", what, f == 0, reasons[0], reasons[1], error);
        gpu_compact_rows rows = {d_q, d_k, d_v, d_out[f], qd, kvd, kvd, qd};
        bool sm90 = false;
        if (reasons[0] == GPU_FI_OK &&
            launched(gpu_flashinfer_run(fis[f], layout, &rows, d_qo, d_kv, d_idx, plain, stream, &sm90), what))
            CHECK(sm90 == (f == 0), "%s: ran the Hopper kernels: %d, want %d", what, sm90, f == 0);
    }
    gpu_compact_rows rows = {d_q, d_k, d_v, d_out[2], qd, kvd, kvd, qd};
    if (launched(gpu_compact_attention(&rows, d_qo, d_kv, d_idx, c->n_seqs, c->n_rows, nh, nkv, HD, plain, dt, stream),
                 what)) {
        float *got = download_as(d_out[0], c->n_rows * qd, dt), *fa2 = download_as(d_out[1], c->n_rows * qd, dt);
        float *kernel = download_as(d_out[2], c->n_rows * qd, dt);
        const char *ref_names[3] = {"the CPU", "FA2", "the reference kernel"};
        const float *refs[3] = {ref, fa2, kernel};
        for (int r = 0; r < 3; r++) {
            snprintf(line, sizeof line, "hopper %s vs %s", what, ref_names[r]);
            compare_report(line, got, refs[r], c->n_rows * qd, TOLS[di]);
        }
        free(got), free(fa2), free(kernel);
    }
    for (int f = 0; f < 2; f++) gpu_flashinfer_free(fis[f]);
    for (int o = 0; o < 3; o++) cudaFree(d_out[o]);
    cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_qo), cudaFree(d_kv), cudaFree(d_idx);
    free(q), free(k), free(v), free(ref), free(scratch);
}

static void test_layouts(uint64_t *rng, int di) {
    static const tu_batch_shape shapes[] = {{9, 70, 2, 33, 0}, {16, 300, 3, 200, 0}, {5, 600, 50, 400, 0}};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    rmlp_plan_params params = tu_params(1.0, 0);
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        tu_batch b = tu_random_batch(rng, &shapes[sh]);
        rmlp_plan plan;
        if (b.n_tokens == 0 ||
            !CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plan) == RMLP_OK,
                   "plan: %s", rmlp_last_error())) {
            tu_batch_free(&b);
            continue;
        }
        /* full space through a reverse storage order: batch row i's K/V at n_tokens - 1 - i */
        uint32_t *reverse = tu_xmalloc(plan.n_tokens * 4);
        for (uint32_t i = 0; i < plan.n_tokens; i++) reverse[i] = plan.n_tokens - 1 - i;
        layout_case cases[2] = {
            {plan.qo_indptr, plan.cu_seqlens, plan.scatter, plan.n_seqs, plan.n_compact, plan.n_compact},
            {plan.cu_seqlens, plan.cu_seqlens, reverse, plan.n_seqs, plan.n_tokens, plan.n_tokens},
        };
        for (size_t h = 0; h < 2; h++)
            for (int l = 0; l < 2; l++) {
                char what[160];
                snprintf(what, sizeof what, "%s %s N=%u N'=%u seqs=%u heads=%zu/%zu", DTYPE_NAMES[di],
                         l ? "full space, K/V as pages" : "compact", plan.n_tokens, plan.n_compact, plan.n_seqs,
                         heads[h][0], heads[h][1]);
                if (flashinfer_tiles(cases[l].n_rows, cases[l].n_seqs, heads[h][0] / heads[h][1], HD))
                    check_case(di, heads[h][0], heads[h][1], l ? GPU_FI_FULL : GPU_FI_COMPACT, &cases[l], rng, what);
            }
        free(reverse);
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
}

int main(void) {
    struct cudaDeviceProp prop;
    if (!gpu_test_device(&prop)) return SKIP_CODE;
    gpu_flashinfer *probe = NULL;
    rmlp_status status = gpu_flashinfer_create(FN, RMLP_DTYPE_BF16, 8, 2, HD, 256, 4, NULL, true, &probe);
    bool sm90 = status == RMLP_OK && gpu_flashinfer_has_sm90(probe);
    gpu_flashinfer_free(probe);
    if (!sm90) {
        printf("SKIP: no FlashInfer Hopper kernels here (%s)\n",
               !gpu_flashinfer_built()            ? "a build without FlashInfer"
               : prop.major != 9 || prop.minor != 0 ? "the device is not compute capability 9.0"
                                                    : "a build without RMLP_FLASHINFER_SM90");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE;
    }
    CUDA_MUST(cudaStreamCreate(&stream));
    uint64_t rng = 0x590u;
    for (int di = 0; di < 2; di++) test_layouts(&rng, di);
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
