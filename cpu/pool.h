/*
 * pool.h: what embedding and reranking servers do with the last hidden states: pool each
 * sequence to one vector, or score it with two LM-head rows (yes/no rerankers).
 */
#ifndef RMLP_CPU_POOL_H
#define RMLP_CPU_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "radix_mlp.h"

/* out (n_seqs, dim) from hidden (n_tokens, dim); sequences are non-empty. */
void cpu_pool(const float *hidden, size_t dim, const uint32_t *cu_seqlens, size_t n_seqs, rmlp_pooling pooling,
              bool normalize, float *out);

/* logits (n_seqs, 2) = lm_head rows a and b . each sequence's last row; prob_a (n_seqs) = softmax. */
void cpu_score_pair(const float *hidden, size_t dim, const uint32_t *cu_seqlens, size_t n_seqs, const float *lm_head,
                    uint32_t token_a, uint32_t token_b, float *logits, float *prob_a);

#endif
