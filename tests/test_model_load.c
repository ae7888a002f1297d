/*
 * test_model_load.c: the model loader (model/) on valid checkpoints this test writes with
 * st_writer into a temporary folder (model_load_writer.h). Tiny models (Qwen3 with and without
 * the "model." prefix, tied, untied and headless, Qwen2 with biases, Llama/Mistral, BF16 with a
 * misaligned data section, sharded, opened by file path or from memory) load with every value
 * checked against the tensors written, q/k/v and gate/up stacked; F16 and BF16 conversions are
 * checked bit for bit on known patterns (subnormals, infinities, NaN); tensors a checkpoint has
 * and the model does not use are reported. The bad inputs are test_model_load_bad.c's. Run under
 * ASan/LSan, this also checks that no error path leaks.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "model_load_writer.h"

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

/* got[0 ..) equals the written tensor's values plus `plus` (0, or 1 for Gemma's norm weights, held
 * as the fp32 sum 1 + w GemmaRMSNorm forms) bit for bit. */
static void check_plus(const char *what, const float *got, const stw *w, const char *name, float plus) {
    const stw_tensor *t = stw_find(w, name);
    if (!CHECK(t != NULL && got != NULL, "%s: %s", what, name)) return;
    uint64_t n = t->nbytes / (strcmp(t->dtype, "BF16") == 0 ? 2 : 4), bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        float want = decode(t, i) + plus;
        if (memcmp(&got[i], &want, 4) != 0 && bad++ == 0)
            printf("    %s: %s[%llu] = %g, want %g\n", what, name, (unsigned long long)i, got[i], want);
    }
    CHECK(bad == 0, "%s: %llu values of %s differ", what, (unsigned long long)bad, name);
}

static void check_values(const char *what, const float *got, const stw *w, const char *name) {
    check_plus(what, got, w, name, 0.0f);
}

static void check_weights(const char *what, const spec *s, const stw *w, const rmlp_model_config *c,
                          const model_weights *mw) {
    uint64_t q = (uint64_t)HEADS * s->head_dim * HIDDEN, kv = (uint64_t)KV_HEADS * s->head_dim * HIDDEN;
    float plus = is_gemma(s) ? 1.0f : 0.0f; /* norms: Gemma's 1 + w */
    check_values(what, mw->embed, w, tensor_name(s, -1, "embed_tokens.weight"));
    check_plus(what, mw->final_norm, w, tensor_name(s, -1, "norm.weight"), plus);
    for (int i = 0; i < LAYERS; i++) {
        const layer_weights *l = &mw->layers[i];
        check_plus(what, l->input_norm, w, tensor_name(s, i, "input_layernorm.weight"), plus);
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
            check_plus(what, l->q_norm, w, tensor_name(s, i, "self_attn.q_norm.weight"), plus);
            check_plus(what, l->k_norm, w, tensor_name(s, i, "self_attn.k_norm.weight"), plus);
        } else {
            CHECK(l->q_norm == NULL && l->k_norm == NULL, "%s: layer %d has q/k norms", what, i);
        }
        check_values(what, l->o_proj, w, tensor_name(s, i, "self_attn.o_proj.weight"));
        if (s->sandwich) { /* Gemma 2: the attention output's norm, then the MLP's around it */
            check_plus(what, l->attn_out_norm, w, tensor_name(s, i, "post_attention_layernorm.weight"), plus);
            check_plus(what, l->post_norm, w, tensor_name(s, i, "pre_feedforward_layernorm.weight"), plus);
            check_plus(what, l->mlp_out_norm, w, tensor_name(s, i, "post_feedforward_layernorm.weight"), plus);
        } else {
            check_plus(what, l->post_norm, w, tensor_name(s, i, "post_attention_layernorm.weight"), plus);
            CHECK(l->attn_out_norm == NULL && l->mlp_out_norm == NULL, "%s: layer %d has sandwich norms", what, i);
        }
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
        rmlp_arch arch = strcmp(s->model_type, "qwen2") == 0         ? RMLP_ARCH_QWEN2
                         : strcmp(s->model_type, "llama") == 0       ? RMLP_ARCH_LLAMA
                         : strcmp(s->model_type, "mistral") == 0     ? RMLP_ARCH_MISTRAL
                         : strcmp(s->model_type, "gemma") == 0       ? RMLP_ARCH_GEMMA
                         : strcmp(s->model_type, "gemma2") == 0      ? RMLP_ARCH_GEMMA2
                         : strcmp(s->model_type, "gemma3_text") == 0 ? RMLP_ARCH_GEMMA3_TEXT
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
        /* transformers: Qwen2 always has q/k/v biases; Llama, Qwen3 and Gemma q/k/v/o ones from
         * attention_bias; Llama gate/up/down ones from mlp_bias; Mistral none. Qwen3 and Gemma 3
         * norm q and k; Gemma's norms scale by 1 + w (check_weights), its embedding by
         * sqrt(hidden_size), Gemma 2 and 3 norm each sublayer's output. */
        int reads = arch == RMLP_ARCH_LLAMA || arch == RMLP_ARCH_QWEN3 || is_gemma(s);
        int attention_bias = edited_true(edits, "attention_bias");
        CHECK(c.qk_norm == (arch == RMLP_ARCH_QWEN3 || arch == RMLP_ARCH_GEMMA3_TEXT) &&
                  c.tie_word_embeddings == tied(s),
              "%s: qk_norm %d tie %d", what, c.qk_norm, c.tie_word_embeddings);
        CHECK(c.norm_weight_plus_one == is_gemma(s) && c.sandwich_norms == s->sandwich &&
                  c.embedding_scale == (is_gemma(s) ? 4.0 : 0.0),
              "%s: norm + 1 %d, sandwich norms %d, embedding scale %g", what, c.norm_weight_plus_one,
              c.sandwich_norms, c.embedding_scale);
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
    /* Gemma: attention_bias read, q/k/v and o_proj biases; Gemma 2 and 3: norms after each sublayer;
     * Gemma 3: q/k norm (in every case the norms as 1 + w) */
    s = QWEN3, s.model_type = "gemma", s.qk_norm = 0, s.tie = 1, s.lm_head = 0, s.bias = s.o_bias = 1;
    check_valid("gemma", &s, EDITS("attention_bias", "true"), 1);
    s.model_type = "gemma2", s.sandwich = 1, s.bias = s.o_bias = 0;
    check_valid("gemma2", &s, NULL, 1);
    s.model_type = "gemma3_text", s.qk_norm = 1;
    check_valid("gemma3_text", &s,
                EDITS("rope_parameters", "{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}}"),
                1);
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
    size_t len = 0;
    unsigned char *bytes = tu_read_file(path, &len);
    if (!CHECK(bytes != NULL, "read %s", path)) {
        stw_free(&w);
        return;
    }

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

/* config.json's defaults where its keys are absent: rope_theta 10000, num_key_value_heads = heads,
 * no tie, no bias (Llama). */
static void test_config_defaults(void) {
    stw_json config = {0};
    build_config(&QWEN3, &config);
    const char *absent[] = {"rope_parameters", "num_key_value_heads", "tie_word_embeddings",
                            "hidden_act",      "use_sliding_window",  "layer_types"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) stw_json_set(&config, absent[i], NULL);
    stw_json_set(&config, "model_type", "\"llama\"");
    make_dir("defaults");
    stw_json_write(&config, at("defaults", "config.json"));
    rmlp_model_config c;
    rmlp_status status = config_read("rmlp_model_load", at("defaults", "config.json"), &c);
    CHECK(status == RMLP_OK && c.rope_theta == 10000.0 && c.num_key_value_heads == HEADS && !c.tie_word_embeddings &&
              !c.attention_bias && !c.qk_norm && !c.has_lm_head,
          "defaults: status %d theta %g kv %u: %s", status, c.rope_theta, c.num_key_value_heads, rmlp_last_error());
    stw_json_free(&config);
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

int main(void) {
    writer_begin();
    test_valid();
    test_known_patterns();
    test_f16_exhaustive();
    test_sharded_and_paths();
    test_open_memory();
    test_config_defaults();
    test_unused();
    return writer_end();
}
