/*
 * rope.cu: per-head q/k RMSNorm (Qwen3) fused with rotate-half RoPE, in place on the q and k heads
 * (of fused qkv rows, or of separate q and k buffers).
 * A group of `group` lanes (a power of two, up to a warp) owns one (row, head): each lane holds
 * chunks of the head's first half and the matching chunks of its second half, so the pair
 * (i, i + head_dim/2) that RoPE rotates together sits in one thread. The head's sum of squares
 * is a shuffle reduction within the group. The inverse frequencies are computed on the host,
 * 1 / powf(theta, 2i / head_dim) in fp32 exactly as the CPU path (and transformers) compute
 * them, passed by value and staged in shared memory: the device powf would differ by an ulp or
 * two, which at positions in the thousands moves angles by 1e-4. Angles are fp32 pos * inv_freq.
 */
#include <math.h>

#include "common.cuh"
#include "kernels.h"

#define ROPE_MAX_HALF 128 /* head_dim up to 256 */
#define ROPE_THREADS 256

struct RopeTable {
    float inv_freq[ROPE_MAX_HALF]; /* (head_dim / 2) */
};

/* q (rows, q_stride): heads 0..n_q-1; k (rows, k_stride): heads n_q..n_q+n_kv-1 of the launch
 * (q and k may be the two parts of fused qkv rows, hence no __restrict__); q_norm, k_norm
 * (head_dim) or NULL; positions (rows). W elements per access; `group` lanes per (row, head). */
template <class D, int W>
static __global__ void __launch_bounds__(ROPE_THREADS)
    qk_norm_rope_kernel(typename D::S *q, size_t q_stride, typename D::S *k, size_t k_stride, size_t rows, int n_q,
                        int n_kv, int head_dim, const typename D::S *__restrict__ q_norm,
                        const typename D::S *__restrict__ k_norm, const uint32_t *__restrict__ positions, float eps,
                        int group, const __grid_constant__ RopeTable table) {
    constexpr int J = (ROPE_MAX_HALF / W + 31) / 32; /* chunks per lane at most: half / W / group */
    __shared__ float inv_freq[ROPE_MAX_HALF];
    const int half = head_dim / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) inv_freq[i] = table.inv_freq[i];
    __syncthreads();

    const int heads = n_q + n_kv;
    const size_t id = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / group; /* (row, head) */
    const int lane = threadIdx.x % group;
    const bool valid = id < rows * heads; /* no early return: the whole warp shuffles below */
    const size_t row = valid ? id / heads : 0;
    const int head = valid ? (int)(id % heads) : 0;
    typename D::S *x = head < n_q ? q + row * q_stride + (size_t)head * head_dim
                                  : k + row * k_stride + (size_t)(head - n_q) * head_dim;
    const typename D::S *norm = head < n_q ? q_norm : k_norm;

    float a[J][W], b[J][W], sumsq = 0.0f;
#pragma unroll
    for (int j = 0; j < J; j++) {
        int c = (lane + j * group) * W; /* element offset in the first half */
        if (valid && c < half) {
            load_chunk<D, W>(x + c, a[j]);
            load_chunk<D, W>(x + half + c, b[j]);
#pragma unroll
            for (int e = 0; e < W; e++) sumsq += a[j][e] * a[j][e] + b[j][e] * b[j][e];
        }
    }
    sumsq = group_sum(sumsq, group);
    const float inv = 1.0f / sqrtf(sumsq / (float)head_dim + eps);
    const float pos = (float)(valid ? positions[row] : 0u);
#pragma unroll
    for (int j = 0; j < J; j++) {
        int c = (lane + j * group) * W;
        if (!(valid && c < half)) continue;
        float wa[W], wb[W];
        if (norm != nullptr) {
            load_chunk<D, W>(norm + c, wa);
            load_chunk<D, W>(norm + half + c, wb);
        }
#pragma unroll
        for (int e = 0; e < W; e++) {
            float lo = a[j][e], hi = b[j][e];
            if (norm != nullptr) {
                lo = wa[e] * (lo * inv);
                hi = wb[e] * (hi * inv);
            }
            float s, co;
            sincosf(pos * inv_freq[c + e], &s, &co);
            a[j][e] = lo * co - hi * s;
            b[j][e] = hi * co + lo * s;
        }
        store_chunk<D, W>(x + c, a[j]);
        store_chunk<D, W>(x + half + c, b[j]);
    }
}

template <class D>
static cudaError_t launch_qk_norm_rope(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows, int n_q,
                                       int n_kv, int head_dim, const void *q_norm, const void *k_norm,
                                       const uint32_t *positions, float eps, const RopeTable &table,
                                       cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    const int half = head_dim / 2;
    bool vec = half % V == 0 && (q_stride * sizeof(S)) % 16 == 0 && (k_stride * sizeof(S)) % 16 == 0 &&
               aligned16(q) && aligned16(k) && (q_norm == nullptr || aligned16(q_norm)) &&
               (k_norm == nullptr || aligned16(k_norm));
    int chunks = vec ? half / V : half;
    int group = (int)pow2_ceil((size_t)chunks);
    if (group > 32) group = 32;
    size_t threads = rows * (size_t)(n_q + n_kv) * (size_t)group;
    size_t blocks = (threads + ROPE_THREADS - 1) / ROPE_THREADS;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    if (vec)
        qk_norm_rope_kernel<D, V><<<(unsigned)blocks, ROPE_THREADS, 0, stream>>>(
            (S *)q, q_stride, (S *)k, k_stride, rows, n_q, n_kv, head_dim, (const S *)q_norm, (const S *)k_norm,
            positions, eps, group, table);
    else
        qk_norm_rope_kernel<D, 1><<<(unsigned)blocks, ROPE_THREADS, 0, stream>>>(
            (S *)q, q_stride, (S *)k, k_stride, rows, n_q, n_kv, head_dim, (const S *)q_norm, (const S *)k_norm,
            positions, eps, group, table);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_qk_norm_rope(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows,
                                        size_t n_q_heads, size_t n_kv_heads, size_t head_dim, const void *q_norm,
                                        const void *k_norm, const uint32_t *positions, double theta, double eps,
                                        rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || head_dim == 0 || head_dim % 2 != 0 || head_dim > 2 * ROPE_MAX_HALF ||
        n_q_heads + n_kv_heads > 65536 || q_stride < n_q_heads * head_dim || k_stride < n_kv_heads * head_dim ||
        rows > INT32_MAX)
        return cudaErrorInvalidValue;
    if (rows == 0 || n_q_heads + n_kv_heads == 0) return cudaSuccess;
    RopeTable table = {};
    for (size_t i = 0; i < head_dim / 2; i++) /* the CPU path's expression, term for term */
        table.inv_freq[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
    int nq = (int)n_q_heads, nkv = (int)n_kv_heads, hd = (int)head_dim;
    float e = (float)eps;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        return launch_qk_norm_rope<F32>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                        table, stream);
    case RMLP_DTYPE_F16:
        return launch_qk_norm_rope<F16>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                        table, stream);
    default:
        return launch_qk_norm_rope<BF16>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                         table, stream);
    }
}
