/*
 * decode.cu: the device side of a generation session on a CUDA context (generate/session.c keeps
 * the session, the index and the step's cut into chains on the host). A step's new rows run through
 * the model against the prefix cache's slots (gpu_cache_run_rows, cache.cu) with the attention of
 * cpu/decode_attention.h by chains: each chain's keys are read by one block for up to ATT_BQ of its
 * queries at once (gpu_chain_attention: partial softmax states in fp32), and each row's states are
 * merged with the log-sum-exp (gpu_merge_states). With shared-prefix attention a chain is a run of
 * path nodes a set of sequences shares, so a shared prefix's K/V rows are read once per step for
 * the sequences below it; without, each row's path is its one chain. The LM head then reads the
 * hidden states of the active sequences' last slots as one GEMM with fp32 logits, copied to the host.
 * With RADIX_MLP_GPU_DECODE=flashinfer (the default) and a shape FlashInfer's batch decode takes
 * (gpu/flashinfer_decode.h), a step's attention runs there instead: each row one request over its
 * whole path, laid out on the host by gpu/decode_split.h from the same chains; a step that does not
 * fit that layout's room, or buffers the kernel cannot read, takes the chain kernels.
 *
 * Device arrays of a session (one allocation, `rows`) and their pinned staging, laid out per step as
 *   ids, pos, slots (n_rows each) | key_indptr, member_indptr (n_chains + 1 each) | row_indptr
 *   (n_rows + 1) | keys | members, row_members (n_members each) | chain_depth (n_chains), row_pos
 *   (n_rows): a model with sliding windows only (model/model_ext.h), for the chain kernels
 * with room for n_seqs rows, 2 n_seqs + 1 chains, key_words keys and max_members memberships; the
 * chains' states (memberships * n_heads, head_dim + 2) and logits (n_seqs, vocab), fp32. The states
 * start with room for 2 n_seqs + 1 memberships (a shared prefix and each row's own part) and grow,
 * doubling, when a step has more (up to max_members, the worst case of a deep branching tree, which
 * with many sequences would be gigabytes if allocated up front). A FlashInfer step's arrays are
 *   ids, pos, slots (n_rows each) | decode_split's arrays (decode_split_words)
 * in the same staging, which is as large as the larger layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "decode_split.h"
#include "flashinfer_decode.h"
#include "host.h"
#include "kernels.h"
#include "model.h"

struct gpu_decode {
    int device;
    size_t n_seqs, key_words, max_members;
    size_t state_members; /* the memberships `state` has room for */
    gpu_staging rows;     /* a step's arrays, or the last slots for the LM head */
    float *state;         /* device (state_members * n_heads, head_dim + 2) */
    float *logits;        /* device (n_seqs, vocab) */
    gpu_fi_decode *fi;    /* FlashInfer's batch decode for the steps, or NULL: the chain kernels */
};

extern "C" void gpu_decode_free(gpu_decode *dec) {
    if (dec == NULL) return;
    gpu_device_guard guard(dec->device);
    gpu_staging_close(&dec->rows);
    gpu_fi_decode_free(dec->fi);
    if (dec->logits != NULL) (void)cudaFree(dec->logits);
    if (dec->state != NULL) (void)cudaFree(dec->state);
    (void)cudaGetLastError();
    free(dec);
}

static size_t state_bytes(const rmlp_model_config *c, size_t members) {
    return members * c->num_attention_heads * ((size_t)c->head_dim + 2) * sizeof(float);
}

/* Room in dec->state for n_members memberships: at least twice the old room, at most max_members.
 * The old states are dropped after the stream's work that may still read them. */
static rmlp_status reserve_states(const char *fn, const gpu_context *ctx, gpu_decode *dec, size_t n_members) {
    if (n_members <= dec->state_members) return RMLP_OK;
    size_t want = 2 * dec->state_members > n_members ? 2 * dec->state_members : n_members;
    want = want < dec->max_members ? want : dec->max_members;
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    (void)cudaFree(dec->state);
    dec->state = NULL, dec->state_members = 0;
    const rmlp_model_config *c = &ctx->model->config;
    cudaError_t error = cudaMalloc((void **)&dec->state, state_bytes(c, want));
    if (error != cudaSuccess) {
        (void)cudaGetLastError(); /* not left for a later launch check to find */
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "cudaMalloc of the attention states of a step with %zu "
                         "chain memberships (%zu bytes) failed: %s", n_members, state_bytes(c, want),
                         cudaGetErrorString(error));
    }
    dec->state_members = want;
    return RMLP_OK;
}

extern "C" rmlp_status gpu_decode_create(const char *fn, const gpu_context *ctx, size_t n_seqs, size_t key_words,
                                         size_t max_members, gpu_decode **out) {
    *out = NULL;
    const gpu_model *m = ctx->model;
    const rmlp_model_config *c = &m->config;
    GPU_ON_DEVICE(fn, m->device);
    gpu_decode *dec = (gpu_decode *)calloc(1, sizeof *dec);
    if (dec == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the generation session failed");
    dec->device = m->device, dec->n_seqs = n_seqs, dec->key_words = key_words, dec->max_members = max_members;
    rmlp_status status = RMLP_OK;
    bool every_layer = true; /* FlashInfer's decode has a soft-cap at head_dim 256 only */
    for (uint32_t l = 0; l < c->num_hidden_layers; l++)
        every_layer = every_layer && gpu_fi_decode_takes_layer(c->head_dim, m->ext->layers[l].softcap);
    if (ctx->options.decode_flashinfer && every_layer)
        /* NULL where FlashInfer's decode does not fit the model or device */
        status = gpu_fi_decode_create(fn, m->dtype, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
                                      n_seqs, &dec->fi);
    if (status != RMLP_OK) {
        gpu_decode_free(dec);
        return status;
    }
    size_t words = 3 * n_seqs + 2 * (2 * n_seqs + 2) + n_seqs + 1 + key_words + 2 * max_members;
    words += 2 * n_seqs + 1 + n_seqs; /* chain_depth, row_pos */
    size_t fi_words = 3 * n_seqs + decode_split_words(n_seqs, key_words, gpu_fi_decode_target_chunks(dec->fi));
    if (dec->fi != NULL && fi_words > words) words = fi_words;
    dec->state_members = 2 * n_seqs + 1 < max_members ? 2 * n_seqs + 1 : max_members;
    size_t logits_bytes = n_seqs * c->vocab_size * sizeof(float);
    const char *what = "cudaMalloc (generation attention states)";
    cudaError_t error = cudaMalloc((void **)&dec->state, state_bytes(c, dec->state_members));
    if (error == cudaSuccess) {
        what = "cudaMalloc (generation logits)";
        error = cudaMalloc((void **)&dec->logits, logits_bytes);
    }
    status = error != cudaSuccess ? gpu_fail(fn, what, error)
                                  : gpu_staging_open(fn, "generation arrays", words, &dec->rows);
    if (status != RMLP_OK) {
        gpu_decode_free(dec);
        return status;
    }
    *out = dec;
    return RMLP_OK;
}

/* A step through FlashInfer's batch decode: its arrays laid out in the staging (acquired) and sent,
 * then the rows run. *taken false (RMLP_OK, nothing sent) when the step does not fit the layout's
 * room or the kernel cannot read the buffers: the caller runs the chain kernels. */
static rmlp_status decode_flashinfer(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                                     const uint32_t *ids, const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                                     const gpu_decode_chains *ch, bool *taken) {
    uint32_t *s = dec->rows.host;
    size_t at_split = 3 * n_rows;
    decode_split split;
    if (!decode_split_build(ch->key_indptr, ch->keys, ch->member_indptr, ch->n_chains, ch->row_indptr,
                            ch->row_members, n_rows, gpu_fi_decode_target_chunks(dec->fi), s + at_split,
                            dec->rows.words - at_split, &split))
        return RMLP_OK;
    const rmlp_model_config *c = &ctx->model->config;
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    const uint32_t *d = dec->rows.device + at_split;
    gpu_fi_decode_step step = {dec->fi, d + split.at_kv_indptr, d + split.at_kv_indices, d + split.at_request,
                               d + split.at_tile, d + split.at_o_indptr, d + split.at_chunk, n_rows, split.n_chunks};
    gpu_compact_rows layer0 = {ctx->q, cache->k, cache->v, ctx->attn_c, qd, kvd, kvd, qd}; /* as cache.cu's */
    if (!gpu_fi_decode_ready(&step, &layer0)) return RMLP_OK;
    memcpy(s, ids, n_rows * sizeof *s);
    memcpy(s + n_rows, pos, n_rows * sizeof *s);
    memcpy(s + 2 * n_rows, slots, n_rows * sizeof *s);
    rmlp_status status = gpu_staging_send(fn, &dec->rows, at_split + split.words, ctx->stream);
    if (status != RMLP_OK) return status;
    *taken = true;
    d = dec->rows.device;
    gpu_cache_rows run = {d, d + n_rows, d + 2 * n_rows, NULL, NULL, NULL, n_rows, 0, NULL, NULL, NULL, NULL, &step};
    status = gpu_cache_run_rows(fn, ctx, cache, &run);
    if (status == RMLP_OK && n_rows > 0) ctx->counts.decode_steps[0]++; /* rmlp_gpu_stats */
    return status;
}

extern "C" rmlp_status gpu_decode_rows(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                                       const uint32_t *ids, const uint32_t *pos, const uint32_t *slots, size_t n_rows,
                                       const gpu_decode_chains *ch) {
    GPU_ON_DEVICE(fn, ctx->model->device);
    rmlp_status status = gpu_cache_check_capture(fn, ctx);
    if (status == RMLP_OK) status = gpu_staging_acquire(fn, &dec->rows);
    if (status != RMLP_OK) return status;
    size_t nc = ch->n_chains, n_keys = ch->key_indptr[nc], n_members = ch->member_indptr[nc];
    if (n_rows > dec->n_seqs || nc > 2 * dec->n_seqs + 1 || n_keys > dec->key_words || n_members > dec->max_members ||
        ch->row_indptr[n_rows] != n_members)
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "a step of %zu rows, %zu chains, %zu keys, %zu memberships exceeds the "
                         "session's arrays (%zu, %zu, %zu, %zu) or is inconsistent", n_rows, nc, n_keys, n_members,
                         dec->n_seqs, 2 * dec->n_seqs + 1, dec->key_words, dec->max_members);
    if (dec->fi != NULL) { /* FlashInfer's batch decode, where the step fits its layout */
        bool taken = false;
        status = decode_flashinfer(fn, ctx, cache, dec, ids, pos, slots, n_rows, ch, &taken);
        if (status != RMLP_OK || taken) return status;
    }
    status = reserve_states(fn, ctx, dec, n_members);
    if (status != RMLP_OK) return status;
    size_t at_pos = n_rows, at_slots = 2 * n_rows, at_kptr = 3 * n_rows, at_mptr = at_kptr + nc + 1;
    size_t at_rptr = at_mptr + nc + 1, at_keys = at_rptr + n_rows + 1, at_members = at_keys + n_keys;
    size_t at_rows = at_members + n_members, at_depth = at_rows + n_members, at_rpos = at_depth + nc;
    bool window = ctx->model->ext->any_window;
    size_t words = window ? at_rpos + n_rows : at_depth;
    uint32_t *s = dec->rows.host;
    memcpy(s, ids, n_rows * sizeof *s);
    memcpy(s + at_pos, pos, n_rows * sizeof *s);
    memcpy(s + at_slots, slots, n_rows * sizeof *s);
    memcpy(s + at_kptr, ch->key_indptr, (nc + 1) * sizeof *s);
    memcpy(s + at_mptr, ch->member_indptr, (nc + 1) * sizeof *s);
    memcpy(s + at_rptr, ch->row_indptr, (n_rows + 1) * sizeof *s);
    memcpy(s + at_keys, ch->keys, n_keys * sizeof *s);
    memcpy(s + at_members, ch->members, n_members * sizeof *s);
    memcpy(s + at_rows, ch->row_members, n_members * sizeof *s);
    if (window) {
        memcpy(s + at_depth, ch->chain_depth, nc * sizeof *s);
        for (size_t r = 0; r < n_rows; r++) s[at_rpos + r] = ch->path_len[r] - 1; /* each row's own position */
    }
    status = gpu_staging_send(fn, &dec->rows, words, ctx->stream);
    if (status != RMLP_OK) return status;
    const uint32_t *d = dec->rows.device;
    gpu_chain_layout chains = {d + at_kptr,   d + at_keys,   d + at_mptr,
                               d + at_members, nc,           n_members,
                               window ? d + at_depth : NULL, window ? d + at_rpos : NULL};
    gpu_cache_rows run = {d, d + at_pos, d + at_slots, NULL, NULL, NULL, n_rows, 0, &chains, d + at_rptr, d + at_rows,
                          dec->state, NULL};
    status = gpu_cache_run_rows(fn, ctx, cache, &run);
    if (status == RMLP_OK && n_rows > 0) ctx->counts.decode_steps[1]++;
    return status;
}

extern "C" rmlp_status gpu_decode_logits(const char *fn, gpu_context *ctx, gpu_cache *cache, gpu_decode *dec,
                                         const uint32_t *slots, size_t n, float *logits) {
    const gpu_model *m = ctx->model;
    GPU_ON_DEVICE(fn, m->device);
    if (n > dec->n_seqs)
        return rmlp_fail(RMLP_ERR_INTERNAL, fn, "logits of %zu rows exceed the session's %zu", n, dec->n_seqs);
    rmlp_status status = gpu_cache_check_capture(fn, ctx);
    if (status == RMLP_OK) status = gpu_staging_acquire(fn, &dec->rows);
    if (status != RMLP_OK) return status;
    memcpy(dec->rows.host, slots, n * sizeof(uint32_t));
    status = gpu_staging_send(fn, &dec->rows, n, ctx->stream);
    if (status != RMLP_OK) return status;
    size_t h = m->config.hidden_size, vocab = m->config.vocab_size;
    cudaError_t error = gpu_gather_rows(ctx->normed, cache->hidden, h, dec->rows.device, n, h, m->dtype, ctx->stream);
    if (error != cudaSuccess) return gpu_fail(fn, "gpu_gather_rows (the last rows' hidden states)", error);
    status = gpu_logits_gemm(fn, "lm_head", ctx->blas, ctx->normed, n, h, m->lm_head, vocab, dec->logits, m->dtype);
    if (status != RMLP_OK) return status;
    GPU_TRY(fn, cudaMemcpyAsync(logits, dec->logits, n * vocab * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    GPU_TRY(fn, cudaStreamSynchronize(ctx->stream));
    return RMLP_OK;
}
