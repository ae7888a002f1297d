/*
 * test_bf16_weights.c: a CPU model with rmlp_model_params::cpu_weight_dtype = RMLP_DTYPE_BF16
 * (model/weights_bf16.h holds the layers' matrices in bf16, cpu/linear_bf16.h multiplies by them).
 *   - weights_f32_to_bf16 rounds to nearest even: every bf16 value and the midpoints between
 *     neighbours (ties to even), overflow to infinity, NaN kept a NaN;
 *   - the loaded model holds its four matrices in bf16 only (no fp32 copy);
 *   - on a model whose fp32 weights bf16 cannot hold, the bf16 model equals the fp32 model of the
 *     same checkpoint with those matrices rounded to bf16 (written here) within 2e-6 of the
 *     largest value, radix off, on and in compact space, and through the prefix cache; it differs
 *     from the unrounded model (the rounding did happen) by at most BF16_VS_F32 relative;
 *   - generation (its few-row steps): every step's logits equal the rounded model's, bit for bit;
 *   - the transformers fixtures: qwen3_bf16 (weights bf16 already) matches transformers' fp32
 *     last_hidden within the fp32 path's 1e-4; every other fixture within BF16_VS_TRANSFORMERS;
 *   - refused by name: cpu_weight_dtype F16 and an unknown value; a finite weight beyond bf16's
 *     range (RMLP_ERR_MODEL naming the tensor and the element).
 * Usage: test_bf16_weights FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bad_input_row.h"
#include "forward_modes.h"
#include "model/weights_bf16.h"
#include "cpu/runner.h"
#include "ffi/src/model_internal.h"
#include "st_writer.h"
#include "test_util.h"
#include "bench/tiny_model.h"

/* The stated tolerances (docs/backends.md#bf16-weights-on-the-cpu), max abs error over the
 * largest value: bf16 keeps 8 significant bits (relative rounding error up to 2^-9 per weight). */
#define BF16_VS_F32 2e-2
#define BF16_VS_TRANSFORMERS 2e-2
#define SAME_WEIGHTS 2e-6 /* the fp32 path's own radix on/off bound (test_model_fixtures) */
#define CAP 512

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_rounding(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u && bad < 5; h++) {
        uint32_t e = h >> 7 & 0xffu;
        if (e == 0xffu) continue; /* infinities and NaN below */
        float exact = from_bits(h << 16), above = from_bits(h << 16 | 0x8000u); /* the midpoint to the next */
        uint16_t want_mid = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;    /* ties to even */
        if (weights_f32_to_bf16(exact) != h || weights_f32_to_bf16(above) != want_mid ||
            weights_f32_to_bf16(from_bits(h << 16 | 0x8001u)) != (uint16_t)(h + 1) ||
            weights_f32_to_bf16(from_bits(h << 16 | 0x7fffu)) != h)
            bad += CHECK(0, "bf16 rounding around 0x%04x", h) ? 0 : 1;
    }
    CHECK(weights_f32_to_bf16(INFINITY) == 0x7f80u && weights_f32_to_bf16(-INFINITY) == 0xff80u, "infinities");
    CHECK(weights_f32_to_bf16(3.4e38f) == 0x7f80u, "3.4e38 overflows bf16 to infinity");
    uint16_t nan = weights_f32_to_bf16(from_bits(0x7f800001u)); /* a NaN whose payload is in the low bits */
    CHECK((nan & 0x7f80u) == 0x7f80u && (nan & 0x7fu) != 0, "NaN 0x7f800001 became 0x%04x", nan);
}

/* dst/model.safetensors = src's with every element of the tensors named by `pick` replaced by
 * f(element); config.json copied. */
static int rewrite(const char *src, const char *dst, bool (*pick)(const char *name), float (*f)(float, uint64_t)) {
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    size_t len = 0;
    unsigned char *bytes = tu_read_file(path, &len);
    st_file *st = NULL;
    if (!CHECK(bytes != NULL && st_open_memory(path, bytes, len, &st) == RMLP_OK, "reading %s", path)) return -1;
    unsigned char *copy = tu_xmalloc(len);
    memcpy(copy, bytes, len);
    for (size_t i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        if (t->dtype != RMLP_DTYPE_F32 || !pick(t->name)) continue;
        float *w = (float *)(void *)(copy + ((const unsigned char *)t->data - bytes));
        for (uint64_t k = 0; k < t->nbytes / 4; k++) w[k] = f(w[k], k);
    }
    st_close(st);
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    stw_write_bytes(path, copy, len);
    free(copy);
    free(bytes);
    snprintf(path, sizeof path, "%s/config.json", src);
    bytes = tu_read_file(path, &len);
    snprintf(path, sizeof path, "%s/config.json", dst);
    stw_write_bytes(path, bytes, len);
    free(bytes);
    return 0;
}

static bool is_matrix(const char *name) {
    static const char *const suffixes[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                           "gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strstr(name, suffixes[i])) return true;
    return false;
}

static float round_bf16(float w, uint64_t k) {
    (void)k;
    return from_bits((uint32_t)weights_f32_to_bf16(w) << 16);
}

static bool is_up_1(const char *name) { return strcmp(name, "model.layers.1.mlp.up_proj.weight") == 0; }
static float huge_at_5(float w, uint64_t k) { return k == 5 ? 3.4e38f : w; }

/* bf16 weights through the widening path (WIDEN pinned: on a CPU with bf16 instructions the
 * default would take oneDNN's GEMMs, which test_bf16_onednn checks). */
static rmlp_model *load(const char *dir, rmlp_dtype weights) {
    rmlp_model_params p = rmlp_model_default_params();
    p.cpu_weight_dtype = weights;
    if (weights == RMLP_DTYPE_BF16) p.cpu_bf16_gemm = RMLP_CPU_BF16_GEMM_WIDEN;
    rmlp_model *m = NULL;
    return CHECK(rmlp_model_load(dir, &p, &m) == RMLP_OK, "load %s (weights %d): %s", dir, weights, rmlp_last_error())
               ? m
               : NULL;
}

static int forward(rmlp_model *model, const tu_batch *b, int mode, float *out) {
    return fm_forward(model, b, mode, CAP, out);
}

/* Greedy logits of `steps` generation steps from the batch's first 3 sequences (as prompts), into
 * out ((steps + 1) * 3 * vocab). */
static int generate(rmlp_model *model, const tu_batch *b, int steps, size_t vocab, float *out) {
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = 8u << 20;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 0);
    int ok = rmlp_context_create_with_params(model, CAP, &cp, &ctx) == RMLP_OK &&
             rmlp_planner_create(&planner) == RMLP_OK &&
             rmlp_plan_build(planner, b->ids, b->pos, b->cu[3], b->cu, 3, &pp, &plan) == RMLP_OK &&
             rmlp_generate_begin(ctx, &plan, NULL, out) == RMLP_OK;
    for (int step = 1; ok && step <= steps; step++) {
        uint32_t tokens[3];
        for (size_t s = 0; s < 3; s++) {
            const float *l = out + ((size_t)(step - 1) * 3 + s) * vocab;
            size_t best = 0;
            for (size_t v = 1; v < vocab; v++) best = l[v] > l[best] ? v : best;
            tokens[s] = (uint32_t)best;
        }
        ok = rmlp_generate_step(ctx, tokens, 3, out + (size_t)step * 3 * vocab) == RMLP_OK;
    }
    if (ok) ok = rmlp_generate_end(ctx) == RMLP_OK;
    CHECK(ok, "generation: %s", rmlp_last_error());
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    return ok ? 0 : -1;
}

static void test_tiny(const char *root) {
    char orig[512], rounded[512], huge[512];
    snprintf(orig, sizeof orig, "%s/orig", root), snprintf(rounded, sizeof rounded, "%s/rounded", root);
    snprintf(huge, sizeof huge, "%s/huge", root);
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 1000, .hidden_size = 64,
                              .intermediate_size = 96, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .head_dim = 16, .max_position_embeddings = 256,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    if (!CHECK(mkdir(orig, 0700) == 0 && mkdir(rounded, 0700) == 0 && mkdir(huge, 0700) == 0 &&
                   tiny_model_write(orig, &tiny, 11) == 0 && rewrite(orig, rounded, is_matrix, round_bf16) == 0 &&
                   rewrite(orig, huge, is_up_1, huge_at_5) == 0,
               "writing the checkpoints under %s", root))
        return;
    rmlp_model *f32 = load(orig, RMLP_DTYPE_F32), *bf16 = load(orig, RMLP_DTYPE_BF16);
    rmlp_model *ref = load(rounded, RMLP_DTYPE_F32);
    if (f32 == NULL || bf16 == NULL || ref == NULL) goto done;

    const model_weights *w = bf16->backend_model; /* a CPU model's (cpu/runner.h) */
    for (uint32_t l = 0; l < tiny.num_hidden_layers; l++) {
        const layer_weights *lw = &w->layers[l];
        CHECK(lw->qkv == NULL && lw->o_proj == NULL && lw->gate_up == NULL && lw->down == NULL && lw->qkv_bf16 &&
                  lw->o_proj_bf16 && lw->gate_up_bf16 && lw->down_bf16,
              "layer %u: the matrices are not held in bf16 alone", l);
    }
    CHECK(((const model_weights *)f32->backend_model)->layers[0].qkv_bf16 == NULL, "an f32 model holds bf16");

    uint64_t rng = 0xBF16;
    tu_batch_shape shape = {.n_seqs = 8, .max_len = 48, .vocab = 1000, .prefix_len = 24};
    tu_batch b = tu_random_batch(&rng, &shape);
    size_t n = b.n_tokens * tiny.hidden_size;
    float *got = tu_xmalloc(n * sizeof(float)), *want = tu_xmalloc(n * sizeof(float));
    float *plain = tu_xmalloc(n * sizeof(float));
    for (int mode = 0; mode < FM_MODES; mode++) {
        if (forward(bf16, &b, mode, got) != 0 || forward(ref, &b, mode, want) != 0 || forward(f32, &b, mode, plain))
            continue;
        double ref_max = 0.0, same = tu_max_abs_diff(got, want, n, &ref_max), apart = tu_max_abs_diff(got, plain, n, NULL);
        CHECK(same <= SAME_WEIGHTS * ref_max, "%s: bf16 weights vs fp32 of the rounded weights: %.3g of %.3g",
              fm_mode_names[mode], same, ref_max);
        CHECK(apart > 100 * SAME_WEIGHTS * ref_max && apart <= BF16_VS_F32 * ref_max,
              "%s: bf16 weights vs fp32 weights: %.3g of %.3g (want above %.0e and at most %.0e relative)",
              fm_mode_names[mode], apart, ref_max, 100 * SAME_WEIGHTS, BF16_VS_F32);
        printf("%s: bf16 weights vs rounded fp32 %.3g, vs fp32 %.3g (relative %.2e), max |value| %.3g\n",
               fm_mode_names[mode], same, apart, apart / ref_max, ref_max);
    }

    enum { STEPS = 4 };
    size_t per = (STEPS + 1) * 3 * (size_t)tiny.vocab_size;
    float *lg = tu_xmalloc(per * sizeof(float)), *lw = tu_xmalloc(per * sizeof(float));
    if (generate(bf16, &b, STEPS, tiny.vocab_size, lg) == 0 && generate(ref, &b, STEPS, tiny.vocab_size, lw) == 0) {
        double ref_max = 0.0, d = tu_max_abs_diff(lg, lw, per, &ref_max);
        /* steps of 3 rows: the few-row kernel on widened rows, the fp32 kernel's bits (linear_few.h) */
        CHECK(d == 0.0, "generation: logits differ by %.3g of %.3g", d, ref_max);
        printf("generation, %d steps: logits vs rounded fp32 %.3g of %.3g\n", STEPS, d, ref_max);
    }
    free(lg), free(lw), free(got), free(want), free(plain);
    tu_batch_free(&b);

    rmlp_model_params p = rmlp_model_default_params();
    rmlp_model *m = NULL;
    p.cpu_weight_dtype = RMLP_DTYPE_BF16;
    rmlp_status status = rmlp_model_load(huge, &p, &m);
    const char *msg = rmlp_last_error();
    CHECK(status == RMLP_ERR_MODEL && m == NULL &&
              strstr(msg, "tensor 'model.layers.1.mlp.up_proj.weight' holds 3.4e+38 at element 5, beyond bf16's range"),
          "a weight beyond bf16: status %d, \"%s\"", status, msg);
    tu_record_bad_input("cpu_weight_dtype BF16, a weight of 3.4e38", status, msg);
    CHECK(rmlp_model_load(huge, NULL, &m) == RMLP_OK, "the same checkpoint in fp32: %s", rmlp_last_error());
    rmlp_model_free(m), m = NULL;
    static const struct {
        rmlp_dtype value;
        rmlp_status want;
        const char *name;
    } refused[] = {{RMLP_DTYPE_F16, RMLP_ERR_UNSUPPORTED, "cpu_weight_dtype F16"},
                   {7, RMLP_ERR_INVALID_ARGUMENT, "cpu_weight_dtype 7"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        p.cpu_weight_dtype = refused[i].value;
        status = rmlp_model_load(orig, &p, &m);
        msg = rmlp_last_error();
        CHECK(status == refused[i].want && m == NULL && strstr(msg, "params->cpu_weight_dtype="),
              "%s: status %d, \"%s\"", refused[i].name, status, msg);
        tu_record_bad_input(refused[i].name, status, msg);
    }
done:
    rmlp_model_free(f32), rmlp_model_free(bf16), rmlp_model_free(ref);
}

static rmlp_model *load_bf16(const char *path) { return load(path, RMLP_DTYPE_BF16); }

/* Every fixture loaded with bf16 weights against transformers' last_hidden (radix on). */
static void check_fixture(const char *name, double d, double ref) {
    bool exact = strcmp(name, "qwen3_bf16") == 0; /* its weights are bf16 already */
    CHECK(exact ? d <= 1e-4 : d <= BF16_VS_TRANSFORMERS * ref, "%s: bf16 weights vs transformers: %.3g of %.3g (want "
          "at most %s)", name, d, ref, exact ? "1e-4" : "2e-2 relative");
    printf("%s: bf16 weights vs transformers fp32: max abs %.3g, relative %.2e\n", name, d, d / ref);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_bf16_weights FIXTURES_DIR\n");
        return 2;
    }
    test_rounding();
    char *root = stw_mkdtemp();
    test_tiny(root);
    stw_rmtree(root);
    free(root);
    fm_each_fixture(argv[1], load_bf16, CAP, check_fixture);
    return tu_summary();
}
