/*
 * attention.cu: the built-in causal varlen attention with grouped KV heads, for standalone use
 * and tests (hosts that keep attention bring their own flash-attention). Correctness first: a
 * tiled online-softmax kernel with fp32 accumulation, one block per (query tile, head,
 * sequence). A block holds ATT_BQ query rows in shared memory, four per warp, and walks the
 * keys the tile can see in tiles of 32, staged in shared memory in fp32: lane j scores key j
 * against the warp's rows, the warp updates each row's running max and sum, then every lane
 * accumulates its slice of head_dim (dims lane, lane + 32, ...) of P V. Keys beyond a row are
 * masked with -inf; the first key tile always holds key 0, so every row's max is finite after it.
 * Tiles are loaded element by element (coalesced, no 16-byte vectors): a fallback, not a fast path.
 */
#include <math.h>

#include "common.cuh"
#include "kernels.h"

#define ATT_WARPS 4
#define ATT_ROWS 4                    /* query rows per warp */
#define ATT_BQ (ATT_WARPS * ATT_ROWS) /* query rows per block */
#define ATT_BK 32                     /* keys per tile: one per lane */
#define ATT_MAX_HEAD_DIM 256

/* Shared memory: q tile (ATT_BQ, head_dim), k tile (ATT_BK, head_dim | 1: an odd row stride, so
 * the 32 lanes reading 32 key rows hit 32 banks), v tile (ATT_BK, head_dim); all fp32. */
static size_t attention_smem_bytes(int head_dim) {
    return sizeof(float) * ((size_t)ATT_BQ * head_dim + (size_t)ATT_BK * (head_dim | 1) + (size_t)ATT_BK * head_dim);
}

/* q, out (n_tokens, n_heads, head_dim); k, v (n_tokens, n_kv_heads, head_dim); cu_seqlens (n_seqs + 1).
 * Grid (query tiles, n_heads, n_seqs); T = ceil(head_dim / 32) output dims per lane. */
template <class D, int T>
static __global__ void __launch_bounds__(ATT_WARPS * 32)
    attention_kernel(const typename D::S *__restrict__ q, const typename D::S *__restrict__ k,
                     const typename D::S *__restrict__ v, typename D::S *__restrict__ out,
                     const uint32_t *__restrict__ cu_seqlens, int n_heads, int n_kv_heads, int head_dim, float scale) {
    extern __shared__ float smem[];
    const int kstride = head_dim | 1;
    float *qs = smem;                   /* (ATT_BQ, head_dim) */
    float *ks = qs + ATT_BQ * head_dim; /* (ATT_BK, kstride) */
    float *vs = ks + ATT_BK * kstride;  /* (ATT_BK, head_dim) */

    const int t0 = blockIdx.x * ATT_BQ, head = blockIdx.y, seq = blockIdx.z;
    const size_t start = cu_seqlens[seq];
    const int len = (int)(cu_seqlens[seq + 1] - cu_seqlens[seq]);
    if (t0 >= len) return; /* the whole block: before any barrier */
    const int kv_head = head / (n_heads / n_kv_heads);
    const size_t q_stride = (size_t)n_heads * head_dim, kv_stride = (size_t)n_kv_heads * head_dim;
    const typename D::S *qh = q + start * q_stride + (size_t)head * head_dim;
    const typename D::S *kh = k + start * kv_stride + (size_t)kv_head * head_dim;
    const typename D::S *vh = v + start * kv_stride + (size_t)kv_head * head_dim;
    typename D::S *oh = out + start * q_stride + (size_t)head * head_dim;

    for (int i = threadIdx.x; i < ATT_BQ * head_dim; i += blockDim.x) {
        int r = i / head_dim, d = i % head_dim;
        qs[i] = t0 + r < len ? D::load(qh[(size_t)(t0 + r) * q_stride + d]) : 0.0f;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = t0 + warp * ATT_ROWS;  /* this warp's first row, in the sequence */
    const int kend = min(t0 + ATT_BQ, len); /* keys [0, kend) are visible to some row of the tile */

    float m[ATT_ROWS], l[ATT_ROWS], o[ATT_ROWS][T];
#pragma unroll
    for (int r = 0; r < ATT_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int t = 0; t < T; t++) o[r][t] = 0.0f;
    }

    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        __syncthreads(); /* the q tile is written; the previous k/v tile is no longer read */
        for (int i = threadIdx.x; i < ATT_BK * head_dim; i += blockDim.x) {
            int j = i / head_dim, d = i % head_dim;
            bool in = k0 + j < kend; /* zeros elsewhere: p = 0 must not meet a NaN in v */
            size_t at = (size_t)(k0 + j) * kv_stride + d;
            ks[j * kstride + d] = in ? D::load(kh[at]) : 0.0f;
            vs[j * head_dim + d] = in ? D::load(vh[at]) : 0.0f;
        }
        __syncthreads();

        /* Scores: lane j against key k0 + j, for the warp's rows. */
        float p[ATT_ROWS];
#pragma unroll
        for (int r = 0; r < ATT_ROWS; r++) p[r] = 0.0f;
        const float *krow = ks + lane * kstride, *qrow = qs + warp * ATT_ROWS * head_dim;
        for (int d = 0; d < head_dim; d++) {
            float kd = krow[d];
#pragma unroll
            for (int r = 0; r < ATT_ROWS; r++) p[r] += qrow[r * head_dim + d] * kd;
        }
        /* Online softmax: p becomes exp(score - new max); o and l are rescaled to the new max. */
        const int key = k0 + lane;
#pragma unroll
        for (int r = 0; r < ATT_ROWS; r++) {
            const int row = row0 + r;
            float s = key <= row && key < kend ? p[r] * scale : -INFINITY;
            float m_new = fmaxf(m[r], warp_max(s));
            p[r] = s == -INFINITY ? 0.0f : expf(s - m_new);
            float corr = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            l[r] = l[r] * corr + warp_sum(p[r]);
            m[r] = m_new;
#pragma unroll
            for (int t = 0; t < T; t++) o[r][t] *= corr;
        }
        /* o += P V over the tile's keys; lane owns dims lane + 32 t. */
        for (int j = 0; j < ATT_BK; j++) {
            float vj[T];
#pragma unroll
            for (int t = 0; t < T; t++) {
                int d = lane + 32 * t;
                vj[t] = d < head_dim ? vs[j * head_dim + d] : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < ATT_ROWS; r++) {
                float pj = __shfl_sync(0xFFFFFFFFu, p[r], j);
#pragma unroll
                for (int t = 0; t < T; t++) o[r][t] += pj * vj[t];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ATT_ROWS; r++) {
        const int row = row0 + r;
        if (row >= len) continue;
        const float inv = 1.0f / l[r];
#pragma unroll
        for (int t = 0; t < T; t++) {
            int d = lane + 32 * t;
            if (d < head_dim) oh[(size_t)row * q_stride + d] = D::store(o[r][t] * inv);
        }
    }
}

template <class D, int T>
static cudaError_t launch_attention(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                                    size_t n_seqs, size_t max_seqlen, int n_heads, int n_kv_heads, int head_dim,
                                    float scale, cudaStream_t stream) {
    typedef typename D::S S;
    size_t smem = attention_smem_bytes(head_dim);
    if (smem > 48 * 1024) { /* above the default limit a kernel must opt in */
        cudaError_t error =
            cudaFuncSetAttribute(attention_kernel<D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (error != cudaSuccess) return error;
    }
    dim3 grid((unsigned)((max_seqlen + ATT_BQ - 1) / ATT_BQ), (unsigned)n_heads, (unsigned)n_seqs);
    attention_kernel<D, T><<<grid, ATT_WARPS * 32, smem, stream>>>((const S *)q, (const S *)k, (const S *)v, (S *)out,
                                                                   cu_seqlens, n_heads, n_kv_heads, head_dim, scale);
    return cudaGetLastError();
}

template <class D>
static cudaError_t dispatch_head_dim(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                                     size_t n_seqs, size_t max_seqlen, int n_heads, int n_kv_heads, int head_dim,
                                     float scale, cudaStream_t stream) {
    if (head_dim <= 64)
        return launch_attention<D, 2>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, n_heads, n_kv_heads, head_dim,
                                      scale, stream);
    if (head_dim <= 128)
        return launch_attention<D, 4>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, n_heads, n_kv_heads, head_dim,
                                      scale, stream);
    return launch_attention<D, 8>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, n_heads, n_kv_heads, head_dim, scale,
                                  stream);
}

extern "C" cudaError_t gpu_attention(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                                     size_t n_seqs, size_t max_seqlen, size_t n_tokens, size_t n_heads,
                                     size_t n_kv_heads, size_t head_dim, float scale, rmlp_dtype dtype,
                                     cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || head_dim == 0 || head_dim > ATT_MAX_HEAD_DIM || n_kv_heads == 0 ||
        n_heads % n_kv_heads != 0 || n_heads > 65535 || n_seqs > 65535 || max_seqlen > INT32_MAX ||
        n_tokens > INT32_MAX)
        return cudaErrorInvalidValue;
    if (n_seqs == 0 || max_seqlen == 0 || n_tokens == 0 || n_heads == 0) return cudaSuccess;
    int nh = (int)n_heads, nkv = (int)n_kv_heads, hd = (int)head_dim;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        return dispatch_head_dim<F32>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, nh, nkv, hd, scale, stream);
    case RMLP_DTYPE_F16:
        return dispatch_head_dim<F16>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, nh, nkv, hd, scale, stream);
    default: return dispatch_head_dim<BF16>(q, k, v, out, cu_seqlens, n_seqs, max_seqlen, nh, nkv, hd, scale, stream);
    }
}
