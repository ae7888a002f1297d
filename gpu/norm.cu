/*
 * norm.cu: the fused residual add and RMSNorm that opens each half of a decoder layer:
 * residual += add (when given), then normed = residual / sqrt(mean(residual^2) + eps) * weight;
 * Gemma 2's norm of a sublayer's output before its residual add, fused with the next norm; and
 * Gemma 3's per-head norm of q and k. Gemma's norms scale by (offset + weight), offset 1, the
 * sum formed in fp32 as GemmaRMSNorm forms 1 + w.float().
 * The norm reads the residual as stored (rounded to the dtype), as a framework computing in
 * that dtype would; the sum of squares and the scaling are fp32, in the CPU path's order.
 * One block per row: a first pass adds, stores and sums squares, a block reduction, a second
 * pass scales (re-reading the row the same thread just wrote, from cache). 16 bytes per access
 * when `dim` and the pointers allow it; for small rows the block is a single warp.
 */
#include "common.cuh"
#include "kernels.h"

/* One row per block. residual, add (or NULL), normed (rows, dim); weight (dim); W elements per access. */
template <class D, int W>
static __global__ void add_rmsnorm_kernel(typename D::S *__restrict__ residual, const typename D::S *__restrict__ add,
                                          const typename D::S *__restrict__ weight, float offset, size_t dim,
                                          float eps, typename D::S *__restrict__ normed) {
    typedef typename D::S S;
    size_t row = (size_t)blockIdx.x * dim;
    S *x_row = residual + row;
    const size_t step = (size_t)blockDim.x * W;
    float sumsq = 0.0f;
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += step) {
        float x[W];
        load_chunk<D, W>(x_row + c, x);
        if (add != nullptr) {
            float a[W];
            load_chunk<D, W>(add + row + c, a);
#pragma unroll
            for (int e = 0; e < W; e++) x[e] = D::load(D::store(x[e] + a[e])); /* the value stored */
            store_chunk<D, W>(x_row + c, x);
        }
#pragma unroll
        for (int e = 0; e < W; e++) sumsq += x[e] * x[e];
    }
    float inv = 1.0f / sqrtf(block_sum(sumsq) / (float)dim + eps);
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += step) {
        float x[W], w[W], y[W];
        load_chunk<D, W>(x_row + c, x);
        load_chunk<D, W>(weight + c, w);
#pragma unroll
        for (int e = 0; e < W; e++) y[e] = (w[e] + offset) * (x[e] * inv);
        store_chunk<D, W>(normed + row + c, y);
    }
}

template <class D>
static cudaError_t launch_add_rmsnorm(void *residual, const void *add, const void *weight, float offset, size_t rows,
                                      size_t dim, float eps, void *normed, cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    bool vec = dim % V == 0 && aligned16(residual) && aligned16(weight) && aligned16(normed) &&
               (add == nullptr || aligned16(add));
    size_t chunks = vec ? dim / V : dim;
    unsigned threads = chunks >= 1024 ? 1024u : (unsigned)((chunks + 31) / 32 * 32); /* whole warps */
    if (vec)
        add_rmsnorm_kernel<D, V><<<(unsigned)rows, threads, 0, stream>>>((S *)residual, (const S *)add,
                                                                         (const S *)weight, offset, dim, eps,
                                                                         (S *)normed);
    else
        add_rmsnorm_kernel<D, 1><<<(unsigned)rows, threads, 0, stream>>>((S *)residual, (const S *)add,
                                                                         (const S *)weight, offset, dim, eps,
                                                                         (S *)normed);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_add_rmsnorm(void *residual, const void *add, const void *weight, float weight_offset,
                                       size_t rows, size_t dim, double eps, void *normed, rmlp_dtype dtype,
                                       cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    float e = (float)eps, o = weight_offset;
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_add_rmsnorm<F32>(residual, add, weight, o, rows, dim, e, normed, stream);
    case RMLP_DTYPE_F16: return launch_add_rmsnorm<F16>(residual, add, weight, o, rows, dim, e, normed, stream);
    default: return launch_add_rmsnorm<BF16>(residual, add, weight, o, rows, dim, e, normed, stream);
    }
}

/* One row per block: sub's RMSNorm with sub_weight, rounded to the dtype (the normed output
 * transformers adds), added onto residual (rounded); then, with weight, normed = RMSNorm of
 * the sum. sub and normed may be one buffer: every read of sub comes before the reduction that
 * precedes the writes of normed, so neither is __restrict__. */
template <class D, int W>
static __global__ void norm_add_rmsnorm_kernel(typename D::S *__restrict__ residual, const typename D::S *sub,
                                               const typename D::S *__restrict__ sub_weight,
                                               const typename D::S *__restrict__ weight, float offset, size_t dim,
                                               float eps, typename D::S *normed) {
    size_t row = (size_t)blockIdx.x * dim;
    const size_t step = (size_t)blockDim.x * W;
    float sumsq = 0.0f;
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += step) {
        float x[W];
        load_chunk<D, W>(sub + row + c, x);
#pragma unroll
        for (int e = 0; e < W; e++) sumsq += x[e] * x[e];
    }
    float inv = 1.0f / sqrtf(block_sum(sumsq) / (float)dim + eps);
    float sumsq_out = 0.0f;
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += step) {
        float x[W], w[W], r[W];
        load_chunk<D, W>(sub + row + c, x);
        load_chunk<D, W>(sub_weight + c, w);
        load_chunk<D, W>(residual + row + c, r);
#pragma unroll
        for (int e = 0; e < W; e++) {
            float y = D::load(D::store((w[e] + offset) * (x[e] * inv))); /* the sublayer's output, as stored */
            r[e] = D::load(D::store(r[e] + y));
            sumsq_out += r[e] * r[e];
        }
        store_chunk<D, W>(residual + row + c, r);
    }
    if (weight == nullptr) return; /* the whole block alike */
    float inv_out = 1.0f / sqrtf(block_sum(sumsq_out) / (float)dim + eps);
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += step) {
        float r[W], w[W], y[W];
        load_chunk<D, W>(residual + row + c, r);
        load_chunk<D, W>(weight + c, w);
#pragma unroll
        for (int e = 0; e < W; e++) y[e] = (w[e] + offset) * (r[e] * inv_out);
        store_chunk<D, W>(normed + row + c, y);
    }
}

template <class D>
static cudaError_t launch_norm_add_rmsnorm(void *residual, const void *sub, const void *sub_weight, const void *weight,
                                           float offset, size_t rows, size_t dim, float eps, void *normed,
                                           cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    bool vec = dim % V == 0 && aligned16(residual) && aligned16(sub) && aligned16(sub_weight) &&
               (weight == nullptr || (aligned16(weight) && aligned16(normed)));
    size_t chunks = vec ? dim / V : dim;
    unsigned threads = chunks >= 1024 ? 1024u : (unsigned)((chunks + 31) / 32 * 32);
    if (vec)
        norm_add_rmsnorm_kernel<D, V><<<(unsigned)rows, threads, 0, stream>>>(
            (S *)residual, (const S *)sub, (const S *)sub_weight, (const S *)weight, offset, dim, eps, (S *)normed);
    else
        norm_add_rmsnorm_kernel<D, 1><<<(unsigned)rows, threads, 0, stream>>>(
            (S *)residual, (const S *)sub, (const S *)sub_weight, (const S *)weight, offset, dim, eps, (S *)normed);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_norm_add_rmsnorm(void *residual, const void *sub, const void *sub_weight,
                                            const void *weight, float weight_offset, size_t rows, size_t dim,
                                            double eps, void *normed, rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || rows > INT32_MAX || (weight != NULL && normed == NULL)) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    float e = (float)eps, o = weight_offset;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        return launch_norm_add_rmsnorm<F32>(residual, sub, sub_weight, weight, o, rows, dim, e, normed, stream);
    case RMLP_DTYPE_F16:
        return launch_norm_add_rmsnorm<F16>(residual, sub, sub_weight, weight, o, rows, dim, e, normed, stream);
    default: return launch_norm_add_rmsnorm<BF16>(residual, sub, sub_weight, weight, o, rows, dim, e, normed, stream);
    }
}

/* A warp per (row, head): x's head RMS-normed in place with (offset + weight), x rows at stride. */
template <class D>
static __global__ void head_rmsnorm_kernel(typename D::S *x, size_t stride, size_t rows, int heads, int head_dim,
                                           const typename D::S *__restrict__ weight, float offset, float eps) {
    size_t id = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    bool valid = id < rows * (size_t)heads; /* no early return: the warp shuffles below */
    typename D::S *v = x + (valid ? (id / heads) * stride + (id % heads) * (size_t)head_dim : 0);
    float sumsq = 0.0f;
    for (int c = lane; valid && c < head_dim; c += 32) {
        float a = D::load(v[c]);
        sumsq += a * a;
    }
    float inv = 1.0f / sqrtf(group_sum(sumsq, 32) / (float)head_dim + eps);
    for (int c = lane; valid && c < head_dim; c += 32) v[c] = D::store((D::load(weight[c]) + offset) * (D::load(v[c]) * inv));
}

extern "C" cudaError_t gpu_head_rmsnorm(void *x, size_t stride, size_t rows, size_t heads, size_t head_dim,
                                        const void *weight, float weight_offset, double eps, rmlp_dtype dtype,
                                        cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || head_dim == 0 || head_dim > INT32_MAX || heads > 65536 || stride < heads * head_dim)
        return cudaErrorInvalidValue;
    if (rows == 0 || heads == 0) return cudaSuccess;
    size_t blocks = (rows * heads * 32 + 255) / 256;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    float e = (float)eps;
    int h = (int)heads, hd = (int)head_dim;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        head_rmsnorm_kernel<F32><<<(unsigned)blocks, 256, 0, stream>>>((float *)x, stride, rows, h, hd,
                                                                      (const float *)weight, weight_offset, e);
        break;
    case RMLP_DTYPE_F16:
        head_rmsnorm_kernel<F16><<<(unsigned)blocks, 256, 0, stream>>>((unsigned short *)x, stride, rows, h, hd,
                                                                      (const unsigned short *)weight, weight_offset, e);
        break;
    default:
        head_rmsnorm_kernel<BF16><<<(unsigned)blocks, 256, 0, stream>>>((unsigned short *)x, stride, rows, h, hd,
                                                                       (const unsigned short *)weight, weight_offset,
                                                                       e);
    }
    return cudaGetLastError();
}
