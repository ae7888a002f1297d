/*
 * test_model_load_finite.c: the model loader (model/) on weights that are not finite, and a
 * forward whose output overflows fp32: a NaN or infinity in a weight the model uses is refused with
 * the tensor and the element named, in every dtype (skip_finite_check loads it; a tensor the model
 * does not use is not checked); the same through the exported entry points; an output that
 * overflows is RMLP_ERR_MODEL in every CPU forward. Checkpoints are written by this test
 * (model_load_writer.h); each bad input goes to docs/errors.md's table (scripts/bad_input_table.py).
 * Run under ASan/LSan, this also checks that no error path leaks.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "model_load_writer.h"

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

int main(void) {
    writer_begin();
    test_not_finite();
    test_public_api();
    test_not_finite_output();
    return writer_end();
}
