/*
 * attention_flash.c: the flash-style prefill attention of attention_flash.h. A task is one
 * (sequence, KV head): its query rows in blocks of up to FLASH_ROWS rows (whole queries: each
 * query's group of heads), each block copied to scratch as (rows, head_dim) and run over the keys
 * its first query's first key .. its last query's position in tiles of FLASH_TILE keys (tiles on
 * one grid from key 0, whatever the block): scores by row_dots, the layer's soft-cap, the causal
 * mask and the sliding window's (a key after a row's position or before its window: -inf, its
 * weight then set to exactly 0), the online softmax (each row's running max, sum and weighted V in
 * fp32; a row that has seen no key yet is left alone by a tile where it sees none), P V by the values
 * kernel; at the end each row is its weighted V over its sum. Keys of a tile outside every row's
 * window are never read, so a row's result depends on its position and keys only.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "attention_flash.h"
#include "decode_kernels.h"

#define FLASH_TILE 64 /* keys per tile */
#define FLASH_ROWS 64 /* (query, head) rows per block */

typedef struct flash_job {
    const cpu_attention_rows *rows;
    const uint32_t *q_indptr, *kv_indptr, *kv_indices;
    size_t n_kv_heads, group, head_dim;
    layer_attention la;
    float *scratch;
    size_t scratch_per_worker;
    decode_kernels k;
} flash_job;

static size_t queries_per_block(size_t group) { return group >= FLASH_ROWS ? 1 : FLASH_ROWS / group; }

size_t flash_scratch_floats(size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    size_t group = n_heads / n_kv_heads, r = queries_per_block(group) * group;
    /* x and acc (r, head_dim), scores (r, tile), max and sum (r), the tile's key rows (uint32) */
    return 2 * r * head_dim + r * FLASH_TILE + 2 * r + FLASH_TILE;
}

/* The first key a query at position pos sees (0 without a window). */
static size_t first_key(const layer_attention *la, size_t pos) {
    return la->window != 0 && pos + 1 > la->window ? pos + 1 - la->window : 0;
}

/* Sets to `fill` the scores (rows t of the block, tile j0 .. j0 + nk) of keys a row does not see. */
static void mask_tile(const flash_job *j, float *scores, size_t nt, size_t nk, size_t first_pos, size_t j0,
                      float fill) {
    for (size_t t = 0; t < nt; t++) {
        size_t pos = first_pos + t, lo = first_key(&j->la, pos);
        size_t before = lo > j0 ? lo - j0 : 0, from = pos + 1 > j0 ? pos + 1 - j0 : 0; /* [before, from) seen */
        if (before > nk) before = nk;
        for (size_t h = 0; h < j->group; h++) {
            float *row = scores + (t * j->group + h) * nk;
            for (size_t c = 0; c < before; c++) row[c] = fill;
            for (size_t c = from; c < nk; c++) row[c] = fill;
        }
    }
}

/* Queries t0 .. t0 + nt of the task (sequence s from key row `first` with its key list `keys`,
 * NULL: consecutive), KV head g: n_keys keys in all, queries at positions L - nq + t. */
static void run_block(const flash_job *j, float *sc, size_t s, size_t g, size_t t0, size_t nt) {
    const cpu_attention_rows *rw = j->rows;
    size_t hd = j->head_dim, group = j->group, r = nt * group;
    size_t L = j->kv_indptr[s + 1] - j->kv_indptr[s], nq = j->q_indptr[s + 1] - j->q_indptr[s];
    size_t first_pos = L - nq + t0, last_pos = first_pos + nt - 1;
    size_t kvh = rw->kv_head_stride ? rw->kv_head_stride : hd;
    float *x = sc, *acc = x + r * hd, *scores = acc + r * hd, *cm = scores + r * FLASH_TILE, *cl = cm + r;
    uint32_t *slots = (uint32_t *)(cl + r);
    for (size_t t = 0; t < nt; t++) /* the block's queries, head by head of the group */
        for (size_t h = 0; h < group; h++)
            memcpy(x + (t * group + h) * hd,
                   rw->q + (size_t)(j->q_indptr[s] + t0 + t) * rw->q_stride + (g * group + h) * hd, hd * sizeof(float));
    for (size_t i = 0; i < r; i++) cm[i] = -INFINITY, cl[i] = 0.0f;
    memset(acc, 0, r * hd * sizeof(float));
    const float *kh = rw->k + g * kvh, *vh = rw->v + g * kvh;
    size_t lo = first_key(&j->la, first_pos); /* the block's first key; its tile on the grid from 0 */
    for (size_t j0 = lo / FLASH_TILE * FLASH_TILE; j0 <= last_pos; j0 += FLASH_TILE) {
        size_t nk = last_pos + 1 - j0 < FLASH_TILE ? last_pos + 1 - j0 : FLASH_TILE;
        for (size_t c = 0; c < nk; c++)
            slots[c] = j->kv_indices != NULL ? j->kv_indices[j->kv_indptr[s] + j0 + c]
                                             : (uint32_t)(j->kv_indptr[s] + j0 + c);
        j->k.row_dots(x, r, hd, kh, rw->k_stride, slots, nk, j->la.scale, scores, nk);
        if (j->la.softcap != 0.0f)
            for (size_t i = 0; i < r * nk; i++) scores[i] = tanhf(scores[i] / j->la.softcap) * j->la.softcap;
        /* some row sees only part of the tile: past its position, or before its window */
        bool masked = j0 + nk - 1 > first_pos || first_key(&j->la, last_pos) > j0;
        if (masked) mask_tile(j, scores, nt, nk, first_pos, j0, -INFINITY);
        j->k.softmax(scores, r, nk, cm, cl, acc, hd);
        if (masked) mask_tile(j, scores, nt, nk, first_pos, j0, 0.0f); /* e^(-inf) is clamped, not 0: make it 0 */
        j->k.values(scores, r, nk, vh, rw->v_stride, slots, hd, acc);
    }
    for (size_t t = 0; t < nt; t++)
        for (size_t h = 0; h < group; h++) {
            size_t i = t * group + h;
            float inv = 1.0f / cl[i], *o = rw->out + (size_t)(j->q_indptr[s] + t0 + t) * rw->out_stride + (g * group + h) * hd;
            for (size_t d = 0; d < hd; d++) o[d] = acc[i * hd + d] * inv;
        }
}

static void task(void *arg, size_t t, size_t worker) {
    const flash_job *j = arg;
    size_t s = t / j->n_kv_heads, g = t % j->n_kv_heads;
    size_t nq = j->q_indptr[s + 1] - j->q_indptr[s], per = queries_per_block(j->group);
    float *sc = j->scratch + worker * j->scratch_per_worker;
    for (size_t t0 = 0; t0 < nq; t0 += per) run_block(j, sc, s, g, t0, nq - t0 < per ? nq - t0 : per);
}

void cpu_flash_attention(const cpu_attention_rows *rows, const uint32_t *q_indptr, const uint32_t *kv_indptr,
                         const uint32_t *kv_indices, size_t n_seqs, size_t n_heads, size_t n_kv_heads,
                         size_t head_dim, const layer_attention *la, workers *pool, float *scratch) {
    flash_job j = {rows,    q_indptr, kv_indptr, kv_indices, n_kv_heads, n_heads / n_kv_heads, head_dim, *la,
                   scratch, flash_scratch_floats(n_heads, n_kv_heads, head_dim), decode_kernels_pick()};
    workers_run(pool, n_seqs * n_kv_heads, task, &j);
}
