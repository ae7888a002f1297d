/*
 * session.c: generation on the prefix tree, backend-neutral (session.h): the session's sequences
 * and their rows in the prefix cache, the rows each step places and the chains their paths are
 * cut into; the backend (common/backend.h) computes the rows and the logits.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/kv_cache.h"
#include "chains.h"
#include "common/alloc.h"
#include "common/status.h"
#include "model/logit_softcap.h"
#include "session.h"

#define NONE UINT32_MAX

struct generate_session {
    generate_target target;
    void *state; /* the backend's (generate_open), or NULL */
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
    rmlp_generate_stats stats;
};

void generate_session_free(generate_session *g) {
    if (g == NULL) return;
    void *arrays[] = {g->last, g->position, g->depth,    g->generated, g->active, g->new_slot, g->ids,    g->pos,
                      g->slots, g->path_len, g->paths, g->below,     g->chain_of, g->chains,  g->members};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
    if (g->state != NULL) g->target.backend->generate_close(g->state);
    free(g);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A session on `target` for n_seqs sequences with paths of up to max_path rows, or NULL with what
 * failed. */
static generate_session *session_new(const generate_target *target, uint32_t n_slots, uint32_t n_seqs,
                                     uint32_t max_path, const char **failed, size_t *failed_bytes) {
    generate_session *g = rmlp_calloc(1, sizeof *g);
    *failed = "state", *failed_bytes = sizeof *g;
    if (g == NULL) return NULL;
    g->target = *target;
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
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
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

/* logits (n, vocab) = LM head of the final hidden states in slots[0 .. n), soft-capped where the
 * model caps them (Gemma 2: model/logit_softcap.h). */
static rmlp_status lm_head(const char *fn, generate_session *g, const uint32_t *slots, size_t n, float *logits) {
    const generate_target *t = &g->target;
    rmlp_status status = t->backend->generate_logits(fn, t->ctx, t->cache_side, t->cache, g->state, slots, n, logits);
    if (status == RMLP_OK) logit_softcap(logits, n * t->config->vocab_size, t->config->final_logit_softcapping);
    return status;
}

rmlp_status generate_session_begin(const char *fn, const generate_target *t, const rmlp_plan *plan,
                                   const rmlp_generate_params *params, float *logits, generate_session **out) {
    *out = NULL;
    kv_cache *c = t->cache;
    uint32_t longest = 0;
    for (uint32_t s = 0; s < plan->n_seqs; s++)
        if (plan->cu_seqlens[s + 1] - plan->cu_seqlens[s] > longest) longest = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
    uint64_t max_path = (uint64_t)longest + params->max_new_tokens;
    if (max_path > c->n_slots)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "a prompt of %u tokens plus max_new_tokens=%u rows exceeds the "
                         "prefix cache's %u slots", longest, params->max_new_tokens, c->n_slots);
    const char *failed = NULL;
    size_t failed_bytes = 0;
    generate_session *g = session_new(t, c->n_slots, plan->n_seqs, (uint32_t)max_path, &failed, &failed_bytes);
    if (g == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating '%s' of the generation session (%zu bytes) failed",
                         failed, failed_bytes);
    g->max_new = params->max_new_tokens;
    g->shared = params->shared_prefix_attention;
    /* the prefill: the cached forward; its slots are then in batch.slot_of */
    bool skipped = false; /* the prompts did not fit the cache */
    rmlp_status status = t->backend->generate_open(fn, t->ctx, t->config, plan->n_seqs, max_path, &g->state);
    if (status == RMLP_OK)
        status = t->backend->generate_prefill(fn, t->ctx, t->cache_side, c, g->state, plan, &skipped);
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
    status = lm_head(fn, g, g->last, plan->n_seqs, logits);
    if (status != RMLP_OK) { /* a device failure: no session */
        for (uint32_t s = 0; s < plan->n_seqs; s++) kv_pool_unlock(c->pool, g->last[s]);
        generate_session_free(g);
        return status;
    }
    *out = g;
    return RMLP_OK;
}

/* Checks a step's arguments against the session (nothing changed on failure). */
static rmlp_status check_step(const char *fn, const generate_session *g, const uint32_t *tokens, size_t n_tokens,
                              const float *logits) {
    const rmlp_model_config *cfg = g->target.config;
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
    }
    return RMLP_OK;
}

/* Finds or makes each active sequence's new row (new_slot), locked once per sequence, and lists the
 * rows to compute. Returns how many, or -1 when the cache cannot hold them (nothing changed). */
static long place_rows(kv_pool *pool, generate_session *g, const uint32_t *tokens) {
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
static void build_paths(const kv_pool *pool, generate_session *g, uint32_t n_rows) {
    for (uint32_t r = 0; r < n_rows; r++) {
        uint32_t *path = g->paths + (size_t)r * g->max_path, slot = g->slots[r];
        for (uint32_t d = g->path_len[r]; d-- > 0;) {
            path[d] = slot;
            slot = kv_pool_parent(pool, slot);
        }
    }
}

/* The new rows through the model: their K/V and final hidden states into their slots (committed
 * there when computed; on a device failure the caller discards them). */
static rmlp_status run_rows(const char *fn, generate_session *g, uint32_t n_rows) {
    const generate_target *t = &g->target;
    kv_cache *c = t->cache;
    build_paths(c->pool, g, n_rows);
    size_t n_chains = decode_build_chains(g->paths, g->max_path, g->path_len, n_rows, g->shared, g->below,
                                          g->chain_of, g->chains, g->members);
    rmlp_step_rows rows = {g->ids, g->pos, g->slots, n_rows, g->chains, n_chains, g->members, g->path_len};
    rmlp_status status =
        t->backend->generate_rows(fn, t->ctx, t->cache_side, c, g->state, &rows, &g->stats.attention_ms);
    if (status == RMLP_OK)
        for (uint32_t r = 0; r < n_rows; r++) kv_pool_commit(c->pool, g->slots[r]);
    return status;
}

/* Undoes place_rows after a failure: the rows it made leave the tree, the ones it found are unlocked.
 * `computed`: whether the made rows were computed (committed) and stay cached. */
static void unplace_rows(kv_pool *pool, generate_session *g, uint32_t n_rows, bool computed) {
    for (uint32_t i = 0; i < g->n_active; i++) {
        bool made = false;
        for (uint32_t r = 0; r < n_rows && !made && !computed; r++) made = g->slots[r] == g->new_slot[i];
        if (!made) kv_pool_unlock(pool, g->new_slot[i]);
    }
    for (uint32_t r = n_rows; r-- > 0 && !computed;) kv_pool_discard(pool, g->slots[r]);
}

rmlp_status generate_session_step(const char *fn, generate_session *g, const uint32_t *tokens, size_t n_tokens,
                                  float *logits) {
    rmlp_status status = check_step(fn, g, tokens, n_tokens, logits);
    if (status != RMLP_OK) return status;
    kv_cache *c = g->target.cache;
    double start = now_ms();
    long n_rows = place_rows(c->pool, g, tokens);
    if (n_rows < 0)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "the prefix cache (%u slots) has no room for this step's new "
                         "rows with every unlocked row evicted: finish sequences, or give the context a larger "
                         "cache_bytes", c->n_slots);
    status = n_rows > 0 ? run_rows(fn, g, (uint32_t)n_rows) : RMLP_OK;
    if (status != RMLP_OK) {
        unplace_rows(c->pool, g, (uint32_t)n_rows, false);
        return status;
    }
    status = lm_head(fn, g, g->new_slot, g->n_active, logits);
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

rmlp_status generate_session_finish(const char *fn, generate_session *g, uint32_t seq) {
    if (seq >= g->n_seqs)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "seq=%u, but the session has %u sequences", seq, g->n_seqs);
    uint32_t i = 0;
    while (i < g->n_active && g->active[i] != seq) i++;
    if (i == g->n_active) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "sequence %u has finished already", seq);
    kv_pool_unlock(g->target.cache->pool, g->last[seq]);
    memmove(g->active + i, g->active + i + 1, (g->n_active - i - 1) * sizeof(uint32_t));
    g->n_active--;
    g->stats.n_active = g->n_active;
    return RMLP_OK;
}

void generate_session_end(generate_session *g) {
    for (uint32_t i = 0; g != NULL && i < g->n_active; i++) kv_pool_unlock(g->target.cache->pool, g->last[g->active[i]]);
    generate_session_free(g);
}

size_t generate_session_active(const generate_session *g, uint32_t *seqs) {
    if (seqs != NULL) memcpy(seqs, g->active, g->n_active * sizeof(uint32_t));
    return g->n_active;
}

rmlp_generate_stats generate_session_stats(const generate_session *g) { return g->stats; }
