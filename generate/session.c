/*
 * generate.c: generation on the prefix tree (rmlp_generate_*), on the CPU. A session lives on a
 * context with a prefix cache: begin prefills the plan's prompts through the cached forward (so
 * prompt rows are cache slots, shared where the prompts share) and locks each sequence's last slot
 * (which keeps its whole path: only unlocked leaves are evicted); each step appends one row per
 * active sequence as a child slot of its last one (a row already cached, or appended by another
 * sequence this step, is reused, not recomputed), runs the new rows through every position-wise op
 * as one matrix (one GEMM per projection for all of them), attention of each over its path's slots
 * (cpu/decode_attention.c: shared keys read once per step for every sequence below them), the final
 * norm into the slots, and the LM head for every active sequence as one GEMM. Finishing a sequence
 * unlocks its last slot: its rows stay cached and evictable.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../cache/kv_cache.h"
#include "../../cpu/cpu_ops.h"
#include "../../cpu/decode_attention.h"
#include "../../cpu/layer.h"
#include "../../cpu/linear_few.h"
#include "alloc.h"
#include "cached_rows.h"
#include "context_checks.h"
#include "export.h"
#include "forward.h"
#include "generate.h"
#include "model_cuda.h"
#include "model_internal.h"
#include "validate.h"

#define NONE UINT32_MAX

struct generate_session {
    uint32_t n_seqs, n_active, max_new, max_path;
    bool shared;
    /* per sequence (n_seqs): last slot, its position id, rows in its path, rows appended */
    uint32_t *last, *position, *depth, *generated;
    uint32_t *active;   /* (n_seqs) the active sequences, ascending; n_active of them */
    uint32_t *new_slot; /* (n_seqs) a step's new row of each active sequence */
    /* a step's computed rows (n_seqs): token, position, slot, rows in its path; their paths
     * (n_seqs, max_path) root first */
    uint32_t *ids, *pos, *slots, *path_len, *paths;
    uint32_t *below, *chain_of; /* (n_slots) decode_build_chains' scratch */
    decode_chain *chains;       /* (decode_max_chains(n_seqs)) */
    uint32_t *members;          /* (decode_max_members(n_seqs, max_path)) */
    float *scratch;             /* (decode_scratch_floats for the pool's threads) */
    workers *pool;              /* the steps' threads (CPU, more than one thread), else NULL */
    float *hid;                 /* (n_seqs, hidden) the rows the LM head reads */
    /* on a CUDA context, the chains packed for the device (gpu_decode_chains): key_indptr and
     * member_indptr (decode_max_chains + 1), keys (n_seqs, max_path), row_indptr (n_seqs + 1),
     * row_members (decode_max_members); and the device arrays (model_cuda.h), else NULL */
    uint32_t *key_indptr, *member_indptr, *keys, *row_indptr, *row_members;
    struct gpu_decode *dev;
    rmlp_generate_stats stats;
};

void generate_session_free(struct generate_session *g) {
    if (g == NULL) return;
    void *arrays[] = {g->last,  g->position, g->depth, g->generated, g->active,  g->new_slot, g->ids,
                      g->pos,   g->slots,    g->path_len, g->paths,  g->below,   g->chain_of, g->chains,
                      g->members, g->scratch, g->hid, g->key_indptr, g->member_indptr, g->keys,
                      g->row_indptr, g->row_members};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    workers_destroy(g->pool);
    cuda_generate_close(g->dev);
    free(g);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A session for n_seqs sequences with paths of up to max_path rows, its decode attention on
 * n_threads threads, or NULL with what failed. */
static struct generate_session *session_new(const rmlp_model_config *cfg, uint32_t n_slots, uint32_t n_seqs,
                                            uint32_t max_path, size_t n_threads, const char **failed,
                                            size_t *failed_bytes) {
    struct generate_session *g = rmlp_calloc(1, sizeof *g);
    *failed = "state", *failed_bytes = sizeof *g;
    if (g == NULL) return NULL;
    size_t n = n_seqs, u = sizeof(uint32_t);
    struct {
        void **at;
        size_t bytes;
        const char *name;
    } parts[] = {
        {(void **)&g->last, n * u, "last"},         {(void **)&g->position, n * u, "position"},
        {(void **)&g->depth, n * u, "depth"},       {(void **)&g->generated, n * u, "generated"},
        {(void **)&g->active, n * u, "active"},     {(void **)&g->new_slot, n * u, "new_slot"},
        {(void **)&g->ids, n * u, "ids"},           {(void **)&g->pos, n * u, "pos"},
        {(void **)&g->slots, n * u, "slots"},       {(void **)&g->path_len, n * u, "path_len"},
        {(void **)&g->paths, n * max_path * u, "paths"},
        {(void **)&g->below, ((size_t)n_slots + 1) * u, "below"},
        {(void **)&g->chain_of, ((size_t)n_slots + 1) * u, "chain_of"},
        {(void **)&g->chains, decode_max_chains(n) * sizeof(decode_chain), "chains"},
        {(void **)&g->members, decode_max_members(n, max_path) * u, "members"},
        {(void **)&g->scratch,
         decode_scratch_floats(n, cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim, n_threads) *
             sizeof(float),
         "attention scratch"},
        {(void **)&g->hid, n * cfg->hidden_size * sizeof(float), "hidden rows"},
        {(void **)&g->key_indptr, (decode_max_chains(n) + 1) * u, "key_indptr"},
        {(void **)&g->member_indptr, (decode_max_chains(n) + 1) * u, "member_indptr"},
        {(void **)&g->keys, n * max_path * u, "keys"},
        {(void **)&g->row_indptr, (n + 1) * u, "row_indptr"},
        {(void **)&g->row_members, decode_max_members(n, max_path) * u, "row_members"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        /* cache-line aligned (the attention scratch's parts each start on a line) */
        *parts[i].at = rmlp_malloc_aligned(parts[i].bytes);
        if (*parts[i].at == NULL) {
            *failed = parts[i].name, *failed_bytes = parts[i].bytes;
            generate_session_free(g);
            return NULL;
        }
    }
    memset(g->below, 0, ((size_t)n_slots + 1) * u);
    memset(g->chain_of, 0xFF, ((size_t)n_slots + 1) * u);
    g->n_seqs = n_seqs, g->max_path = max_path;
    return g;
}

/* logits (n, vocab) = LM head of the final hidden states in slots[0 .. n). */
static rmlp_status lm_head(const char *fn, rmlp_context *context, struct generate_session *g, const uint32_t *slots,
                           size_t n, float *logits) {
    if (context->gpu != NULL) return cuda_generate_logits(fn, context, g->dev, slots, n, logits);
    const rmlp_model_config *cfg = &context->model->config;
    const kv_cache *c = context->cache;
    cpu_gather_rows(c->hidden, cfg->hidden_size, slots, n, cfg->hidden_size, g->hid);
    cpu_linear_step(g->hid, n, cfg->hidden_size, context->model->weights.lm_head, NULL, cfg->vocab_size, logits,
                    g->pool);
    return RMLP_OK;
}

/* The checks of calls that need a session, and of begin that need none. */
static rmlp_status check_context(const char *fn, const rmlp_context *context) {
    if (context->cache == NULL)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "generation keeps its rows in the prefix cache: create the "
                         "context with rmlp_context_params.cache_bytes > 0");
    if (!context->model->config.has_lm_head)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "the model has no LM head (no lm_head.weight, embeddings not "
                         "tied): it cannot generate");
    return RMLP_OK;
}

static rmlp_status need_session(const char *fn, const rmlp_context *context) {
    return context->gen != NULL ? RMLP_OK
                                : rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "no generation session on this context "
                                            "(rmlp_generate_begin first, or it was ended)");
}

RMLP_EXPORT rmlp_generate_params rmlp_generate_default_params(void) {
    rmlp_generate_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t)sizeof(rmlp_generate_params);
    params.max_new_tokens = 256;
    params.shared_prefix_attention = true;
    return params;
}

static rmlp_status generate_begin(const char *fn, rmlp_context *context, const rmlp_plan *plan,
                                  const rmlp_generate_params *caller, float *logits) {
    rmlp_status status = check_context(fn, context);
    if (status == RMLP_OK && context->gen != NULL)
        status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the context has a generation session already: "
                           "rmlp_generate_end it first");
    if (status == RMLP_OK) status = rmlp_check_call(fn, context, plan);
    if (status == RMLP_OK) status = rmlp_check_compact_plan(fn, plan);
    if (status == RMLP_OK) status = rmlp_check_nonempty_seqs(fn, plan->cu_seqlens, plan->n_seqs);
    if (status == RMLP_OK) status = rmlp_check_inputs(fn, &context->model->config, plan);
    if (status == RMLP_OK) status = rmlp_check_window(fn, &context->model->config, plan->cu_seqlens, plan->n_seqs);
    if (status == RMLP_OK && logits == NULL) status = rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "logits is NULL");
    rmlp_generate_params params = rmlp_generate_default_params();
    if (status == RMLP_OK && caller != NULL)
        status = rmlp_read_params(fn, "rmlp_generate_params", caller, &params, sizeof params, NULL, 0);
    if (status != RMLP_OK) return status;
    const rmlp_model_config *cfg = &context->model->config;
    kv_cache *c = context->cache;
    uint32_t longest = 0;
    for (uint32_t s = 0; s < plan->n_seqs; s++)
        if (plan->cu_seqlens[s + 1] - plan->cu_seqlens[s] > longest) longest = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
    uint64_t max_path = (uint64_t)longest + params.max_new_tokens;
    if (max_path > c->n_slots)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "a prompt of %u tokens plus max_new_tokens=%u rows exceeds the "
                         "prefix cache's %u slots", longest, params.max_new_tokens, c->n_slots);
    const char *failed = NULL;
    size_t failed_bytes = 0;
    /* the steps' threads (decode attention, linear layers, LM head): the CPU path's count */
    size_t n_threads = context->gpu != NULL ? 1 : rmlp_cpu_threads();
    if (n_threads > WORKERS_MAX) n_threads = WORKERS_MAX;
    struct generate_session *g = session_new(cfg, c->n_slots, plan->n_seqs, (uint32_t)max_path, n_threads, &failed,
                                             &failed_bytes);
    float *prefill = context->gpu != NULL ? NULL /* the device prefill has no output */
                                          : rmlp_malloc((size_t)plan->n_compact_padded * cfg->hidden_size * sizeof(float));
    if (g == NULL || (prefill == NULL && context->gpu == NULL)) {
        if (g == NULL) free(prefill);
        else failed = "prefill output", failed_bytes = (size_t)plan->n_compact_padded * cfg->hidden_size * 4;
        generate_session_free(g);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating '%s' of the generation session (%zu bytes) failed",
                         failed, failed_bytes);
    }
    int thread_error = 0;
    if (n_threads > 1 && (g->pool = workers_create(n_threads, &thread_error)) == NULL) {
        char why[128] = "out of memory";
        if (thread_error != ENOMEM) strerror_r(thread_error, why, sizeof why);
        free(prefill);
        generate_session_free(g);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "starting the generation session's %zu CPU threads failed: %s "
                         "(rmlp_set_cpu_threads sets how many; 1 starts none)", n_threads, why);
    }
    g->max_new = params.max_new_tokens;
    g->shared = params.shared_prefix_attention;
    /* the prefill: the cached forward (inside this call's guard); its slots are then in batch.slot_of */
    bool skipped = false; /* the prompts did not fit the cache */
    if (context->gpu != NULL) { /* on the device, the plan set on the context; no output needed */
        status = cuda_generate_open(fn, context, plan->n_seqs, (size_t)plan->n_seqs * max_path,
                                    decode_max_members(plan->n_seqs, max_path), &g->dev);
        if (status == RMLP_OK) status = cuda_forward_cached(fn, context, plan, NULL, true, &skipped);
    } else {
        uint64_t bypassed = kv_cache_stats(c).bypassed;
        status = rmlp_forward_in_call(fn, context, plan, prefill, true);
        skipped = kv_cache_stats(c).bypassed != bypassed;
    }
    free(prefill);
    if (status == RMLP_OK && skipped)
        status = rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "the prompts' %u compact rows do not fit the prefix cache of %u "
                           "slots (with every unlocked row evicted): give the context a larger cache_bytes",
                           plan->n_compact, c->n_slots);
    if (status != RMLP_OK) {
        generate_session_free(g);
        return status;
    }
    for (uint32_t s = 0; s < plan->n_seqs; s++) {
        uint32_t row = plan->scatter[plan->cu_seqlens[s + 1] - 1];
        g->last[s] = c->batch.slot_of[row];
        g->position[s] = plan->compact_position_ids[row];
        g->depth[s] = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
        g->generated[s] = 0;
        g->active[s] = s;
        kv_pool_lock(c->pool, g->last[s]);
    }
    g->n_active = plan->n_seqs;
    g->stats.n_seqs = g->stats.n_active = plan->n_seqs;
    context->gen = g;
    status = lm_head(fn, context, g, g->last, plan->n_seqs, logits);
    if (status != RMLP_OK) { /* a device failure: no session */
        for (uint32_t s = 0; s < plan->n_seqs; s++) kv_pool_unlock(c->pool, g->last[s]);
        generate_session_free(g);
        context->gen = NULL;
    }
    return status;
}

RMLP_EXPORT rmlp_status rmlp_generate_begin(rmlp_context *context, const rmlp_plan *plan,
                                            const rmlp_generate_params *params, float *logits) {
    static const char fn[] = "rmlp_generate_begin";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_begin(fn, context, plan, params, logits));
}

/* Checks a step's arguments against the session (nothing changed on failure). */
static rmlp_status check_step(const char *fn, const rmlp_context *context, const uint32_t *tokens, size_t n_tokens,
                              const float *logits) {
    const struct generate_session *g = context->gen;
    const rmlp_model_config *cfg = &context->model->config;
    if (g->n_active == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "every sequence of the session has finished");
    if (n_tokens != g->n_active)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_tokens=%zu, but %u sequences are active (one token each)",
                         n_tokens, g->n_active);
    if (tokens == NULL || logits == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tokens or logits is NULL");
    for (uint32_t i = 0; i < g->n_active; i++) {
        uint32_t s = g->active[i];
        if (tokens[i] >= cfg->vocab_size)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tokens[%u]=%u (sequence %u) >= vocab_size=%u", i,
                             tokens[i], s, cfg->vocab_size);
        if (g->generated[s] >= g->max_new)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "sequence %u has appended max_new_tokens=%u rows: "
                             "finish it (rmlp_generate_finish)", s, g->max_new);
        if (cfg->max_position_embeddings != 0 && (uint64_t)g->position[s] + 1 >= cfg->max_position_embeddings)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "sequence %u would reach position %u, past the model's "
                             "max_position_embeddings=%u", s, g->position[s] + 1, cfg->max_position_embeddings);
        if (cfg->sliding_window != 0 && g->depth[s] + 1 > cfg->sliding_window)
            return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "sequence %u would have %u tokens, more than the model's "
                             "sliding_window=%u (sliding-window attention is not implemented)", s, g->depth[s] + 1,
                             cfg->sliding_window);
    }
    return RMLP_OK;
}

/* Finds or makes each active sequence's new row (new_slot), locked once per sequence, and lists the
 * rows to compute. Returns how many, or -1 when the cache cannot hold them (nothing changed). */
static long place_rows(kv_pool *pool, struct generate_session *g, const uint32_t *tokens) {
    uint32_t m = g->n_active, need = 0;
    for (uint32_t i = 0; i < m; i++) { /* rows cached already: lock them before anything is evicted */
        uint32_t s = g->active[i];
        g->new_slot[i] = kv_pool_find(pool, g->last[s], tokens[i], g->position[s] + 1);
        if (g->new_slot[i] != NONE) kv_pool_lock(pool, g->new_slot[i]);
    }
    for (uint32_t i = 0; i < m; i++) {
        if (g->new_slot[i] != NONE) continue;
        uint32_t s = g->active[i], repeat = 0;
        for (uint32_t j = 0; j < i && !repeat; j++) /* another sequence appends the same row */
            repeat = g->new_slot[j] == NONE && g->last[g->active[j]] == g->last[s] && tokens[j] == tokens[i];
        need += !repeat;
    }
    if (kv_pool_reserve(pool, need) != 0) {
        for (uint32_t i = 0; i < m; i++)
            if (g->new_slot[i] != NONE) kv_pool_unlock(pool, g->new_slot[i]);
        return -1;
    }
    uint32_t n_rows = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (g->new_slot[i] != NONE) continue;
        uint32_t s = g->active[i], at = kv_pool_find(pool, g->last[s], tokens[i], g->position[s] + 1);
        if (at != NONE) { /* made by an earlier sequence of this step */
            kv_pool_lock(pool, at);
            g->new_slot[i] = at;
            continue;
        }
        g->new_slot[i] = at = kv_pool_add_child(pool, g->last[s], tokens[i], g->position[s] + 1);
        g->ids[n_rows] = tokens[i], g->pos[n_rows] = g->position[s] + 1, g->slots[n_rows] = at;
        g->path_len[n_rows++] = g->depth[s] + 1;
    }
    kv_pool_count_lookups(pool, m, m - n_rows);
    return n_rows;
}

/* The computed rows' paths, root first, from the tree's parent links. */
static void build_paths(const kv_pool *pool, struct generate_session *g, uint32_t n_rows) {
    for (uint32_t r = 0; r < n_rows; r++) {
        uint32_t *path = g->paths + (size_t)r * g->max_path, slot = g->slots[r];
        for (uint32_t d = g->path_len[r]; d-- > 0;) {
            path[d] = slot;
            slot = kv_pool_parent(pool, slot);
        }
    }
}

/* A step's attention: each new row over its path's slots, shared keys read once (decode_attention.h). */
typedef struct step_attention {
    const rmlp_model_config *cfg;
    struct generate_session *g;
    size_t n_chains, n_rows;
    double ms;
} step_attention;

static void attend_chains(void *arg, const cpu_attention_rows *rows) {
    step_attention *a = arg;
    const rmlp_model_config *cfg = a->cfg;
    double start = now_ms();
    cpu_decode_attention(rows, a->g->chains, a->n_chains, a->g->members, a->n_rows, cfg->num_attention_heads,
                         cfg->num_key_value_heads, cfg->head_dim, 1.0f / sqrtf((float)cfg->head_dim), a->g->pool,
                         a->g->scratch);
    a->ms += now_ms() - start;
}

/* The chains packed for the device (gpu_decode_chains), with each row's memberships. */
static gpu_decode_chains pack_chains(struct generate_session *g, size_t n_chains, uint32_t n_rows) {
    g->key_indptr[0] = g->member_indptr[0] = 0;
    for (size_t c = 0; c < n_chains; c++) {
        const decode_chain *ch = &g->chains[c];
        memcpy(g->keys + g->key_indptr[c], ch->keys, ch->n_keys * sizeof(uint32_t));
        g->key_indptr[c + 1] = g->key_indptr[c] + ch->n_keys;
        g->member_indptr[c + 1] = ch->first + ch->count; /* a chain's members follow the previous chain's */
    }
    uint32_t n_members = g->member_indptr[n_chains];
    memset(g->row_indptr, 0, (n_rows + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < n_members; i++) g->row_indptr[g->members[i] + 1]++;
    for (uint32_t r = 0; r < n_rows; r++) g->row_indptr[r + 1] += g->row_indptr[r];
    for (uint32_t i = 0; i < n_members; i++) g->row_members[g->row_indptr[g->members[i]]++] = i;
    for (uint32_t r = n_rows; r > 0; r--) g->row_indptr[r] = g->row_indptr[r - 1]; /* back to starts */
    g->row_indptr[0] = 0;
    return (gpu_decode_chains){g->key_indptr, g->keys, g->member_indptr, g->members, g->row_indptr, g->row_members,
                               n_chains};
}

/* The new rows through the model: their K/V and final hidden states into their slots (committed
 * there when computed; on a device failure the caller discards them). */
static rmlp_status run_rows(const char *fn, rmlp_context *context, struct generate_session *g, uint32_t n_rows) {
    kv_cache *c = context->cache;
    build_paths(c->pool, g, n_rows);
    size_t n_chains = decode_build_chains(g->paths, g->max_path, g->path_len, n_rows, g->shared, g->below,
                                          g->chain_of, g->chains, g->members);
    rmlp_status status = RMLP_OK;
    if (context->gpu != NULL) {
        gpu_decode_chains chains = pack_chains(g, n_chains, n_rows);
        status = cuda_generate_rows(fn, context, g->dev, g->ids, g->pos, g->slots, n_rows, &chains);
    } else {
        step_attention attention = {&context->model->config, g, n_chains, n_rows, 0.0};
        rmlp_plan rows = {0};
        rows.n_tokens = rows.n_compact = rows.n_compact_padded = n_rows;
        rows.compact_input_ids = g->ids, rows.compact_position_ids = g->pos;
        context->ws.few_rows = true, context->ws.few_rows_pool = g->pool; /* the step's linear layers */
        cached_rows_run(context, &rows, g->slots, attend_chains, &attention);
        context->ws.few_rows = false, context->ws.few_rows_pool = NULL;
        g->stats.attention_ms += attention.ms;
    }
    if (status == RMLP_OK)
        for (uint32_t r = 0; r < n_rows; r++) kv_pool_commit(c->pool, g->slots[r]);
    return status;
}

/* Undoes place_rows after a failure: the rows it made leave the tree, the ones it found are unlocked.
 * `computed`: whether the made rows were computed (committed) and stay cached. */
static void unplace_rows(kv_pool *pool, struct generate_session *g, uint32_t n_rows, bool computed) {
    for (uint32_t i = 0; i < g->n_active; i++) {
        bool made = false;
        for (uint32_t r = 0; r < n_rows && !made && !computed; r++) made = g->slots[r] == g->new_slot[i];
        if (!made) kv_pool_unlock(pool, g->new_slot[i]);
    }
    for (uint32_t r = n_rows; r-- > 0 && !computed;) kv_pool_discard(pool, g->slots[r]);
}

static rmlp_status generate_step(const char *fn, rmlp_context *context, const uint32_t *tokens, size_t n_tokens,
                                 float *logits) {
    rmlp_status status = need_session(fn, context);
    if (status == RMLP_OK) status = check_step(fn, context, tokens, n_tokens, logits);
    if (status != RMLP_OK) return status;
    struct generate_session *g = context->gen;
    kv_cache *c = context->cache;
    double start = now_ms();
    long n_rows = place_rows(c->pool, g, tokens);
    if (n_rows < 0)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "the prefix cache (%u slots) has no room for this step's new "
                         "rows with every unlocked row evicted: finish sequences, or give the context a larger "
                         "cache_bytes", c->n_slots);
    status = n_rows > 0 ? run_rows(fn, context, g, (uint32_t)n_rows) : RMLP_OK;
    if (status != RMLP_OK) {
        unplace_rows(c->pool, g, (uint32_t)n_rows, false);
        return status;
    }
    status = lm_head(fn, context, g, g->new_slot, g->n_active, logits);
    if (status != RMLP_OK) {
        unplace_rows(c->pool, g, (uint32_t)n_rows, true);
        return status;
    }
    for (uint32_t i = 0; i < g->n_active; i++) {
        uint32_t s = g->active[i];
        kv_pool_unlock(c->pool, g->last[s]);
        g->last[s] = g->new_slot[i];
        g->position[s]++, g->depth[s]++, g->generated[s]++;
    }
    g->stats.steps++;
    g->stats.rows += g->n_active;
    g->stats.rows_computed += (uint64_t)n_rows;
    g->stats.step_ms += now_ms() - start;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_step(rmlp_context *context, const uint32_t *tokens, size_t n_tokens,
                                           float *logits) {
    static const char fn[] = "rmlp_generate_step";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(context, generate_step(fn, context, tokens, n_tokens, logits));
}

static rmlp_status generate_finish(const char *fn, rmlp_context *context, uint32_t seq) {
    rmlp_status status = need_session(fn, context);
    if (status != RMLP_OK) return status;
    struct generate_session *g = context->gen;
    if (seq >= g->n_seqs)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "seq=%u, but the session has %u sequences", seq, g->n_seqs);
    uint32_t i = 0;
    while (i < g->n_active && g->active[i] != seq) i++;
    if (i == g->n_active) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "sequence %u has finished already", seq);
    kv_pool_unlock(context->cache->pool, g->last[seq]);
    memmove(g->active + i, g->active + i + 1, (g->n_active - i - 1) * sizeof(uint32_t));
    g->n_active--;
    g->stats.n_active = g->n_active;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_finish(rmlp_context *context, uint32_t seq) {
    static const char fn[] = "rmlp_generate_finish";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_finish(fn, context, seq));
}

RMLP_EXPORT rmlp_status rmlp_generate_end(rmlp_context *context) {
    static const char fn[] = "rmlp_generate_end";
    rmlp_status status = rmlp_context_enter(fn, context);
    if (status != RMLP_OK) return status;
    struct generate_session *g = context->gen;
    for (uint32_t i = 0; g != NULL && i < g->n_active; i++) kv_pool_unlock(context->cache->pool, g->last[g->active[i]]);
    generate_session_free(g);
    context->gen = NULL;
    return rmlp_guard_leave(context, RMLP_OK);
}

static rmlp_status generate_active(const char *fn, rmlp_context *context, uint32_t *seqs, size_t *n_active) {
    if (n_active == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "n_active is NULL");
    const struct generate_session *g = context->gen;
    *n_active = g != NULL ? g->n_active : 0;
    if (g != NULL && seqs != NULL) memcpy(seqs, g->active, g->n_active * sizeof(uint32_t));
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_active(rmlp_context *context, uint32_t *seqs, size_t *n_active) {
    static const char fn[] = "rmlp_generate_active";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_active(fn, context, seqs, n_active));
}

static rmlp_status generate_stats(const char *fn, rmlp_context *context, rmlp_generate_stats *out) {
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = context->gen != NULL ? context->gen->stats : (rmlp_generate_stats){0};
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_generate_get_stats(rmlp_context *context, rmlp_generate_stats *out) {
    static const char fn[] = "rmlp_generate_get_stats";
    rmlp_status status = rmlp_context_enter(fn, context);
    return status != RMLP_OK ? status : rmlp_guard_leave(context, generate_stats(fn, context, out));
}
