/*
 * config_gemma.h: the keys of config.json that only the Gemma family reads (transformers 5.23's
 * GemmaConfig, Gemma2Config, Gemma3TextConfig): use_bidirectional_attention (true refused: the
 * embedders built on Gemma attend both ways), final_logit_softcapping, and for Gemma 2 and 3 each
 * layer's attention: the query scale query_pre_attn_scalar^-0.5, Gemma 2's attention-logit soft-cap,
 * the sliding layers (layer_types, else the architecture's pattern) and Gemma 3's RoPE of its
 * sliding layers (rope_parameters per layer type, or the older rope_local_base_freq).
 */
#ifndef RMLP_MODEL_CONFIG_GEMMA_H
#define RMLP_MODEL_CONFIG_GEMMA_H

#include "arch.h"
#include "config_json.h"
#include "model_ext.h"

/* Into m (final_logit_softcapping, sliding_window, rope_theta) and ext (each layer's scale,
 * soft-cap, window and RoPE table), after config_attention; a no-op for the other architectures. */
rmlp_status config_gemma(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext);

#endif
