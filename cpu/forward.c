/*
 * forward.c: the whole model on one batch on the CPU (runner.h): embedding, layers, final norm,
 * attention in full or compact space, and the same against a prefix cache, and the check that the
 * output is finite.
 *
 * Full space: per layer, Q/K/V are scattered to the batch rows, attention runs over each
 * sequence's rows, its output is gathered back. Compact space: nothing leaves the N' compact
 * rows; the built-in attention reads q, k, v in place from the fused qkv rows and writes the
 * compact attention output, a host callback gets dense q, k, v of the compact rows and the
 * layout arrays (rmlp_attention_args, RMLP_ATTENTION_COMPACT). A plan whose maps are the identity
 * (radix off, or nothing shared) has the same rows in both spaces: there the built-in full-space
 * attention reads the fused qkv rows in place too and nothing is scattered or gathered (the same
 * kernel on the same values as the copies it skips: bit for bit the output it had), as on CUDA.
 *
 * With a prefix cache (cache/kv_cache.h), the forward is the compact one over the rows the cache
 * lacks: their K and V go into their slots layer by layer, attention reads every key of a path
 * from the slots (kv_indices = the slots of the path), and their final hidden states go into the
 * slots too; the output is then read from the slots of all rows, cached or computed.
 *
 * rmlp_forward_last runs the same forward but for the last layer's post-attention and the final
 * norm, which take each sequence's last row alone (common/forward_rows.h); through a cache its
 * rows are read from their slots like the others.
 *
 * A CPU forward's output is checked to be finite (RMLP_ERR_MODEL naming the first row that is
 * not: finite weights large enough to overflow fp32 pass the load's check).
 */
#include <math.h>
#include <string.h>

#include "cache/kv_cache.h"
#include "common/status.h"
#include "runner.h"

/* The arguments the library hands an attention callback for this plan, in `space`, over the
 * given buffers (q, k, v, out: batch rows in full space, compact rows in compact space). */
static rmlp_attention_args attention_args(const rmlp_model_config *cfg, const rmlp_plan *plan,
                                          rmlp_attention_space space, void *q, void *k, void *v, void *out) {
    rmlp_attention_args args = {
        .n_tokens = plan->n_tokens,
        .n_seqs = plan->n_seqs,
        .n_heads = cfg->num_attention_heads,
        .n_kv_heads = cfg->num_key_value_heads,
        .head_dim = cfg->head_dim,
        .scale = 1.0f / sqrtf((float)cfg->head_dim),
        .dtype = RMLP_DTYPE_F32,
        .cu_seqlens = plan->cu_seqlens,
        .q = q,
        .k = k,
        .v = v,
        .out = out,
        .cu_seqlens_device = plan->cu_seqlens, /* the CPU's memory is the host's */
        .layout = space,
    };
    for (uint32_t s = 0; s < plan->n_seqs; s++) {
        uint32_t len = plan->cu_seqlens[s + 1] - plan->cu_seqlens[s];
        if (len > args.max_seqlen) args.max_seqlen = len;
    }
    if (space == RMLP_ATTENTION_COMPACT) {
        args.n_compact = plan->n_compact;
        args.qo_indptr = args.qo_indptr_device = plan->qo_indptr;
        args.kv_indptr = args.kv_indptr_device = plan->cu_seqlens;
        args.kv_indices = args.kv_indices_device = plan->scatter;
    }
    return args;
}

/* Every way out of a whole forward: RoPE's table released, the profile's forward ended. */
static rmlp_status forward_end(cpu_workspace *ws, rmlp_status status) {
    cpu_rope_end(ws);
    cpu_profile_end(&ws->profile);
    return status;
}

/* rmlp_forward_last's last layer after its attention: the n_seqs last rows alone through the O
 * projection, the MLP and the final norm into out (n_seqs, hidden). attn: the layer's attention
 * output, batch rows (full space; read at each row's fold_gather representative, as
 * cpu_post_attention reads them) or compact rows. */
static void post_attention_last(const rmlp_model_config *cfg, const model_weights *w, const layer_weights *lw,
                                cpu_workspace *ws, const rmlp_plan *plan, const float *attn, bool batch_rows,
                                float *out) {
    size_t hsz = cfg->hidden_size, qd = (size_t)cfg->num_attention_heads * cfg->head_dim;
    float *attn_last = ws->q; /* (n_seqs <= n_tokens, q_dim): q is spent once attention has run */
    for (size_t s = 0; s < plan->n_seqs; s++) {
        size_t c = plan->scatter[plan->cu_seqlens[s + 1] - 1];
        memcpy(attn_last + s * qd, attn + (batch_rows ? (size_t)plan->fold_gather[c] : c) * qd, qd * sizeof(float));
        memcpy(out + s * hsz, ws->hidden + c * hsz, hsz * sizeof(float));
    }
    cpu_profile_mark(&ws->profile, CPU_PHASE_GATHER);
    rmlp_plan last = *plan; /* the position-wise calls on the n_seqs rows as compact rows */
    last.n_compact = last.n_compact_padded = plan->n_seqs;
    cpu_post_attention_compact(cfg, lw, ws, &last, attn_last, out);
    cpu_final_norm_compact(cfg, w, ws, &last, out, ws->normed);
    memcpy(out, ws->normed, plan->n_seqs * hsz * sizeof(float));
    cpu_profile_mark(&ws->profile, CPU_PHASE_ELEMENTWISE);
}

/* Whether the plan's compact rows are its batch rows, in order (no padding, scatter the identity). */
static bool plan_is_identity(const rmlp_plan *plan) {
    if (plan->n_compact_padded != plan->n_tokens) return false;
    for (uint32_t i = 0; i < plan->n_tokens; i++)
        if (plan->scatter[i] != i) return false;
    return true;
}

/* The CPU forward: embedding, layers, final norm into out (the rows `rows` names). */
rmlp_status cpu_forward(const char *fn, cpu_context *ctx, const rmlp_plan *plan, rmlp_attention_space space,
                        rmlp_attention_fn attention, void *user_data, void *out, forward_rows rows) {
    const rmlp_model_config *cfg = ctx->config;
    const model_weights *w = ctx->weights;
    cpu_workspace *ws = &ctx->ws;
    bool compact = space == RMLP_ATTENTION_COMPACT;
    /* the built-in attention in full space on an identity plan: the compact branch's rows in place */
    bool identity = plan_is_identity(plan);
    bool in_place = compact || (attention == NULL && identity);
    size_t qd = (size_t)cfg->num_attention_heads * cfg->head_dim, kvd = (size_t)cfg->num_key_value_heads * cfg->head_dim;
    size_t width = qd + 2 * kvd;
    /* compact: the callback's output goes where post-attention reads it (cap_compact rows) */
    rmlp_attention_args args = attention_args(cfg, plan, space, ws->q, ws->k, ws->v, compact ? ws->attn_c : ws->attn);
    /* the built-in compact attention reads q, k, v in place from the fused qkv rows */
    cpu_attention_rows fused = {ws->qkv, ws->qkv + qd, ws->qkv + qd + kvd, ws->attn_c, width, width, width, qd, 0};
    cpu_profile *prof = &ws->profile;
    cpu_profile_begin(prof);
    cpu_rope_begin(cfg, ws, plan);
    cpu_embed(cfg, w, plan, ws->hidden);
    cpu_profile_mark(prof, CPU_PHASE_GATHER);
    for (uint32_t layer = 0; layer < cfg->num_hidden_layers; layer++) {
        const layer_weights *lw = &w->layers[layer];
        const layer_attention *la = &w->ext->layers[layer];
        /* rmlp_forward_last: the last layer's post-attention on the last rows alone, then return */
        bool last = rows == FORWARD_LAST_ROWS && layer + 1 == cfg->num_hidden_layers;
        args.layer = layer;
        args.scale = la->scale, args.sliding_window = la->window, args.softcap = la->softcap;
        if (!in_place) {
            cpu_pre_attention(cfg, lw, la, ws, plan, ws->hidden, ws->q, ws->k, ws->v);
            if (attention != NULL) {
                rmlp_status status = rmlp_call_attention(fn, attention, user_data, &args);
                if (status != RMLP_OK) return forward_end(ws, status);
            } else {
                cpu_attend_full(ws, ws->q, ws->k, ws->v, plan->cu_seqlens, plan->n_seqs, args.n_heads,
                                args.n_kv_heads, args.head_dim, la, ws->attn);
            }
            cpu_profile_mark(prof, CPU_PHASE_ATTENTION);
            if (last) post_attention_last(cfg, w, lw, ws, plan, ws->attn, true, out);
            else cpu_post_attention(cfg, lw, ws, plan, ws->attn, ws->hidden);
        } else if (attention != NULL) { /* compact space here */
            cpu_pre_attention_compact(cfg, lw, la, ws, plan, ws->hidden, plan->n_compact, ws->q, ws->k, ws->v);
            rmlp_status status = rmlp_call_attention(fn, attention, user_data, &args);
            if (status != RMLP_OK) return forward_end(ws, status);
            cpu_profile_mark(prof, CPU_PHASE_ATTENTION);
            if (last) post_attention_last(cfg, w, lw, ws, plan, ws->attn_c, false, out);
            else cpu_post_attention_compact(cfg, lw, ws, plan, ws->attn_c, ws->hidden);
        } else {
            cpu_project_qkv(cfg, lw, la, ws, plan, ws->hidden);
            /* full space on an identity plan: cpu_attend_full's rows, read in place */
            cpu_attend_compact(ws, &fused, compact ? plan->qo_indptr : plan->cu_seqlens, plan->cu_seqlens,
                               compact ? plan->scatter : NULL, plan->n_seqs, args.n_heads, args.n_kv_heads,
                               args.head_dim, la);
            cpu_profile_mark(prof, CPU_PHASE_ATTENTION);
            if (last) post_attention_last(cfg, w, lw, ws, plan, ws->attn_c, false, out);
            else cpu_post_attention_compact(cfg, lw, ws, plan, ws->attn_c, ws->hidden);
        }
    }
    if (rows == FORWARD_COMPACT_ROWS || (rows == FORWARD_BATCH_ROWS && identity)) { /* identity: the same rows */
        cpu_final_norm_compact(cfg, w, ws, plan, ws->hidden, out);
        cpu_profile_mark(prof, CPU_PHASE_ELEMENTWISE);
    } else if (rows == FORWARD_BATCH_ROWS) {
        cpu_final_norm(cfg, w, ws, plan, ws->hidden, out);
    }
    return forward_end(ws, RMLP_OK);
}

/* The compact attention of a cached batch's computed rows over their paths' slots. */
typedef struct cached_batch_attention {
    const rmlp_model_config *cfg;
    const rmlp_plan *plan;
    const kv_cache *cache;
    cpu_workspace *ws;
} cached_batch_attention;

static void attend_paths(void *arg, const cpu_attention_rows *rows, const layer_attention *la) {
    const cached_batch_attention *a = arg;
    const rmlp_model_config *cfg = a->cfg;
    cpu_attend_compact(a->ws, rows, a->cache->batch.cqo_indptr, a->plan->cu_seqlens, a->cache->path, a->plan->n_seqs,
                       cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim, la);
}

int cpu_forward_cached(cpu_context *ctx, kv_cache *c, const rmlp_plan *plan, void *out, forward_rows out_rows) {
    if (kv_cache_begin(c, plan, out_rows) != 0) return 1;
    size_t hsz = ctx->config->hidden_size;
    /* the computed rows as a plan of their own for the position-wise calls */
    rmlp_plan rows = *plan;
    rows.n_compact = rows.n_compact_padded = c->batch.n_computed;
    rows.compact_input_ids = c->ids, rows.compact_position_ids = c->pos;
    cached_batch_attention attention = {ctx->config, plan, c, &ctx->ws};
    cpu_profile_begin(&ctx->ws.profile);
    if (rows.n_compact > 0) cpu_cached_rows_run(ctx, c, &rows, c->slots, attend_paths, &attention);
    kv_pool_end(c->pool, plan, &c->batch, 1);
    /* the output, read from the slots: compact rows, batch rows through scatter, or the last rows */
    float *o = out;
    for (size_t i = 0; i < c->n_out; i++)
        memcpy(o + i * hsz, c->hidden + (size_t)c->out_slots[i] * hsz, hsz * sizeof(float));
    if (out_rows == FORWARD_COMPACT_ROWS)
        memset(o + plan->n_compact * hsz, 0, (plan->n_compact_padded - plan->n_compact) * hsz * sizeof(float));
    cpu_profile_end(&ctx->ws.profile);
    return 0;
}

/* The first element of x (n floats) that is an infinity or NaN, or n. Words are tested by their
 * exponent bits, a block at a time without a branch (the common case: all finite). */
static size_t first_not_finite(const float *x, size_t n) {
    enum { BLOCK = 1024 };
    for (size_t start = 0; start < n; start += BLOCK) {
        size_t end = n - start < BLOCK ? n : start + BLOCK;
        uint32_t hit = 0;
        for (size_t i = start; i < end; i++) {
            uint32_t bits;
            memcpy(&bits, &x[i], sizeof bits);
            hit |= (bits & 0x7f800000u) == 0x7f800000u;
        }
        for (size_t i = start; hit && i < end; i++)
            if (!isfinite(x[i])) return i;
    }
    return n;
}

/* The output is left as computed. A CUDA forward's output stays on the device: a kernel after the
 * forward counts it instead (gpu/backend.c, gpu/nonfinite.h; the forward is asynchronous, so no
 * status can say it). */
rmlp_status cpu_check_output(const char *fn, const cpu_context *ctx, const rmlp_plan *plan, const float *out,
                             forward_rows out_rows) {
    size_t hsz = ctx->config->hidden_size, rows = forward_rows_count(plan, out_rows);
    size_t at = first_not_finite(out, rows * hsz);
    if (at == rows * hsz) return RMLP_OK;
    size_t row = at / hsz;
    const char *kind = out_rows == FORWARD_COMPACT_ROWS ? "compact row"
                       : out_rows == FORWARD_LAST_ROWS  ? "the last row of sequence"
                                                        : "batch row";
    return rmlp_fail(RMLP_ERR_MODEL, fn,
                     "the output is not finite: %s %zu holds %s at element %zu of %zu (the model's activations "
                     "overflow fp32: weights too large for this batch); out holds the output as computed",
                     kind, row, isnan(out[at]) ? "NaN" : "an infinity", at % hsz, hsz);
}

