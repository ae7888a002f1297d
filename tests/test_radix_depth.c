/*
 * test_radix_depth.c: what docs/backends.md states of radix on vs off, on a model as deep as real ones.
 * Radix on runs every row through the same arithmetic as radix off, except inside BLAS, whose
 * GEMM kernels (and so the order of each dot product's additions) OpenBLAS picks by the number
 * of rows, which radix changes (N' rows instead of N). The two therefore differ by fp32
 * rounding, and the difference grows with depth: 2-3-layer fixtures stay within 1e-6 of the
 * largest |value| (test_model_fixtures), a 30-layer model does not. This checks the bound the
 * docs/backends.md gives, RADIX_REL (max |on - off| <= RADIX_REL * max |off|), on a random 30-layer Qwen3
 * with attention biases whose weights are drawn as the fixtures' are (unit-gain projections, so
 * every layer adds to the residual stream as much as a trained one does, rather than the
 * near-identity layers of small random weights), and a batch whose sequences share a prefix,
 * for radix on and on with padding; and what holds exactly: identical sequences get
 * bit-identical rows (radix on computes them once). The measured differences are printed.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/weights.h"
#include "st_writer.h"
#include "test_util.h"

#define RADIX_REL 1e-5 /* docs/backends.md, "The CPU" */
#define LAYERS 30
#define SEQS 8
#define PREFIX 40
#define SUFFIX 24

/* max |a - b| / max |b| over n floats; NaN gives +inf. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double ref = 0.0, worst = tu_max_abs_diff(a, b, n, &ref);
    return ref > 0 ? worst / ref : worst;
}

/* Uniform in [-1, 1). */
static float unit(uint64_t *rng) { return (float)((double)(tu_rand(rng) >> 11) * 0x1p-52 - 1.0); }

/* A tensor of `rows` x `cols` (cols 0: a vector) drawn as the fixtures draw them (standard
 * deviation 1/sqrt(in_features) for matrices, 0.2 for biases, 1 +- 0.1 for norms). */
static void add_tensor(stw *w, uint64_t *rng, const char *name, uint64_t rows, uint64_t cols) {
    uint64_t n = rows * (cols ? cols : 1), shape[2] = {rows, cols};
    int norm = strstr(name, "norm") != NULL, bias = strstr(name, ".bias") != NULL;
    float scale = 1.7320508f * (norm ? 0.1f : bias ? 0.2f : cols ? 1.0f / sqrtf((float)cols) : 1.0f);
    float *data = tu_xmalloc(n * sizeof(float));
    for (uint64_t i = 0; i < n; i++) data[i] = (norm ? 1.0f : 0.0f) + scale * unit(rng);
    stw_add(w, name, "F32", cols ? 2 : 1, shape, data, n * sizeof(float));
    free(data);
}

/* config.json and model.safetensors of cfg (Qwen3, tied) in dir, every tensor the loader wants. */
static void write_model(const char *dir, const rmlp_model_config *cfg) {
    stw w = {0};
    stw_json j = {0};
    uint64_t rng = 5;
    char name[160], path[512], num[32];
    add_tensor(&w, &rng, "model.embed_tokens.weight", cfg->vocab_size, cfg->hidden_size);
    layer_tensor tensors[W_ROLES];
    size_t n = weights_layer_tensors(cfg, tensors);
    for (uint32_t l = 0; l < cfg->num_hidden_layers; l++)
        for (size_t k = 0; k < n; k++) {
            weights_name(name, sizeof name, "model.", (long)l, tensors[k].suffix);
            add_tensor(&w, &rng, name, tensors[k].rows, tensors[k].cols);
        }
    add_tensor(&w, &rng, "model.norm.weight", cfg->hidden_size, 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    stw_write(&w, path, 1);
    const struct {
        const char *key;
        uint32_t value;
    } sizes[] = {{"vocab_size", cfg->vocab_size},
                 {"hidden_size", cfg->hidden_size},
                 {"intermediate_size", cfg->intermediate_size},
                 {"num_hidden_layers", cfg->num_hidden_layers},
                 {"num_attention_heads", cfg->num_attention_heads},
                 {"num_key_value_heads", cfg->num_key_value_heads},
                 {"head_dim", cfg->head_dim},
                 {"max_position_embeddings", cfg->max_position_embeddings}};
    stw_json_set(&j, "model_type", "\"qwen3\"");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(num, sizeof num, "%u", sizes[i].value);
        stw_json_set(&j, sizes[i].key, num);
    }
    stw_json_set(&j, "rms_norm_eps", "1e-06");
    stw_json_set(&j, "rope_theta", "1000000.0");
    stw_json_set(&j, "tie_word_embeddings", "true");
    stw_json_set(&j, "attention_bias", "true");
    snprintf(path, sizeof path, "%s/config.json", dir);
    stw_json_write(&j, path);
    stw_free(&w);
    stw_json_free(&j);
}

int main(void) {
    char *dir = stw_mkdtemp();
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 512, .hidden_size = 256,
                             .intermediate_size = 768, .num_hidden_layers = LAYERS, .num_attention_heads = 8,
                             .num_key_value_heads = 2, .head_dim = 32, .max_position_embeddings = 512,
                             .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .attention_bias = true,
                             .o_proj_bias = true};
    write_model(dir, &cfg);

    /* SEQS sequences: a shared prefix, then their own suffixes; the last repeats the first. */
    size_t n = SEQS * (PREFIX + SUFFIX), hsz = cfg.hidden_size;
    uint32_t *ids = tu_xmalloc(n * 4), *pos = tu_xmalloc(n * 4), cu[SEQS + 1];
    uint64_t rng = 7;
    for (size_t s = 0, row = 0; s < SEQS; s++) {
        cu[s] = (uint32_t)row;
        for (size_t t = 0; t < PREFIX + SUFFIX; t++, row++) {
            int own = s == 0 || (t >= PREFIX && s < SEQS - 1); /* else a copy of sequence 0's token */
            ids[row] = own ? (uint32_t)(tu_rand(&rng) % cfg.vocab_size) : ids[t];
            pos[row] = (uint32_t)t;
        }
    }
    cu[SEQS] = (uint32_t)n;

    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_status status = rmlp_model_load(dir, NULL, &model);
    if (status == RMLP_OK) status = rmlp_context_create(model, n, &ctx);
    if (status == RMLP_OK) status = rmlp_planner_create(&planner);
    if (!CHECK(status == RMLP_OK, "setup: %s", rmlp_last_error())) return tu_summary();

    static const struct {
        const char *name;
        double threshold;
        uint32_t pad;
    } runs[] = {{"radix off", 0.0, 0}, {"radix on", 1.0, 0}, {"radix on, padded to 64", 1.0, 64}};
    float *out[3];
    for (int r = 0; r < 3; r++) {
        rmlp_plan_params params = tu_params(runs[r].threshold, runs[r].pad);
        rmlp_plan plan;
        out[r] = tu_xmalloc(n * hsz * sizeof(float));
        status = rmlp_plan_build(planner, ids, pos, n, cu, SEQS, &params, &plan);
        if (status == RMLP_OK) status = rmlp_forward(ctx, &plan, NULL, NULL, out[r]);
        CHECK(status == RMLP_OK, "%s: %s", runs[r].name, rmlp_last_error());
        CHECK(r == 0 || (plan.use_radix && plan.n_compact < n), "%s: N'=%u of %zu", runs[r].name, plan.n_compact, n);
    }
    for (int r = 1; r < 3; r++) {
        double rel = rel_diff(out[r], out[0], n * hsz);
        printf("%d layers, N=%zu: %s vs radix off: max |diff| = %.3g of the largest |value|\n", LAYERS, n,
               runs[r].name, rel);
        CHECK(rel <= RADIX_REL, "%s vs radix off: %.3g > %.0e relative", runs[r].name, rel, RADIX_REL);
    }
    size_t last = (size_t)cu[SEQS - 1] * hsz;
    CHECK(memcmp(out[1], out[1] + last, (PREFIX + SUFFIX) * hsz * sizeof(float)) == 0,
          "radix on: identical sequences 0 and %d got different rows", SEQS - 1);

    for (int r = 0; r < 3; r++) free(out[r]);
    free(ids), free(pos);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    stw_rmtree(dir);
    free(dir);
    return tu_summary();
}
