/*
 * activation.cu: the gated product out = act(gate) * up of the fused gate/up projection (gu rows
 * are [gate | up], each `inter` wide), in fp32 as the CPU path computes it: SwiGLU's
 * gate / (1 + exp(-gate)) * up, and Gemma's GeGLU with GELU's tanh form (as the logistic
 * gate / (1 + exp(-2u)), the same function) or its exact erf form. Threads of a block walk a row
 * (x) for a few rows (y), 16 bytes per access when `inter` and the pointers allow it.
 */
#include "common.cuh"
#include "kernels.h"

/* The activations, on fp32. */
struct Silu {
    static __device__ __forceinline__ float f(float g) { return g / (1.0f + expf(-g)); }
};
struct GeluTanh { /* 0.5 g (1 + tanh(u)) = g / (1 + e^(-2u)) */
    static __device__ __forceinline__ float f(float g) {
        float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
        return g / (1.0f + expf(-2.0f * u));
    }
};
struct Gelu {
    static __device__ __forceinline__ float f(float g) { return 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)); }
};

/* out (rows, inter) = A(gu[:, :inter]) * gu[:, inter:]; gu (rows, 2 * inter); W elements per access. */
template <class D, class A, int W>
static __global__ void gated_mul_kernel(const typename D::S *__restrict__ gu, size_t rows, size_t inter,
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
        for (int e = 0; e < W; e++) y[e] = A::f(g[e]) * u[e];
        store_chunk<D, W>(o + c, y);
    }
}

template <class D, class A>
static cudaError_t launch_gated_mul(const void *gu, size_t rows, size_t inter, void *out, cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    if (inter % V == 0 && aligned16(gu) && aligned16(out)) {
        dim3 block = row_block(inter / V);
        gated_mul_kernel<D, A, V><<<row_grid(rows, block), block, 0, stream>>>((const S *)gu, rows, inter, (S *)out);
    } else {
        dim3 block = row_block(inter);
        gated_mul_kernel<D, A, 1><<<row_grid(rows, block), block, 0, stream>>>((const S *)gu, rows, inter, (S *)out);
    }
    return cudaGetLastError();
}

template <class A>
static cudaError_t launch_dtype(const void *gu, size_t rows, size_t inter, void *out, rmlp_dtype dtype,
                                cudaStream_t stream) {
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_gated_mul<F32, A>(gu, rows, inter, out, stream);
    case RMLP_DTYPE_F16: return launch_gated_mul<F16, A>(gu, rows, inter, out, stream);
    default: return launch_gated_mul<BF16, A>(gu, rows, inter, out, stream);
    }
}

extern "C" cudaError_t gpu_gated_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_activation act,
                                     rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || rows > INT32_MAX ||
        (act != RMLP_ACTIVATION_SILU && act != RMLP_ACTIVATION_GELU_TANH && act != RMLP_ACTIVATION_GELU))
        return cudaErrorInvalidValue;
    if (rows == 0 || inter == 0) return cudaSuccess;
    if (act == RMLP_ACTIVATION_GELU_TANH) return launch_dtype<GeluTanh>(gu, rows, inter, out, dtype, stream);
    if (act == RMLP_ACTIVATION_GELU) return launch_dtype<Gelu>(gu, rows, inter, out, dtype, stream);
    return launch_dtype<Silu>(gu, rows, inter, out, dtype, stream);
}

extern "C" cudaError_t gpu_silu_mul(const void *gu, size_t rows, size_t inter, void *out, rmlp_dtype dtype,
                                    cudaStream_t stream) {
    return gpu_gated_mul(gu, rows, inter, out, RMLP_ACTIVATION_SILU, dtype, stream);
}
