/*
 * device.h: C-callable view of the CUDA runtime calls the library makes outside kernels
 * (device discovery). Errors come back as the raw cudaError_t value, which the ffi layer
 * turns into an rmlp_status with CUDA's own error string.
 */
#ifndef RMLP_GPU_DEVICE_H
#define RMLP_GPU_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

/* cudaGetDeviceCount; returns the cudaError_t as int (0 = success). */
int rmlp_gpu_device_count(int *count);

/* Is this cudaError_t one that means "no usable device or driver"? */
int rmlp_gpu_error_is_no_device(int error);

/* cudaGetErrorName / cudaGetErrorString of a cudaError_t (static storage). */
const char *rmlp_gpu_error_name(int error);
const char *rmlp_gpu_error_string(int error);

#ifdef __cplusplus
}
#endif

#endif
