/*
 * attention.c: the reference causal varlen attention with grouped KV heads, on the CPU, in full
 * space (every batch row) and in compact space (owned compact rows over their paths): what the
 * tests check the forward's flash-style kernel (attention_flash.h) and the CUDA kernels against.
 * It was the forward's kernel until the flash-style one beat it (1.8x on long sequences).
 * Per sequence and query head, blocks of ATTN_TILE query rows: S = Q K^T * scale over the keys
 * up to the block's last row (sgemm), the layer's soft-cap, the causal mask (and the sliding window's,
 * model/model_ext.h), max-subtracted softmax, O = P V (sgemm).
 * Scratch is one block of scores (and in compact space a path's K and V rows of one head), so
 * memory stays linear in the sequence length.
 *
 * Compact space (docs/design.md, "Attention in compact space"): a sequence's keys are its
 * path, the compact rows kv_indices[kv_indptr[s] .. kv_indptr[s+1]) (the plan's scatter over
 * cu_seqlens: a paged KV layout with page size 1); its queries are only the compact rows it owns,
 * qo_indptr[s] .. qo_indptr[s+1], the last q_s rows of its path. Owned query t sits at path
 * position L - q + t and sees path positions 0 .. L - q + t (causal, aligned bottom-right). The
 * products are the full-space ones over the owned queries only: a path that is one run of
 * consecutive compact rows (a sequence that shares nothing, or the first of a prefix) is read in
 * place; any other path's K and V rows are first copied into scratch, once per KV head, so each
 * query tile still takes one sgemm for its scores and one for P V, whatever the number of runs (a
 * sgemm per run was measured slower on short runs, the reranking case: many small calls). The copy
 * is the full-space scatter's, restricted to that sequence's keys.
 */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "cpu_ops.h"

#define ATTN_TILE 64

size_t cpu_attention_scratch_floats(size_t max_seq_len, size_t head_dim) {
    return (size_t)(ATTN_TILE + 2 * head_dim) * (max_seq_len ? max_seq_len : 1);
}

/* The first key a query at position pos sees under la's window (0 without one). */
static size_t first_key(const layer_attention *la, size_t pos) {
    return la->window != 0 && pos + 1 > la->window ? pos + 1 - la->window : 0;
}

/* Row r of scores (rows, cols), scaled already, sees keys first_key .. first_row + r: soft-capped
 * (la->softcap), then softmax over those keys, the others 0. */
static void softmax_causal(float *scores, size_t rows, size_t cols, size_t first_row, const layer_attention *la) {
    for (size_t r = 0; r < rows; r++) {
        float *s = scores + r * cols;
        size_t visible = first_row + r + 1, lo = first_key(la, first_row + r); /* keys lo..first_row+r */
        if (la->softcap != 0.0f)
            for (size_t c = lo; c < visible; c++) s[c] = tanhf(s[c] / la->softcap) * la->softcap;
        float max = s[lo];
        for (size_t c = lo + 1; c < visible; c++) max = s[c] > max ? s[c] : max;
        float sum = 0.0f;
        for (size_t c = lo; c < visible; c++) {
            s[c] = expf(s[c] - max);
            sum += s[c];
        }
        float inv = 1.0f / sum;
        for (size_t c = 0; c < lo; c++) s[c] = 0.0f;
        for (size_t c = lo; c < visible; c++) s[c] *= inv;
        for (size_t c = visible; c < cols; c++) s[c] = 0.0f;
    }
}

void cpu_attention(const float *q, const float *k, const float *v, const uint32_t *cu_seqlens, size_t n_seqs,
                   size_t n_heads, size_t n_kv_heads, size_t head_dim, const layer_attention *la, float *scratch,
                   float *out) {
    float scale = la->scale;
    size_t q_stride = n_heads * head_dim, kv_stride = n_kv_heads * head_dim, group = n_heads / n_kv_heads;
    for (size_t s = 0; s < n_seqs; s++) {
        size_t start = cu_seqlens[s], len = cu_seqlens[s + 1] - start;
        for (size_t h = 0; h < n_heads; h++) {
            const float *qh = q + start * q_stride + h * head_dim;
            const float *kh = k + start * kv_stride + (h / group) * head_dim;
            const float *vh = v + start * kv_stride + (h / group) * head_dim;
            float *oh = out + start * q_stride + h * head_dim;
            for (size_t t0 = 0; t0 < len; t0 += ATTN_TILE) {
                size_t rows = len - t0 < ATTN_TILE ? len - t0 : ATTN_TILE;
                size_t keys = t0 + rows;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)keys, (int)head_dim, scale,
                            qh + t0 * q_stride, (int)q_stride, kh, (int)kv_stride, 0.0f, scratch, (int)keys);
                softmax_causal(scratch, rows, keys, t0, la);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)head_dim, (int)keys, 1.0f,
                            scratch, (int)keys, vh, (int)kv_stride, 0.0f, oh + t0 * q_stride, (int)q_stride);
            }
        }
    }
}

/* Whether the path's rows are consecutive compact rows. */
static int one_run(const uint32_t *path, size_t len) {
    for (size_t p = 1; p < len; p++)
        if (path[p] != path[0] + p) return 0;
    return 1;
}

void cpu_compact_attention(const cpu_attention_rows *rows, const uint32_t *qo_indptr, const uint32_t *kv_indptr,
                           const uint32_t *kv_indices, size_t n_seqs, size_t n_heads, size_t n_kv_heads,
                           size_t head_dim, const layer_attention *la, float *scratch) {
    float scale = la->scale;
    size_t group = n_heads / n_kv_heads, longest = 0;
    for (size_t s = 0; s < n_seqs; s++)
        if (kv_indptr[s + 1] - kv_indptr[s] > longest) longest = kv_indptr[s + 1] - kv_indptr[s];
    float *scores = scratch, *kbuf = scratch + (size_t)ATTN_TILE * longest, *vbuf = kbuf + longest * head_dim;
    int qs = (int)rows->q_stride, os = (int)rows->out_stride;
    size_t khs = rows->kv_head_stride ? rows->kv_head_stride : head_dim;
    for (size_t s = 0; s < n_seqs; s++) {
        size_t len = kv_indptr[s + 1] - kv_indptr[s], q0 = qo_indptr[s], owned = qo_indptr[s + 1] - q0;
        if (owned == 0) continue;
        const uint32_t *path = kv_indices + kv_indptr[s];
        size_t before = len - owned; /* path positions before the first owned query */
        int in_place = one_run(path, len);
        for (size_t g = 0; g < n_kv_heads; g++) {
            const float *kh = rows->k + g * khs, *vh = rows->v + g * khs; /* this head's K and V rows */
            const float *kg = kh + (size_t)path[0] * rows->k_stride, *vg = vh + (size_t)path[0] * rows->v_stride;
            int ks = (int)rows->k_stride, vs = (int)rows->v_stride;
            if (!in_place) { /* the path's K and V rows of this head, dense */
                for (size_t p = 0; p < len; p++) {
                    memcpy(kbuf + p * head_dim, kh + (size_t)path[p] * rows->k_stride, head_dim * sizeof(float));
                    memcpy(vbuf + p * head_dim, vh + (size_t)path[p] * rows->v_stride, head_dim * sizeof(float));
                }
                kg = kbuf, vg = vbuf, ks = vs = (int)head_dim;
            }
            for (size_t h = g * group; h < (g + 1) * group; h++) {
                const float *qh = rows->q + q0 * rows->q_stride + h * head_dim;
                float *oh = rows->out + q0 * rows->out_stride + h * head_dim;
                for (size_t t0 = 0; t0 < owned; t0 += ATTN_TILE) {
                    size_t n = owned - t0 < ATTN_TILE ? owned - t0 : ATTN_TILE;
                    size_t keys = before + t0 + n; /* the tile's last query sees keys 0 .. keys-1 */
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)keys, (int)head_dim, scale,
                                qh + t0 * rows->q_stride, qs, kg, ks, 0.0f, scores, (int)keys);
                    softmax_causal(scores, n, keys, before + t0, la);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)head_dim, (int)keys, 1.0f,
                                scores, (int)keys, vg, vs, 0.0f, oh + t0 * rows->out_stride, os);
                }
            }
        }
    }
}
