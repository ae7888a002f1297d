/*
 * test_model_load.c: the model loader (model/) on checkpoints this test writes with st_writer
 * into a temporary folder. Valid tiny models (Qwen3 with and without the "model." prefix, tied,
 * untied and headless, Qwen2 with biases, Llama/Mistral, BF16 with a misaligned data section,
 * sharded, opened by file path) load with every value checked against the tensors written,
 * q/k/v and gate/up stacked; F16 and BF16 conversions are checked bit for bit on known
 * patterns (subnormals, infinities, NaN). Then one table row per bad input (safetensors header,
 * config.json, tensors, index.json), each with its exact status and a message naming the file,
 * key or tensor (FIFOs and folders where files belong, a tensor in two shards, hidden_act null);
 * tensors an index lacks are loaded and reported; the LM head when config.json ties it and the
 * file has its own (lm_head.h); a forward whose output overflows fp32 is RMLP_ERR_MODEL. Run under
 * ASan/LSan, this also checks that no error path leaks.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../ffi/src/export.h"
#include "../model/audit.h"
#include "../model/config.h"
#include "../model/weights.h"
#include "st_writer.h"
#include "test_util.h"

/* The tiny model: head_dim is given (as Qwen3 does) and differs from hidden / heads. */
enum { VOCAB = 32, HIDDEN = 16, INTER = 24, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HEAD_DIM = 8 };

static char *root; /* the temporary folder */

/* A path inside root: dir (may be "") and name joined; one of two rotating buffers. */
static const char *at(const char *dir, const char *name) {
    static char bufs[2][512];
    static int k;
    char *b = bufs[k++ & 1];
    snprintf(b, sizeof bufs[0], "%s%s%s%s%s", root, dir[0] ? "/" : "", dir, name[0] ? "/" : "", name);
    return b;
}

static void make_dir(const char *dir) { mkdir(at(dir, ""), 0700); }

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
} spec;

/* config.json as transformers 5 writes it (rope_parameters, layer_types). */
static const spec QWEN3 = {"qwen3", "model.", "F32", 0, 1, 1, 0, HEAD_DIM, 1, 0, 0, 0, 0};

/* What transformers 5 does with tie_word_embeddings and a lm_head.weight of the file's own: the
 * head is tied when it equals the embedding, else kept untied (lm_head.h). */
static int tied(const spec *s) { return s->tie && (!s->lm_head || s->head_equal); }

static const char *tensor_name(const spec *s, int layer, const char *suffix) {
    static char buf[160];
    if (layer < 0)
        snprintf(buf, sizeof buf, "%s%s", strcmp(suffix, "lm_head.weight") ? s->prefix : "", suffix);
    else
        snprintf(buf, sizeof buf, "%slayers.%d.%s", s->prefix, layer, suffix);
    return buf;
}

/* A tensor of random values in [-1, 1) (BF16: their top 16 bits). */
static void add_random(stw *w, uint64_t *rng, const spec *s, int layer, const char *suffix, uint64_t rows,
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

static void build_tensors(const spec *s, uint64_t seed, stw *w) {
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
        add_random(w, &rng, s, i, "mlp.gate_proj.weight", INTER, HIDDEN);
        add_random(w, &rng, s, i, "mlp.up_proj.weight", INTER, HIDDEN);
        add_random(w, &rng, s, i, "mlp.down_proj.weight", HIDDEN, INTER);
        if (s->mlp_bias) {
            add_random(w, &rng, s, i, "mlp.gate_proj.bias", INTER, 0);
            add_random(w, &rng, s, i, "mlp.up_proj.bias", INTER, 0);
            add_random(w, &rng, s, i, "mlp.down_proj.bias", HIDDEN, 0);
        }
    }
    add_random(w, &rng, s, -1, "norm.weight", HIDDEN, 0);
    const stw_tensor *embed = stw_find(w, tensor_name(s, -1, "embed_tokens.weight"));
    if (s->lm_head && s->head_equal)
        stw_add(w, "lm_head.weight", embed->dtype, 2, embed->shape, embed->data, embed->nbytes);
    else if (s->lm_head)
        add_random(w, &rng, s, -1, "lm_head.weight", VOCAB, HIDDEN);
    add_random(w, &rng, s, -1, "rotary_emb.inv_freq", s->head_dim / 2, 0); /* unused, as old checkpoints have */
}

static void build_config(const spec *s, stw_json *j) {
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
    stw_json_set(j, "hidden_act", "\"silu\"");
    stw_json_set(j, "tie_word_embeddings", s->tie ? "true" : "false");
    stw_json_set(j, "use_sliding_window", "false");
    stw_json_set(j, "sliding_window", "null");
}

/* Writes dir/config.json and dir/model.safetensors. */
static void write_checkpoint(const char *dir, const stw *w, const stw_json *config, int align8) {
    make_dir(dir);
    stw_write(w, at(dir, "model.safetensors"), align8);
    stw_json_write(config, at(dir, "config.json"));
}

static bool skip_finite_check; /* what rmlp_model_params.skip_finite_check asks */
static char *report;            /* the audit's report of the last load_all (NULL: nothing to report) */

/* What rmlp_model_load does: open, read config.json, audit, load the weights, close. */
static rmlp_status load_all(const char *path, rmlp_model_config *config, model_weights *weights) {
    checkpoint *ckpt = NULL;
    rmlp_clear_error();
    memset(weights, 0, sizeof *weights);
    free(report);
    report = NULL;
    rmlp_status status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read(checkpoint_config_path(ckpt), config);
    if (status == RMLP_OK) status = audit_checkpoint(ckpt, config, !skip_finite_check, &report);
    if (status == RMLP_OK) status = weights_load(ckpt, config, weights);
    checkpoint_close(ckpt);
    return status;
}

static void expect_fail(const char *what, const char *path, rmlp_status want, const char *msg, const char *msg2);

/* ---- checking loaded values ----------------------------------------------------------------- */

static float decode(const stw_tensor *t, uint64_t i) {
    uint32_t bits = 0;
    if (strcmp(t->dtype, "BF16") == 0)
        memcpy((char *)&bits + 2, t->data + 2 * i, 2);
    else
        memcpy(&bits, t->data + 4 * i, 4);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* got[0 ..) equals the written tensor's values bit for bit. */
static void check_values(const char *what, const float *got, const stw *w, const char *name) {
    const stw_tensor *t = stw_find(w, name);
    if (!CHECK(t != NULL && got != NULL, "%s: %s", what, name)) return;
    uint64_t n = t->nbytes / (strcmp(t->dtype, "BF16") == 0 ? 2 : 4), bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        float want = decode(t, i);
        if (memcmp(&got[i], &want, 4) != 0 && bad++ == 0)
            printf("    %s: %s[%llu] = %g, want %g\n", what, name, (unsigned long long)i, got[i], want);
    }
    CHECK(bad == 0, "%s: %llu values of %s differ", what, (unsigned long long)bad, name);
}

static void check_weights(const char *what, const spec *s, const stw *w, const rmlp_model_config *c,
                          const model_weights *mw) {
    uint64_t q = (uint64_t)HEADS * s->head_dim * HIDDEN, kv = (uint64_t)KV_HEADS * s->head_dim * HIDDEN;
    check_values(what, mw->embed, w, tensor_name(s, -1, "embed_tokens.weight"));
    check_values(what, mw->final_norm, w, tensor_name(s, -1, "norm.weight"));
    for (int i = 0; i < LAYERS; i++) {
        const layer_weights *l = &mw->layers[i];
        check_values(what, l->input_norm, w, tensor_name(s, i, "input_layernorm.weight"));
        check_values(what, l->qkv, w, tensor_name(s, i, "self_attn.q_proj.weight"));
        check_values(what, l->qkv + q, w, tensor_name(s, i, "self_attn.k_proj.weight"));
        check_values(what, l->qkv + q + kv, w, tensor_name(s, i, "self_attn.v_proj.weight"));
        if (c->attention_bias) {
            check_values(what, l->qkv_bias, w, tensor_name(s, i, "self_attn.q_proj.bias"));
            check_values(what, l->qkv_bias + q / HIDDEN, w, tensor_name(s, i, "self_attn.k_proj.bias"));
            check_values(what, l->qkv_bias + (q + kv) / HIDDEN, w, tensor_name(s, i, "self_attn.v_proj.bias"));
        } else {
            CHECK(l->qkv_bias == NULL, "%s: layer %d has a bias", what, i);
        }
        if (c->qk_norm) {
            check_values(what, l->q_norm, w, tensor_name(s, i, "self_attn.q_norm.weight"));
            check_values(what, l->k_norm, w, tensor_name(s, i, "self_attn.k_norm.weight"));
        } else {
            CHECK(l->q_norm == NULL && l->k_norm == NULL, "%s: layer %d has q/k norms", what, i);
        }
        check_values(what, l->o_proj, w, tensor_name(s, i, "self_attn.o_proj.weight"));
        check_values(what, l->post_norm, w, tensor_name(s, i, "post_attention_layernorm.weight"));
        check_values(what, l->gate_up, w, tensor_name(s, i, "mlp.gate_proj.weight"));
        check_values(what, l->gate_up + (uint64_t)INTER * HIDDEN, w, tensor_name(s, i, "mlp.up_proj.weight"));
        check_values(what, l->down, w, tensor_name(s, i, "mlp.down_proj.weight"));
        if (c->o_proj_bias)
            check_values(what, l->o_bias, w, tensor_name(s, i, "self_attn.o_proj.bias"));
        else
            CHECK(l->o_bias == NULL, "%s: layer %d has an o_proj bias", what, i);
        if (c->mlp_bias) {
            check_values(what, l->gate_up_bias, w, tensor_name(s, i, "mlp.gate_proj.bias"));
            check_values(what, l->gate_up_bias + INTER, w, tensor_name(s, i, "mlp.up_proj.bias"));
            check_values(what, l->down_bias, w, tensor_name(s, i, "mlp.down_proj.bias"));
        } else {
            CHECK(l->gate_up_bias == NULL && l->down_bias == NULL, "%s: layer %d has MLP biases", what, i);
        }
    }
    if (s->lm_head && !tied(s)) {
        CHECK(mw->lm_head != mw->embed, "%s: own lm_head aliases the embedding", what);
        check_values(what, mw->lm_head, w, "lm_head.weight");
    } else {
        CHECK(mw->lm_head == (s->tie ? mw->embed : NULL), "%s: lm_head %p, embed %p, tie %d", what, (void *)mw->lm_head,
              (void *)mw->embed, s->tie);
    }
    CHECK(c->has_lm_head == (s->lm_head || s->tie), "%s: has_lm_head %d", what, c->has_lm_head);
}

/* The value edits (NULL or key, value, ..., NULL) give `key`, or NULL. */
static const char *edited(const char *const *edits, const char *key) {
    for (size_t i = 0; edits != NULL && edits[i] != NULL; i += 2)
        if (strcmp(edits[i], key) == 0) return edits[i + 1];
    return NULL;
}

/* Whether edits set the boolean `key` to true. */
static int edited_true(const char *const *edits, const char *key) {
    const char *value = edited(edits, key);
    return value != NULL && strcmp(value, "true") == 0;
}

/* Writes the model of spec s into its own folder (config.json from s, then each key of `edits`
 * (NULL, or key, raw JSON value (NULL removes), ..., NULL) set), loads it and checks everything:
 * the biases loaded are those transformers builds for the architecture (s says which tensors
 * the file has; those it has beyond them must be reported unused). */
static void check_valid(const char *what, const spec *s, const char *const *edits, int align8) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(s, 42, &w);
    build_config(s, &config);
    for (size_t i = 0; edits != NULL && edits[i] != NULL; i += 2) stw_json_set(&config, edits[i], edits[i + 1]);
    char dir[64];
    snprintf(dir, sizeof dir, "valid_%s", what);
    write_checkpoint(dir, &w, &config, align8);
    rmlp_model_config c;
    model_weights mw;
    rmlp_status status = load_all(at(dir, ""), &c, &mw);
    if (CHECK(status == RMLP_OK, "%s: status %d: %s", what, status, rmlp_last_error())) {
        rmlp_arch arch = strcmp(s->model_type, "qwen2") == 0     ? RMLP_ARCH_QWEN2
                         : strcmp(s->model_type, "llama") == 0   ? RMLP_ARCH_LLAMA
                         : strcmp(s->model_type, "mistral") == 0 ? RMLP_ARCH_MISTRAL
                                                                 : RMLP_ARCH_QWEN3;
        CHECK_EQ(c.architecture, arch, "%s", what);
        CHECK(c.vocab_size == VOCAB && c.hidden_size == HIDDEN && c.intermediate_size == INTER &&
                  c.num_hidden_layers == LAYERS && c.num_attention_heads == HEADS &&
                  c.num_key_value_heads == KV_HEADS && c.max_position_embeddings == 128,
              "%s: sizes", what);
        CHECK_EQ(c.head_dim, s->head_dim, "%s", what);
        const char *window = edited(edits, "sliding_window");
        CHECK_EQ(c.sliding_window, arch == RMLP_ARCH_MISTRAL && window ? atoi(window) : 0, "%s", what);
        CHECK(c.rms_norm_eps == 1e-6 && c.rope_theta == 1e6, "%s: eps %g theta %g", what, c.rms_norm_eps, c.rope_theta);
        /* transformers: Qwen2 always has q/k/v biases; Llama and Qwen3 q/k/v/o ones from
         * attention_bias; Llama gate/up/down ones from mlp_bias; Mistral none. */
        int reads = arch == RMLP_ARCH_LLAMA || arch == RMLP_ARCH_QWEN3;
        int attention_bias = edited_true(edits, "attention_bias");
        CHECK(c.qk_norm == (arch == RMLP_ARCH_QWEN3) && c.tie_word_embeddings == tied(s), "%s: qk_norm %d tie %d",
              what, c.qk_norm, c.tie_word_embeddings);
        CHECK(c.attention_bias == (arch == RMLP_ARCH_QWEN2 || (reads && attention_bias)) &&
                  c.o_proj_bias == (reads && attention_bias) &&
                  c.mlp_bias == (arch == RMLP_ARCH_LLAMA && edited_true(edits, "mlp_bias")),
              "%s: biases q/k/v %d o %d mlp %d", what, c.attention_bias, c.o_proj_bias, c.mlp_bias);
        int extra = (s->bias && !c.attention_bias) || (s->o_bias && !c.o_proj_bias) || (s->mlp_bias && !c.mlp_bias);
        const char *head = !s->tie || !s->lm_head ? NULL
                           : s->head_equal        ? "lm_head.weight equals the embedding: the LM head is the embedding "
                                                    "(tied)\n"
                                                  : "lm_head.weight differs from the embedding: the LM head is "
                                                    "lm_head.weight, not tied";
        CHECK((report != NULL) == (extra || head != NULL) && (!extra || strstr(report, "proj.bias'") != NULL) &&
                  (head == NULL || strstr(report, head) != NULL),
              "%s: report '%s' (bias tensors the model does not use: %d; the head: %s)", what,
              report ? report : "(none)", extra, head ? head : "as configured");
        check_weights(what, s, &w, &c, &mw);
        weights_free(&mw, &c);
    }
    stw_free(&w);
    stw_json_free(&config);
}

#define EDITS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_valid(void) {
    spec s = QWEN3;
    check_valid("qwen3", &s, NULL, 1);
    s.prefix = "", s.tie = 1, s.lm_head = 0, s.old_form = 1; /* Qwen3-Embedding: no "model.", no lm_head */
    check_valid("qwen3_embedding", &s, NULL, 1);
    s = QWEN3, s.tie = 1; /* tied, but the checkpoint carries its own lm_head, which differs: that one is used */
    check_valid("tied_with_lm_head", &s, NULL, 1);
    s.head_equal = 1; /* its own lm_head, equal to the embedding: tied */
    check_valid("tied_with_equal_lm_head", &s, NULL, 1);
    s = QWEN3, s.lm_head = 0; /* untied without lm_head: a model without a head */
    check_valid("headless", &s, NULL, 1);
    s = QWEN3, s.bias = s.o_bias = 1; /* q, k, v and o_proj biases from attention_bias; mlp_bias not read */
    check_valid("qwen3_biases", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    s = QWEN3, s.model_type = "qwen2", s.qk_norm = 0, s.bias = 1; /* bias forced on for Qwen2 */
    check_valid("qwen2", &s, EDITS("attention_bias", "false"), 1);
    /* Qwen2 reads neither flag: q/k/v biases only, even with attention_bias and mlp_bias true. */
    check_valid("qwen2_flags", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    s.o_bias = s.mlp_bias = 1; /* biases Qwen2 does not have: loaded without them, and reported */
    check_valid("qwen2_extra_biases", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    /* use_sliding_window, but every layer below max_window_layers: full attention everywhere. */
    s.o_bias = s.mlp_bias = 0;
    check_valid("qwen2_window_unused", &s,
                EDITS("use_sliding_window", "true", "sliding_window", "8", "max_window_layers", "2", "layer_types",
                      NULL),
                1);
    check_valid("qwen2_window_null", &s,
                EDITS("use_sliding_window", "true", "sliding_window", "null", "max_window_layers", "1", "layer_types",
                      NULL),
                1);
    s = QWEN3; /* layer_types says full attention: it is what transformers runs, use_sliding_window or not */
    check_valid("qwen3_window_layer_types", &s, EDITS("use_sliding_window", "true", "sliding_window", "8"), 1);
    s = QWEN3, s.model_type = "llama", s.qk_norm = 0, s.head_dim = HIDDEN / HEADS, s.write_head_dim = 0;
    s.old_form = 1;
    check_valid("llama", &s, NULL, 1);
    s.bias = s.o_bias = s.mlp_bias = 1; /* every bias Llama has */
    check_valid("llama_biases", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    s.bias = s.o_bias = 0; /* MLP biases only */
    check_valid("llama_mlp_bias", &s, EDITS("mlp_bias", "true"), 1);
    s.model_type = "mistral", s.mlp_bias = 0; /* Mistral has no biases: attention_bias is not read */
    check_valid("mistral", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    s.bias = s.o_bias = s.mlp_bias = 1; /* ... and bias tensors in the file are reported unused */
    check_valid("mistral_bias_tensors", &s, EDITS("attention_bias", "true", "mlp_bias", "true"), 1);
    s.bias = s.o_bias = s.mlp_bias = 0;
    check_valid("mistral_window", &s, EDITS("sliding_window", "64"), 1);
    s = QWEN3, s.dtype = "BF16"; /* unpadded header: every tensor's bytes are misaligned */
    check_valid("bf16_misaligned", &s, NULL, 0);
}

/* ---- F16 / BF16 conversion, bit for bit ----------------------------------------------------- */

static void le16(unsigned char *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[2 * i] = (unsigned char)in[i], out[2 * i + 1] = (unsigned char)(in[i] >> 8);
}

static uint32_t f32_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

/* Known patterns in the final norm (F16) and layer 0's input norm (BF16) of an F32 model. */
static void test_known_patterns(void) {
    static const uint16_t f16[HIDDEN] = {0x3c00, 0xc000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0x7c00,
                                         0xfc00, 0x7e00, 0x7c01, 0x8000, 0x0000, 0x3555, 0x0200, 0xfbff};
    static const uint32_t f16_want[HIDDEN] = {0x3f800000, 0xc0000000, 0x33800000, 0xb3800000, 0x387fc000, 0x38800000,
                                              0x477fe000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f802000, 0x80000000,
                                              0x00000000, 0x3eaaa000, 0x38000000, 0xc77fe000};
    static const uint16_t bf16[HIDDEN] = {0x3f80, 0xbf80, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0x7f80,
                                          0xff80, 0x7fc0, 0x7f81, 0x8000, 0x0000, 0x4049, 0x3eab, 0xc2f7};
    unsigned char bytes[2 * HIDDEN];
    uint64_t shape[1] = {HIDDEN};
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 7, &w);
    build_config(&QWEN3, &config);
    le16(bytes, f16, HIDDEN);
    stw_add(&w, "model.norm.weight", "F16", 1, shape, bytes, sizeof bytes);
    le16(bytes, bf16, HIDDEN);
    stw_add(&w, "model.layers.0.input_layernorm.weight", "BF16", 1, shape, bytes, sizeof bytes);
    write_checkpoint("patterns", &w, &config, 0);
    rmlp_model_config c;
    model_weights mw;
    skip_finite_check = true; /* the patterns hold infinities and NaN */
    rmlp_status status = load_all(at("patterns", ""), &c, &mw);
    skip_finite_check = false;
    if (CHECK(status == RMLP_OK, "patterns: %s", rmlp_last_error())) {
        for (int i = 0; i < HIDDEN; i++) {
            CHECK(f32_bits(mw.final_norm[i]) == f16_want[i], "f16 0x%04x -> 0x%08x, want 0x%08x", f16[i],
                  f32_bits(mw.final_norm[i]), f16_want[i]);
            CHECK(f32_bits(mw.layers[0].input_norm[i]) == (uint32_t)bf16[i] << 16, "bf16 0x%04x -> 0x%08x", bf16[i],
                  f32_bits(mw.layers[0].input_norm[i]));
        }
        check_values("patterns", mw.layers[1].input_norm, &w, "model.layers.1.input_layernorm.weight");
        weights_free(&mw, &c);
    }
    stw_free(&w);
    stw_json_free(&config);
}

/* All 65536 F16 values as the embedding (vocab 4096), against ldexp of sign, exponent, mantissa. */
static void test_f16_exhaustive(void) {
    enum { ROWS = 65536 / HIDDEN };
    spec s = QWEN3;
    s.lm_head = 0;
    stw w = {0};
    stw_json config = {0};
    build_tensors(&s, 9, &w);
    build_config(&s, &config);
    stw_json_set(&config, "vocab_size", "4096");
    uint16_t *all = tu_xmalloc(65536 * sizeof *all);
    unsigned char *bytes = tu_xmalloc(2 * 65536);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    le16(bytes, all, 65536);
    uint64_t shape[2] = {ROWS, HIDDEN};
    stw_add(&w, "model.embed_tokens.weight", "F16", 2, shape, bytes, 2 * 65536);
    write_checkpoint("f16_all", &w, &config, 1);
    rmlp_model_config c;
    model_weights mw;
    /* The first non-finite value, +inf (0x7c00), lies far past the audit's first chunk. */
    expect_fail("infinity in an F16 embedding", at("f16_all", ""), RMLP_ERR_MODEL,
                "tensor 'model.embed_tokens.weight' holds an infinity at element 31744 of 65536", NULL);
    skip_finite_check = true; /* all 65536 values: infinities and NaN too */
    rmlp_status status = load_all(at("f16_all", ""), &c, &mw);
    skip_finite_check = false;
    if (CHECK(status == RMLP_OK, "f16_all: %s", rmlp_last_error())) {
        int bad = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            uint32_t sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023, want;
            if (exp == 31)
                want = sign << 31 | 0x7f800000u | man << 13;
            else
                want = f32_bits((float)ldexp(exp ? 1024.0 + man : (double)man, (exp ? (int)exp : 1) - 25) *
                                (sign ? -1.0f : 1.0f));
            if (f32_bits(mw.embed[h]) != want && bad++ < 5)
                printf("    f16 0x%04x -> 0x%08x, want 0x%08x\n", h, f32_bits(mw.embed[h]), want);
        }
        CHECK(bad == 0, "%d of 65536 f16 values converted wrongly", bad);
        weights_free(&mw, &c);
    }
    free(all);
    free(bytes);
    stw_free(&w);
    stw_json_free(&config);
}

/* ---- sharded checkpoints and file paths ------------------------------------------------------- */

static const char *SHARD1 = "model-00001-of-00002.safetensors", *SHARD2 = "model-00002-of-00002.safetensors";

/* The QWEN3 model in two shards (the first `split` tensors, then the rest) with an index; the
 * weight map gets map_key set to map_value (raw JSON, NULL removes) when map_key is given, and
 * index_text (when given) replaces the whole index. */
static void write_sharded(const char *dir, const stw *w, const char *map_key, const char *map_value,
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

static void check_loads(const char *what, const char *path, const spec *s, const stw *w) {
    rmlp_model_config c;
    model_weights mw;
    rmlp_status status = load_all(path, &c, &mw);
    if (!CHECK(status == RMLP_OK, "%s: status %d: %s", what, status, rmlp_last_error())) return;
    check_weights(what, s, w, &c, &mw);
    weights_free(&mw, &c);
}

static void test_sharded_and_paths(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    write_sharded("sharded", &w, NULL, NULL, NULL);
    stw_json_write(&config, at("sharded", "config.json"));
    check_loads("sharded folder", at("sharded", ""), &QWEN3, &w);
    check_loads("index file", at("sharded", "model.safetensors.index.json"), &QWEN3, &w);
    write_checkpoint("by_file", &w, &config, 1);
    check_loads("safetensors file", at("by_file", "model.safetensors"), &QWEN3, &w);
    char slashes[600];
    snprintf(slashes, sizeof slashes, "%s//", at("by_file", ""));
    check_loads("folder with trailing slashes", slashes, &QWEN3, &w);
    /* Tensors a shard holds but the weight map lacks are loaded, as transformers loads every tensor
     * of the shards an index names, and reported: the LM head among them. */
    write_sharded("unindexed", &w, "lm_head.weight", NULL, NULL);
    stw_json_write(&config, at("unindexed", "config.json"));
    check_loads("an index without lm_head.weight (a shard holds it)", at("unindexed", ""), &QWEN3, &w);
    CHECK(report != NULL && strstr(report, "1 tensor of the shards is not in the index's weight_map, and found in its "
                                           "shard all the same") != NULL &&
              strstr(report, "'lm_head.weight' (") != NULL,
          "an index without lm_head.weight: report '%s'", report ? report : "(none)");
    stw_free(&w);
    stw_json_free(&config);
}

/* st_open_memory (the fuzzer's way in) on a file's bytes against st_open on the file: the same
 * table, with data inside the caller's buffer; for every cut of the file the same status and
 * message; st_close leaves the caller's bytes alone (ASan would see a free or unmap of them). */
static void test_open_memory(void) {
    stw w = {0};
    build_tensors(&QWEN3, 7, &w);
    const char *path = at("memory.safetensors", "");
    stw_write(&w, path, 0);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    if (f == NULL) return;
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc(len);
    CHECK(bytes != NULL && fread(bytes, 1, len, f) == len, "read %s", path);
    fclose(f);

    st_file *disk = NULL, *mem = NULL;
    CHECK(st_open(path, &disk) == RMLP_OK, "st_open: %s", rmlp_last_error());
    CHECK(st_open_memory(path, bytes, len, &mem) == RMLP_OK, "st_open_memory: %s", rmlp_last_error());
    if (disk != NULL && mem != NULL) {
        CHECK_EQ(st_count(mem), st_count(disk), "tensor count");
        CHECK(strcmp(st_path(mem), path) == 0, "st_path %s", st_path(mem));
        for (size_t i = 0; i < st_count(mem) && i < st_count(disk); i++) {
            const st_tensor *a = st_at(mem, i), *b = st_at(disk, i);
            const unsigned char *p = a->data;
            CHECK(strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
                      a->nbytes == b->nbytes && memcmp(a->shape, b->shape, sizeof a->shape) == 0,
                  "tensor %zu: '%s' vs '%s'", i, a->name, b->name);
            CHECK(p >= bytes && a->nbytes <= len && p - bytes <= (ptrdiff_t)(len - a->nbytes),
                  "tensor '%s' outside the caller's buffer", a->name);
            CHECK(memcmp(a->data, b->data, a->nbytes) == 0, "tensor '%s' bytes differ", a->name);
        }
    }
    st_close(mem);
    st_close(disk);

    /* Every cut of the header, and a few into the data: both ways give the same error. */
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | bytes[i];
    char mem_err[600];
    for (size_t cut = 0; cut < 8 + header_len + 16 && cut < len; cut++) {
        stw_write_bytes(path, bytes, cut);
        rmlp_status got_mem = st_open_memory(path, bytes, cut, &mem);
        snprintf(mem_err, sizeof mem_err, "%s", rmlp_last_error());
        rmlp_status got_disk = st_open(path, &disk);
        CHECK(got_mem == RMLP_ERR_FORMAT && mem == NULL && got_disk == got_mem && disk == NULL &&
                  strcmp(mem_err, rmlp_last_error()) == 0 && strstr(mem_err, path) != NULL,
              "cut at %zu: memory %d '%s', file %d '%s'", cut, got_mem, mem_err, got_disk, rmlp_last_error());
        st_close(mem);
        st_close(disk);
    }
    free(bytes);
    stw_free(&w);
}

/* ---- bad inputs ----------------------------------------------------------------------------- */

/* Loads path and checks the status and that the message starts with the function and names
 * msg and msg2 (when given). */
static void expect_fail(const char *what, const char *path, rmlp_status want, const char *msg, const char *msg2) {
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

static void test_bad_files(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    expect_fail("missing folder", at("no_such_folder", ""), RMLP_ERR_IO, "no_such_folder: No such file", NULL);
    st_file *file = (st_file *)&file;
    CHECK(st_open(at("no_such_file.safetensors", ""), &file) == RMLP_ERR_IO && file == NULL, "st_open: %s",
          rmlp_last_error());

    make_dir("short");
    stw_json_write(&config, at("short", "config.json"));
    stw_write_bytes(at("short", "model.safetensors"), "\x02\0\0\0\0", 5);
    expect_fail("file of 5 bytes", at("short", ""), RMLP_ERR_FORMAT, "short/model.safetensors: 5 bytes is shorter",
                NULL);
    stw_write_bytes(at("short", "model.safetensors"), "", 0);
    expect_fail("empty file", at("short", ""), RMLP_ERR_FORMAT, "short/model.safetensors: 0 bytes is shorter", NULL);

    make_dir("no_tensors");
    stw_json_write(&config, at("no_tensors", "config.json"));
    expect_fail("folder without tensors", at("no_tensors", ""), RMLP_ERR_IO,
                "no_tensors: holds neither model.safetensors nor model.safetensors.index.json", NULL);

    make_dir("no_config");
    stw_write(&w, at("no_config", "model.safetensors"), 1);
    expect_fail("config.json missing", at("no_config", ""), RMLP_ERR_IO, "no_config/config.json: No such file", NULL);
    expect_fail("config.json missing (file path)", at("no_config", "model.safetensors"), RMLP_ERR_IO,
                "no_config/config.json: No such file", NULL);

    /* Files that are FIFOs (no writer: opening one for reading would block forever) or folders. */
    make_dir("fifo_config");
    stw_write(&w, at("fifo_config", "model.safetensors"), 1);
    CHECK(mkfifo(at("fifo_config", "config.json"), 0600) == 0, "mkfifo config.json");
    expect_fail("config.json a FIFO", at("fifo_config", ""), RMLP_ERR_IO,
                "fifo_config/config.json: not a regular file", NULL);
    make_dir("fifo_index");
    stw_json_write(&config, at("fifo_index", "config.json"));
    CHECK(mkfifo(at("fifo_index", "model.safetensors.index.json"), 0600) == 0, "mkfifo index");
    expect_fail("model.safetensors.index.json a FIFO (opened by path)",
                at("fifo_index", "model.safetensors.index.json"), RMLP_ERR_IO,
                "fifo_index/model.safetensors.index.json: not a regular file", NULL);
    CHECK(mkfifo(at("fifo_index", "model.safetensors"), 0600) == 0, "mkfifo safetensors");
    expect_fail("model.safetensors a FIFO (opened by path)", at("fifo_index", "model.safetensors"), RMLP_ERR_IO,
                "fifo_index/model.safetensors: not a regular file", NULL);
    make_dir("dir_config");
    make_dir("dir_config/config.json");
    stw_write(&w, at("dir_config", "model.safetensors"), 1);
    expect_fail("config.json a folder", at("dir_config", ""), RMLP_ERR_IO, "dir_config/config.json: not a regular file",
                NULL);
    stw_free(&w);
    stw_json_free(&config);
}

typedef struct header_case {
    const char *name;
    const char *header;
    uint64_t header_len; /* 0: strlen(header) */
    uint64_t data_len;
    rmlp_status want;
    const char *msg;
} header_case;

#define T4 "\"dtype\":\"F32\",\"shape\":[4]"
static const header_case header_cases[] = {
    {"header length 0", "", 0, 64, RMLP_ERR_FORMAT, "header length 0 is too short"},
    {"header length 1", "{", 0, 64, RMLP_ERR_FORMAT, "header length 1 is too short"},
    {"header length beyond the file", "{}", 999999, 0, RMLP_ERR_FORMAT,
     "header length 999999 exceeds the file size 10"},
    {"header length over 100 MiB", "{}", 200u << 20, 201u << 20, RMLP_ERR_FORMAT,
     "header length 209715200 exceeds the limit of 104857600 bytes"},
    {"header not JSON", "{\"t\": ", 0, 64, RMLP_ERR_FORMAT, "header is not valid JSON"},
    {"header with trailing garbage", "{} x", 0, 64, RMLP_ERR_FORMAT, "header is not valid JSON"},
    {"header JSON not an object", "[1, 2]", 0, 64, RMLP_ERR_FORMAT, "header is an array, not a JSON object"},
    {"duplicate tensor", "{\"t\":{" T4 ",\"data_offsets\":[0,16]},\"t\":{" T4 ",\"data_offsets\":[16,32]}}", 0, 64,
     RMLP_ERR_FORMAT, "duplicate object key"},
    {"entry not an object", "{\"t\": 3}", 0, 64, RMLP_ERR_FORMAT, "tensor 't' is an integer, not an object"},
    {"missing dtype", "{\"t\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no string dtype"},
    {"missing shape", "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no shape array"},
    {"missing data_offsets", "{\"t\":{" T4 "}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no data_offsets array of 2 numbers"},
    {"data_offsets of 3", "{\"t\":{" T4 ",\"data_offsets\":[0,16,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no data_offsets array of 2 numbers"},
    {"unsupported dtype", "{\"t\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_MODEL,
     "tensor 't' has dtype I64, only F32, F16 and BF16 are supported"},
    {"shape x size != byte range", "{\"t\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': dtype F32 x shape [5] does not match data_offsets [0, 16] (16 bytes)"},
    {"shape product overflows",
     "{\"t\":{\"dtype\":\"BF16\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, 64,
     RMLP_ERR_FORMAT, "does not match data_offsets [0, 0]"},
    {"range past the end", "{\"t\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[0,128]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': data_offsets [0, 128] run past the end of the 64-byte data section"},
    {"overlapping tensors", "{\"a\":{" T4 ",\"data_offsets\":[0,16]},\"b\":{" T4 ",\"data_offsets\":[8,24]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensors 'a' and 'b' overlap"},
    {"tensor inside another",
     "{\"big\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},\"c\":{" T4 ",\"data_offsets\":[32,48]},"
     "\"d\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
     0, 64, RMLP_ERR_FORMAT, "tensors 'big' and 'd' overlap"},
    {"negative shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': shape[0] is not a non-negative integer"},
    {"fractional shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2.0],\"data_offsets\":[0,16]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': shape[1] is not a non-negative integer"},
    {"negative offset", "{\"t\":{" T4 ",\"data_offsets\":[-16,0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets are not non-negative integers"},
    {"fractional offset", "{\"t\":{" T4 ",\"data_offsets\":[0,16.0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets are not non-negative integers"},
    {"offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets [16, 0] begin after they end"},
    {"too many dimensions", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't' has 9 dimensions, at most 8 are supported"},
    {"__metadata__ not an object", "{\"__metadata__\": [\"pt\"]}", 0, 64, RMLP_ERR_FORMAT,
     "__metadata__ is an array, not an object"},
    {"__metadata__ value not a string", "{\"__metadata__\": {\"format\": 1}}", 0, 64, RMLP_ERR_FORMAT,
     "__metadata__ 'format' is an integer, not a string"},
    {"trailing bytes after the last tensor", "{\"t\":{" T4 ",\"data_offsets\":[0,16]}}", 0, 17, RMLP_ERR_FORMAT,
     "1 trailing byte after the last tensor 't' (the tensors end at byte 16 of the 17-byte data section)"},
    {"data section without tensors", "{\"__metadata__\": {\"format\": \"pt\"}}", 0, 8, RMLP_ERR_FORMAT,
     "8 trailing bytes after a header without tensors"},
    {"gap between tensors", "{\"b\":{" T4 ",\"data_offsets\":[20,36]},\"a\":{" T4 ",\"data_offsets\":[0,16]}}", 0, 36,
     RMLP_ERR_FORMAT, "bytes [16, 20) of the data section, before tensor 'b', belong to no tensor"},
    {"first tensor not at offset 0", "{\"t\":{" T4 ",\"data_offsets\":[8,24]}}", 0, 24, RMLP_ERR_FORMAT,
     "bytes [0, 8) of the data section, before tensor 't', belong to no tensor"},
    {"empty tensor inside another",
     "{\"a\":{" T4 ",\"data_offsets\":[0,16]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 0,
     16, RMLP_ERR_FORMAT, "tensors 'a' and 'e' overlap"},
};

static void test_bad_headers(void) {
    stw_json config = {0};
    build_config(&QWEN3, &config);
    make_dir("header");
    stw_json_write(&config, at("header", "config.json"));
    for (size_t i = 0; i < sizeof header_cases / sizeof header_cases[0]; i++) {
        const header_case *h = &header_cases[i];
        stw_write_raw(at("header", "model.safetensors"), h->header_len ? h->header_len : strlen(h->header), h->header,
                      h->data_len);
        expect_fail(h->name, at("header", ""), h->want, h->msg, "header/model.safetensors: ");
    }
    /* A valid header with no tensors opens (and then lacks the embedding). */
    stw_write_raw(at("header", "model.safetensors"), 2, "{}", 0);
    expect_fail("no tensors", at("header", ""), RMLP_ERR_MODEL, "missing tensor 'model.embed_tokens.weight'", NULL);
    stw_json_free(&config);
}

typedef struct config_case {
    const char *name;
    const char *key, *value, *key2, *value2; /* raw JSON values; NULL removes the key */
    rmlp_status want;
    const char *msg;
} config_case;

static const config_case config_cases[] = {
    {"missing vocab_size", "vocab_size", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'vocab_size'"},
    {"missing max_position_embeddings", "max_position_embeddings", NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing key 'max_position_embeddings'"},
    {"null num_hidden_layers", "num_hidden_layers", "null", NULL, NULL, RMLP_ERR_MODEL,
     "missing key 'num_hidden_layers'"},
    {"missing model_type", "model_type", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'model_type'"},
    {"hidden_size a string", "hidden_size", "\"16\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' is a string, not an integer"},
    {"hidden_size fractional", "hidden_size", "16.5", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' is a fractional number, not an integer"},
    {"hidden_size 0", "hidden_size", "0", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_size' = 0 is not between 1 and 2^32-1"},
    {"hidden_size negative", "hidden_size", "-16", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_size' = -16 is not between"},
    {"hidden_size 2^32", "hidden_size", "4294967296", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' = 4294967296 is not between"},
    {"model_type a number", "model_type", "3", NULL, NULL, RMLP_ERR_FORMAT, "'model_type' is an integer, not a string"},
    {"unsupported model_type", "model_type", "\"gpt2\"", NULL, NULL, RMLP_ERR_MODEL,
     "model_type 'gpt2' is not supported"},
    {"rope_scaling", "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}", NULL, NULL, RMLP_ERR_MODEL,
     "rope_scaling is not supported"},
    {"hidden_act gelu", "hidden_act", "\"gelu\"", NULL, NULL, RMLP_ERR_MODEL, "hidden_act 'gelu' is not supported"},
    {"hidden_act a number", "hidden_act", "1", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_act' is an integer, not a string"},
    {"hidden_act null", "hidden_act", "null", NULL, NULL, RMLP_ERR_MODEL,
     "config/config.json: hidden_act is null (transformers builds no activation from it; only silu is supported)"},
    {"use_sliding_window (Llama)", "use_sliding_window", "true", "model_type", "\"llama\"", RMLP_ERR_MODEL,
     "use_sliding_window true is not supported"},
    {"layer_types shorter than num_hidden_layers", "layer_types", "[\"full_attention\"]", NULL, NULL, RMLP_ERR_MODEL,
     "layer_types has 1 entries but num_hidden_layers is 2"},
    {"layer_types longer than num_hidden_layers", "layer_types", "[\"full_attention\", \"full_attention\"]",
     "num_hidden_layers", "1", RMLP_ERR_MODEL, "layer_types has 2 entries but num_hidden_layers is 1"},
    {"mlp_bias a string", "mlp_bias", "\"true\"", NULL, NULL, RMLP_ERR_FORMAT, "'mlp_bias' is a string, not a boolean"},
    {"use_sliding_window a string", "use_sliding_window", "\"no\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'use_sliding_window' is a string, not a boolean"},
    {"tie_word_embeddings a string", "tie_word_embeddings", "\"true\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'tie_word_embeddings' is a string, not a boolean"},
    {"attention_bias a number", "attention_bias", "0", NULL, NULL, RMLP_ERR_FORMAT,
     "'attention_bias' is an integer, not a boolean"},
    {"kv heads do not divide heads", "num_key_value_heads", "3", NULL, NULL, RMLP_ERR_MODEL,
     "num_key_value_heads 3 does not divide num_attention_heads 4"},
    {"head_dim not derivable", "head_dim", "null", "num_attention_heads", "6", RMLP_ERR_MODEL,
     "no head_dim, and hidden_size 16 is not a multiple of num_attention_heads 6"},
    {"head_dim a string", "head_dim", "\"8\"", NULL, NULL, RMLP_ERR_FORMAT, "'head_dim' is a string, not an integer"},
    {"missing rms_norm_eps", "rms_norm_eps", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'rms_norm_eps'"},
    {"rms_norm_eps a string", "rms_norm_eps", "\"1e-6\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'rms_norm_eps' is a string, not a number"},
    {"rms_norm_eps negative", "rms_norm_eps", "-1", NULL, NULL, RMLP_ERR_FORMAT, "'rms_norm_eps' = -1 is not positive"},
    {"rope_theta 0", "rope_theta", "0.0", NULL, NULL, RMLP_ERR_FORMAT, "'rope_theta' = 0 is not positive"},
    {"rope_parameters yarn", "rope_parameters", "{\"rope_theta\": 1e6, \"rope_type\": \"yarn\", \"factor\": 4}", NULL,
     NULL, RMLP_ERR_MODEL, "rope_parameters.rope_type 'yarn' is not supported"},
    {"rope_parameters theta a string", "rope_parameters", "{\"rope_theta\": \"1e6\"}", NULL, NULL, RMLP_ERR_FORMAT,
     "'rope_parameters.rope_theta' is a string, not a number"},
    {"rope_parameters an array", "rope_parameters", "[]", NULL, NULL, RMLP_ERR_FORMAT,
     "'rope_parameters' is an array, not an object"},
    {"sliding attention layer", "layer_types", "[\"full_attention\", \"sliding_attention\"]", NULL, NULL,
     RMLP_ERR_MODEL, "layer_types[1] is not \"full_attention\""},
    /* Sizes that disagree with the tensors are the weights' to report. */
    {"vocab_size disagrees with the embedding", "vocab_size", "31", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.embed_tokens.weight' has shape [32, 16], config.json calls for [31, 16]"},
    {"head_dim disagrees with q_proj", "head_dim", "4", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [32, 16], config.json calls for [16, 16]"},
};

static void test_bad_configs(void) {
    stw w = {0};
    stw_json base = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &base);
    write_checkpoint("config", &w, &base, 1);
    const char *path = at("config", "config.json");
    char path_copy[512];
    snprintf(path_copy, sizeof path_copy, "%s", path);
    for (size_t i = 0; i < sizeof config_cases / sizeof config_cases[0]; i++) {
        const config_case *k = &config_cases[i];
        stw_json config;
        stw_json_copy(&config, &base);
        stw_json_set(&config, k->key, k->value);
        if (k->key2) stw_json_set(&config, k->key2, k->value2);
        stw_json_write(&config, path_copy);
        expect_fail(k->name, at("config", ""), k->want, k->msg,
                    strncmp(k->msg, "tensor", 6) == 0 ? NULL : "config/config.json: ");
        stw_json_free(&config);
    }
    /* Qwen's sliding layers as transformers derives them without layer_types (three edits each). */
    static const struct {
        const char *name, *max_window_layers, *msg;
        rmlp_status want;
    } sliding[] = {
        {"use_sliding_window with a layer at or past max_window_layers", "1",
         "use_sliding_window is true and max_window_layers 1 < num_hidden_layers 2: layers 1.. would use a sliding "
         "window of 4096", RMLP_ERR_MODEL},
        {"use_sliding_window, max_window_layers a string", "\"2\"", "'max_window_layers' is a string, not an integer",
         RMLP_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof sliding / sizeof sliding[0]; i++) {
        stw_json config;
        stw_json_copy(&config, &base);
        stw_json_set(&config, "use_sliding_window", "true");
        stw_json_set(&config, "layer_types", NULL);
        stw_json_set(&config, "sliding_window", NULL); /* absent: transformers' default, 4096 */
        stw_json_set(&config, "max_window_layers", sliding[i].max_window_layers);
        stw_json_write(&config, path_copy);
        expect_fail(sliding[i].name, at("config", ""), sliding[i].want, sliding[i].msg, "config/config.json: ");
        stw_json_free(&config);
    }
    static const struct {
        const char *name, *text, *msg;
    } texts[] = {
        {"config.json not JSON", "{\"model_type\": ", "config/config.json: not valid JSON"},
        {"config.json an array", "[{\"model_type\": \"qwen3\"}]", "config/config.json: not a JSON object"},
        {"config.json repeats a key", "{\"model_type\": \"qwen3\", \"model_type\": \"qwen2\"}",
         "config/config.json: not valid JSON: duplicate object key"},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        stw_write_bytes(path_copy, texts[i].text, strlen(texts[i].text));
        expect_fail(texts[i].name, at("config", ""), RMLP_ERR_FORMAT, texts[i].msg, NULL);
    }
    rmlp_model_config c;
    memset(&c, 0xff, sizeof c);
    CHECK(config_read(path_copy, &c) == RMLP_ERR_FORMAT && c.hidden_size == 0, "config not cleared on error");

    /* Defaults: rope_theta 10000, num_key_value_heads = heads, no tie, no bias (Llama). */
    stw_json config;
    stw_json_copy(&config, &base);
    const char *absent[] = {"rope_parameters", "num_key_value_heads", "tie_word_embeddings",
                            "hidden_act",      "use_sliding_window",  "layer_types"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) stw_json_set(&config, absent[i], NULL);
    stw_json_set(&config, "model_type", "\"llama\"");
    stw_json_write(&config, path_copy);
    rmlp_status status = config_read(path_copy, &c);
    CHECK(status == RMLP_OK && c.rope_theta == 10000.0 && c.num_key_value_heads == HEADS && !c.tie_word_embeddings &&
              !c.attention_bias && !c.qk_norm && !c.has_lm_head,
          "defaults: status %d theta %g kv %u: %s", status, c.rope_theta, c.num_key_value_heads, rmlp_last_error());
    stw_json_free(&config);
    stw_free(&w);
    stw_json_free(&base);
}

typedef struct tensor_case {
    const char *name;
    const char *remove; /* a tensor to remove, when given */
    const char *tensor; /* a tensor to add or replace, when given: zeros of (rows[, cols]) in dtype */
    uint64_t rows, cols;
    const char *dtype;
    const char *key, *value; /* config.json edit, when key is given */
    rmlp_status want;
    const char *msg, *msg2;
} tensor_case;

static const tensor_case tensor_cases[] = {
    {"missing up_proj", "model.layers.1.mlp.up_proj.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.layers.1.mlp.up_proj.weight'", NULL},
    {"missing embedding", "model.embed_tokens.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.embed_tokens.weight'", NULL},
    {"missing q_norm (Qwen3)", "model.layers.0.self_attn.q_norm.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_norm.weight'", NULL},
    {"missing bias (Qwen2)", NULL, NULL, 0, 0, NULL, "model_type", "\"qwen2\"", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_proj.bias'", NULL},
    {"k_proj rows", NULL, "model.layers.0.self_attn.k_proj.weight", 17, HIDDEN, "F32", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [17, 16], config.json calls for [16, 16]", NULL},
    {"o_proj transposed", NULL, "model.layers.1.self_attn.o_proj.weight", 32, HIDDEN, "F32", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.1.self_attn.o_proj.weight' has shape [32, 16], config.json calls for [16, 32]", NULL},
    {"embedding with an extra row", NULL, "model.embed_tokens.weight", VOCAB + 1, HIDDEN, "BF16", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.embed_tokens.weight' has shape [33, 16], config.json calls for [32, 16]", NULL},
    {"norm of 2 dimensions", NULL, "model.layers.0.self_attn.k_norm.weight", 1, HEAD_DIM, "F32", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.layers.0.self_attn.k_norm.weight' has shape [1, 8], config.json calls for [8]",
     NULL},
    {"lm_head shape", NULL, "lm_head.weight", VOCAB, HIDDEN + 1, "F16", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'lm_head.weight' has shape [32, 17], config.json calls for [32, 16]", NULL},
    {"intermediate_size disagrees", NULL, NULL, 0, 0, NULL, "intermediate_size", "25", RMLP_ERR_MODEL,
     "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [24, 16], config.json calls for [25, 16]", NULL},
    {"more layers than written", NULL, NULL, 0, 0, NULL, "num_hidden_layers", "3", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.2.input_layernorm.weight'", NULL},
    {"unsupported dtype in an unused tensor", NULL, "model.rotary_emb.inv_freq", 4, 0, "I64", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.rotary_emb.inv_freq' has dtype I64", "tensors/model.safetensors: "},
    {"mixed prefixes", "model.embed_tokens.weight", "embed_tokens.weight", VOCAB, HIDDEN, "F32", NULL, NULL,
     RMLP_ERR_MODEL, "missing tensor 'norm.weight'", NULL},
    {"missing bias (Qwen3 attention_bias)", NULL, NULL, 0, 0, NULL, "attention_bias", "true", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_proj.bias'", NULL},
};

static void test_bad_tensors(void) {
    stw_json base = {0};
    build_config(&QWEN3, &base);
    stw_json_set(&base, "layer_types", NULL); /* so num_hidden_layers may change alone */
    for (size_t i = 0; i < sizeof tensor_cases / sizeof tensor_cases[0]; i++) {
        const tensor_case *k = &tensor_cases[i];
        stw w = {0};
        stw_json config;
        build_tensors(&QWEN3, 42, &w);
        stw_json_copy(&config, &base);
        if (k->key) stw_json_set(&config, k->key, k->value);
        if (k->remove) CHECK(stw_remove(&w, k->remove), "%s: no %s to remove", k->name, k->remove);
        if (k->tensor) {
            uint64_t shape[2] = {k->rows, k->cols};
            size_t size = strcmp(k->dtype, "F32") == 0 ? 4 : strcmp(k->dtype, "I64") == 0 ? 8 : 2;
            stw_add(&w, k->tensor, k->dtype, k->cols ? 2 : 1, shape, NULL, size * k->rows * (k->cols ? k->cols : 1));
        }
        write_checkpoint("tensors", &w, &config, 1);
        expect_fail(k->name, at("tensors", ""), k->want, k->msg, k->msg2);
        stw_free(&w);
        stw_json_free(&config);
    }
    stw_json_free(&base);
}

/* A Llama checkpoint with every bias (attention_bias and mlp_bias): each bias is required. */
static void test_missing_biases(void) {
    spec s = QWEN3;
    s.model_type = "llama", s.qk_norm = 0, s.bias = s.o_bias = s.mlp_bias = 1;
    static const char *const removed[] = {"model.layers.1.self_attn.o_proj.bias", "model.layers.0.mlp.up_proj.bias",
                                          "model.layers.1.mlp.down_proj.bias"};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        stw w = {0};
        stw_json config = {0};
        build_tensors(&s, 42, &w);
        build_config(&s, &config);
        stw_json_set(&config, "attention_bias", "true");
        stw_json_set(&config, "mlp_bias", "true");
        CHECK(stw_remove(&w, removed[i]), "no %s to remove", removed[i]);
        write_checkpoint("biases", &w, &config, 1);
        char what[128], msg[96];
        snprintf(what, sizeof what, "missing %s (Llama, attention_bias and mlp_bias)", removed[i]);
        snprintf(msg, sizeof msg, "missing tensor '%s'", removed[i]);
        expect_fail(what, at("biases", ""), RMLP_ERR_MODEL, msg, NULL);
        stw_free(&w);
        stw_json_free(&config);
    }
}

/* A NaN or infinity in a weight the model uses is refused, naming the tensor and the element,
 * in every dtype; extreme finite values pass; skip_finite_check loads them; a tensor the model
 * does not use is not checked. */
static void test_not_finite(void) {
    static const struct {
        const char *name, *dtype, *tensor;
        uint32_t bits; /* the bad value */
        uint64_t at;   /* its element */
        const char *msg;
    } cases[] = {
        {"NaN in an F32 weight", "F32", "model.layers.1.mlp.down_proj.weight", 0x7fc00000u, 37,
         "tensor 'model.layers.1.mlp.down_proj.weight' holds NaN at element 37 of 384"},
        {"infinity in a BF16 norm", "BF16", "model.layers.0.self_attn.k_norm.weight", 0x7f80u, 0,
         "tensor 'model.layers.0.self_attn.k_norm.weight' holds an infinity at element 0 of 8"},
        {"-infinity in an F16 lm_head (last element)", "F16", "lm_head.weight", 0xfc00u, VOCAB * HIDDEN - 1,
         "tensor 'lm_head.weight' holds an infinity at element 511 of 512"},
        {"NaN in a BF16 q_proj bias", "BF16", "model.layers.1.self_attn.q_proj.bias", 0xffc1u, 5,
         "tensor 'model.layers.1.self_attn.q_proj.bias' holds NaN at element 5 of 32"},
    };
    /* Finite extremes: largest, smallest subnormal, negative zero; and the bad values' neighbours. */
    static const uint32_t f32_ok[] = {0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x80000000u, 0x7f000000u, 0x3f800000u};
    static const uint16_t bf16_ok[] = {0x7f7fu, 0xff7fu, 0x0001u, 0x8000u, 0x7f00u, 0x3f80u};
    static const uint16_t f16_ok[] = {0x7bffu, 0xfbffu, 0x0001u, 0x8000u, 0x7800u, 0x3c00u};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spec s = QWEN3;
        s.model_type = "qwen2", s.qk_norm = 0, s.bias = 1;
        if (strstr(cases[i].tensor, "norm.weight") != NULL) s = QWEN3;
        stw w = {0};
        stw_json config = {0};
        build_tensors(&s, 42, &w);
        build_config(&s, &config);
        stw_tensor *t = stw_find(&w, cases[i].tensor);
        if (!CHECK(t != NULL, "no %s", cases[i].tensor)) continue;
        uint64_t n = 1, size = strcmp(cases[i].dtype, "F32") == 0 ? 4 : 2;
        for (uint32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
        unsigned char *data = tu_xmalloc(n * size);
        for (uint64_t e = 0; e < n; e++) {
            uint32_t v = size == 4                                ? f32_ok[e % 6]
                         : strcmp(cases[i].dtype, "BF16") == 0 ? bf16_ok[e % 6]
                                                                : f16_ok[e % 6];
            if (e == cases[i].at) v = cases[i].bits;
            memcpy(data + e * size, &v, size); /* little-endian: the low bytes */
        }
        uint64_t shape[2] = {t->shape[0], t->shape[1]};
        stw_add(&w, cases[i].tensor, cases[i].dtype, t->ndim, shape, data, n * size);
        /* The same bad value in a tensor the model does not use is not looked at. */
        stw_add(&w, "model.rotary_emb.inv_freq", cases[i].dtype, t->ndim, shape, data, n * size);
        write_checkpoint("not_finite", &w, &config, 1);
        expect_fail(cases[i].name, at("not_finite", ""), RMLP_ERR_MODEL, cases[i].msg, NULL);
        data[cases[i].at * size + size - 1] ^= 0x40; /* clear the top exponent bit: finite */
        stw_add(&w, cases[i].tensor, cases[i].dtype, t->ndim, shape, data, n * size);
        write_checkpoint("not_finite", &w, &config, 1);
        rmlp_model_config c;
        model_weights mw;
        rmlp_status status = load_all(at("not_finite", ""), &c, &mw);
        CHECK(status == RMLP_OK, "%s, made finite: %s", cases[i].name, rmlp_last_error());
        if (status == RMLP_OK) weights_free(&mw, &c);
        free(data);
        stw_free(&w);
        stw_json_free(&config);
    }
}

/* Tensors the model does not use load, and the report names them. */
static void test_unused(void) {
    static const struct {
        const char *name, *key, *value; /* config.json edit */
        const char *extra;              /* a tensor added to the checkpoint, when given */
        const char *want[3];            /* in the report */
    } cases[] = {
        {"config with fewer layers than the checkpoint", "num_hidden_layers", "1", NULL,
         {"11 tensors of the checkpoint are not used by a qwen3 model of 1 layer as",
          "'model.layers.1.input_layernorm.weight', 'model.layers.1.mlp.down_proj.weight'", " and 3 more\n"}},
        {"model_type llama on a Qwen3 checkpoint", "model_type", "\"llama\"", NULL,
         {"4 tensors of the checkpoint are not used by a llama model of 2 layers",
          "'model.layers.0.self_attn.k_norm.weight', 'model.layers.0.self_attn.q_norm.weight', "
          "'model.layers.1.self_attn.k_norm.weight', 'model.layers.1.self_attn.q_norm.weight'\n",
          NULL}},
        {"a layer number spelt with a leading zero", NULL, NULL, "model.layers.01.input_layernorm.weight",
         {"1 tensor of the checkpoint is not used by a qwen3 model of 2 layers",
          ": 'model.layers.01.input_layernorm.weight'\n", NULL}},
        {"another prefix", NULL, NULL, "layers.0.input_layernorm.weight",
         {": 'layers.0.input_layernorm.weight'\n", NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stw w = {0};
        stw_json config = {0};
        build_tensors(&QWEN3, 42, &w);
        build_config(&QWEN3, &config);
        stw_json_set(&config, "layer_types", NULL); /* so num_hidden_layers may change alone */
        if (cases[i].key) stw_json_set(&config, cases[i].key, cases[i].value);
        if (cases[i].extra) stw_add(&w, cases[i].extra, "F32", 1, (const uint64_t[]){HIDDEN}, NULL, 4 * HIDDEN);
        write_checkpoint("unused", &w, &config, 1);
        rmlp_model_config c;
        model_weights mw;
        rmlp_status status = load_all(at("unused", ""), &c, &mw);
        if (!CHECK(status == RMLP_OK, "%s: %s", cases[i].name, rmlp_last_error())) continue;
        for (int k = 0; k < 3 && cases[i].want[k] != NULL; k++)
            CHECK(report != NULL && strstr(report, cases[i].want[k]) != NULL, "%s: report '%s' lacks '%s'",
                  cases[i].name, report ? report : "(none)", cases[i].want[k]);
        weights_free(&mw, &c);
        stw_free(&w);
        stw_json_free(&config);
    }
}

/* The same through the exported entry points: params.skip_finite_check and rmlp_model_load_report. */
static void test_public_api(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    stw_find(&w, "model.norm.weight")->data[3] = 0x7f, stw_find(&w, "model.norm.weight")->data[2] = 0xc0; /* NaN */
    stw_json_set(&config, "num_hidden_layers", "1");
    stw_json_set(&config, "layer_types", NULL);
    write_checkpoint("public", &w, &config, 1);
    rmlp_model *model = (rmlp_model *)&model;
    rmlp_model_params params = rmlp_model_default_params();
    CHECK(!params.skip_finite_check, "the finite check is off by default");
    CHECK(rmlp_model_load(at("public", ""), &params, &model) == RMLP_ERR_MODEL && model == NULL &&
              strstr(rmlp_last_error(), "tensor 'model.norm.weight' holds NaN at element 0 of 16") != NULL,
          "NaN through rmlp_model_load: %s", rmlp_last_error());
    params.skip_finite_check = true;
    const char *text = NULL;
    if (CHECK(rmlp_model_load(at("public", ""), &params, &model) == RMLP_OK, "skip_finite_check: %s",
              rmlp_last_error())) {
        CHECK(rmlp_model_load_report(model, &text) == RMLP_OK && text != NULL &&
                  strstr(text, "11 tensors of the checkpoint are not used") != NULL,
              "report '%s'", text ? text : "(null)");
        rmlp_model_free(model);
    }
    stw_json_set(&config, "num_hidden_layers", "2");
    write_checkpoint("public", &w, &config, 1);
    if (CHECK(rmlp_model_load(at("public", ""), &params, &model) == RMLP_OK, "%s", rmlp_last_error())) {
        text = NULL;
        CHECK(rmlp_model_load_report(model, &text) == RMLP_OK && text != NULL && text[0] == '\0', "report '%s'",
              text ? text : "(null)");
        rmlp_model_free(model);
    }
    rmlp_status status = rmlp_model_load_report(NULL, &text);
    tu_record_bad_input("model NULL", status, rmlp_last_error());
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(rmlp_last_error(), "rmlp_model_load_report: ") != NULL,
          "NULL model: %d %s", status, rmlp_last_error());
    stw_free(&w);
    stw_json_free(&config);
}

/* Finite weights whose output overflows fp32 (a final norm of 3e38): every CPU forward says so, with
 * RMLP_ERR_MODEL naming the first row, cached or not, batch rows or compact rows. */
static void test_not_finite_output(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    stw_tensor *norm = stw_find(&w, "model.norm.weight");
    for (size_t i = 0; i < HIDDEN; i++) memcpy(norm->data + 4 * i, &(float){3e38f}, 4);
    write_checkpoint("overflow", &w, &config, 1);
    static const uint32_t ids[6] = {1, 2, 3, 1, 2, 4}, pos[6] = {0, 1, 2, 0, 1, 2}, cu[3] = {0, 3, 6};
    rmlp_model *model = NULL;
    rmlp_context *plain = NULL, *cached = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 0);
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = 1u << 20;
    float out[6 * HIDDEN];
    if (CHECK(rmlp_model_load(at("overflow", ""), NULL, &model) == RMLP_OK &&
                  rmlp_context_create(model, 6, &plain) == RMLP_OK &&
                  rmlp_context_create_with_params(model, 6, &cp, &cached) == RMLP_OK &&
                  rmlp_planner_create(&planner) == RMLP_OK &&
                  rmlp_plan_build(planner, ids, pos, 6, cu, 2, &pp, &plan) == RMLP_OK,
              "a model with a final norm of 3e38 loads (its weights are finite): %s", rmlp_last_error())) {
        for (int k = 0; k < 4; k++) {
            rmlp_context *ctx = k < 2 ? plain : cached;
            bool compact = k % 2 == 1;
            rmlp_status status = compact ? rmlp_forward_compact(ctx, &plan, NULL, NULL, out)
                                         : rmlp_forward(ctx, &plan, NULL, NULL, out);
            const char *msg = rmlp_last_error();
            if (k < 2) tu_record_bad_input("weights that overflow fp32 (a final norm of 3e38)", status, msg);
            CHECK(status == RMLP_ERR_MODEL && strstr(msg, compact ? "the output is not finite: compact row 0 holds "
                                                                    "an infinity at element "
                                                                  : "the output is not finite: batch row 0 holds an "
                                                                    "infinity at element ") != NULL,
                  "%s forward%s: status %d, message '%s'", compact ? "compact" : "batch-row",
                  k < 2 ? "" : " (cached)", status, msg);
        }
    }
    rmlp_planner_free(planner);
    rmlp_context_free(plain);
    rmlp_context_free(cached);
    rmlp_model_free(model);
    stw_free(&w);
    stw_json_free(&config);
}

typedef struct index_case {
    const char *name;
    const char *map_key, *map_value; /* weight_map edit (raw JSON; NULL removes) */
    const char *index_text;          /* replaces the index, when given */
    rmlp_status want;
    const char *msg, *msg2;
} index_case;

static const index_case index_cases[] = {
    {"index names a missing shard", "model.norm.weight", "\"model-00003-of-00003.safetensors\"", NULL, RMLP_ERR_IO,
     "index/model-00003-of-00003.safetensors: No such file", NULL},
    {"shard name with '/'", "model.norm.weight", "\"../by_file/model.safetensors\"", NULL, RMLP_ERR_FORMAT,
     "weight_map['model.norm.weight'] = '../by_file/model.safetensors' is not a file name in the checkpoint's folder",
     "index/model.safetensors.index.json: "},
    {"empty shard name", "model.norm.weight", "\"\"", NULL, RMLP_ERR_FORMAT, "weight_map['model.norm.weight'] = ''",
     NULL},
    {"shard name not a string", "model.norm.weight", "3", NULL, RMLP_ERR_FORMAT,
     "weight_map['model.norm.weight'] is an integer, not a file name", NULL},
    {"tensor not in its shard", "model.embed_tokens.weight", "\"model-00002-of-00002.safetensors\"", NULL,
     RMLP_ERR_MODEL, "weight_map puts tensor 'model.embed_tokens.weight' in ", "model-00002-of-00002.safetensors"},
    {"a tensor in two shards", "duplicate", NULL, NULL, RMLP_ERR_MODEL, "tensor 'model.embed_tokens.weight' is in "
     "both model-00001-of-00002.safetensors and model-00002-of-00002.safetensors (weight_map names "
     "model-00001-of-00002.safetensors); a checkpoint holds each tensor once", NULL},
    {"index not JSON", NULL, NULL, "{\"weight_map\": {", RMLP_ERR_FORMAT,
     "index/model.safetensors.index.json: not valid JSON", NULL},
    {"index without weight_map", NULL, NULL, "{\"metadata\": {}}", RMLP_ERR_FORMAT,
     "index/model.safetensors.index.json: no weight_map object", NULL},
    {"weight_map an array", NULL, NULL, "{\"weight_map\": []}", RMLP_ERR_FORMAT, "no weight_map object", NULL},
};

static void test_bad_index(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    for (size_t i = 0; i < sizeof index_cases / sizeof index_cases[0]; i++) {
        const index_case *k = &index_cases[i];
        write_sharded("index", &w, k->map_key, k->map_value, k->index_text);
        stw_json_write(&config, at("index", "config.json"));
        expect_fail(k->name, at("index", ""), k->want, k->msg, k->msg2);
    }
    stw_free(&w);
    stw_json_free(&config);
}

int main(void) {
    root = stw_mkdtemp();
    tu_scrub_dir = root;
    test_valid();
    test_known_patterns();
    test_f16_exhaustive();
    test_sharded_and_paths();
    test_open_memory();
    test_bad_files();
    test_bad_headers();
    test_bad_configs();
    test_bad_tensors();
    test_missing_biases();
    test_not_finite();
    test_unused();
    test_public_api();
    test_not_finite_output();
    test_bad_index();
    free(report);
    stw_rmtree(root);
    free(root);
    return tu_summary();
}
