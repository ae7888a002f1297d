/*
 * weights_bf16.h: a CPU model's layer matrices held in bf16 (rmlp_model_params::cpu_weight_dtype
 * = RMLP_DTYPE_BF16): each of a layer's four matrices (qkv, o_proj, gate_up, down), once loaded
 * in fp32 by weights.c, is rounded to bf16 into an array of its own and the fp32 copy freed, so a
 * load never holds more than one layer twice. cpu/linear_bf16.h multiplies by them.
 */
#ifndef RMLP_MODEL_WEIGHTS_BF16_H
#define RMLP_MODEL_WEIGHTS_BF16_H

#include <stdint.h>

#include "weights.h"

/* f rounded to bf16, nearest even; infinities kept, NaN stays a NaN. */
uint16_t weights_f32_to_bf16(float f);

/* Layer `layer`'s four matrices of w (fp32, as load_layer left them) into w's *_bf16 arrays; the
 * fp32 ones freed and NULL. Errors: RMLP_ERR_MODEL naming the tensor and element of a finite
 * weight beyond bf16's range, RMLP_ERR_OUT_OF_MEMORY; on error w keeps what it holds (both kinds
 * of array may be set: weights_free frees either). */
rmlp_status weights_layer_to_bf16(const rmlp_model_config *c, const char *prefix, long layer, layer_weights *w);

#endif
