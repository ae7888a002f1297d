/*
 * nonfinite.cu: the check of a CUDA forward's output for infinities and NaN (gpu/nonfinite.h).
 * One kernel per forward reads the output once, 16 bytes per access where the buffer is aligned
 * for it: an element is not finite when its exponent bits are all ones. A thread that finds one
 * records its index with an atomic (as the complement, so that the maximum is the smallest index
 * and the zeroed counter means "none"), and the last block to finish (a counter of finished
 * blocks, behind a fence) turns the scan's result into the counter the host reads: one more
 * forward with a non-finite output, and where its first one was. Nothing here allocates or
 * synchronises but the read of the counter, which rmlp_context_gpu_stats asks for.
 */
#include "host.h"
#include "kernels.h"
#include "model.h"
#include "nonfinite.h"

/* x (n elements of W: uint32_t for f32, unsigned short for f16 and bf16), V per access (16 bytes /
 * sizeof(W), x 16-byte aligned; or 1); mask: the exponent bits. */
template <class W, int V>
static __global__ void nonfinite_kernel(const W *__restrict__ x, size_t n, W mask, uint32_t width,
                                        gpu_nonfinite *state) {
    size_t stride = (size_t)gridDim.x * blockDim.x, chunks = n / V;
    /* a thread's chunks in increasing order: its first hit is its smallest index */
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += stride) {
        W w[V];
        if constexpr (V == 1) {
            w[0] = x[c];
        } else {
            uint4 raw = reinterpret_cast<const uint4 *>(x)[c];
            const W *lanes = reinterpret_cast<const W *>(&raw);
#pragma unroll
            for (int e = 0; e < V; e++) w[e] = lanes[e];
        }
        int hit = -1;
#pragma unroll
        for (int e = V - 1; e >= 0; e--)
            if ((w[e] & mask) == mask) hit = e;
        if (hit >= 0) {
            atomicMax(&state->pending, ~(unsigned long long)(c * V + (size_t)hit));
            break;
        }
    }
    size_t tail = chunks * V + (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* the last n % V elements */
    if (tail < n && (x[tail] & mask) == mask) atomicMax(&state->pending, ~(unsigned long long)tail);
    /* every block's atomics before its count; the last block to count sees them all */
    __threadfence();
    __syncthreads();
    if (threadIdx.x != 0 || atomicAdd(&state->blocks_done, 1u) != gridDim.x - 1) return;
    __threadfence();
    unsigned long long pending = atomicExch(&state->pending, 0ull);
    state->blocks_done = 0;
    if (pending == 0) return;
    unsigned long long first = ~pending;
    state->row = (uint32_t)(first / width), state->col = (uint32_t)(first % width);
    state->outputs++;
}

template <class W>
static cudaError_t launch_scan(const void *x, size_t n, W mask, uint32_t width, gpu_nonfinite *state,
                               cudaStream_t stream) {
    constexpr int V = 16 / (int)sizeof(W), THREADS = 256, MAX_BLOCKS = 1024;
    bool vector = ((uintptr_t)x & 15u) == 0;
    size_t chunks = vector ? n / V : n, blocks = (chunks + THREADS - 1) / THREADS;
    blocks = blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
    if (vector)
        nonfinite_kernel<W, V><<<(unsigned)blocks, THREADS, 0, stream>>>((const W *)x, n, mask, width, state);
    else
        nonfinite_kernel<W, 1><<<(unsigned)blocks, THREADS, 0, stream>>>((const W *)x, n, mask, width, state);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_nonfinite_scan(const void *x, size_t n, uint32_t width, rmlp_dtype dtype,
                                          gpu_nonfinite *state, cudaStream_t stream) {
    if (width == 0 || gpu_dtype_bytes(dtype) == 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    switch (dtype) { /* the exponent bits of each storage type */
    case RMLP_DTYPE_F32: return launch_scan<uint32_t>(x, n, 0x7F800000u, width, state, stream);
    case RMLP_DTYPE_F16: return launch_scan<unsigned short>(x, n, (unsigned short)0x7C00u, width, state, stream);
    default: return launch_scan<unsigned short>(x, n, (unsigned short)0x7F80u, width, state, stream);
    }
}

extern "C" rmlp_status gpu_check_output(const char *fn, gpu_context *ctx, const void *out, size_t rows) {
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    cudaError_t error = gpu_nonfinite_scan(out, rows * m->config.hidden_size, m->config.hidden_size, m->dtype,
                                           ctx->nonfinite, ctx->stream);
    return error == cudaSuccess ? RMLP_OK : gpu_fail(fn, "gpu_nonfinite_scan (the output's finite check)", error);
}

extern "C" rmlp_status gpu_nonfinite_stats(const char *fn, gpu_context *ctx, rmlp_gpu_stats *out) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    rmlp_status status =
        gpu_refuse_capture(fn, ctx->stream, "reading the non-finite output counter synchronises it");
    if (status != RMLP_OK) return status;
    gpu_nonfinite counter;
    GPU_TRY(fn, cudaMemcpyAsync(&counter, ctx->nonfinite, sizeof counter, cudaMemcpyDeviceToHost, ctx->stream));
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    out->nonfinite_outputs = counter.outputs;
    out->nonfinite_row = counter.row, out->nonfinite_col = counter.col;
    return RMLP_OK;
}
