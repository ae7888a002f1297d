/*
 * vec8.h: eight-lane float vectors (GCC/Clang vector extensions) and the e^x that the fused row
 * passes (rows.c) and the decode kernels (decode_kernels_body.h) share. Everything here is inlined
 * into each instruction-set copy of its callers, so it takes their target and their file's
 * floating-point contraction, and no vector crosses a call.
 */
#ifndef RMLP_CPU_VEC8_H
#define RMLP_CPU_VEC8_H

#include <stdint.h>

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32))); /* a comparison's lanes: -1 true, 0 false */

#define SPLAT(c) ((v8){(c), (c), (c), (c), (c), (c), (c), (c)})
#define VEC8_INLINE static inline __attribute__((always_inline))

/* The lanes of a mask (-1 true, 0 false) from a, the others from b. */
VEC8_INLINE v8 select8(v8i mask, v8 a, v8 b) { return (v8)(((v8i)a & mask) | ((v8i)b & ~mask)); }

/* e^x, within 2 ulp of expf: x clamped to [-87.3, 88.3] (below, e^-87.3, about 1e-38, where expf
 * gives a subnormal or 0: less than an fp32 sum of softmax weights can hold next to the max's 1),
 * x = n ln2 + r with n the nearest integer (the 1.5 * 2^23 trick) and ln 2 in two parts, e^r by
 * Cephes' degree-6 polynomial for expf, 2^n built in the exponent bits. */
VEC8_INLINE v8 exp8(v8 x) {
    x = select8(x < SPLAT(-87.3f), SPLAT(-87.3f), x);
    x = select8(x > SPLAT(88.3f), SPLAT(88.3f), x);
    v8 n = (x * SPLAT(1.44269504088896341f) + SPLAT(12582912.0f)) - SPLAT(12582912.0f);
    v8 r = x - n * SPLAT(0.693359375f);
    r = r - n * SPLAT(-2.12194440e-4f);
    v8 p = SPLAT(1.9875691500e-4f);
    p = p * r + SPLAT(1.3981999507e-3f);
    p = p * r + SPLAT(8.3334519073e-3f);
    p = p * r + SPLAT(4.1665795894e-2f);
    p = p * r + SPLAT(1.6666665459e-1f);
    p = p * r + SPLAT(5.0000001201e-1f);
    p = p * r * r + r + SPLAT(1.0f);
    v8i e = (__builtin_convertvector(n, v8i) + 127) << 23;
    return p * (v8)e;
}

/* *x = exp8(*x), for a caller with a target attribute of its own (the decode kernels' copies):
 * Clang refuses 32-byte vectors passed by value from it to a function without that target, even
 * one always inlined; a pointer crosses that line. */
VEC8_INLINE void exp8_in_place(v8 *x) { *x = exp8(*x); }

#endif
