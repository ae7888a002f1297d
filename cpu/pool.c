/*
 * pool.c: pooling (last, mean, first; optional L2 normalisation with torch's 1e-12 floor) and
 * the pairwise reranker score of pool.h.
 */
#include <math.h>
#include <string.h>

#include "pool.h"

#include "model/logit_softcap.h"

/* Batch row r of hidden. */
static const float *row_of(const float *hidden, size_t dim, const uint32_t *rows, size_t r) {
    return hidden + (rows != NULL ? (size_t)rows[r] : r) * dim;
}

void cpu_pool(const float *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens, size_t n_seqs,
              rmlp_pooling pooling, bool normalize, float *out) {
    for (size_t s = 0; s < n_seqs; s++) {
        size_t start = cu_seqlens[s], end = cu_seqlens[s + 1];
        float *dst = out + s * dim;
        if (pooling == RMLP_POOLING_MEAN) {
            memset(dst, 0, dim * sizeof(float));
            for (size_t r = start; r < end; r++) {
                const float *src = row_of(hidden, dim, rows, r);
                for (size_t i = 0; i < dim; i++) dst[i] += src[i];
            }
            for (size_t i = 0; i < dim; i++) dst[i] /= (float)(end - start);
        } else {
            size_t row = pooling == RMLP_POOLING_FIRST ? start : end - 1;
            memcpy(dst, row_of(hidden, dim, rows, row), dim * sizeof(float));
        }
        if (normalize) {
            double sum = 0.0;
            for (size_t i = 0; i < dim; i++) sum += (double)dst[i] * dst[i];
            double norm = sqrt(sum);
            float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
            for (size_t i = 0; i < dim; i++) dst[i] *= inv;
        }
    }
}

static float dot(const float *a, const float *b, size_t n) {
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

void cpu_score_pair(const float *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens, size_t n_seqs,
                    const float *lm_head, uint32_t token_a, uint32_t token_b, double softcap, float *logits,
                    float *prob_a) {
    for (size_t s = 0; s < n_seqs; s++) {
        const float *last = row_of(hidden, dim, rows, cu_seqlens[s + 1] - 1);
        logits[2 * s] = dot(lm_head + (size_t)token_a * dim, last, dim);
        logits[2 * s + 1] = dot(lm_head + (size_t)token_b * dim, last, dim);
        logit_softcap(logits + 2 * s, 2, softcap);
        prob_a[s] = 1.0f / (1.0f + expf(logits[2 * s + 1] - logits[2 * s]));
    }
}
