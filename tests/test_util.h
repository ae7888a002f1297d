/*
 * test_util.h: what every test executable shares. CHECK macros that print one line per failed
 * check (with the input that failed) and count passes and failures; the closing summary line
 * "N passed, N failed"; a deterministic PRNG (splitmix64); random batches; deep copies of plans
 * and an exact comparison of two plans.
 *
 * Included by exactly one translation unit per test executable (the counters are per file).
 * The counters are not thread-safe: worker threads count their own failures and the main
 * thread CHECKs the totals.
 */
#ifndef RMLP_TEST_UTIL_H
#define RMLP_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radix_mlp.h"

#if defined(__GNUC__) || defined(__clang__)
#define TU_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define TU_PRINTF(fmt_index, first_arg)
#endif

static int tu_passed, tu_failed;

/* Counts one check; on failure prints "FAIL file:line: expr: <context>". Returns ok. */
static inline int tu_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
    TU_PRINTF(5, 6);
static inline int tu_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...) {
    if (ok) {
        tu_passed++;
        return 1;
    }
    tu_failed++;
    printf("FAIL %s:%d: %s: ", file, line, expr);
    va_list args;
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    printf("\n");
    fflush(stdout);
    return 0;
}

/* CHECK(cond, "printf context naming the input", ...): the context is printed only on failure. */
#define CHECK(cond, ...) tu_check(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* CHECK_EQ(got, want, context...): unsigned integer equality, printing both values. */
#define CHECK_EQ(got, want, ...)                                                                        \
    do {                                                                                                \
        unsigned long long tu_got_ = (unsigned long long)(got), tu_want_ = (unsigned long long)(want); \
        if (tu_check(tu_got_ == tu_want_, __FILE__, __LINE__, #got " == " #want, __VA_ARGS__) == 0)    \
            printf("    got %llu, want %llu\n", tu_got_, tu_want_);                                      \
    } while (0)

/* Prints the summary line and returns the process exit code. */
static inline int tu_summary(void) {
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    return tu_failed == 0 ? 0 : 1;
}

#include "bad_input_row.h"

/* ---- deterministic randomness ------------------------------------------------------------ */

static inline uint64_t tu_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline uint32_t tu_rand_range(uint64_t *state, uint32_t lo, uint32_t hi) {
    return lo + (uint32_t)(tu_rand(state) % ((uint64_t)hi - lo + 1));
}

/* Max |a - b| over n floats, and in *max_ref (when non-NULL) max |b|; NaN anywhere gives +inf. */
static inline double tu_max_abs_diff(const float *a, const float *b, size_t n, double *max_ref) {
    double worst = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d != d) return INFINITY;
        worst = d > worst ? d : worst;
        ref = fabs(b[i]) > ref ? fabs(b[i]) : ref;
    }
    if (max_ref) *max_ref = ref;
    return worst;
}

/* ---- batches ------------------------------------------------------------------------------- */

typedef struct tu_batch {
    uint32_t *ids; /* (n_tokens) */
    uint32_t *pos; /* (n_tokens) */
    uint32_t *cu;  /* (n_seqs + 1) */
    size_t n_tokens, n_seqs;
} tu_batch;

/* Shape of a random batch: sequence lengths in [0, max_len], tokens in [1, vocab] (a small vocab
 * forces sharing), positions 0..len-1 or (random_pos) random in [0, 3], and with prefix_len > 0
 * a prefix common to every sequence (cut to the sequence's length). */
typedef struct tu_batch_shape {
    uint32_t n_seqs, max_len, vocab, prefix_len;
    int random_pos;
} tu_batch_shape;

static inline void tu_batch_free(tu_batch *b) {
    free(b->ids);
    free(b->pos);
    free(b->cu);
    memset(b, 0, sizeof *b);
}

/* Aborts on allocation failure: a test that cannot allocate its input has nothing to report. */
static inline void *tu_xmalloc(size_t bytes) {
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        printf("FAIL: out of memory allocating %zu bytes\n", bytes);
        exit(2);
    }
    return p;
}

/* The bytes of the file at path, *len of them (tu_xmalloc'ed; the caller frees), or NULL with *len
 * 0 when it cannot be opened or read or is empty. */
static inline unsigned char *tu_read_file(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    long end = f != NULL && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    unsigned char *bytes = end > 0 ? tu_xmalloc((size_t)end) : NULL;
    if (bytes != NULL) rewind(f);
    if (bytes != NULL && fread(bytes, 1, (size_t)end, f) == (size_t)end) *len = (size_t)end;
    if (f != NULL) fclose(f);
    if (*len == 0) free(bytes);
    return *len ? bytes : NULL;
}

static inline tu_batch tu_random_batch(uint64_t *rng, const tu_batch_shape *shape) {
    tu_batch b = {0};
    b.n_seqs = shape->n_seqs;
    b.cu = tu_xmalloc((b.n_seqs + 1) * sizeof(uint32_t));
    b.cu[0] = 0;
    for (size_t s = 0; s < b.n_seqs; s++) b.cu[s + 1] = b.cu[s] + tu_rand_range(rng, 0, shape->max_len);
    b.n_tokens = b.cu[b.n_seqs];
    b.ids = tu_xmalloc(b.n_tokens * sizeof(uint32_t));
    b.pos = tu_xmalloc(b.n_tokens * sizeof(uint32_t));
    uint32_t *prefix_ids = tu_xmalloc((shape->prefix_len + 1) * sizeof(uint32_t));
    uint32_t *prefix_pos = tu_xmalloc((shape->prefix_len + 1) * sizeof(uint32_t));
    for (uint32_t k = 0; k < shape->prefix_len; k++) {
        prefix_ids[k] = tu_rand_range(rng, 1, shape->vocab);
        prefix_pos[k] = shape->random_pos ? tu_rand_range(rng, 0, 3) : k;
    }
    for (size_t s = 0; s < b.n_seqs; s++) {
        for (uint32_t i = b.cu[s]; i < b.cu[s + 1]; i++) {
            uint32_t k = i - b.cu[s];
            int in_prefix = k < shape->prefix_len;
            b.ids[i] = in_prefix ? prefix_ids[k] : tu_rand_range(rng, 1, shape->vocab);
            b.pos[i] = in_prefix ? prefix_pos[k] : shape->random_pos ? tu_rand_range(rng, 0, 3) : k;
        }
    }
    free(prefix_ids);
    free(prefix_pos);
    return b;
}

/* ---- plans --------------------------------------------------------------------------------- */

/* A plan whose arrays the test owns (a planner's arrays change on its next build), so it names no
 * planner. */
/* A batch of a prefix-cache trace (test_prefix_cache, test_gpu_cache): sequences from a few
 * "documents" of a small vocabulary (ids 5..999), so later batches repeat, extend and diverge
 * from earlier paths. */
static inline tu_batch tu_trace_batch(uint64_t *rng, uint32_t max_seqs, uint32_t max_len) {
    static const uint32_t docs[4][24] = {{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28},
                                        {5, 6, 7, 8, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49},
                                        {50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73},
                                        {5, 6, 7, 8, 9, 10, 11, 12, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95}};
    tu_batch b = {0};
    b.n_seqs = tu_rand_range(rng, 1, max_seqs);
    b.cu = tu_xmalloc((b.n_seqs + 1) * sizeof(uint32_t));
    b.ids = tu_xmalloc(b.n_seqs * max_len * sizeof(uint32_t));
    b.pos = tu_xmalloc(b.n_seqs * max_len * sizeof(uint32_t));
    b.cu[0] = 0;
    for (size_t s = 0; s < b.n_seqs; s++) {
        uint32_t len = tu_rand_range(rng, 1, max_len), doc = tu_rand_range(rng, 0, 3);
        uint32_t own = tu_rand_range(rng, 0, 2) == 0 ? tu_rand_range(rng, 0, len) : len; /* diverge here */
        for (uint32_t t = 0; t < len; t++) {
            uint32_t row = b.cu[s] + t;
            b.ids[row] = t < own && t < 24 ? docs[doc][t] : tu_rand_range(rng, 100, 999);
            b.pos[row] = t;
        }
        b.cu[s + 1] = b.cu[s] + len;
    }
    b.n_tokens = b.cu[b.n_seqs];
    return b;
}

static inline rmlp_plan tu_plan_copy(const rmlp_plan *p) {
    rmlp_plan c = *p;
    c.planner = NULL;
    c.generation = 0;
    size_t nt = p->n_tokens * sizeof(uint32_t), nc = p->n_compact_padded * sizeof(uint32_t);
    uint32_t *arrays[5] = {tu_xmalloc(nc), tu_xmalloc(nt), tu_xmalloc(nc), tu_xmalloc(nc), tu_xmalloc(nc)};
    if (nc > 0) memcpy(arrays[0], p->fold_gather, nc);
    if (nt > 0) memcpy(arrays[1], p->scatter, nt);
    if (nc > 0) memcpy(arrays[2], p->compact_input_ids, nc);
    if (nc > 0) memcpy(arrays[3], p->compact_position_ids, nc);
    if (nc > 0) memcpy(arrays[4], p->compact_parent, nc);
    c.fold_gather = arrays[0];
    c.scatter = arrays[1];
    c.compact_input_ids = arrays[2];
    c.compact_position_ids = arrays[3];
    c.compact_parent = arrays[4];
    size_t ns = ((size_t)p->n_seqs + 1) * sizeof(uint32_t), nr = p->n_runs * sizeof(uint32_t);
    uint32_t *cu = tu_xmalloc(ns);
    if (p->cu_seqlens != NULL) memcpy(cu, p->cu_seqlens, ns);
    c.cu_seqlens = cu;
    /* the compact-attention layout, when the plan has one */
    uint32_t *qo = p->qo_indptr ? tu_xmalloc(ns) : NULL, *ri = p->run_indptr ? tu_xmalloc(ns) : NULL;
    uint32_t *rs = p->run_start ? tu_xmalloc(nr) : NULL;
    if (qo) memcpy(qo, p->qo_indptr, ns);
    if (ri) memcpy(ri, p->run_indptr, ns);
    if (rs && nr > 0) memcpy(rs, p->run_start, nr);
    c.qo_indptr = qo, c.run_indptr = ri, c.run_start = rs;
    return c;
}

static inline void tu_plan_copy_free(rmlp_plan *c) {
    free((void *)c->fold_gather);
    free((void *)c->scatter);
    free((void *)c->compact_input_ids);
    free((void *)c->compact_position_ids);
    free((void *)c->compact_parent);
    free((void *)c->cu_seqlens);
    free((void *)c->qo_indptr);
    free((void *)c->run_indptr);
    free((void *)c->run_start);
    memset(c, 0, sizeof *c);
}

static inline int tu_arrays_differ(const char *name, const uint32_t *a, const uint32_t *b, size_t n, char *why,
                                   size_t why_len) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            snprintf(why, why_len, "%s[%zu]: %u vs %u", name, i, a[i], b[i]);
            return 1;
        }
    return 0;
}

/* The compact-attention layouts of a and b (both absent, or the same arrays). */
static inline int tu_layout_differ(const rmlp_plan *a, const rmlp_plan *b, char *why, size_t why_len) {
    if ((a->qo_indptr == NULL) != (b->qo_indptr == NULL) || a->n_runs != b->n_runs) {
        snprintf(why, why_len, "layouts differ: qo_indptr %s/%s, n_runs %u/%u", a->qo_indptr ? "set" : "NULL",
                 b->qo_indptr ? "set" : "NULL", a->n_runs, b->n_runs);
        return 1;
    }
    if (a->qo_indptr == NULL) return 0;
    size_t ns = (size_t)a->n_seqs + 1;
    return tu_arrays_differ("qo_indptr", a->qo_indptr, b->qo_indptr, ns, why, why_len) ||
           tu_arrays_differ("run_indptr", a->run_indptr, b->run_indptr, ns, why, why_len) ||
           tu_arrays_differ("run_start", a->run_start, b->run_start, a->n_runs, why, why_len);
}

/* 0 when a and b are the same plan (counts, gate, ratio and every array element; build_us aside),
 * else 1 with the first difference in why. */
static inline int tu_plan_diff(const rmlp_plan *a, const rmlp_plan *b, char *why, size_t why_len) {
    if (a->n_tokens != b->n_tokens || a->n_seqs != b->n_seqs || a->n_distinct != b->n_distinct ||
        a->n_compact != b->n_compact || a->n_compact_padded != b->n_compact_padded || a->use_radix != b->use_radix ||
        a->compact_ratio != b->compact_ratio) {
        snprintf(why, why_len,
                 "counts differ: n_tokens %u/%u n_seqs %u/%u n_distinct %u/%u n_compact %u/%u padded %u/%u "
                 "use_radix %d/%d ratio %g/%g",
                 a->n_tokens, b->n_tokens, a->n_seqs, b->n_seqs, a->n_distinct, b->n_distinct, a->n_compact,
                 b->n_compact, a->n_compact_padded, b->n_compact_padded, a->use_radix, b->use_radix,
                 a->compact_ratio, b->compact_ratio);
        return 1;
    }
    size_t nc = a->n_compact_padded;
    return tu_arrays_differ("scatter", a->scatter, b->scatter, a->n_tokens, why, why_len) ||
           tu_arrays_differ("fold_gather", a->fold_gather, b->fold_gather, nc, why, why_len) ||
           tu_arrays_differ("compact_input_ids", a->compact_input_ids, b->compact_input_ids, nc, why, why_len) ||
           tu_arrays_differ("compact_position_ids", a->compact_position_ids, b->compact_position_ids, nc, why,
                            why_len) ||
           tu_arrays_differ("compact_parent", a->compact_parent, b->compact_parent, nc, why, why_len) ||
           tu_arrays_differ("cu_seqlens", a->cu_seqlens, b->cu_seqlens, (size_t)a->n_seqs + 1, why, why_len) ||
           tu_layout_differ(a, b, why, why_len);
}

/* rmlp_forward_compact (compact) or rmlp_forward of plan with the built-in attention into out. */
static inline rmlp_status tu_forward(rmlp_context *ctx, const rmlp_plan *plan, bool compact, float *out) {
    return compact ? rmlp_forward_compact(ctx, plan, NULL, NULL, out) : rmlp_forward(ctx, plan, NULL, NULL, out);
}

/* Params with the given gate and padding (pad_multiple 0: no padding). */
static inline rmlp_plan_params tu_params(double threshold, uint32_t pad_multiple) {
    rmlp_plan_params p = rmlp_plan_default_params();
    p.threshold = threshold;
    p.pad = pad_multiple > 0;
    if (pad_multiple > 0) p.pad_multiple_of = pad_multiple;
    return p;
}

/* Formats up to the first 24 values of an array, for failure messages. */
static inline const char *tu_fmt_array(const uint32_t *a, size_t n, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < 24 && used + 16 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? "," : "", a[i]);
    if (n > 24 && used + 5 < len) snprintf(buf + used, len - used, ",...");
    return buf;
}

#endif
