/*
 * attention_tiles.h: how the built-in CUDA attention (gpu/attention.cu) lays its grid over the
 * query tiles of a varlen batch. The grid's size depends on the counts alone (n_tokens, n_seqs),
 * never on the sequence lengths, so a forward captured in a CUDA graph stays correct when it is
 * replayed after rmlp_context_set_plan with another batch of the same counts (a sizing from the
 * longest sequence at capture would skip the rows of a longer one).
 *
 * Sequence s owns tiles [first(s), first(s + 1)) with first(s) = cu_seqlens[s] / ATT_BQ + s: that
 * is floor(cu[s+1]/BQ) - floor(cu[s]/BQ) + 1 >= ceil(len_s / BQ) tiles, so its rows are covered,
 * and at most one of its tiles finds no row (an empty sequence has exactly that one). A block finds
 * its sequence by binary search over cu_seqlens. Plain C, so a CPU test checks the mapping.
 */
#ifndef RMLP_GPU_ATTENTION_TILES_H
#define RMLP_GPU_ATTENTION_TILES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ATT_TILES_FN static __host__ __device__ inline
#else
#define ATT_TILES_FN static inline
#endif

#define ATT_BQ 16 /* query rows per tile (per block) */

/* The grid's tile count for a batch: n_tokens / ATT_BQ + n_seqs. */
ATT_TILES_FN size_t att_grid_tiles(size_t n_tokens, size_t n_seqs) { return n_tokens / ATT_BQ + n_seqs; }

/* The first tile of sequence s, whose rows start at cu_s = cu_seqlens[s]. */
ATT_TILES_FN size_t att_first_tile(uint32_t cu_s, uint32_t s) { return (size_t)(cu_s / ATT_BQ) + s; }

/* The sequence that owns tile `tile` (< att_grid_tiles): the last s < n_seqs whose first tile is
 * at most `tile`. cu_seqlens (n_seqs + 1), n_seqs >= 1. */
ATT_TILES_FN uint32_t att_tile_seq(const uint32_t *cu_seqlens, uint32_t n_seqs, size_t tile) {
    uint32_t lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (att_first_tile(cu_seqlens[mid], mid) <= tile)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

#endif
