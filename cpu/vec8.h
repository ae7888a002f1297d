/*
 * vec8.h: eight- and sixteen-lane float vectors (GCC/Clang vector extensions) and the e^x that
 * the fused row passes (rows.c, rows_body.h) and the decode kernels (decode_kernels_body.h)
 * share. Everything here is inlined into each instruction-set copy of its callers, so it takes
 * their target and their file's floating-point contraction, and no vector crosses a call.
 */
#ifndef RMLP_CPU_VEC8_H
#define RMLP_CPU_VEC8_H

#include <stdint.h>

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32))); /* a comparison's lanes: -1 true, 0 false */
typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

#define VSPLAT(V, c) ((V){0} + (c)) /* c in every lane of a vector type V */
#define VEC8_INLINE static inline __attribute__((always_inline))

/* The lanes of a mask (-1 true, 0 false) from a, the others from b (VI: the mask's type). */
#define VSELECT(VI, mask, a, b) ((__typeof__(a))(((VI)(a) & (mask)) | ((VI)(b) & ~(mask))))

/* e^x, within 2 ulp of expf: x clamped to [-87.3, 88.3] (below, e^-87.3, about 1e-38, where expf
 * gives a subnormal or 0: less than an fp32 sum of softmax weights can hold next to the max's 1),
 * x = n ln2 + r with n the nearest integer (the 1.5 * 2^23 trick) and ln 2 in two parts, e^r by
 * Cephes' degree-6 polynomial for expf, 2^n built in the exponent bits. One definition for each
 * width (V floats, VI their int32 lanes): each lane is computed by the same operations. */
#define VEC_EXP(name, V, VI)                                                                     \
    VEC8_INLINE V name(V x) {                                                                    \
        x = VSELECT(VI, x < VSPLAT(V, -87.3f), VSPLAT(V, -87.3f), x);                            \
        x = VSELECT(VI, x > VSPLAT(V, 88.3f), VSPLAT(V, 88.3f), x);                              \
        V n = (x * VSPLAT(V, 1.44269504088896341f) + VSPLAT(V, 12582912.0f)) - VSPLAT(V, 12582912.0f); \
        V r = x - n * VSPLAT(V, 0.693359375f);                                                   \
        r = r - n * VSPLAT(V, -2.12194440e-4f);                                                  \
        V p = VSPLAT(V, 1.9875691500e-4f);                                                       \
        p = p * r + VSPLAT(V, 1.3981999507e-3f);                                                 \
        p = p * r + VSPLAT(V, 8.3334519073e-3f);                                                 \
        p = p * r + VSPLAT(V, 4.1665795894e-2f);                                                 \
        p = p * r + VSPLAT(V, 1.6666665459e-1f);                                                 \
        p = p * r + VSPLAT(V, 5.0000001201e-1f);                                                 \
        p = p * r * r + r + VSPLAT(V, 1.0f);                                                     \
        VI e = (__builtin_convertvector(n, VI) + 127) << 23;                                     \
        return p * (V)e;                                                                         \
    }

VEC_EXP(exp8, v8, v8i)
VEC_EXP(exp16, v16, v16i)

/* *x = exp8(*x), for a caller with a target attribute of its own (the decode kernels' copies):
 * Clang refuses 32-byte vectors passed by value from it to a function without that target, even
 * one always inlined; a pointer crosses that line. */
VEC8_INLINE void exp8_in_place(v8 *x) { *x = exp8(*x); }
VEC8_INLINE void exp16_in_place(v16 *x) { *x = exp16(*x); }

#endif
