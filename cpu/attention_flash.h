/*
 * attention_flash.h: causal prefill attention on the CPU, flash-style: per sequence and KV head,
 * a block of query rows (their grouped heads together) walks the keys it sees in tiles of 64, with
 * the decode kernels (decode_kernels.h) as the tile's micro-kernels (Q K^T dots, online softmax in
 * fp32, P V), so no score row longer than a tile is ever held; tasks (sequence, KV head) run on a
 * pool (workers.h). One kernel for both layouts: a sequence's keys are consecutive rows (full
 * space) or listed compact rows (compact space: its path), its queries the last rows of its keys'
 * span (bottom-right aligned). A row's result depends only on its position and keys, not on the
 * pool or on which other rows share its block.
 */
#ifndef RMLP_CPU_ATTENTION_FLASH_H
#define RMLP_CPU_ATTENTION_FLASH_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_ops.h"
#include "workers.h"

/* Floats of scratch one pool thread needs (the caller gives workers_count(pool) times this). */
size_t flash_scratch_floats(size_t n_heads, size_t n_kv_heads, size_t head_dim);

/* Queries of sequence s: rows q_indptr[s] .. q_indptr[s+1] of `rows`; its keys: key j (j < L =
 * kv_indptr[s+1] - kv_indptr[s]) is row kv_indices[kv_indptr[s] + j], or with kv_indices NULL row
 * kv_indptr[s] + j; query t of n sits at key position p = L - n + t and sees keys 0 .. p, or within
 * la's window the last la->window of them; scores scaled and soft-capped as la says (model_ext.h).
 * Writes the queries' rows of out. scratch: flash_scratch_floats * workers_count(pool). */
void cpu_flash_attention(const cpu_attention_rows *rows, const uint32_t *q_indptr, const uint32_t *kv_indptr,
                         const uint32_t *kv_indices, size_t n_seqs, size_t n_heads, size_t n_kv_heads,
                         size_t head_dim, const layer_attention *la, workers *pool, float *scratch);

#endif
