/*
 * device.cu: device discovery through the CUDA runtime API (no driver API, no -lcuda:
 * the static runtime loads the driver itself, so the library loads on machines without one).
 */
#include <cuda_runtime.h>

#include "device.h"

extern "C" int rmlp_gpu_device_count(int *count) {
    *count = 0;
    cudaError_t error = cudaGetDeviceCount(count);
    if (error != cudaSuccess) {
        *count = 0;
        (void)cudaGetLastError(); /* reset the runtime error state for later calls */
    }
    return (int)error;
}

extern "C" int rmlp_gpu_error_is_no_device(int error) {
    return error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver;
}

extern "C" const char *rmlp_gpu_error_name(int error) { return cudaGetErrorName((cudaError_t)error); }

extern "C" const char *rmlp_gpu_error_string(int error) { return cudaGetErrorString((cudaError_t)error); }
