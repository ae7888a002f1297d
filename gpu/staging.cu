/*
 * staging.cu: index arrays the host hands the device with every batch or step (the prefix
 * cache's batch arrays, a generation step's chains): a device array and its pinned host copy of
 * `words` uint32 words, sent with one asynchronous copy on the context's stream (gpu_staging,
 * model.h). The host writes the pinned copy only after the previous copy has left it.
 */
#include <stdio.h>

#include "host.h"
#include "model.h"

void gpu_staging_close(gpu_staging *st) {
    if (st->done != NULL) (void)cudaEventDestroy(st->done);
    if (st->host != NULL) (void)cudaFreeHost(st->host);
    if (st->device != NULL) (void)cudaFree(st->device);
    (void)cudaGetLastError();
    *st = gpu_staging{};
}

rmlp_status gpu_staging_open(const char *fn, const char *what, size_t words, gpu_staging *st) {
    *st = gpu_staging{};
    st->words = words;
    const char *call = "cudaMalloc";
    cudaError_t error = cudaMalloc((void **)&st->device, words * sizeof(uint32_t));
    if (error == cudaSuccess) {
        call = "cudaHostAlloc";
        error = cudaHostAlloc((void **)&st->host, words * sizeof(uint32_t), cudaHostAllocDefault);
    }
    if (error == cudaSuccess) {
        call = "cudaEventCreateWithFlags";
        error = cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming);
    }
    if (error == cudaSuccess) return RMLP_OK;
    char failed[160];
    snprintf(failed, sizeof failed, "%s (%s, %zu words)", call, what, words);
    rmlp_status status = gpu_fail(fn, failed, error);
    gpu_staging_close(st);
    return status;
}

rmlp_status gpu_staging_acquire(const char *fn, gpu_staging *st) {
    if (st->pending) GPU_TRY(fn, cudaEventSynchronize(st->done));
    st->pending = false;
    return RMLP_OK;
}

rmlp_status gpu_staging_send(const char *fn, gpu_staging *st, size_t words, cudaStream_t stream) {
    GPU_TRY(fn, cudaMemcpyAsync(st->device, st->host, words * sizeof(uint32_t), cudaMemcpyHostToDevice, stream));
    GPU_TRY(fn, cudaEventRecord(st->done, stream));
    st->pending = true;
    return RMLP_OK;
}
