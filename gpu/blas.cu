/*
 * blas.cu: cuBLAS through dlopen (gpu/cublas_loader.h; see blas.h for why) or linked in
 * (RMLP_CUBLAS_STATIC), the handle setup that makes every GEMM
 * accumulate in fp32 and use the context's own workspace, and the one GEMM shape the layer
 * needs (y = x W^T on row-major data). Errors name the cuBLAS call and cuBLAS's status name and
 * string (cublasGetStatusName / cublasGetStatusString).
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "blas.h"
#include "host.h"

#include "gpu/cublas_loader.h"

#define RMLP_BLAS_ERROR_CAPACITY 512 /* common/status.c's message capacity */

/* The entry points used, typed as cublas_api.h declares them (cublas_v2.h #defines the plain names). */
typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*set_workspace_fn)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*set_math_mode_fn)(cublasHandle_t, cublasMath_t);
typedef const char *(*status_text_fn)(cublasStatus_t);
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                     const void *, cudaDataType, int, const void *, cudaDataType, int, const void *,
                                     void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

static struct {
    create_fn create;
    destroy_fn destroy;
    set_stream_fn set_stream;
    set_workspace_fn set_workspace;
    set_math_mode_fn set_math_mode;
    status_text_fn status_name, status_string;
    gemm_ex_fn gemm_ex;
    char error[RMLP_BLAS_ERROR_CAPACITY]; /* why loading failed, "" when it worked */
} api;

#ifdef RMLP_CUBLAS_STATIC
/* cuBLAS linked into the library (-DRMLP_CUBLAS_STATIC=ON): nothing to open. */
static void load_once() {
    api.create = cublasCreate_v2;
    api.destroy = cublasDestroy_v2;
    api.set_stream = cublasSetStream_v2;
    api.set_workspace = cublasSetWorkspace_v2;
    api.set_math_mode = cublasSetMathMode;
    api.status_name = cublasGetStatusName;
    api.status_string = cublasGetStatusString;
    api.gemm_ex = cublasGemmEx;
}
#else
/* libcublas through gpu/cublas_loader.h: RADIX_MLP_CUBLAS, else libcublas.so.<the CUDA runtime's
 * major> and the toolkit's usual places. */
static void load_once() {
    /* The runtime linked in (needs no device): the static one is the building toolkit's; a shared
     * libcudart.so.<major> may be a newer minor of that major. */
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess || runtime <= 0) runtime = CUDART_VERSION;
    gpu_cublas_candidate candidates[GPU_CUBLAS_MAX_CANDIDATES];
    size_t n = gpu_cublas_candidates(getenv(GPU_CUBLAS_ENV), runtime / 1000, getenv("CUDA_HOME"), getenv("CUDA_PATH"),
                                     candidates);
    gpu_cublas_lib lib;
    char why[RMLP_BLAS_ERROR_CAPACITY - 128]; /* the message keeps its start when cut */
    if (gpu_cublas_open(candidates, n, &lib, why, sizeof why) == 0) {
        /* the handle stays open for the process: dlclose of a used cuBLAS is not worth the risk */
        *(void **)&api.create = lib.entry[GPU_CUBLAS_CREATE];
        *(void **)&api.destroy = lib.entry[GPU_CUBLAS_DESTROY];
        *(void **)&api.set_stream = lib.entry[GPU_CUBLAS_SET_STREAM];
        *(void **)&api.set_workspace = lib.entry[GPU_CUBLAS_SET_WORKSPACE];
        *(void **)&api.set_math_mode = lib.entry[GPU_CUBLAS_SET_MATH_MODE];
        *(void **)&api.status_name = lib.entry[GPU_CUBLAS_STATUS_NAME];
        *(void **)&api.status_string = lib.entry[GPU_CUBLAS_STATUS_STRING];
        *(void **)&api.gemm_ex = lib.entry[GPU_CUBLAS_GEMM_EX];
    } else {
        const char *env = getenv(GPU_CUBLAS_ENV), *hint = "set " GPU_CUBLAS_ENV " to libcublas's path";
        if (env != NULL && env[0] != '\0') hint = GPU_CUBLAS_ENV " names it";
        snprintf(api.error, sizeof api.error, "cuBLAS could not be loaded (%s); tried %s", hint, why);
    }
}
#endif

static pthread_once_t load_guard = PTHREAD_ONCE_INIT;

rmlp_status gpu_blas_load(const char *fn) {
    pthread_once(&load_guard, load_once); /* pthread, not std::call_once: the library links as C, no libstdc++ */
    if (api.error[0] != '\0') return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "%s", api.error);
    return RMLP_OK;
}

/* "<fn>: <call> failed: CUBLAS_STATUS_... (<description>)". */
static rmlp_status blas_fail(const char *fn, const char *call, cublasStatus_t status) {
    rmlp_status code = status == CUBLAS_STATUS_ALLOC_FAILED ? RMLP_ERR_OUT_OF_MEMORY : RMLP_ERR_CUDA;
    return rmlp_fail(code, fn, "%s failed: %s (%s)", call, api.status_name(status), api.status_string(status));
}

#define BLAS_TRY(fn, what, call)                                                                                       \
    do {                                                                                                               \
        cublasStatus_t blas_try_status_ = (call);                                                                      \
        if (blas_try_status_ != CUBLAS_STATUS_SUCCESS) return blas_fail((fn), (what), blas_try_status_);               \
    } while (0)

rmlp_status gpu_blas_set_stream(const char *fn, cublasHandle_t handle, cudaStream_t stream, void *workspace,
                                size_t workspace_bytes) {
    BLAS_TRY(fn, "cublasSetStream", api.set_stream(handle, stream));
    BLAS_TRY(fn, "cublasSetWorkspace", api.set_workspace(handle, workspace, workspace_bytes));
    return RMLP_OK;
}

rmlp_status gpu_blas_create(const char *fn, cudaStream_t stream, void *workspace, size_t workspace_bytes,
                            cublasHandle_t *out) {
    *out = NULL;
    rmlp_status status = gpu_blas_load(fn);
    if (status != RMLP_OK) return status;
    cublasHandle_t handle = NULL;
    BLAS_TRY(fn, "cublasCreate", api.create(&handle));
    /* Default math: CUBLAS_COMPUTE_32F never uses TF32; the flag keeps split-K reductions of
     * F16/BF16 outputs in fp32 as well. */
    cublasStatus_t s = api.set_math_mode(
        handle, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s != CUBLAS_STATUS_SUCCESS) status = blas_fail(fn, "cublasSetMathMode", s);
    if (status == RMLP_OK) status = gpu_blas_set_stream(fn, handle, stream, workspace, workspace_bytes);
    if (status != RMLP_OK) {
        api.destroy(handle);
        return status;
    }
    *out = handle;
    return RMLP_OK;
}

void gpu_blas_destroy(cublasHandle_t handle) {
    if (handle != NULL && api.destroy != NULL) api.destroy(handle);
}

static cudaDataType cuda_type(rmlp_dtype dtype) {
    return dtype == RMLP_DTYPE_F16 ? CUDA_R_16F : dtype == RMLP_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* y (rows, out) in y_type = x W^T (+ y), x and W in dtype, fp32 accumulation (gpu_linear_gemm). */
static rmlp_status gemm(const char *fn, const char *what, cublasHandle_t handle, const void *x, size_t ldx,
                        size_t rows, size_t in, const void *w, size_t out, void *y, size_t ldy, bool accumulate,
                        rmlp_dtype dtype, cudaDataType y_type) {
    if (rows == 0 || out == 0) return RMLP_OK;
    if (rows > INT_MAX || in > INT_MAX || out > INT_MAX || ldx > INT_MAX || ldy > INT_MAX || ldx < in || ldy < out)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s: GEMM of %zu x %zu by %zu x %zu does not fit cuBLAS's int "
                         "sizes (or a stride is short)", what, rows, in, out, in);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cudaDataType t = cuda_type(dtype);
    cublasStatus_t s = api.gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)rows, (int)in, &alpha, w, t,
                                   (int)in, x, t, (int)ldx, &beta, y, y_type, (int)ldy, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        char call[160];
        snprintf(call, sizeof call, "cublasGemmEx (%s: %zu rows x %zu -> %zu, %s)", what, rows, in, out,
                 gpu_dtype_name(dtype));
        return blas_fail(fn, call, s);
    }
    return RMLP_OK;
}

rmlp_status gpu_linear_gemm(const char *fn, const char *what, cublasHandle_t handle, const void *x, size_t ldx,
                            size_t rows, size_t in, const void *w, size_t out, void *y, size_t ldy, bool accumulate,
                            rmlp_dtype dtype) {
    return gemm(fn, what, handle, x, ldx, rows, in, w, out, y, ldy, accumulate, dtype, cuda_type(dtype));
}

rmlp_status gpu_logits_gemm(const char *fn, const char *what, cublasHandle_t handle, const void *x, size_t rows,
                            size_t in, const void *w, size_t out, float *y, rmlp_dtype dtype) {
    return gemm(fn, what, handle, x, in, rows, in, w, out, y, out, false, dtype, CUDA_R_32F);
}
