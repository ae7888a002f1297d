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
 *
 * cos and sin of an angle come from sincosf per element, or from a table (gpu_rope_table: a
 * model's, filled once by gpu_rope_table_fill with the same angle and the same sincosf, so both
 * give the same bits; positions past the table take sincosf). The angle is formed with __fmul_rn
 * in both kernels, so no compiler contraction can round it differently in one of them. A scaled
 * RoPE (model/model_ext.h: linear, llama3, yarn) brings its own inverse frequencies, computed on
 * the host as transformers computes them, and yarn an attention factor cos and sin are multiplied
 * by (in fp32, as transformers multiplies its cos and sin; a factor of 1 changes no bit).
 */
#include <math.h>

#include "common.cuh"
#include "kernels.h"

#define ROPE_MAX_HALF 128 /* head_dim up to 256 */
#define ROPE_THREADS 256

struct RopeTable {
    float inv_freq[ROPE_MAX_HALF]; /* (head_dim / 2) */
    float factor;                  /* cos and sin times this (yarn's attention factor; 1 otherwise) */
};

/* The inverse frequencies of head_dim, the CPU path's expression term for term (model_ext.c). */
static void default_frequencies(double theta, size_t head_dim, float *inv_freq) {
    for (size_t i = 0; i < head_dim / 2; i++)
        inv_freq[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
}

static RopeTable table_of(const float *inv_freq, size_t head_dim, float factor) {
    RopeTable table = {};
    for (size_t i = 0; i < head_dim / 2; i++) table.inv_freq[i] = inv_freq[i];
    table.factor = factor;
    return table;
}

/* The angle of frequency inv_freq at position pos, rounded once (never fused into what follows). */
static __device__ __forceinline__ float rope_angle(float pos, float inv_freq) { return __fmul_rn(pos, inv_freq); }

/* co[0..W), s[0..W) = the table's (cos, sin) pairs at p[0..W); W > 1: 16-byte loads (p 16-byte
 * aligned: an even pair index). */
template <int W>
static __device__ __forceinline__ void load_cos_sin(const float2 *__restrict__ p, float *co, float *s) {
#pragma unroll
    for (int e = 0; e + 1 < W; e += 2) {
        float4 t = *reinterpret_cast<const float4 *>(p + e);
        co[e] = t.x, s[e] = t.y, co[e + 1] = t.z, s[e + 1] = t.w;
    }
    if constexpr (W % 2 != 0) {
        float2 t = p[W - 1];
        co[W - 1] = t.x, s[W - 1] = t.y;
    }
}

/* q (rows, q_stride): heads 0..n_q-1; k (rows, k_stride): heads n_q..n_q+n_kv-1 of the launch
 * (q and k may be the two parts of fused qkv rows, hence no __restrict__); q_norm, k_norm
 * (head_dim) or NULL; positions (rows); cos_sin (table_positions, head_dim / 2) pairs, or none
 * (table_positions 0). W elements per access; `group` lanes per (row, head). */
template <class D, int W>
static __global__ void __launch_bounds__(ROPE_THREADS)
    qk_norm_rope_kernel(typename D::S *q, size_t q_stride, typename D::S *k, size_t k_stride, size_t rows, int n_q,
                        int n_kv, int head_dim, const typename D::S *__restrict__ q_norm,
                        const typename D::S *__restrict__ k_norm, const uint32_t *__restrict__ positions, float eps,
                        int group, const __grid_constant__ RopeTable table, const float2 *__restrict__ cos_sin,
                        uint32_t table_positions) {
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
    const uint32_t at = valid ? positions[row] : 0u;
    const float pos = (float)at;
    const bool tabled = at < table_positions; /* the whole (row, head) alike */
#pragma unroll
    for (int j = 0; j < J; j++) {
        int c = (lane + j * group) * W;
        if (!(valid && c < half)) continue;
        float wa[W], wb[W], co[W], s[W];
        if (tabled) load_cos_sin<W>(cos_sin + (size_t)at * half + c, co, s);
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
            if (!tabled) {
                sincosf(rope_angle(pos, inv_freq[c + e]), &s[e], &co[e]);
                s[e] *= table.factor, co[e] *= table.factor;
            }
            a[j][e] = lo * co[e] - hi * s[e];
            b[j][e] = hi * co[e] + lo * s[e];
        }
        store_chunk<D, W>(x + c, a[j]);
        store_chunk<D, W>(x + half + c, b[j]);
    }
}

template <class D>
static cudaError_t launch_qk_norm_rope(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows, int n_q,
                                       int n_kv, int head_dim, const void *q_norm, const void *k_norm,
                                       const uint32_t *positions, float eps, const RopeTable &table,
                                       const gpu_rope_table *cached, cudaStream_t stream) {
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
    const float2 *cos_sin = cached != nullptr ? (const float2 *)cached->cos_sin : nullptr;
    uint32_t table_positions = cached != nullptr ? cached->n_positions : 0;
    if (vec)
        qk_norm_rope_kernel<D, V><<<(unsigned)blocks, ROPE_THREADS, 0, stream>>>(
            (S *)q, q_stride, (S *)k, k_stride, rows, n_q, n_kv, head_dim, (const S *)q_norm, (const S *)k_norm,
            positions, eps, group, table, cos_sin, table_positions);
    else
        qk_norm_rope_kernel<D, 1><<<(unsigned)blocks, ROPE_THREADS, 0, stream>>>(
            (S *)q, q_stride, (S *)k, k_stride, rows, n_q, n_kv, head_dim, (const S *)q_norm, (const S *)k_norm,
            positions, eps, group, table, cos_sin, table_positions);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_qk_norm_rope_freqs(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows,
                                              size_t n_q_heads, size_t n_kv_heads, size_t head_dim, const void *q_norm,
                                              const void *k_norm, const uint32_t *positions,
                                              const gpu_rope_table *cached, const gpu_rope_freqs *freqs, double eps,
                                              rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || head_dim == 0 || head_dim % 2 != 0 || head_dim > 2 * ROPE_MAX_HALF ||
        n_q_heads + n_kv_heads > 65536 || q_stride < n_q_heads * head_dim || k_stride < n_kv_heads * head_dim ||
        rows > INT32_MAX)
        return cudaErrorInvalidValue;
    if (cached != nullptr && cached->n_positions != 0 &&
        (cached->cos_sin == nullptr || cached->head_dim != head_dim || cached->theta != freqs->theta ||
         (cached->inv_freq != nullptr && cached->inv_freq != freqs->inv_freq) || !aligned16(cached->cos_sin)))
        return cudaErrorInvalidValue; /* a table of another head_dim or RoPE */
    if (rows == 0 || n_q_heads + n_kv_heads == 0) return cudaSuccess;
    RopeTable table = table_of(freqs->inv_freq, head_dim, freqs->attention_factor);
    int nq = (int)n_q_heads, nkv = (int)n_kv_heads, hd = (int)head_dim;
    float e = (float)eps;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        return launch_qk_norm_rope<F32>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                        table, cached, stream);
    case RMLP_DTYPE_F16:
        return launch_qk_norm_rope<F16>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                        table, cached, stream);
    default:
        return launch_qk_norm_rope<BF16>(q, q_stride, k, k_stride, rows, nq, nkv, hd, q_norm, k_norm, positions, e,
                                         table, cached, stream);
    }
}

extern "C" cudaError_t gpu_qk_norm_rope(void *q, size_t q_stride, void *k, size_t k_stride, size_t rows,
                                        size_t n_q_heads, size_t n_kv_heads, size_t head_dim, const void *q_norm,
                                        const void *k_norm, const uint32_t *positions,
                                        const gpu_rope_table *cached, double theta, double eps, rmlp_dtype dtype,
                                        cudaStream_t stream) {
    float inv_freq[ROPE_MAX_HALF] = {0};
    if (head_dim <= 2 * ROPE_MAX_HALF) default_frequencies(theta, head_dim, inv_freq); /* else refused below */
    gpu_rope_freqs freqs = {inv_freq, 1.0f, theta};
    return gpu_qk_norm_rope_freqs(q, q_stride, k, k_stride, rows, n_q_heads, n_kv_heads, head_dim, q_norm, k_norm,
                                  positions, cached, &freqs, eps, dtype, stream);
}

/* cos_sin[p, i] = (cos, sin) of angle(p, inv_freq[i]), times the factor, for p < n_positions, i < half. */
static __global__ void __launch_bounds__(ROPE_THREADS)
    rope_table_kernel(float2 *__restrict__ cos_sin, size_t n_positions, int half,
                      const __grid_constant__ RopeTable table) {
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n_positions * (size_t)half) return;
    size_t p = id / (size_t)half;
    int i = (int)(id % (size_t)half);
    float s, co;
    sincosf(rope_angle((float)(uint32_t)p, table.inv_freq[i]), &s, &co);
    cos_sin[id] = make_float2(co * table.factor, s * table.factor);
}

extern "C" cudaError_t gpu_rope_table_fill_freqs(float *cos_sin, size_t n_positions, size_t head_dim,
                                                 const gpu_rope_freqs *freqs, cudaStream_t stream) {
    if (cos_sin == nullptr || head_dim == 0 || head_dim % 2 != 0 || head_dim > 2 * ROPE_MAX_HALF ||
        n_positions > UINT32_MAX || !aligned16(cos_sin))
        return cudaErrorInvalidValue;
    size_t n = n_positions * (head_dim / 2), blocks = (n + ROPE_THREADS - 1) / ROPE_THREADS;
    if (n == 0) return cudaSuccess;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    rope_table_kernel<<<(unsigned)blocks, ROPE_THREADS, 0, stream>>>(
        (float2 *)cos_sin, n_positions, (int)(head_dim / 2), table_of(freqs->inv_freq, head_dim, freqs->attention_factor));
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_rope_table_fill(float *cos_sin, size_t n_positions, size_t head_dim, double theta,
                                           cudaStream_t stream) {
    float inv_freq[ROPE_MAX_HALF] = {0};
    if (head_dim <= 2 * ROPE_MAX_HALF) default_frequencies(theta, head_dim, inv_freq); /* else refused below */
    gpu_rope_freqs freqs = {inv_freq, 1.0f, theta};
    return gpu_rope_table_fill_freqs(cos_sin, n_positions, head_dim, &freqs, stream);
}
