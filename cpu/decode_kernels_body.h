/*
 * decode_kernels_body.h: the CPU decode kernels' bodies (decode_kernels.h says what each does). No
 * include guard: decode_kernels.c includes this file once per instruction set, with
 *   KERNEL(name)   the name of this copy's function (name_avx512, name_fma, name_base),
 *   KERNEL_TARGET  its target attribute (empty for the baseline),
 *   KEEP(v)        keeps a loaded vector in a register (GCC otherwise folds the load into every
 *                  FMA that uses it, and Zen's two load ports become the bottleneck), or nothing,
 *   DOT_ROWS       x rows per block of row_dots (2, or 4 where there are 32 vector registers),
 *   VALUES_ROWS    rows per block of tile_values (3, or 6 where there are 32 vector registers),
 *   WIDE           1 where the copy also has sixteen-lane vectors (AVX-512): the softmax's exp and
 *                  P V then run on them, each element by the same operations as on eight (the
 *                  softmax's sum still gathered in eight lanes in the same order), so the same bits;
 * it undefines them at its end.
 * Vectors are GCC/clang vector extensions of eight floats (v8, v8i and exp8_in_place from vec8.h; LOAD8,
 * STORE8, EVENS, ODDS, LOWS, HIGHS defined by decode_kernels.c); loads and stores go through
 * memcpy (no alignment assumed). decode_kernels.c is built with -ffp-contract=fast, so in the FMA copy `a += x * y` is
 * one fused multiply-add.
 *
 * Every output element is computed by the same sequence of operations wherever it falls in a
 * block (a short block repeats a row or a key and drops the copy), so the result does not depend
 * on how the rows or columns are cut into blocks, nor on DOT_ROWS and VALUES_ROWS: the AVX-512
 * copy gives the FMA copy's bits.
 */

/* The dots of x rows r0 .. r0 + nr (nr <= rb; a short block repeats its last row and drops the
 * copy) with the nkk <= 4 w rows kp (a short block repeats one), into out's columns k0 ..
 * k0 + nkk: each element one accumulator of 8 lanes over dim in order. Inlined with rb (2 or 4) a
 * constant, so the block's accumulators live in registers. */
KERNEL_TARGET __attribute__((always_inline)) static inline void KERNEL(dots_block)(
    const float *x, size_t r0, size_t nr, size_t rb, size_t dim, const float *const *kp, size_t nkk, size_t k0,
    float scale, float *out, size_t out_stride) {
    size_t dim8 = dim & ~(size_t)7;
    const float *qr[4];
    for (size_t i = 0; i < rb; i++) qr[i] = x + (r0 + (i < nr ? i : nr - 1)) * dim;
    v8 a[4][4];
    for (size_t i = 0; i < rb; i++)
        for (size_t j = 0; j < 4; j++) a[i][j] = (v8){0};
#pragma GCC unroll 2 /* two chunks per pass: 6-9% faster on Zen 4 (docs/bench/generation-cpu.md), the same sums */
    for (size_t d = 0; d < dim8; d += 8) {
        v8 xv[4];
        for (size_t i = 0; i < rb; i++) {
            LOAD8(xv[i], qr[i] + d);
            KEEP(xv[i]);
        }
        for (size_t j = 0; j < 4; j++) {
            v8 k;
            LOAD8(k, kp[j] + d);
            KEEP(k);
            for (size_t i = 0; i < rb; i++) a[i][j] += xv[i] * k;
        }
    }
    /* s[i][j] = the sum of a[i][j]'s lanes, ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)):
     * pairs, then quads (c[i]'s lanes 0-3 and 4-7: a[i][0..3]'s two halves), then halves */
    v8 c[4];
    for (size_t i = 0; i < rb; i++) {
        v8 b0 = EVENS(a[i][0], a[i][1]) + ODDS(a[i][0], a[i][1]);
        v8 b1 = EVENS(a[i][2], a[i][3]) + ODDS(a[i][2], a[i][3]);
        c[i] = EVENS(b0, b1) + ODDS(b0, b1);
    }
    for (size_t i0 = 0; i0 < rb && i0 < nr; i0 += 2) {
        v8 s = LOWS(c[i0], c[i0 + 1]) + HIGHS(c[i0], c[i0 + 1]); /* row i0's four sums, then row i0 + 1's */
        if (nkk == 4 && dim8 == dim) {
            s *= scale;
            memcpy(out + (r0 + i0) * out_stride + k0, &s, 4 * sizeof(float));
            if (i0 + 1 < nr) memcpy(out + (r0 + i0 + 1) * out_stride + k0, (float *)&s + 4, 4 * sizeof(float));
            continue;
        }
        for (size_t i = i0; i < i0 + 2 && i < nr; i++)
            for (size_t j = 0; j < nkk; j++) {
                float t = s[4 * (i - i0) + j];
                for (size_t d = dim8; d < dim; d++) { /* KEEP: a vectorised in-order sum would not fuse */
                    t += qr[i][d] * kp[j][d];
                    KEEP(t);
                }
                out[(r0 + i) * out_stride + k0 + j] = t * scale;
            }
    }
}

/* out[i * out_stride + j] = scale * x_i . w_j for i < n_rows, j < n_out: x (n_rows, dim), w_j the
 * row at w + (slots ? slots[j] : j) * w_stride. 4 columns (w rows) at a time, the w rows' block
 * outer (it stays in L1 while the x rows pass), the x rows in blocks of DOT_ROWS, the last ones in
 * blocks of 2. */
KERNEL_TARGET static void KERNEL(row_dots)(const float *x, size_t n_rows, size_t dim, const float *w, size_t w_stride,
                                           const uint32_t *slots, size_t n_out, float scale, float *out,
                                           size_t out_stride) {
    for (size_t k0 = 0; k0 < n_out; k0 += 4) {
        size_t nkk = n_out - k0 < 4 ? n_out - k0 : 4;
        const float *kp[4]; /* a short block repeats its first column */
        for (size_t j = 0; j < 4; j++) {
            size_t at = k0 + (j < nkk ? j : 0);
            kp[j] = w + (slots != NULL ? (size_t)slots[at] : at) * w_stride;
        }
        size_t r0 = 0;
        for (; r0 + DOT_ROWS <= n_rows; r0 += DOT_ROWS)
            KERNEL(dots_block)(x, r0, DOT_ROWS, DOT_ROWS, dim, kp, nkk, k0, scale, out, out_stride);
        for (; r0 < n_rows; r0 += 2)
            KERNEL(dots_block)(x, r0, n_rows - r0 < 2 ? n_rows - r0 : 2, 2, dim, kp, nkk, k0, scale, out, out_stride);
    }
}

/* The online softmax of a tile's scores (n_rows, nk) into each row's running max cm, sum cl and
 * output obuf (n_rows, hd): scores become e^(score - max), obuf is rescaled when the max grows. A
 * row whose scores and max are all -inf (masked, no key seen yet) keeps its state, its scores 0.
 * Eight scores at a time; the last, short block is padded and its extra lanes dropped. */
KERNEL_TARGET static void KERNEL(tile_softmax)(float *scores, size_t n_rows, size_t nk, float *cm, float *cl,
                                               float *obuf, size_t hd) {
    size_t nk8 = nk & ~(size_t)7;
    for (size_t r = 0; r < n_rows; r++) {
        float *s = scores + r * nk, top = cm[r];
        v8 m = (v8){0} + top;
        for (size_t k = 0; k < nk8; k += 8) {
            v8 x;
            LOAD8(x, s + k);
            v8i more = x > m;
            m = (v8)(((v8i)x & more) | ((v8i)m & ~more));
        }
        for (int i = 0; i < 8; i++) top = m[i] > top ? m[i] : top;
        for (size_t k = nk8; k < nk; k++) top = s[k] > top ? s[k] : top;
        if (top == -INFINITY) { /* a row masked whole that has seen no key yet (a sliding window): left alone */
            memset(s, 0, nk * sizeof(float));
            continue;
        }
        v8 sum = {0};
        for (size_t k = 0; k < nk; k += 8) {
#if WIDE
            if (k + 16 <= nk8) { /* two chunks of eight at once, summed as two */
                v16 y;
                memcpy(&y, s + k, sizeof y);
                y -= top;
                exp16_in_place(&y);
                memcpy(s + k, &y, sizeof y);
                v8 lo, hi;
                memcpy(&lo, &y, sizeof lo);
                memcpy(&hi, (const float *)&y + 8, sizeof hi);
                sum += lo;
                sum += hi;
                k += 8;
                continue;
            }
#endif
            v8 x = (v8){0} - INFINITY;
            if (k < nk8) LOAD8(x, s + k);
            else
                for (size_t i = 0; k + i < nk; i++) x[i] = s[k + i];
            x -= top;
            exp8_in_place(&x); /* x <= 0: a score less the running max (vec8.h) */
            if (k < nk8) STORE8(s + k, x);
            else {
                for (size_t i = 0; i < 8; i++) {
                    if (k + i < nk) s[k + i] = x[i];
                    else x[i] = 0.0f;
                }
            }
            sum += x;
        }
        float alpha = expf(cm[r] - top);
        cl[r] = cl[r] * alpha + (((sum[0] + sum[4]) + (sum[1] + sum[5])) + ((sum[2] + sum[6]) + (sum[3] + sum[7])));
        cm[r] = top;
        if (alpha != 1.0f)
            for (size_t d = 0; d < hd; d++) obuf[r * hd + d] *= alpha;
    }
}

/* out rows r0 .. r0 + nr (nr <= rb <= MAXR) += their p rows . V, 32 columns at a time in NV vectors
 * of type V (a short block repeats its last row and drops the copy), each element accumulated over
 * the keys in order: one definition for both widths, so an element gets the same operations on
 * eight lanes and on sixteen. Inlined with rb a constant, so the block's accumulators live in
 * registers. */
#define VALUES_BLOCK(name, V, NV, MAXR)                                                                      \
    KERNEL_TARGET __attribute__((always_inline)) static inline void KERNEL(name)(                            \
        const float *p, size_t r0, size_t nr, size_t rb, size_t nk, const float *vh, size_t v_stride,        \
        const uint32_t *slots, size_t hd, float *out) {                                                      \
        const float *pr[MAXR];                                                                               \
        float *orow[MAXR];                                                                                   \
        for (size_t i = 0; i < rb; i++) {                                                                    \
            size_t r = r0 + (i < nr ? i : nr - 1);                                                           \
            pr[i] = p + r * nk, orow[i] = out + r * hd;                                                      \
        }                                                                                                    \
        for (size_t d0 = 0; d0 + 32 <= hd; d0 += 32) {                                                       \
            V a[MAXR][NV];                                                                                   \
            for (size_t i = 0; i < rb; i++)                                                                  \
                for (size_t c = 0; c < NV; c++) memcpy(&a[i][c], orow[i] + d0 + c * (32 / NV), sizeof(V));   \
            for (size_t j = 0; j < nk; j++) {                                                                \
                const float *v = vh + (size_t)slots[j] * v_stride + d0;                                      \
                float w[MAXR];                                                                               \
                for (size_t i = 0; i < rb; i++) w[i] = pr[i][j];                                             \
                for (size_t c = 0; c < NV; c++) {                                                            \
                    V x;                                                                                     \
                    memcpy(&x, v + c * (32 / NV), sizeof x);                                                 \
                    KEEP(x);                                                                                 \
                    for (size_t i = 0; i < rb; i++) a[i][c] += w[i] * x;                                     \
                }                                                                                            \
            }                                                                                                \
            for (size_t i = rb; i-- > 0;) /* the copies first: a repeated row's own store comes last */     \
                for (size_t c = 0; c < NV; c++) memcpy(orow[i] + d0 + c * (32 / NV), &a[i][c], sizeof(V));   \
        }                                                                                                    \
        for (size_t i = 0; i < nr; i++)                                                                      \
            for (size_t j = 0; j < nk; j++) {                                                                \
                const float *v = vh + (size_t)slots[j] * v_stride;                                           \
                for (size_t d = hd & ~(size_t)31; d < hd; d++) orow[i][d] += pr[i][j] * v[d];               \
            }                                                                                                \
    }

VALUES_BLOCK(values_block, v8, 4, 6)
#if WIDE
VALUES_BLOCK(values_block16, v16, 2, 12) /* blocks of up to 12 rows on sixteen lanes */
#endif
#undef VALUES_BLOCK

/* out (n_rows, hd) += p (n_rows, nk) . V, value j the row at vh + slots[j] * v_stride: blocks of
 * VALUES_ROWS rows, then of 3, the last one or two rows as a block of their own (WIDE: blocks of
 * 12 rows on sixteen lanes first). */
KERNEL_TARGET static void KERNEL(tile_values)(const float *p, size_t n_rows, size_t nk, const float *vh,
                                              size_t v_stride, const uint32_t *slots, size_t hd, float *out) {
    size_t r0 = 0;
#if WIDE
    for (; r0 + 12 <= n_rows; r0 += 12) KERNEL(values_block16)(p, r0, 12, 12, nk, vh, v_stride, slots, hd, out);
#endif
    for (; r0 + VALUES_ROWS <= n_rows; r0 += VALUES_ROWS)
        KERNEL(values_block)(p, r0, VALUES_ROWS, VALUES_ROWS, nk, vh, v_stride, slots, hd, out);
    for (; r0 + 3 <= n_rows; r0 += 3) KERNEL(values_block)(p, r0, 3, 3, nk, vh, v_stride, slots, hd, out);
    if (r0 < n_rows) KERNEL(values_block)(p, r0, n_rows - r0, 2, nk, vh, v_stride, slots, hd, out);
}

#undef KERNEL
#undef KERNEL_TARGET
#undef KEEP
#undef DOT_ROWS
#undef VALUES_ROWS
#undef WIDE
