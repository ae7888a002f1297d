/*
 * model_internal.h: what a model and a context are, shared by the exported entry points of ffi/.
 * Each holds the backend table its device picked at load (common/backend.h, ffi/src/backends.h)
 * and the backend's own objects, which only the backend reads.
 */
#ifndef RMLP_FFI_MODEL_INTERNAL_H
#define RMLP_FFI_MODEL_INTERNAL_H

#include <stdatomic.h>

#include "common/backend.h"
#include "common/guard.h"
#include "model/model_ext.h"
#include "radix_mlp.h"

struct generate_session;
struct kv_cache;

struct rmlp_model {
    rmlp_guard guard;       /* first: the handle checks of guard.h (magic only: models are shared) */
    _Atomic uint32_t n_contexts; /* live contexts; the model is not freed while any remain */
    rmlp_model_config config;
    model_ext ext;          /* what config.json decides beyond config (model/model_ext.h): the backend reads it */
    const rmlp_backend *backend; /* the table of the model's device */
    void *backend_model;    /* the backend's model: model_weights (cpu/runner.h), gpu_model (gpu/runner.h) */
    rmlp_device device;
    rmlp_dtype dtype;
    char *load_report;      /* what the checkpoint audit reported (model/audit.h), NULL for nothing */
};

struct rmlp_context {
    rmlp_guard guard;         /* first: magic, and the thread inside a call (RMLP_ERR_BUSY for others) */
    const rmlp_model *model;
    const rmlp_backend *backend; /* the model's */
    void *backend_ctx;        /* the backend's context: cpu_context (cpu/runner.h), gpu_context (gpu/runner.h) */
    size_t cap_tokens, cap_compact; /* the batch rows and compact rows it was made for */
    rmlp_attention_space attention_space; /* of rmlp_forward (rmlp_context_params) */
    struct kv_cache *cache;   /* the prefix KV cache's index (and on the CPU its slots), or NULL */
    void *backend_cache;      /* the backend's side of the cache (a CUDA context's slots, gpu_cache), or NULL */
    struct generate_session *gen; /* the generation session (generate/session.h), or NULL */
};

#endif
