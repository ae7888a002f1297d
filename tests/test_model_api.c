/*
 * test_model_api.c: the model entry points meet bad input as a server would send it: each
 * call returns the expected status with a message naming the argument or index, and the
 * context keeps working afterwards. Uses the committed fixtures qwen3_tiny (with LM head) and
 * qwen3_embedding_noprefix (without).
 * Usage: test_model_api FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>

#include "bench/tiny_model.h"
#include "test_util.h"

static const uint32_t ids[6] = {5, 6, 7, 5, 6, 8}, pos[6] = {0, 1, 2, 0, 1, 2}, cu[3] = {0, 3, 6};

static void expect(rmlp_status got, rmlp_status want, const char *substring, const char *what) {
    const char *msg = rmlp_last_error();
    tu_record_bad_input(what, got, msg);
    CHECK(got == want && strstr(msg, substring) != NULL, "%s: status %d (want %d), message \"%s\" (want \"%s\")", what,
          got, want, msg, substring);
}

static rmlp_model *load(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rmlp_model *model = NULL;
    CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK, "load %s: %s", name, rmlp_last_error());
    return model;
}

static rmlp_status attention_returning_7(void *user_data, const rmlp_attention_args *args) {
    (void)user_data, (void)args;
    return 7;
}

static rmlp_status attention_failing(void *user_data, const rmlp_attention_args *args) {
    (void)user_data, (void)args;
    return RMLP_ERR_CUDA;
}

static void test_load_params(const char *dir) {
    rmlp_model *model = (rmlp_model *)1;
    rmlp_model_params params = rmlp_model_default_params();
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    params.device = 7; /* RMLP_DEVICE_CUDA: test_gpu_errors (the answer depends on the build and the machine) */
    expect(rmlp_model_load(path, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "params->device=7", "unknown device");
    CHECK(model == NULL, "out is NULL after a failed load");
    params = rmlp_model_default_params();
    params.dtype = RMLP_DTYPE_BF16;
    expect(rmlp_model_load(path, &params, &model), RMLP_ERR_UNSUPPORTED, "RMLP_DTYPE_F32", "dtype bf16 on the CPU");
    params = rmlp_model_default_params();
    params.struct_size = 3;
    expect(rmlp_model_load(path, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "struct_size=3", "struct_size");
    expect(rmlp_model_load(NULL, NULL, &model), RMLP_ERR_INVALID_ARGUMENT, "path is NULL", "NULL path");
    expect(rmlp_model_load(path, NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "out is NULL", "NULL out");
    snprintf(path, sizeof path, "%s/no_such_model", dir);
    CHECK(rmlp_model_load(path, NULL, &model) == RMLP_ERR_IO && strstr(rmlp_last_error(), "no_such_model"),
          "missing folder: %s", rmlp_last_error());
    rmlp_model_free(NULL);
    rmlp_context_free(NULL);
}

static void test_calls(const char *dir) {
    rmlp_model *model = load(dir, "qwen3_tiny");
    if (model == NULL) return;
    rmlp_model_config cfg;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK, "config");
    expect(rmlp_context_create(model, 0, &ctx), RMLP_ERR_INVALID_ARGUMENT, "max_tokens=0", "context of 0 tokens");
    CHECK(rmlp_context_create(model, 6, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK, "setup");
    rmlp_plan_params params = tu_params(1.0, 0);
    CHECK(rmlp_plan_build(planner, ids, pos, 6, cu, 2, &params, &plan) == RMLP_OK, "plan");
    size_t hsz = cfg.hidden_size, qd = (size_t)cfg.num_attention_heads * cfg.head_dim;
    size_t kvd = (size_t)cfg.num_key_value_heads * cfg.head_dim;
    float *hidden = tu_xmalloc(6 * hsz * sizeof(float)), *out = tu_xmalloc(6 * hsz * sizeof(float));
    float *q = tu_xmalloc(6 * qd * sizeof(float)), *kv = tu_xmalloc(6 * kvd * sizeof(float));

    expect(rmlp_forward(NULL, &plan, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT, "context is NULL", "NULL ctx");
    expect(rmlp_forward(ctx, NULL, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT, "plan is NULL", "NULL plan");
    rmlp_context_params auto_params = rmlp_context_default_params(); /* AUTO reads the plan: not before it is checked */
    auto_params.attention_space = RMLP_ATTENTION_AUTO;
    rmlp_context *auto_ctx = NULL;
    CHECK(rmlp_context_create_with_params(model, 6, &auto_params, &auto_ctx) == RMLP_OK, "AUTO context");
    expect(rmlp_forward(auto_ctx, NULL, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT, "plan is NULL",
           "NULL plan on a context with attention AUTO");
    rmlp_context_free(auto_ctx);
    expect(rmlp_forward(ctx, &plan, NULL, NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "out is NULL", "NULL out");
    rmlp_plan forged = plan;
    const uint32_t forged_cu[3] = {0, 4, 5};
    forged.cu_seqlens = forged_cu;
    expect(rmlp_forward(ctx, &forged, NULL, NULL, out), RMLP_ERR_INVALID_SEQLENS,
           "cu_seqlens[2]=5, must equal n_tokens=6", "forged plan cu_seqlens");
    expect(rmlp_layer_pre_attention(ctx, cfg.num_hidden_layers, &plan, hidden, q, kv, kv), RMLP_ERR_INVALID_ARGUMENT,
           "layer=3 but the model has 3 layers", "layer out of range");
    expect(rmlp_layer_post_attention(ctx, 0, &plan, NULL, hidden), RMLP_ERR_INVALID_ARGUMENT, "attn is NULL",
           "NULL attn");

    /* Token id and position out of range: named by batch row. */
    const uint32_t big_ids[6] = {5, 6, 7, 5, 6, cfg.vocab_size}, big_pos[6] = {0, 1, 2, 0, 1, cfg.max_position_embeddings};
    CHECK(rmlp_plan_build(planner, big_ids, pos, 6, cu, 2, &params, &plan) == RMLP_OK, "plan big id");
    expect(rmlp_embed(ctx, &plan, hidden), RMLP_ERR_INVALID_ARGUMENT, "input_ids[5]=1000 >= vocab_size=1000",
           "token id >= vocab");
    CHECK(rmlp_plan_build(planner, ids, big_pos, 6, cu, 2, &params, &plan) == RMLP_OK, "plan big position");
    expect(rmlp_forward(ctx, &plan, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "position_ids[5]=512 >= max_position_embeddings=512", "position >= max_position_embeddings");

    /* An empty batch, a plan larger than the context, and a forged plan with an index out of range. */
    static const uint32_t empty_batch_cu[2] = {0, 0};
    CHECK(rmlp_plan_build(planner, ids, pos, 0, empty_batch_cu, 1, &params, &plan) == RMLP_OK, "empty plan");
    expect(rmlp_forward(ctx, &plan, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT, "the plan is empty (n_tokens=0)",
           "empty batch");
    static const uint32_t seven_ids[7] = {1, 2, 3, 4, 5, 6, 7}, seven_pos[7] = {0, 1, 2, 3, 4, 5, 6}, seven_cu[2] = {0, 7};
    CHECK(rmlp_plan_build(planner, seven_ids, seven_pos, 7, seven_cu, 1, &params, &plan) == RMLP_OK, "plan 7");
    expect(rmlp_forward(ctx, &plan, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "plan has 7 tokens (7 compact rows) but the context was created for 6 tokens", "plan too large");
    CHECK(rmlp_plan_build(planner, ids, pos, 6, cu, 2, &params, &plan) == RMLP_OK, "plan");
    uint32_t forged_scatter[6];
    memcpy(forged_scatter, plan.scatter, sizeof forged_scatter);
    forged_scatter[4] = 99;
    forged = plan;
    forged.scatter = forged_scatter;
    expect(rmlp_forward(ctx, &forged, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "plan->scatter[4]=99 is out of range", "forged plan");

    /* A host attention that fails, or returns something that is not a status. */
    expect(rmlp_forward(ctx, &plan, attention_failing, NULL, out), RMLP_ERR_CUDA,
           "the host attention failed at layer 0 with status -6", "failing host attention");
    expect(rmlp_forward(ctx, &plan, attention_returning_7, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "the host attention returned 7 at layer 0, which is not a status", "positive host status");

    /* Pooling and scoring arguments. */
    CHECK(rmlp_forward(ctx, &plan, NULL, NULL, out) == RMLP_OK, "forward after errors: %s", rmlp_last_error());
    float pooled[2 * 256], logits[4], prob[2];
    expect(rmlp_pool(out, 6, (uint32_t)hsz, cu, 2, 9, false, pooled), RMLP_ERR_INVALID_ARGUMENT, "pooling=9",
           "unknown pooling");
    static const uint32_t empty_cu[3] = {0, 0, 6};
    expect(rmlp_pool(out, 6, (uint32_t)hsz, empty_cu, 2, RMLP_POOLING_LAST, false, pooled), RMLP_ERR_INVALID_SEQLENS,
           "sequence 0 is empty", "empty sequence");
    expect(rmlp_score_pair(ctx, out, 6, cu, 2, cfg.vocab_size, 1, logits, prob), RMLP_ERR_INVALID_ARGUMENT,
           "token_a=1000", "score token out of range");
    CHECK(rmlp_pool(out, 6, (uint32_t)hsz, cu, 2, RMLP_POOLING_MEAN, true, pooled) == RMLP_OK, "pool: %s",
          rmlp_last_error());
    double norm = 0.0;
    for (size_t i = 0; i < hsz; i++) norm += (double)pooled[i] * pooled[i];
    CHECK(fabs(norm - 1.0) < 1e-5, "normalized pool has squared norm %g", norm);

    free(hidden), free(out), free(q), free(kv);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

/* Attention in compact space: its own argument checks (the plan's layout, the compact args). */
static void test_compact_calls(const char *dir) {
    rmlp_model *model = load(dir, "qwen3_tiny");
    if (model == NULL) return;
    rmlp_model_config cfg;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK, "config");
    rmlp_context_params cp = rmlp_context_default_params();
    cp.attention_space = 3;
    expect(rmlp_context_create_with_params(model, 6, &cp, &ctx), RMLP_ERR_INVALID_ARGUMENT,
           "params->attention_space=3 is not RMLP_ATTENTION_FULL, COMPACT or AUTO", "unknown attention space");
    cp = rmlp_context_default_params();
    cp.struct_size = 2;
    expect(rmlp_context_create_with_params(model, 6, &cp, &ctx), RMLP_ERR_INVALID_ARGUMENT, "struct_size=2",
           "context params struct_size");
    CHECK(rmlp_context_create_with_params(model, 6, NULL, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK,
          "setup: %s", rmlp_last_error());
    rmlp_plan_params params = tu_params(1.0, 0);
    CHECK(rmlp_plan_build(planner, ids, pos, 6, cu, 2, &params, &plan) == RMLP_OK, "plan");
    size_t hsz = cfg.hidden_size, qd = (size_t)cfg.num_attention_heads * cfg.head_dim;
    size_t kvd = (size_t)cfg.num_key_value_heads * cfg.head_dim;
    float *hidden = tu_xmalloc(6 * hsz * sizeof(float)), *out = tu_xmalloc(6 * hsz * sizeof(float));
    float *q = tu_xmalloc(6 * qd * sizeof(float)), *kv = tu_xmalloc(6 * kvd * sizeof(float));
    float *attn = tu_xmalloc(6 * qd * sizeof(float)), pooled[2 * 256];

    /* A plan without the layout (as a host fills it in by hand), or with a forged one. */
    rmlp_plan bare = plan;
    bare.qo_indptr = NULL;
    expect(rmlp_forward_compact(ctx, &bare, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "plan->qo_indptr is NULL: attention in compact space needs the plan's layout", "compact plan without layout");
    expect(rmlp_layer_pre_attention_compact(ctx, 0, &bare, hidden, q, kv, kv), RMLP_ERR_INVALID_ARGUMENT,
           "plan->qo_indptr is NULL", "compact per-layer call, plan without layout");
    uint32_t forged_qo[3] = {0, 2, 4};
    rmlp_plan forged = plan;
    forged.qo_indptr = forged_qo;
    forged_qo[2] = plan.n_compact + 1;
    expect(rmlp_forward_compact(ctx, &forged, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "plan->qo_indptr[2]=5, must equal n_compact=4", "compact plan, qo_indptr total");
    forged_qo[1] = 4, forged_qo[2] = 4;
    expect(rmlp_forward_compact(ctx, &forged, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "plan->qo_indptr[0]=0, plan->qo_indptr[1]=4: sequence 0 of 3 rows cannot own that many compact rows",
           "compact plan, a sequence owning more than its rows");

    /* rmlp_attention_compact's arguments. */
    rmlp_attention_args a = {.n_tokens = 6, .n_seqs = 2, .n_heads = cfg.num_attention_heads,
                             .n_kv_heads = cfg.num_key_value_heads, .head_dim = cfg.head_dim, .scale = 0.125f,
                             .dtype = RMLP_DTYPE_F32, .cu_seqlens = cu, .q = q, .k = kv, .v = kv, .out = attn,
                             .layout = RMLP_ATTENTION_FULL, .n_compact = plan.n_compact, .qo_indptr = plan.qo_indptr,
                             .kv_indptr = cu, .kv_indices = plan.scatter};
    expect(rmlp_attention_compact(ctx, &a), RMLP_ERR_INVALID_ARGUMENT,
           "args->layout=0, rmlp_attention_compact takes RMLP_ATTENTION_COMPACT", "compact attention, full layout");
    a.layout = RMLP_ATTENTION_COMPACT;
    a.qo_indptr = NULL;
    expect(rmlp_attention_compact(ctx, &a), RMLP_ERR_INVALID_ARGUMENT, "args->qo_indptr is NULL",
           "compact attention without qo_indptr");
    a.qo_indptr = plan.qo_indptr;
    uint32_t bad_indices[6] = {0, 1, 2, 0, 1, 9};
    a.kv_indices = bad_indices;
    expect(rmlp_attention_compact(ctx, &a), RMLP_ERR_INVALID_ARGUMENT,
           "args->kv_indices[5]=9 is out of range (< n_compact=4)", "compact attention, kv_indices out of range");
    a.kv_indices = plan.scatter;
    a.n_compact = 7;
    expect(rmlp_attention_compact(ctx, &a), RMLP_ERR_INVALID_ARGUMENT, "args->n_compact=7 with n_tokens=6",
           "compact attention, n_compact > n_tokens");
    a.n_compact = plan.n_compact;
    const uint32_t bad_kv_indptr[3] = {0, 4, 5};
    a.kv_indptr = bad_kv_indptr;
    expect(rmlp_attention_compact(ctx, &a), RMLP_ERR_INVALID_SEQLENS, "cu_seqlens[2]=5, must equal n_tokens=6",
           "compact attention, kv_indptr");
    a.kv_indptr = cu;
    CHECK(rmlp_attention_compact(ctx, &a) == RMLP_OK, "compact attention after errors: %s", rmlp_last_error());

    /* Read-outs of compact rows. */
    expect(rmlp_context_pool_compact(ctx, NULL, out, RMLP_POOLING_LAST, false, pooled), RMLP_ERR_INVALID_ARGUMENT,
           "plan is NULL", "compact pool without a plan");
    expect(rmlp_context_pool_compact(ctx, &plan, out, 9, false, pooled), RMLP_ERR_INVALID_ARGUMENT, "pooling=9",
           "compact pool, unknown pooling");
    CHECK(rmlp_forward_compact(ctx, &plan, NULL, NULL, out) == RMLP_OK, "compact forward: %s", rmlp_last_error());
    CHECK(rmlp_context_pool_compact(ctx, &plan, out, RMLP_POOLING_LAST, false, pooled) == RMLP_OK,
          "compact pool after errors: %s", rmlp_last_error());

    /* A context with a prefix cache runs the built-in attention only. */
    rmlp_context *cached = NULL;
    cp = rmlp_context_default_params();
    cp.cache_bytes = 1u << 20;
    if (CHECK(rmlp_context_create_with_params(model, 6, &cp, &cached) == RMLP_OK, "cached context: %s",
              rmlp_last_error())) {
        expect(rmlp_forward(cached, &plan, attention_failing, NULL, out), RMLP_ERR_UNSUPPORTED,
               "the context has a prefix cache, whose forward runs the built-in attention",
               "host attention on a context with a prefix cache");
        rmlp_cache_stats st;
        expect(rmlp_context_cache_stats(cached, NULL), RMLP_ERR_INVALID_ARGUMENT, "out is NULL", "cache stats into NULL");
        CHECK(rmlp_forward(cached, &plan, NULL, NULL, out) == RMLP_OK && rmlp_context_cache_stats(cached, &st) == RMLP_OK &&
                  st.batches == 1 && st.computed_tokens == plan.n_compact,
              "cached forward after a refusal: %s", rmlp_last_error());
    }
    rmlp_context_free(cached);
    free(hidden), free(out), free(q), free(kv), free(attn);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

static void test_no_lm_head(const char *dir) {
    rmlp_model *model = load(dir, "qwen3_embedding_noprefix");
    if (model == NULL) return;
    rmlp_model_config cfg;
    rmlp_context *ctx = NULL;
    CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK && !cfg.has_lm_head, "no lm head in the config");
    CHECK(rmlp_context_create(model, 6, &ctx) == RMLP_OK, "context");
    float hidden[6 * 64] = {0}, logits[4], prob[2];
    expect(rmlp_score_pair(ctx, hidden, 6, cu, 2, 1, 2, logits, prob), RMLP_ERR_UNSUPPORTED, "no LM head",
           "score without an LM head");
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

static rmlp_status host_attention(void *user_data, const rmlp_attention_args *args) {
    return rmlp_attention(user_data, args);
}

/* A Mistral model with a sliding window of 4, one layer: a 9-token sequence's rows 6.. see keys 3..,
 * so they equal those of a sequence that differs in its first three tokens only (and the rows before
 * do not); a host's attention is told the window (rmlp_attention_args::sliding_window, and
 * rmlp_model_layer_attention) and runs past it; the built-in attention refuses args whose window or
 * soft-cap is not the layer's. */
static void test_sliding_window(void) {
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_MISTRAL, .vocab_size = 32, .hidden_size = 16,
                             .intermediate_size = 32, .num_hidden_layers = 1, .num_attention_heads = 2,
                             .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                             .sliding_window = 4, .rms_norm_eps = 1e-6, .rope_theta = 1e4, .tie_word_embeddings = true};
    char dir[] = "/tmp/rmlp_window_XXXXXX", path[64];
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 3) == 0, "writing the Mistral model")) return;
    CHECK(rmlp_model_load(dir, NULL, &model) == RMLP_OK, "load: %s", rmlp_last_error());
    rmlp_model_config got;
    CHECK(model && rmlp_model_get_config(model, &got) == RMLP_OK && got.sliding_window == 4, "sliding_window read");
    CHECK(model && rmlp_context_create(model, 22, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK,
          "setup");
    static const uint32_t w_ids[22] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4};
    static const uint32_t w_pos[22] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3};
    static const uint32_t w_cu[4] = {0, 9, 18, 22}, cu_short[2] = {0, 4};
    float out[22 * 16], again[22 * 16];
    rmlp_plan plan;
    if (ctx && planner) {
        CHECK(rmlp_plan_build(planner, w_ids, w_pos, 22, w_cu, 3, NULL, &plan) == RMLP_OK &&
                  rmlp_forward(ctx, &plan, NULL, NULL, out) == RMLP_OK,
              "9 tokens past the window: %s", rmlp_last_error());
        size_t same = 0, differ = 0; /* the same up to the GEMMs' rounding, or apart by far more */
        for (size_t p = 3; p < 9; p++) { /* row p sees rows p-3 .. p: the same in both from p = 6 */
            double ref = 0, d = tu_max_abs_diff(out + p * 16, out + (9 + p) * 16, 16, &ref);
            same += p >= 6 && d <= 1e-6 * ref, differ += p < 6 && d > 1e-3 * ref;
        }
        CHECK(same == 3 && differ == 3, "rows past the window: %zu of 3 the same, %zu of 3 different", same, differ);
        CHECK(rmlp_forward(ctx, &plan, host_attention, ctx, again) == RMLP_OK &&
                  memcmp(again, out, sizeof again) == 0,
              "host attention past the window: %s", rmlp_last_error());
        /* the built-in attention, handed args whose window or soft-cap is not the layer's */
        static float qkv[22 * 16], attn[22 * 16];
        rmlp_attention_args a = {.n_tokens = 22, .n_seqs = 3, .n_heads = 2, .n_kv_heads = 1, .head_dim = 8,
                                 .scale = 0.25f, .dtype = RMLP_DTYPE_F32, .cu_seqlens = plan.cu_seqlens, .q = qkv,
                                 .k = qkv, .v = qkv, .out = attn, .sliding_window = 0};
        expect(rmlp_attention(ctx, &a), RMLP_ERR_INVALID_ARGUMENT,
               "args->sliding_window=0 but layer 0 attends within 4 keys", "attention args without the layer's window");
        a.sliding_window = 4, a.softcap = 30.0f;
        expect(rmlp_attention(ctx, &a), RMLP_ERR_INVALID_ARGUMENT,
               "args->softcap=30 but layer 0 soft-caps its scores at 0", "attention args with another soft-cap");
        a.softcap = 0.0f, a.layout = RMLP_ATTENTION_COMPACT; /* a compact callback's args, read as full ones */
        expect(rmlp_attention(ctx, &a), RMLP_ERR_INVALID_ARGUMENT,
               "args->layout=1, rmlp_attention takes RMLP_ATTENTION_FULL", "compact-layout args to rmlp_attention");
        a.layout = RMLP_ATTENTION_FULL;
        CHECK(rmlp_attention(ctx, &a) == RMLP_OK, "attention with the layer's window: %s", rmlp_last_error());
        rmlp_layer_attention la = {0};
        CHECK(rmlp_model_layer_attention(model, 0, &la) == RMLP_OK && la.sliding_window == 4 && la.softcap == 0.0f &&
                  la.scale == 1.0f / sqrtf(8.0f),
              "layer attention: scale %g, window %u, softcap %g: %s", la.scale, la.sliding_window, la.softcap,
              rmlp_last_error());
        expect(rmlp_model_layer_attention(model, 1, &la), RMLP_ERR_INVALID_ARGUMENT, "layer=1 but the model has 1 layers",
               "layer attention of a layer past the model's");
        expect(rmlp_model_layer_attention(model, 0, NULL), RMLP_ERR_INVALID_ARGUMENT, "model or out is NULL",
               "layer attention into NULL");
        double ref = 0;
        CHECK(rmlp_plan_build(planner, w_ids + 18, w_pos + 18, 4, cu_short, 1, NULL, &plan) == RMLP_OK &&
                  rmlp_forward(ctx, &plan, host_attention, ctx, again) == RMLP_OK &&
                  tu_max_abs_diff(again, out + 18 * 16, 4 * 16, &ref) <= 1e-6 * ref,
              "host attention within the window: %s", rmlp_last_error());
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    snprintf(path, sizeof path, "%s/model.safetensors", dir), remove(path);
    snprintf(path, sizeof path, "%s/config.json", dir), remove(path);
    remove(dir);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_model_api FIXTURES_DIR\n");
        return 2;
    }
    tu_scrub_dir = argv[1];
    test_load_params(argv[1]);
    test_calls(argv[1]);
    test_compact_calls(argv[1]);
    test_no_lm_head(argv[1]);
    test_sliding_window();
    return tu_summary();
}
