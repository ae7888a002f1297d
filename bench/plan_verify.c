/*
 * plan_verify.c: checks a RadixMLP plan against its batch without trusting the library, in
 * O(N log N), so it can validate the plans of large batches (bench_trie checks every plan it
 * times with it).
 *
 * Why the checks below prove the plan right (rows i, compact rows j, N' = n_compact):
 *  - scatter[fold_gather[j]] == j makes fold_gather injective and every compact row used;
 *  - compact ids/positions equal the batch's at every row i through scatter[i], and
 *    compact_parent[scatter[i]] is NO_PARENT at a sequence start, else scatter[i-1]; by
 *    induction on the offset in the sequence, rows sharing a compact row share their whole
 *    (token, position) path, so full[i] = compact[scatter[i]] is exact;
 *  - fold_gather[scatter[i]] <= i makes the row read the first occurrence of its path;
 *  - distinct (parent, token, position) triples over the compact rows make N' minimal: two
 *    rows with the same path reach the same compact row, by the same induction.
 * The layout of attention in compact space: sequence s owns qo_indptr[s] .. qo_indptr[s+1], a
 * partition of the compact rows in order; an owned row's first occurrence lies in s
 * (fold_gather), the owned rows are the last rows of s's path in order, and every earlier row of
 * the path reads a row owned before s. The path runs start at s's first row, increase, cover
 * consecutive compact rows each (scatter) and are maximal (the next run does not continue them).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan_verify.h"
#include "radix_mlp.h"

typedef struct triple {
    uint32_t parent, token, position, row;
} triple;

static int fail(char *why, size_t why_len, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(char *why, size_t why_len, const char *fmt, ...) {
    if (why != NULL && why_len > 0) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(why, why_len, fmt, args);
        va_end(args);
    }
    return 1;
}

static int compare_triples(const void *a, const void *b) {
    const triple *x = a, *y = b;
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    if (x->token != y->token) return x->token < y->token ? -1 : 1;
    if (x->position != y->position) return x->position < y->position ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* The batch itself must be well formed for the plan to mean anything. */
static int verify_batch(const uint32_t *ids, const uint32_t *pos, size_t n, const uint32_t *cu, size_t n_seqs,
                        char *why, size_t why_len) {
    if (n_seqs == 0 || cu == NULL) return fail(why, why_len, "batch: no cu_seqlens (n_seqs=%zu)", n_seqs);
    if (n > 0 && (ids == NULL || pos == NULL)) return fail(why, why_len, "batch: NULL ids or positions");
    if (cu[0] != 0) return fail(why, why_len, "batch: cu_seqlens[0]=%u", cu[0]);
    for (size_t s = 1; s <= n_seqs; s++)
        if (cu[s] < cu[s - 1]) return fail(why, why_len, "batch: cu_seqlens decreases at %zu", s);
    if (cu[n_seqs] != n) return fail(why, why_len, "batch: cu_seqlens[%zu]=%u != n_tokens=%zu", n_seqs, cu[n_seqs], n);
    return 0;
}

static int verify_counts(const rmlp_plan *p, size_t n, size_t n_seqs, uint32_t pad, char *why, size_t why_len) {
    if (p->n_tokens != n || p->n_seqs != n_seqs)
        return fail(why, why_len, "n_tokens=%u n_seqs=%u, batch has %zu and %zu", p->n_tokens, p->n_seqs, n, n_seqs);
    if (p->n_compact > n || p->n_distinct > n)
        return fail(why, why_len, "n_compact=%u or n_distinct=%u exceeds n_tokens=%zu", p->n_compact, p->n_distinct, n);
    if (p->use_radix && p->n_distinct != p->n_compact)
        return fail(why, why_len, "use_radix but n_distinct=%u != n_compact=%u", p->n_distinct, p->n_compact);
    if (!p->use_radix && p->n_compact != n)
        return fail(why, why_len, "identity plan but n_compact=%u != n_tokens=%zu", p->n_compact, n);
    uint64_t want_padded = p->n_compact;
    if (p->use_radix && pad > 1 && p->n_compact > 0) want_padded = (want_padded + pad - 1) / pad * pad;
    if (p->n_compact_padded != want_padded)
        return fail(why, why_len, "n_compact_padded=%u, want %llu (n_compact=%u, pad %u, use_radix %d)",
                    p->n_compact_padded, (unsigned long long)want_padded, p->n_compact, pad, (int)p->use_radix);
    double want_ratio = n > 0 ? (double)p->n_distinct / (double)n : 1.0;
    if (p->compact_ratio != want_ratio)
        return fail(why, why_len, "compact_ratio=%.17g, want n_distinct/n_tokens=%.17g", p->compact_ratio, want_ratio);
    if ((n > 0 && p->scatter == NULL) ||
        (p->n_compact_padded > 0 && (p->fold_gather == NULL || p->compact_input_ids == NULL ||
                                     p->compact_position_ids == NULL || p->compact_parent == NULL)))
        return fail(why, why_len, "NULL plan array with n_tokens=%zu n_compact_padded=%u", n, p->n_compact_padded);
    return 0;
}

/* The plan's copy of cu_seqlens is the batch's. */
static int verify_cu_copy(const uint32_t *cu, size_t n_seqs, const rmlp_plan *p, char *why, size_t why_len) {
    if (p->cu_seqlens == NULL) return fail(why, why_len, "plan cu_seqlens is NULL");
    for (size_t s = 0; s <= n_seqs; s++)
        if (p->cu_seqlens[s] != cu[s])
            return fail(why, why_len, "plan cu_seqlens[%zu]=%u, batch has %u", s, p->cu_seqlens[s], cu[s]);
    return 0;
}

/* Compact rows: gather strictly increasing and in range, copies of their row, padding rows blank. */
static int verify_compact(const uint32_t *ids, const uint32_t *pos, size_t n, const rmlp_plan *p, char *why,
                          size_t why_len) {
    for (size_t j = 0; j < p->n_compact; j++) {
        uint32_t g = p->fold_gather[j];
        if (g >= n) return fail(why, why_len, "fold_gather[%zu]=%u >= n_tokens=%zu", j, g, n);
        if (j > 0 && g <= p->fold_gather[j - 1])
            return fail(why, why_len, "fold_gather not strictly increasing: [%zu]=%u, [%zu]=%u", j - 1,
                        p->fold_gather[j - 1], j, g);
        if (p->scatter[g] != j)
            return fail(why, why_len, "scatter[fold_gather[%zu]=%u]=%u, want %zu", j, g, p->scatter[g], j);
        if (p->compact_input_ids[j] != ids[g] || p->compact_position_ids[j] != pos[g])
            return fail(why, why_len, "compact row %zu is (%u, %u), row %u is (%u, %u)", j, p->compact_input_ids[j],
                        p->compact_position_ids[j], g, ids[g], pos[g]);
        if (!p->use_radix && g != j) return fail(why, why_len, "identity plan but fold_gather[%zu]=%u", j, g);
    }
    for (size_t j = p->n_compact; j < p->n_compact_padded; j++)
        if (p->fold_gather[j] != 0 || p->compact_input_ids[j] != 0 || p->compact_position_ids[j] != 0 ||
            p->compact_parent[j] != RMLP_NO_PARENT)
            return fail(why, why_len, "padding row %zu is gather %u token %u position %u parent %u", j,
                        p->fold_gather[j], p->compact_input_ids[j], p->compact_position_ids[j], p->compact_parent[j]);
    return 0;
}

/* Batch rows: each reads a compact row with its token, position and predecessor, first occurrence. */
static int verify_rows(const uint32_t *ids, const uint32_t *pos, const uint32_t *cu, size_t n_seqs,
                       const rmlp_plan *p, char *why, size_t why_len) {
    for (size_t s = 0; s < n_seqs; s++) {
        for (uint32_t i = cu[s]; i < cu[s + 1]; i++) {
            uint32_t j = p->scatter[i];
            if (j >= p->n_compact) return fail(why, why_len, "scatter[%u]=%u >= n_compact=%u", i, j, p->n_compact);
            if (!p->use_radix && j != i) return fail(why, why_len, "identity plan but scatter[%u]=%u", i, j);
            if (p->fold_gather[j] > i)
                return fail(why, why_len, "row %u reads compact row %u gathered from later row %u", i, j,
                            p->fold_gather[j]);
            if (p->compact_input_ids[j] != ids[i] || p->compact_position_ids[j] != pos[i])
                return fail(why, why_len, "row %u is (%u, %u) but reads compact row %u = (%u, %u)", i, ids[i], pos[i],
                            j, p->compact_input_ids[j], p->compact_position_ids[j]);
            uint32_t want_parent = i == cu[s] ? RMLP_NO_PARENT : p->scatter[i - 1];
            if (p->compact_parent[j] != want_parent)
                return fail(why, why_len, "row %u (sequence %zu): compact_parent[%u]=%u, want %u", i, s, j,
                            p->compact_parent[j], want_parent);
        }
    }
    return 0;
}

/* Distinct (parent, token, position) triples: no two compact rows hold the same path. */
static int verify_minimal(const rmlp_plan *p, char *why, size_t why_len) {
    if (p->n_compact < 2) return 0;
    triple *t = malloc(p->n_compact * sizeof(triple));
    if (t == NULL) return fail(why, why_len, "plan_verify: out of memory for %u triples", p->n_compact);
    for (uint32_t j = 0; j < p->n_compact; j++)
        t[j] = (triple){p->compact_parent[j], p->compact_input_ids[j], p->compact_position_ids[j], j};
    qsort(t, p->n_compact, sizeof(triple), compare_triples);
    int status = 0;
    for (uint32_t k = 1; k < p->n_compact && status == 0; k++)
        if (t[k].parent == t[k - 1].parent && t[k].token == t[k - 1].token && t[k].position == t[k - 1].position)
            status = fail(why, why_len, "compact rows %u and %u hold the same path (parent %u, token %u, position %u)",
                          t[k - 1].row, t[k].row, t[k].parent, t[k].token, t[k].position);
    free(t);
    return status;
}

static int verify_layout(const uint32_t *cu, size_t n_seqs, const rmlp_plan *p, char *why, size_t why_len) {
    const uint32_t *qo = p->qo_indptr, *ri = p->run_indptr, *rs = p->run_start, *sc = p->scatter;
    if (qo == NULL || ri == NULL || (p->n_runs > 0 && rs == NULL))
        return fail(why, why_len, "layout: qo_indptr, run_indptr or run_start is NULL");
    if (qo[0] != 0 || qo[n_seqs] != p->n_compact || ri[0] != 0 || ri[n_seqs] != p->n_runs)
        return fail(why, why_len, "layout: qo_indptr %u..%u (n_compact %u), run_indptr %u..%u (n_runs %u)", qo[0],
                    qo[n_seqs], p->n_compact, ri[0], ri[n_seqs], p->n_runs);
    for (size_t s = 0; s < n_seqs; s++) {
        size_t len = cu[s + 1] - cu[s];
        if (qo[s + 1] < qo[s] || qo[s + 1] - qo[s] > len || ri[s + 1] < ri[s])
            return fail(why, why_len, "layout: sequence %zu (%zu rows): qo_indptr %u..%u, run_indptr %u..%u", s, len,
                        qo[s], qo[s + 1], ri[s], ri[s + 1]);
        size_t owned = qo[s + 1] - qo[s], before = len - owned;
        for (uint32_t j = qo[s]; j < qo[s + 1]; j++)
            if (p->fold_gather[j] < cu[s] || p->fold_gather[j] >= cu[s + 1])
                return fail(why, why_len, "layout: compact row %u owned by sequence %zu first occurs at row %u", j, s,
                            p->fold_gather[j]);
        for (size_t t = 0; t < len; t++) {
            uint32_t c = sc[cu[s] + t];
            if (t < before ? c >= qo[s] : c != qo[s] + (t - before))
                return fail(why, why_len, "layout: row %zu of sequence %zu reads compact row %u (owned %u..%u, the "
                            "last %zu rows)", t, s, c, qo[s], qo[s + 1], owned);
        }
        if (len == 0 ? ri[s + 1] != ri[s] : ri[s + 1] == ri[s] || rs[ri[s]] != cu[s])
            return fail(why, why_len, "layout: sequence %zu (%zu rows) has runs %u..%u starting at row %u", s, len,
                        ri[s], ri[s + 1], ri[s + 1] > ri[s] ? rs[ri[s]] : 0);
        for (uint32_t r = ri[s]; r < ri[s + 1]; r++) {
            uint32_t end = r + 1 < ri[s + 1] ? rs[r + 1] : cu[s + 1];
            if (end <= rs[r] || end > cu[s + 1]) return fail(why, why_len, "layout: run %u rows %u..%u", r, rs[r], end);
            for (uint32_t i = rs[r] + 1; i < end; i++)
                if (sc[i] != sc[i - 1] + 1)
                    return fail(why, why_len, "layout: run %u breaks at row %u (compact %u after %u)", r, i, sc[i],
                                sc[i - 1]);
            if (r > ri[s] && sc[rs[r]] == sc[rs[r] - 1] + 1)
                return fail(why, why_len, "layout: run %u continues run %u (not maximal)", r, r - 1);
        }
    }
    return 0;
}

int plan_verify(const uint32_t *input_ids, const uint32_t *position_ids, size_t n_tokens,
                const uint32_t *cu_seqlens, size_t n_seqs, uint32_t pad_multiple,
                const rmlp_plan *plan, char *why, size_t why_len) {
    if (why != NULL && why_len > 0) why[0] = '\0';
    if (plan == NULL) return fail(why, why_len, "plan is NULL");
    if (verify_batch(input_ids, position_ids, n_tokens, cu_seqlens, n_seqs, why, why_len) != 0) return 1;
    if (verify_counts(plan, n_tokens, n_seqs, pad_multiple, why, why_len) != 0) return 1;
    if (verify_cu_copy(cu_seqlens, n_seqs, plan, why, why_len) != 0) return 1;
    if (verify_compact(input_ids, position_ids, n_tokens, plan, why, why_len) != 0) return 1;
    if (verify_rows(input_ids, position_ids, cu_seqlens, n_seqs, plan, why, why_len) != 0) return 1;
    if (plan->use_radix && verify_minimal(plan, why, why_len) != 0) return 1;
    if (verify_layout(cu_seqlens, n_seqs, plan, why, why_len) != 0) return 1;
    return 0;
}
