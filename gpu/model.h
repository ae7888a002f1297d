/*
 * model.h: what a CUDA model and context hold, shared by the host-side .cu files of gpu/
 * (weights, bind, context, layer, readout). C++ only; internal to the library.
 */
#ifndef RMLP_GPU_MODEL_H
#define RMLP_GPU_MODEL_H

#include <cublas_v2.h> /* not cublas_api.h alone: CUDA 12's refuses that (CUBLASAPI undefined) */
#include <cuda_runtime.h>

#include "flashinfer.h"
#include "model/model_ext.h"
#include "options.h"
#include "runner.h"

/* A linear layer y = x W^T (+ bias) whose W is 1 to 3 row blocks: one stacked matrix (loaded
 * models, or bound stacked tensors) or the separate Q/K/V (gate/up) tensors of a binding, each
 * its own GEMM writing its columns of y. */
typedef struct gpu_linear {
    const void *w[3];    /* (out[i], in) row-major, device */
    const void *bias[3]; /* (out[i]) or NULL */
    uint32_t out[3];
    uint32_t parts;
} gpu_linear;

typedef struct gpu_layer {
    const void *input_norm, *post_norm; /* (hidden); post_norm the MLP's input norm */
    const void *attn_out_norm, *mlp_out_norm; /* (hidden): the outputs' norms (sandwich norms), or NULL */
    const void *q_norm, *k_norm;        /* (head_dim), or NULL without q/k norm */
    gpu_linear qkv;                     /* -> (q_dim + 2 kv_dim): q, k, v */
    gpu_linear o_proj;                  /* (hidden, q_dim) */
    gpu_linear gate_up;                 /* -> (2 intermediate): gate, up */
    gpu_linear down;                    /* (hidden, intermediate) */
} gpu_layer;

struct gpu_model {
    rmlp_model_config config;
    const model_ext *ext;   /* each layer's attention, the RoPE tables (model/model_ext.h): the model's */
    int device;
    rmlp_dtype dtype;
    const void *embed;      /* (vocab, hidden) */
    const void *final_norm; /* (hidden) */
    const void *lm_head;    /* (vocab, hidden), the embedding when tied, NULL when none */
    gpu_layer *layers;      /* (num_hidden_layers), host memory */
    void *owned;            /* the one device allocation of a loaded model; NULL when bound */
    /* RoPE's cos/sin of the first positions (weights.cu), one per table of ext (rope[i] for
     * i < ext->n_rope), each its own allocation */
    gpu_rope_table rope[MODEL_ROPE_MAX];
};

/* The RoPE of table `i` of m->ext (its host frequencies, for gpu_qk_norm_rope_freqs). */
static inline gpu_rope_freqs gpu_model_rope_freqs(const gpu_model *m, uint32_t i) {
    const model_rope *r = &m->ext->rope[i];
    return gpu_rope_freqs{r->inv_freq, r->attention_factor, r->theta};
}

/* m->rope for m->ext (weights.cu): each RoPE's cos/sin table of the first positions, up to
 * max_position_embeddings and at most GPU_ROPE_TABLE_POSITIONS (later ones take sincosf; 32 MiB
 * at head_dim 128), filled on the model's device (current). gpu_model_free frees them. */
#define GPU_ROPE_TABLE_POSITIONS 65536u
rmlp_status gpu_model_rope_table(const char *fn, gpu_model *m);

/* The plan a context was set up for: what rmlp_context_set_plan copied, and where it lives. */
typedef struct gpu_plan_state {
    bool set;
    bool identity;            /* fold_gather and scatter are the identity on n_tokens rows, no padding:
                                 the layer skips their copies (radix off, or nothing shared) */
    rmlp_plan plan;           /* the host plan as given (pointers and counts, for the checks) */
    uint32_t max_seqlen;      /* longest sequence */
    const uint32_t *fold, *scatter, *ids, *pos, *cu; /* device copies (n_compact_padded / n_tokens / n_seqs + 1) */
    const uint32_t *qo;       /* device copy of qo_indptr (n_seqs + 1), or NULL when the plan has none */
    const uint32_t *staged;   /* the pinned copy of the maps, in the device block's layout */
    size_t staged_words;
} gpu_plan_state;

/* Whether cu (n_seqs + 1 offsets) and qo (the same; NULL: not compared) still hold what the set
 * plan's cu_seqlens and qo_indptr held when it was set (false without a set plan). */
extern "C" bool gpu_plan_offsets_unchanged(const gpu_plan_state *p, const uint32_t *cu, const uint32_t *qo);

/* The layouts of the built-in attention: full space reading K/V scattered to the batch rows, full
 * space reading them from the compact rows through the plan's scatter (options.full_kv_paged),
 * compact space. */
typedef enum gpu_att_layout { GPU_ATT_FULL = 0, GPU_ATT_FULL_PAGED, GPU_ATT_COMPACT, GPU_ATT_LAYOUTS } gpu_att_layout;

/* What the built-in attention ran (rmlp_gpu_stats), counted on the host when enqueued (layer.cu),
 * and the plan errors rmlp_context_set_plan met (context.cu). */
typedef struct gpu_attention_counts {
    uint64_t flashinfer[GPU_ATT_LAYOUTS], reference[GPU_ATT_LAYOUTS]; /* launches by layout */
    uint64_t fallbacks[GPU_FI_REASONS]; /* reference launches where FlashInfer serves the context, by reason */
    uint64_t sm90[GPU_ATT_LAYOUTS];     /* of the FlashInfer launches, those on its Hopper kernels */
    uint64_t sm90_fallbacks;            /* FA2 launches of paged layouts where the Hopper kernels serve */
    uint64_t plan_errors;
    char first_plan_error[384]; /* "" until the first */
    uint64_t decode_steps[2];   /* generation steps on FlashInfer's batch decode, on the chains (decode.cu) */
} gpu_attention_counts;

struct gpu_context {
    const gpu_model *model;
    size_t cap_tokens, cap_compact;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t staged_free; /* recorded after the last plan copy left the pinned staging */
    bool staged_pending;
    cudaEvent_t stream_switch; /* orders the old stream's work before the new one's */
    void *arena;               /* the one device allocation holding everything below */
    void *blas_workspace;      /* GPU_BLAS_WORKSPACE_BYTES */
    /* activations in the model's dtype */
    void *normed;  /* (cap_compact, hidden) */
    void *qkv;     /* (cap_compact, q_dim + 2 kv_dim) */
    void *attn_c;  /* (cap_compact, q_dim) */
    void *gu;      /* (cap_compact, 2 intermediate); also the read-outs' fp32 scratch */
    size_t gu_bytes;
    void *act;     /* (cap_compact, intermediate) */
    void *hidden;  /* (cap_compact, hidden), for whole forwards */
    void *q, *attn; /* (max(cap_tokens, cap_compact), q_dim): batch rows, or compact rows */
    void *k, *v;    /* (max(cap_tokens, cap_compact), kv_dim) */
    uint32_t *maps;      /* the plan's maps: 3 cap_compact + 3 cap_tokens + 2 words */
    uint32_t *pool_cu;   /* (cap_tokens + 1): cu_seqlens of a read-out */
    uint32_t *staging;   /* pinned host, as many words as maps */
    size_t maps_words;
    gpu_plan_state plan;
    gpu_options options; /* the run-time choices fixed at creation (gpu/options.h) */
    gpu_flashinfer *fi;  /* FlashInfer's workspace and plans (gpu/flashinfer.h); NULL: the reference attention */
    gpu_attention_counts counts;
    struct gpu_nonfinite *nonfinite; /* the forwards' non-finite output counter (nonfinite.h), in the arena */
};

/* Index arrays sent to the device with each batch or step (staging.cu): `device` and its pinned
 * host copy, `words` uint32 each; `done` is recorded after the last copy left `host`. */
typedef struct gpu_staging {
    uint32_t *device, *host;
    size_t words;
    cudaEvent_t done;
    bool pending;
} gpu_staging;

/* Allocates both copies and the event (the model's device current); `what` names them in errors. */
rmlp_status gpu_staging_open(const char *fn, const char *what, size_t words, gpu_staging *st);
void gpu_staging_close(gpu_staging *st);
/* Waits until the host copy may be written (the previous copy has left it). */
rmlp_status gpu_staging_acquire(const char *fn, gpu_staging *st);
/* Copies the host copy's first `words` to the device on `stream`. */
rmlp_status gpu_staging_send(const char *fn, gpu_staging *st, size_t words, cudaStream_t stream);

/* A CUDA context's prefix cache on the device (cache.cu): the slots in the model's dtype,
 *   k, v:   (n_layers, n_slots, kv_dim)     layer l's rows at k + l * n_slots * kv_dim
 *   hidden: (n_slots, hidden_size)          the final-normed row
 * and the batch arrays a cached forward sends from the host index (4 cap_compact + 2 cap_tokens
 * + 1 words). */
struct gpu_cache {
    int device;
    uint32_t n_slots;
    void *k, *v, *hidden; /* slots, in one allocation (store) */
    void *store;
    gpu_staging batch;
};

/* The layer calls of layer.cu on rows that are not the set plan's (a cached batch's new rows, a
 * generation step's): ctx->plan is the set plan with its compact rows replaced by `rows` rows of
 * device ids and positions for the guard's lifetime, then the set plan again. */
struct gpu_rows_swap {
    gpu_context *ctx;
    gpu_plan_state saved;
    gpu_rows_swap(gpu_context *c, const uint32_t *ids, const uint32_t *pos, uint32_t rows) : ctx(c), saved(c->plan) {
        gpu_plan_state *p = &ctx->plan;
        p->plan.n_compact = p->plan.n_compact_padded = rows;
        p->ids = ids, p->pos = pos;
        p->identity = false;
    }
    ~gpu_rows_swap() { ctx->plan = saved; }
    gpu_rows_swap(const gpu_rows_swap &) = delete;
    gpu_rows_swap &operator=(const gpu_rows_swap &) = delete;
};

#endif
