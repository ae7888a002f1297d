/*
 * layer.h: one decoder layer on the CPU in RadixMLP form. Everything position-wise runs on the
 * plan's compact rows; with attention in full space only the Q/K/V handed to attention and the
 * attention output taken back are in batch rows (scatter before, fold_gather after); in compact
 * space (the *_compact calls) nothing leaves the compact rows.
 */
#ifndef RMLP_CPU_LAYER_H
#define RMLP_CPU_LAYER_H

#include <stdbool.h>
#include <stddef.h>

#include "model/weights.h"
#include "profile.h"
#include "radix_mlp.h"
#include "workers.h"

/* Scratch of a context: compact buffers have cap_compact rows, batch buffers cap_tokens. */
typedef struct cpu_workspace {
    size_t cap_tokens, cap_compact;
    float *normed; /* (cap_compact, hidden) */
    float *qkv;    /* (cap_compact, q_dim + 2 * kv_dim) */
    float *attn_c; /* (cap_compact, q_dim) */
    float *gu;     /* (cap_compact, 2 * intermediate) */
    float *act;    /* (cap_compact, intermediate) */
    float *proj;   /* (cap_compact, hidden) */
    float *scores; /* attention scratch, cpu_attention_scratch_floats(cap_tokens, head_dim) */
    /* for whole forwards */
    float *hidden;    /* (cap_compact, hidden) */
    float *q, *attn;  /* (cap_tokens, q_dim) */
    float *k, *v;     /* (cap_tokens, kv_dim) */
    /* set by a generation step for its rows: linear layers run cpu_linear_step on these threads
     * (NULL: the calling thread); otherwise BLAS */
    bool few_rows;
    workers *few_rows_pool;
    cpu_profile profile; /* rmlp_context_cpu_profile's phases (profile.h) */
} cpu_workspace;

/* Returns 0, or -1 when out of memory (nothing left allocated) with the buffer that could not be
 * allocated in *failed_name and its size in *failed_bytes. */
int cpu_workspace_alloc(cpu_workspace *ws, const rmlp_model_config *cfg, size_t max_tokens, size_t max_compact,
                        const char **failed_name, size_t *failed_bytes);
void cpu_workspace_free(cpu_workspace *ws);

/* hidden (n_compact_padded, hidden) = embedding rows of the compact ids. */
void cpu_embed(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan, float *hidden);

/* ws->qkv (n_compact_padded, q_dim + 2 kv_dim) from hidden (n_compact_padded, hidden): RMSNorm,
 * Q/K/V projections (+ bias), q/k head norms, RoPE; q at column 0, k at q_dim, v after it. */
void cpu_project_qkv(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws, const rmlp_plan *plan,
                     const float *hidden);

/* q (n_tokens, q_dim), k, v (n_tokens, kv_dim) from hidden (n_compact_padded, hidden). */
void cpu_pre_attention(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                       const rmlp_plan *plan, const float *hidden, float *q, float *k, float *v);

/* Compact space: q (rows, q_dim), k, v (rows, kv_dim), the first `rows` compact rows (at most
 * n_compact_padded), no scatter. */
void cpu_pre_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                               const rmlp_plan *plan, const float *hidden, size_t rows, float *q, float *k, float *v);

/* hidden (n_compact_padded, hidden) += O(attn) then += MLP(norm(hidden)); attn (n_tokens, q_dim). */
void cpu_post_attention(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                        const rmlp_plan *plan, const float *attn, float *hidden);

/* The same from compact attention output attn_c (n_compact_padded, q_dim), no gather. */
void cpu_post_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                                const rmlp_plan *plan, const float *attn_c, float *hidden);

/* out (n_tokens, hidden) = final RMSNorm of hidden, scattered to the batch rows. */
void cpu_final_norm(const rmlp_model_config *cfg, const model_weights *w, cpu_workspace *ws, const rmlp_plan *plan,
                    const float *hidden, float *out);

/* out (n_compact_padded, hidden) = final RMSNorm of hidden, compact rows. */
void cpu_final_norm_compact(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan,
                            const float *hidden, float *out);

#endif
