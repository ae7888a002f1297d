/*
 * workload.h: deterministic synthetic batches for the radixmlp tool and the benchmarks:
 * sequences sharing a common prefix (the synthetic grid and the fan-out cases) and a
 * reranking batch shaped like MS MARCO (one template + query, many passages).
 */
#ifndef RMLP_TOOLS_WORKLOAD_H
#define RMLP_TOOLS_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct workload {
    uint32_t *input_ids;    /* (n_tokens) */
    uint32_t *position_ids; /* (n_tokens), 0..len-1 within each sequence */
    uint32_t *cu_seqlens;   /* (n_seqs + 1) */
    size_t n_tokens;
    size_t n_seqs;
} workload;

/* Token ids are drawn from [0, WORKLOAD_VOCAB), the size of Qwen3's vocabulary. */
#define WORKLOAD_VOCAB 151669u

/* n_seqs sequences of seq_len tokens; the first prefix_len tokens are the same in all of them,
 * and each sequence's token at prefix_len differs from every other's, so all diverge there.
 * Returns 0, or -1 when out of memory. */
int workload_shared_prefix(workload *w, size_t n_seqs, size_t seq_len, size_t prefix_len, uint64_t seed);

/* A reranking batch: every sequence is one template + query of 40-80 tokens followed by a
 * passage of 40-120 tokens. Returns 0, or -1 when out of memory. */
int workload_rerank(workload *w, size_t n_passages, uint64_t seed);

void workload_free(workload *w);

#endif
