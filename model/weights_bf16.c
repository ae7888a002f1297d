/*
 * weights_bf16.c: the rounding of a layer's matrices to bf16 (weights_bf16.h), and the refusal of
 * a finite weight that bf16 cannot hold, named by the checkpoint tensor it came from (the stacked
 * matrices are split back into q/k/v and gate/up for the message).
 */
#include "weights_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"

static const char fn[] = "rmlp_model_load";

uint16_t weights_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u); /* NaN: keep a mantissa bit */
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* One stacked matrix: its rows, split into the checkpoint tensors stacked in it. */
typedef struct matrix {
    const char *what; /* for messages: "Q/K/V", ... */
    float **f32;
    uint16_t **bf16;
    uint64_t cols;
    const char *suffix[3]; /* the tensors, in stacking order (NULL past the last) */
    uint64_t rows[3];
} matrix;

static rmlp_status to_bf16(const matrix *m, const char *prefix, long layer) {
    uint64_t rows = m->rows[0] + m->rows[1] + m->rows[2], n = rows * m->cols;
    uint16_t *dst = n <= SIZE_MAX / sizeof(uint16_t) ? rmlp_malloc_aligned(n * sizeof(uint16_t)) : NULL;
    if (dst == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %llu bf16 weights (%llu bytes) for layer %ld's %s "
                         "matrix failed", (unsigned long long)n, (unsigned long long)n * 2, layer, m->what);
    const float *src = *m->f32;
    for (uint64_t i = 0; i < n; i++) {
        dst[i] = weights_f32_to_bf16(src[i]);
        if ((dst[i] & 0x7fffu) == 0x7f80u && isfinite(src[i])) {
            uint64_t row = i / m->cols, part = 0;
            while (row >= m->rows[part]) row -= m->rows[part++];
            char name[160];
            weights_name(name, sizeof name, prefix, layer, m->suffix[part]);
            free(dst);
            return rmlp_fail(RMLP_ERR_MODEL, fn, "tensor '%s' holds %g at element %llu, beyond bf16's range: "
                             "params.cpu_weight_dtype=RMLP_DTYPE_BF16 cannot hold it (RMLP_DTYPE_F32 can)",
                             name, (double)src[i], (unsigned long long)(row * m->cols + i % m->cols));
        }
    }
    *m->bf16 = dst;
    free(*m->f32);
    *m->f32 = NULL;
    return RMLP_OK;
}

rmlp_status weights_layer_to_bf16(const rmlp_model_config *c, const char *prefix, long layer, layer_weights *w) {
    uint64_t h = c->hidden_size, inter = c->intermediate_size;
    uint64_t q = (uint64_t)c->num_attention_heads * c->head_dim, kv = (uint64_t)c->num_key_value_heads * c->head_dim;
    const matrix all[] = {
        {"Q/K/V", &w->qkv, &w->qkv_bf16, h,
         {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}, {q, kv, kv}},
        {"O", &w->o_proj, &w->o_proj_bf16, q, {"self_attn.o_proj.weight", NULL, NULL}, {h, 0, 0}},
        {"gate/up", &w->gate_up, &w->gate_up_bf16, h, {"mlp.gate_proj.weight", "mlp.up_proj.weight", NULL},
         {inter, inter, 0}},
        {"down", &w->down, &w->down_bf16, inter, {"mlp.down_proj.weight", NULL, NULL}, {h, 0, 0}},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        rmlp_status status = to_bf16(&all[i], prefix, layer);
        if (status != RMLP_OK) return status;
    }
    return RMLP_OK;
}
