/*
 * cublas_loader.h: which libcublas a CUDA model opens, and the opening itself (dlopen + dlsym),
 * in plain C with no CUDA header, so that it is built in every build and checked without a device
 * (tests/test_cublas_loader.c: the toolkit's libcublas, PyPI's 12.9 one, and fake libraries).
 * gpu/blas.cu calls it with the CUDA runtime's major version. Internal to the library.
 *
 * The names tried, in order (gpu_cublas_candidates):
 *   RADIX_MLP_CUBLAS set (not empty): that path or name alone: an explicit choice never falls back;
 *   else libcublas.so.<R>, R the major version of the CUDA runtime the library runs with (the
 *   loader's search: LD_LIBRARY_PATH, runpaths, ld.so.cache; a libcublas the process has loaded
 *   already is that one), then <dir>/lib64/libcublas.so.<R> for $CUDA_HOME, $CUDA_PATH and
 *   /usr/local/cuda (a toolkit that is not on the loader's path).
 * The first that opens, exports every entry point and reports a major version of at least
 * GPU_CUBLAS_MIN_MAJOR is kept open; every other is closed again.
 */
#ifndef RMLP_GPU_CUBLAS_LOADER_H
#define RMLP_GPU_CUBLAS_LOADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_CUBLAS_ENV "RADIX_MLP_CUBLAS"
#define GPU_CUBLAS_MIN_MAJOR 12 /* the oldest checked (CUDA 12.9's); the entry points are 11.x's too */
#define GPU_CUBLAS_MAX_CANDIDATES 5

/* One name to dlopen and why it is tried ("RADIX_MLP_CUBLAS", "CUDA runtime 13", "$CUDA_HOME"). */
typedef struct gpu_cublas_candidate {
    char name[512];
    char why[48];
} gpu_cublas_candidate;

/* The entry points the library uses, by their exported names (cublas_v2.h #defines cublasCreate &
 * co. to the _v2 ones, and libcublas exports only those): gpu_cublas_entry_points[i] for index i. */
enum {
    GPU_CUBLAS_CREATE,
    GPU_CUBLAS_DESTROY,
    GPU_CUBLAS_SET_STREAM,
    GPU_CUBLAS_SET_WORKSPACE,
    GPU_CUBLAS_SET_MATH_MODE,
    GPU_CUBLAS_STATUS_NAME,
    GPU_CUBLAS_STATUS_STRING,
    GPU_CUBLAS_GEMM_EX,
    GPU_CUBLAS_GET_PROPERTY,
    GPU_CUBLAS_N_ENTRY_POINTS
};
extern const char *const gpu_cublas_entry_points[GPU_CUBLAS_N_ENTRY_POINTS];

/* The library opened: its handle, the name it was opened by, its version, its entry points. */
typedef struct gpu_cublas_lib {
    void *handle;
    char name[512];
    int major, minor, patch;
    void *entry[GPU_CUBLAS_N_ENTRY_POINTS];
} gpu_cublas_lib;

/* Fills out[0..return) with the names to try (see above) for a CUDA runtime of major version
 * runtime_major; env_value is RADIX_MLP_CUBLAS's value (NULL or "" when unset), cuda_home and
 * cuda_path those of $CUDA_HOME and $CUDA_PATH (NULL when unset). At most
 * GPU_CUBLAS_MAX_CANDIDATES, duplicates left out. */
size_t gpu_cublas_candidates(const char *env_value, int runtime_major, const char *cuda_home, const char *cuda_path,
                             gpu_cublas_candidate *out);

/* Opens the candidates in turn (RTLD_NOW | RTLD_LOCAL) until one opens, exports every entry point
 * and reports (cublasGetProperty, which needs no device) a major version of at least
 * GPU_CUBLAS_MIN_MAJOR; fills *lib and returns 0. Else returns -1 (*lib zeroed) and error
 * (NUL-terminated, cut at error_cap) names each candidate tried and why it failed:
 * "NAME (WHY): dlerror()'s text | has no symbol S: not cuBLAS | is cuBLAS 11.2.1, older than 12; ...". */
int gpu_cublas_open(const gpu_cublas_candidate *candidates, size_t n_candidates, gpu_cublas_lib *lib, char *error,
                    size_t error_cap);

#ifdef __cplusplus
}
#endif

#endif
