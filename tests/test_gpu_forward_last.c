/*
 * test_gpu_forward_last.c: rmlp_forward_last on a CUDA context (gpu/layer.cu's post_attention_last,
 * gpu_gather_last_rows), F32, F16 and BF16, on fixtures of every kind of layer (plain, biases,
 * RoPE scaling, windows, Gemma 2's sandwich norms and soft-caps, Gemma 3):
 *   - its rows against the CPU's rows cu_seqlens[s + 1] - 1 of rmlp_forward (radix on), under the
 *     dtype's tolerance of test_gpu_model (F32 1e-4 of the largest value: cuBLAS takes another
 *     kernel for n_seqs rows than for N'), and against the same CUDA context's rmlp_forward;
 *   - radix off and on; attention in full space (FlashInfer's paged full layout by default) and in
 *     compact space (a context made so); the host's attention through the callback
 *     (rmlp_attention / rmlp_attention_compact, as the layout asks);
 *   - sequences that repeat (two end on one compact row) get the same row;
 *   - captured in a CUDA graph and replayed: the direct call's bits;
 *   - through a prefix cache: the cached rmlp_forward's last rows, bit for bit.
 * Without a CUDA device it prints SKIP and exits 77.
 * Usage: test_gpu_forward_last FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_model_util.h"

static rmlp_status host_attention(void *user_data, const rmlp_attention_args *args) {
    return args->layout == RMLP_ATTENTION_COMPACT ? rmlp_attention_compact(user_data, args)
                                                  : rmlp_attention(user_data, args);
}

/* last (n_seqs, h) = rows cu[s + 1] - 1 of rows (n_tokens, h); the caller frees. */
static float *last_rows_of(const float *rows, const uint32_t *cu, size_t n_seqs, size_t h) {
    float *last = tu_xmalloc(n_seqs * h * sizeof(float));
    for (size_t s = 0; s < n_seqs; s++) memcpy(last + s * h, rows + (size_t)(cu[s + 1] - 1) * h, h * sizeof(float));
    return last;
}

/* set_plan + rmlp_forward_last (the context as the callback's user_data) into a poisoned buffer;
 * the download, NULL on failure. */
static float *device_last(rmlp_context *ctx, const rmlp_plan *plan, size_t h, rmlp_dtype dt, void *d_out,
                          rmlp_attention_fn attention, const char *what) {
    return device_run(ctx, plan, rmlp_forward_last, "forward_last", plan->n_seqs, h, dt, d_out, attention, ctx, what);
}

/* rmlp_forward_last captured in a graph and replayed against `direct`, bit for bit. */
static void check_graph(rmlp_context *ctx, const rmlp_plan *plan, size_t h, rmlp_dtype dt, int di, void *d_out,
                        const float *direct, const char *what) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_MUST(cudaStreamSynchronize(stream));
    CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmlp_status status = rmlp_forward_last(ctx, plan, NULL, NULL, d_out);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (CHECK(status == RMLP_OK && end == cudaSuccess, "%s: forward_last under capture: %s / %s", what,
              rmlp_last_error(), cudaGetErrorString(end)) &&
        CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "%s: instantiate", what)) {
        poison(d_out, plan->n_seqs * h * elem_size(dt));
        CUDA_MUST(cudaGraphLaunch(exec, stream));
        float *replayed = download(d_out, plan->n_seqs * h, dt);
        char name[320];
        snprintf(name, sizeof name, "%s, graph replay vs direct", what);
        expect_identical(name, replayed, direct, plan->n_seqs * h, di, 1);
        free(replayed);
        cudaGraphExecDestroy(exec);
    }
    if (graph) cudaGraphDestroy(graph);
}

/* One fixture in one dtype: every layout and mode against the CPU and the context's own forward. */
static void test_fixture(const char *dir, const char *name, int di) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, name, 0, path, &r)) return;
    rmlp_dtype dt = DTYPES[di];
    size_t h = r.cfg.hidden_size, n_tokens = r.b.n_tokens, n_seqs = r.b.n_seqs;
    rmlp_model *model = NULL;
    rmlp_context *full = load_cuda(path, dt, n_tokens, &model), *compact = NULL, *cached = NULL;
    rmlp_context_params cp = rmlp_context_default_params();
    cp.attention_space = RMLP_ATTENTION_COMPACT;
    if (model != NULL)
        CHECK(rmlp_context_create_with_params(model, n_tokens, &cp, &compact) == RMLP_OK &&
                  rmlp_context_set_stream(compact, stream) == RMLP_OK,
              "%s: compact context: %s", name, rmlp_last_error());
    cp = rmlp_context_default_params();
    cp.cache_bytes = 8u << 20;
    if (model != NULL)
        CHECK(rmlp_context_create_with_params(model, n_tokens, &cp, &cached) == RMLP_OK &&
                  rmlp_context_set_stream(cached, stream) == RMLP_OK,
              "%s: cached context: %s", name, rmlp_last_error());
    void *d_out = dev_alloc((n_tokens + 8) * h * elem_size(dt));
    float *cpu_last = last_rows_of(r.cpu_out[1], r.b.cu, n_seqs, h);
    rmlp_context *contexts[2] = {full, compact};
    for (int space = 0; space < 2 && contexts[space] != NULL; space++)
        for (int radix = 0; radix < 2; radix++)
            for (int host = 0; host < 2; host++) {
                char what[256];
                snprintf(what, sizeof what, "%s, radix %s, %s space, %s", name, radix ? "on" : "off",
                         space ? "compact" : "full", host ? "callback" : "built-in");
                const rmlp_plan *plan = &r.plans[radix];
                float *got = device_last(contexts[space], plan, h, dt, d_out, host ? host_attention : NULL, what);
                float *rows = got ? device_forward(contexts[space], &r, plan, dt, d_out, host ? host_attention : NULL,
                                                   host ? contexts[space] : NULL, what)
                                  : NULL;
                if (got != NULL && rows != NULL) {
                    float *want = last_rows_of(rows, r.b.cu, n_seqs, h);
                    char label[320];
                    snprintf(label, sizeof label, "%s vs CPU", what);
                    expect_close(label, di, got, cpu_last, n_seqs * h);
                    snprintf(label, sizeof label, "%s vs its forward", what);
                    expect_close(label, di, got, want, n_seqs * h);
                    if (!host && radix) check_graph(contexts[space], plan, h, dt, di, d_out, got, what);
                    free(want);
                }
                free(got), free(rows);
            }
    for (int round = 0; cached != NULL && round < 2; round++) { /* cold, then every row cached */
        char what[256];
        snprintf(what, sizeof what, "%s, prefix cache round %d", name, round);
        float *got = device_last(cached, &r.plans[1], h, dt, d_out, NULL, what);
        float *rows = got ? device_forward(cached, &r, &r.plans[1], dt, d_out, NULL, NULL, what) : NULL;
        if (got != NULL && rows != NULL) {
            float *want = last_rows_of(rows, r.b.cu, n_seqs, h);
            expect_identical(what, got, want, n_seqs * h, di, 1);
            free(want);
        }
        free(got), free(rows);
    }
    CUDA_MUST(cudaFree(d_out));
    free(cpu_last);
    rmlp_context_free(full), rmlp_context_free(compact), rmlp_context_free(cached);
    rmlp_model_free(model);
    reference_free(&r);
}

/* qwen3_tiny's first sequence twice, then its second: two sequences end on one compact row. */
static void test_repeated(const char *dir) {
    char path[PATH_LEN], file[PATH_LEN + 64], why[PATH_LEN + 200];
    fixture_batch src;
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    snprintf(file, sizeof file, "%s/batch.json", path);
    if (!CHECK(fixture_read_batch(file, &src, why, sizeof why) == 0, "%s", why)) return;
    size_t len0 = src.cu[1], len1 = src.cu[2] - src.cu[1], n = 2 * len0 + len1;
    fixture_batch b = {tu_xmalloc(n * 4), tu_xmalloc(n * 4), tu_xmalloc(4 * 4), n, 3};
    b.cu[0] = 0, b.cu[1] = (uint32_t)len0, b.cu[2] = (uint32_t)(2 * len0), b.cu[3] = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        size_t from = i < 2 * len0 ? i % len0 : len0 + (i - 2 * len0);
        b.ids[i] = src.ids[from], b.pos[i] = src.pos[from];
    }
    fixture_batch_free(&src);
    reference r;
    if (!reference_setup(path, NULL, b, &r)) {
        reference_free(&r);
        return;
    }
    rmlp_model *model = NULL;
    rmlp_context *ctx = load_cuda(path, RMLP_DTYPE_F32, n, &model);
    size_t h = r.cfg.hidden_size;
    void *d_out = dev_alloc((n + 8) * h * 4);
    float *got = ctx ? device_last(ctx, &r.plans[1], h, RMLP_DTYPE_F32, d_out, NULL, "repeated sequences") : NULL;
    if (got != NULL) {
        float *cpu_last = last_rows_of(r.cpu_out[1], r.b.cu, 3, h);
        expect_close("repeated sequences vs CPU", 0, got, cpu_last, 3 * h);
        CHECK(memcmp(got, got + h, h * sizeof(float)) == 0, "repeated sequences: their rows differ");
        free(cpu_last);
    }
    free(got);
    CUDA_MUST(cudaFree(d_out));
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    reference_free(&r);
}

int main(int argc, char **argv) {
    int begun = gpu_model_begin(argc, argv);
    if (begun >= 0) return begun;
    static const char *const names[] = {"qwen3_tiny", "qwen3_bias", "llama3_rope", "mistral_window",
                                        "gemma2_window", "gemma3_text"};
    for (size_t f = 0; f < COUNT(names); f++)
        for (int di = 0; di < 3; di++) test_fixture(argv[1], names[f], di);
    test_repeated(argv[1]);
    return gpu_model_end();
}
