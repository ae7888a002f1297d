/*
 * decode_kernels.h: the CPU kernels of a decode step, each over rows read in place: dot products
 * of a few rows against many (the attention's scores, and the few-row linear layers), the online
 * softmax of a tile of scores, and P V. On x86-64 they are compiled for AVX-512VL, for AVX + FMA
 * and for the baseline (decode_kernels.c); decode_kernels_pick gives the set this CPU runs. Every
 * output element is computed by the same operations wherever it falls in a block, so results do
 * not depend on how callers cut their rows or columns.
 */
#ifndef RMLP_CPU_DECODE_KERNELS_H
#define RMLP_CPU_DECODE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct decode_kernels {
    /* out[i * out_stride + j] = scale * x_i . w_j (i < n_rows, j < n_out): x (n_rows, dim); w_j the
     * row at w + (slots != NULL ? slots[j] : j) * w_stride */
    void (*row_dots)(const float *x, size_t n_rows, size_t dim, const float *w, size_t w_stride,
                     const uint32_t *slots, size_t n_out, float scale, float *out, size_t out_stride);
    /* the online softmax of scores (n_rows, nk) into each row's running max cm, sum cl and output
     * obuf (n_rows, hd): scores become e^(score - max), obuf is rescaled when the max grows; a row
     * all -inf that has seen no key yet (cm -inf) is left as it was, its scores 0 */
    void (*softmax)(float *scores, size_t n_rows, size_t nk, float *cm, float *cl, float *obuf, size_t hd);
    /* out (n_rows, hd) += p (n_rows, nk) . V, value j the row at vh + slots[j] * v_stride */
    void (*values)(const float *p, size_t n_rows, size_t nk, const float *vh, size_t v_stride, const uint32_t *slots,
                   size_t hd, float *out);
    const char *name; /* "avx512vl", "avx-fma", "baseline" */
    int family;       /* sets of the same family give the same bits (1: fused multiply-adds, 0: none) */
} decode_kernels;

/* The sets this CPU runs, fastest first, into sets[0 .. cap); returns how many were written. */
size_t decode_kernels_supported(decode_kernels *sets, size_t cap);

/* The fastest set this CPU runs. */
decode_kernels decode_kernels_pick(void);

#endif
