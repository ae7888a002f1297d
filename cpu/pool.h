/*
 * pool.h: what embedding and reranking servers do with the last hidden states: pool each
 * sequence to one vector, or score it with two LM-head rows (yes/no rerankers).
 */
#ifndef RMLP_CPU_POOL_H
#define RMLP_CPU_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp/types.h"

/* out (n_seqs, dim) from the batch rows of hidden; sequences are non-empty. Batch row i is
 * hidden's row rows[i] (compact hidden states read through the plan's scatter), or row i when
 * rows is NULL (hidden (n_tokens, dim)). */
void cpu_pool(const float *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens, size_t n_seqs,
              rmlp_pooling pooling, bool normalize, float *out);

/* logits (n_seqs, 2) = lm_head rows a and b . each sequence's last batch row (rows as cpu_pool),
 * soft-capped at softcap (0: not; model/logit_softcap.h); prob_a (n_seqs) = softmax. */
void cpu_score_pair(const float *hidden, size_t dim, const uint32_t *rows, const uint32_t *cu_seqlens, size_t n_seqs,
                    const float *lm_head, uint32_t token_a, uint32_t token_b, double softcap, float *logits,
                    float *prob_a);

#endif
