/*
 * attention.c: the built-in causal varlen attention with grouped KV heads, on the CPU.
 * Per sequence and query head, blocks of ATTN_TILE query rows: S = Q K^T * scale over the keys
 * up to the block's last row (sgemm), causal mask, max-subtracted softmax, O = P V (sgemm).
 * Scratch is one block of scores, so memory stays linear in the sequence length.
 */
#include <math.h>

#include <cblas.h>

#include "cpu_ops.h"

#define ATTN_TILE 64

size_t cpu_attention_scratch_floats(size_t max_seq_len) { return (size_t)ATTN_TILE * (max_seq_len ? max_seq_len : 1); }

static void softmax_causal(float *scores, size_t rows, size_t cols, size_t first_row) {
    for (size_t r = 0; r < rows; r++) {
        float *s = scores + r * cols;
        size_t visible = first_row + r + 1; /* keys 0..first_row+r */
        float max = s[0];
        for (size_t c = 1; c < visible; c++) max = s[c] > max ? s[c] : max;
        float sum = 0.0f;
        for (size_t c = 0; c < visible; c++) {
            s[c] = expf(s[c] - max);
            sum += s[c];
        }
        float inv = 1.0f / sum;
        for (size_t c = 0; c < visible; c++) s[c] *= inv;
        for (size_t c = visible; c < cols; c++) s[c] = 0.0f;
    }
}

void cpu_attention(const float *q, const float *k, const float *v, const uint32_t *cu_seqlens, size_t n_seqs,
                   size_t n_heads, size_t n_kv_heads, size_t head_dim, float scale, float *scratch, float *out) {
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
                softmax_causal(scratch, rows, keys, t0);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)head_dim, (int)keys, 1.0f,
                            scratch, (int)keys, vh, (int)kv_stride, 0.0f, oh + t0 * q_stride, (int)q_stride);
            }
        }
    }
}
