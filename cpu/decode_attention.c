/*
 * decode_attention.c: a decode step's attention on the CPU, by chains of shared keys
 * (decode_attention.h). Per chain and KV head: the chain's queries' grouped heads gathered into one
 * dense block (rows = queries x group), keys in tiles of DECODE_TILE slots (read in place when the
 * tile's slots are consecutive, else copied once for all the chain's queries), per tile one sgemm
 * for the scores and one for P V (an sgemv per row for a chain of FEW_ROWS rows or fewer) into the
 * chain's running (max, sum, acc) per row, rescaled when the max grows; the chain's state is then
 * merged into each (query, head)'s with the log-sum-exp.
 */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "decode_attention.h"

#define DECODE_TILE 512
/* A chain of at most this many query rows (a sequence's own part, one query's group of heads)
 * reads its keys by GEMV per row: a GEMM of so few rows spends more on packing the tile than on
 * its multiply-adds. */
#define FEW_ROWS 4
#define NO_CHAIN UINT32_MAX

size_t decode_max_chains(size_t n_queries) { return 2 * n_queries + 1; }

size_t decode_max_members(size_t n_queries, size_t max_path) {
    return n_queries * (n_queries < max_path ? n_queries : max_path) + 1;
}

/* The end of the chain of path[p ..): the nodes with the same number of queries below. */
static size_t chain_end(const uint32_t *path, size_t len, size_t p, const uint32_t *below) {
    size_t q = p + 1;
    while (q < len && below[path[q]] == below[path[p]]) q++;
    return q;
}

size_t decode_build_chains(const uint32_t *paths, size_t max_path, const uint32_t *path_len, size_t n_queries,
                           bool shared, uint32_t *below, uint32_t *chain_of, decode_chain *chains, uint32_t *members) {
    if (!shared) {
        for (size_t r = 0; r < n_queries; r++) {
            chains[r] = (decode_chain){paths + r * max_path, path_len[r], (uint32_t)r, 1};
            members[r] = (uint32_t)r;
        }
        return n_queries;
    }
    for (size_t r = 0; r < n_queries; r++)
        for (size_t p = 0; p < path_len[r]; p++) below[paths[r * max_path + p]]++;
    size_t n = 0;
    for (size_t r = 0; r < n_queries; r++) { /* the chains, in order of first sight; count their queries */
        const uint32_t *path = paths + r * max_path;
        for (size_t p = 0, q; p < path_len[r]; p = q) {
            q = chain_end(path, path_len[r], p, below);
            if (chain_of[path[p]] == NO_CHAIN) {
                chain_of[path[p]] = (uint32_t)n;
                chains[n++] = (decode_chain){path + p, (uint32_t)(q - p), 0, 0};
            }
            chains[chain_of[path[p]]].count++;
        }
    }
    for (size_t c = 0, at = 0; c < n; c++) chains[c].first = (uint32_t)at, at += chains[c].count, chains[c].count = 0;
    for (size_t r = 0; r < n_queries; r++) { /* members, ascending */
        const uint32_t *path = paths + r * max_path;
        for (size_t p = 0, q; p < path_len[r]; p = q) {
            q = chain_end(path, path_len[r], p, below);
            decode_chain *c = &chains[chain_of[path[p]]];
            members[c->first + c->count++] = (uint32_t)r;
        }
    }
    for (size_t r = 0; r < n_queries; r++)
        for (size_t p = 0; p < path_len[r]; p++) below[paths[r * max_path + p]] = 0, chain_of[paths[r * max_path + p]] = NO_CHAIN;
    return n;
}

size_t decode_scratch_floats(size_t n_queries, size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    size_t group = n_heads / n_kv_heads, rows = n_queries * group;
    return n_queries * n_heads * (head_dim + 2)          /* each (query, head): max, sum, acc */
           + rows * (2 * head_dim + DECODE_TILE + 2)     /* a chain's queries, acc, scores, max, sum */
           + 2 * (size_t)DECODE_TILE * head_dim + 1;     /* a tile's K and V, copied */
}

static int consecutive(const uint32_t *slots, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (slots[i] != slots[0] + i) return 0;
    return 1;
}

/* Merges the partial state (m2, l2, acc2) into (m, l, acc) of head_dim floats. */
static void merge_state(float *m, float *l, float *acc, float m2, float l2, const float *acc2, size_t head_dim) {
    float top = *m > m2 ? *m : m2, a = expf(*m - top), b = expf(m2 - top);
    *l = *l * a + l2 * b;
    for (size_t d = 0; d < head_dim; d++) acc[d] = acc[d] * a + acc2[d] * b;
    *m = top;
}

void cpu_decode_attention(const cpu_attention_rows *rows, const decode_chain *chains, size_t n_chains,
                          const uint32_t *members, size_t n_queries, size_t n_heads, size_t n_kv_heads,
                          size_t head_dim, float scale, float *scratch) {
    size_t group = n_heads / n_kv_heads, hd = head_dim, khs = rows->kv_head_stride ? rows->kv_head_stride : hd;
    float *sm = scratch, *sl = sm + n_queries * n_heads, *sacc = sl + n_queries * n_heads;
    float *qbuf = sacc + n_queries * n_heads * hd, *obuf = qbuf + n_queries * group * hd;
    float *scores = obuf + n_queries * group * hd, *cm = scores + n_queries * group * DECODE_TILE;
    float *cl = cm + n_queries * group, *kbuf = cl + n_queries * group, *vbuf = kbuf + (size_t)DECODE_TILE * hd;
    for (size_t i = 0; i < n_queries * n_heads; i++) sm[i] = -INFINITY, sl[i] = 0.0f;
    memset(sacc, 0, n_queries * n_heads * hd * sizeof(float));
    for (size_t c = 0; c < n_chains; c++) {
        const decode_chain *ch = &chains[c];
        const uint32_t *mem = members + ch->first;
        size_t n_rows = (size_t)ch->count * group;
        for (size_t g = 0; g < n_kv_heads; g++) {
            for (size_t i = 0; i < ch->count; i++) /* the group's heads of a query row are contiguous */
                memcpy(qbuf + i * group * hd, rows->q + (size_t)mem[i] * rows->q_stride + g * group * hd,
                       group * hd * sizeof(float));
            for (size_t r = 0; r < n_rows; r++) cm[r] = -INFINITY, cl[r] = 0.0f;
            memset(obuf, 0, n_rows * hd * sizeof(float));
            for (size_t t0 = 0; t0 < ch->n_keys; t0 += DECODE_TILE) {
                size_t nk = ch->n_keys - t0 < DECODE_TILE ? ch->n_keys - t0 : DECODE_TILE;
                const uint32_t *slots = ch->keys + t0;
                const float *kh = rows->k + g * khs, *vh = rows->v + g * khs; /* this head's K and V rows */
                const float *kp = kh + (size_t)slots[0] * rows->k_stride, *vp = vh + (size_t)slots[0] * rows->v_stride;
                int ks = (int)rows->k_stride, vs = (int)rows->v_stride;
                if (!consecutive(slots, nk)) {
                    for (size_t p = 0; p < nk; p++) {
                        memcpy(kbuf + p * hd, kh + (size_t)slots[p] * rows->k_stride, hd * sizeof(float));
                        memcpy(vbuf + p * hd, vh + (size_t)slots[p] * rows->v_stride, hd * sizeof(float));
                    }
                    kp = kbuf, vp = vbuf, ks = vs = (int)hd;
                }
                if (n_rows <= FEW_ROWS)
                    for (size_t r = 0; r < n_rows; r++)
                        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nk, (int)hd, scale, kp, ks, qbuf + r * hd, 1,
                                    0.0f, scores + r * nk, 1);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_rows, (int)nk, (int)hd, scale, qbuf,
                                (int)hd, kp, ks, 0.0f, scores, (int)nk);
                for (size_t r = 0; r < n_rows; r++) {
                    float *s = scores + r * nk, top = cm[r];
                    for (size_t k = 0; k < nk; k++) top = s[k] > top ? s[k] : top;
                    float alpha = expf(cm[r] - top), sum = 0.0f;
                    for (size_t k = 0; k < nk; k++) sum += s[k] = expf(s[k] - top);
                    cl[r] = cl[r] * alpha + sum;
                    cm[r] = top;
                    if (alpha != 1.0f)
                        for (size_t d = 0; d < hd; d++) obuf[r * hd + d] *= alpha;
                }
                if (n_rows <= FEW_ROWS)
                    for (size_t r = 0; r < n_rows; r++)
                        cblas_sgemv(CblasRowMajor, CblasTrans, (int)nk, (int)hd, 1.0f, vp, vs, scores + r * nk, 1, 1.0f,
                                    obuf + r * hd, 1);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n_rows, (int)hd, (int)nk, 1.0f,
                                scores, (int)nk, vp, vs, 1.0f, obuf, (int)hd);
            }
            for (size_t i = 0; i < ch->count; i++)
                for (size_t j = 0; j < group; j++) {
                    size_t at = (size_t)mem[i] * n_heads + g * group + j, r = i * group + j;
                    merge_state(&sm[at], &sl[at], sacc + at * hd, cm[r], cl[r], obuf + r * hd, hd);
                }
        }
    }
    for (size_t q = 0; q < n_queries; q++)
        for (size_t h = 0; h < n_heads; h++) {
            size_t at = q * n_heads + h;
            float inv = 1.0f / sl[at];
            for (size_t d = 0; d < hd; d++) rows->out[q * rows->out_stride + h * hd + d] = sacc[at * hd + d] * inv;
        }
}
