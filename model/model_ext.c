/*
 * model_ext.c: the defaults of model_ext.h (from the public config alone) and its storage.
 */
#include "model_ext.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"

void model_rope_default(double theta, uint32_t head_dim, float *inv_freq) {
    for (uint32_t i = 0; i < head_dim / 2; i++) /* the CPU's and CUDA's angles have always been these */
        inv_freq[i] = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
}

rmlp_status model_ext_init(const char *fn, const rmlp_model_config *config, model_ext *ext) {
    memset(ext, 0, sizeof *ext);
    if (config->num_hidden_layers > MODEL_MAX_LAYERS || config->head_dim > MODEL_MAX_HEAD_DIM)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "num_hidden_layers=%u, head_dim=%u: more than the %u layers or a head "
                         "wider than the %u the library holds", config->num_hidden_layers, config->head_dim,
                         MODEL_MAX_LAYERS, MODEL_MAX_HEAD_DIM);
    size_t n = config->num_hidden_layers, half = config->head_dim / 2;
    size_t bytes = n * sizeof(layer_attention) + MODEL_ROPE_MAX * (half ? half : 1) * sizeof(float);
    if ((ext->storage = rmlp_malloc(bytes)) == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the layers' attention parameters (%zu bytes) failed",
                         bytes);
    ext->n_layers = (uint32_t)n;
    ext->layers = ext->storage;
    float *freqs = (float *)(ext->layers + n);
    float scale = model_ext_scale(config), softcap = (float)config->attn_logit_softcapping;
    for (size_t i = 0; i < n; i++)
        ext->layers[i] = (layer_attention){config->sliding_window, softcap, scale, MODEL_ROPE_GLOBAL};
    for (int r = 0; r < MODEL_ROPE_MAX; r++) {
        ext->rope[r] = (model_rope){freqs + (size_t)r * half, 1.0f, config->rope_theta};
        model_rope_default(config->rope_theta, config->head_dim, ext->rope[r].inv_freq);
    }
    model_ext_summarize(ext);
    return RMLP_OK;
}

float model_ext_scale(const rmlp_model_config *config) {
    if (config->query_pre_attn_scalar > 0.0) return (float)pow(config->query_pre_attn_scalar, -0.5);
    return 1.0f / sqrtf((float)config->head_dim);
}

void model_ext_summarize(model_ext *ext) {
    ext->any_window = ext->any_softcap = false;
    ext->n_rope = 1;
    for (uint32_t i = 0; i < ext->n_layers; i++) {
        ext->any_window |= ext->layers[i].window != 0;
        ext->any_softcap |= ext->layers[i].softcap != 0.0f;
        if (ext->layers[i].rope == MODEL_ROPE_LOCAL) ext->n_rope = 2;
    }
}

void model_ext_free(model_ext *ext) {
    free(ext->storage);
    memset(ext, 0, sizeof *ext);
}
