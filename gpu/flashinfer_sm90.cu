/*
 * flashinfer_sm90.cu: FlashInfer's Hopper batch prefill behind gpu/flashinfer_sm90.h (read it first).
 * The kernel is FlashInfer's FA3-style template (attention/hopper/prefill_sm90.cuh: CUTLASS/CuTe,
 * TMA loads of Q, K/V gathered page by page with cp.async, warp-specialised producer and consumer
 * warpgroups, wgmma) from the pinned headers scripts/setup.sh fetches (with CUTLASS's, which it
 * needs); this file fills its parameter structs and instantiates it: paged KV (the pages are the
 * compact rows, page size 1, read through kv_indices) x {f16, bf16} x head_dim 128, causal, one
 * schedule per head (a plan of more than GPU_FI_SM90_MAX_TILES query tiles per head goes to FA2).
 * Its planner (attention/scheduler.cuh, PrefillSM90Plan) balances query tiles over the SMs, every
 * head its own work; in CUDA-graph mode its arrays are sized from the counts, and the kernel is
 * persistent (one block per SM), so a captured launch replays over any batch of the same counts.
 * The kernel's output store is ours (gpu/flashinfer_sm90_epilogue.cuh): FlashInfer's races between
 * its warps and can copy rows of the last V tile to the output.
 * Compiled with exceptions, for sm_90a only, each C entry catching everything (CMakeLists.txt);
 * NDEBUG so FlashInfer prints nothing.
 */
#ifndef NDEBUG
#define NDEBUG 1 /* FLASHINFER_CUDA_CALL prints to stderr otherwise; the library never prints */
#endif

#include "flashinfer_sm90.h"
#include "host.h"

#include <exception>
#include <new>
#include <stdio.h>
#include <stdlib.h>

#include <flashinfer/attention/hopper/default_params.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/scheduler.cuh>

#include "flashinfer_sm90_epilogue.cuh" /* the kernel's output store, race-free (read why there) */

namespace fi = flashinfer;

#define SM90_HEAD_DIM 128
#define SM90_CTA_TILE_Q 128 /* PrefillSM90Plan's query tile at head_dim 128 */

struct gpu_fi_sm90 {
    rmlp_dtype dtype;
    uint32_t n_heads, n_kv_heads;
    size_t max_rows, max_seqs;
    size_t int_bytes;  /* the planner's int workspace per layout */
    void *device;      /* the int workspace of each layout */
    void *pinned;      /* page-locked: the staging of each layout's plan */
    int32_t *kv_lens;  /* (max_seqs) host: the keys of each sequence, the planner's input */
    struct plan {
        bool ready;
        fi::PrefillPlanSM90Info info;
        size_t n_seqs, n_rows;
        void *ints, *staging;
    } plans[2];
};

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

extern "C" void gpu_fi_sm90_free(gpu_fi_sm90 *s) {
    if (s == NULL) return;
    if (s->device != NULL) (void)cudaFree(s->device);
    if (s->pinned != NULL) (void)cudaFreeHost(s->pinned);
    (void)cudaGetLastError();
    free(s->kv_lens);
    delete s;
}

extern "C" rmlp_status gpu_fi_sm90_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                          size_t head_dim, size_t max_rows, size_t max_seqs, gpu_fi_sm90 **out) {
    *out = NULL;
    if ((dtype != RMLP_DTYPE_F16 && dtype != RMLP_DTYPE_BF16) || head_dim != SM90_HEAD_DIM || n_kv_heads == 0 ||
        n_heads % n_kv_heads != 0 || n_heads > 65535 || max_rows == 0 || max_seqs == 0 || max_rows > INT32_MAX / 16 ||
        max_seqs > INT32_MAX / 16)
        return RMLP_OK;
    int device = 0, major = 0, minor = 0, n_sm = 0;
    GPU_TRY(fn, cudaGetDevice(&device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    if (major != 9 || minor != 0) return RMLP_OK; /* sm_90a code runs on compute capability 9.0 only */
    /* PrefillSM90Plan's arrays in CUDA-graph mode: 7 of (tiles per head x heads) ids and the SMs'
     * work offsets, each 16-byte aligned. */
    size_t works = (size_t)GPU_FI_SM90_MAX_TILES * n_heads;
    size_t int_bytes = round_up(7 * (4 * works + 16) + 4 * ((size_t)n_sm + 1) + 16 + 256, 256);
    gpu_fi_sm90 *s = new (std::nothrow) gpu_fi_sm90();
    if (s == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the FlashInfer SM90 state failed");
    s->dtype = dtype, s->n_heads = (uint32_t)n_heads, s->n_kv_heads = (uint32_t)n_kv_heads;
    s->max_rows = max_rows, s->max_seqs = max_seqs, s->int_bytes = int_bytes;
    rmlp_status status = RMLP_OK;
    cudaError_t error = cudaMalloc(&s->device, 2 * int_bytes);
    if (error != cudaSuccess) s->device = NULL, status = gpu_fail(fn, "cudaMalloc (FlashInfer SM90 workspace)", error);
    if (status == RMLP_OK && (error = cudaHostAlloc(&s->pinned, 2 * int_bytes, cudaHostAllocDefault)) != cudaSuccess)
        s->pinned = NULL, status = gpu_fail(fn, "cudaHostAlloc (FlashInfer SM90 plan staging)", error);
    if (status == RMLP_OK && (s->kv_lens = (int32_t *)malloc(max_seqs * sizeof(int32_t))) == NULL)
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %zu key lengths failed", max_seqs);
    if (status != RMLP_OK) {
        gpu_fi_sm90_free(s);
        return status;
    }
    for (int l = 0; l < 2; l++) {
        s->plans[l].ints = (char *)s->device + l * int_bytes;
        s->plans[l].staging = (char *)s->pinned + l * int_bytes;
    }
    *out = s;
    return RMLP_OK;
}

extern "C" void gpu_fi_sm90_unplan(gpu_fi_sm90 *s) {
    if (s != NULL) s->plans[GPU_FI_FULL].ready = s->plans[GPU_FI_COMPACT].ready = false;
}

extern "C" gpu_fi_reason gpu_fi_sm90_plan(gpu_fi_sm90 *s, gpu_fi_layout layout, const uint32_t *qo_indptr,
                                          const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream, char *error,
                                          size_t cap) {
    if (s == NULL) return GPU_FI_UNPLANNED;
    gpu_fi_sm90::plan *p = &s->plans[layout];
    p->ready = false;
    size_t n_rows = n_seqs > 0 ? qo_indptr[n_seqs] : 0;
    if (n_seqs == 0 || n_rows == 0) return GPU_FI_UNPLANNED;
    if (n_seqs > s->max_seqs || n_rows > s->max_rows || kv_indptr[n_seqs] > INT32_MAX ||
        (n_rows + SM90_CTA_TILE_Q - 1) / SM90_CTA_TILE_Q + n_seqs - 1 > GPU_FI_SM90_MAX_TILES)
        return GPU_FI_TOO_LARGE;
    for (size_t i = 0; i < n_seqs; i++) s->kv_lens[i] = (int32_t)(kv_indptr[i + 1] - kv_indptr[i]);
    fi::PrefillPlanSM90Info info;
    cudaError_t status = cudaSuccess;
    const char *what = NULL;
    try {
        status = fi::PrefillSM90Plan<int32_t>(
            /*float_buffer*/ nullptr, 0, p->ints, p->staging, s->int_bytes, info, (int32_t *)qo_indptr,
            (int32_t *)kv_indptr, s->kv_lens, (uint32_t)n_rows, (uint32_t)n_seqs, s->n_heads, s->n_kv_heads,
            SM90_HEAD_DIM, SM90_HEAD_DIM, /*page_size*/ 1, /*causal*/ true, /*enable_cuda_graph*/ true,
            /*sizeof_dtype_o*/ 2, stream);
    } catch (const std::exception &e) {
        what = e.what();
    } catch (...) {
        what = "an exception that is not a std::exception";
    }
    if (what == NULL && status != cudaSuccess) {
        (void)cudaGetLastError();
        what = cudaGetErrorString(status);
    }
    if (what != NULL) {
        snprintf(error, cap, "FlashInfer's PrefillSM90Plan (%s layout, %zu rows, %zu sequences) failed: %s",
                 layout == GPU_FI_FULL ? "full" : "compact", n_rows, n_seqs, what);
        return GPU_FI_PLAN_ERROR;
    }
    if (info.same_schedule_for_all_heads) return GPU_FI_TOO_LARGE; /* that kernel is not instantiated */
    p->info = info;
    p->n_seqs = n_seqs, p->n_rows = n_rows;
    p->ready = true;
    return GPU_FI_OK;
}

extern "C" bool gpu_fi_sm90_ready(const gpu_fi_sm90 *s, gpu_fi_layout layout, size_t n_seqs, size_t n_rows) {
    return s != NULL && s->plans[layout].ready && s->plans[layout].n_seqs == n_seqs &&
           s->plans[layout].n_rows == n_rows;
}

template <class T>
static cudaError_t run_paged(const gpu_fi_sm90 *s, const gpu_fi_sm90::plan &p, const gpu_compact_rows *r,
                             const uint32_t *kv_indices, float scale, cudaStream_t stream) {
    typedef fi::BatchPrefillPagedParams<T, T, T, int32_t> Params;
    Params params{};
    const fi::PrefillPlanSM90Info &info = p.info;
    char *ints = (char *)p.ints;
    params.q_ptr = (T *)r->q, params.k_ptr = (T *)r->k, params.v_ptr = (T *)r->v, params.o_ptr = (T *)r->out;
    params.lse_ptr = nullptr;
    params.qo_tile_indices = (int32_t *)(ints + info.qo_tile_indices_offset);
    params.qo_indptr = (int32_t *)(ints + info.qo_indptr_offset);
    params.kv_indptr = (int32_t *)(ints + info.kv_indptr_offset);
    params.kv_indices = (int32_t *)kv_indices;
    params.qo_lens = (int32_t *)(ints + info.qo_len_offset);
    params.kv_lens = (int32_t *)(ints + info.kv_len_offset);
    params.head_indices = (int32_t *)(ints + info.head_indices_offset);
    params.work_indptr = (int32_t *)(ints + info.work_indptr_offset);
    params.batch_indices = (int32_t *)(ints + info.batch_indices_offset);
    params.additional_params.logits_soft_cap = 0.0f;
    params.additional_params.sm_scale = scale;
    /* NHD, pages of one row: a page's stride is a row's; heads head_dim apart */
    params.q_stride_n = (int64_t)r->q_stride, params.q_stride_h = SM90_HEAD_DIM;
    params.k_stride_n = (int64_t)r->k_stride, params.k_stride_h = SM90_HEAD_DIM;
    params.v_stride_n = (int64_t)r->v_stride, params.v_stride_h = SM90_HEAD_DIM;
    params.o_stride_n = (int64_t)r->out_stride, params.o_stride_h = SM90_HEAD_DIM;
    params.k_page_stride = (int64_t)r->k_stride, params.v_page_stride = (int64_t)r->v_stride;
    params.nnz_qo = (int64_t)p.n_rows;
    params.num_qo_heads = (int)s->n_heads, params.num_kv_heads = (int)s->n_kv_heads;
    params.group_size = (int)(s->n_heads / s->n_kv_heads);
    params.page_size = 1;
    params.window_left = -1;
    params.causal = true;
    return fi::BatchPrefillWithPagedKVCacheDispatched<SM90_HEAD_DIM, SM90_HEAD_DIM, fi::MaskMode::kCausal,
                                                      /*sliding window*/ false, /*same schedule*/ false,
                                                      fi::StandardAttention>(params, /*enable_pdl*/ false, stream);
}

extern "C" cudaError_t gpu_fi_sm90_run(const gpu_fi_sm90 *s, gpu_fi_layout layout, const gpu_compact_rows *r,
                                       const uint32_t *kv_indices, float scale, cudaStream_t stream) {
    if (s == NULL || !s->plans[layout].ready || kv_indices == NULL) return cudaErrorInvalidValue;
    cudaError_t error;
    try {
        error = s->dtype == RMLP_DTYPE_BF16
                    ? run_paged<cutlass::bfloat16_t>(s, s->plans[layout], r, kv_indices, scale, stream)
                    : run_paged<cutlass::half_t>(s, s->plans[layout], r, kv_indices, scale, stream);
    } catch (...) {
        error = cudaErrorNotSupported;
    }
    /* Whatever failed happened before the kernel ran (its attribute, its launch): FA2 takes it. */
    if (error != cudaSuccess) (void)cudaGetLastError();
    return error == cudaSuccess ? cudaSuccess : cudaErrorNotSupported;
}
