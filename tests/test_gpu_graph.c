/*
 * test_gpu_graph.c: a CUDA context's errors and graphs (helpers shared with test_gpu_model.c:
 * gpu_model_util.h): error statuses (no plan set, another plan, a plan rebuilt in place, host
 * pointers, a capturing stream, a failing host attention) with the context still working
 * afterwards; and a forward captured in a CUDA graph, replayed, and replayed again after setting
 * another plan of the same shape, in full and compact space. Without a CUDA device it prints SKIP
 * and exits 77.
 * Usage: test_gpu_graph FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_model_util.h"

/* ---- errors on the device ------------------------------------------------------------------- */

static void test_errors(const char *dir) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, "qwen3_tiny", 0, path, &r)) return;
    rmlp_model_params params = rmlp_model_default_params();
    rmlp_model *model = (rmlp_model *)1;
    params.device = RMLP_DEVICE_CUDA;
    params.device_index = 99;
    expect_status(rmlp_model_load(path, &params, &model), RMLP_ERR_NO_DEVICE, "device_index=99", "device_index 99");
    CHECK(model == NULL, "out is NULL after a failed load");
    params.device_index = 0;
    params.dtype = 7;
    expect_status(rmlp_model_load(path, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "params->dtype=7", "dtype 7");

    const rmlp_dtype dt = RMLP_DTYPE_F32;
    rmlp_context *ctx = load_cuda(path, dt, r.b.n_tokens, &model);
    rmlp_planner *planner = NULL;
    if (ctx == NULL || !CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner")) goto done;
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    void *d_out = dev_alloc(n * 4);
    const rmlp_plan *on = &r.plans[1], *off = &r.plans[0];

    expect_status(rmlp_forward(ctx, on, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "no plan is set",
                  "forward before rmlp_context_set_plan");
    CHECK(rmlp_context_set_plan(ctx, on) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    expect_status(rmlp_forward(ctx, off, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "is not the one set",
                  "forward with another plan");
    expect_status(rmlp_layer_pre_attention(ctx, 0, off, d_out, d_out, d_out, d_out), RMLP_ERR_INVALID_ARGUMENT,
                  "is not the one set", "pre-attention with another plan");
    float *host_out = tu_xmalloc(n * 4);
    expect_status(rmlp_forward(ctx, on, NULL, NULL, host_out), RMLP_ERR_INVALID_ARGUMENT, "is not device memory",
                  "forward into host memory");
    expect_status(rmlp_forward(ctx, on, failing_attention, NULL, d_out), RMLP_ERR_CUDA,
                  "host attention failed at layer 0", "a failing host attention");

    /* A plan rebuilt in place by its planner after set_plan: identity plans of the same batch with
     * other token ids have the same counts (and, the planner reusing its arrays, the same pointers). */
    rmlp_plan_params identity = tu_params(0.0, 0);
    rmlp_plan live;
    CHECK(rmlp_plan_build(planner, r.b.ids, r.b.pos, r.b.n_tokens, r.b.cu, r.b.n_seqs, &identity, &live) == RMLP_OK,
          "plan");
    CHECK(rmlp_context_set_plan(ctx, &live) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    uint32_t *other_ids = tu_xmalloc(r.b.n_tokens * sizeof(uint32_t));
    for (size_t i = 0; i < r.b.n_tokens; i++) other_ids[i] = (r.b.ids[i] + 1) % r.cfg.vocab_size;
    CHECK(rmlp_plan_build(planner, other_ids, r.b.pos, r.b.n_tokens, r.b.cu, r.b.n_seqs, &identity, &live) == RMLP_OK,
          "plan");
    expect_status(rmlp_forward(ctx, &live, NULL, NULL, d_out), RMLP_ERR_INVALID_ARGUMENT, "rmlp_context_set_plan",
                  "forward with a plan rebuilt after set_plan");
    printf("  plan rebuilt in place: %s\n", rmlp_last_error());
    free(other_ids);

    /* Attention arguments the device cannot take. */
    CHECK(rmlp_context_set_plan(ctx, on) == RMLP_OK, "set_plan: %s", rmlp_last_error());
    uint32_t *cu_copy = tu_xmalloc((r.b.n_seqs + 1) * sizeof(uint32_t));
    memcpy(cu_copy, on->cu_seqlens, (r.b.n_seqs + 1) * sizeof(uint32_t));
    size_t qd = (size_t)r.cfg.num_attention_heads * r.cfg.head_dim;
    void *q = dev_alloc(r.b.n_tokens * qd * 4);
    rmlp_attention_args args = {.n_tokens = on->n_tokens, .n_seqs = on->n_seqs, .n_heads = r.cfg.num_attention_heads,
                                .n_kv_heads = r.cfg.num_key_value_heads, .head_dim = r.cfg.head_dim, .scale = 0.25f,
                                .dtype = RMLP_DTYPE_BF16, .cu_seqlens = on->cu_seqlens, .q = q, .k = q, .v = q,
                                .out = d_out};
    expect_status(rmlp_attention(ctx, &args), RMLP_ERR_UNSUPPORTED, "CUDA model's dtype", "attention dtype");
    args.dtype = dt;
    args.cu_seqlens = cu_copy;
    expect_status(rmlp_attention(ctx, &args), RMLP_ERR_INVALID_ARGUMENT, "cu_seqlens_device is NULL",
                  "attention without device offsets");

    /* A stream that is capturing: the calls that wait on the host refuse, nothing is enqueued. */
    cudaGraph_t graph = NULL;
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    expect_status(rmlp_context_set_plan(ctx, on), RMLP_ERR_INVALID_ARGUMENT, "capturing", "set_plan while capturing");
    float *pooled = tu_xmalloc(r.b.n_seqs * r.cfg.hidden_size * sizeof(float));
    expect_status(rmlp_context_pool(ctx, d_out, r.b.n_tokens, r.b.cu, r.b.n_seqs, RMLP_POOLING_LAST, false, pooled),
                  RMLP_ERR_INVALID_ARGUMENT, "capturing", "pool while capturing");
    free(pooled);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    CHECK(end == cudaSuccess, "the capture survived the refused calls: %s", cudaGetErrorString(end));
    if (graph) cudaGraphDestroy(graph);

    /* The context still works. */
    float *got = device_forward(ctx, &r, on, dt, d_out, NULL, NULL, "after the errors");
    if (got) expect_close("qwen3_tiny: forward after the errors vs CPU", 0, got, r.cpu_out[1], n);
    free(got), free(host_out), free(cu_copy);
    cudaFree(q), cudaFree(d_out);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    reference_free(&r);
}

/* ---- CUDA graphs ---------------------------------------------------------------------------- */

/* Captures rmlp_forward of `plan` into a graph; replays it into d_out. NULL exec on failure. */
static cudaGraphExec_t capture_forward(rmlp_context *ctx, const rmlp_plan *plan, void *d_out, const char *what) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_MUST(cudaStreamSynchronize(stream));
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmlp_status status = rmlp_forward(ctx, plan, NULL, NULL, d_out);
    char message[600];
    snprintf(message, sizeof message, "%s", rmlp_last_error());
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (CHECK(status == RMLP_OK && end == cudaSuccess, "%s: forward under capture: status %d (%s), end capture: %s",
              what, status, message, cudaGetErrorString(end))) {
        cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
        if (!CHECK(e == cudaSuccess, "%s: instantiate: %s", what, cudaGetErrorString(e))) exec = NULL;
    }
    if (graph) cudaGraphDestroy(graph);
    return exec;
}

static float *replay(cudaGraphExec_t exec, void *d_out, size_t n, rmlp_dtype dt) {
    poison(d_out, n * elem_size(dt));
    CUDA_MUST(cudaGraphLaunch(exec, stream));
    return download(d_out, n, dt);
}

/* Two sequences of lens[0] and lens[1] tokens whose first `share` tokens are the same, positions
 * from 0, ids below vocab. */
static fixture_batch two_sequences(const uint32_t lens[2], uint32_t share, uint32_t vocab) {
    size_t n = lens[0] + lens[1];
    fixture_batch b = {tu_xmalloc(n * 4), tu_xmalloc(n * 4), tu_xmalloc(3 * 4), n, 2};
    b.cu[0] = 0, b.cu[1] = lens[0], b.cu[2] = (uint32_t)n;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t t = 0; t < lens[s]; t++) {
            b.ids[b.cu[s] + t] = (t < share ? 5 + 7 * t : 5 + 7 * t + 11 * (s + 1)) % vocab;
            b.pos[b.cu[s] + t] = t;
        }
    return b;
}

/* Captures rmlp_forward of `captured` into a graph, checks its replay against the direct forward,
 * then (when `next` is given: a plan of the same counts) sets `next` and checks the replay against
 * next's direct forward, and that the two batches' outputs differ enough for that to mean something. */
static void graph_case(rmlp_context *ctx, const reference *r, const rmlp_plan *captured, const rmlp_plan *next,
                       rmlp_dtype dt, int di, void *d_out, const char *what) {
    CHECK(next == NULL || (next->n_tokens == captured->n_tokens && next->n_seqs == captured->n_seqs &&
                           next->n_compact == captured->n_compact &&
                           next->n_compact_padded == captured->n_compact_padded),
          "%s: the test's two plans must have the same counts", what);
    size_t n = captured->n_tokens * (size_t)r->cfg.hidden_size;
    char line[200];
    float *direct = device_forward(ctx, r, captured, dt, d_out, NULL, NULL, what);
    float *direct_next = next ? device_forward(ctx, r, next, dt, d_out, NULL, NULL, what) : NULL;
    CHECK(rmlp_context_set_plan(ctx, captured) == RMLP_OK, "%s: set_plan: %s", what, rmlp_last_error());
    cudaGraphExec_t exec = capture_forward(ctx, captured, d_out, what);
    if (exec != NULL && direct != NULL) {
        float *got = replay(exec, d_out, n, dt);
        snprintf(line, sizeof line, "%s: replay vs direct", what);
        expect_identical(line, got, direct, n, di, 0);
        free(got);
        if (next != NULL && direct_next != NULL) {
            CHECK(rmlp_context_set_plan(ctx, next) == RMLP_OK, "%s: set_plan of the next batch: %s", what,
                  rmlp_last_error());
            got = replay(exec, d_out, n, dt);
            snprintf(line, sizeof line, "%s: replay, next plan set, vs its direct", what);
            expect_identical(line, got, direct_next, n, di, 0);
            error_stats e = measure(direct, direct_next, n);
            CHECK(e.rel_norm > 0.1, "%s: the two batches give nearly the same output (rel %.3g): the replay check "
                  "would not see a stale plan", what, e.rel_norm);
            free(got);
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    free(direct), free(direct_next);
}

/* CUDA graphs: a forward captured and replayed (radix on); replayed after setting another plan of
 * the same counts: other token ids (identity plans), and longer sequences than at capture, whose
 * rows a launch sized from the captured lengths would skip (identity and radix plans: 2 x 24
 * tokens sharing 12 captured, 36 + 12 sharing 12 replayed; N = 48, N' = 36 in both). */
static void test_graph(const char *dir) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, "qwen3_tiny", 0, path, &r)) return;
    /* Batch B: batch A's shape with other token ids, so its identity plan has A's shapes. */
    fixture_batch other = {tu_xmalloc(r.b.n_tokens * 4), tu_xmalloc(r.b.n_tokens * 4),
                   tu_xmalloc((r.b.n_seqs + 1) * 4), r.b.n_tokens, r.b.n_seqs};
    for (size_t i = 0; i < r.b.n_tokens; i++) other.ids[i] = (r.b.ids[i] * 7 + 3) % r.cfg.vocab_size;
    memcpy(other.pos, r.b.pos, r.b.n_tokens * 4);
    memcpy(other.cu, r.b.cu, (r.b.n_seqs + 1) * 4);
    static const uint32_t short_lens[2] = {24, 24}, long_lens[2] = {36, 12};
    fixture_batch shorter = two_sequences(short_lens, 12, r.cfg.vocab_size);
    fixture_batch longer = two_sequences(long_lens, 12, r.cfg.vocab_size);
    rmlp_planner *planner = NULL;
    CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner");
    rmlp_plan plan_b = make_plan(planner, &other, 0);
    rmlp_plan short_plans[2], long_plans[2];
    for (int radix = 0; radix < 2; radix++) {
        short_plans[radix] = make_plan(planner, &shorter, radix);
        long_plans[radix] = make_plan(planner, &longer, radix);
    }
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    if (n < 48 * (size_t)r.cfg.hidden_size) n = 48 * (size_t)r.cfg.hidden_size;
    for (int di = 0; di < (int)COUNT(DTYPES); di += 2) { /* F32 and BF16 */
        rmlp_dtype dt = DTYPES[di];
        rmlp_model *model = NULL;
        rmlp_context *ctx = load_cuda(path, dt, n / r.cfg.hidden_size, &model);
        void *d_out = dev_alloc(n * elem_size(dt));
        if (ctx != NULL) {
            graph_case(ctx, &r, &r.plans[1], NULL, dt, di, d_out, "graph of a forward (radix on)");
            graph_case(ctx, &r, &r.plans[0], &plan_b, dt, di, d_out, "graph of plan A (radix off), plan B set");
            graph_case(ctx, &r, &short_plans[0], &long_plans[0], dt, di, d_out,
                       "graph of 24+24 (radix off), 36+12 set");
            graph_case(ctx, &r, &short_plans[1], &long_plans[1], dt, di, d_out, "graph of 24+24 (radix on), 36+12 set");
        }
        /* rmlp_forward of a context in compact space: the graph holds its compact attention too */
        rmlp_context_params cp = rmlp_context_default_params();
        cp.attention_space = RMLP_ATTENTION_COMPACT;
        rmlp_context *compact = NULL;
        if (model != NULL && CHECK(rmlp_context_create_with_params(model, n / r.cfg.hidden_size, &cp, &compact) ==
                                           RMLP_OK &&
                                       rmlp_context_set_stream(compact, stream) == RMLP_OK,
                                   "compact context: %s", rmlp_last_error()))
            graph_case(compact, &r, &short_plans[1], &long_plans[1], dt, di, d_out,
                       "graph of 24+24 (compact attention), 36+12 set");
        rmlp_context_free(compact);
        cudaFree(d_out);
        rmlp_context_free(ctx);
        rmlp_model_free(model);
    }
    tu_plan_copy_free(&plan_b);
    for (int radix = 0; radix < 2; radix++) tu_plan_copy_free(&short_plans[radix]), tu_plan_copy_free(&long_plans[radix]);
    rmlp_planner_free(planner);
    fixture_batch_free(&other), fixture_batch_free(&shorter), fixture_batch_free(&longer);
    reference_free(&r);
}

int main(int argc, char **argv) {
    int rc = gpu_model_begin(argc, argv);
    if (rc >= 0) return rc;
    test_errors(argv[1]);
    test_graph(argv[1]);
    return gpu_model_end();
}
