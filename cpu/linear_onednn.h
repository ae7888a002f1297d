/*
 * linear_onednn.h: oneDNN's GEMMs. The fp32 sgemm, where cpu/sgemm.h chooses it; and x W^T with
 * W held in bf16 through oneDNN's bf16 x bf16 -> fp32 matmul, the
 * hardware way of a bf16-weight model (rmlp_model_params::cpu_bf16_gemm) on a CPU with
 * AVX512-BF16 or AMX-BF16. oneDNN (libdnnl.so.2, Debian's libdnnl2) is opened with dlopen the
 * first time a model asks for it, so the library neither links it nor loads it otherwise. x is
 * rounded to bf16 (nearest even) row by row before the matmul; the products of two bf16 are exact
 * in fp32 and oneDNN accumulates in fp32, so the result is the widening path's (linear_bf16.h) on
 * the rounded x, up to summation order and oneDNN's flushing of subnormals.
 */
#ifndef RMLP_CPU_LINEAR_ONEDNN_H
#define RMLP_CPU_LINEAR_ONEDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workers.h"

/* Whether the CPU reports AVX512-BF16 or AMX-BF16 (cpuid; false off x86). */
bool onednn_cpu_has_bf16(void);

/* Whether this process can run the hardware bf16 matmul: the CPU reports AVX512-BF16 or AMX-BF16
 * (cpuid), oneDNN loads, its effective ISA includes bf16 instructions (avx512_core_bf16 or
 * avx512_core_amx: the OS enables their state) and it creates a bf16 matmul. true: `what` says
 * which oneDNN and ISA ("oneDNN 2.6.3, ISA avx512_core_amx"); false: `why` says what was missing.
 * check_cpu false (the tests) skips the cpuid and ISA checks, so the loading and the creation of a
 * primitive run on any CPU. Thread-safe; oneDNN is loaded once per process and stays loaded. */
bool onednn_bf16_probe(bool check_cpu, char *what, size_t what_size, char *why, size_t why_size);

/* y (rows, out_dim) = bf16(x) (rows, in_dim) W^T + bias; W (out_dim, in_dim) bf16 bits; bias
 * (out_dim) or NULL; x16 (rows * in_dim) scratch for bf16(x), rounded on pool's threads (NULL: the
 * calling thread); oneDNN's threads: rmlp_cpu_threads(). Only after onednn_bf16_probe returned
 * true. Returns 0, or oneDNN's status (nonzero) when it refused or failed, y then unspecified: the
 * caller runs the widening path instead. */
int cpu_linear_onednn(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                      size_t out_dim, float *y, uint16_t *x16, workers *pool);

/* The tests' way into the same descriptors, memories, stream and arguments with fp32 x and W
 * (out_dim, in_dim), which oneDNN runs on any x86-64 CPU: y = x W^T + bias. Returns 0, else
 * nonzero with `why` (oneDNN missing or its status). */
int onednn_f32_matmul(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                      float *y, char *why, size_t why_size);

/* Whether got and want (n floats each) agree within rel of want's largest |value| (*peak), *worst
 * the largest |got - want| (a NaN counts as beyond any bound): the self-checks' test of oneDNN
 * against the path it stands in for. */
bool onednn_close(const float *got, const float *want, size_t n, float rel, float *worst, float *peak);

/* Whether oneDNN loads for its fp32 sgemm: 2 where its effective ISA includes avx512_core, 1
 * avx2, 0 less, `what` saying which oneDNN and ISA; -1 with `why` where it does not load. */
int onednn_sgemm_probe(char *what, size_t what_size, char *why, size_t why_size);

/* y (rows, n at row stride ldy) = x (rows, in_dim) W^T + beta y, W (n, in_dim), through oneDNN's
 * sgemm on the calling thread (its OpenMP count set to 1 for the call and restored). Only after
 * onednn_sgemm_probe returned 0 or more. Returns 0, or oneDNN's status (nonzero: y unspecified). */
int onednn_sgemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                    size_t ldy);

/* The check a model runs before it takes this path: 8 rows of a fixed pattern times W (out_dim,
 * in_dim) through oneDNN and through the widening path on the same rounded rows, within 1e-4 of
 * the largest |value|. Returns 1; 0 with `why` (oneDNN's refusal or the disagreement); -1 with
 * `why` when its buffers could not be allocated. */
int onednn_bf16_self_check(const uint16_t *w, size_t in_dim, size_t out_dim, char *why, size_t why_size);

#endif
