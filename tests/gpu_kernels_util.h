/*
 * gpu_kernels_util.h: what the tests of the CUDA kernels share (test_gpu_kernels.c: rows, norms,
 * RoPE, activations, graphs; test_gpu_kernels_attention.c: attention in both layouts and a decode
 * step's by chains): the dtypes and their tolerances, row counts, the test's stream, and the start
 * of a run on device 0 (SKIP and 77 without one). Included by one translation unit per test
 * executable.
 */
#ifndef RMLP_TESTS_GPU_KERNELS_UTIL_H
#define RMLP_TESTS_GPU_KERNELS_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu/blas.h"
#include "cpu/cpu_ops.h"
#include "cpu/decode_attention.h"
#include "gpu/kernels.h"
#include "test_util.h"
#include "gpu_test_util.h"
#include "rope_reference.h"

#define SKIP_CODE 77

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};
static const size_t ROWS[] = {1, 3, 7, 19, 733};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Per dtype (tol: gpu_test_util.h). fp32: the GPU does the CPU's arithmetic in another order (and
 * with FMA); fp16/bf16: outputs rounded once (half an ulp: 2^-11, 2^-8 relative), the residual
 * once more before the norm. */
static const tol TOLS[] = {{1e-5, 1e-5, 1e-5}, {1e-3, 1e-2, 1e-2}, {8e-3, 2e-2, 2e-2}};
static const tol EXACT = {0, 0, 0};

static cudaStream_t stream;

static inline int launched(cudaError_t error, const char *what) { return launched_on(error, what, stream); }

/* Device 0 and the test's stream (blocking: it waits for the uploads and poisoning done on the
 * legacy default stream); -1 to go on, else the exit code: SKIP (77) without a device, unless a
 * check that needs none has failed already. */
static inline int gpu_kernels_begin(void) {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount reports 0 devices");
        return tu_failed > 0 ? tu_summary() : SKIP_CODE; /* what ran without a device must not fail silently */
    }
    struct cudaDeviceProp prop;
    CUDA_MUST(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
    CUDA_MUST(cudaStreamCreate(&stream));
    return -1;
}

/* The step through DTYPES: 1, or with RMLP_GPU_KERNELS_QUICK=1 (for compute-sanitizer, 10-100x
 * slower) f32 and bf16, not f16 (bf16's 2-byte paths are f16's). */
static inline int gpu_kernels_dtype_step(void) {
    const char *quick = getenv("RMLP_GPU_KERNELS_QUICK");
    return quick != NULL && strcmp(quick, "1") == 0 ? 2 : 1;
}

#endif
