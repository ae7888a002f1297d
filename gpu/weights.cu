/*
 * weights.cu: a checkpoint's tensors on the device, in the dtype asked for, laid out as the CPU
 * path lays them out (Q/K/V stacked into one matrix, gate/up into another, so each is one
 * GEMM; their biases stacked likewise). Two passes, as model/weights.c does: find every
 * tensor and check its shape against the config, then place them all in one device allocation
 * (256-byte aligned, stacked parts back to back) and upload. The upload converts on the host
 * (F32/F16/BF16 to F32/F16/BF16, rounding to nearest even) one chunk at a time into two pinned
 * halves, so converting one chunk overlaps the copy of the last and no second full host copy of
 * the model ever exists. Also RoPE's cos/sin table of a model, loaded or bound (gpu/kernels.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "model.h"

extern "C" {
#include "model/weights.h"
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; the conversion reads it as such"
#endif

/* ---- dtype conversion on the host ---------------------------------------------------------- */

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE half to float, exactly (subnormals normalised, inf/NaN kept). */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | man << 13);
    if (exp != 0) return f32_from_bits(sign | (exp + 112) << 23 | man << 13);
    if (man == 0) return f32_from_bits(sign);
    return (h & 0x8000u) ? -ldexpf((float)man, -24) : ldexpf((float)man, -24);
}

/* float to IEEE half, round to nearest even; overflow to inf, NaN stays NaN. */
static inline uint16_t float_to_half(float f) {
    uint32_t x = bits_from_f32(f), sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u)                                      /* below 2^-14: subnormal, in units of 2^-24 */
        return (uint16_t)(sign | (uint32_t)nearbyintf(f32_from_bits(a) * 16777216.0f));
    a += 0xFFFu + ((a >> 13) & 1u); /* round the 13 dropped bits to nearest even */
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
}

/* float to bfloat16, round to nearest even; NaN stays NaN. */
static inline uint16_t float_to_bf16(float f) {
    uint32_t x = bits_from_f32(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* n elements of `from` at src (possibly unaligned, little-endian) to `to` at dst. */
static void convert(const unsigned char *src, rmlp_dtype from, unsigned char *dst, rmlp_dtype to, size_t n) {
    if (from == to) {
        memcpy(dst, src, n * gpu_dtype_bytes(from));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float f;
        if (from == RMLP_DTYPE_F32) {
            uint32_t u;
            memcpy(&u, src + 4 * i, 4);
            f = f32_from_bits(u);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            f = from == RMLP_DTYPE_BF16 ? f32_from_bits((uint32_t)h << 16) : half_to_float(h);
        }
        if (to == RMLP_DTYPE_F32) {
            memcpy(dst + 4 * i, &f, 4);
        } else {
            uint16_t h = to == RMLP_DTYPE_BF16 ? float_to_bf16(f) : float_to_half(f);
            memcpy(dst + 2 * i, &h, 2);
        }
    }
}

/* ---- the tensors a config calls for -------------------------------------------------------- */

typedef struct tensor_want {
    char name[160];
    const void **slot;       /* receives the device pointer; NULL for a stacked follower */
    uint64_t rows, cols;     /* cols 0: a vector */
    bool stacked;            /* placed right after the previous tensor, no gap */
    const st_tensor *tensor; /* found in the first pass */
    size_t offset;           /* bytes into the allocation */
} tensor_want;

typedef struct want_list {
    tensor_want *w;
    size_t n;
} want_list;

static void want(want_list *list, const char *prefix, long layer, const char *suffix, const void **slot, uint64_t rows,
                 uint64_t cols, bool stacked) {
    tensor_want *t = &list->w[list->n++];
    weights_name(t->name, sizeof t->name, prefix, layer, suffix);
    t->slot = slot;
    t->rows = rows;
    t->cols = cols;
    t->stacked = stacked;
}

/* Where the device layer keeps a role's tensor: the first of a stacked group holds the pointer,
 * the ones stacked after it none (weights_layer_tensors says which are). */
static const void **gpu_slot(gpu_layer *l, weight_role role) {
    switch (role) {
    case W_INPUT_NORM: return &l->input_norm;
    case W_Q: return &l->qkv.w[0];
    case W_Q_BIAS: return &l->qkv.bias[0];
    case W_Q_NORM: return &l->q_norm;
    case W_K_NORM: return &l->k_norm;
    case W_O: return &l->o_proj.w[0];
    case W_O_BIAS: return &l->o_proj.bias[0];
    case W_POST_NORM: return &l->post_norm;
    case W_ATTN_OUT_NORM: return &l->attn_out_norm;
    case W_MLP_OUT_NORM: return &l->mlp_out_norm;
    case W_GATE: return &l->gate_up.w[0];
    case W_GATE_BIAS: return &l->gate_up.bias[0];
    case W_DOWN: return &l->down.w[0];
    case W_DOWN_BIAS: return &l->down.bias[0];
    default: return NULL; /* k, v, up and their biases: stacked */
    }
}

/* The layer's tensors, as model/weights.c lists them; the linear layers come out with one
 * stacked part each. */
static void want_layer(want_list *list, const rmlp_model_config *c, const char *prefix, long i, gpu_layer *l) {
    uint64_t h = c->hidden_size, inter = c->intermediate_size;
    uint64_t q = (uint64_t)c->num_attention_heads * c->head_dim, kv = (uint64_t)c->num_key_value_heads * c->head_dim;
    layer_tensor tensors[W_ROLES];
    size_t n = weights_layer_tensors(c, tensors);
    for (size_t k = 0; k < n; k++)
        want(list, prefix, i, tensors[k].suffix, tensors[k].stacked ? NULL : gpu_slot(l, tensors[k].role),
             tensors[k].rows, tensors[k].cols, tensors[k].stacked);
    l->qkv.parts = l->o_proj.parts = l->gate_up.parts = l->down.parts = 1;
    l->qkv.out[0] = (uint32_t)(q + 2 * kv);
    l->o_proj.out[0] = (uint32_t)h;
    l->gate_up.out[0] = (uint32_t)(2 * inter);
    l->down.out[0] = (uint32_t)h;
}

/* ---- the upload ----------------------------------------------------------------------------- */

#define STAGE_BYTES ((size_t)8 << 20) /* per pinned half */

/* Pinned staging, a private stream and one event per half; released however the upload ends. */
struct uploader {
    unsigned char *pinned = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t done[2] = {nullptr, nullptr};
    bool pending[2] = {false, false};
    int turn = 0;
    ~uploader() {
        if (stream != nullptr) (void)cudaStreamSynchronize(stream); /* nothing may still read pinned */
        for (cudaEvent_t e : done)
            if (e != nullptr) (void)cudaEventDestroy(e);
        if (stream != nullptr) (void)cudaStreamDestroy(stream);
        if (pinned != nullptr) (void)cudaFreeHost(pinned);
    }
    rmlp_status open(const char *fn) {
        GPU_TRY(fn, cudaHostAlloc((void **)&pinned, 2 * STAGE_BYTES, cudaHostAllocDefault));
        GPU_TRY(fn, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        for (cudaEvent_t &e : done) GPU_TRY(fn, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        return RMLP_OK;
    }
    /* Converts the tensor chunk by chunk into the pinned halves and queues each copy. */
    rmlp_status put(const char *fn, const st_tensor *t, unsigned char *dst, rmlp_dtype to) {
        size_t from_size = gpu_dtype_bytes(t->dtype), to_size = gpu_dtype_bytes(to);
        size_t n = (size_t)(t->nbytes / from_size), chunk = STAGE_BYTES / to_size;
        const unsigned char *src = (const unsigned char *)t->data;
        for (size_t start = 0; start < n; start += chunk) {
            size_t count = n - start < chunk ? n - start : chunk;
            int h = turn++ % 2;
            if (pending[h]) GPU_TRY(fn, cudaEventSynchronize(done[h]));
            unsigned char *half = pinned + (size_t)h * STAGE_BYTES;
            convert(src + start * from_size, t->dtype, half, to, count);
            GPU_TRY(fn, cudaMemcpyAsync(dst + start * to_size, half, count * to_size, cudaMemcpyHostToDevice, stream));
            GPU_TRY(fn, cudaEventRecord(done[h], stream));
            pending[h] = true;
        }
        return RMLP_OK;
    }
    rmlp_status finish(const char *fn) {
        GPU_TRY(fn, cudaStreamSynchronize(stream));
        return RMLP_OK;
    }
};

/* ---- load ----------------------------------------------------------------------------------- */

extern "C" void gpu_model_free(gpu_model *model) {
    if (model == NULL) return;
    bool tables = model->rope[0].cos_sin != NULL || model->rope[1].cos_sin != NULL;
    if (model->owned != NULL || tables) {
        gpu_device_guard guard(model->device);
        if (model->owned != NULL) (void)cudaFree(model->owned);
        for (int i = 0; i < MODEL_ROPE_MAX; i++)
            if (model->rope[i].cos_sin != NULL) (void)cudaFree((void *)model->rope[i].cos_sin);
    }
    free(model->layers);
    free(model);
}

/* The cos/sin table of m->ext's RoPE i. */
static rmlp_status rope_table(const char *fn, gpu_model *m, uint32_t i) {
    const rmlp_model_config *c = &m->config;
    size_t max_pos = c->max_position_embeddings, half = c->head_dim / 2;
    size_t n = max_pos != 0 && max_pos < GPU_ROPE_TABLE_POSITIONS ? max_pos : GPU_ROPE_TABLE_POSITIONS;
    size_t bytes = n * half * 2 * sizeof(float);
    if (bytes == 0) return RMLP_OK; /* no table: sincosf */
    void *table = NULL;
    cudaStream_t stream = NULL;
    cudaError_t error = cudaMalloc(&table, bytes);
    if (error != cudaSuccess) {
        (void)cudaGetLastError();
        return rmlp_fail(gpu_status_of(error), fn, "cudaMalloc of RoPE's cos/sin table (%zu positions, %zu bytes) on "
                         "device %d failed: %s", n, bytes, m->device, cudaGetErrorString(error));
    }
    gpu_rope_freqs freqs = gpu_model_rope_freqs(m, i);
    m->rope[i] = gpu_rope_table{(const float *)table, (uint32_t)n, c->head_dim, freqs.theta, freqs.inv_freq};
    const char *what = "cudaStreamCreateWithFlags (RoPE's table)";
    error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error == cudaSuccess) {
        what = "gpu_rope_table_fill_freqs";
        error = gpu_rope_table_fill_freqs((float *)table, n, c->head_dim, &freqs, stream);
    }
    if (error == cudaSuccess) {
        what = "cudaStreamSynchronize (RoPE's table)";
        error = cudaStreamSynchronize(stream);
    }
    if (stream != NULL) (void)cudaStreamDestroy(stream);
    return error == cudaSuccess ? RMLP_OK : gpu_fail(fn, what, error); /* the caller frees the model */
}

rmlp_status gpu_model_rope_table(const char *fn, gpu_model *m) {
    rmlp_status status = RMLP_OK;
    for (uint32_t i = 0; i < m->ext->n_rope && status == RMLP_OK; i++) status = rope_table(fn, m, i);
    return status;
}

extern "C" rmlp_status gpu_model_load(const char *fn, const checkpoint *ckpt, rmlp_model_config *config,
                                      const model_ext *ext, int device, rmlp_dtype dtype, gpu_model **out) {
    *out = NULL;
    if (config->head_dim % 2 != 0 || config->head_dim > 256)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "head_dim=%u: the CUDA kernels need an even head_dim <= 256",
                         config->head_dim);
    GPU_ON_DEVICE(fn, device);
    size_t es = gpu_dtype_bytes(dtype);
    gpu_model *m = (gpu_model *)calloc(1, sizeof *m);
    size_t max_wants = 3 + W_ROLES * (size_t)config->num_hidden_layers;
    want_list list = {(tensor_want *)calloc(max_wants, sizeof(tensor_want)), 0};
    if (m != NULL) m->layers = (gpu_layer *)calloc(config->num_hidden_layers ? config->num_hidden_layers : 1,
                                                   sizeof(gpu_layer));
    if (m == NULL || list.w == NULL || m->layers == NULL) {
        free(list.w);
        gpu_model_free(m);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the tensor table of %u layers failed",
                         config->num_hidden_layers);
    }
    m->device = device;
    m->dtype = dtype;
    m->ext = ext;

    const char *prefix = weights_prefix(ckpt);
    uint64_t vocab = config->vocab_size, hidden = config->hidden_size;
    want(&list, prefix, -1, "embed_tokens.weight", &m->embed, vocab, hidden, false);
    want(&list, prefix, -1, "norm.weight", &m->final_norm, hidden, 0, false);
    bool own_lm_head = checkpoint_find(ckpt, "lm_head.weight") != NULL;
    if (own_lm_head) want(&list, "", -1, "lm_head.weight", &m->lm_head, vocab, hidden, false);
    for (uint32_t i = 0; i < config->num_hidden_layers; i++) want_layer(&list, config, prefix, (long)i, &m->layers[i]);

    /* Pass 1: find and check; place (stacked parts back to back, the rest 256-byte aligned). */
    rmlp_status status = RMLP_OK;
    size_t total = 0;
    for (size_t i = 0; i < list.n && status == RMLP_OK; i++) {
        tensor_want *t = &list.w[i];
        status = weights_find(ckpt, t->name, t->rows, t->cols, &t->tensor);
        if (!t->stacked) total = (total + 255) / 256 * 256;
        t->offset = total;
        total += (size_t)(t->rows * (t->cols ? t->cols : 1)) * es;
    }
    /* Pass 2: allocate and upload. */
    if (status == RMLP_OK) {
        cudaError_t error = cudaMalloc(&m->owned, total ? total : 1);
        if (error != cudaSuccess) {
            m->owned = NULL;
            (void)cudaGetLastError();
            status = rmlp_fail(gpu_status_of(error), fn, "cudaMalloc of %zu bytes for the %s weights on device %d "
                               "failed: %s (%s)", total, gpu_dtype_name(dtype), device, cudaGetErrorName(error),
                               cudaGetErrorString(error));
        }
    }
    if (status == RMLP_OK) {
        uploader up;
        status = up.open(fn);
        for (size_t i = 0; i < list.n && status == RMLP_OK; i++) {
            tensor_want *t = &list.w[i];
            unsigned char *dst = (unsigned char *)m->owned + t->offset;
            if (t->slot != NULL) *t->slot = dst;
            status = up.put(fn, t->tensor, dst, dtype);
        }
        if (status == RMLP_OK) status = up.finish(fn);
    }
    free(list.w);
    if (status != RMLP_OK) {
        gpu_model_free(m);
        return status;
    }
    if (!own_lm_head && config->tie_word_embeddings) m->lm_head = m->embed;
    config->has_lm_head = m->lm_head != NULL;
    m->config = *config;
    status = gpu_model_rope_table(fn, m);
    if (status != RMLP_OK) {
        gpu_model_free(m);
        return status;
    }
    *out = m;
    return RMLP_OK;
}
