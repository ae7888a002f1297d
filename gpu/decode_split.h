/*
 * decode_split.h: a decode step's attention laid out for FlashInfer's batch decode kernel
 * (gpu/flashinfer_decode.h). The kernel takes one query row per request and reads each request's
 * keys itself, so a shared prefix cannot be read once for several rows as the chains of
 * cpu/decode_attention.h are: each new row is one request over every key of its path (the keys of
 * the chains it is a member of, in the order of its memberships), its keys are cut into chunks of
 * one size (a thread block per chunk and KV head), and the chunks' partial states are merged per
 * row with the log-sum-exp (FlashInfer's split-KV decode, its plan made here). The chunk size is
 * the larger of DECODE_SPLIT_MIN_CHUNK keys (the lower bound FlashInfer's own planner uses) and
 * ceil(n_keys / target_chunks), so a step has at most n_rows + target_chunks chunks: enough blocks
 * to fill the device when rows are few and long, no more than needed when they are many.
 * Plain C, no CUDA (tests/test_decode_split.c checks it on the CPU). Internal to the library.
 */
#ifndef RMLP_GPU_DECODE_SPLIT_H
#define RMLP_GPU_DECODE_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DECODE_SPLIT_MIN_CHUNK 128

/* Where decode_split_build put each array in its words (offsets in uint32 words), and the counts. */
typedef struct decode_split {
    uint32_t n_rows, n_keys, n_chunks, chunk; /* chunk: keys per chunk (a row's last one may hold fewer) */
    size_t at_kv_indptr;  /* (n_rows + 1) row r's keys are kv_indices[kv_indptr[r] .. kv_indptr[r+1]) */
    size_t at_kv_indices; /* (n_keys) slots */
    size_t at_request;    /* (n_chunks) the row of each chunk */
    size_t at_tile;       /* (n_chunks) its index among its row's chunks */
    size_t at_o_indptr;   /* (n_rows + 1) row r's chunks are o_indptr[r] .. o_indptr[r+1] */
    size_t at_chunk;      /* (1) chunk */
    size_t words;         /* in all */
} decode_split;

/* The words decode_split_build needs at most for n_rows rows whose paths hold n_keys keys in all,
 * with target_chunks. */
size_t decode_split_words(size_t n_rows, size_t n_keys, size_t target_chunks);

/* Lays a step out into words[0 .. out->words) from its chains as gpu_decode_chains packs them
 * (gpu/runner.h): chain c's keys keys[key_indptr[c] .. key_indptr[c+1]) and memberships
 * member_indptr[c] .. member_indptr[c+1] (n_chains + 1 each), row r's memberships
 * row_members[row_indptr[r] .. row_indptr[r+1]) (n_rows + 1). A row without keys gets no chunk
 * (the merge writes it zeros). target_chunks >= 1. Returns false, writing nothing meaningful, when
 * the step does not fit `room` words or its arrays are inconsistent (a membership past the
 * chains', more than 2^31 - 1 keys). */
bool decode_split_build(const uint32_t *key_indptr, const uint32_t *keys, const uint32_t *member_indptr,
                        size_t n_chains, const uint32_t *row_indptr, const uint32_t *row_members, size_t n_rows,
                        size_t target_chunks, uint32_t *words, size_t room, decode_split *out);

#ifdef __cplusplus
}
#endif

#endif
