/*
 * blas.cu: cuBLAS through dlopen (see blas.h for why), the handle setup that makes every GEMM
 * accumulate in fp32 and use the context's own workspace, and the one GEMM shape the layer
 * needs (y = x W^T on row-major data). Errors name the cuBLAS call and cuBLAS's status name and
 * string (cublasGetStatusName / cublasGetStatusString).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <limits.h>
#include <pthread.h>

#include "blas.h"
#include "host.h"

#define RMLP_STR2(x) #x
#define RMLP_STR(x) RMLP_STR2(x)
/* cublas_api.h's soname major: the library must load the cuBLAS it was compiled against. */
#define RMLP_CUBLAS_SONAME "libcublas.so." RMLP_STR(CUBLAS_VER_MAJOR)

/* The entry points used, typed as cublas_api.h declares them. */
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
    char error[400]; /* why loading failed, "" when it worked */
} api;

static void load_once() {
    void *lib = dlopen(RMLP_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(api.error, sizeof api.error, "cuBLAS could not be loaded: dlopen(\"%s\"): %s", RMLP_CUBLAS_SONAME,
                 why ? why : "unknown error");
        return;
    }
    struct {
        const char *name;
        void **slot;
    } symbols[] = {
        /* The names libcublas exports: cublas_v2.h #defines cublasCreate & co. to these _v2 ones, but
         * blas.h includes cublas_api.h only, where the plain names are no macros (and no symbols). */
        {"cublasCreate_v2", (void **)&api.create},
        {"cublasDestroy_v2", (void **)&api.destroy},
        {"cublasSetStream_v2", (void **)&api.set_stream},
        {"cublasSetWorkspace_v2", (void **)&api.set_workspace},
        {"cublasSetMathMode", (void **)&api.set_math_mode},
        {"cublasGetStatusName", (void **)&api.status_name},
        {"cublasGetStatusString", (void **)&api.status_string},
        {"cublasGemmEx", (void **)&api.gemm_ex},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(lib, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(api.error, sizeof api.error, "cuBLAS could not be loaded: %s has no symbol %s", RMLP_CUBLAS_SONAME,
                     symbols[i].name);
            return; /* the handle stays open: dlclose of a half-used cuBLAS is not worth the risk */
        }
    }
}

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
