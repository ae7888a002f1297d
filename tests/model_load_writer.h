/*
 * model_load_writer.h: what the model loader's tests share (test_model_load.c: valid checkpoints;
 * test_model_load_bad.c: the bad-input tables): a temporary folder, a tiny model written as a
 * checkpoint to a spec (st_writer.h), sharded with an index, loaded as rmlp_model_load does it,
 * and a load expected to fail with a status and a message. Included by one translation unit per
 * test executable (after test_util.h, whose counters it uses).
 */
#ifndef RMLP_TESTS_MODEL_LOAD_WRITER_H
#define RMLP_TESTS_MODEL_LOAD_WRITER_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/status.h"
#include "model/audit.h"
#include "model/config.h"
#include "model/weights.h"
#include "st_writer.h"
#include "test_util.h"

/* The tiny model: head_dim is given (as Qwen3 does) and differs from hidden / heads. */
enum { VOCAB = 32, HIDDEN = 16, INTER = 24, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HEAD_DIM = 8 };

static char *root; /* the temporary folder */

/* A path inside root: dir (may be "") and name joined; one of two rotating buffers. */
static inline const char *at(const char *dir, const char *name) {
    static char bufs[2][512];
    static int k;
    char *b = bufs[k++ & 1];
    snprintf(b, sizeof bufs[0], "%s%s%s%s%s", root, dir[0] ? "/" : "", dir, name[0] ? "/" : "", name);
    return b;
}

static inline void make_dir(const char *dir) { mkdir(at(dir, ""), 0700); }

/* A test's start: the temporary folder, shown as DIR in docs/errors.md's rows. */
static inline void writer_begin(void) {
    root = stw_mkdtemp();
    tu_scrub_dir = root;
}

/* ---- building a checkpoint ------------------------------------------------------------------ */

typedef struct spec {
    const char *model_type; /* "qwen3", "qwen2", "llama", ... */
    const char *prefix;     /* "model." or "" */
    const char *dtype;      /* "F32" or "BF16" for every tensor */
    int tie;                /* tie_word_embeddings */
    int lm_head;            /* write lm_head.weight */
    int qk_norm, bias;      /* write q/k norms, q/k/v biases */
    uint32_t head_dim;
    int write_head_dim; /* head_dim in config.json (else hidden / heads) */
    int old_form;       /* config.json as older hub checkpoints have it (top-level rope_theta, ...) */
    int o_bias, mlp_bias; /* write the o_proj bias, the gate/up/down biases */
    int head_equal;       /* lm_head.weight written as a copy of the embedding */
    int sandwich;         /* write Gemma 2's pre_ and post_feedforward_layernorm */
} spec;

/* The Gemma family: config.json's keys of its config classes (no use_sliding_window; Gemma 2 and
 * 3 name the activation hidden_activation). */
static inline int is_gemma(const spec *s) { return strncmp(s->model_type, "gemma", 5) == 0; }

/* config.json as transformers 5 writes it (rope_parameters, layer_types). */
static const spec QWEN3 = {"qwen3", "model.", "F32", 0, 1, 1, 0, HEAD_DIM, 1, 0, 0, 0, 0, 0};

/* What transformers 5 does with tie_word_embeddings and a lm_head.weight of the file's own: the
 * head is tied when it equals the embedding, else kept untied (lm_head.h). */
static inline int tied(const spec *s) { return s->tie && (!s->lm_head || s->head_equal); }

static inline const char *tensor_name(const spec *s, int layer, const char *suffix) {
    static char buf[160];
    if (layer < 0)
        snprintf(buf, sizeof buf, "%s%s", strcmp(suffix, "lm_head.weight") ? s->prefix : "", suffix);
    else
        snprintf(buf, sizeof buf, "%slayers.%d.%s", s->prefix, layer, suffix);
    return buf;
}

/* A tensor of random values in [-1, 1) (BF16: their top 16 bits). */
static inline void add_random(stw *w, uint64_t *rng, const spec *s, int layer, const char *suffix, uint64_t rows,
                       uint64_t cols) {
    uint64_t shape[2] = {rows, cols}, n = rows * (cols ? cols : 1);
    int bf16 = strcmp(s->dtype, "BF16") == 0;
    unsigned char *data = tu_xmalloc(n * 4);
    for (uint64_t i = 0; i < n; i++) {
        float f = (float)((double)(tu_rand(rng) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (bf16)
            memcpy(data + 2 * i, (const char *)&bits + 2, 2); /* little-endian: the high half */
        else
            memcpy(data + 4 * i, &bits, 4);
    }
    stw_add(w, tensor_name(s, layer, suffix), s->dtype, cols ? 2 : 1, shape, data, n * (bf16 ? 2 : 4));
    free(data);
}

static inline void build_tensors(const spec *s, uint64_t seed, stw *w) {
    uint64_t rng = seed, q = (uint64_t)HEADS * s->head_dim, kv = (uint64_t)KV_HEADS * s->head_dim;
    add_random(w, &rng, s, -1, "embed_tokens.weight", VOCAB, HIDDEN);
    for (int i = 0; i < LAYERS; i++) {
        add_random(w, &rng, s, i, "input_layernorm.weight", HIDDEN, 0);
        add_random(w, &rng, s, i, "self_attn.q_proj.weight", q, HIDDEN);
        add_random(w, &rng, s, i, "self_attn.k_proj.weight", kv, HIDDEN);
        add_random(w, &rng, s, i, "self_attn.v_proj.weight", kv, HIDDEN);
        if (s->bias) {
            add_random(w, &rng, s, i, "self_attn.q_proj.bias", q, 0);
            add_random(w, &rng, s, i, "self_attn.k_proj.bias", kv, 0);
            add_random(w, &rng, s, i, "self_attn.v_proj.bias", kv, 0);
        }
        if (s->qk_norm) {
            add_random(w, &rng, s, i, "self_attn.q_norm.weight", s->head_dim, 0);
            add_random(w, &rng, s, i, "self_attn.k_norm.weight", s->head_dim, 0);
        }
        add_random(w, &rng, s, i, "self_attn.o_proj.weight", HIDDEN, q);
        if (s->o_bias) add_random(w, &rng, s, i, "self_attn.o_proj.bias", HIDDEN, 0);
        add_random(w, &rng, s, i, "post_attention_layernorm.weight", HIDDEN, 0);
        if (s->sandwich) add_random(w, &rng, s, i, "pre_feedforward_layernorm.weight", HIDDEN, 0);
        add_random(w, &rng, s, i, "mlp.gate_proj.weight", INTER, HIDDEN);
        add_random(w, &rng, s, i, "mlp.up_proj.weight", INTER, HIDDEN);
        add_random(w, &rng, s, i, "mlp.down_proj.weight", HIDDEN, INTER);
        if (s->mlp_bias) {
            add_random(w, &rng, s, i, "mlp.gate_proj.bias", INTER, 0);
            add_random(w, &rng, s, i, "mlp.up_proj.bias", INTER, 0);
            add_random(w, &rng, s, i, "mlp.down_proj.bias", HIDDEN, 0);
        }
        if (s->sandwich) add_random(w, &rng, s, i, "post_feedforward_layernorm.weight", HIDDEN, 0);
    }
    add_random(w, &rng, s, -1, "norm.weight", HIDDEN, 0);
    const stw_tensor *embed = stw_find(w, tensor_name(s, -1, "embed_tokens.weight"));
    if (s->lm_head && s->head_equal)
        stw_add(w, "lm_head.weight", embed->dtype, 2, embed->shape, embed->data, embed->nbytes);
    else if (s->lm_head)
        add_random(w, &rng, s, -1, "lm_head.weight", VOCAB, HIDDEN);
    add_random(w, &rng, s, -1, "rotary_emb.inv_freq", s->head_dim / 2, 0); /* unused, as old checkpoints have */
}

static inline void build_config(const spec *s, stw_json *j) {
    char num[32];
    stw_json_set(j, "architectures", "[\"Qwen3ForCausalLM\"]");
    snprintf(num, sizeof num, "\"%s\"", s->model_type);
    stw_json_set(j, "model_type", num);
    stw_json_set(j, "vocab_size", "32");
    stw_json_set(j, "hidden_size", "16");
    stw_json_set(j, "intermediate_size", "24");
    stw_json_set(j, "num_hidden_layers", "2");
    stw_json_set(j, "num_attention_heads", "4");
    stw_json_set(j, "num_key_value_heads", "2");
    snprintf(num, sizeof num, "%u", s->head_dim);
    if (s->write_head_dim) stw_json_set(j, "head_dim", num);
    stw_json_set(j, "max_position_embeddings", "128");
    stw_json_set(j, "rms_norm_eps", "1e-06");
    if (s->old_form) {
        stw_json_set(j, "rope_theta", "1000000");
        stw_json_set(j, "rope_scaling", "null");
        stw_json_set(j, "torch_dtype", "\"float32\"");
    } else {
        stw_json_set(j, "rope_parameters", "{\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}");
        stw_json_set(j, "layer_types", "[\"full_attention\", \"full_attention\"]");
        stw_json_set(j, "dtype", "\"float32\"");
    }
    stw_json_set(j, is_gemma(s) && strcmp(s->model_type, "gemma") != 0 ? "hidden_activation" : "hidden_act",
                 "\"silu\"");
    stw_json_set(j, "tie_word_embeddings", s->tie ? "true" : "false");
    if (!is_gemma(s)) stw_json_set(j, "use_sliding_window", "false");
    stw_json_set(j, "sliding_window", "null");
}

/* Writes dir/config.json and dir/model.safetensors. */
static inline void write_checkpoint(const char *dir, const stw *w, const stw_json *config, int align8) {
    make_dir(dir);
    stw_write(w, at(dir, "model.safetensors"), align8);
    stw_json_write(config, at(dir, "config.json"));
}

static bool skip_finite_check; /* what rmlp_model_params.skip_finite_check asks */
static char *report;            /* the audit's report of the last load_all (NULL: nothing to report) */

/* What rmlp_model_load does: open, read config.json, audit, load the weights, close. */
static inline rmlp_status load_all(const char *path, rmlp_model_config *config, model_weights *weights) {
    checkpoint *ckpt = NULL;
    rmlp_clear_error();
    memset(weights, 0, sizeof *weights);
    free(report);
    report = NULL;
    rmlp_status status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read("rmlp_model_load", checkpoint_config_path(ckpt), config);
    if (status == RMLP_OK) status = audit_checkpoint(ckpt, config, !skip_finite_check, &report);
    if (status == RMLP_OK) status = weights_load(ckpt, config, false, weights);
    checkpoint_close(ckpt);
    return status;
}

/* Loads path and checks the status and that the message starts with the function and names
 * msg and msg2 (when given). */
static inline void expect_fail(const char *what, const char *path, rmlp_status want, const char *msg, const char *msg2) {
    rmlp_model_config c;
    model_weights mw;
    rmlp_status got = load_all(path, &c, &mw);
    const char *err = rmlp_last_error();
    tu_record_bad_input(what, got, err);
    CHECK(got == want, "%s: status %d, want %d: %s", what, got, want, err);
    CHECK(strncmp(err, "rmlp_model_load: ", 17) == 0, "%s: message '%s'", what, err);
    CHECK(strstr(err, msg) != NULL, "%s: message '%s' lacks '%s'", what, err, msg);
    if (msg2) CHECK(strstr(err, msg2) != NULL, "%s: message '%s' lacks '%s'", what, err, msg2);
    if (got == RMLP_OK) weights_free(&mw, &c);
}

/* A test's end: the folder removed; the summary's exit code. */
static inline int writer_end(void) {
    free(report);
    stw_rmtree(root);
    free(root);
    return tu_summary();
}

/* ---- sharded checkpoints -------------------------------------------------------------------- */

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

/* The QWEN3 model in two shards (the first `split` tensors, then the rest) with an index; the
 * weight map gets map_key set to map_value (raw JSON, NULL removes) when map_key is given, and
 * index_text (when given) replaces the whole index. */
static inline void write_sharded(const char *dir, const stw *w, const char *map_key, const char *map_value,
                          const char *index_text) {
    stw parts[2] = {{0}, {0}};
    stw_json map = {0}, index = {0};
    size_t split = w->n / 2;
    char quoted[96];
    for (size_t i = 0; i < w->n; i++) {
        const stw_tensor *t = &w->t[i];
        stw_add(&parts[i >= split], t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        snprintf(quoted, sizeof quoted, "\"%s\"", i >= split ? SHARD2 : SHARD1);
        stw_json_set(&map, t->name, quoted);
    }
    if (map_key && strcmp(map_key, "duplicate") == 0) { /* the first shard's first tensor, in the second too */
        const stw_tensor *t = &w->t[0];
        stw_add(&parts[1], t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        map_key = NULL;
    }
    if (map_key) stw_json_set(&map, map_key, map_value);
    char *map_text = stw_json_string(&map);
    stw_json_set(&index, "metadata", "{\"total_size\": 12345}");
    stw_json_set(&index, "weight_map", map_text);
    make_dir(dir);
    stw_write(&parts[0], at(dir, SHARD1), 1);
    stw_write(&parts[1], at(dir, SHARD2), 1);
    if (index_text)
        stw_write_bytes(at(dir, "model.safetensors.index.json"), index_text, strlen(index_text));
    else
        stw_json_write(&index, at(dir, "model.safetensors.index.json"));
    free(map_text);
    stw_free(&parts[0]);
    stw_free(&parts[1]);
    stw_json_free(&map);
    stw_json_free(&index);
}

#endif
