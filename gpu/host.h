/*
 * host.h: what the host-side code of gpu/ (the .cu files that call the CUDA runtime and cuBLAS
 * outside kernels: blas, weights, bind, context, layer, readout) shares. It turns a failed CUDA
 * runtime call into an rmlp_status whose message names the call and CUDA's own error name and
 * string, and it makes a call run on the model's device and give the calling thread its
 * previous current device back. C++ only; internal to the library.
 */
#ifndef RMLP_GPU_HOST_H
#define RMLP_GPU_HOST_H

#include <cuda_runtime.h>

extern "C" {
#include "common/status.h"
}

/* The status a CUDA error maps to: no usable device/driver, out of memory, or a CUDA error. */
static inline rmlp_status gpu_status_of(cudaError_t error) {
    switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: return RMLP_ERR_NO_DEVICE;
    case cudaErrorMemoryAllocation: return RMLP_ERR_OUT_OF_MEMORY;
    default: return RMLP_ERR_CUDA;
    }
}

/* Records "<fn>: <what> failed: <cudaErrorName> (<description>)" and returns its status. Clears
 * the runtime's last (non-sticky) error so the next call starts clean. */
static inline rmlp_status gpu_fail(const char *fn, const char *what, cudaError_t error) {
    (void)cudaGetLastError();
    return rmlp_fail(gpu_status_of(error), fn, "%s failed: %s (%s)", what, cudaGetErrorName(error),
                     cudaGetErrorString(error));
}

/* Evaluates a CUDA runtime call; on error returns gpu_fail naming the call's text. */
#define GPU_TRY(fn, call)                                                                                              \
    do {                                                                                                               \
        cudaError_t gpu_try_error_ = (call);                                                                           \
        if (gpu_try_error_ != cudaSuccess) return gpu_fail((fn), #call, gpu_try_error_);                               \
    } while (0)

/* Makes `device` current for the lifetime of the guard and restores the thread's previous
 * current device afterwards (hosts such as TEI keep their own current device). cudaSetDevice
 * neither allocates nor synchronises, and may be called while a stream is capturing. */
struct gpu_device_guard {
    int previous = -1;
    cudaError_t error = cudaSuccess;
    explicit gpu_device_guard(int device) {
        if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
        if (previous != device) error = cudaSetDevice(device);
    }
    ~gpu_device_guard() {
        int now = -1;
        if (previous >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous) (void)cudaSetDevice(previous);
    }
    gpu_device_guard(const gpu_device_guard &) = delete;
    gpu_device_guard &operator=(const gpu_device_guard &) = delete;
};

/* Opens a device guard named `guard` for `device`, returning the status if it cannot be made current. */
#define GPU_ON_DEVICE(fn, device)                                                                                      \
    gpu_device_guard guard(device);                                                                                    \
    if (guard.error != cudaSuccess) return gpu_fail((fn), "cudaSetDevice", guard.error)

/* RMLP_OK, or while `stream` (a context's) captures a graph RMLP_ERR_INVALID_ARGUMENT saying so and
 * `why` the call cannot be captured ("this call synchronises it ..."). */
static inline rmlp_status gpu_refuse_capture(const char *fn, cudaStream_t stream, const char *why) {
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
    GPU_TRY(fn, cudaStreamIsCapturing(stream, &state));
    if (state == cudaStreamCaptureStatusNone) return RMLP_OK;
    return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the context's stream is capturing a graph, and %s: call it after "
                     "the capture", why);
}

/* Bytes per element of a storage dtype, 0 for anything else. */
static inline size_t gpu_dtype_bytes(rmlp_dtype dtype) {
    return dtype == RMLP_DTYPE_F32 ? 4 : dtype == RMLP_DTYPE_F16 || dtype == RMLP_DTYPE_BF16 ? 2 : 0;
}

static inline const char *gpu_dtype_name(rmlp_dtype dtype) {
    return dtype == RMLP_DTYPE_F32 ? "F32" : dtype == RMLP_DTYPE_F16 ? "F16" : dtype == RMLP_DTYPE_BF16 ? "BF16" : "?";
}

#endif
