/*
 * config_attention.h: what config.json says about each layer's attention and about RoPE, into
 * model_ext (model_ext.h) and rmlp_model_config's rope_theta and sliding_window, as transformers
 * 5.23 decides them: which layers slide and by how much (layer_types, use_sliding_window,
 * sliding_window, max_window_layers, by the architecture's kind of windows in arch.h), and the RoPE
 * (rope_scaling, else rope_parameters, with rope_theta, of the kinds rope_scaling.h computes;
 * dynamic and longrope refused by name, with the reason). config.c calls config_attention after
 * the sizes; the other two are its parts, for an architecture that declares its layers otherwise.
 */
#ifndef RMLP_MODEL_CONFIG_ATTENTION_H
#define RMLP_MODEL_CONFIG_ATTENTION_H

#include "arch.h"
#include "config_json.h"
#include "model_ext.h"

/* Every layer's window and RoPE table, m->sliding_window (the window of the sliding layers, 0 when
 * none slides) and m->rope_theta (the full-attention layers' base). ext: model_ext_init's, for m. */
rmlp_status config_attention(const cfg *c, rmlp_model_config *m, const arch_info *arch, model_ext *ext);

/* The layers of layer_types (an array of one kind per layer: "full_attention", its older name
 * "attention", or "sliding_attention", which takes `window`; others refused by name): each layer's
 * window into ext. A sliding layer with window 0 is refused (transformers raises then: its config
 * holds no sliding_window). */
rmlp_status config_layer_types(const cfg *c, const json_t *types, const rmlp_model_config *m, uint32_t window,
                               model_ext *ext);

/* One flat RoPE object (`rope`, named `scope` in messages: "rope_parameters.", ...): its rope_type
 * (or type; absent: default), rope_theta (absent: theta), and the keys its kind reads, into *out
 * (inv_freq of m->head_dim / 2 floats, its attention factor, its theta). The top-level
 * original_max_position_embeddings and partial_rotary_factor count when top_level (transformers
 * standardises a flat object with them). */
rmlp_status config_rope_object(const cfg *c, json_t *rope, const char *scope, double theta,
                               const rmlp_model_config *m, bool top_level, model_rope *out);

#endif
