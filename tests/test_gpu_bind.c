/*
 * test_gpu_bind.c: models bound from the host's device pointers (rmlp_model_bind_cuda: separate,
 * stacked and back-to-back tensors, every bias of llama_bias too; rmlp_model_bind_cuda_config: the
 * fixtures with windows, soft-caps and RoPE scaling) against the same checkpoint loaded on the
 * device, bit for bit, in F32, F16 and BF16, and bad bindings refused with the
 * context still working afterwards (helpers shared with test_gpu_model.c: gpu_model_util.h).
 * Without a CUDA device it prints SKIP and exits 77.
 * Usage: test_gpu_bind FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_model_util.h"

/* ---- models bound from device pointers ------------------------------------------------------ */

typedef struct binding_set {
    rmlp_weight_binding t[512];
    char names[512][128];
    void *allocs[512];
    size_t n, n_allocs;
} binding_set;

/* The checkpoint tensor `name` as f32 (NULL when absent); its element count in *count. */
static float *read_tensor(const checkpoint *ck, const char *name, size_t *count) {
    const st_tensor *t = checkpoint_find(ck, name);
    if (t == NULL) return NULL;
    size_t n = (size_t)(t->nbytes / (t->dtype == RMLP_DTYPE_F32 ? 4 : 2));
    float *x = tu_xmalloc(n * sizeof(float));
    dtype_to_f32(t->data, t->dtype, n, x);
    *count = n;
    return x;
}

static void *set_alloc(binding_set *set, size_t bytes) {
    void *d = dev_alloc(bytes);
    set->allocs[set->n_allocs++] = d;
    return d;
}

static void bind_one(binding_set *set, const char *name, const void *data, rmlp_dtype dt, uint64_t rows, uint64_t cols) {
    rmlp_weight_binding *b = &set->t[set->n];
    snprintf(set->names[set->n], sizeof set->names[0], "%s", name);
    b->name = set->names[set->n];
    b->data = data;
    b->dtype = dt;
    b->ndim = cols ? 2 : 1;
    b->shape[0] = rows;
    b->shape[1] = cols;
    set->n++;
}

/* Uploads the named checkpoint tensors (n of them, each rows[i] x cols) back to back into one
 * allocation, binding them under names[i] separately, or (stacked_name) as one stacked tensor. */
static void bind_group(binding_set *set, const checkpoint *ck, const char *const *ckpt_names,
                       const char *const *bind_names, const uint64_t *rows, uint64_t cols, size_t n,
                       const char *stacked_name, int one_allocation, rmlp_dtype dt) {
    size_t total = 0, es = elem_size(dt), per = cols ? cols : 1;
    for (size_t i = 0; i < n; i++) total += rows[i] * per;
    char *block = one_allocation ? set_alloc(set, total * es) : NULL;
    uint64_t stacked_rows = 0;
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t count = 0;
        float *x = read_tensor(ck, ckpt_names[i], &count);
        if (!CHECK(x != NULL && count == rows[i] * per, "checkpoint tensor %s", ckpt_names[i])) {
            free(x);
            return;
        }
        char *dst = one_allocation ? block + at * es : set_alloc(set, count * es);
        upload_as(dst, x, count, dt);
        if (stacked_name == NULL) bind_one(set, bind_names[i], dst, dt, rows[i], cols);
        stacked_rows += rows[i];
        at += count;
        free(x);
    }
    if (stacked_name != NULL) bind_one(set, stacked_name, block, dt, stacked_rows, cols);
}

/* mode 0: every tensor separate, checkpoint names; 1: Q/K/V and gate/up stacked (TEI's layout),
 * names without "model."; 2: separate names, but Q/K/V and gate/up back to back in memory. */
static void make_bindings(binding_set *set, const char *path, const rmlp_model_config *c, int mode, rmlp_dtype dt) {
    memset(set, 0, sizeof *set);
    checkpoint *ck = NULL;
    if (!CHECK(checkpoint_open(path, &ck) == RMLP_OK, "%s: %s", path, rmlp_last_error())) return;
    const char *p = checkpoint_find(ck, "model.embed_tokens.weight") ? "model." : "";
    const char *bp = mode == 1 ? "" : p; /* binding names' prefix */
    uint64_t h = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim;
    uint64_t qd = c->num_attention_heads * hd, kvd = c->num_key_value_heads * hd;
    char cn[4][128], bn[4][128], stacked[128];
    const char *cnp[4] = {cn[0], cn[1], cn[2], cn[3]}, *bnp[4] = {bn[0], bn[1], bn[2], bn[3]};
#define NAMES(i, fmt, ...) (snprintf(cn[i], 128, "%s" fmt, p, __VA_ARGS__), snprintf(bn[i], 128, "%s" fmt, bp, __VA_ARGS__))
    uint64_t one[1];
    NAMES(0, "%s", "embed_tokens.weight");
    one[0] = c->vocab_size;
    bind_group(set, ck, cnp, bnp, one, h, 1, NULL, 0, dt);
    NAMES(0, "%s", "norm.weight");
    one[0] = h;
    bind_group(set, ck, cnp, bnp, one, 0, 1, NULL, 0, dt);
    if (checkpoint_find(ck, "lm_head.weight")) {
        static const char *const lm[1] = {"lm_head.weight"};
        one[0] = c->vocab_size;
        bind_group(set, ck, lm, lm, one, h, 1, NULL, 0, dt);
    }
    for (uint32_t l = 0; l < c->num_hidden_layers; l++) {
        static const char *const singles[] = {"input_layernorm.weight",  "post_attention_layernorm.weight",
                                              "self_attn.o_proj.weight", "mlp.down_proj.weight",
                                              "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                              "self_attn.o_proj.bias",   "mlp.down_proj.bias",
                                              "pre_feedforward_layernorm.weight",
                                              "post_feedforward_layernorm.weight"};
        const uint64_t single_rows[] = {h, h, h, h, hd, hd, h, h, h, h},
                       single_cols[] = {0, 0, qd, inter, 0, 0, 0, 0, 0, 0};
        for (size_t i = 0; i < COUNT(singles); i++) {
            if ((i == 4 || i == 5) && !c->qk_norm) continue;
            if ((i == 6 && !c->o_proj_bias) || (i == 7 && !c->mlp_bias)) continue;
            if ((i == 8 || i == 9) && !c->sandwich_norms) continue;
            NAMES(0, "layers.%u.%s", l, singles[i]);
            one[0] = single_rows[i];
            bind_group(set, ck, cnp, bnp, one, single_cols[i], 1, NULL, 0, dt);
        }
        const uint64_t qkv_rows[3] = {qd, kvd, kvd}, gu_rows[2] = {inter, inter};
        static const char *const qkv[3] = {"q", "k", "v"}, *const gu[2] = {"gate", "up"};
        for (int i = 0; i < 3; i++) NAMES(i, "layers.%u.self_attn.%s_proj.weight", l, qkv[i]);
        snprintf(stacked, sizeof stacked, "layers.%u.self_attn.qkv_proj.weight", l);
        bind_group(set, ck, cnp, bnp, qkv_rows, h, 3, mode == 1 ? stacked : NULL, mode != 0, dt);
        if (c->attention_bias) {
            for (int i = 0; i < 3; i++) NAMES(i, "layers.%u.self_attn.%s_proj.bias", l, qkv[i]);
            snprintf(stacked, sizeof stacked, "layers.%u.self_attn.qkv_proj.bias", l);
            bind_group(set, ck, cnp, bnp, qkv_rows, 0, 3, mode == 1 ? stacked : NULL, mode == 1, dt);
        }
        for (int i = 0; i < 2; i++) NAMES(i, "layers.%u.mlp.%s_proj.weight", l, gu[i]);
        snprintf(stacked, sizeof stacked, "layers.%u.mlp.gate_up_proj.weight", l);
        bind_group(set, ck, cnp, bnp, gu_rows, h, 2, mode == 1 ? stacked : NULL, mode != 0, dt);
        if (c->mlp_bias) {
            for (int i = 0; i < 2; i++) NAMES(i, "layers.%u.mlp.%s_proj.bias", l, gu[i]);
            snprintf(stacked, sizeof stacked, "layers.%u.mlp.gate_up_proj.bias", l);
            bind_group(set, ck, cnp, bnp, gu_rows, 0, 2, mode == 1 ? stacked : NULL, mode == 1, dt);
        }
    }
#undef NAMES
    checkpoint_close(ck);
    /* cudaMemcpy from pageable memory may return before its DMA lands; the forwards run on a
     * non-blocking stream that does not wait for the legacy stream's copies. */
    CUDA_MUST(cudaDeviceSynchronize());
}

static void free_bindings(binding_set *set) {
    for (size_t i = 0; i < set->n_allocs; i++) cudaFree(set->allocs[i]);
    set->n_allocs = set->n = 0;
}

/* The set bound in dt: described by c, or (config_path not NULL) by that config.json. */
static rmlp_status bind_from(const rmlp_model_config *c, const char *config_path, const binding_set *set,
                             rmlp_dtype dt, rmlp_model **out) {
    rmlp_model_params params = rmlp_model_default_params();
    params.device = RMLP_DEVICE_CUDA;
    params.dtype = dt;
    *out = NULL;
    return config_path != NULL ? rmlp_model_bind_cuda_config(config_path, set->t, set->n, &params, out)
                               : rmlp_model_bind_cuda(c, set->t, set->n, &params, out);
}

static rmlp_status bind(const rmlp_model_config *c, const binding_set *set, rmlp_dtype dt, rmlp_model **out) {
    return bind_from(c, NULL, set, dt, out);
}

/* Bad bindings: each a status naming the tensor, no model. */
static void test_bind_errors(const char *path, const rmlp_model_config *c) {
    static binding_set set;
    make_bindings(&set, path, c, 0, RMLP_DTYPE_F32);
    if (set.n < 4) return;
    rmlp_model *model = (rmlp_model *)1;
    rmlp_weight_binding saved = set.t[1];
    char name[128];

    snprintf(name, sizeof name, "%s", set.t[1].name);
    size_t len = strlen(name);
    if (len + 1 < sizeof set.names[1]) set.names[1][len] = 'x', set.names[1][len + 1] = '\0'; /* "...weightx" */
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "is not a tensor of this model",
                  "bind: unknown name");
    CHECK(model == NULL, "out is NULL after a failed bind");
    snprintf(set.names[1], sizeof set.names[1], "%s", name);

    set.t[1].shape[0] += 1;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "has shape", "bind: wrong shape");
    set.t[1] = saved;
    set.t[1].dtype = RMLP_DTYPE_BF16;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "has dtype", "bind: wrong dtype");
    set.t[1] = saved;
    float *host = tu_xmalloc(4096);
    set.t[1].data = host;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_INVALID_ARGUMENT, "is not device memory",
                  "bind: a host pointer");
    set.t[1] = saved;
    free(host);
    set.t[set.n] = set.t[1];
    set.n++;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "binds the same tensor", "bind: duplicate");
    set.n--;
    /* the final norm (bound second) missing */
    rmlp_weight_binding last = set.t[set.n - 1];
    set.t[1] = last;
    set.n--;
    expect_status(bind(c, &set, RMLP_DTYPE_F32, &model), RMLP_ERR_MODEL, "missing tensor", "bind: a missing tensor");
    set.n++;
    set.t[1] = saved;
    set.t[set.n - 1] = last;
    rmlp_model_params params = rmlp_model_default_params();
    expect_status(rmlp_model_bind_cuda(c, set.t, set.n, &params, &model), RMLP_ERR_INVALID_ARGUMENT,
                  "needs RMLP_DEVICE_CUDA", "bind with device CPU");
    /* and the set as it is binds */
    CHECK(bind(c, &set, RMLP_DTYPE_F32, &model) == RMLP_OK, "bind after the errors: %s", rmlp_last_error());
    rmlp_model_free(model);
    free_bindings(&set);
}

/* Bound (each binding mode) against loaded, F32 and BF16. from_config: the checkpoints whose
 * config.json says more than rmlp_model_config can (per-layer windows, soft-caps, RoPE scaling,
 * Gemma 3's local RoPE base), bound with rmlp_model_bind_cuda_config from their folder, stacked
 * only (the loaded model's GEMM shapes). */
static void test_bind(const char *dir, const char *name, int from_config) {
    char path[PATH_LEN];
    reference r;
    if (!fixture_reference(dir, name, 0, path, &r)) return;
    static const char *const modes[] = {"separate tensors", "stacked qkv_proj/gate_up_proj", "back-to-back tensors"};
    size_t n = r.b.n_tokens * (size_t)r.cfg.hidden_size;
    for (int di = 0; di < (int)COUNT(DTYPES); di += 2) { /* F32 and BF16 */
        rmlp_dtype dt = DTYPES[di];
        rmlp_model *loaded = NULL;
        rmlp_context *lctx = load_cuda(path, dt, r.b.n_tokens, &loaded);
        void *d_out = dev_alloc(n * elem_size(dt));
        float *want = lctx ? device_forward(lctx, &r, &r.plans[1], dt, d_out, NULL, NULL, "loaded") : NULL;
        for (int mode = from_config; want != NULL && mode < (from_config ? 2 : 3); mode++) {
            static binding_set set;
            make_bindings(&set, path, &r.cfg, mode, dt);
            rmlp_model *model = NULL;
            rmlp_status status = bind_from(&r.cfg, from_config ? path : NULL, &set, dt, &model);
            char what[160];
            snprintf(what, sizeof what, "%s: bound (%s%s) vs loaded", name, modes[mode],
                     from_config ? ", from config.json" : "");
            if (CHECK(status == RMLP_OK, "%s: %s", what, rmlp_last_error())) {
                rmlp_model_config bc;
                CHECK(rmlp_model_get_config(model, &bc) == RMLP_OK && bc.has_lm_head == r.cfg.has_lm_head,
                      "%s: has_lm_head %d, want %d", what, bc.has_lm_head, r.cfg.has_lm_head);
                rmlp_context *ctx = cuda_context(model, r.b.n_tokens);
                float *got = ctx ? device_forward(ctx, &r, &r.plans[1], dt, d_out, NULL, NULL, what) : NULL;
                /* same weights, same GEMM shapes: identical; separate Q/K/V run 3 GEMMs: close */
                int same_shapes = mode == 1 || (mode == 2 && !r.cfg.attention_bias && !r.cfg.mlp_bias);
                if (got) expect_identical(what, got, want, n, di, same_shapes);
                free(got);
                rmlp_context_free(ctx);
                rmlp_model_free(model);
            }
            free_bindings(&set);
        }
        free(want);
        cudaFree(d_out);
        rmlp_context_free(lctx);
        rmlp_model_free(loaded);
    }
    if (strcmp(name, "qwen3_tiny") == 0 && !from_config) test_bind_errors(path, &r.cfg);
    reference_free(&r);
}

int main(int argc, char **argv) {
    int rc = gpu_model_begin(argc, argv);
    if (rc >= 0) return rc;
    test_bind(argv[1], "qwen3_tiny", 0);
    test_bind(argv[1], "qwen2_sharded", 0);
    test_bind(argv[1], "qwen3_bf16", 0);
    test_bind(argv[1], "llama_bias", 0); /* every bias: q/k/v and gate/up stacked or not, o_proj and down */
    static const char *const from_config[] = {"gemma2_window", "gemma3_text", "llama3_rope", "qwen2_yarn",
                                              "qwen2_window"};
    for (size_t i = 0; i < COUNT(from_config); i++) test_bind(argv[1], from_config[i], 1);
    return gpu_model_end();
}
