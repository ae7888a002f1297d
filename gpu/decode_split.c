/*
 * decode_split.c: a decode step's rows and chunks for FlashInfer's batch decode (decode_split.h).
 */
#include "decode_split.h"

size_t decode_split_words(size_t n_rows, size_t n_keys, size_t target_chunks) {
    return 2 * (n_rows + 1) + n_keys + 2 * (n_rows + target_chunks) + 1;
}

/* The chain of membership m: the last c with member_indptr[c] <= m (chains without members share
 * their start with the next one), or n_chains when m lies past every chain. */
static size_t chain_of(const uint32_t *member_indptr, size_t n_chains, uint32_t m) {
    if (n_chains == 0 || m >= member_indptr[n_chains]) return n_chains;
    size_t lo = 0, hi = n_chains; /* member_indptr[lo] <= m < member_indptr[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (member_indptr[mid] <= m)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

bool decode_split_build(const uint32_t *key_indptr, const uint32_t *keys, const uint32_t *member_indptr,
                        size_t n_chains, const uint32_t *row_indptr, const uint32_t *row_members, size_t n_rows,
                        size_t target_chunks, uint32_t *words, size_t room, decode_split *out) {
    if (target_chunks == 0 || n_rows > UINT32_MAX / 2) return false;
    /* Pass 1: each row's key count (into kv_indptr's place, as a running sum), checked. */
    uint64_t n_keys = 0;
    if (room < n_rows + 1) return false;
    words[0] = 0;
    for (size_t r = 0; r < n_rows; r++) {
        for (uint32_t i = row_indptr[r]; i < row_indptr[r + 1]; i++) {
            size_t c = chain_of(member_indptr, n_chains, row_members[i]);
            if (c == n_chains) return false;
            n_keys += key_indptr[c + 1] - key_indptr[c];
        }
        if (n_keys > INT32_MAX) return false; /* FlashInfer's indices are int32 */
        words[r + 1] = (uint32_t)n_keys;
    }
    uint64_t chunk = (n_keys + target_chunks - 1) / target_chunks;
    if (chunk < DECODE_SPLIT_MIN_CHUNK) chunk = DECODE_SPLIT_MIN_CHUNK;
    uint64_t n_chunks = 0;
    for (size_t r = 0; r < n_rows; r++) n_chunks += (words[r + 1] - words[r] + chunk - 1) / chunk;
    decode_split s = {(uint32_t)n_rows, (uint32_t)n_keys, (uint32_t)n_chunks, (uint32_t)chunk, 0, 0, 0, 0, 0, 0, 0};
    s.at_kv_indices = n_rows + 1;
    s.at_request = s.at_kv_indices + n_keys;
    s.at_tile = s.at_request + n_chunks;
    s.at_o_indptr = s.at_tile + n_chunks;
    s.at_chunk = s.at_o_indptr + n_rows + 1;
    s.words = s.at_chunk + 1;
    if (s.words > room) return false;
    /* Pass 2: each row's keys, chain by chain in its membership order, then its chunks. */
    uint32_t *indices = words + s.at_kv_indices, *o_indptr = words + s.at_o_indptr;
    uint32_t at = 0, block = 0;
    for (size_t r = 0; r < n_rows; r++) {
        for (uint32_t i = row_indptr[r]; i < row_indptr[r + 1]; i++) {
            size_t c = chain_of(member_indptr, n_chains, row_members[i]);
            for (uint32_t k = key_indptr[c]; k < key_indptr[c + 1]; k++) indices[at++] = keys[k];
        }
        o_indptr[r] = block;
        uint32_t len = words[r + 1] - words[r];
        for (uint32_t t = 0; (uint64_t)t * chunk < len; t++, block++)
            words[s.at_request + block] = (uint32_t)r, words[s.at_tile + block] = t;
    }
    o_indptr[n_rows] = block;
    words[s.at_chunk] = (uint32_t)chunk;
    *out = s;
    return true;
}
