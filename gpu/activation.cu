/*
 * activation.cu: the SwiGLU product out = silu(gate) * up of the fused gate/up projection
 * (gu rows are [gate | up], each `inter` wide), in fp32 as the CPU path computes it:
 * gate / (1 + exp(-gate)) * up. Threads of a block walk a row (x) for a few rows (y), 16 bytes
 * per access when `inter` and the pointers allow it.
 */
#include "common.cuh"
#include "kernels.h"

/* out (rows, inter) = silu(gu[:, :inter]) * gu[:, inter:]; gu (rows, 2 * inter); W elements per access. */
template <class D, int W>
static __global__ void silu_mul_kernel(const typename D::S *__restrict__ gu, size_t rows, size_t inter,
                                       typename D::S *__restrict__ out) {
    size_t r = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    const typename D::S *gate = gu + r * 2 * inter, *up = gate + inter;
    typename D::S *o = out + r * inter;
    for (size_t c = (size_t)threadIdx.x * W; c < inter; c += (size_t)blockDim.x * W) {
        float g[W], u[W], y[W];
        load_chunk<D, W>(gate + c, g);
        load_chunk<D, W>(up + c, u);
#pragma unroll
        for (int e = 0; e < W; e++) y[e] = g[e] / (1.0f + expf(-g[e])) * u[e];
        store_chunk<D, W>(o + c, y);
    }
}

template <class D>
static cudaError_t launch_silu_mul(const void *gu, size_t rows, size_t inter, void *out, cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    if (inter % V == 0 && aligned16(gu) && aligned16(out)) {
        dim3 block = row_block(inter / V);
        silu_mul_kernel<D, V><<<row_grid(rows, block), block, 0, stream>>>((const S *)gu, rows, inter, (S *)out);
    } else {
        dim3 block = row_block(inter);
        silu_mul_kernel<D, 1><<<row_grid(rows, block), block, 0, stream>>>((const S *)gu, rows, inter, (S *)out);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_silu_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_dtype dtype,
                                    cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || inter == 0) return cudaSuccess;
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_silu_mul<F32>(gu, rows, inter, out, stream);
    case RMLP_DTYPE_F16: return launch_silu_mul<F16>(gu, rows, inter, out, stream);
    default: return launch_silu_mul<BF16>(gu, rows, inter, out, stream);
    }
}
