/*
 * test_struct_size.c: params structs are versioned by struct_size, as versioned C APIs do. A
 * caller compiled against an older header passes its smaller struct (a size an earlier release
 * had) and gets the defaults for the fields it lacks, whatever bytes lie behind it; a caller
 * compiled against a newer header passes a larger struct, accepted when the bytes past this
 * library's struct are zero and refused, naming the byte, when not; any other size is refused.
 * Checked for rmlp_plan_params (rmlp_plan_build, whose `gate` came after 0.1.0) and
 * rmlp_model_params (rmlp_model_load); the refusal's list of sizes is well formed for
 * rmlp_context_params and for rmlp_generate_params, which no earlier release had (its message then
 * names this release's size alone).
 */
#include <stddef.h>
#include <stdio.h>

#include "bench/tiny_model.h"
#include "st_writer.h"
#include "test_util.h"

/* A struct with room behind it: the fields of a newer header, or the bytes after an older one. */
typedef struct plan_buffer {
    rmlp_plan_params p;
    unsigned char newer[24];
} plan_buffer;

typedef struct model_buffer {
    rmlp_model_params p;
    unsigned char newer[24];
} model_buffer;

/* 0.1.0's rmlp_plan_params ended where `gate` begins; its rmlp_model_params after `dtype`. */
#define PLAN_PARAMS_0_1 offsetof(rmlp_plan_params, gate)
#define MODEL_PARAMS_0_1 (offsetof(rmlp_model_params, dtype) + sizeof(rmlp_dtype))
/* ... and, with skip_finite_check, before cpu_weight_dtype (bool padded to the struct's alignment). */
#define MODEL_PARAMS_0_2 offsetof(rmlp_model_params, cpu_weight_dtype)
/* ... and, with cpu_weight_dtype, before cpu_bf16_gemm. */
#define MODEL_PARAMS_0_3 offsetof(rmlp_model_params, cpu_bf16_gemm)

/* Two sequences of 8 sharing 3 tokens: N = 16, N' = 13. Padded to 8 that is 16 rows, so at
 * threshold 0.85 the distinct rule uses radix (0.8125) and TEI's rule does not (1.0): the use_radix
 * of a build says which gate the library read. */
static const uint32_t ids[16] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 9, 10, 11, 12, 13};
static const uint32_t pos[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
static const uint32_t cu[3] = {0, 8, 16};

static plan_buffer tei_params(uint32_t struct_size) {
    plan_buffer b;
    memset(&b, 0, sizeof b);
    b.p = tu_params(0.85, 8);
    b.p.gate = RMLP_GATE_TEI;
    b.p.struct_size = struct_size;
    return b;
}

static void test_plan_params(void) {
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    static const struct {
        const char *name;
        uint32_t struct_size;
        unsigned newer_byte; /* index into newer[] set to 1, or 99 for none */
        rmlp_status want;
        int want_radix; /* 1: the gate was the default (distinct) rule; 0: TEI's, as the struct says */
        const char *want_msg;
    } cases[] = {
        {"this header's struct", sizeof(rmlp_plan_params), 99, RMLP_OK, 0, ""},
        {"0.1.0's struct: gate unread, the default", PLAN_PARAMS_0_1, 99, RMLP_OK, 1, ""},
        {"a newer header's struct, extra bytes zero", sizeof(rmlp_plan_params) + 16, 99, RMLP_OK, 0, ""},
        {"a newer header's struct, an extra byte set", sizeof(rmlp_plan_params) + 16, 9, RMLP_ERR_INVALID_ARGUMENT,
         0, "past the"},
        {"a byte set past a newer struct's size is not read", sizeof(rmlp_plan_params) + 8, 9, RMLP_OK, 0, ""},
        {"a size between releases", PLAN_PARAMS_0_1 + 4, 99, RMLP_ERR_INVALID_ARGUMENT, 0,
         "is not the size of a rmlp_plan_params"},
        {"a size below every release", 8, 99, RMLP_ERR_INVALID_ARGUMENT, 0, "is not the size of a rmlp_plan_params"},
        {"a size past any struct", 1u << 20, 99, RMLP_ERR_INVALID_ARGUMENT, 0,
         "is not the size of any rmlp_plan_params"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        plan_buffer b = tei_params(cases[k].struct_size);
        if (cases[k].newer_byte < sizeof b.newer) b.newer[cases[k].newer_byte] = 1;
        rmlp_plan plan;
        rmlp_status status = rmlp_plan_build(planner, ids, pos, 16, cu, 2, &b.p, &plan);
        const char *msg = rmlp_last_error();
        CHECK(status == cases[k].want && strstr(msg, cases[k].want_msg) != NULL,
              "plan params, %s (struct_size %u): status %d, want %d; message \"%s\"", cases[k].name,
              cases[k].struct_size, status, cases[k].want, msg);
        if (status == RMLP_OK && cases[k].want == RMLP_OK)
            CHECK(plan.use_radix == cases[k].want_radix && plan.n_distinct == 13,
                  "plan params, %s: use_radix %d (want %d), n_distinct %u", cases[k].name, plan.use_radix,
                  cases[k].want_radix, plan.n_distinct);
    }
    rmlp_planner_free(planner);
}

static void test_model_params(const char *dir) {
    static const struct {
        const char *name;
        uint32_t struct_size;
        unsigned newer_byte;
        rmlp_status want;
        const char *want_msg;
    } cases[] = {
        {"this header's struct", sizeof(rmlp_model_params), 99, RMLP_OK, ""},
        {"0.1.0's struct", MODEL_PARAMS_0_1, 99, RMLP_OK, ""},
        {"the struct before cpu_weight_dtype", MODEL_PARAMS_0_2, 99, RMLP_OK, ""},
        {"the struct before cpu_bf16_gemm", MODEL_PARAMS_0_3, 99, RMLP_OK, ""},
        {"a newer header's struct, extra bytes zero", sizeof(rmlp_model_params) + 16, 99, RMLP_OK, ""},
        {"a newer header's struct, an extra byte set", sizeof(rmlp_model_params) + 16, 2, RMLP_ERR_INVALID_ARGUMENT,
         "past the"},
        {"a size below every release", 12, 99, RMLP_ERR_INVALID_ARGUMENT, "is not the size of a rmlp_model_params"},
        {"struct_size 0", 0, 99, RMLP_ERR_INVALID_ARGUMENT, "is not the size of a rmlp_model_params"},
        {"a size past any struct", 1u << 20, 99, RMLP_ERR_INVALID_ARGUMENT, "is not the size of any rmlp_model_params"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        model_buffer b;
        memset(&b, 0, sizeof b);
        b.p = rmlp_model_default_params();
        b.p.struct_size = cases[k].struct_size;
        if (cases[k].newer_byte < sizeof b.newer) b.newer[cases[k].newer_byte] = 1;
        /* past an older struct the bytes are not the caller's: a value there that would be refused
         * must not be read */
        if (cases[k].struct_size <= MODEL_PARAMS_0_2) b.p.cpu_weight_dtype = 7;
        if (cases[k].struct_size <= MODEL_PARAMS_0_3) b.p.cpu_bf16_gemm = 7;
        rmlp_model *model = NULL;
        rmlp_status status = rmlp_model_load(dir, &b.p, &model);
        const char *msg = rmlp_last_error();
        char input[96];
        snprintf(input, sizeof input, "params->struct_size: %s", cases[k].name);
        tu_record_bad_input(input, status, msg);
        CHECK(status == cases[k].want && strstr(msg, cases[k].want_msg) != NULL,
              "model params, %s (struct_size %u): status %d, want %d; message \"%s\"", cases[k].name,
              cases[k].struct_size, status, cases[k].want, msg);
        CHECK((status == RMLP_OK) == (model != NULL), "model params, %s: *out %p", cases[k].name, (void *)model);
        rmlp_model_free(model);
    }
}

/* The refusal of a size no release had gives this release's size, then the earlier ones if any
 * ("12 in this release,  in earlier ones" for a struct with none, before issue 31); `alone`: the
 * struct had no earlier release, so the message names no earlier size. */
static void check_sizes_message(const char *what, rmlp_status status, size_t size, int alone) {
    const char *msg = rmlp_last_error();
    char want[64];
    snprintf(want, sizeof want, ": %zu in this release%s", size, alone ? " (use the defaults function)" : ", ");
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, want) != NULL && strstr(msg, ",  in earlier") == NULL,
          "%s: status %d, message \"%s\", want \"%s\" in it", what, status, msg, want);
}

static void test_new_structs(const char *dir) {
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(dir, NULL, &model) == RMLP_OK, "model: %s", rmlp_last_error())) return;
    rmlp_context *ctx = NULL;
    rmlp_context_params cp = rmlp_context_default_params();
    cp.struct_size = 2;
    rmlp_status status = rmlp_context_create_with_params(model, 16, &cp, &ctx);
    check_sizes_message("rmlp_context_params", status, sizeof(rmlp_context_params),
                        strstr(rmlp_last_error(), "earlier ones") == NULL);
    cp = rmlp_context_default_params();
    cp.cache_bytes = 1u << 20;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = rmlp_plan_default_params();
    if (CHECK(rmlp_context_create_with_params(model, 16, &cp, &ctx) == RMLP_OK, "context: %s", rmlp_last_error()) &&
        CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error()) &&
        CHECK(rmlp_plan_build(planner, ids, pos, 16, cu, 2, &pp, &plan) == RMLP_OK, "plan: %s", rmlp_last_error())) {
        rmlp_generate_params gp = rmlp_generate_default_params();
        gp.struct_size = 3;
        float logits[2 * 32];
        check_sizes_message("rmlp_generate_params", rmlp_generate_begin(ctx, &plan, &gp, logits),
                            sizeof(rmlp_generate_params), 1);
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

int main(void) {
    test_plan_params();
    char *root = stw_mkdtemp();
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 32, .hidden_size = 16,
                              .intermediate_size = 24, .num_hidden_layers = 1, .num_attention_heads = 2,
                              .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    if (CHECK(tiny_model_write(root, &tiny, 3) == 0, "writing the tiny model under %s", root)) {
        tu_scrub_dir = root;
        test_model_params(root);
        test_new_structs(root);
    }
    stw_rmtree(root);
    free(root);
    return tu_summary();
}
