/*
 * flashinfer_decode.cu: FlashInfer's batch decode kernel and its variable-length state merge behind
 * the C launcher of gpu/flashinfer_decode.h (read it first). The kernels are FlashInfer's templates
 * (BatchDecodeWithPagedKVCacheKernel of attention/decode.cuh: split-KV decode over a paged cache,
 * cp.async stages, online softmax in fp32; PersistentVariableLengthMergeStatesKernel of
 * attention/cascade.cuh), launched here directly rather than through FlashInfer's launchers: those
 * dispatch at run time over 7 GQA group sizes, 2 pipeline depths and, for the merge, 4 head
 * dimensions, and every branch is compiled (about 50 s of the build on 2 cores for 4 dtype x
 * head_dim pairs; this file takes about 20 s). The launch shapes are the ones FlashInfer's
 * launcher derives on sm_80 and later (DecodeShape, MergeShape), the shared memory sized as the
 * kernels lay it out. The partial outputs are fp32 (FlashInfer's own split keeps them in the
 * output dtype), so a row's result is rounded to the dtype once, after the merge.
 *
 * Compiled with exceptions and NDEBUG as gpu/flashinfer.cu is (CMakeLists.txt): FlashInfer's
 * headers throw and print in places; every call is caught at the C boundary. Without
 * RMLP_WITH_FLASHINFER_DECODE (no FlashInfer, or headers fetched before decode.cuh was among them)
 * it is the stubs that keep every session on the chain kernels. The variants (sliding window,
 * Gemma 2's soft-cap at head_dim 256) are the prefill's, gpu/flashinfer_variants.cuh: a request is
 * one row over its whole path, so the window counts back from the row's own key, kv_len - 1.
 */
#ifndef NDEBUG
#define NDEBUG 1 /* FLASHINFER_CUDA_CALL prints to stderr otherwise; the library never prints */
#endif

#include "flashinfer_decode.h"
#include "host.h"

#ifdef RMLP_WITH_FLASHINFER_DECODE

#include <exception>
#include <new>

#include <flashinfer/attention/cascade.cuh>
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/variants.cuh>

namespace fi = flashinfer;

#include "flashinfer_variants.cuh"

template <class A, class B> static constexpr A larger(A a, B b) { return a > (A)b ? a : (A)b; }

/* The decode kernel for element type T, head_dim HD, G query heads per KV head and variant V
 * (FiWindowed, or FiCapped for a soft-capped layer at head_dim 256): a block
 * (bdx, bdy, bdz) per (chunk, KV head), bdx threads of vec elements over a head, bdy = G query
 * heads, bdz groups of `tile` keys per stage, 2 stages (sm_80 and later). Shared memory: the K and
 * V stages (reused for the per-group states when those are larger), then the keys' offsets
 * (size_t each) or the per-group (max, sum) pairs. */
template <class T, uint32_t HD, uint32_t G, class V> struct DecodeShape {
    static constexpr uint32_t vec = larger(16u / (uint32_t)sizeof(T), HD / 32u);
    static constexpr uint32_t bdx = HD / vec, bdy = G, threads = larger(128u, bdx * bdy), bdz = threads / (bdx * bdy);
    static constexpr uint32_t tile = G == 1 ? 4u : 1u, stages = 2;
    static constexpr size_t smem =
        larger((size_t)2 * stages * tile * bdy * bdz * HD * sizeof(T), (size_t)bdz * bdy * HD * sizeof(float)) +
        larger((size_t)tile * threads * sizeof(size_t), (size_t)2 * bdy * bdz * sizeof(float));
    typedef fi::BatchDecodeParams<T, T, float, int32_t> Params;
    static constexpr auto kernel =
        fi::BatchDecodeWithPagedKVCacheKernel<fi::PosEncodingMode::kNone, stages, tile, vec, bdx, bdy, bdz, V, Params>;
};

/* The merge of fp32 partial states into T rows: a block of 128 threads per (row, head) at a time,
 * bdx threads of vec fp32 over a head, bdy partial states per stage, 4 stages, then the states'
 * log-sum-exps. */
template <class T, uint32_t HD> struct MergeShape {
    static constexpr uint32_t vec = larger(4u, HD / 32u), bdx = HD / vec, bdy = 128u / bdx, stages = 4;
    static constexpr size_t smem = (size_t)stages * bdy * HD * sizeof(float) + 128 * sizeof(float);
    static constexpr auto kernel =
        fi::PersistentVariableLengthMergeStatesKernel<vec, bdx, bdy, stages, float, T, int32_t>;
};

struct gpu_fi_decode {
    rmlp_dtype dtype;
    uint32_t n_heads, n_kv_heads, head_dim;
    size_t max_rows, target_chunks, max_chunks;
    uint32_t merge_blocks; /* the merge's grid at most: as many blocks as the device runs at once */
    void *device;          /* one allocation: partial, lse, ones */
    float *partial;        /* (max_chunks, n_heads, head_dim) each chunk's normalised output */
    float *lse;            /* (max_chunks, n_heads) its log2-sum-exp of the scaled logits */
    int32_t *ones;         /* (max_rows) the last page length of every request: pages of 1 slot */
};

enum op_kind { OP_PROBE, OP_RUN };

/* OP_PROBE: the kernels' launch attributes on the current device, and from their occupancy the
 * step's target chunks and the merge's grid. OP_RUN: a step of a layer with la's scale, window and
 * soft-cap. */
template <class T, uint32_t HD, uint32_t G, class V>
static cudaError_t shape_op(op_kind op, gpu_fi_decode *f, const gpu_fi_decode_step *st, const gpu_compact_rows *r,
                            const layer_attention &la, cudaStream_t stream) {
    typedef DecodeShape<T, HD, G, V> D;
    typedef MergeShape<T, HD> M;
    if (op == OP_PROBE) {
        int device = 0, n_sm = 0, per_sm = 0, merge_per_sm = 0;
        cudaError_t e = cudaGetDevice(&device);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device);
        const cudaFuncAttribute smem_attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
        if (e == cudaSuccess) e = cudaFuncSetAttribute(D::kernel, smem_attr, (int)D::smem);
        if (e == cudaSuccess) e = cudaFuncSetAttribute(M::kernel, smem_attr, (int)M::smem);
        if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, D::kernel, D::threads, D::smem);
        if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&merge_per_sm, M::kernel, 128, M::smem);
        if (e != cudaSuccess) return e;
        if (per_sm < 1 || merge_per_sm < 1 || n_sm < 1) return cudaErrorNotSupported;
        f->target_chunks = larger((size_t)1, (size_t)per_sm * (size_t)n_sm / f->n_kv_heads);
        f->merge_blocks = (uint32_t)merge_per_sm * (uint32_t)n_sm;
        return cudaSuccess;
    }
    if (st->n_chunks > 0) {
        typename D::Params p;
        /* pages of one slot: page stride = entry stride = the cache's row stride; NHD */
        const int64_t strides[3] = {(int64_t)r->k_stride, (int64_t)r->k_stride, HD};
        p.paged_kv = fi::paged_kv_t<T, int32_t>(f->n_kv_heads, /*page_size*/ 1, HD, (uint32_t)st->n_rows,
                                                fi::QKVLayout::kNHD, (T *)r->k, (T *)r->v, strides,
                                                (int32_t *)st->kv_indices, (int32_t *)st->kv_indptr, f->ones);
        p.q = (T *)r->q, p.q_stride_n = (int32_t)r->q_stride, p.q_stride_h = HD;
        p.o = f->partial, p.lse = f->lse;
        p.padded_batch_size = (uint32_t)st->n_chunks;
        p.num_qo_heads = f->n_heads;
        /* each request is one row over its whole path: kv_len keys, the last its own */
        p.window_left = window_left_of(la.window, SIZE_MAX), p.logits_soft_cap = la.softcap, p.sm_scale = la.scale;
        p.rope_rcp_scale = 1.0f, p.rope_rcp_theta = 1.0f; /* no RoPE in the kernel: it ran before */
        p.request_indices = (int32_t *)st->request, p.kv_tile_indices = (int32_t *)st->tile;
        p.o_indptr = (int32_t *)st->o_indptr, p.kv_chunk_size_ptr = (int32_t *)st->chunk;
        p.block_valid_mask = nullptr; /* every block is a chunk */
        p.partition_kv = true;        /* block b: chunk tile[b] of request request[b] */
        D::kernel<<<dim3((unsigned)st->n_chunks, f->n_kv_heads), dim3(D::bdx, D::bdy, D::bdz), D::smem, stream>>>(p);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    size_t pairs = st->n_rows * f->n_heads; /* (row, head) */
    unsigned grid = (unsigned)(pairs < f->merge_blocks ? pairs : f->merge_blocks);
    M::kernel<<<grid, dim3(M::bdx, M::bdy), M::smem, stream>>>(f->partial, f->lse, (int32_t *)st->o_indptr, (T *)r->out,
                                                             /*s_merged*/ nullptr, (uint32_t)st->n_rows,
                                                             /*seq_len_ptr*/ nullptr, f->n_heads);
    return cudaGetLastError();
}

template <class T, uint32_t HD, class V>
static cudaError_t by_group(op_kind op, gpu_fi_decode *f, const gpu_fi_decode_step *st, const gpu_compact_rows *r,
                            const layer_attention &la, cudaStream_t stream) {
    switch (f->n_heads / f->n_kv_heads) {
    case 1: return shape_op<T, HD, 1, V>(op, f, st, r, la, stream);
    case 2: return shape_op<T, HD, 2, V>(op, f, st, r, la, stream);
    case 4: return shape_op<T, HD, 4, V>(op, f, st, r, la, stream);
    case 8: return shape_op<T, HD, 8, V>(op, f, st, r, la, stream);
    }
    return cudaErrorInvalidValue;
}

/* op for head_dim HD: the soft-capped variant exists at 256 only (gpu_fi_decode_takes_layer); a
 * probe sets both variants' attributes there (the same shapes, so the same targets). */
template <class T, uint32_t HD>
static cudaError_t by_variant(op_kind op, gpu_fi_decode *f, const gpu_fi_decode_step *st, const gpu_compact_rows *r,
                              const layer_attention &la, cudaStream_t stream) {
    if constexpr (HD == 256) {
        if (op == OP_PROBE) {
            cudaError_t e = by_group<T, HD, FiCapped>(op, f, st, r, la, stream);
            return e != cudaSuccess ? e : by_group<T, HD, FiWindowed>(op, f, st, r, la, stream);
        }
        if (la.softcap != 0.0f) return by_group<T, HD, FiCapped>(op, f, st, r, la, stream);
    } else {
        if (la.softcap != 0.0f) return cudaErrorInvalidValue;
    }
    return by_group<T, HD, FiWindowed>(op, f, st, r, la, stream);
}

/* op for f's dtype, head_dim and group, FlashInfer's exceptions caught. */
static cudaError_t dispatch(op_kind op, gpu_fi_decode *f, const gpu_fi_decode_step *st, const gpu_compact_rows *r,
                            const layer_attention &la, cudaStream_t stream) {
    try {
        bool bf16 = f->dtype == RMLP_DTYPE_BF16;
        switch (f->head_dim) {
        case 64:
            return bf16 ? by_variant<nv_bfloat16, 64>(op, f, st, r, la, stream)
                        : by_variant<half, 64>(op, f, st, r, la, stream);
        case 128:
            return bf16 ? by_variant<nv_bfloat16, 128>(op, f, st, r, la, stream)
                        : by_variant<half, 128>(op, f, st, r, la, stream);
        default:
            return bf16 ? by_variant<nv_bfloat16, 256>(op, f, st, r, la, stream)
                        : by_variant<half, 256>(op, f, st, r, la, stream);
        }
    } catch (...) {
        return cudaErrorNotSupported;
    }
}

extern "C" bool gpu_fi_decode_built(void) { return true; }

extern "C" bool gpu_fi_decode_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    if ((dtype != RMLP_DTYPE_F16 && dtype != RMLP_DTYPE_BF16) ||
        (head_dim != 64 && head_dim != 128 && head_dim != 256) ||
        n_kv_heads == 0 || n_heads % n_kv_heads != 0 || n_heads > 65535)
        return false;
    size_t group = n_heads / n_kv_heads;
    return group == 1 || group == 2 || group == 4 || group == 8;
}

extern "C" bool gpu_fi_decode_takes_layer(size_t head_dim, float softcap) {
    return fi_variant_exists(head_dim, softcap);
}

extern "C" void gpu_fi_decode_free(gpu_fi_decode *f) {
    if (f == NULL) return;
    if (f->device != NULL) (void)cudaFree(f->device);
    (void)cudaGetLastError();
    delete f;
}

extern "C" size_t gpu_fi_decode_target_chunks(const gpu_fi_decode *f) { return f != NULL ? f->target_chunks : 1; }

extern "C" rmlp_status gpu_fi_decode_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                            size_t head_dim, size_t max_rows, gpu_fi_decode **out) {
    *out = NULL;
    if (!gpu_fi_decode_supports(dtype, n_heads, n_kv_heads, head_dim) || max_rows == 0 || max_rows > INT32_MAX / 4)
        return RMLP_OK;
    int device = 0, major = 0;
    GPU_TRY(fn, cudaGetDevice(&device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 8) return RMLP_OK; /* cp.async, and the kernels' shapes are sm_80's */
    gpu_fi_decode *f = new (std::nothrow) gpu_fi_decode();
    if (f == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the FlashInfer decode state failed");
    f->dtype = dtype;
    f->n_heads = (uint32_t)n_heads, f->n_kv_heads = (uint32_t)n_kv_heads, f->head_dim = (uint32_t)head_dim;
    f->max_rows = max_rows;
    const layer_attention none = {0, 0.0f, 1.0f, 0};
    if (dispatch(OP_PROBE, f, NULL, NULL, none, NULL) != cudaSuccess) { /* the chain kernels take the session */
        (void)cudaGetLastError();
        delete f;
        return RMLP_OK;
    }
    f->max_chunks = max_rows + f->target_chunks;
    if (f->max_chunks * n_heads * head_dim > INT32_MAX) { /* the kernels index outputs in 32 bits */
        delete f;
        return RMLP_OK;
    }
    size_t partial_bytes = f->max_chunks * n_heads * head_dim * sizeof(float);
    size_t lse_bytes = f->max_chunks * n_heads * sizeof(float), bytes = partial_bytes + lse_bytes + max_rows * 4;
    cudaError_t error = cudaMalloc(&f->device, bytes);
    int32_t *ones = error == cudaSuccess ? (int32_t *)malloc(max_rows * sizeof(int32_t)) : NULL;
    rmlp_status status = RMLP_OK;
    if (error != cudaSuccess) {
        f->device = NULL;
        status = gpu_fail(fn, "cudaMalloc (FlashInfer decode partial states)", error);
    } else if (ones == NULL) {
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %zu last page lengths failed", max_rows);
    } else {
        f->partial = (float *)f->device;
        f->lse = (float *)((char *)f->device + partial_bytes);
        f->ones = (int32_t *)((char *)f->device + partial_bytes + lse_bytes);
        for (size_t i = 0; i < max_rows; i++) ones[i] = 1;
        /* from pageable memory on the legacy stream, which may return before the copy lands and which
         * a non-blocking context stream does not wait for: the steps would read unset lengths */
        error = cudaMemcpy(f->ones, ones, max_rows * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (error == cudaSuccess) error = cudaStreamSynchronize(cudaStreamLegacy);
        if (error != cudaSuccess) status = gpu_fail(fn, "cudaMemcpy (FlashInfer decode last page lengths)", error);
    }
    free(ones);
    if (status != RMLP_OK) {
        gpu_fi_decode_free(f);
        return status;
    }
    *out = f;
    return RMLP_OK;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" bool gpu_fi_decode_ready(const gpu_fi_decode_step *st, const gpu_compact_rows *r) {
    const gpu_fi_decode *f = st != NULL ? st->fi : NULL;
    return f != NULL && st->n_rows <= f->max_rows && st->n_chunks <= f->max_chunks &&
           r->out_stride == (size_t)f->n_heads * f->head_dim && r->q_stride % 8 == 0 && r->k_stride % 8 == 0 &&
           r->k_stride == r->v_stride && st->n_rows * r->q_stride <= INT32_MAX && aligned16(r->q) &&
           aligned16(r->k) && aligned16(r->v) && aligned16(r->out);
}

extern "C" cudaError_t gpu_fi_decode_run(const gpu_fi_decode_step *st, const gpu_compact_rows *r, layer_attention la,
                                         cudaStream_t stream) {
    if (!gpu_fi_decode_ready(st, r) || !gpu_fi_decode_takes_layer(st->fi->head_dim, la.softcap))
        return cudaErrorInvalidValue;
    if (st->n_rows == 0) return cudaSuccess;
    return dispatch(OP_RUN, (gpu_fi_decode *)st->fi, st, r, la, stream);
}

#else /* no FlashInfer decode in this build: every session takes the chain kernels */

extern "C" bool gpu_fi_decode_built(void) { return false; }

extern "C" bool gpu_fi_decode_supports(rmlp_dtype, size_t, size_t, size_t) { return false; }

extern "C" bool gpu_fi_decode_takes_layer(size_t, float) { return false; }

extern "C" rmlp_status gpu_fi_decode_create(const char *, rmlp_dtype, size_t, size_t, size_t, size_t,
                                            gpu_fi_decode **out) {
    *out = NULL;
    return RMLP_OK;
}

extern "C" void gpu_fi_decode_free(gpu_fi_decode *) {}

extern "C" size_t gpu_fi_decode_target_chunks(const gpu_fi_decode *) { return 1; }

extern "C" bool gpu_fi_decode_ready(const gpu_fi_decode_step *, const gpu_compact_rows *) { return false; }

extern "C" cudaError_t gpu_fi_decode_run(const gpu_fi_decode_step *, const gpu_compact_rows *, layer_attention,
                                         cudaStream_t) {
    return cudaErrorInvalidValue;
}

#endif
