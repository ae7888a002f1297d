/*
 * pool.cu: the read-outs of a forward that a server takes back to the host: per-sequence
 * pooling (last, first or mean row) and the two LM-head logits of a yes/no reranker at each
 * sequence's last row. Both produce fp32, so only n_seqs rows (or 2 floats per sequence) cross
 * to the host instead of the whole (n_tokens, hidden) output.
 */
#include "common.cuh"
#include "kernels.h"

#define POOL_THREADS 256

/* Row of hidden holding batch row r: rows[r], or r when rows is NULL. */
static __device__ __forceinline__ size_t row_of(const uint32_t *__restrict__ rows, size_t r) {
    return rows != nullptr ? (size_t)rows[r] : r;
}

/* out (n_seqs, dim) fp32; grid (column blocks, sequence blocks), sequences strided by gridDim.y. */
template <class D>
static __global__ void pool_kernel(const typename D::S *__restrict__ hidden, size_t dim,
                                   const uint32_t *__restrict__ rows, const uint32_t *__restrict__ cu_seqlens,
                                   size_t n_seqs, int pooling, float *__restrict__ out) {
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= dim) return;
    for (size_t s = blockIdx.y; s < n_seqs; s += gridDim.y) {
        size_t start = cu_seqlens[s], end = cu_seqlens[s + 1];
        float v;
        if (pooling == RMLP_POOLING_MEAN) {
            float sum = 0.0f;
            for (size_t r = start; r < end; r++) sum += D::load(hidden[row_of(rows, r) * dim + c]);
            v = sum / (float)(end - start);
        } else {
            size_t r = pooling == RMLP_POOLING_FIRST ? start : end - 1;
            v = D::load(hidden[row_of(rows, r) * dim + c]);
        }
        out[s * dim + c] = v;
    }
}

template <class D>
static cudaError_t launch_pool(const void *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens,
                               size_t n_seqs, rmlp_pooling pooling, float *out, cudaStream_t stream) {
    dim3 grid((unsigned)((dim + POOL_THREADS - 1) / POOL_THREADS), (unsigned)(n_seqs < 65535 ? n_seqs : 65535));
    pool_kernel<D><<<grid, POOL_THREADS, 0, stream>>>((const typename D::S *)hidden, dim, rows, cu_seqlens, n_seqs,
                                                      (int)pooling, out);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_pool_rows(const void *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens,
                                     size_t n_seqs, rmlp_pooling pooling, float *out, rmlp_dtype dtype,
                                     cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || dim > (size_t)INT32_MAX * POOL_THREADS ||
        (pooling != RMLP_POOLING_LAST && pooling != RMLP_POOLING_FIRST && pooling != RMLP_POOLING_MEAN))
        return cudaErrorInvalidValue;
    if (n_seqs == 0 || dim == 0) return cudaSuccess;
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_pool<F32>(hidden, dim, rows, cu_seqlens, n_seqs, pooling, out, stream);
    case RMLP_DTYPE_F16: return launch_pool<F16>(hidden, dim, rows, cu_seqlens, n_seqs, pooling, out, stream);
    default: return launch_pool<BF16>(hidden, dim, rows, cu_seqlens, n_seqs, pooling, out, stream);
    }
}

/* logits (n_seqs, 2): one block per sequence (strided by gridDim.x), two block reductions. */
template <class D>
static __global__ void score_kernel(const typename D::S *__restrict__ hidden, size_t dim,
                                    const uint32_t *__restrict__ rows, const uint32_t *__restrict__ cu_seqlens,
                                    size_t n_seqs,
                                    const typename D::S *__restrict__ row_a, const typename D::S *__restrict__ row_b,
                                    float *__restrict__ logits) {
    for (size_t s = blockIdx.x; s < n_seqs; s += gridDim.x) { /* uniform across the block */
        const typename D::S *last = hidden + row_of(rows, cu_seqlens[s + 1] - 1) * dim;
        float a = 0.0f, b = 0.0f;
        for (size_t c = threadIdx.x; c < dim; c += blockDim.x) {
            float x = D::load(last[c]);
            a += x * D::load(row_a[c]);
            b += x * D::load(row_b[c]);
        }
        a = block_sum(a);
        b = block_sum(b);
        if (threadIdx.x == 0) {
            logits[2 * s] = a;
            logits[2 * s + 1] = b;
        }
    }
}

extern "C" cudaError_t gpu_score_rows(const void *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens,
                                      size_t n_seqs,
                                      const void *row_a, const void *row_b, float *logits, rmlp_dtype dtype,
                                      cudaStream_t stream) {
    if (dtype_size(dtype) == 0) return cudaErrorInvalidValue;
    if (n_seqs == 0) return cudaSuccess;
    unsigned blocks = (unsigned)(n_seqs < 65535 ? n_seqs : 65535);
    switch (dtype) {
    case RMLP_DTYPE_F32:
        score_kernel<F32><<<blocks, POOL_THREADS, 0, stream>>>((const float *)hidden, dim, rows, cu_seqlens, n_seqs,
                                                               (const float *)row_a, (const float *)row_b, logits);
        break;
    case RMLP_DTYPE_F16:
        score_kernel<F16><<<blocks, POOL_THREADS, 0, stream>>>(
            (const unsigned short *)hidden, dim, rows, cu_seqlens, n_seqs, (const unsigned short *)row_a,
            (const unsigned short *)row_b, logits);
        break;
    default:
        score_kernel<BF16><<<blocks, POOL_THREADS, 0, stream>>>(
            (const unsigned short *)hidden, dim, rows, cu_seqlens, n_seqs, (const unsigned short *)row_a,
            (const unsigned short *)row_b, logits);
        break;
    }
    return cudaGetLastError();
}
