/*
 * bench_decode.c: the decode benchmark of bench_decode.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/decode_kernels.h" /* compiled into this tool too: which set the library picks here */
#include "bench_decode.h"
#include "bench_cuda.h" /* the --gpu-variant specs' environment */
#include "cli.h"

#define SUFFIX 16
/* The reference (CPU): REF_M prompts of a REF_PREFIX-token prefix and one distinct token each. */
#define REF_M 128
#define REF_PREFIX 16
#define RUNS_MAX 9 /* the default and 8 --gpu-variant */

typedef struct decode_case {
    uint32_t prefix, m;
} decode_case;

static const decode_case cases[] = {{1024, 1}, {1024, 8}, {1024, 32}, {1024, 64}, {2048, 32}};

static uint32_t mix(uint64_t x) {
    x = (x ^ (x >> 31)) * 0x7FB5D329728EA185ull;
    x = (x ^ (x >> 27)) * 0x81DADEF4BC2DD44Dull;
    return (uint32_t)(x ^ (x >> 33));
}

/* The token sequence s appends at step t (the same in every way). */
static uint32_t step_token(uint32_t s, uint32_t t, uint32_t vocab) { return mix(((uint64_t)s << 32 | t) + 77) % vocab; }

/* m prompts of len tokens: a shared prefix, then tokens distinct per prompt. */
typedef struct prompts {
    uint32_t *ids, *pos; /* [m * len] */
    uint32_t len, m;
} prompts;

static int make_prompts(prompts *p, uint32_t prefix, uint32_t suffix, uint32_t m, uint32_t vocab) {
    p->len = prefix + suffix, p->m = m;
    size_t n = (size_t)m * p->len;
    p->ids = malloc(n * sizeof *p->ids), p->pos = malloc(n * sizeof *p->pos);
    if (p->ids == NULL || p->pos == NULL) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = (uint32_t)(i / p->len), t = (uint32_t)(i % p->len);
        p->ids[i] = t < prefix ? mix(t + 1) % vocab : mix(((uint64_t)(s + 1) << 40) | t) % vocab;
        p->pos[i] = t;
    }
    return 0;
}

static void free_prompts(prompts *p) { free(p->ids), free(p->pos); }

typedef struct way_result {
    double step_ms, attention_ms; /* totals over the steps */
    unsigned long tokens;
} way_result;

/* One session over prompts first .. first + n of p, `steps` steps, after clearing the prefix cache
 * when `clear`; adds its times to r. */
static int session(rmlp_context *ctx, rmlp_planner *planner, const prompts *p, uint32_t first, uint32_t n, bool clear,
                   unsigned long steps, bool shared, uint32_t vocab, float *logits, uint32_t *tokens, way_result *r) {
    if (clear && rmlp_context_cache_clear(ctx) != RMLP_OK) return -1;
    uint32_t *cu = malloc((n + 1) * sizeof *cu);
    if (cu == NULL) return -1;
    for (uint32_t s = 0; s <= n; s++) cu[s] = s * p->len;
    rmlp_plan_params pp = rmlp_plan_default_params();
    pp.threshold = 1.0;
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = (uint32_t)steps;
    gp.shared_prefix_attention = shared;
    rmlp_plan plan;
    rmlp_status status = rmlp_plan_build(planner, p->ids + (size_t)first * p->len, p->pos, (size_t)n * p->len, cu, n,
                                         &pp, &plan);
    free(cu);
    if (status != RMLP_OK || rmlp_generate_begin(ctx, &plan, &gp, logits) != RMLP_OK) return -1;
    for (unsigned long t = 0; t < steps; t++) {
        for (uint32_t s = 0; s < n; s++) tokens[s] = step_token(first + s, (uint32_t)t, vocab);
        if (rmlp_generate_step(ctx, tokens, n, logits) != RMLP_OK) return -1;
    }
    rmlp_generate_stats st;
    if (rmlp_generate_get_stats(ctx, &st) != RMLP_OK || rmlp_generate_end(ctx) != RMLP_OK) return -1;
    r->step_ms += st.step_ms, r->attention_ms += st.attention_ms, r->tokens += st.rows;
    return 0;
}

/* The batched/one-at-a-time ratio a case would reach if its batched step's position-wise part ran
 * at the lower of two costs per row: the reference's and its own (so the ceiling is never below
 * the measured ratio), with the case's own attention time (CPU only, where attention is timed). */
static double ceiling(double ref_row_ms, const way_result *on, const way_result *one) {
    double own_row_ms = (on->step_ms - on->attention_ms) / on->tokens;
    double row_ms = ref_row_ms < own_row_ms ? ref_row_ms : own_row_ms;
    return (one->step_ms / one->tokens) / (row_ms + on->attention_ms / on->tokens);
}

/* The decode attention a CUDA context's steps ran on (rmlp_context_gpu_stats): "flashinfer",
 * "chains", "mixed" (some steps each), "none" (no step, or no stats); the counts in *fi, *chains. */
static const char *decode_attention(rmlp_context *ctx, unsigned long long *fi, unsigned long long *chains) {
    rmlp_gpu_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (rmlp_context_gpu_stats(ctx, &st) != RMLP_OK) st.decode_steps_flashinfer = st.decode_steps_chains = 0;
    *fi = st.decode_steps_flashinfer, *chains = st.decode_steps_chains;
    return *fi && *chains ? "mixed" : *fi ? "flashinfer" : *chains ? "chains" : "none";
}

/* Run v's name: "default" (v = 0), else its --gpu-variant spec. */
static const char *variant_name(const decode_options *o, size_t v) { return v == 0 ? "default" : o->variants[v - 1]; }

/* A context as rmlp_context_create_with_params makes it, for run v: with the variables of its
 * --gpu-variant spec set while it is made. */
static rmlp_status variant_context(const decode_options *o, size_t v, const rmlp_model *model, size_t max_tokens,
                                   const rmlp_context_params *cp, rmlp_context **out) {
    bench_env_saved saved[BENCH_VARIANT_MAX_VARS];
    size_t n = v == 0 ? 0 : bench_cuda_variant_apply(o->variants[v - 1], saved);
    rmlp_status status = rmlp_context_create_with_params(model, max_tokens, cp, out);
    bench_cuda_variant_restore(saved, n);
    return status;
}

/* A case's JSON line or table row (of run v); attention figures only where they were timed
 * (the CPU); on CUDA the decode attention ctx's steps ran on. */
static void print_case(const decode_options *o, const decode_case *c, size_t v, rmlp_context *ctx,
                       const way_result *on, const way_result *off, const way_result *one, const way_result *ref) {
    unsigned long steps = o->steps;
    double tps_on = 1e3 * on->tokens / on->step_ms, tps_off = 1e3 * off->tokens / off->step_ms;
    double tps_one = 1e3 * one->tokens / one->step_ms;
    bool timed = o->device == NULL;
    double ref_row_ms = ref->tokens ? (ref->step_ms - ref->attention_ms) / ref->tokens : 0.0;
    double ceil_ratio = timed ? ceiling(ref_row_ms, on, one) : 0.0;
    unsigned long long fi_steps = 0, chain_steps = 0;
    const char *kernel = timed ? NULL : decode_attention(ctx, &fi_steps, &chain_steps);
    if (o->json) {
        printf("{\"case\": \"p%u_m%u\", \"device\": \"%s\", \"variant\": \"%s\", \"prefix\": %u, \"m\": %u, "
               "\"steps\": %lu, \"tokens_per_s_shared\": %.2f, \"tokens_per_s_per_seq_attention\": %.2f, "
               "\"tokens_per_s_one_at_a_time\": %.2f, \"batched_over_one\": %.3f",
               c->prefix, c->m, timed ? "cpu" : o->device, variant_name(o, v), c->prefix, c->m, steps, tps_on,
               tps_off, tps_one, tps_on / tps_one);
        if (!timed)
            printf(", \"decode_attention\": \"%s\", \"decode_steps_flashinfer\": %llu, \"decode_steps_chains\": %llu",
                   kernel, fi_steps, chain_steps);
        if (timed)
            printf(", \"cpu_threads\": %u, \"cpu_kernels\": \"%s\", \"batched_over_one_ceiling\": %.3f, "
                   "\"reference_position_wise_ms_per_row\": %.4f, "
                   "\"attention_ms_per_step_shared\": %.3f, "
                   "\"attention_ms_per_step_per_seq\": %.3f, \"attention_share_shared\": %.4f, "
                   "\"attention_share_per_seq\": %.4f",
                   rmlp_cpu_threads(), decode_kernels_pick().name, ceil_ratio, ref_row_ms, on->attention_ms / steps, off->attention_ms / steps,
                   on->attention_ms / on->step_ms, off->attention_ms / off->step_ms);
        printf("}\n");
    } else if (timed) {
        printf("p%-5u %3u %9.1f %9.1f %9.1f %9.1f %9.1f %8.2fx %7.2fx %9.2f %9.2f %7.2fx %6.0f%% %6.0f%%\n", c->prefix,
               c->m, on->step_ms / steps, tps_on, tps_off, tps_one, one->step_ms / steps / c->m, tps_on / tps_one,
               ceil_ratio, on->attention_ms / steps, off->attention_ms / steps, off->attention_ms / on->attention_ms,
               100 * on->attention_ms / on->step_ms, 100 * off->attention_ms / off->step_ms);
    } else {
        printf("p%-5u %3u %9.2f %9.1f %9.1f %9.1f %9.2f %8.2fx  %-10s %s\n", c->prefix, c->m, on->step_ms / steps,
               tps_on, tps_off, tps_one, one->step_ms / steps / c->m, tps_on / tps_one, kernel, variant_name(o, v));
    }
    fflush(stdout);
}

/* A case's three ways (and on the CPU the reference) alternating o->repeat times, in each variant's
 * context in turn, the fastest run of each kept, then a line per variant. */
static int run_case(rmlp_model *model, const rmlp_model_config *cfg, const decode_options *o, const decode_case *c) {
    uint32_t m = c->m, vocab = cfg->vocab_size, most = m > REF_M ? m : REF_M;
    unsigned long steps = o->steps;
    bool with_ref = o->device == NULL;
    prompts p = {0}, ref_p = {0};
    int rc = make_prompts(&p, c->prefix, SUFFIX, m, vocab);
    if (rc == 0 && with_ref) rc = make_prompts(&ref_p, REF_PREFIX, 1, REF_M, vocab);
    size_t n_tokens = (size_t)m * p.len, ref_tokens = (size_t)REF_M * (REF_PREFIX + 1);
    uint64_t slot = (2ull * cfg->num_hidden_layers * cfg->num_key_value_heads * cfg->head_dim + cfg->hidden_size) *
                    o->elem_bytes;
    uint64_t slots = c->prefix + (uint64_t)m * (SUFFIX + steps), ref_slots = REF_PREFIX + REF_M * (1 + steps);
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = ((slots > ref_slots ? slots : ref_slots) + 64) * slot;
    uint32_t *tokens = malloc(most * sizeof *tokens);
    float *logits = malloc((size_t)most * vocab * sizeof(float));
    size_t nv = 1 + o->n_variants; /* the runs: the default, then each variant */
    rmlp_context *ctx[RUNS_MAX] = {NULL};
    rmlp_planner *planner = NULL;
    if (rc == 0 && (tokens == NULL || logits == NULL || rmlp_planner_create(&planner) != RMLP_OK)) rc = -1;
    if (nv > RUNS_MAX) rc = -1;
    for (size_t v = 0; rc == 0 && v < nv; v++)
        if (variant_context(o, v, model, n_tokens > ref_tokens ? n_tokens : ref_tokens, &cp, &ctx[v]) != RMLP_OK)
            rc = -1;
    way_result on[RUNS_MAX] = {0}, off[RUNS_MAX] = {0}, one[RUNS_MAX] = {0}, ref[RUNS_MAX] = {0};
    for (unsigned long rep = 0; rc == 0 && rep < o->repeat; rep++) /* the ways alternate; the fastest of each kept */
        for (size_t v = 0; rc == 0 && v < nv; v++) {
            way_result r_on = {0}, r_off = {0}, r_one = {0}, r_ref = {0};
            rc = session(ctx[v], planner, &p, 0, m, true, steps, true, vocab, logits, tokens, &r_on);
            if (rc == 0) rc = session(ctx[v], planner, &p, 0, m, true, steps, false, vocab, logits, tokens, &r_off);
            for (uint32_t s = 0; rc == 0 && s < m; s++) /* one at a time: the prefix is cached after the first */
                rc = session(ctx[v], planner, &p, s, 1, s == 0, steps, true, vocab, logits, tokens, &r_one);
            if (rc == 0 && with_ref)
                rc = session(ctx[v], planner, &ref_p, 0, REF_M, true, steps, true, vocab, logits, tokens, &r_ref);
            if (rep == 0 || r_on.step_ms < on[v].step_ms) on[v] = r_on;
            if (rep == 0 || r_off.step_ms < off[v].step_ms) off[v] = r_off;
            if (rep == 0 || r_one.step_ms < one[v].step_ms) one[v] = r_one;
            if (rep == 0 || r_ref.step_ms < ref[v].step_ms) ref[v] = r_ref;
        }
    if (rc != 0) fprintf(stderr, "radixmlp bench --decode: p%u_m%u: %s\n", c->prefix, m, rmlp_last_error());
    for (size_t v = 0; rc == 0 && v < nv; v++) print_case(o, c, v, ctx[v], &on[v], &off[v], &one[v], &ref[v]);
    rmlp_planner_free(planner);
    for (size_t v = 0; v < RUNS_MAX; v++) rmlp_context_free(ctx[v]);
    free_prompts(&p), free_prompts(&ref_p);
    free(tokens), free(logits);
    return rc == 0 ? 0 : 1;
}

int bench_decode(rmlp_model *model, const rmlp_model_config *cfg, const decode_options *o) {
    if (!cfg->has_lm_head) {
        fprintf(stderr, "radixmlp bench --decode: the model has no LM head\n");
        return 1;
    }
    if (!o->json && o->device == NULL)
        printf("# decode on the CPU (%u threads: OpenBLAS's and the decode attention's; %s kernels), %u layers, %lu steps, "
               "fastest of %lu, prompts: a shared prefix + 16 distinct "
               "tokens; tok/s of a batched step with shared-prefix attention (sh), per-sequence attention (ps), and M "
               "one-at-a-time sessions (one); ceil: batched/one if the step's position-wise part cost per row what it "
               "costs in a step of 128 rows (a reference run in turn with the ways; the case's own cost if lower); "
               "attention ms per batched step\n"
               "%-6s %3s %9s %9s %9s %9s %9s %9s %8s %9s %9s %8s %7s %7s\n",
               rmlp_cpu_threads(), decode_kernels_pick().name, cfg->num_hidden_layers, o->steps, o->repeat, "prefix", "M",
               "ms/step", "tok/s sh",
               "tok/s ps", "tok/s one", "ms one", "batch/one", "ceil", "attn sh", "attn ps", "ps/sh", "att% sh", "att% ps");
    else if (!o->json)
        printf("# decode on %s, %u layers, %lu steps, fastest of %lu, prompts: a shared prefix + 16 distinct tokens; "
               "tok/s of a batched step with shared-prefix attention (sh), per-sequence attention (ps), and M "
               "one-at-a-time sessions (one); ms: host wall time of rmlp_generate_step (logits copied back); "
               "decode attn: the kernels the steps ran on (rmlp_context_gpu_stats); variant: --gpu-variant\n"
               "%-6s %3s %9s %9s %9s %9s %9s %9s  %-10s %s\n",
               o->device, cfg->num_hidden_layers, o->steps, o->repeat, "prefix", "M", "ms/step", "tok/s sh", "tok/s ps",
               "tok/s one", "ms one", "batch/one", "decode att", "variant");
    fflush(stdout);
    int rc = 0, ran = 0;
    for (size_t k = 0; rc == 0 && k < sizeof cases / sizeof cases[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "p%u_m%u", cases[k].prefix, cases[k].m);
        if (!cli_case_wanted(name, o->only, o->n_only)) continue;
        ran++;
        fprintf(stderr, "radixmlp bench --decode: %s...\n", name);
        rc = run_case(model, cfg, o, &cases[k]);
    }
    if (rc == 0 && ran == 0) fprintf(stderr, "radixmlp bench --decode: no case matches the --case names given\n");
    return rc != 0 || ran == 0;
}
