/*
 * rope_reference.h: the CPU path's q/k heads (cpu/cpu_ops.h) on fused qkv rows, what the device's
 * gpu_qk_norm_rope is compared with (test_gpu_kernels.c, test_gpu_rope.c).
 */
#ifndef RMLP_TESTS_ROPE_REFERENCE_H
#define RMLP_TESTS_ROPE_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_ops.h"

/* In place on x (rows, stride): the nq query heads then the nkv key heads of head_dim hd, each
 * RMSNorm'ed with qn / kn (hd) when qn is non-NULL, then rotated at pos (rows) with theta. */
static inline void qk_norm_rope_reference(float *x, size_t rows, size_t stride, size_t nq, size_t nkv, size_t hd,
                                          const float *qn, const float *kn, double eps, const uint32_t *pos,
                                          double theta) {
    for (size_t r = 0; r < rows && qn != NULL; r++) {
        cpu_rmsnorm(x + r * stride, nq, hd, hd, qn, eps, x + r * stride);
        cpu_rmsnorm(x + r * stride + nq * hd, nkv, hd, hd, kn, eps, x + r * stride + nq * hd);
    }
    cpu_rope(x, rows, stride, nq, hd, pos, theta);
    cpu_rope(x + nq * hd, rows, stride, nkv, hd, pos, theta);
}

#endif
