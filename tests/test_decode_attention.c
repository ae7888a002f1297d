/*
 * test_decode_attention.c: the CPU decode step's attention (cpu/decode_attention.c) and the
 * thread pool it runs on (cpu/workers.c).
 * - The pool: every task of a job runs exactly once, on a worker index below the pool's count,
 *   over many jobs of 0 to 1,000 tasks (label tsan: scripts/tsan.sh runs it under ThreadSanitizer).
 * - The attention, for queries whose paths share a prefix (over one key tile and over several),
 *   subgroups sharing more, each ending in the query's own slots; chains cut with and without
 *   shared prefixes; GQA 4:1, 1:1 and 6:1 (blocks of whole queries), head_dim 20, 64 and 128; K/V
 *   slot-major and head-major (kv_head_stride): against a double-precision reference of each
 *   query over its path (1e-5 of the largest |value|), and bit for bit the same on pools of 1, 2,
 *   3 and 7 threads. Also the layer variants of model/model_ext.h: sliding windows of 5, 45 and 600
 *   keys (shorter than the shared prefix, ending inside the group's part, across a key tile),
 *   a logit soft-cap and another scale; the reference then sees the last `window` keys of each path.
 * - The few-row linear layer of a generation step (cpu/linear_few.c, the same row-dot kernel as
 *   the scores): rows 1 to 33, in_dim and out_dim not multiples of the kernel's blocks, with and
 *   without bias, against a double-precision reference (1e-5 of the largest |value|), and bit for
 *   bit the same on pools of 1, 2 and 3 threads.
 * - Each kernel set this CPU runs (cpu/decode_kernels.h: AVX-512VL, AVX + FMA, baseline), called
 *   directly on blocks of 1 to 13 rows, odd dims, gathered slots and strides: row dots and P V
 *   against a double-precision reference (1e-5 of the largest |value|), the online softmax against
 *   exp in double (1e-5 relative); and sets of the same family (AVX-512VL, AVX + FMA) bit for bit
 *   the same. Where the CPU runs only one set of a family, it says so.
 */
#include <math.h>
#include <stdatomic.h>

#include "cpu/decode_attention.h"
#include "cpu/decode_kernels.h"
#include "cpu/linear_few.h"
#include "test_util.h"
#include "cpu/workers.h"

typedef struct count_job {
    atomic_uint *runs;  /* (n_tasks) */
    atomic_uint bad_worker;
    size_t n_workers;
} count_job;

static void count_task(void *arg, size_t task, size_t worker) {
    count_job *j = arg;
    atomic_fetch_add(&j->runs[task], 1);
    if (worker >= j->n_workers) atomic_fetch_add(&j->bad_worker, 1);
}

static void test_workers(void) {
    static const size_t threads[] = {1, 2, 3, 8};
    static const size_t tasks[] = {0, 1, 2, 5, 64, 1000};
    atomic_uint *runs = tu_xmalloc(1000 * sizeof *runs);
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        int error = -1;
        workers *w = workers_create(threads[t], &error);
        if (!CHECK(w != NULL, "workers_create(%zu) failed: error %d", threads[t], error)) continue;
        CHECK_EQ(workers_count(w), threads[t], "workers_count of a pool of %zu", threads[t]);
        size_t wrong = 0, bad_workers = 0;
        for (int round = 0; round < 200; round++) {
            size_t n = tasks[round % (sizeof tasks / sizeof tasks[0])];
            for (size_t i = 0; i < n; i++) atomic_init(&runs[i], 0);
            count_job job = {runs, 0, threads[t]};
            workers_run(w, n, count_task, &job);
            for (size_t i = 0; i < n; i++) wrong += atomic_load(&runs[i]) != 1;
            bad_workers += atomic_load(&job.bad_worker);
        }
        CHECK(wrong == 0, "pool of %zu: %zu tasks did not run exactly once", threads[t], wrong);
        CHECK(bad_workers == 0, "pool of %zu: %zu tasks ran on a worker index out of range", threads[t], bad_workers);
        workers_destroy(w);
    }
    count_job job = {runs, 0, 1};
    for (size_t i = 0; i < 10; i++) atomic_init(&runs[i], 0);
    workers_run(NULL, 10, count_task, &job); /* no pool: the calling thread */
    size_t wrong = 0;
    for (size_t i = 0; i < 10; i++) wrong += atomic_load(&runs[i]) != 1;
    CHECK(wrong == 0 && atomic_load(&job.bad_worker) == 0, "no pool: %zu tasks wrong", wrong);
    CHECK_EQ(workers_count(NULL), (size_t)1, "workers_count(NULL)");
    workers_destroy(NULL);
    free(runs);
}

enum { QUERIES = 40, MAX_PATH = 800, OWN = 30 };

static float *random_floats(uint64_t *rng, size_t n, double lo, double hi) {
    float *x = tu_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (double)(tu_rand(rng) >> 11) * 0x1p-53 * (hi - lo));
    return x;
}

/* Where K/V element (slot, head, d) lies: slot-major (slots, heads, hd) or head-major (heads, slots, hd). */
static size_t kv_at(int head_major, size_t n_slots, size_t nkv, size_t hd, size_t slot, size_t head, size_t d) {
    return head_major ? (head * n_slots + slot) * hd + d : (slot * nkv + head) * hd + d;
}

/* out (QUERIES, nh, hd): each query over its path (its last la->window keys with a window), scored
 * as la says, in double. */
static void reference(const float *q, const float *k, const float *v, const uint32_t *paths, const uint32_t *len,
                      int head_major, size_t n_slots, size_t nh, size_t nkv, size_t hd, const layer_attention *la,
                      float *out) {
    double *w = tu_xmalloc(MAX_PATH * sizeof(double)), *acc = tu_xmalloc(hd * sizeof(double));
    for (size_t r = 0; r < QUERIES; r++)
        for (size_t h = 0; h < nh; h++) {
            const uint32_t *path = paths + r * MAX_PATH;
            size_t g = h / (nh / nkv);
            double top = -INFINITY, sum = 0.0;
            size_t first = la->window != 0 && len[r] > la->window ? len[r] - la->window : 0;
            for (size_t p = first; p < len[r]; p++) {
                double s = 0.0;
                for (size_t d = 0; d < hd; d++)
                    s += (double)q[(r * nh + h) * hd + d] * k[kv_at(head_major, n_slots, nkv, hd, path[p], g, d)];
                w[p] = s * la->scale;
                if (la->softcap != 0.0f) w[p] = tanh(w[p] / la->softcap) * la->softcap;
                top = w[p] > top ? w[p] : top;
            }
            for (size_t d = 0; d < hd; d++) acc[d] = 0.0;
            for (size_t p = first; p < len[r]; p++) {
                double e = exp(w[p] - top);
                sum += e;
                for (size_t d = 0; d < hd; d++) acc[d] += e * v[kv_at(head_major, n_slots, nkv, hd, path[p], g, d)];
            }
            for (size_t d = 0; d < hd; d++) out[(r * nh + h) * hd + d] = (float)(acc[d] / sum);
        }
    free(w), free(acc);
}

static void test_attention(uint64_t *rng, uint32_t longest_common) {
    static const size_t head_dims[] = {20, 64, 128};
    static const size_t heads[][2] = {{8, 2}, {4, 4}, {6, 1}};
    static const size_t pool_threads[] = {2, 3, 7};
    uint32_t common = tu_rand_range(rng, longest_common / 2, longest_common), group_len[3];
    size_t n_slots = common + 3 * 20 + QUERIES * OWN;
    uint32_t *paths = tu_xmalloc(QUERIES * MAX_PATH * sizeof(uint32_t)), len[QUERIES], next = 0;
    for (int g = 0; g < 3; g++) group_len[g] = tu_rand_range(rng, 0, 20);
    for (uint32_t r = 0; r < QUERIES; r++) { /* common prefix, then the group's part, then its own */
        uint32_t *p = paths + r * MAX_PATH, g = r % 3, own = tu_rand_range(rng, 1, OWN), n = 0;
        for (uint32_t i = 0; i < common; i++) p[n++] = i;
        for (uint32_t i = 0; i < group_len[g]; i++) p[n++] = common + g * 20 + i;
        for (uint32_t i = 0; i < own; i++) p[n++] = common + 60 + next++;
        len[r] = n;
    }
    workers *pools[3];
    for (size_t i = 0; i < 3; i++) {
        int error = 0;
        pools[i] = workers_create(pool_threads[i], &error);
        CHECK(pools[i] != NULL, "workers_create(%zu): error %d", pool_threads[i], error);
    }
    uint32_t *below = calloc(n_slots, 4), *chain_of = tu_xmalloc(n_slots * 4);
    memset(chain_of, 0xFF, n_slots * 4);
    decode_chain *chains = tu_xmalloc(decode_max_chains(QUERIES) * sizeof *chains);
    uint32_t *members = tu_xmalloc(decode_max_members(QUERIES, MAX_PATH) * 4);
    for (int shared = 0; shared < 2; shared++)
        for (int head_major = 0; head_major < 2; head_major++)
            for (size_t a = 0; a < sizeof head_dims / sizeof head_dims[0]; a++)
                for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
                    size_t hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1], qd = nh * hd, kvd = nkv * hd;
                    size_t nc = decode_build_chains(paths, MAX_PATH, len, QUERIES, shared, below, chain_of, chains,
                                                    members);
                    float *q = random_floats(rng, QUERIES * qd, -3, 3), *k = random_floats(rng, n_slots * kvd, -1, 1);
                    float *v = random_floats(rng, n_slots * kvd, -1, 1), *want = tu_xmalloc(QUERIES * qd * 4);
                    float *got = tu_xmalloc(QUERIES * qd * 4), *again = tu_xmalloc(QUERIES * qd * 4);
                    float *scratch = tu_xmalloc(decode_scratch_floats(QUERIES, nh, nkv, hd, 7) * 4);
                    /* a variant per case, in turn: plain, windows, a soft-cap with another scale */
                    static const layer_attention variants[] = {{0, 0.0f, 0.0f, 0}, {5, 0.0f, 0.0f, 0},
                                                               {45, 0.0f, 0.0f, 0}, {600, 0.0f, 0.0f, 0},
                                                               {0, 3.0f, 0.2f, 0}, {45, 3.0f, 0.0f, 0}};
                    layer_attention la = variants[(shared * 2 + head_major + a + h) % 6];
                    if (la.scale == 0.0f) la.scale = 1.0f / sqrtf((float)hd);
                    cpu_attention_rows rows = {q, k, v, got, qd, head_major ? hd : kvd, head_major ? hd : kvd, qd,
                                               head_major ? n_slots * hd : 0};
                    char what[160];
                    snprintf(what, sizeof what, "%s, %s K/V, common prefix %u, %zu chains, heads %zu/%zu, head_dim %zu, "
                             "window %u, softcap %g", shared ? "shared" : "per path", head_major ? "head-major" :
                             "slot-major", common, nc, nh, nkv, hd, la.window, la.softcap);
                    reference(q, k, v, paths, len, head_major, n_slots, nh, nkv, hd, &la, want);
                    cpu_decode_attention(&rows, chains, nc, members, QUERIES, nh, nkv, hd, &la, len, NULL, scratch);
                    double max_ref = 0.0, err = tu_max_abs_diff(got, want, QUERIES * qd, &max_ref);
                    CHECK(err <= 1e-5 * max_ref, "%s: max |error| %.3g against the reference (largest %.3g)", what, err,
                          max_ref);
                    rows.out = again;
                    for (size_t i = 0; i < 3; i++) {
                        if (pools[i] == NULL) continue;
                        memset(again, 0xFF, QUERIES * qd * 4);
                        cpu_decode_attention(&rows, chains, nc, members, QUERIES, nh, nkv, hd, &la, len, pools[i],
                                             scratch);
                        CHECK(memcmp(again, got, QUERIES * qd * 4) == 0, "%s: %zu threads differ from one", what,
                              pool_threads[i]);
                    }
                    free(q), free(k), free(v), free(want), free(got), free(again), free(scratch);
                }
    for (size_t i = 0; i < 3; i++) workers_destroy(pools[i]);
    free(paths), free(below), free(chain_of), free(chains), free(members);
}

static void test_linear_few(uint64_t *rng) {
    static const size_t rows_of[] = {1, 2, 3, 5, 33}, in_of[] = {8, 20, 37, 256}, out_of[] = {1, 3, 65, 130};
    workers *pools[2] = {workers_create(2, &(int){0}), workers_create(3, &(int){0})};
    if (!CHECK(pools[0] != NULL && pools[1] != NULL, "workers_create failed")) return;
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    size_t rows = rows_of[a], in = in_of[b], out = out_of[c];
                    float *x = random_floats(rng, rows * in, -1, 1), *w = random_floats(rng, out * in, -1, 1);
                    float *bias = with_bias ? random_floats(rng, out, -1, 1) : NULL;
                    float *got = tu_xmalloc(rows * out * 4), *again = tu_xmalloc(rows * out * 4);
                    cpu_linear_few(x, rows, in, w, bias, out, got, NULL);
                    double worst = 0.0, largest = 0.0;
                    for (size_t r = 0; r < rows; r++)
                        for (size_t o = 0; o < out; o++) {
                            double want = bias ? bias[o] : 0.0;
                            for (size_t i = 0; i < in; i++) want += (double)x[r * in + i] * w[o * in + i];
                            double d = fabs(got[r * out + o] - want);
                            worst = d > worst ? d : worst, largest = fabs(want) > largest ? fabs(want) : largest;
                        }
                    CHECK(worst <= 1e-5 * largest, "linear_few rows %zu, in %zu, out %zu, bias %d: off by %.3g "
                          "(largest %.3g)", rows, in, out, with_bias, worst, largest);
                    for (size_t p = 0; p < 2; p++) {
                        cpu_linear_few(x, rows, in, w, bias, out, again, pools[p]);
                        CHECK(memcmp(again, got, rows * out * 4) == 0, "linear_few rows %zu, in %zu, out %zu: %zu "
                              "threads differ from one", rows, in, out, workers_count(pools[p]));
                    }
                    free(x), free(w), free(bias), free(got), free(again);
                }
    for (size_t p = 0; p < 2; p++) workers_destroy(pools[p]);
}

/* tu_max_abs_diff(got, want) within 1e-5 of the largest |want| (a NaN fails). */
static bool close_to(const float *got, const float *want, size_t n) {
    double largest = 0.0, worst = tu_max_abs_diff(got, want, n, &largest);
    return worst <= 1e-5 * largest;
}

/* Row dots and P V of one set at one shape, against double; the outputs into dots/pv for the
 * family comparison. */
static void kernel_case(const decode_kernels *ks, uint64_t *rng, size_t rows, size_t dim, size_t n_out, float *dots,
                        float *pv) {
    size_t stride = dim + 3, n_slots = 2 * n_out + 1, out_stride = n_out + 2;
    uint64_t seed = *rng;
    float *x = random_floats(rng, rows * dim, -1, 1), *w = random_floats(rng, n_slots * stride, -1, 1);
    uint32_t *slots = tu_xmalloc(n_out * sizeof(uint32_t));
    for (size_t j = 0; j < n_out; j++) slots[j] = (uint32_t)((j * 7 + 3) % n_slots);
    float *want = tu_xmalloc(rows * (n_out > dim ? n_out : dim) * sizeof(float)); /* computed in double */
    memset(dots, 0, rows * out_stride * sizeof(float));
    ks->row_dots(x, rows, dim, w, stride, slots, n_out, 0.5f, dots, out_stride);
    float *packed = tu_xmalloc(rows * n_out * sizeof(float));
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < n_out; j++) {
            double t = 0.0;
            for (size_t d = 0; d < dim; d++) t += (double)x[r * dim + d] * w[slots[j] * stride + d];
            want[r * n_out + j] = (float)(0.5 * t), packed[r * n_out + j] = dots[r * out_stride + j];
        }
    CHECK(close_to(packed, want, rows * n_out), "kernels %s: row_dots rows %zu, dim %zu, outputs %zu off", ks->name,
          rows, dim, n_out);
    /* P V: p (rows, n_out) against the same slots' rows of w as values of dim floats */
    float *p = random_floats(rng, rows * n_out, 0, 1);
    float *start = random_floats(rng, rows * dim, -1, 1);
    memcpy(pv, start, rows * dim * sizeof(float));
    ks->values(p, rows, n_out, w, stride, slots, dim, pv);
    for (size_t r = 0; r < rows; r++)
        for (size_t d = 0; d < dim; d++) {
            double t = start[r * dim + d];
            for (size_t j = 0; j < n_out; j++) t += (double)p[r * n_out + j] * w[slots[j] * stride + d];
            want[r * dim + d] = (float)t;
        }
    CHECK(close_to(pv, want, rows * dim), "kernels %s: values rows %zu, keys %zu, dim %zu off", ks->name, rows,
          n_out, dim);
    *rng = seed; /* the next set of the family sees the same inputs */
    free(x), free(w), free(slots), free(want), free(packed), free(p), free(start);
}

/* The online softmax of one set: rows of scores with a running max (some rows fresh, at -inf),
 * against exp in double; the tile's outputs into out (scores, then max and sum per row). */
static void softmax_case(const decode_kernels *ks, uint64_t *rng, size_t rows, size_t nk, float *out) {
    enum { HD = 12 };
    uint64_t seed = *rng;
    float *s = random_floats(rng, rows * nk, -30, 10), *obuf = random_floats(rng, rows * HD, -1, 1);
    float *cm = random_floats(rng, rows, -5, 5), *cl = random_floats(rng, rows, 0.5, 3);
    float *s0 = tu_xmalloc(rows * nk * sizeof(float)), *o0 = tu_xmalloc(rows * HD * sizeof(float));
    for (size_t r = 0; r < rows; r += 3) cm[r] = -INFINITY, cl[r] = 0.0f;
    memcpy(s0, s, rows * nk * sizeof(float)), memcpy(o0, obuf, rows * HD * sizeof(float));
    float m0[16], l0[16];
    memcpy(m0, cm, rows * sizeof(float)), memcpy(l0, cl, rows * sizeof(float));
    ks->softmax(s, rows, nk, cm, cl, obuf, HD);
    size_t bad = 0;
    for (size_t r = 0; r < rows; r++) {
        double top = m0[r], sum = 0.0;
        for (size_t k = 0; k < nk; k++) top = s0[r * nk + k] > top ? s0[r * nk + k] : top;
        for (size_t k = 0; k < nk; k++) {
            double e = exp((double)s0[r * nk + k] - top);
            sum += e;
            bad += fabs(s[r * nk + k] - e) > 1e-5 * e; /* the float x - max alone is off by up to 6e-8 |x - max| */
        }
        double alpha = m0[r] == -INFINITY ? 0.0 : exp(m0[r] - top);
        double l = l0[r] * alpha + sum;
        bad += cm[r] != (float)top || fabs(cl[r] - l) > 1e-5 * l;
        for (size_t d = 0; d < HD; d++) bad += fabs(obuf[r * HD + d] - o0[r * HD + d] * alpha) > 1e-5 * fabs(o0[r * HD + d]);
    }
    CHECK(bad == 0, "kernels %s: softmax rows %zu, keys %zu: %zu values off", ks->name, rows, nk, bad);
    memcpy(out, s, rows * nk * sizeof(float));
    memcpy(out + rows * nk, cm, rows * sizeof(float)), memcpy(out + rows * nk + rows, cl, rows * sizeof(float));
    *rng = seed;
    free(s), free(obuf), free(cm), free(cl), free(s0), free(o0);
}

static void test_kernel_sets(uint64_t *rng) {
    decode_kernels sets[4];
    size_t n = decode_kernels_supported(sets, 4);
    bool pairs = false;
    for (size_t a = 0; a + 1 < n; a++) pairs |= sets[a].family == sets[a + 1].family;
    if (!pairs) printf("test_decode_attention: one kernel set per family on this CPU (%s first): the sets' "
                       "bit-for-bit agreement is not checked here\n", sets[0].name);
    static const size_t rows_of[] = {1, 2, 3, 4, 5, 6, 7, 9, 13}, dim_of[] = {8, 20, 37, 128}, out_of[] = {1, 3, 4, 5, 9, 33};
    enum { MAX = 13 * 130 };
    float got[4][2][MAX];
    for (size_t a = 0; a < 9; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 6; c++) {
                for (size_t k = 0; k < n; k++) kernel_case(&sets[k], rng, rows_of[a], dim_of[b], out_of[c], got[k][0], got[k][1]);
                for (size_t k = 1; k < n; k++)
                    if (sets[k].family == sets[0].family)
                        CHECK(memcmp(got[k][0], got[0][0], rows_of[a] * (out_of[c] + 2) * sizeof(float)) == 0 &&
                                  memcmp(got[k][1], got[0][1], rows_of[a] * dim_of[b] * sizeof(float)) == 0,
                              "kernels %s and %s differ: rows %zu, dim %zu, outputs %zu", sets[k].name, sets[0].name,
                              rows_of[a], dim_of[b], out_of[c]);
                tu_rand(rng);
            }
    static const size_t nk_of[] = {5, 16, 23};
    for (size_t rows = 1; rows <= 7; rows += 3)
        for (size_t c = 0; c < 3; c++) {
            for (size_t k = 0; k < n; k++) softmax_case(&sets[k], rng, rows, nk_of[c], got[k][0]);
            for (size_t k = 1; k < n; k++)
                if (sets[k].family == sets[0].family)
                    CHECK(memcmp(got[k][0], got[0][0], rows * (nk_of[c] + 2) * sizeof(float)) == 0,
                          "kernels %s and %s: softmax differs, rows %zu, keys %zu", sets[k].name, sets[0].name, rows,
                          nk_of[c]);
            tu_rand(rng);
        }
}

int main(void) {
    uint64_t rng = 0x5eed0019u;
    test_workers();
    test_attention(&rng, 60);  /* within one key tile */
    test_attention(&rng, 700); /* the shared prefix over two tiles: the running max rescales */
    test_linear_few(&rng);
    test_kernel_sets(&rng);
    return tu_summary();
}
