/*
 * cuda_api.c: exported CUDA entry points. In a build without CUDA they return
 * RMLP_ERR_UNSUPPORTED; with CUDA every runtime error becomes a status whose message names
 * the call and CUDA's error string.
 */
#include "export.h"

#ifdef RMLP_WITH_CUDA
#include "../../gpu/device.h"
#endif

RMLP_EXPORT rmlp_status rmlp_cuda_device_count(int32_t *count) {
    static const char fn[] = "rmlp_cuda_device_count";
    rmlp_clear_error();
    if (count == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "count is NULL");
    *count = 0;
#ifdef RMLP_WITH_CUDA
    int devices = 0;
    int error = rmlp_gpu_device_count(&devices);
    if (error != 0) {
        rmlp_status status = rmlp_gpu_error_is_no_device(error) ? RMLP_ERR_NO_DEVICE : RMLP_ERR_CUDA;
        return rmlp_fail(status, fn, "cudaGetDeviceCount failed: %s (%s)", rmlp_gpu_error_name(error),
                         rmlp_gpu_error_string(error));
    }
    *count = devices;
    if (devices == 0) return rmlp_fail(RMLP_ERR_NO_DEVICE, fn, "cudaGetDeviceCount reports 0 devices");
    return RMLP_OK;
#else
    return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "this libradix_mlp was built without CUDA (-DRMLP_CUDA=OFF or no nvcc)");
#endif
}
