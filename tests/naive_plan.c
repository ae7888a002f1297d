/*
 * naive_plan.c: the reference maps straight from the definition. A row's path is the
 * (token, position) pairs of its sequence from the sequence start up to the row; first(i) is
 * the smallest row k whose path is identical to row i's (same offset in its sequence, same
 * pairs); the compact rows are the rows with first(i) == i, in increasing order.
 */
#include <stdlib.h>
#include <string.h>

#include "naive_plan.h"
#include "radix_mlp.h"

/* Do rows a and b (each `len` rows after its sequence start) have the same path? */
static int same_path(const uint32_t *ids, const uint32_t *pos, size_t a, size_t b, size_t len) {
    for (size_t k = 0; k <= len; k++)
        if (ids[a - k] != ids[b - k] || pos[a - k] != pos[b - k]) return 0;
    return 1;
}

void naive_plan_free(naive_plan *plan) {
    free(plan->fold_gather);
    free(plan->scatter);
    free(plan->compact_ids);
    free(plan->compact_pos);
    free(plan->compact_parent);
    memset(plan, 0, sizeof *plan);
}

int naive_plan_build(const uint32_t *input_ids, const uint32_t *position_ids, size_t n_tokens,
                     const uint32_t *cu_seqlens, size_t n_seqs, naive_plan *out) {
    size_t bytes = (n_tokens > 0 ? n_tokens : 1) * sizeof(uint32_t);
    memset(out, 0, sizeof *out);
    out->n_tokens = n_tokens;
    size_t *offset = malloc((n_tokens > 0 ? n_tokens : 1) * sizeof(size_t)); /* row - its sequence start */
    out->fold_gather = malloc(bytes);
    out->scatter = malloc(bytes);
    out->compact_ids = malloc(bytes);
    out->compact_pos = malloc(bytes);
    out->compact_parent = malloc(bytes);
    if (offset == NULL || out->fold_gather == NULL || out->scatter == NULL ||
        out->compact_ids == NULL || out->compact_pos == NULL || out->compact_parent == NULL) {
        free(offset);
        naive_plan_free(out);
        return -1;
    }
    for (size_t s = 0; s < n_seqs; s++)
        for (size_t i = cu_seqlens[s]; i < cu_seqlens[s + 1]; i++) offset[i] = i - cu_seqlens[s];

    for (size_t i = 0; i < n_tokens; i++) {
        size_t k = 0;
        while (!(offset[k] == offset[i] && same_path(input_ids, position_ids, k, i, offset[i]))) k++;
        if (k == i) { /* row i is the first occurrence of its path (k == i at the latest) */
            size_t j = out->n_compact++;
            out->fold_gather[j] = (uint32_t)i;
            out->compact_ids[j] = input_ids[i];
            out->compact_pos[j] = position_ids[i];
            out->compact_parent[j] = offset[i] == 0 ? RMLP_NO_PARENT : out->scatter[i - 1];
            out->scatter[i] = (uint32_t)j;
        } else {
            out->scatter[i] = out->scatter[k];
        }
    }
    free(offset);
    return 0;
}
