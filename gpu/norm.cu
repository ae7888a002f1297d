/*
 * norm.cu: the fused residual add and RMSNorm that opens each half of a decoder layer:
 * residual += add (when given), then normed = residual / sqrt(mean(residual^2) + eps) * weight.
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
                                          const typename D::S *__restrict__ weight, size_t dim, float eps,
                                          typename D::S *__restrict__ normed) {
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
        for (int e = 0; e < W; e++) y[e] = w[e] * (x[e] * inv);
        store_chunk<D, W>(normed + row + c, y);
    }
}

template <class D>
static cudaError_t launch_add_rmsnorm(void *residual, const void *add, const void *weight, size_t rows, size_t dim,
                                      float eps, void *normed, cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    bool vec = dim % V == 0 && aligned16(residual) && aligned16(weight) && aligned16(normed) &&
               (add == nullptr || aligned16(add));
    size_t chunks = vec ? dim / V : dim;
    unsigned threads = chunks >= 1024 ? 1024u : (unsigned)((chunks + 31) / 32 * 32); /* whole warps */
    if (vec)
        add_rmsnorm_kernel<D, V><<<(unsigned)rows, threads, 0, stream>>>((S *)residual, (const S *)add,
                                                                         (const S *)weight, dim, eps, (S *)normed);
    else
        add_rmsnorm_kernel<D, 1><<<(unsigned)rows, threads, 0, stream>>>((S *)residual, (const S *)add,
                                                                         (const S *)weight, dim, eps, (S *)normed);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_add_rmsnorm(void *residual, const void *add, const void *weight, size_t rows, size_t dim,
                                       double eps, void *normed, rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_add_rmsnorm<F32>(residual, add, weight, rows, dim, (float)eps, normed, stream);
    case RMLP_DTYPE_F16: return launch_add_rmsnorm<F16>(residual, add, weight, rows, dim, (float)eps, normed, stream);
    default: return launch_add_rmsnorm<BF16>(residual, add, weight, rows, dim, (float)eps, normed, stream);
    }
}
