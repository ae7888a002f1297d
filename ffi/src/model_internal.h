/*
 * model_internal.h: what a model and a context are, shared by the exported entry points
 * (model_api.c: argument checks and the CPU path) and the CUDA dispatch (model_cuda.c).
 */
#ifndef RMLP_FFI_MODEL_INTERNAL_H
#define RMLP_FFI_MODEL_INTERNAL_H

#include <stdatomic.h>

#include "../../cpu/layer.h"
#include "../../model/weights.h"
#include "guard.h"
#include "radix_mlp.h"

struct gpu_model;
struct gpu_context;

struct rmlp_model {
    rmlp_guard guard;       /* first: the handle checks of guard.h (magic only: models are shared) */
    _Atomic uint32_t n_contexts; /* live contexts; the model is not freed while any remain */
    rmlp_model_config config;
    model_weights weights;  /* CPU models; all NULL on CUDA */
    rmlp_device device;
    rmlp_dtype dtype;
    struct gpu_model *gpu;  /* CUDA models; NULL on the CPU */
    char *load_report;      /* what the checkpoint audit reported (model/audit.h), NULL for nothing */
};

struct rmlp_context {
    rmlp_guard guard;         /* first: magic, and the thread inside a call (RMLP_ERR_BUSY for others) */
    const rmlp_model *model;
    cpu_workspace ws;         /* on CUDA only cap_tokens / cap_compact are set (the arrays stay NULL) */
    struct gpu_context *gpu;  /* CUDA contexts; NULL on the CPU */
    rmlp_attention_space attention_space; /* of rmlp_forward (rmlp_context_params) */
    struct kv_cache *cache;   /* the prefix KV cache's index (and on the CPU its slots), or NULL */
    struct gpu_cache *gpu_cache; /* a CUDA context's cache slots on the device, or NULL */
    struct generate_session *gen; /* the generation session (generate.c), or NULL */
};

#endif
