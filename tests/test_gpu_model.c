/*
 * test_gpu_model.c: the whole model on a CUDA device (RMLP_DEVICE_CUDA) against the CPU path
 * and the Hugging Face transformers fixtures, in F32, F16 and BF16. For every fixture in
 * integration_tests/fixtures, a random model whose sizes are not multiples of 8, one of head_dim
 * 64, and a Gemma 2 and a Gemma 3 of head_dim 256 with sliding windows (and Gemma 2's soft-cap)
 * (whose built-in attention in F16/BF16 is FlashInfer's, gpu/flashinfer.h; the fixtures' heads
 * are too narrow for it):
 *   - which attention kernel the built-in attention takes, per layer, in both layouts;
 *   - rmlp_forward, radix off and on, against the CPU path's rmlp_forward and (F32) against
 *     transformers' last_hidden; radix on against radix off on the device;
 *   - rmlp_context_pool (last, mean, normalised) and rmlp_score_pair on the device output;
 *   - the per-layer entry points with rmlp_attention between them, and rmlp_forward with a host
 *     attention callback (which also checks what the callback is handed; refused, naming the window,
 *     on a model whose sliding window is shorter than the batch's sequences);
 * and attention in compact space (rmlp_forward_compact, the compact per-layer calls and callback,
 * read-outs through scatter). Models bound from device pointers are test_gpu_bind.c's, errors on
 * the device and CUDA graphs test_gpu_graph.c's (helpers shared: gpu_model_util.h).
 *
 * Every device output is poisoned (0xFF bytes: NaN in every dtype) before each run; NaN anywhere
 * fails. Tolerances (see TOLS): F32 within 1e-4 of the largest reference value (the GPU does the
 * CPU's fp32 arithmetic in another order, GEMMs in fp32 without TF32), and 1e-4 absolute against
 * transformers as the CPU path is held to. F16/BF16 by relative norm error ||got - ref|| / ||ref||:
 * every weight and every stored activation is rounded to the dtype (relative error up to 2^-11
 * for F16, 2^-8 for BF16, half of that on average), about ten stored tensors per layer, 2-3
 * layers plus the final norm (~25 roundings); such roundings add like a random walk, expected
 * ~5 x 2^-12 = 1.2e-3 (F16) and ~5 x 2^-9 = 1e-2 (BF16: 3 bits fewer, eight times F16's). The
 * first run on a GPU (H200, 2026-11-29) measured up to 3.3e-3 (F16) and 2.0e-2 (BF16; 2.2e-2 on
 * one row of generation logits, test_gpu_cache): the bounds are 5e-3 for F16 and eight times
 * that, 4e-2, for BF16 (2e-2 until then, which those logits rows exceeded), while a real fault (a
 * wrong row, head, bias, residual or rounding of a whole tensor) gives errors of 1e-1 or more.
 * The errors measured are printed on every run. Without a CUDA device it prints SKIP and exits 77.
 * Usage: test_gpu_model FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_model_util.h"

static const char *const FIXTURES[] = FIXTURE_NAMES;

/* What the host callback saw. */
typedef struct callback_state {
    rmlp_context *ctx;
    rmlp_dtype dtype;
    uint32_t calls, max_seqlen;
    int bad; /* first problem found, 0 if none */
    char why[200];
} callback_state;

static int is_device_pointer(const void *p) {
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice;
}

/* The host's attention: checks what it is handed, then runs the library's own attention. */
static rmlp_status host_attention(void *user_data, const rmlp_attention_args *a) {
    callback_state *st = user_data;
    if (st->bad == 0) {
        if (a->stream != (void *)stream)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->stream %p, want the context's %p", a->stream,
                                  (void *)stream);
        else if (a->dtype != st->dtype)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->dtype %d, want %d", a->dtype, st->dtype);
        else if (a->max_seqlen != st->max_seqlen)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->max_seqlen %u, want %u", a->max_seqlen, st->max_seqlen);
        else if (a->layer != st->calls)
            st->bad = 1, snprintf(st->why, sizeof st->why, "args->layer %u at call %u", a->layer, st->calls);
        else if (!is_device_pointer(a->q) || !is_device_pointer(a->k) || !is_device_pointer(a->v) ||
                 !is_device_pointer(a->out) || !is_device_pointer(a->cu_seqlens_device))
            st->bad = 1, snprintf(st->why, sizeof st->why, "q/k/v/out/cu_seqlens_device are not all device memory");
    }
    st->calls++;
    return rmlp_attention(st->ctx, a);
}

/* embed, pre-attention, rmlp_attention, post-attention per layer, final norm: a host keeping attention. */
static float *per_layer(rmlp_context *ctx, const rmlp_model *model, const reference *r, const rmlp_plan *plan,
                        rmlp_dtype dt) {
    const rmlp_model_config *c = &r->cfg;
    size_t es = elem_size(dt), nt = plan->n_tokens, nc = plan->n_compact_padded, h = c->hidden_size;
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    void *hidden = dev_alloc(nc * h * es), *q = dev_alloc(nt * qd * es), *k = dev_alloc(nt * kvd * es);
    void *v = dev_alloc(nt * kvd * es), *attn = dev_alloc(nt * qd * es), *out = dev_alloc(nt * h * es);
    poison(hidden, nc * h * es), poison(q, nt * qd * es), poison(k, nt * kvd * es), poison(v, nt * kvd * es);
    poison(attn, nt * qd * es), poison(out, nt * h * es);
    rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs, .n_heads = c->num_attention_heads,
                                .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim, .dtype = dt,
                                .cu_seqlens = plan->cu_seqlens, .out = attn, .cu_seqlens_device = NULL};
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = fixture_run_per_layer(ctx, model, plan, &args, hidden, q, k, v, out, false);
    float *got = NULL;
    if (CHECK(status == RMLP_OK, "per-layer entry points: %s", rmlp_last_error())) got = download(out, nt * h, dt);
    cudaFree(hidden), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(attn), cudaFree(out);
    return got;
}

/* Compact rows (n_compact_padded, hidden) of a download, read through scatter into batch rows. */
static float *batch_rows(const float *compact, const rmlp_plan *plan, size_t hsz) {
    float *rows = tu_xmalloc(plan->n_tokens * hsz * sizeof(float));
    for (size_t i = 0; i < plan->n_tokens; i++)
        memcpy(rows + i * hsz, compact + (size_t)plan->scatter[i] * hsz, hsz * sizeof(float));
    return rows;
}

/* The host's attention in the compact layout: checks that it gets device arrays, then runs the
 * library's compact attention on them. */
static rmlp_status host_compact_attention(void *user_data, const rmlp_attention_args *a) {
    callback_state *st = user_data;
    if (st->bad == 0 && (a->layout != RMLP_ATTENTION_COMPACT || !is_device_pointer(a->qo_indptr_device) ||
                         !is_device_pointer(a->kv_indptr_device) || !is_device_pointer(a->kv_indices_device) ||
                         !is_device_pointer(a->q) || !is_device_pointer(a->out)))
        st->bad = 1, snprintf(st->why, sizeof st->why, "layout %d, or host pointers among q/out/layout arrays",
                              a->layout);
    st->calls++;
    return rmlp_attention_compact(st->ctx, a);
}

/* Attention in compact space on the device: rmlp_forward_compact against the CPU path and the
 * device's full-space forward (`full`, may be NULL), the compact per-layer calls, a compact-layout
 * callback, and the read-outs through scatter. */
static void test_compact_dtype(rmlp_context *ctx, const rmlp_model *model, const reference *r, int radix,
                               rmlp_dtype dt, int di, const char *name, const float *full) {
    const rmlp_plan *plan = &r->plans[radix];
    const rmlp_model_config *c = &r->cfg;
    size_t hsz = c->hidden_size, nc = plan->n_compact_padded, n = plan->n_tokens * hsz, es = elem_size(dt);
    size_t qd = (size_t)c->num_attention_heads * c->head_dim, kvd = (size_t)c->num_key_value_heads * c->head_dim;
    char what[160];
    void *d_out = dev_alloc(nc * hsz * es);
    poison(d_out, nc * hsz * es);
    rmlp_status status = rmlp_context_set_plan(ctx, plan);
    if (status == RMLP_OK) status = rmlp_forward_compact(ctx, plan, NULL, NULL, d_out);
    float *compact = NULL, *rows = NULL;
    if (CHECK(status == RMLP_OK, "%s: forward_compact radix=%d: %s", name, radix, rmlp_last_error())) {
        compact = download(d_out, nc * hsz, dt);
        rows = batch_rows(compact, plan, hsz);
        snprintf(what, sizeof what, "%s: compact attention radix %s vs CPU", name, radix ? "on" : "off");
        expect_close(what, di, rows, r->cpu_out[radix], n);
        if (full != NULL) {
            snprintf(what, sizeof what, "%s: compact vs full attention radix %s", name, radix ? "on" : "off");
            expect_close(what, di, rows, full, n);
        }
    }
    if (compact != NULL && radix) { /* read-outs through scatter, against the CPU's of the full output */
        float *pooled = tu_xmalloc(plan->n_seqs * hsz * sizeof(float)), *want = tu_xmalloc(plan->n_seqs * hsz * 4);
        CHECK(rmlp_context_pool_compact(ctx, plan, d_out, RMLP_POOLING_MEAN, false, pooled) == RMLP_OK &&
                  rmlp_pool(r->cpu_out[1], plan->n_tokens, (uint32_t)hsz, plan->cu_seqlens, plan->n_seqs,
                            RMLP_POOLING_MEAN, false, want) == RMLP_OK,
              "%s: pool_compact: %s", name, rmlp_last_error());
        expect_close("rmlp_context_pool_compact mean", di, pooled, want, plan->n_seqs * hsz);
        free(pooled), free(want);
        /* the compact per-layer calls with rmlp_attention_compact between them */
        void *hidden = dev_alloc(nc * hsz * es), *q = dev_alloc(nc * qd * es), *k = dev_alloc(nc * kvd * es);
        void *v = dev_alloc(nc * kvd * es), *attn = dev_alloc(nc * qd * es), *out = dev_alloc(nc * hsz * es);
        poison(out, nc * hsz * es), poison(attn, nc * qd * es);
        rmlp_attention_args args = {.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs,
                                    .n_heads = c->num_attention_heads, .n_kv_heads = c->num_key_value_heads,
                                    .head_dim = c->head_dim, .dtype = dt, .cu_seqlens = plan->cu_seqlens,
                                    .out = attn};
        status = fixture_run_per_layer(ctx, model, plan, &args, hidden, q, k, v, out, true);
        if (CHECK(status == RMLP_OK, "%s: compact per-layer: %s", name, rmlp_last_error())) {
            float *pl = download(out, plan->n_compact * hsz, dt);
            expect_identical("compact per-layer calls + rmlp_attention_compact", pl, compact, plan->n_compact * hsz, di,
                             0);
            free(pl);
        }
        cudaFree(hidden), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(attn), cudaFree(out);
        callback_state st = {.ctx = ctx, .dtype = dt};
        poison(d_out, nc * hsz * es);
        status = rmlp_forward_compact(ctx, plan, host_compact_attention, &st, d_out);
        if (CHECK(status == RMLP_OK && st.bad == 0, "%s: compact callback: %s %s", name, rmlp_last_error(),
                       st.why)) {
            float *cb = download(d_out, plan->n_compact * hsz, dt);
            expect_identical("rmlp_forward_compact with a compact callback", cb, compact, plan->n_compact * hsz, di, 0);
            free(cb);
        }
    }
    free(compact), free(rows);
    cudaFree(d_out);
}

/* Pooling and scores of the device output d_out (radix on) against the CPU path's. */
static void check_readouts(rmlp_context *ctx, const reference *r, const void *d_out, int di, const char *name) {
    const fixture_batch *b = &r->b;
    size_t h = r->cfg.hidden_size, ns = b->n_seqs;
    float *pooled = tu_xmalloc(ns * h * sizeof(float)), *want = tu_xmalloc(ns * h * sizeof(float));
    static const rmlp_pooling poolings[] = {RMLP_POOLING_LAST, RMLP_POOLING_MEAN, RMLP_POOLING_FIRST};
    static const char *const pooling_names[] = {"last", "mean", "first"};
    char what[160];
    for (size_t p = 0; p < COUNT(poolings); p++)
        for (int normalize = 0; normalize < 2; normalize++) {
            for (size_t i = 0; i < ns * h; i++) pooled[i] = NAN;
            rmlp_status status =
                rmlp_context_pool(ctx, d_out, b->n_tokens, b->cu, ns, poolings[p], normalize != 0, pooled);
            snprintf(what, sizeof what, "%s: rmlp_context_pool %s%s", name, pooling_names[p],
                     normalize ? " normalized" : "");
            if (!CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) continue;
            CHECK(rmlp_pool(r->cpu_out[1], b->n_tokens, (uint32_t)h, b->cu, ns, poolings[p], normalize != 0, want) ==
                      RMLP_OK,
                  "cpu pool: %s", rmlp_last_error());
            expect_close(what, di, pooled, want, ns * h);
        }
    float *logits = tu_xmalloc(2 * ns * sizeof(float)), *prob = tu_xmalloc(ns * sizeof(float));
    for (size_t i = 0; i < 2 * ns; i++) logits[i] = NAN;
    rmlp_status status = rmlp_score_pair(ctx, d_out, b->n_tokens, b->cu, ns, SCORE_A, SCORE_B, logits, prob);
    snprintf(what, sizeof what, "%s: rmlp_score_pair logits", name);
    if (!r->cfg.has_lm_head) {
        expect_status(status, RMLP_ERR_UNSUPPORTED, "no LM head", "score without an LM head on CUDA");
    } else if (CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) {
        expect_close(what, di, logits, r->cpu_logits, 2 * ns);
        for (size_t s = 0; s < ns; s++)
            CHECK(fabsf(prob[s] - 1.0f / (1.0f + expf(logits[2 * s + 1] - logits[2 * s]))) <= 1e-6f,
                  "%s: prob_a[%zu]=%g is not the softmax of its logits (%g, %g)", what, s, prob[s], logits[2 * s],
                  logits[2 * s + 1]);
    }
    free(pooled), free(want), free(logits), free(prob);
}

/* Attention arguments over `plan` with cu as its offsets; the buffers are d (only pointers are looked at). */
static rmlp_attention_args kernel_args(const rmlp_plan *plan, const uint32_t *cu, const rmlp_model_config *c,
                                       rmlp_dtype dt, void *d) {
    return (rmlp_attention_args){.n_tokens = plan->n_tokens, .n_seqs = plan->n_seqs, .n_heads = c->num_attention_heads,
                                 .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim, .scale = 1.0f,
                                 .dtype = dt, .cu_seqlens = cu, .q = d, .k = d, .v = d, .out = d,
                                 .n_compact = plan->n_compact, .qo_indptr = plan->qo_indptr, .kv_indptr = cu,
                                 .kv_indices = plan->scatter};
}

/* The built-in attention of ctx takes FlashInfer's kernel exactly where it should (gpu/flashinfer.h:
 * f16/bf16, head_dim 64, 128 or 256, a layer whose window and soft-cap it has a variant for, a build
 * with FlashInfer, batches it tiles as instantiated), for every layer, in both layouts, on `plan`
 * once set (internal: the context's CUDA half); and not after the plan's offsets change in place (a
 * planner rebuilding it with the same counts) until it is set again. */
static void check_attention_kernel(rmlp_context *ctx, const rmlp_model *model, const rmlp_plan *plan,
                                   const rmlp_model_config *c, rmlp_dtype dt, const char *name) {
    if (!CHECK(rmlp_context_set_plan(ctx, plan) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error())) return;
    void *d = dev_alloc(256); /* aligned: only the pointers are looked at */
    size_t group = c->num_attention_heads / c->num_key_value_heads;
    int fi = gpu_flashinfer_supports(dt, c->num_attention_heads, c->num_key_value_heads, c->head_dim);
    for (uint32_t layer = 0; layer < c->num_hidden_layers; layer++) {
        rmlp_layer_attention la;
        if (!CHECK(rmlp_model_layer_attention(model, layer, &la) == RMLP_OK, "%s: layer attention: %s", name,
                   rmlp_last_error()))
            break;
        int variant = gpu_flashinfer_takes_layer(c->head_dim, la.sliding_window, la.softcap);
        char line[96];
        for (int compact = 0; compact < 2; compact++) {
            rmlp_attention_args a = kernel_args(plan, plan->cu_seqlens, c, dt, d);
            a.layer = layer;
            int want = fi && variant &&
                       flashinfer_tiles(compact ? plan->n_compact : plan->n_tokens, plan->n_seqs, group, c->head_dim);
            int got = gpu_attention_uses_flashinfer(ctx->backend_ctx, &a, compact);
            CHECK(got == want, "%s: layer %u (window %u, softcap %g): %s attention (radix %s) takes %s, want %s", name,
                  layer, la.sliding_window, la.softcap, compact ? "compact" : "full", plan->use_radix ? "on" : "off",
                  got ? "FlashInfer" : "the reference kernel", want ? "FlashInfer" : "the reference kernel");
            snprintf(line, sizeof line, "attention kernel, layer %u (window %u, softcap %g), %s", layer,
                     la.sliding_window, la.softcap, compact ? "compact" : "full space");
            printf("  %-58s %s\n", line, got ? "FlashInfer" : "reference");
        }
    }
    uint32_t *cu = tu_xmalloc((plan->n_seqs + 1) * sizeof *cu);
    memcpy(cu, plan->cu_seqlens, (plan->n_seqs + 1) * sizeof *cu);
    rmlp_plan moved = *plan;
    moved.cu_seqlens = cu;
    if (plan->n_seqs >= 2 && cu[2] > cu[0] &&
        CHECK(rmlp_context_set_plan(ctx, &moved) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error())) {
        cu[1] = cu[1] > cu[0] ? cu[1] - 1 : cu[1] + 1; /* two lengths change, the counts stay */
        for (int compact = 0; compact < 2; compact++) {
            rmlp_attention_args a = kernel_args(&moved, cu, c, dt, d);
            CHECK(!gpu_attention_uses_flashinfer(ctx->backend_ctx, &a, compact), "%s: %s attention takes FlashInfer's work "
                  "split of the offsets set before they changed in place", name, compact ? "compact" : "full");
        }
        CHECK(rmlp_context_set_plan(ctx, plan) == RMLP_OK, "%s: set_plan: %s", name, rmlp_last_error());
    }
    free(cu);
    cudaFree(d);
}

/* Everything a loaded CUDA model must do, in one dtype. */
static void test_model_dtype(const char *path, const char *name, const reference *r, int di) {
    rmlp_dtype dt = DTYPES[di];
    rmlp_model *model = NULL;
    rmlp_context *ctx = load_cuda(path, dt, r->b.n_tokens, &model);
    if (ctx == NULL) {
        rmlp_model_free(model);
        return;
    }
    rmlp_model_config cfg;
    CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK && cfg.has_lm_head == r->cfg.has_lm_head &&
              cfg.hidden_size == r->cfg.hidden_size,
          "%s: the CUDA model's config differs from the CPU model's", name);
    size_t n = r->b.n_tokens * (size_t)r->cfg.hidden_size;
    void *d_out = dev_alloc(n * elem_size(dt));
    char what[160];
    float *got[2] = {NULL, NULL};
    for (int radix = 0; radix < 2; radix++) {
        snprintf(what, sizeof what, "%s: forward radix %s vs CPU", name, radix ? "on" : "off");
        got[radix] = device_forward(ctx, r, &r->plans[radix], dt, d_out, NULL, NULL, what);
        if (got[radix] == NULL) continue;
        expect_close(what, di, got[radix], r->cpu_out[radix], n);
        const st_tensor *want = r->expected ? st_find(r->expected, "last_hidden") : NULL;
        if (di == 0 && want != NULL && CHECK(want->nbytes == n * sizeof(float), "%s: last_hidden size", name)) {
            error_stats e = measure(got[radix], want->data, n);
            CHECK(e.max_abs <= FIXTURE_ATOL, "%s radix=%d f32: max abs error %.3g against transformers > %.0e", name,
                  radix, e.max_abs, FIXTURE_ATOL);
            printf("  %-58s f32: max abs %.3g\n", radix ? "vs transformers (radix on)" : "vs transformers (radix off)",
                   e.max_abs);
        }
    }
    if (got[0] && got[1]) {
        snprintf(what, sizeof what, "%s: radix on vs off on the device", name);
        expect_close(what, di, got[1], got[0], n);
    }
    if (got[1]) {
        /* d_out holds the radix-on output again after this forward (same plan, same result). */
        float *again = device_forward(ctx, r, &r->plans[1], dt, d_out, NULL, NULL, "repeat");
        if (again) expect_identical("forward repeated", got[1], again, n, di, 1);
        free(again);
        check_readouts(ctx, r, d_out, di, name);

        callback_state st = {.ctx = ctx, .dtype = dt};
        for (uint32_t s = 0; s < r->b.n_seqs; s++)
            if (r->b.cu[s + 1] - r->b.cu[s] > st.max_seqlen) st.max_seqlen = r->b.cu[s + 1] - r->b.cu[s];
        { /* the callback is told each layer's window and soft-cap, and hands them to rmlp_attention */
            float *cb = device_forward(ctx, r, &r->plans[1], dt, d_out, host_attention, &st, "callback");
            CHECK(st.bad == 0, "%s: the attention callback was handed: %s", name, st.why);
            CHECK(st.calls == r->cfg.num_hidden_layers, "%s: callback called %u times for %u layers", name, st.calls,
                  r->cfg.num_hidden_layers);
            if (cb) expect_identical("forward with the host attention callback", cb, got[1], n, di, 1);
            free(cb);
        }
        float *pl = per_layer(ctx, model, r, &r->plans[1], dt);
        if (pl) expect_identical("per-layer entry points + rmlp_attention", pl, got[1], n, di, 0);
        free(pl);
    }
    for (int radix = 0; radix < 2; radix++) check_attention_kernel(ctx, model, &r->plans[radix], &r->cfg, dt, name);
    for (int radix = 0; radix < 2; radix++) test_compact_dtype(ctx, model, r, radix, dt, di, name, got[radix]);
    free(got[0]), free(got[1]);
    cudaFree(d_out);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

static void test_fixture(const char *dir, const char *name) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, name, 1, path, &r)) return;
    printf("%s: N=%zu N'=%u\n", name, r.b.n_tokens, r.plans[1].n_compact);
    for (int di = 0; di < (int)COUNT(DTYPES); di++) test_model_dtype(path, name, &r, di);
    reference_free(&r);
}

/* A random Qwen3-shaped model (bench/tiny_model.c) on 733 tokens in 19 sequences sharing a 16-token
 * prefix: test_model_dtype in each dtype. */
static void test_random_model(const rmlp_model_config *config, const char *name) {
    rmlp_model_config cfg = *config;
    char dir[] = "/tmp/rmlp_gpu_random_XXXXXX", file[96];
    if (!CHECK(mkdtemp(dir) != NULL && tiny_model_write(dir, &cfg, 11) == 0, "writing the %s", name)) return;
    /* 19 sequences of 20-56 tokens (the last fills up to 733), all starting with the same 16. */
    uint64_t rng = 0x0DDu;
    fixture_batch b = {tu_xmalloc(733 * 4), tu_xmalloc(733 * 4), tu_xmalloc(20 * 4), 733, 19};
    uint32_t prefix[16];
    for (int i = 0; i < 16; i++) prefix[i] = tu_rand_range(&rng, 1, 100);
    b.cu[0] = 0;
    for (uint32_t s = 0; s < 19; s++) {
        b.cu[s + 1] = s < 18 ? b.cu[s] + 20 + (s * 13) % 37 : 733;
        for (uint32_t i = b.cu[s]; i < b.cu[s + 1]; i++) {
            uint32_t t = i - b.cu[s];
            b.ids[i] = t < 16 ? prefix[t] : tu_rand_range(&rng, 1, 100);
            b.pos[i] = t;
        }
    }
    reference r;
    if (reference_setup(dir, NULL, b, &r)) {
        printf("%s: N=%zu N'=%u\n", name, r.b.n_tokens, r.plans[1].n_compact);
        for (int di = 0; di < (int)COUNT(DTYPES); di++) test_model_dtype(dir, name, &r, di);
    }
    reference_free(&r);
    snprintf(file, sizeof file, "%s/model.safetensors", dir), remove(file);
    snprintf(file, sizeof file, "%s/config.json", dir), remove(file);
    remove(dir);
}

int main(int argc, char **argv) {
    int rc = gpu_model_begin(argc, argv);
    if (rc >= 0) return rc;
    /* RMLP_GPU_MODEL_QUICK=1 (for compute-sanitizer, 10-100x slower): two fixtures instead of all. */
    const char *quick = getenv("RMLP_GPU_MODEL_QUICK");
    size_t n_fixtures = quick != NULL && strcmp(quick, "1") == 0 ? 3 : COUNT(FIXTURES);
    for (size_t f = 0; f < n_fixtures; f++)
        if (n_fixtures == COUNT(FIXTURES) || f != 1) test_fixture(argv[1], FIXTURES[f]); /* quick: tiny, sharded */
    /* sizes that are not multiples of 8 (hidden 60, head_dim 12, 5 query heads over 1 KV head,
     * intermediate 100): the kernels' element paths, odd GEMM shapes, the reference attention */
    const rmlp_model_config odd = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 101, .hidden_size = 60,
                                   .intermediate_size = 100, .num_hidden_layers = 2, .num_attention_heads = 5,
                                   .num_key_value_heads = 1, .head_dim = 12, .max_position_embeddings = 1024,
                                   .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    test_random_model(&odd, "odd-sized model");
    /* 4 query heads of 64 over 2 KV heads: FlashInfer's attention in f16/bf16 (gpu/flashinfer.h) */
    rmlp_model_config fi_shaped = odd;
    fi_shaped.hidden_size = 96, fi_shaped.intermediate_size = 160, fi_shaped.num_attention_heads = 4;
    fi_shaped.num_key_value_heads = 2, fi_shaped.head_dim = 64;
    test_random_model(&fi_shaped, "model of head_dim 64");
    /* Gemma-shaped, head_dim 256 (FlashInfer's 64-row tiles): Gemma 2 with its soft-cap on both
     * layers and a window of 12 keys on layer 0 (shorter than the batch's shared prefix of 16), the
     * scale and cap chosen so that the cap bites on these small random weights; Gemma 3 with both
     * layers sliding (every layer but each 6th) and no cap */
    const rmlp_model_config gemma2 = {.architecture = RMLP_ARCH_GEMMA2, .vocab_size = 101, .hidden_size = 96,
                                      .intermediate_size = 160, .num_hidden_layers = 2, .num_attention_heads = 4,
                                      .num_key_value_heads = 2, .head_dim = 256, .max_position_embeddings = 1024,
                                      .rms_norm_eps = 1e-6, .rope_theta = 1e4, .tie_word_embeddings = true,
                                      .activation = RMLP_ACTIVATION_GELU_TANH, .sliding_window = 12,
                                      .query_pre_attn_scalar = 1, .attn_logit_softcapping = 0.5};
    test_random_model(&gemma2, "Gemma 2 model of head_dim 256");
    rmlp_model_config gemma3 = gemma2;
    gemma3.architecture = RMLP_ARCH_GEMMA3_TEXT, gemma3.qk_norm = true, gemma3.attn_logit_softcapping = 0;
    gemma3.query_pre_attn_scalar = 0;
    test_random_model(&gemma3, "Gemma 3 model of head_dim 256");
    return gpu_model_end();
}
