/*
 * flashinfer.cu: FlashInfer's batch prefill kernels behind the C launcher of gpu/flashinfer.h (read
 * it first: layouts, plan/run split, capture). The kernels are FlashInfer's FA2 templates
 * (attention/prefill.cuh, sm_80 and up: mma.sync on tensor cores, cp.async, online softmax in fp32)
 * from the pinned headers scripts/setup.sh fetches; this file only fills their parameter structs and
 * instantiates them: {ragged, paged} x {f16, bf16} x head_dim {64, 128}, causal, no positional
 * encoding in the kernel (RoPE ran before), query tiles of 128 rows (CTA_TILE_Q; FlashInfer's choice
 * in CUDA-graph mode whenever (rows - sequences + 1) x group > 64, i.e. for any batch but tiny ones,
 * which the reference kernel takes), for every architecture the build targets. Each instantiation
 * compiles one kernel per key tile size FlashInfer may pick at run time (from the device's shared
 * memory), so the list is kept this short: see README ("Models on a CUDA device") for build times.
 *
 * FlashInfer reports bad configurations with C++ exceptions and, in debug builds, prints failed
 * CUDA calls: this file is compiled with exceptions (CMakeLists.txt), catches every one at the C
 * boundary (a status, or cudaErrorNotSupported from a launch), and defines NDEBUG so nothing prints.
 * Without RMLP_WITH_FLASHINFER it is the stubs that make every context take the reference kernel.
 */
#ifndef NDEBUG
#define NDEBUG 1 /* FLASHINFER_CUDA_CALL prints to stderr otherwise; the library never prints */
#endif

#include "flashinfer.h"
#include "host.h"

#ifdef RMLP_WITH_FLASHINFER

#include <exception>
#include <new>

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

namespace fi = flashinfer;

/* The one query tile size instantiated (see the top). */
#define FI_CTA_TILE_Q 128
/* Offsets are computed in 32 bits in places (IdType row index x stride): rows x stride must fit. */
#define FI_MAX_ELEMENTS ((size_t)INT32_MAX)

typedef fi::DefaultAttention</*custom mask*/ false, /*sliding window*/ false, /*soft cap*/ false, /*alibi*/ false>
    FiVariant;

struct gpu_flashinfer {
    rmlp_dtype dtype;
    uint32_t n_heads, n_kv_heads, head_dim;
    size_t max_rows, max_seqs;
    size_t int_bytes;  /* FlashInfer's int workspace per layout (a bound for any batch of the capacity) */
    void *device;      /* one allocation: the int workspace of each layout, then `ones` */
    void *pinned;      /* page-locked: the staging of each layout's plan */
    int32_t *ones;     /* (max_seqs) the last page length of every sequence: pages of 1 row */
    struct plan {
        bool ready;
        fi::PrefillPlanInfo info;
        size_t n_seqs, n_rows;
        void *ints, *staging; /* int_bytes each: device, page-locked */
    } plans[2];
};

extern "C" bool gpu_flashinfer_built(void) { return true; }

extern "C" bool gpu_flashinfer_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    return (dtype == RMLP_DTYPE_F16 || dtype == RMLP_DTYPE_BF16) && (head_dim == 64 || head_dim == 128) &&
           n_kv_heads > 0 && n_heads >= n_kv_heads && n_heads % n_kv_heads == 0 && n_heads <= 65535;
}

extern "C" void gpu_flashinfer_free(gpu_flashinfer *f) {
    if (f == NULL) return;
    if (f->device != NULL) (void)cudaFree(f->device);
    if (f->pinned != NULL) (void)cudaFreeHost(f->pinned);
    (void)cudaGetLastError();
    delete f;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

extern "C" rmlp_status gpu_flashinfer_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                             size_t head_dim, size_t max_rows, size_t max_seqs, gpu_flashinfer **out) {
    *out = NULL;
    if (!gpu_flashinfer_supports(dtype, n_heads, n_kv_heads, head_dim) || max_rows == 0 || max_seqs == 0 ||
        max_rows > INT32_MAX / 16 || max_seqs > INT32_MAX / 16 ||
        max_rows * (n_heads / n_kv_heads) > INT32_MAX) /* FlashInfer packs (row, head in group) in 32 bits */
        return RMLP_OK;
    int device = 0, major = 0, n_sm = 0;
    GPU_TRY(fn, cudaGetDevice(&device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    if (major < 8) return RMLP_OK; /* the FA2 kernels need sm_80 */
    /* The plan's int arrays in CUDA-graph mode: request, query tile and key tile indices and the
     * block mask for padded_batch_size blocks, o_indptr for the sequences, two words, each 16-byte
     * aligned. padded_batch_size = max(2 x SMs / kv heads, ceil(rows x group / tile) + seqs - 1),
     * with the smallest tile FlashInfer picks (16). */
    size_t group = n_heads / n_kv_heads, split_bound = 2 * (size_t)n_sm / n_kv_heads;
    size_t tiles = (max_rows * group + 15) / 16 + max_seqs;
    size_t padded = tiles > split_bound ? tiles : split_bound;
    size_t int_bytes = round_up(13 * padded + 4 * max_seqs + 512, 256); /* + alignment padding */

    gpu_flashinfer *f = new (std::nothrow) gpu_flashinfer(); /* zeroed, the plan infos constructed */
    if (f == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the FlashInfer state failed");
    f->dtype = dtype;
    f->n_heads = (uint32_t)n_heads, f->n_kv_heads = (uint32_t)n_kv_heads, f->head_dim = (uint32_t)head_dim;
    f->max_rows = max_rows, f->max_seqs = max_seqs, f->int_bytes = int_bytes;
    size_t device_bytes = 2 * int_bytes + max_seqs * sizeof(int32_t);
    rmlp_status status = RMLP_OK;
    cudaError_t error = cudaMalloc(&f->device, device_bytes);
    if (error != cudaSuccess) f->device = NULL, status = gpu_fail(fn, "cudaMalloc (FlashInfer workspace)", error);
    if (status == RMLP_OK && (error = cudaHostAlloc(&f->pinned, 2 * int_bytes, cudaHostAllocDefault)) != cudaSuccess)
        f->pinned = NULL, status = gpu_fail(fn, "cudaHostAlloc (FlashInfer plan staging)", error);
    if (status == RMLP_OK) {
        f->ones = (int32_t *)((char *)f->device + 2 * int_bytes);
        for (int l = 0; l < 2; l++) {
            f->plans[l].ints = (char *)f->device + l * int_bytes;
            f->plans[l].staging = (char *)f->pinned + l * int_bytes;
        }
        /* The ones are written once, through the staging (free until the first plan; it holds
         * 2 int_bytes >= 8 max_seqs bytes). */
        int32_t *host = (int32_t *)f->pinned;
        for (size_t i = 0; i < max_seqs; i++) host[i] = 1;
        if ((error = cudaMemcpy(f->ones, host, max_seqs * sizeof(int32_t), cudaMemcpyHostToDevice)) != cudaSuccess)
            status = gpu_fail(fn, "cudaMemcpy (FlashInfer last page lengths)", error);
    }
    if (status != RMLP_OK) {
        gpu_flashinfer_free(f);
        return status;
    }
    *out = f;
    return RMLP_OK;
}

extern "C" void gpu_flashinfer_unplan(gpu_flashinfer *f) {
    if (f != NULL) f->plans[GPU_FI_FULL].ready = f->plans[GPU_FI_COMPACT].ready = false;
}

extern "C" rmlp_status gpu_flashinfer_plan(const char *fn, gpu_flashinfer *f, gpu_fi_layout layout,
                                           const uint32_t *qo_indptr, const uint32_t *kv_indptr, size_t n_seqs,
                                           cudaStream_t stream) {
    if (f == NULL) return RMLP_OK;
    gpu_flashinfer::plan *p = &f->plans[layout];
    p->ready = false;
    size_t n_rows = qo_indptr[n_seqs], n_keys = kv_indptr[n_seqs];
    if (n_seqs == 0 || n_seqs > f->max_seqs || n_rows > f->max_rows || n_keys > INT32_MAX || n_rows == 0)
        return RMLP_OK; /* nothing to run, or beyond the workspace: the reference kernel takes it */
    fi::PrefillPlanInfo info;
    cudaError_t error;
    try {
        /* IdType int32: the uint32 offsets are below 2^31 (checked above). FlashInfer reads but
         * does not write them. */
        error = fi::PrefillPlan<int32_t>(
            /*float_buffer*/ nullptr, 0, p->ints, p->staging, f->int_bytes, info, (int32_t *)qo_indptr,
            (int32_t *)kv_indptr, (uint32_t)n_rows, (uint32_t)n_seqs, f->n_heads, f->n_kv_heads, f->head_dim,
            f->head_dim, /*page_size*/ 1, /*enable_cuda_graph*/ true, /*sizeof_dtype_o*/ 2, /*window_left*/ -1,
            /*fixed_split_size*/ -1, /*disable_split_kv*/ true, /*num_colocated_ctas*/ 0, /*uniform_q_len*/ 0, stream,
            /*kv_dtype_bytes*/ 2);
    } catch (const std::bad_alloc &) {
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "FlashInfer's PrefillPlan ran out of host memory");
    } catch (const std::exception &e) {
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "FlashInfer's PrefillPlan (%s layout, %zu rows, %zu sequences): %s",
                         layout == GPU_FI_FULL ? "full" : "compact", n_rows, n_seqs, e.what());
    }
    if (error != cudaSuccess) return gpu_fail(fn, "FlashInfer's PrefillPlan", error);
    if (info.cta_tile_q != FI_CTA_TILE_Q || info.split_kv) return RMLP_OK; /* not instantiated */
    p->info = info;
    p->n_seqs = n_seqs, p->n_rows = n_rows;
    p->ready = true;
    return RMLP_OK;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" bool gpu_flashinfer_ready(const gpu_flashinfer *f, gpu_fi_layout layout, const gpu_compact_rows *r,
                                     size_t n_seqs, size_t n_rows, size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    if (f == NULL || !f->plans[layout].ready || f->plans[layout].n_seqs != n_seqs ||
        f->plans[layout].n_rows != n_rows || n_heads != f->n_heads || n_kv_heads != f->n_kv_heads ||
        head_dim != f->head_dim)
        return false;
    size_t qd = (size_t)f->n_heads * f->head_dim, kvd = (size_t)f->n_kv_heads * f->head_dim;
    /* k/v rows: as many as the queries (full) or the compact rows the paths index (compact: at
     * most max_rows, the context's capacity) */
    size_t kv_rows = layout == GPU_FI_FULL ? n_rows : f->max_rows;
    return r->out_stride == qd && r->q_stride >= qd && r->k_stride >= kvd && r->k_stride == r->v_stride &&
           r->q_stride % 8 == 0 && r->k_stride % 8 == 0 && aligned16(r->q) && aligned16(r->k) && aligned16(r->v) &&
           aligned16(r->out) && n_rows * r->q_stride <= FI_MAX_ELEMENTS && n_rows * qd <= FI_MAX_ELEMENTS &&
           kv_rows * r->k_stride <= FI_MAX_ELEMENTS;
}

/* The plan's arrays in the device workspace, into either parameter struct. */
template <class Params> static void set_plan(Params &p, const gpu_flashinfer::plan &plan) {
    const fi::PrefillPlanInfo &info = plan.info;
    char *ints = (char *)plan.ints;
    p.request_indices = (int32_t *)(ints + info.request_indices_offset);
    p.qo_tile_indices = (int32_t *)(ints + info.qo_tile_indices_offset);
    p.kv_tile_indices = (int32_t *)(ints + info.kv_tile_indices_offset);
    p.o_indptr = (int32_t *)(ints + info.o_indptr_offset);
    p.kv_chunk_size_ptr = (int32_t *)(ints + info.kv_chunk_size_ptr_offset);
    p.merge_indptr = nullptr; /* no split: no merge */
    p.block_valid_mask = (bool *)(ints + info.block_valid_mask_offset);
    p.total_num_rows = (uint32_t *)(ints + info.total_num_rows_offset);
    p.max_total_num_rows = (uint32_t)info.total_num_rows;
    p.padded_batch_size = (uint32_t)info.padded_batch_size;
    p.partition_kv = false;
    p.window_left = -1;
    p.logits_soft_cap = 0.0f;
}

template <class T, uint32_t HEAD_DIM>
static cudaError_t run_ragged(const gpu_flashinfer *f, const gpu_compact_rows *r, const uint32_t *qo_indptr,
                              const uint32_t *kv_indptr, float scale, cudaStream_t stream) {
    typedef fi::BatchPrefillRaggedParams<T, T, T, int32_t> Params;
    Params p;
    p.q = (T *)r->q, p.k = (T *)r->k, p.v = (T *)r->v, p.o = (T *)r->out;
    p.q_indptr = (int32_t *)qo_indptr, p.kv_indptr = (int32_t *)kv_indptr;
    p.num_qo_heads = f->n_heads, p.num_kv_heads = f->n_kv_heads;
    p.group_size = fi::uint_fastdiv(f->n_heads / f->n_kv_heads);
    p.q_stride_n = (uint32_t)r->q_stride, p.q_stride_h = HEAD_DIM;
    p.k_stride_n = (uint32_t)r->k_stride, p.k_stride_h = HEAD_DIM;
    p.v_stride_n = (uint32_t)r->v_stride, p.v_stride_h = HEAD_DIM;
    p.sm_scale = scale;
    set_plan(p, f->plans[GPU_FI_FULL]);
    return fi::BatchPrefillWithRaggedKVCacheDispatched<FI_CTA_TILE_Q, HEAD_DIM, HEAD_DIM, fi::PosEncodingMode::kNone,
                                                       /*fp16 qk reduction*/ false, fi::MaskMode::kCausal, FiVariant,
                                                       Params>(p, /*tmp_v*/ nullptr, /*tmp_s*/ nullptr,
                                                               /*enable_pdl*/ false, stream);
}

template <class T, uint32_t HEAD_DIM>
static cudaError_t run_paged(const gpu_flashinfer *f, const gpu_compact_rows *r, const uint32_t *qo_indptr,
                             const uint32_t *kv_indptr, const uint32_t *kv_indices, float scale, cudaStream_t stream) {
    typedef fi::BatchPrefillPagedParams<T, T, T, int32_t> Params;
    const gpu_flashinfer::plan &plan = f->plans[GPU_FI_COMPACT];
    /* Pages of one row: page stride = row stride; NHD: (page, entry, head, dim) strides. */
    const int64_t strides[3] = {(int64_t)r->k_stride, (int64_t)r->k_stride, HEAD_DIM};
    Params p;
    p.paged_kv = fi::paged_kv_t<T, int32_t>(f->n_kv_heads, /*page_size*/ 1, HEAD_DIM, (uint32_t)plan.n_seqs,
                                            fi::QKVLayout::kNHD, (T *)r->k, (T *)r->v, strides,
                                            (int32_t *)kv_indices, (int32_t *)kv_indptr, f->ones);
    p.q = (T *)r->q, p.o = (T *)r->out;
    p.q_indptr = (int32_t *)qo_indptr;
    p.num_qo_heads = f->n_heads;
    p.group_size = fi::uint_fastdiv(f->n_heads / f->n_kv_heads);
    p.q_stride_n = (int32_t)r->q_stride, p.q_stride_h = HEAD_DIM;
    p.sm_scale = scale;
    set_plan(p, plan);
    return fi::BatchPrefillWithPagedKVCacheDispatched</*same kv strides*/ true, FI_CTA_TILE_Q, HEAD_DIM, HEAD_DIM,
                                                      fi::PosEncodingMode::kNone, false, fi::MaskMode::kCausal,
                                                      FiVariant, Params>(p, nullptr, nullptr, false, stream);
}

template <class T, uint32_t HEAD_DIM>
static cudaError_t run_layout(const gpu_flashinfer *f, gpu_fi_layout layout, const gpu_compact_rows *r,
                              const uint32_t *qo_indptr, const uint32_t *kv_indptr, const uint32_t *kv_indices,
                              float scale, cudaStream_t stream) {
    if (layout == GPU_FI_FULL) return run_ragged<T, HEAD_DIM>(f, r, qo_indptr, kv_indptr, scale, stream);
    return run_paged<T, HEAD_DIM>(f, r, qo_indptr, kv_indptr, kv_indices, scale, stream);
}

extern "C" cudaError_t gpu_flashinfer_run(const gpu_flashinfer *f, gpu_fi_layout layout, const gpu_compact_rows *r,
                                          const uint32_t *qo_indptr, const uint32_t *kv_indptr,
                                          const uint32_t *kv_indices, float scale, cudaStream_t stream) {
    if (f == NULL || !f->plans[layout].ready || (layout == GPU_FI_COMPACT && kv_indices == NULL))
        return cudaErrorInvalidValue;
    try {
        bool bf16 = f->dtype == RMLP_DTYPE_BF16;
        if (f->head_dim == 64)
            return bf16 ? run_layout<nv_bfloat16, 64>(f, layout, r, qo_indptr, kv_indptr, kv_indices, scale, stream)
                        : run_layout<half, 64>(f, layout, r, qo_indptr, kv_indptr, kv_indices, scale, stream);
        return bf16 ? run_layout<nv_bfloat16, 128>(f, layout, r, qo_indptr, kv_indptr, kv_indices, scale, stream)
                    : run_layout<half, 128>(f, layout, r, qo_indptr, kv_indptr, kv_indices, scale, stream);
    } catch (...) { /* a configuration FlashInfer refuses on this device (shared memory) */
        return cudaErrorNotSupported;
    }
}

#else /* no FlashInfer in this build: every context takes the reference kernel */

extern "C" bool gpu_flashinfer_built(void) { return false; }

extern "C" bool gpu_flashinfer_supports(rmlp_dtype, size_t, size_t, size_t) { return false; }

extern "C" rmlp_status gpu_flashinfer_create(const char *, rmlp_dtype, size_t, size_t, size_t, size_t, size_t,
                                             gpu_flashinfer **out) {
    *out = NULL;
    return RMLP_OK;
}

extern "C" void gpu_flashinfer_free(gpu_flashinfer *) {}

extern "C" rmlp_status gpu_flashinfer_plan(const char *, gpu_flashinfer *, gpu_fi_layout, const uint32_t *,
                                           const uint32_t *, size_t, cudaStream_t) {
    return RMLP_OK;
}

extern "C" void gpu_flashinfer_unplan(gpu_flashinfer *) {}

extern "C" bool gpu_flashinfer_ready(const gpu_flashinfer *, gpu_fi_layout, const gpu_compact_rows *, size_t, size_t,
                                     size_t, size_t, size_t) {
    return false;
}

extern "C" cudaError_t gpu_flashinfer_run(const gpu_flashinfer *, gpu_fi_layout, const gpu_compact_rows *,
                                          const uint32_t *, const uint32_t *, const uint32_t *, float, cudaStream_t) {
    return cudaErrorInvalidValue;
}

#endif
