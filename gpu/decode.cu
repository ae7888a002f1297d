/*
 * decode.cu: the device side of a generation session on a CUDA context (ffi/src/generate.c keeps
 * the session and the index on the host). A step's new rows run through the model against the
 * prefix cache's slots (gpu_cache_run_rows, cache.cu) as groups of one query each: row r attends
 * over the slots of its path, the reference compact-attention kernel reading them through the
 * packed path list. The LM head then reads the hidden states of the active sequences' last slots
 * as one GEMM with fp32 logits, copied to the host. The per-sequence attention only: the shared-
 * prefix attention of cpu/decode_attention.c (a node's keys read once per step for every sequence
 * below it) is not written for the device yet.
 *
 * Device arrays of a session (one allocation, `rows`) and their pinned staging, laid out as
 *   ids (n_seqs) | pos (n_seqs) | slots (n_seqs) | qo (n_seqs + 1) | kv_indptr (n_seqs + 1) |
 *   kv_indices (path_words)
 * and logits (n_seqs, vocab) fp32.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "host.h"
#include "kernels.h"
#include "model.h"

struct gpu_decode {
    int device;
    size_t n_seqs, path_words, words;
    uint32_t *rows;    /* device */
    uint32_t *staging; /* pinned host */
    float *logits;     /* device (n_seqs, vocab) */
    cudaEvent_t staged_free;
    bool staged_pending;
};

extern "C" void gpu_decode_free(gpu_decode *dec) {
    if (dec == NULL) return;
    gpu_device_guard guard(dec->device);
    if (dec->staged_free != NULL) (void)cudaEventDestroy(dec->staged_free);
    if (dec->staging != NULL) (void)cudaFreeHost(dec->staging);
    if (dec->rows != NULL) (void)cudaFree(dec->rows);
    if (dec->logits != NULL) (void)cudaFree(dec->logits);
    (void)cudaGetLastError();
    free(dec);
}

extern "C" rmlp_status gpu_decode_create(const char *fn, const gpu_context *ctx, size_t n_seqs, size_t path_words,
                                         gpu_decode **out) {
    *out = NULL;
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    gpu_decode *dec = (gpu_decode *)calloc(1, sizeof *dec);
    if (dec == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the generation session failed");
    dec->device = m->device, dec->n_seqs = n_seqs, dec->path_words = path_words;
    dec->words = 5 * n_seqs + 2 + path_words;
    size_t logits_bytes = n_seqs * m->config.vocab_size * sizeof(float);
    const char *what = "cudaMalloc (generation arrays)";
    cudaError_t error = cudaMalloc((void **)&dec->rows, dec->words * sizeof(uint32_t));
    if (error == cudaSuccess) {
        what = "cudaMalloc (generation logits)";
        error = cudaMalloc((void **)&dec->logits, logits_bytes);
    }
    if (error == cudaSuccess) {
        what = "cudaHostAlloc (generation staging)";
        error = cudaHostAlloc((void **)&dec->staging, dec->words * sizeof(uint32_t), cudaHostAllocDefault);
    }
    if (error == cudaSuccess) {
        what = "cudaEventCreateWithFlags (generation)";
        error = cudaEventCreateWithFlags(&dec->staged_free, cudaEventDisableTiming);
    }
    if (error != cudaSuccess) {
        rmlp_status status = gpu_fail(fn, what, error);
        gpu_decode_free(dec);
        return status;
    }
    *out = dec;
    return RMLP_OK;
}

/* The staging is free to write (the previous copy left it). */
static rmlp_status staging_free(const char *fn, gpu_decode *dec) {
    if (dec->staged_pending) GPU_TRY(fn, cudaEventSynchronize(dec->staged_free));
    dec->staged_pending = false;
    return RMLP_OK;
}

/* Copies the first `words` of the staging to the device on the stream. */
static rmlp_status stage(const char *fn, gpu_context *ctx, gpu_decode *dec, size_t words) {
    GPU_TRY(fn, cudaMemcpyAsync(dec->rows, dec->staging, words * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                ctx->stream));
    GPU_TRY(fn, cudaEventRecord(dec->staged_free, ctx->stream));
    dec->staged_pending = true;
    return RMLP_OK;
}

extern "C" rmlp_status gpu_decode_rows(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                                       const uint32_t *ids, const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                                       const uint32_t *kv_indptr, const uint32_t *kv_indices) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    rmlp_status status = gpu_cache_check_capture(fn, ctx);
    if (status == RMLP_OK) status = staging_free(fn, dec);
    if (status != RMLP_OK) return status;
    size_t n_keys = kv_indptr[n_rows], at_pos = n_rows, at_slots = 2 * n_rows, at_qo = 3 * n_rows;
    size_t at_kv = at_qo + n_rows + 1, at_idx = at_kv + n_rows + 1, words = at_idx + n_keys;
    if (n_rows > dec->n_seqs || n_keys > dec->path_words)
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "a step of %zu rows over %zu keys exceeds the session's arrays (%zu, "
                         "%zu)", n_rows, n_keys, dec->n_seqs, dec->path_words);
    uint32_t *s = dec->staging;
    memcpy(s, ids, n_rows * sizeof *s);
    memcpy(s + at_pos, pos, n_rows * sizeof *s);
    memcpy(s + at_slots, slots, n_rows * sizeof *s);
    for (size_t r = 0; r <= n_rows; r++) s[at_qo + r] = (uint32_t)r; /* one query per group: the row itself */
    memcpy(s + at_kv, kv_indptr, (n_rows + 1) * sizeof *s);
    memcpy(s + at_idx, kv_indices, n_keys * sizeof *s);
    status = stage(fn, ctx, dec, words);
    if (status != RMLP_OK) return status;
    const uint32_t *d = dec->rows;
    gpu_cache_rows run = {d, d + at_pos, d + at_slots, d + at_qo, d + at_kv, d + at_idx, n_rows, n_rows};
    return gpu_cache_run_rows(fn, ctx, cache, &run);
}

extern "C" rmlp_status gpu_decode_logits(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                                         const uint32_t *slots, size_t n, float *logits) {
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    if (n > dec->n_seqs)
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "logits of %zu rows exceed the session's %zu", n, dec->n_seqs);
    rmlp_status status = gpu_cache_check_capture(fn, ctx);
    if (status == RMLP_OK) status = staging_free(fn, dec);
    if (status != RMLP_OK) return status;
    memcpy(dec->staging, slots, n * sizeof(uint32_t));
    status = stage(fn, ctx, dec, n);
    if (status != RMLP_OK) return status;
    size_t h = m->config.hidden_size, vocab = m->config.vocab_size;
    cudaError_t error = gpu_gather_rows(ctx->normed, cache->hidden, h, dec->rows, n, h, m->dtype, ctx->stream);
    if (error != cudaSuccess) return gpu_fail(fn, "gpu_gather_rows (the last rows' hidden states)", error);
    status = gpu_logits_gemm(fn, "lm_head", ctx->blas, ctx->normed, n, h, m->lm_head, vocab, dec->logits, m->dtype);
    if (status != RMLP_OK) return status;
    GPU_TRY(fn, cudaMemcpyAsync(logits, dec->logits, n * vocab * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    return RMLP_OK;
}
