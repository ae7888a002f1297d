/*
 * decode.c: a generation session's steps on the CPU (runner.h; the session itself is
 * generate/session.c). A step's new rows run every position-wise op as one matrix (one GEMM per
 * projection for all of them, or cpu_linear_step's few-row kernel on the session's threads), the
 * attention of each over its path's slots (decode_attention.c: shared keys read once per step
 * for every sequence below them), the final norm into the slots; the LM head reads every active
 * sequence's row as one GEMM.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/kv_cache.h"
#include "common/alloc.h"
#include "common/status.h"
#include "decode_attention.h"
#include "linear_few.h"
#include "runner.h"

struct cpu_decode {
    workers *pool;  /* the steps' threads (more than one thread), else NULL */
    float *scratch; /* (decode_scratch_floats for the pool's threads) */
    float *hid;     /* (n_seqs, hidden) the rows the LM head reads */
    float *wide;    /* a bf16-weight model's: the few-row linear layers' widened rows (linear_few.h) */
};

void cpu_decode_free(cpu_decode *dec) {
    if (dec == NULL) return;
    workers_destroy(dec->pool);
    free(dec->scratch);
    free(dec->hid);
    free(dec->wide);
    free(dec);
}

rmlp_status cpu_decode_create(const char *fn, const cpu_context *ctx, size_t n_seqs, cpu_decode **out) {
    const rmlp_model_config *cfg = ctx->config;
    *out = NULL;
    /* the steps' threads (decode attention, linear layers, LM head): the CPU path's count */
    size_t n_threads = rmlp_cpu_threads();
    if (n_threads > WORKERS_MAX) n_threads = WORKERS_MAX;
    size_t scratch_bytes = decode_scratch_floats(n_seqs, cfg->num_attention_heads, cfg->num_key_value_heads,
                                                 cfg->head_dim, n_threads) * sizeof(float);
    size_t hid_bytes = n_seqs * cfg->hidden_size * sizeof(float);
    size_t max_in = cfg->hidden_size > cfg->intermediate_size ? cfg->hidden_size : cfg->intermediate_size;
    size_t q_dim = (size_t)cfg->num_attention_heads * cfg->head_dim;
    max_in = q_dim > max_in ? q_dim : max_in;
    bool bf16 = ctx->ws.wide != NULL; /* the workspace holds a panel for bf16 weights only */
    size_t wide_bytes = bf16 ? cpu_linear_few_bf16_scratch_floats(max_in, n_threads) * sizeof(float) : 0;
    cpu_decode *dec = rmlp_calloc(1, sizeof *dec);
    const char *failed = "CPU state";
    size_t failed_bytes = sizeof *dec;
    /* cache-line aligned (the attention scratch's parts each start on a line) */
    if (dec != NULL && (dec->scratch = rmlp_malloc_aligned(scratch_bytes)) == NULL)
        failed = "attention scratch", failed_bytes = scratch_bytes;
    else if (dec != NULL && (dec->hid = rmlp_malloc_aligned(hid_bytes)) == NULL)
        failed = "hidden rows", failed_bytes = hid_bytes;
    else if (dec != NULL && bf16 && (dec->wide = rmlp_malloc_aligned(wide_bytes)) == NULL)
        failed = "bf16 weight rows", failed_bytes = wide_bytes;
    if (dec == NULL || dec->scratch == NULL || dec->hid == NULL || (bf16 && dec->wide == NULL)) {
        cpu_decode_free(dec);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating '%s' of the generation session (%zu bytes) failed",
                         failed, failed_bytes);
    }
    int thread_error = 0;
    if (n_threads > 1 && (dec->pool = workers_create(n_threads, &thread_error)) == NULL) {
        char why[128] = "out of memory";
        if (thread_error != ENOMEM) strerror_r(thread_error, why, sizeof why);
        cpu_decode_free(dec);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "starting the generation session's %zu CPU threads failed: %s "
                         "(rmlp_set_cpu_threads sets how many; 1 starts none)", n_threads, why);
    }
    *out = dec;
    return RMLP_OK;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A step's attention: each new row over its path's slots, shared keys read once (decode_attention.h). */
typedef struct step_attention {
    const rmlp_model_config *cfg;
    const rmlp_step_rows *rows;
    cpu_decode *dec;
    double ms;
} step_attention;

static void attend_chains(void *arg, const cpu_attention_rows *rows, const layer_attention *la) {
    step_attention *a = arg;
    const rmlp_model_config *cfg = a->cfg;
    double start = now_ms();
    cpu_decode_attention(rows, a->rows->chains, a->rows->n_chains, a->rows->members, a->rows->n_rows,
                         cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim, la, a->rows->path_len,
                         a->dec->pool, a->dec->scratch);
    a->ms += now_ms() - start;
}

double cpu_decode_rows(cpu_context *ctx, kv_cache *cache, cpu_decode *dec, const rmlp_step_rows *step) {
    step_attention attention = {ctx->config, step, dec, 0.0};
    rmlp_plan rows = {0};
    rows.n_tokens = rows.n_compact = rows.n_compact_padded = step->n_rows;
    rows.compact_input_ids = step->ids, rows.compact_position_ids = step->pos;
    ctx->ws.few_rows = true, ctx->ws.few_rows_pool = dec->pool; /* the step's linear layers */
    ctx->ws.few_rows_wide = dec->wide;
    cpu_cached_rows_run(ctx, cache, &rows, step->slots, attend_chains, &attention);
    ctx->ws.few_rows = false, ctx->ws.few_rows_pool = NULL, ctx->ws.few_rows_wide = NULL;
    return attention.ms;
}

void cpu_decode_logits(cpu_context *ctx, const kv_cache *cache, cpu_decode *dec, const uint32_t *slots, size_t n,
                       float *logits) {
    const rmlp_model_config *cfg = ctx->config;
    cpu_gather_rows(cache->hidden, cfg->hidden_size, slots, n, cfg->hidden_size, dec->hid);
    cpu_linear_step(dec->hid, n, cfg->hidden_size, ctx->weights->lm_head, NULL, cfg->vocab_size, logits, dec->pool);
}
