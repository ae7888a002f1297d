/*
 * common.cuh: what the kernels of gpu/ share, internal to them. The three storage dtypes as
 * tag types with fp32 load/store (all math is fp32; values are rounded to nearest-even once,
 * on store); chunk loads/stores of W elements, where W = 16 bytes / element size is one 16-byte
 * vector access and W = 1 the scalar fallback; warp and block reductions; the thread-block
 * shape of the row-wise kernels. Everything here is static: each .cu compiles its own copy.
 */
#ifndef RMLP_GPU_COMMON_CUH
#define RMLP_GPU_COMMON_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "radix_mlp/types.h"

/* Storage types. S is what one element is in memory (fp16/bf16 as raw 16-bit patterns). */
struct F32 {
    typedef float S;
    static __device__ __forceinline__ float load(S x) { return x; }
    static __device__ __forceinline__ S store(float x) { return x; }
};
struct F16 {
    typedef unsigned short S;
    static __device__ __forceinline__ float load(S x) { return __half2float(__ushort_as_half(x)); }
    static __device__ __forceinline__ S store(float x) { return __half_as_ushort(__float2half_rn(x)); }
};
struct BF16 {
    typedef unsigned short S;
    static __device__ __forceinline__ float load(S x) { return __uint_as_float((unsigned)x << 16); }
    static __device__ __forceinline__ S store(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

/* Elements per 16-byte vector. */
template <class D> struct Vec { static constexpr int W = 16 / (int)sizeof(typename D::S); };

/* f[0..W) = p[0..W) in fp32. W > 1: one 16-byte load, p 16-byte aligned. */
template <class D, int W> static __device__ __forceinline__ void load_chunk(const typename D::S *p, float *f) {
    if constexpr (W == 1) {
        f[0] = D::load(*p);
    } else {
        static_assert(W == Vec<D>::W, "a chunk is one element or one 16-byte vector");
        uint4 raw = *reinterpret_cast<const uint4 *>(p);
        unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if constexpr (W == 4) {
                f[i] = __uint_as_float(w[i]);
            } else { /* element 2i is the low half of word i (little-endian) */
                f[2 * i] = D::load((typename D::S)(w[i] & 0xFFFFu));
                f[2 * i + 1] = D::load((typename D::S)(w[i] >> 16));
            }
        }
    }
}

/* p[0..W) = f[0..W) rounded to the storage type. W > 1: one 16-byte store, p 16-byte aligned. */
template <class D, int W> static __device__ __forceinline__ void store_chunk(typename D::S *p, const float *f) {
    if constexpr (W == 1) {
        *p = D::store(f[0]);
    } else {
        static_assert(W == Vec<D>::W, "a chunk is one element or one 16-byte vector");
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if constexpr (W == 4)
                w[i] = __float_as_uint(f[i]);
            else
                w[i] = (unsigned)D::store(f[2 * i]) | ((unsigned)D::store(f[2 * i + 1]) << 16);
        }
        *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

/* Sum / max over aligned groups of `width` lanes (a power of two <= 32); every lane of the
 * group gets the result. All 32 lanes of the warp must call it. */
static __device__ __forceinline__ float group_sum(float v, int width) {
    for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_sum(float v) { return group_sum(v, 32); }
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

/* Sum over a 1-D block whose size is a multiple of 32; every thread gets the result. All
 * threads of the block must call it. */
static __device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads(); /* partial[] may still be read by an earlier call */
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? partial[lane] : 0.0f);
}

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Bytes per element of a dtype, 0 when it is not one. */
static inline size_t dtype_size(rmlp_dtype dtype) {
    switch (dtype) {
    case RMLP_DTYPE_F32: return 4;
    case RMLP_DTYPE_F16:
    case RMLP_DTYPE_BF16: return 2;
    default: return 0;
    }
}

/* Smallest power of two >= n (n <= 2^30), at least 1. */
static inline unsigned pow2_ceil(size_t n) {
    unsigned p = 1;
    while (p < n) p *= 2;
    return p;
}

/* Block shape of the row-wise 2-D kernels: x walks the `units` of a row (blockDim.x at most
 * 256, a power of two), y picks one of 256 / blockDim.x rows. */
static inline dim3 row_block(size_t units) {
    unsigned x = units >= 256 ? 256u : pow2_ceil(units);
    return dim3(x, 256u / x);
}

/* Blocks covering `rows` rows with the block shape `block`. */
static inline dim3 row_grid(size_t rows, dim3 block) { return dim3((unsigned)((rows + block.y - 1) / block.y)); }

#endif
