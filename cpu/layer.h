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
#include "radix_mlp/types.h"
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
    /* for whole forwards */
    float *hidden;    /* (cap_compact, hidden) */
    float *q, *attn;  /* (cap_tokens, q_dim) */
    float *k, *v;     /* (cap_tokens, kv_dim) */
    /* set by a generation step for its rows: linear layers run cpu_linear_step on these threads
     * (NULL: the calling thread); otherwise BLAS */
    bool few_rows;
    workers *few_rows_pool;
    float *few_rows_wide; /* a bf16 model's: cpu_linear_few_bf16_scratch_floats for those threads */
    /* the elementwise passes' threads (rows.h): rmlp_cpu_threads() at the context's creation, the
     * calling thread one of them (NULL: it alone) */
    workers *pool;
    /* RoPE's cos and sin per compact row, one table per RoPE of the model (ext->n_rope, model_ext.h;
     * each (cap_compact, head_dim), rows_rope_table); rope_ready while a whole forward holds them for
     * its plan (cpu_rope_begin .. cpu_rope_end), else each cpu_project_qkv computes its layer's for
     * its own call */
    float *rope_cs;
    bool rope_ready;
    const model_ext *ext; /* the model's layers' attention and RoPE tables */
    float *flash; /* cpu_flash_attention's scratch, flash_scratch_floats per pool thread */
    float *wide;  /* a bf16 model's widened weight panel (linear_bf16.h); NULL for an fp32 model */
    /* a model on oneDNN's bf16 GEMMs (linear_onednn.h): the GEMM's x rounded to bf16,
     * (cap_compact, max(hidden, q_dim, intermediate)), and the model's count of GEMMs oneDNN
     * failed (model_weights::bf16_gemm_fallbacks); both NULL otherwise */
    uint16_t *x16;
    uint64_t *onednn_fallbacks;
    cpu_profile profile; /* rmlp_context_cpu_profile's phases (profile.h) */
} cpu_workspace;

/* Returns 0, or -1 when out of memory or threads (nothing left allocated) with the buffer that
 * could not be allocated in *failed_name and its size in *failed_bytes (0 for the threads: then
 * *thread_error is pthread_create's error, or ENOMEM). bf16_weights: the model's matrices are bf16
 * (the workspace then holds their widened panel); onednn_fallbacks: non-NULL for a model on oneDNN's
 * GEMMs (the workspace then holds x16 too), its fallback counter. */
int cpu_workspace_alloc(cpu_workspace *ws, const rmlp_model_config *cfg, const model_ext *ext, size_t max_tokens,
                        size_t max_compact, bool bf16_weights, uint64_t *onednn_fallbacks, const char **failed_name, size_t *failed_bytes,
                        int *thread_error);
void cpu_workspace_free(cpu_workspace *ws);

/* A whole forward over the plan's compact rows: RoPE's angles computed once for every layer
 * (cpu_rope_begin), until cpu_rope_end, which every way out of the forward must call. */
void cpu_rope_begin(const rmlp_model_config *cfg, cpu_workspace *ws, const rmlp_plan *plan);
void cpu_rope_end(cpu_workspace *ws);

/* The built-in attention (the kernel each layout takes: layer.c), scored and windowed as la says
 * (a layer's, model_ext.h): full space, q (rows of cu_seqlens, q_dim), k, v (kv_dim) into out
 * (q_dim); compact space, as cpu_compact_attention. */
void cpu_attend_full(cpu_workspace *ws, const float *q, const float *k, const float *v, const uint32_t *cu_seqlens,
                     size_t n_seqs, size_t n_heads, size_t n_kv_heads, size_t head_dim, const layer_attention *la,
                     float *out);
void cpu_attend_compact(cpu_workspace *ws, const cpu_attention_rows *rows, const uint32_t *qo_indptr,
                        const uint32_t *kv_indptr, const uint32_t *kv_indices, size_t n_seqs, size_t n_heads,
                        size_t n_kv_heads, size_t head_dim, const layer_attention *la);

/* hidden (n_compact_padded, hidden) = embedding rows of the compact ids (times the fp32
 * embedding_scale where the config has one: Gemma). */
void cpu_embed(const rmlp_model_config *cfg, const model_weights *w, const rmlp_plan *plan, float *hidden);

/* ws->qkv (n_compact_padded, q_dim + 2 kv_dim) from hidden (n_compact_padded, hidden): RMSNorm,
 * Q/K/V projections (+ bias), q/k head norms, RoPE (la->rope's table); q at column 0, k at q_dim, v
 * after it. la: the layer's (ws->ext->layers[layer]). */
void cpu_project_qkv(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                     cpu_workspace *ws, const rmlp_plan *plan, const float *hidden);

/* q (n_tokens, q_dim), k, v (n_tokens, kv_dim) from hidden (n_compact_padded, hidden). */
void cpu_pre_attention(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                       cpu_workspace *ws, const rmlp_plan *plan, const float *hidden, float *q, float *k, float *v);

/* Compact space: q (rows, q_dim), k, v (rows, kv_dim), the first `rows` compact rows (at most
 * n_compact_padded), no scatter. */
void cpu_pre_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, const layer_attention *la,
                               cpu_workspace *ws, const rmlp_plan *plan, const float *hidden, size_t rows, float *q,
                               float *k, float *v);

/* hidden (n_compact_padded, hidden) += O(attn) then += MLP(norm(hidden)), the MLP's gate by the
 * config's activation; with sandwich_norms each output is RMS-normed before its add (Gemma 2);
 * attn (n_tokens, q_dim). */
void cpu_post_attention(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                        const rmlp_plan *plan, const float *attn, float *hidden);

/* The same from compact attention output attn_c (n_compact_padded, q_dim), no gather. */
void cpu_post_attention_compact(const rmlp_model_config *cfg, const layer_weights *lw, cpu_workspace *ws,
                                const rmlp_plan *plan, const float *attn_c, float *hidden);

/* out (n_tokens, hidden) = final RMSNorm of hidden, scattered to the batch rows. */
void cpu_final_norm(const rmlp_model_config *cfg, const model_weights *w, cpu_workspace *ws, const rmlp_plan *plan,
                    const float *hidden, float *out);

/* out (n_compact_padded, hidden) = final RMSNorm of hidden, compact rows. */
void cpu_final_norm_compact(const rmlp_model_config *cfg, const model_weights *w, cpu_workspace *ws, const rmlp_plan *plan,
                            const float *hidden, float *out);

#endif
