/*
 * attention.cu: the built-in causal attention with grouped KV heads, for standalone use and tests
 * (hosts that keep attention bring their own flash-attention), in both layouts: full space (each
 * sequence's rows attend over its own rows) and compact space (each sequence's owned compact rows
 * attend over its path, read through the plan's scatter: docs/design.md). Correctness first: a
 * tiled online-softmax kernel with fp32 accumulation, one block per (query tile, head) on a grid
 * over the batch's query tiles sized from its counts (attention_tiles.h, so a captured graph
 * replays over other lengths). A block holds ATT_BQ query rows in shared memory, four per warp,
 * and walks the keys the tile can see in tiles of 32, staged in shared memory in fp32 (compact
 * space: each key row loaded through the path's index list): lane j scores key j against the
 * warp's rows, the warp updates each row's running max and sum, then every lane accumulates its
 * slice of head_dim (dims lane, lane + 32, ...) of P V. Keys beyond a row, or before its sliding
 * window (model/model_ext.h: a row at position p sees the last `window` keys up to p), are masked
 * with -inf (a row that has seen no key yet keeps a max of -inf, weights 0, no NaN); scores are
 * soft-capped (softcap * tanh(s / softcap)) before the mask where the layer asks. The key tiles
 * start at the one holding the block's first visible key. Tiles are loaded element by element
 * (coalesced, no 16-byte vectors): a reference, not a fast path.
 */
#include <limits.h>
#include <math.h>

#include "attention_tiles.h"
#include "common.cuh"
#include "kernels.h"

#define ATT_WARPS 4
#define ATT_ROWS 4 /* query rows per warp: ATT_WARPS * ATT_ROWS = ATT_BQ rows per block */
static_assert(ATT_WARPS * ATT_ROWS == ATT_BQ, "a block holds one query tile");
#define ATT_BK 32                     /* keys per tile: one per lane */
#define ATT_MAX_HEAD_DIM 256

/* Shared memory: q tile (ATT_BQ, head_dim), k tile (ATT_BK, head_dim | 1: an odd row stride, so
 * the 32 lanes reading 32 key rows hit 32 banks), v tile (ATT_BK, head_dim); all fp32. */
static size_t attention_smem_bytes(int head_dim) {
    return sizeof(float) * ((size_t)ATT_BQ * head_dim + (size_t)ATT_BK * (head_dim | 1) + (size_t)ATT_BK * head_dim);
}

/* Where a launch reads and writes: q, out rows of (n_heads, head_dim) at q_stride / out_stride
 * elements; k, v rows of (n_kv_heads, head_dim) at kv_stride. Sequence s has the queries
 * qo_indptr[s] .. qo_indptr[s+1] (rows of q and out) and the keys kv_indptr[s] .. kv_indptr[s+1]:
 * rows of k and v themselves (kv_indices NULL: full space, where qo_indptr == kv_indptr ==
 * cu_seqlens) or the rows kv_indices[i] (compact space: kv_indices is the plan's scatter, a path
 * per sequence). Its q_s queries are the last of its L_s keys: query t sees keys 0 .. L_s - q_s + t. */
struct AttentionLayout {
    const uint32_t *qo_indptr, *kv_indptr, *kv_indices;
    uint32_t n_seqs;
    size_t q_stride, kv_stride, out_stride;
    /* Chains of a decode step (gpu_chain_attention): query t of group s is q row
     * q_index[qo_indptr[s] + t], every key of the group is visible to it, and instead of out the
     * kernel writes its partial state, (max, sum, unnormalised o) in fp32, at state row
     * (qo_indptr[s] + t) * n_heads + head (head_dim + 2 floats). nullptr / false otherwise. */
    const uint32_t *q_index;
    bool all_visible;
    float *state;
    /* The layer's scores and window (model/model_ext.h): softcap 0 none, window 0 none. A chain
     * with a window needs each chain's first key position in its queries' paths (chain_depth,
     * by group) and each query row's position (row_pos, by q row); NULL otherwise. */
    float scale, softcap;
    int window;
    const uint32_t *chain_depth, *row_pos;
};

/* The layout's scoring and window from a layer's attention. */
static void set_scoring(AttentionLayout &lay, const layer_attention &la) {
    lay.scale = la.scale, lay.softcap = la.softcap, lay.window = (int)la.window;
}

/* Grid (att_grid_tiles(qo_indptr[n_seqs] as a count, n_seqs), n_heads); T = ceil(head_dim / 32)
 * output dims per lane. */
template <class D, int T>
static __global__ void __launch_bounds__(ATT_WARPS * 32)
    attention_kernel(const typename D::S *__restrict__ q, const typename D::S *__restrict__ k,
                     const typename D::S *__restrict__ v, typename D::S *__restrict__ out,
                     const AttentionLayout lay, int n_heads, int n_kv_heads, int head_dim) {
    extern __shared__ float smem[];
    const int kstride = head_dim | 1;
    float *qs = smem;                   /* (ATT_BQ, head_dim) */
    float *ks = qs + ATT_BQ * head_dim; /* (ATT_BK, kstride) */
    float *vs = ks + ATT_BK * kstride;  /* (ATT_BK, head_dim) */

    const uint32_t seq = att_tile_seq(lay.qo_indptr, lay.n_seqs, blockIdx.x);
    const int t0 = (int)(blockIdx.x - att_first_tile(lay.qo_indptr[seq], seq)) * ATT_BQ, head = blockIdx.y;
    const size_t q_start = lay.qo_indptr[seq], kv_start = lay.kv_indptr[seq];
    const int n_q = (int)(lay.qo_indptr[seq + 1] - q_start);
    const int n_kv = (int)(lay.kv_indptr[seq + 1] - kv_start);
    /* keys before the first query; a chain's queries see every key (a position past them all) */
    const int before = lay.all_visible ? n_kv : n_kv - n_q;
    if (t0 >= n_q) return; /* the whole block: before any barrier */
    const int kv_head = head / (n_heads / n_kv_heads);
    const typename D::S *kh = k + (size_t)kv_head * head_dim, *vh = v + (size_t)kv_head * head_dim;
    const uint32_t *path = lay.kv_indices != nullptr ? lay.kv_indices + kv_start : nullptr;
    typename D::S *oh = out != nullptr ? out + q_start * lay.out_stride + (size_t)head * head_dim : nullptr;

    for (int i = threadIdx.x; i < ATT_BQ * head_dim; i += blockDim.x) {
        int r = i / head_dim, d = i % head_dim;
        size_t row = lay.q_index != nullptr && t0 + r < n_q ? lay.q_index[q_start + t0 + r] : q_start + t0 + r;
        qs[i] = t0 + r < n_q ? D::load(q[row * lay.q_stride + (size_t)head * head_dim + d]) : 0.0f;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = before + t0 + warp * ATT_ROWS; /* this warp's first query, as a key position */
    /* keys [0, kend) are visible to some row of the tile */
    const int kend = lay.all_visible ? n_kv : before + min(t0 + ATT_BQ, n_q);
    /* With a window: each of the warp's rows sees keys from lo[r] on (key indices of this group);
     * a chain's rows by their own path positions, from the chain's first key position. */
    int lo[ATT_ROWS];
#pragma unroll
    for (int r = 0; r < ATT_ROWS; r++) {
        int query = t0 + warp * ATT_ROWS + r, pos = row0 + r;
        if (lay.window != 0 && lay.all_visible && lay.row_pos != nullptr && query < n_q)
            pos = (int)lay.row_pos[lay.q_index[q_start + query]] - (int)lay.chain_depth[seq];
        lo[r] = lay.window != 0 ? pos - lay.window + 1 : INT_MIN;
    }
    /* the tile of the block's first visible key (its first row's window start; a chain: key 0) */
    const int kfirst = lay.window != 0 && !lay.all_visible ? max(0, before + t0 - lay.window + 1) : 0;

    float m[ATT_ROWS], l[ATT_ROWS], o[ATT_ROWS][T];
#pragma unroll
    for (int r = 0; r < ATT_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int t = 0; t < T; t++) o[r][t] = 0.0f;
    }

    for (int k0 = kfirst / ATT_BK * ATT_BK; k0 < kend; k0 += ATT_BK) {
        __syncthreads(); /* the q tile is written; the previous k/v tile is no longer read */
        for (int i = threadIdx.x; i < ATT_BK * head_dim; i += blockDim.x) {
            int j = i / head_dim, d = i % head_dim;
            bool in = k0 + j < kend; /* zeros elsewhere: p = 0 must not meet a NaN in v */
            size_t row = in ? (path != nullptr ? path[k0 + j] : kv_start + k0 + j) : 0;
            size_t at = row * lay.kv_stride + d;
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
            float s = p[r] * lay.scale;
            if (lay.softcap != 0.0f) s = lay.softcap * tanhf(s / lay.softcap);
            if (!((lay.all_visible || key <= row) && key < kend && key >= lo[r])) s = -INFINITY;
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
        const int query = t0 + warp * ATT_ROWS + r;
        if (query >= n_q) continue;
        if (lay.state != nullptr) { /* a chain's partial state: max, sum, o unnormalised */
            float *st = lay.state + ((q_start + query) * (size_t)n_heads + head) * (size_t)(head_dim + 2);
            if (lane == 0) st[0] = m[r], st[1] = l[r];
#pragma unroll
            for (int t = 0; t < T; t++) {
                int d = lane + 32 * t;
                if (d < head_dim) st[2 + d] = o[r][t];
            }
            continue;
        }
        const float inv = 1.0f / l[r];
#pragma unroll
        for (int t = 0; t < T; t++) {
            int d = lane + 32 * t;
            if (d < head_dim) oh[(size_t)query * lay.out_stride + d] = D::store(o[r][t] * inv);
        }
    }
}

template <class D, int T>
static cudaError_t launch_attention(const void *q, const void *k, const void *v, void *out, const AttentionLayout &lay,
                                    size_t n_q_rows, int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
    typedef typename D::S S;
    size_t smem = attention_smem_bytes(head_dim);
    if (smem > 48 * 1024) { /* above the default limit a kernel must opt in */
        cudaError_t error =
            cudaFuncSetAttribute(attention_kernel<D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (error != cudaSuccess) return error;
    }
    dim3 grid((unsigned)att_grid_tiles(n_q_rows, lay.n_seqs), (unsigned)n_heads);
    attention_kernel<D, T><<<grid, ATT_WARPS * 32, smem, stream>>>((const S *)q, (const S *)k, (const S *)v, (S *)out,
                                                                   lay, n_heads, n_kv_heads, head_dim);
    return cudaGetLastError();
}

template <class D>
static cudaError_t dispatch_head_dim(const void *q, const void *k, const void *v, void *out, const AttentionLayout &lay,
                                     size_t n_q_rows, int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
    if (head_dim <= 64) return launch_attention<D, 2>(q, k, v, out, lay, n_q_rows, n_heads, n_kv_heads, head_dim, stream);
    if (head_dim <= 128)
        return launch_attention<D, 4>(q, k, v, out, lay, n_q_rows, n_heads, n_kv_heads, head_dim, stream);
    return launch_attention<D, 8>(q, k, v, out, lay, n_q_rows, n_heads, n_kv_heads, head_dim, stream);
}

/* Checks what both layouts share, then launches over n_q_rows query rows (a count). */
static cudaError_t run_attention(const void *q, const void *k, const void *v, void *out, const AttentionLayout &lay,
                                 size_t n_q_rows, size_t n_heads, size_t n_kv_heads, size_t head_dim, rmlp_dtype dtype,
                                 cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || head_dim == 0 || head_dim > ATT_MAX_HEAD_DIM || n_kv_heads == 0 ||
        n_heads % n_kv_heads != 0 || n_heads > 65535 || n_q_rows > INT32_MAX || lay.n_seqs > INT32_MAX ||
        att_grid_tiles(n_q_rows, lay.n_seqs) > INT32_MAX || lay.q_stride < n_heads * head_dim ||
        lay.out_stride < n_heads * head_dim || lay.kv_stride < n_kv_heads * head_dim || lay.window < 0 ||
        (lay.all_visible && lay.window != 0 && (lay.chain_depth == nullptr || lay.row_pos == nullptr)))
        return cudaErrorInvalidValue;
    if (lay.n_seqs == 0 || n_q_rows == 0 || n_heads == 0) return cudaSuccess;
    int nh = (int)n_heads, nkv = (int)n_kv_heads, hd = (int)head_dim;
    switch (dtype) {
    case RMLP_DTYPE_F32: return dispatch_head_dim<F32>(q, k, v, out, lay, n_q_rows, nh, nkv, hd, stream);
    case RMLP_DTYPE_F16: return dispatch_head_dim<F16>(q, k, v, out, lay, n_q_rows, nh, nkv, hd, stream);
    default: return dispatch_head_dim<BF16>(q, k, v, out, lay, n_q_rows, nh, nkv, hd, stream);
    }
}

extern "C" cudaError_t gpu_attention(const void *q, const void *k, const void *v, void *out, const uint32_t *cu_seqlens,
                                     size_t n_seqs, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
                                     size_t head_dim, layer_attention la, rmlp_dtype dtype, cudaStream_t stream) {
    AttentionLayout lay = {cu_seqlens, cu_seqlens, nullptr, (uint32_t)n_seqs, n_heads * head_dim, n_kv_heads * head_dim,
                           n_heads * head_dim, nullptr, false, nullptr, 0.0f, 0.0f, 0, nullptr, nullptr};
    set_scoring(lay, la);
    if (n_seqs > INT32_MAX || la.window > INT32_MAX) return cudaErrorInvalidValue;
    return run_attention(q, k, v, out, lay, n_tokens, n_heads, n_kv_heads, head_dim, dtype, stream);
}

extern "C" cudaError_t gpu_compact_attention(const gpu_compact_rows *rows, const uint32_t *qo_indptr,
                                             const uint32_t *kv_indptr, const uint32_t *kv_indices, size_t n_seqs,
                                             size_t n_compact, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                                             layer_attention la, rmlp_dtype dtype, cudaStream_t stream) {
    if (n_seqs > INT32_MAX || rows->k_stride != rows->v_stride || la.window > INT32_MAX) return cudaErrorInvalidValue;
    AttentionLayout lay = {qo_indptr, kv_indptr, kv_indices, (uint32_t)n_seqs, rows->q_stride, rows->k_stride,
                           rows->out_stride, nullptr, false, nullptr, 0.0f, 0.0f, 0, nullptr, nullptr};
    set_scoring(lay, la);
    return run_attention(rows->q, rows->k, rows->v, rows->out, lay, n_compact, n_heads, n_kv_heads, head_dim, dtype,
                         stream);
}

extern "C" cudaError_t gpu_chain_attention(const gpu_compact_rows *rows, const gpu_chain_layout *chains,
                                           size_t n_heads, size_t n_kv_heads, size_t head_dim, layer_attention la,
                                           float *state, rmlp_dtype dtype, cudaStream_t stream) {
    if (chains->n_chains > INT32_MAX || rows->k_stride != rows->v_stride || state == nullptr ||
        la.window > INT32_MAX)
        return cudaErrorInvalidValue;
    AttentionLayout lay = {chains->member_indptr, chains->key_indptr, chains->keys, (uint32_t)chains->n_chains,
                           rows->q_stride, rows->k_stride, rows->out_stride, chains->members, true, state, 0.0f, 0.0f, 0,
                           chains->chain_depth, chains->row_pos};
    set_scoring(lay, la);
    return run_attention(rows->q, rows->k, rows->v, nullptr, lay, chains->n_members, n_heads, n_kv_heads, head_dim,
                         dtype, stream);
}

/* out row r, head h = the merge of the partial states of r's memberships: with M the largest max,
 * sum_i o_i e^(m_i - M) / sum_i l_i e^(m_i - M). One warp per (row, head); lane owns dims lane + 32 t. */
template <class D>
static __global__ void merge_states_kernel(const float *__restrict__ state, const uint32_t *__restrict__ row_indptr,
                                           const uint32_t *__restrict__ row_members, size_t n_rows, int n_heads,
                                           int head_dim, typename D::S *__restrict__ out, size_t out_stride) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int head = blockIdx.y, lane = threadIdx.x % 32;
    if (row >= n_rows) return;
    const size_t width = (size_t)head_dim + 2;
    float top = -INFINITY;
    for (uint32_t i = row_indptr[row]; i < row_indptr[row + 1]; i++)
        top = fmaxf(top, state[((size_t)row_members[i] * n_heads + head) * width]);
    if (top == -INFINITY) { /* no key at all (no membership, or only empty chains): zeros, not 0/0 */
        for (int d = lane; d < head_dim; d += 32) out[row * out_stride + (size_t)head * head_dim + d] = D::store(0.0f);
        return;
    }
    float sum = 0.0f;
    for (uint32_t i = row_indptr[row]; i < row_indptr[row + 1]; i++) {
        const float *st = state + ((size_t)row_members[i] * n_heads + head) * width;
        sum += st[1] * expf(st[0] - top);
    }
    for (int d = lane; d < head_dim; d += 32) {
        float acc = 0.0f;
        for (uint32_t i = row_indptr[row]; i < row_indptr[row + 1]; i++) {
            const float *st = state + ((size_t)row_members[i] * n_heads + head) * width;
            acc += st[2 + d] * expf(st[0] - top);
        }
        out[row * out_stride + (size_t)head * head_dim + d] = D::store(acc / sum);
    }
}

extern "C" cudaError_t gpu_merge_states(const float *state, const uint32_t *row_indptr, const uint32_t *row_members,
                                        size_t n_rows, size_t n_heads, size_t head_dim, void *out, size_t out_stride,
                                        rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || n_heads > 65535 || head_dim == 0 || out_stride < n_heads * head_dim ||
        n_rows > INT32_MAX)
        return cudaErrorInvalidValue;
    if (n_rows == 0 || n_heads == 0) return cudaSuccess;
    const int warps = 4;
    dim3 grid((unsigned)((n_rows + warps - 1) / warps), (unsigned)n_heads);
    int nh = (int)n_heads, hd = (int)head_dim;
    switch (dtype) {
    case RMLP_DTYPE_F32:
        merge_states_kernel<F32><<<grid, warps * 32, 0, stream>>>(state, row_indptr, row_members, n_rows, nh, hd,
                                                                   (F32::S *)out, out_stride);
        break;
    case RMLP_DTYPE_F16:
        merge_states_kernel<F16><<<grid, warps * 32, 0, stream>>>(state, row_indptr, row_members, n_rows, nh, hd,
                                                                   (F16::S *)out, out_stride);
        break;
    default:
        merge_states_kernel<BF16><<<grid, warps * 32, 0, stream>>>(state, row_indptr, row_members, n_rows, nh, hd,
                                                                    (BF16::S *)out, out_stride);
    }
    return cudaGetLastError();
}
