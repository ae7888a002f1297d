/*
 * cublas_loader.c: cublas_loader.h. The names to try for libcublas, and dlopen + dlsym over them,
 * recording why each one that failed did.
 */
#define _GNU_SOURCE /* RTLD_* */
#include "gpu/cublas_loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *const gpu_cublas_entry_points[GPU_CUBLAS_N_ENTRY_POINTS] = {
    [GPU_CUBLAS_CREATE] = "cublasCreate_v2",
    [GPU_CUBLAS_DESTROY] = "cublasDestroy_v2",
    [GPU_CUBLAS_SET_STREAM] = "cublasSetStream_v2",
    [GPU_CUBLAS_SET_WORKSPACE] = "cublasSetWorkspace_v2",
    [GPU_CUBLAS_SET_MATH_MODE] = "cublasSetMathMode",
    [GPU_CUBLAS_STATUS_NAME] = "cublasGetStatusName",
    [GPU_CUBLAS_STATUS_STRING] = "cublasGetStatusString",
    [GPU_CUBLAS_GEMM_EX] = "cublasGemmEx",
    [GPU_CUBLAS_GET_PROPERTY] = "cublasGetProperty",
};

/* cublasGetProperty(libraryPropertyType, int *): the enum is an int (MAJOR_VERSION 0, MINOR_VERSION
 * 1, PATCH_LEVEL 2), cublasStatus_t too (CUBLAS_STATUS_SUCCESS 0). */
typedef int (*get_property_fn)(int, int *);

static void add_candidate(gpu_cublas_candidate *out, size_t *n, const char *why, const char *fmt, ...) {
    if (*n >= GPU_CUBLAS_MAX_CANDIDATES) return;
    gpu_cublas_candidate *c = &out[*n];
    va_list args;
    va_start(args, fmt);
    int len = vsnprintf(c->name, sizeof c->name, fmt, args);
    va_end(args);
    if (len < 0 || (size_t)len >= sizeof c->name) return; /* a path too long to be the one meant */
    for (size_t i = 0; i < *n; i++)
        if (strcmp(out[i].name, c->name) == 0) return;
    snprintf(c->why, sizeof c->why, "%s", why);
    (*n)++;
}

size_t gpu_cublas_candidates(const char *env_value, int runtime_major, const char *cuda_home, const char *cuda_path,
                             gpu_cublas_candidate *out) {
    size_t n = 0;
    if (env_value != NULL && env_value[0] != '\0') {
        add_candidate(out, &n, GPU_CUBLAS_ENV, "%s", env_value);
        return n;
    }
    char why[48];
    snprintf(why, sizeof why, "CUDA runtime %d", runtime_major);
    add_candidate(out, &n, why, "libcublas.so.%d", runtime_major);
    if (cuda_home != NULL && cuda_home[0] != '\0')
        add_candidate(out, &n, "$CUDA_HOME", "%s/lib64/libcublas.so.%d", cuda_home, runtime_major);
    if (cuda_path != NULL && cuda_path[0] != '\0')
        add_candidate(out, &n, "$CUDA_PATH", "%s/lib64/libcublas.so.%d", cuda_path, runtime_major);
    add_candidate(out, &n, "the toolkit's default place", "/usr/local/cuda/lib64/libcublas.so.%d", runtime_major);
    return n;
}

/* Appends "; " (after the first) and the formatted text to error, truncating at error_cap. */
static void append(char *error, size_t error_cap, const char *fmt, ...) {
    if (error_cap == 0) return;
    size_t used = strlen(error);
    if (used + 1 >= error_cap) return;
    if (used > 0) {
        snprintf(error + used, error_cap - used, "; ");
        used = strlen(error);
    }
    va_list args;
    va_start(args, fmt);
    vsnprintf(error + used, error_cap - used, fmt, args);
    va_end(args);
}

/* dlerror()'s text without the name it repeats ("NAME: cannot open shared object file: ..."). */
static const char *dl_reason(const char *name) {
    const char *why = dlerror();
    if (why == NULL) return "unknown dlopen error";
    size_t len = strlen(name);
    if (strncmp(why, name, len) == 0 && why[len] == ':' && why[len + 1] == ' ') return why + len + 2;
    return why;
}

int gpu_cublas_open(const gpu_cublas_candidate *candidates, size_t n_candidates, gpu_cublas_lib *lib, char *error,
                    size_t error_cap) {
    memset(lib, 0, sizeof *lib);
    if (error_cap > 0) error[0] = '\0';
    for (size_t c = 0; c < n_candidates; c++) {
        const char *name = candidates[c].name, *why = candidates[c].why;
        (void)dlerror();
        void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            append(error, error_cap, "%s (%s): %s", name, why, dl_reason(name));
            continue;
        }
        const char *missing = NULL;
        for (size_t i = 0; i < GPU_CUBLAS_N_ENTRY_POINTS && missing == NULL; i++) {
            lib->entry[i] = dlsym(handle, gpu_cublas_entry_points[i]);
            if (lib->entry[i] == NULL) missing = gpu_cublas_entry_points[i];
        }
        get_property_fn get_property;
        *(void **)&get_property = lib->entry[GPU_CUBLAS_GET_PROPERTY];
        int major = -1, minor = -1, patch = -1;
        bool ok = false;
        if (missing != NULL)
            append(error, error_cap, "%s (%s): has no symbol %s: not cuBLAS", name, why, missing);
        else if (get_property(0, &major) != 0 || get_property(1, &minor) != 0 || get_property(2, &patch) != 0)
            append(error, error_cap, "%s (%s): cublasGetProperty failed", name, why);
        else if (major < GPU_CUBLAS_MIN_MAJOR)
            append(error, error_cap, "%s (%s): is cuBLAS %d.%d.%d, older than %d", name, why, major, minor, patch,
                   GPU_CUBLAS_MIN_MAJOR);
        else
            ok = true;
        if (!ok) {
            memset(lib->entry, 0, sizeof lib->entry);
            dlclose(handle); /* none of its code ran but cublasGetProperty */
            continue;
        }
        lib->handle = handle;
        snprintf(lib->name, sizeof lib->name, "%s", name);
        lib->major = major;
        lib->minor = minor;
        lib->patch = patch;
        return 0;
    }
    if (n_candidates == 0) append(error, error_cap, "no name to try");
    return -1;
}
