/*
 * sgemm.h: which library the CPU path's fp32 GEMMs run (rmlp_cpu_sgemm, RADIX_MLP_CPU_SGEMM):
 * OpenBLAS, which the library links, or oneDNN's sgemm (linear_onednn.h) where OpenBLAS runs
 * kernels written for an older CPU than this one. OpenBLAS picks its kernels once per process
 * from the CPU model it recognises; a model newer than its release falls back to a generic core
 * (Debian 12's 0.3.21 on an Emerald Rapids Xeon: "Prescott", SSE3, about a fifth of the
 * AVX-512 kernels' rate, docs/backends.md). The choice is process-wide, as OpenBLAS's is, made
 * once (at the first CPU model load, the first rmlp_cpu_sgemm or the first GEMM) and kept.
 */
#ifndef RMLP_CPU_SGEMM_H
#define RMLP_CPU_SGEMM_H

#include <stddef.h>

#include "radix_mlp/types.h"

/* The process's choice, made on the first call: RMLP_OK with *kind and *detail (static storage:
 * which library and kernels, and why); a bad RADIX_MLP_CPU_SGEMM (RMLP_ERR_INVALID_ARGUMENT) or
 * onednn asked for where it cannot run (RMLP_ERR_UNSUPPORTED) fail naming `fn`, on every call. */
rmlp_status cpu_sgemm_choose(const char *fn, rmlp_cpu_sgemm_kind *kind, const char **detail);

/* y (rows, n at row stride ldy) = x (rows, in_dim) W^T + beta y, W (n, in_dim), on the calling
 * thread, through the chosen library (OpenBLAS where the choice failed, or where oneDNN refused
 * this call: counted, cpu_sgemm_fallbacks). */
void cpu_sgemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                  size_t ldy);

/* GEMMs that oneDNN refused and OpenBLAS ran instead, since the process started. */
uint64_t cpu_sgemm_fallbacks(void);

#endif
