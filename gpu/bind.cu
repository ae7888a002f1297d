/*
 * bind.cu: a CUDA model over weight tensors the host already holds on the device (a TEI process
 * that loaded the checkpoint itself): no copy, the model keeps the host's pointers. Each binding
 * is matched to the tensor the config calls for by its Hugging Face name (with or without the
 * "model." prefix) and checked: known name, bound once, shape, dtype, device memory of the
 * model's device, aligned to its element size. Q/K/V and gate/up come separate (as checkpoints
 * store them) or stacked (as TEI and vLLM hold them, "qkv_proj" / "gate_up_proj"); separate
 * tensors that lie back to back in memory are used as one stacked matrix. Otherwise the layer
 * runs one GEMM per part (3 for Q/K/V, 2 for gate/up), each writing its columns of the shared
 * output: a strided-batched GEMM would need one fixed stride between the parts, which separate
 * allocations do not have, and Q and K/V differ in size under GQA anyway.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "host.h"
#include "model.h"

/* The per-layer tensors a binding may name. */
enum slot {
    S_INPUT_NORM, S_Q, S_K, S_V, S_QKV, S_Q_BIAS, S_K_BIAS, S_V_BIAS, S_QKV_BIAS, S_Q_NORM, S_K_NORM, S_O, S_O_BIAS,
    S_POST_NORM, S_GATE, S_UP, S_GATE_UP, S_GATE_BIAS, S_UP_BIAS, S_GATE_UP_BIAS, S_DOWN, S_DOWN_BIAS, S_PRE_FF_NORM,
    S_POST_FF_NORM, S_COUNT
};

static const char *const SUFFIX[S_COUNT] = {
    "input_layernorm.weight",  "self_attn.q_proj.weight",   "self_attn.k_proj.weight",  "self_attn.v_proj.weight",
    "self_attn.qkv_proj.weight", "self_attn.q_proj.bias",   "self_attn.k_proj.bias",    "self_attn.v_proj.bias",
    "self_attn.qkv_proj.bias", "self_attn.q_norm.weight",   "self_attn.k_norm.weight",  "self_attn.o_proj.weight",
    "self_attn.o_proj.bias",   "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.gate_up_proj.weight", "mlp.gate_proj.bias",        "mlp.up_proj.bias",         "mlp.gate_up_proj.bias",
    "mlp.down_proj.weight",    "mlp.down_proj.bias",        "pre_feedforward_layernorm.weight",
    "post_feedforward_layernorm.weight"};

enum global_slot { G_EMBED, G_NORM, G_LM_HEAD, G_COUNT };

typedef struct bound {
    const rmlp_weight_binding *global[G_COUNT];
    const rmlp_weight_binding **layer; /* (num_hidden_layers * S_COUNT) */
} bound;

/* Shape (rows, cols; cols 0 for a vector) the config calls for in a layer slot. */
static void slot_shape(const rmlp_model_config *c, int s, uint64_t *rows, uint64_t *cols) {
    uint64_t h = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim;
    uint64_t q = (uint64_t)c->num_attention_heads * hd, kv = (uint64_t)c->num_key_value_heads * hd;
    static const int matrix[S_COUNT] = {0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0};
    const uint64_t out[S_COUNT] = {h,  q, kv, kv,    q + 2 * kv, q,     kv,        kv, q + 2 * kv, hd, hd,
                                   h,  h, h,  inter, inter,      2 * inter, inter, inter, 2 * inter, h,  h, h, h};
    *rows = out[s];
    *cols = !matrix[s] ? 0 : s == S_O ? q : s == S_DOWN ? inter : h;
}

/* Files the binding under its slot; errors on unknown names and duplicates. */
static rmlp_status file_binding(const char *fn, const rmlp_model_config *c, bound *b, size_t index,
                                const rmlp_weight_binding *t) {
    if (t->name == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tensors[%zu].name is NULL", index);
    const char *name = t->name;
    const rmlp_weight_binding **slot = NULL;
    if (strcmp(name, "lm_head.weight") == 0) {
        slot = &b->global[G_LM_HEAD];
    } else {
        if (strncmp(name, "model.", 6) == 0) name += 6;
        if (strcmp(name, "embed_tokens.weight") == 0) {
            slot = &b->global[G_EMBED];
        } else if (strcmp(name, "norm.weight") == 0) {
            slot = &b->global[G_NORM];
        } else if (strncmp(name, "layers.", 7) == 0 && name[7] >= '0' && name[7] <= '9') {
            char *end = NULL;
            unsigned long layer = strtoul(name + 7, &end, 10);
            if (*end == '.' && layer < c->num_hidden_layers)
                for (int s = 0; s < S_COUNT && slot == NULL; s++)
                    if (strcmp(end + 1, SUFFIX[s]) == 0) slot = &b->layer[layer * S_COUNT + (size_t)s];
        }
    }
    if (slot == NULL)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "tensors[%zu] '%s' is not a tensor of this model (%u layers)", index,
                         t->name, c->num_hidden_layers);
    if (*slot != NULL)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "tensors[%zu] '%s' binds the same tensor as '%s'", index, t->name,
                         (*slot)->name);
    *slot = t;
    return RMLP_OK;
}

/* Shape, dtype, pointer: device memory of `device`, aligned to the element size. */
static rmlp_status check_binding(const char *fn, const rmlp_weight_binding *t, uint64_t rows, uint64_t cols,
                                 rmlp_dtype dtype, int device) {
    uint32_t ndim = cols ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != rows || (ndim == 2 && t->shape[1] != cols)) {
        char got[80];
        if (t->ndim == 2)
            snprintf(got, sizeof got, "[%llu, %llu]", (unsigned long long)t->shape[0], (unsigned long long)t->shape[1]);
        else if (t->ndim == 1)
            snprintf(got, sizeof got, "[%llu]", (unsigned long long)t->shape[0]);
        else
            snprintf(got, sizeof got, "ndim %u", t->ndim);
        if (ndim == 2)
            return rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' has shape %s, the config calls for [%llu, %llu]",
                             t->name, got, (unsigned long long)rows, (unsigned long long)cols);
        return rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' has shape %s, the config calls for [%llu]", t->name, got,
                         (unsigned long long)rows);
    }
    if (t->dtype != dtype)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' has dtype %d, params->dtype is %d (%s)", t->name, t->dtype,
                         dtype, gpu_dtype_name(dtype));
    if (t->data == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tensor '%s' has data NULL", t->name);
    if ((uintptr_t)t->data % gpu_dtype_bytes(dtype) != 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tensor '%s' at %p is not aligned to its %zu-byte elements",
                         t->name, t->data, gpu_dtype_bytes(dtype));
    cudaPointerAttributes attr;
    cudaError_t error = cudaPointerGetAttributes(&attr, t->data);
    if (error != cudaSuccess) return gpu_fail(fn, "cudaPointerGetAttributes", error);
    if ((attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) || attr.device != device)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "tensor '%s' at %p is not device memory of device %d (cudaPointerGetAttributes: type %d, "
                         "device %d)", t->name, t->data, device, (int)attr.type, attr.device);
    return RMLP_OK;
}

/* The linear layer from a stacked slot or its separate parts (merged when back to back). */
static rmlp_status make_linear(const char *fn, const rmlp_model_config *c, uint32_t layer, const bound *b,
                               int stacked, const int *parts, int n_parts, int stacked_bias, const int *bias_parts,
                               bool with_bias, rmlp_dtype dtype, gpu_linear *out) {
    const rmlp_weight_binding *const *l = b->layer + (size_t)layer * S_COUNT;
    size_t es = gpu_dtype_bytes(dtype);
    memset(out, 0, sizeof *out);
    bool have_stacked = l[stacked] != NULL, have_parts = false, all_parts = true;
    for (int i = 0; i < n_parts; i++) have_parts |= l[parts[i]] != NULL, all_parts &= l[parts[i]] != NULL;
    if (have_stacked && have_parts)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "layer %u: both '%s' and separate %s are bound", layer, l[stacked]->name,
                         SUFFIX[parts[0]]);
    if (!have_stacked && !all_parts) {
        int missing = parts[0];
        for (int i = 0; i < n_parts; i++)
            if (l[parts[i]] == NULL) missing = parts[i];
        return rmlp_fail(RMLP_ERR_MODEL, fn, "missing tensor 'layers.%u.%s' (or the stacked 'layers.%u.%s')", layer,
                         SUFFIX[missing], layer, SUFFIX[stacked]);
    }
    uint64_t rows, cols;
    if (have_stacked) {
        slot_shape(c, stacked, &rows, &cols);
        out->parts = 1;
        out->w[0] = l[stacked]->data;
        out->out[0] = (uint32_t)rows;
    } else {
        /* Back to back in memory is one stacked matrix. */
        bool contiguous = true;
        for (int i = 1; i < n_parts; i++) {
            slot_shape(c, parts[i - 1], &rows, &cols);
            contiguous &= (const char *)l[parts[i - 1]]->data + rows * cols * es == (const char *)l[parts[i]]->data;
        }
        out->parts = contiguous ? 1 : (uint32_t)n_parts;
        for (int i = 0; i < n_parts; i++) {
            slot_shape(c, parts[i], &rows, &cols);
            if (contiguous) {
                out->w[0] = l[parts[0]]->data;
                out->out[0] += (uint32_t)rows;
            } else {
                out->w[i] = l[parts[i]]->data;
                out->out[i] = (uint32_t)rows;
            }
        }
    }
    if (!with_bias) return RMLP_OK;
    bool bias_stacked = l[stacked_bias] != NULL, bias_parts_all = true, bias_any = false;
    for (int i = 0; i < n_parts; i++)
        bias_parts_all &= l[bias_parts[i]] != NULL, bias_any |= l[bias_parts[i]] != NULL;
    if (bias_stacked && bias_any)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "layer %u: both '%s' and separate biases are bound", layer,
                         l[stacked_bias]->name);
    if (!bias_stacked && !bias_parts_all) {
        int missing = bias_parts[0];
        for (int i = n_parts - 1; i >= 0; i--)
            if (l[bias_parts[i]] == NULL) missing = bias_parts[i];
        return rmlp_fail(RMLP_ERR_MODEL, fn, "missing tensor 'layers.%u.%s' (or the stacked 'layers.%u.%s')", layer,
                         SUFFIX[missing], layer, SUFFIX[stacked_bias]);
    }
    if (out->parts == 1 && bias_stacked) {
        out->bias[0] = l[stacked_bias]->data;
    } else if (out->parts == 1) {
        /* One weight block but separate biases: the bias is broadcast per part, so split the
         * block back into parts (same pointer arithmetic, one GEMM each). */
        const char *base = (const char *)out->w[0];
        for (int i = 0; i < n_parts; i++) {
            slot_shape(c, parts[i], &rows, &cols);
            out->w[i] = base;
            out->out[i] = (uint32_t)rows;
            out->bias[i] = l[bias_parts[i]]->data;
            base += rows * cols * es;
        }
        out->parts = (uint32_t)n_parts;
    } else if (bias_stacked) {
        const char *base = (const char *)l[stacked_bias]->data;
        for (int i = 0; i < n_parts; i++) {
            out->bias[i] = base;
            base += (size_t)out->out[i] * es;
        }
    } else {
        for (int i = 0; i < n_parts; i++) out->bias[i] = l[bias_parts[i]]->data;
    }
    return RMLP_OK;
}

static rmlp_status check_config(const char *fn, const rmlp_model_config *c) {
    const arch_info *arch = arch_by_id(c->architecture);
    if (arch == NULL)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->architecture=%d is not an rmlp_arch", c->architecture);
    if (c->vocab_size == 0 || c->hidden_size == 0 || c->intermediate_size == 0 || c->num_hidden_layers == 0 ||
        c->num_attention_heads == 0 || c->num_key_value_heads == 0 || c->head_dim == 0 ||
        c->max_position_embeddings == 0)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config has a zero size (vocab %u, hidden %u, intermediate %u, layers %u, "
                         "heads %u, kv heads %u, head_dim %u, max positions %u)", c->vocab_size, c->hidden_size,
                         c->intermediate_size, c->num_hidden_layers, c->num_attention_heads, c->num_key_value_heads,
                         c->head_dim, c->max_position_embeddings);
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->num_attention_heads=%u is not a multiple of num_key_value_heads=%u",
                         c->num_attention_heads, c->num_key_value_heads);
    if (c->head_dim % 2 != 0 || c->head_dim > 256)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->head_dim=%u: the CUDA kernels need an even head_dim <= 256",
                         c->head_dim);
    if (!(c->rms_norm_eps > 0.0 && c->rms_norm_eps < 1.0) || !(c->rope_theta > 1.0 && c->rope_theta < 1e30))
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->rms_norm_eps=%g or rope_theta=%g is out of range",
                         c->rms_norm_eps, c->rope_theta);
    if (c->qk_norm != arch->qk_norm)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->qk_norm=%d but architecture %d (%s) %s q/k norm", c->qk_norm,
                         c->architecture, arch->model_type, arch->qk_norm ? "has" : "has no");
    if (c->norm_weight_plus_one != arch->norm_plus_one || c->sandwich_norms != arch->sandwich_norms)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->norm_weight_plus_one=%d, sandwich_norms=%d, but architecture %d (%s) "
                         "has %d, %d", c->norm_weight_plus_one, c->sandwich_norms, c->architecture, arch->model_type,
                         arch->norm_plus_one, arch->sandwich_norms);
    if (c->activation != RMLP_ACTIVATION_SILU && c->activation != RMLP_ACTIVATION_GELU_TANH &&
        c->activation != RMLP_ACTIVATION_GELU)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->activation=%d is not an rmlp_activation", c->activation);
    const double extras[] = {c->embedding_scale, c->final_logit_softcapping, c->query_pre_attn_scalar,
                             c->attn_logit_softcapping};
    for (double x : extras)
        if (!(x >= 0.0 && x < 1e30))
            return rmlp_fail(RMLP_ERR_MODEL, fn, "config->embedding_scale=%g, final_logit_softcapping=%g, "
                             "query_pre_attn_scalar=%g or attn_logit_softcapping=%g is out of range (0 for none)",
                             c->embedding_scale, c->final_logit_softcapping, c->query_pre_attn_scalar,
                             c->attn_logit_softcapping);
    return RMLP_OK;
}

extern "C" rmlp_status gpu_model_bind(const char *fn, rmlp_model_config *config, const model_ext *ext,
                                      const rmlp_weight_binding *tensors, size_t n, int device, rmlp_dtype dtype,
                                      gpu_model **out) {
    *out = NULL;
    rmlp_status status = check_config(fn, config);
    if (status != RMLP_OK) return status;
    if (n > 0 && tensors == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "tensors is NULL");
    GPU_ON_DEVICE(fn, device);
    uint32_t layers = config->num_hidden_layers;
    bound b;
    memset(&b, 0, sizeof b);
    b.layer = (const rmlp_weight_binding **)calloc((size_t)layers * S_COUNT, sizeof *b.layer);
    gpu_model *m = (gpu_model *)calloc(1, sizeof *m);
    if (m != NULL) m->layers = (gpu_layer *)calloc(layers, sizeof(gpu_layer));
    if (b.layer == NULL || m == NULL || m->layers == NULL) {
        free(b.layer);
        gpu_model_free(m);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the tables of %u layers failed", layers);
    }
    m->device = device;
    m->dtype = dtype;
    m->ext = ext;
    for (size_t i = 0; i < n && status == RMLP_OK; i++) status = file_binding(fn, config, &b, i, &tensors[i]);

    /* Every slot bound is checked; then what must be there, is. */
    uint64_t vocab = config->vocab_size, h = config->hidden_size;
    const uint64_t global_shape[G_COUNT][2] = {{vocab, h}, {h, 0}, {vocab, h}};
    static const char *const global_name[G_COUNT] = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
    for (int g = 0; g < G_COUNT && status == RMLP_OK; g++) {
        if (b.global[g] != NULL)
            status = check_binding(fn, b.global[g], global_shape[g][0], global_shape[g][1], dtype, device);
        else if (g != G_LM_HEAD)
            status = rmlp_fail(RMLP_ERR_MODEL, fn, "missing tensor '%s'", global_name[g]);
    }
    for (uint32_t i = 0; i < layers && status == RMLP_OK; i++) {
        const rmlp_weight_binding **l = b.layer + (size_t)i * S_COUNT;
        for (int s = 0; s < S_COUNT && status == RMLP_OK; s++) {
            /* The config flag a slot needs, and whether the config has it. */
            const char *flag = NULL;
            bool has = true;
            if (s == S_Q_BIAS || s == S_K_BIAS || s == S_V_BIAS || s == S_QKV_BIAS)
                flag = "attention_bias", has = config->attention_bias;
            else if (s == S_Q_NORM || s == S_K_NORM)
                flag = "qk_norm", has = config->qk_norm;
            else if (s == S_O_BIAS)
                flag = "o_proj_bias", has = config->o_proj_bias;
            else if (s == S_GATE_BIAS || s == S_UP_BIAS || s == S_GATE_UP_BIAS || s == S_DOWN_BIAS)
                flag = "mlp_bias", has = config->mlp_bias;
            else if (s == S_PRE_FF_NORM || s == S_POST_FF_NORM)
                flag = "sandwich_norms", has = config->sandwich_norms;
            if (l[s] != NULL && !has)
                status = rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' is bound but the config has no %s", l[s]->name,
                                   flag);
            else if (l[s] != NULL) {
                uint64_t rows, cols;
                slot_shape(config, s, &rows, &cols);
                status = check_binding(fn, l[s], rows, cols, dtype, device);
            }
        }
        static const int single[] = {S_INPUT_NORM, S_O,          S_POST_NORM,   S_DOWN,        S_Q_NORM,
                                     S_K_NORM,     S_O_BIAS,     S_DOWN_BIAS,   S_PRE_FF_NORM, S_POST_FF_NORM};
        for (size_t k = 0; k < sizeof single / sizeof single[0] && status == RMLP_OK; k++) {
            if ((single[k] == S_Q_NORM || single[k] == S_K_NORM) && !config->qk_norm) continue;
            if ((single[k] == S_PRE_FF_NORM || single[k] == S_POST_FF_NORM) && !config->sandwich_norms) continue;
            if ((single[k] == S_O_BIAS && !config->o_proj_bias) || (single[k] == S_DOWN_BIAS && !config->mlp_bias))
                continue;
            if (l[single[k]] == NULL)
                status = rmlp_fail(RMLP_ERR_MODEL, fn, "missing tensor 'model.layers.%u.%s'", i, SUFFIX[single[k]]);
        }
        if (status != RMLP_OK) break;
        gpu_layer *g = &m->layers[i];
        static const int qkv_parts[] = {S_Q, S_K, S_V}, qkv_bias_parts[] = {S_Q_BIAS, S_K_BIAS, S_V_BIAS};
        static const int gate_up_parts[] = {S_GATE, S_UP}, gate_up_bias_parts[] = {S_GATE_BIAS, S_UP_BIAS};
        status = make_linear(fn, config, i, &b, S_QKV, qkv_parts, 3, S_QKV_BIAS, qkv_bias_parts,
                             config->attention_bias, dtype, &g->qkv);
        if (status == RMLP_OK)
            status = make_linear(fn, config, i, &b, S_GATE_UP, gate_up_parts, 2, S_GATE_UP_BIAS, gate_up_bias_parts,
                                 config->mlp_bias, dtype, &g->gate_up);
        if (status != RMLP_OK) break;
        g->input_norm = l[S_INPUT_NORM]->data;
        /* with sandwich norms (Gemma 2) post_attention_layernorm norms the attention output and
         * pre_feedforward_layernorm the MLP's input */
        g->post_norm = l[config->sandwich_norms ? S_PRE_FF_NORM : S_POST_NORM]->data;
        g->attn_out_norm = config->sandwich_norms ? l[S_POST_NORM]->data : NULL;
        g->mlp_out_norm = config->sandwich_norms ? l[S_POST_FF_NORM]->data : NULL;
        g->q_norm = config->qk_norm ? l[S_Q_NORM]->data : NULL;
        g->k_norm = config->qk_norm ? l[S_K_NORM]->data : NULL;
        const void *o_bias = config->o_proj_bias ? l[S_O_BIAS]->data : NULL;
        const void *down_bias = config->mlp_bias ? l[S_DOWN_BIAS]->data : NULL;
        g->o_proj = gpu_linear{{l[S_O]->data, NULL, NULL}, {o_bias, NULL, NULL}, {config->hidden_size, 0, 0}, 1};
        g->down = gpu_linear{{l[S_DOWN]->data, NULL, NULL}, {down_bias, NULL, NULL}, {config->hidden_size, 0, 0}, 1};
    }
    if (status == RMLP_OK) {
        m->embed = b.global[G_EMBED]->data;
        m->final_norm = b.global[G_NORM]->data;
        m->lm_head = b.global[G_LM_HEAD] != NULL ? b.global[G_LM_HEAD]->data
                     : config->tie_word_embeddings ? m->embed
                                                   : NULL;
        config->has_lm_head = m->lm_head != NULL;
        m->config = *config;
        status = gpu_model_rope_table(fn, m);
    }
    free(b.layer);
    if (status != RMLP_OK) {
        gpu_model_free(m);
        return status;
    }
    *out = m;
    return RMLP_OK;
}
