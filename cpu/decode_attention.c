/*
 * decode_attention.c: a decode step's attention on the CPU, by chains of shared keys
 * (decode_attention.h). The work is cut into tasks, one per KV head and span of queries, run on
 * a workers pool (cpu/workers.h). A task takes each chain in order and, in blocks of at most
 * ROW_BLOCK query rows (a block's queries x their grouped heads), runs the chain's keys in tiles of
 * DECODE_TILE slots through the kernels of decode_kernels.h (the scores of the block against the
 * tile, their online softmax, P V), keeping a running (max, sum, acc) per row; the chain's
 * state is then merged into each (query, head)'s with the log-sum-exp. A (query, head) state is
 * only ever touched by the one task that owns both, and every score and output element is
 * computed by the same sequence of operations whatever block or task it falls in, so the result
 * does not depend on the number of threads or on how the queries are cut.
 *
 * The kernels (decode_kernels.h) read K and V rows in place through the chain's slots. No BLAS
 * here: OpenBLAS's threaded calls from several threads at once queue on one lock.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "decode_attention.h"
#include "decode_kernels.h"

#define DECODE_TILE 512
/* The most query rows a task runs through a chain's keys at once (whole queries: at least a
 * query's group of heads). */
#define ROW_BLOCK 64

static size_t queries_per_block(size_t group) { return group >= ROW_BLOCK ? 1 : ROW_BLOCK / group; }

/* n rounded up to whole cache lines of floats: each part of the scratch starts on a line (the
 * scratch itself is allocated aligned), so the kernels' vector loads never straddle two. */
static size_t line_floats(size_t n) { return (n + 15) & ~(size_t)15; }

/* Floats of one worker's part of the scratch: a block's queries, acc, scores, max and sum. */
static size_t worker_floats(size_t group, size_t head_dim) {
    size_t rows = queries_per_block(group) * group;
    return 2 * line_floats(rows * head_dim) + line_floats(rows * DECODE_TILE) + line_floats(2 * rows);
}

/* Floats before the workers' parts: each (query, head)'s max and sum, then its acc (head_dim). */
static size_t states_floats(size_t n_states, size_t head_dim) {
    return line_floats(2 * n_states) + line_floats(n_states * head_dim);
}

size_t decode_scratch_floats(size_t n_queries, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                             size_t n_workers) {
    return states_floats(n_queries * n_heads, head_dim) + n_workers * worker_floats(n_heads / n_kv_heads, head_dim) +
           1;
}

/* Merges the partial state (m2, l2, acc2) into (m, l, acc) of head_dim floats; a state that saw
 * no key (m2 -inf: every key of the chain outside the query's window) changes nothing. */
static void merge_state(float *m, float *l, float *acc, float m2, float l2, const float *acc2, size_t head_dim) {
    if (m2 == -INFINITY) return;
    float top = *m > m2 ? *m : m2, a = expf(*m - top), b = expf(m2 - top);
    *l = *l * a + l2 * b;
    for (size_t d = 0; d < head_dim; d++) acc[d] = acc[d] * a + acc2[d] * b;
    *m = top;
}

/* One step's attention, as tasks: task t is KV head t % n_kv_heads over the queries
 * [b * span, (b + 1) * span), b = t / n_kv_heads. */
typedef struct decode_job {
    const cpu_attention_rows *rows;
    const decode_chain *chains;
    const uint32_t *members;
    size_t n_chains, n_queries, n_heads, n_kv_heads, hd, group, kv_head_stride, span;
    layer_attention la;
    const uint32_t *path_len; /* (n_queries), read with a window */
    decode_kernels kernels;
    float *sm, *sl, *sacc; /* (n_queries, n_heads) states: max, sum, acc (head_dim) */
    float *work;           /* per worker: worker_floats */
} decode_job;

/* The first of mem[0 .. n) (ascending) that is >= q. */
static size_t lower_bound(const uint32_t *mem, size_t n, size_t q) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mem[mid] < q) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The first key of chain ch (an index into its keys) query q sees: 0 without a window, else the
 * first at path position path_len[q] - window or later (n_keys or more: none). */
static size_t first_key(const decode_job *j, const decode_chain *ch, uint32_t q) {
    size_t pos = j->path_len != NULL ? j->path_len[q] - 1 : 0, w = j->la.window;
    size_t lo = w != 0 && pos + 1 > w ? pos + 1 - w : 0; /* the first path position it sees */
    return lo > ch->depth ? lo - ch->depth : 0;
}

/* Sets to `fill` the scores (n_queries x group rows, tile t0 .. t0 + nk) of keys before each
 * query's window. */
static void mask_tile(const decode_job *j, const decode_chain *ch, const uint32_t *mem, size_t n_queries,
                      float *scores, size_t t0, size_t nk, float fill) {
    for (size_t i = 0; i < n_queries; i++) {
        size_t lo = first_key(j, ch, mem[i]), before = lo > t0 ? lo - t0 : 0;
        if (before > nk) before = nk;
        for (size_t h = 0; h < j->group; h++)
            for (size_t c = 0; c < before; c++) scores[(i * j->group + h) * nk + c] = fill;
    }
}

/* The chain's keys for n_queries of its members mem (their group of heads g), into their states:
 * the tiles from the one holding the block's first key in any window (on the grid from key 0). */
static void attend_block(const decode_job *j, const decode_chain *ch, const uint32_t *mem, size_t n_queries, size_t g,
                         float *work) {
    const cpu_attention_rows *rows = j->rows;
    size_t hd = j->hd, group = j->group, n_rows = n_queries * group;
    size_t rows_max = queries_per_block(group) * group;
    float *qbuf = work, *obuf = qbuf + line_floats(rows_max * hd), *scores = obuf + line_floats(rows_max * hd);
    float *cm = scores + line_floats(rows_max * DECODE_TILE), *cl = cm + n_rows;
    size_t lo = ch->n_keys, hi_lo = 0; /* the block's least and greatest first keys */
    for (size_t i = 0; j->la.window != 0 && i < n_queries; i++) {
        size_t f = first_key(j, ch, mem[i]);
        lo = f < lo ? f : lo, hi_lo = f > hi_lo ? f : hi_lo;
    }
    if (j->la.window == 0) lo = 0;
    if (lo >= ch->n_keys) return; /* no query of the block sees a key of the chain */
    for (size_t i = 0; i < n_queries; i++) /* the group's heads of a query row are contiguous */
        memcpy(qbuf + i * group * hd, rows->q + (size_t)mem[i] * rows->q_stride + g * group * hd,
               group * hd * sizeof(float));
    for (size_t r = 0; r < n_rows; r++) cm[r] = -INFINITY, cl[r] = 0.0f;
    memset(obuf, 0, n_rows * hd * sizeof(float));
    const float *kh = rows->k + g * j->kv_head_stride, *vh = rows->v + g * j->kv_head_stride;
    for (size_t t0 = lo / DECODE_TILE * DECODE_TILE; t0 < ch->n_keys; t0 += DECODE_TILE) {
        size_t nk = ch->n_keys - t0 < DECODE_TILE ? ch->n_keys - t0 : DECODE_TILE;
        const uint32_t *slots = ch->keys + t0;
        bool masked = hi_lo > t0; /* some query's window starts after the tile's first key */
        j->kernels.row_dots(qbuf, n_rows, hd, kh, rows->k_stride, slots, nk, j->la.scale, scores, nk);
        if (j->la.softcap != 0.0f)
            for (size_t i = 0; i < n_rows * nk; i++) scores[i] = tanhf(scores[i] / j->la.softcap) * j->la.softcap;
        if (masked) mask_tile(j, ch, mem, n_queries, scores, t0, nk, -INFINITY);
        j->kernels.softmax(scores, n_rows, nk, cm, cl, obuf, hd);
        if (masked) mask_tile(j, ch, mem, n_queries, scores, t0, nk, 0.0f); /* e^(-inf) is clamped, not 0 */
        j->kernels.values(scores, n_rows, nk, vh, rows->v_stride, slots, hd, obuf);
    }
    for (size_t i = 0; i < n_queries; i++)
        for (size_t h = 0; h < group; h++) {
            size_t at = (size_t)mem[i] * j->n_heads + g * group + h, r = i * group + h;
            merge_state(&j->sm[at], &j->sl[at], j->sacc + at * hd, cm[r], cl[r], obuf + r * hd, hd);
        }
}

static void decode_task(void *arg, size_t task, size_t worker) {
    const decode_job *j = arg;
    const cpu_attention_rows *rows = j->rows;
    size_t g = task % j->n_kv_heads, q_lo = task / j->n_kv_heads * j->span, hd = j->hd, group = j->group;
    size_t q_hi = q_lo + j->span < j->n_queries ? q_lo + j->span : j->n_queries, per_block = queries_per_block(group);
    float *work = j->work + worker * worker_floats(group, hd);
    for (size_t q = q_lo; q < q_hi; q++)
        for (size_t h = g * group; h < (g + 1) * group; h++) {
            size_t at = q * j->n_heads + h;
            j->sm[at] = -INFINITY, j->sl[at] = 0.0f;
            memset(j->sacc + at * hd, 0, hd * sizeof(float));
        }
    for (size_t c = 0; c < j->n_chains; c++) {
        const decode_chain *ch = &j->chains[c];
        const uint32_t *mem = j->members + ch->first;
        size_t hi = lower_bound(mem, ch->count, q_hi);
        for (size_t i = lower_bound(mem, ch->count, q_lo); i < hi; i += per_block)
            attend_block(j, ch, mem + i, hi - i < per_block ? hi - i : per_block, g, work);
    }
    for (size_t q = q_lo; q < q_hi; q++)
        for (size_t h = g * group; h < (g + 1) * group; h++) {
            size_t at = q * j->n_heads + h;
            float inv = 1.0f / j->sl[at];
            for (size_t d = 0; d < hd; d++) rows->out[q * rows->out_stride + h * hd + d] = j->sacc[at * hd + d] * inv;
        }
}

void cpu_decode_attention(const cpu_attention_rows *rows, const decode_chain *chains, size_t n_chains,
                          const uint32_t *members, size_t n_queries, size_t n_heads, size_t n_kv_heads,
                          size_t head_dim, const layer_attention *la, const uint32_t *path_len, workers *pool,
                          float *scratch) {
    size_t n_workers = workers_count(pool), states = n_queries * n_heads;
    /* about four tasks per thread, for balance: the spans of queries a KV head is cut into */
    size_t spans = n_workers == 1 ? 1 : (4 * n_workers + n_kv_heads - 1) / n_kv_heads;
    if (spans > n_queries) spans = n_queries ? n_queries : 1;
    size_t span = (n_queries + spans - 1) / spans;
    if (span == 0) span = 1;
    decode_job job = {rows, chains, members, n_chains, n_queries, n_heads, n_kv_heads, head_dim,
                      n_heads / n_kv_heads, rows->kv_head_stride ? rows->kv_head_stride : head_dim, span, *la,
                      la->window != 0 ? path_len : NULL, decode_kernels_pick(), scratch, scratch + states, scratch + line_floats(2 * states),
                      scratch + states_floats(states, head_dim)};
    workers_run(pool, n_kv_heads * ((n_queries + span - 1) / span), decode_task, &job);
}
