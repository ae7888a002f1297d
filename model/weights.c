/*
 * weights.c: the tensors config.json calls for, checked and converted to fp32 in the layout
 * weights.h documents. Each group of tensors (one layer, or the embedding and final norm) is
 * loaded in three passes: find every tensor and check its shape against the config, allocate,
 * convert. Allocation sizes therefore come from shapes that the file's own bytes back, never
 * from config.json alone. Names are Hugging Face's, with or without the "model." prefix
 * (decided once, from the embedding); lm_head.weight never has the prefix.
 */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "weights_bf16.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; F32 tensors are copied as they are"
#endif

static const char fn[] = "rmlp_model_load";

/* One tensor to load; consecutive parts with the same dst are stacked, in order, into one
 * allocation (q, k, v into qkv; gate, up into gate_up). */
typedef struct part {
    char name[128];
    float **dst;
    uint64_t rows, cols;     /* cols 0: a vector of rows elements */
    const st_tensor *tensor; /* found in the first pass */
} part;

#define MAX_PARTS W_ROLES

typedef struct parts {
    part p[MAX_PARTS];
    size_t n;
} parts;

void weights_name(char *name, size_t len, const char *prefix, long layer, const char *suffix) {
    if (layer < 0)
        snprintf(name, len, "%s%s", prefix, suffix);
    else
        snprintf(name, len, "%slayers.%ld.%s", prefix, layer, suffix);
}

/* Adds "<prefix>[layers.<layer>.]<suffix>" (layer < 0: no layer). */
static void add(parts *ps, const char *prefix, long layer, const char *suffix, float **dst, uint64_t rows,
                uint64_t cols) {
    part *p = &ps->p[ps->n++];
    weights_name(p->name, sizeof p->name, prefix, layer, suffix);
    p->dst = dst;
    p->rows = rows;
    p->cols = cols;
}

static float bits_to_f32(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE half to float, exactly: subnormals are normalized, inf and NaN (with payload) kept. */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | man << 13);
    if (exp != 0) return bits_to_f32(sign | (exp + 112) << 23 | man << 13); /* rebias 15 -> 127 */
    if (man == 0) return bits_to_f32(sign);
    uint32_t e = 113; /* exponent of 2^-14, the subnormals' scale, before normalizing */
    while ((man & 0x400u) == 0) man <<= 1, e--;
    return bits_to_f32(sign | e << 23 | (man & 0x3ffu) << 13);
}

float weights_value_at(const st_tensor *t, uint64_t i) {
    const unsigned char *p = (const unsigned char *)t->data + i * (t->dtype == RMLP_DTYPE_F32 ? 4 : 2);
    if (t->dtype == RMLP_DTYPE_F32)
        return bits_to_f32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return t->dtype == RMLP_DTYPE_BF16 ? bits_to_f32((uint32_t)h << 16) : f16_to_f32(h);
}

static void convert(const st_tensor *t, float *dst) {
    if (t->dtype == RMLP_DTYPE_F32) {
        memcpy(dst, t->data, t->nbytes);
        return;
    }
    const unsigned char *src = t->data; /* possibly unaligned */
    size_t n = t->nbytes / 2;
    if (t->dtype == RMLP_DTYPE_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = bits_to_f32((uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16);
    else
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
}

const char *weights_prefix(const checkpoint *ckpt) {
    return checkpoint_find(ckpt, "model.embed_tokens.weight") == NULL && checkpoint_find(ckpt, "embed_tokens.weight")
               ? ""
               : "model.";
}

rmlp_status weights_find(const checkpoint *ckpt, const char *name, uint64_t rows, uint64_t cols,
                         const st_tensor **out) {
    const st_tensor *t = *out = checkpoint_find(ckpt, name);
    uint64_t want[2] = {rows, cols};
    uint32_t ndim = cols ? 2 : 1;
    char want_buf[64], got_buf[200];
    if (t == NULL) return rmlp_fail(RMLP_ERR_MODEL, fn, "missing tensor '%s'", name);
    if (t->ndim != ndim || memcmp(t->shape, want, ndim * sizeof want[0]) != 0)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' has shape %s, config.json calls for %s", name,
                         st_shape_str(t->ndim, t->shape, got_buf, sizeof got_buf),
                         st_shape_str(ndim, want, want_buf, sizeof want_buf));
    return RMLP_OK;
}

/* Elements of a part (its tensor's shape matched rows x cols, so the file's bytes bound it). */
static uint64_t part_size(const part *p) { return p->rows * (p->cols ? p->cols : 1); }

/* Finds and checks every part, then allocates each destination and converts into it. */
static rmlp_status load(const checkpoint *ckpt, parts *ps) {
    for (size_t i = 0; i < ps->n; i++) {
        part *p = &ps->p[i];
        rmlp_status status = weights_find(ckpt, p->name, p->rows, p->cols, &p->tensor);
        if (status != RMLP_OK) return status;
    }
    for (size_t i = 0, end; i < ps->n; i = end) {
        uint64_t total = 0;
        for (end = i; end < ps->n && ps->p[end].dst == ps->p[i].dst; end++) total += part_size(&ps->p[end]);
        /* on cache lines: the decode kernels read W rows in place with 32-byte loads (docs/bench/generation-cpu.md) */
        float *dst = total <= SIZE_MAX / sizeof(float) ? rmlp_malloc_aligned(total * sizeof(float)) : NULL;
        if (dst == NULL)
            return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %llu floats (%llu bytes) for '%s' failed",
                             (unsigned long long)total, (unsigned long long)total * sizeof(float), ps->p[i].name);
        *ps->p[i].dst = dst;
        for (size_t k = i; k < end; k++) {
            convert(ps->p[k].tensor, dst);
            dst += part_size(&ps->p[k]);
        }
    }
    return RMLP_OK;
}

size_t weights_layer_tensors(const rmlp_model_config *c, layer_tensor out[W_ROLES]) {
    uint64_t h = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim;
    uint64_t q = (uint64_t)c->num_attention_heads * hd, kv = (uint64_t)c->num_key_value_heads * hd;
    bool qkv_bias = c->attention_bias, qk_norm = c->qk_norm, o_bias = c->o_proj_bias, mlp_bias = c->mlp_bias;
    bool sandwich = c->sandwich_norms; /* Gemma 2: post_attention_layernorm norms the attention output */
    const struct {
        bool present;
        layer_tensor t;
    } all[W_ROLES + 1] = {
        {true, {"input_layernorm.weight", W_INPUT_NORM, h, 0, false}},
        {true, {"self_attn.q_proj.weight", W_Q, q, h, false}},
        {true, {"self_attn.k_proj.weight", W_K, kv, h, true}},
        {true, {"self_attn.v_proj.weight", W_V, kv, h, true}},
        {qkv_bias, {"self_attn.q_proj.bias", W_Q_BIAS, q, 0, false}},
        {qkv_bias, {"self_attn.k_proj.bias", W_K_BIAS, kv, 0, true}},
        {qkv_bias, {"self_attn.v_proj.bias", W_V_BIAS, kv, 0, true}},
        {qk_norm, {"self_attn.q_norm.weight", W_Q_NORM, hd, 0, false}},
        {qk_norm, {"self_attn.k_norm.weight", W_K_NORM, hd, 0, false}},
        {true, {"self_attn.o_proj.weight", W_O, h, q, false}},
        {o_bias, {"self_attn.o_proj.bias", W_O_BIAS, h, 0, false}},
        {sandwich, {"post_attention_layernorm.weight", W_ATTN_OUT_NORM, h, 0, false}},
        {!sandwich, {"post_attention_layernorm.weight", W_POST_NORM, h, 0, false}},
        {sandwich, {"pre_feedforward_layernorm.weight", W_POST_NORM, h, 0, false}},
        {true, {"mlp.gate_proj.weight", W_GATE, inter, h, false}},
        {true, {"mlp.up_proj.weight", W_UP, inter, h, true}},
        {mlp_bias, {"mlp.gate_proj.bias", W_GATE_BIAS, inter, 0, false}},
        {mlp_bias, {"mlp.up_proj.bias", W_UP_BIAS, inter, 0, true}},
        {true, {"mlp.down_proj.weight", W_DOWN, h, inter, false}},
        {mlp_bias, {"mlp.down_proj.bias", W_DOWN_BIAS, h, 0, false}},
        {sandwich, {"post_feedforward_layernorm.weight", W_MLP_OUT_NORM, h, 0, false}},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].present) out[n++] = all[i].t;
    return n;
}

/* Where the CPU layer keeps a role's tensor (stacked roles share their first one's array). */
static float **cpu_field(layer_weights *w, weight_role role) {
    switch (role) {
    case W_INPUT_NORM: return &w->input_norm;
    case W_Q:
    case W_K:
    case W_V: return &w->qkv;
    case W_Q_BIAS:
    case W_K_BIAS:
    case W_V_BIAS: return &w->qkv_bias;
    case W_Q_NORM: return &w->q_norm;
    case W_K_NORM: return &w->k_norm;
    case W_O: return &w->o_proj;
    case W_O_BIAS: return &w->o_bias;
    case W_ATTN_OUT_NORM: return &w->attn_out_norm;
    case W_POST_NORM: return &w->post_norm;
    case W_MLP_OUT_NORM: return &w->mlp_out_norm;
    case W_GATE:
    case W_UP: return &w->gate_up;
    case W_GATE_BIAS:
    case W_UP_BIAS: return &w->gate_up_bias;
    case W_DOWN: return &w->down;
    default: return &w->down_bias;
    }
}

static rmlp_status load_layer(const checkpoint *ckpt, const rmlp_model_config *c, const char *prefix, long i,
                              layer_weights *w) {
    layer_tensor tensors[W_ROLES];
    size_t n = weights_layer_tensors(c, tensors);
    parts ps = {.n = 0};
    for (size_t k = 0; k < n; k++)
        add(&ps, prefix, i, tensors[k].suffix, cpu_field(w, tensors[k].role), tensors[k].rows, tensors[k].cols);
    return load(ckpt, &ps);
}

/* w (n) += 1: GemmaRMSNorm's 1 + w, the fp32 sum it forms (NULL: no such norm). */
static void plus_one(float *w, uint64_t n) {
    for (uint64_t i = 0; w != NULL && i < n; i++) w[i] += 1.0f;
}

static void norms_plus_one(const rmlp_model_config *c, model_weights *out) {
    plus_one(out->final_norm, c->hidden_size);
    for (uint32_t i = 0; i < c->num_hidden_layers; i++) {
        layer_weights *w = &out->layers[i];
        float *hidden_norms[] = {w->input_norm, w->post_norm, w->attn_out_norm, w->mlp_out_norm};
        for (size_t k = 0; k < sizeof hidden_norms / sizeof hidden_norms[0]; k++)
            plus_one(hidden_norms[k], c->hidden_size);
        plus_one(w->q_norm, c->head_dim);
        plus_one(w->k_norm, c->head_dim);
    }
}

rmlp_status weights_load(const checkpoint *ckpt, rmlp_model_config *config, bool bf16_matrices, model_weights *out) {
    memset(out, 0, sizeof *out);
    config->has_lm_head = false;
    const char *prefix = weights_prefix(ckpt);
    uint64_t vocab = config->vocab_size, hidden = config->hidden_size;
    parts ps = {.n = 0};
    add(&ps, prefix, -1, "embed_tokens.weight", &out->embed, vocab, hidden);
    add(&ps, prefix, -1, "norm.weight", &out->final_norm, hidden, 0);
    if (checkpoint_find(ckpt, "lm_head.weight") != NULL)
        add(&ps, "", -1, "lm_head.weight", &out->lm_head, vocab, hidden);
    rmlp_status status = load(ckpt, &ps);
    if (status == RMLP_OK && (out->layers = rmlp_calloc(config->num_hidden_layers, sizeof *out->layers)) == NULL)
        status = rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the table of %u layers (%zu bytes) failed",
                           config->num_hidden_layers, config->num_hidden_layers * sizeof *out->layers);
    for (uint32_t i = 0; status == RMLP_OK && i < config->num_hidden_layers; i++) {
        status = load_layer(ckpt, config, prefix, (long)i, &out->layers[i]);
        if (status == RMLP_OK && bf16_matrices)
            status = weights_layer_to_bf16(config, prefix, (long)i, &out->layers[i]);
    }
    if (status != RMLP_OK) {
        weights_free(out, config);
        return status;
    }
    if (out->lm_head == NULL && config->tie_word_embeddings) out->lm_head = out->embed;
    config->has_lm_head = out->lm_head != NULL;
    if (config->norm_weight_plus_one) norms_plus_one(config, out);
    return RMLP_OK;
}

void weights_free(model_weights *weights, const rmlp_model_config *config) {
    if (weights == NULL) return;
    for (uint32_t i = 0; weights->layers != NULL && i < config->num_hidden_layers; i++) {
        layer_weights *w = &weights->layers[i];
        float *arrays[] = {w->input_norm, w->qkv,       w->qkv_bias,      w->q_norm,       w->k_norm,
                           w->o_proj,     w->o_bias,    w->attn_out_norm, w->post_norm,    w->gate_up,
                           w->gate_up_bias, w->down,    w->down_bias,     w->mlp_out_norm};
        for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) free(arrays[k]);
        free(w->qkv_bf16), free(w->o_proj_bf16), free(w->gate_up_bf16), free(w->down_bf16);
    }
    free(weights->layers);
    if (weights->lm_head != weights->embed) free(weights->lm_head);
    free(weights->embed);
    free(weights->final_norm);
    memset(weights, 0, sizeof *weights);
}
