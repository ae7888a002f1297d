/*
 * blas.h: the GEMMs of the layer runner through cuBLAS, with fp32 accumulation, and the
 * row-major <-> column-major mapping written down once. cuBLAS is loaded at run time (dlopen of
 * $RADIX_MLP_CUBLAS, else libcublas.so.<the CUDA runtime's major>: gpu/cublas_loader.h) the first
 * time a CUDA model needs it, so libradix_mlp.so itself neither needs libcublas to load nor maps
 * its ~600 MB for CPU-only users (and valgrind runs of them); a process that already has libcublas
 * loaded gets that same copy back from dlopen. -DRMLP_CUBLAS_STATIC=ON links it in instead, as
 * TEI's images do. Internal to the library; C linkage, so that test_gpu_kernels can check the
 * loading (which needs no device) on any machine.
 */
#ifndef RMLP_GPU_BLAS_H
#define RMLP_GPU_BLAS_H

#include <stdbool.h>
#include <stddef.h>

#include <cublas_v2.h> /* not cublas_api.h alone: CUDA 12's refuses that (CUBLASAPI undefined) */
#include <cuda_runtime.h>

#include "radix_mlp/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads cuBLAS once per process (thread-safe); on failure records why through rmlp_fail
 * (RMLP_ERR_UNSUPPORTED naming every library tried and why each failed) and returns that status
 * every time. */
rmlp_status gpu_blas_load(const char *fn);

/* A cuBLAS handle bound to `stream`, with fp32-accumulating math (no TF32, no reduced-precision
 * split-K reductions) and the caller's `workspace` (so no GEMM ever allocates, which also makes
 * them capturable). The current device must be the model's. */
rmlp_status gpu_blas_create(const char *fn, cudaStream_t stream, void *workspace, size_t workspace_bytes,
                            cublasHandle_t *out);
void gpu_blas_destroy(cublasHandle_t handle);
/* Rebinds the handle to `stream` and gives it its workspace again (cublasSetStream drops it). */
rmlp_status gpu_blas_set_stream(const char *fn, cublasHandle_t handle, cudaStream_t stream, void *workspace,
                                size_t workspace_bytes);

/* The cuBLAS workspace a context gives its handle: 32 MiB, cuBLAS's recommendation for Hopper
 * (4 MiB suffices before it). */
#define GPU_BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

/*
 * y = x W^T (+ y when accumulate), everything row-major as the CPU path and Hugging Face store it:
 *   x (rows, in) at row stride ldx, W (out, in) dense, y (rows, out) at row stride ldy;
 * all in `dtype`, products accumulated in fp32, y rounded to dtype once (with accumulate, the
 * old y is added in fp32 before that rounding: residual adds and bias prefills cost nothing).
 *
 * The mapping: cuBLAS is column-major, and a row-major (r, c) matrix with row stride ld is the
 * column-major (c, r) matrix with leading dimension ld. So x is x' = x^T (in, rows; ld ldx),
 * W is W' = W^T (in, out; ld in), y is y' = y^T (out, rows; ld ldy), and y = x W^T is
 * y' = W x' = (W')^T x':  cublasGemmEx(transa = T, transb = N, m = out, n = rows, k = in,
 * A = W (lda = in), B = x (ldb = ldx), C = y (ldc = ldy)).
 */
rmlp_status gpu_linear_gemm(const char *fn, const char *what, cublasHandle_t handle, const void *x, size_t ldx,
                            size_t rows, size_t in, const void *w, size_t out, void *y, size_t ldy, bool accumulate,
                            rmlp_dtype dtype);

/* Logits: y (rows, out) fp32 = x (rows, in) W^T, x and W dense in dtype, fp32 accumulation and no
 * rounding of the result to dtype (a language model's head, whose logits a sampler compares). */
rmlp_status gpu_logits_gemm(const char *fn, const char *what, cublasHandle_t handle, const void *x, size_t rows,
                            size_t in, const void *w, size_t out, float *y, rmlp_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
