/*
 * test_generate.c: generation on the prefix tree (generate/session.c, cpu/decode.c, cpu/decode_attention.c).
 *   - Greedy ids equal transformers' greedy generate on every fixture with an LM head
 *     (integration_tests/fixtures/<name>/generate.json, made by tools/make_generate_fixtures.py):
 *     six prompts in one session (three sharing a 22-token prefix, one a strict prefix of another,
 *     one repeated, one sharing nothing), with shared-prefix attention on and off.
 *   - Every logits row of begin and of each step against a full forward of the same sequence
 *     (rmlp_forward on a context without a cache, the LM head on its last row): within 1e-5 of the
 *     largest |logit|; shared-prefix attention on against off, within 1e-5.
 *   - Sequences finishing mid-batch leave the others' logits unchanged up to fp32 rounding (1e-5 of
 *     the largest: the GEMMs run on fewer rows and the shared keys' chains change; about 1e-6 seen),
 *     against a session in which nobody finishes, on fresh contexts; a second session over the same prompts and
 *     tokens finds every row cached (nothing computed) and gives the same logits.
 *   - The same session on 1 and on 4 CPU threads (the decode attention's pool): the same logits up
 *     to OpenBLAS's rounding on more threads (1e-5 of the largest, as the other fp32 comparisons;
 *     about 1e-6 seen; with OpenBLAS on one thread they were the same bit for bit).
 *   - Begin needs no rmlp_context_set_plan: with none set, with another batch's plan set, and with
 *     its own set first, the same logits bit for bit (gen_check_begin_plan; test_gpu_cache runs
 *     the same check on the device, where begin sets the plan itself).
 *   - After every session nothing stays locked (kv_pool_check), and a small cache evicts finished
 *     sequences' rows to make room.
 *   - Bad input: no cache, no LM head, no session, wrong n_tokens, a token out of the vocabulary,
 *     finishing twice, a step after every sequence finished, a second begin, the token budget,
 *     clearing the cache during a session, prompts too large for the cache, a cache too full for a
 *     step (which changes nothing), a bad params struct: statuses with messages.
 * Usage: test_generate FIXTURES_DIR
 */
#include <math.h>

#include "cache/kv_cache.h"
#include "cache/kv_pool.h"
#include "ffi/src/model_internal.h"
#include "model/weights.h"
#include "test_util.h"
#include "fixtures.h"
#include "gen_fixture.h"

/* The plan of sequences seqs[0 .. n) (len[s] tokens, positions 0..). */
static int plan_of(rmlp_planner *planner, uint32_t (*seqs)[MAX_LEN * 2], const uint32_t *len, uint32_t n,
                   rmlp_plan *plan) {
    const uint32_t *rows[MAX_SEQS];
    for (uint32_t s = 0; s < n; s++) rows[s] = seqs[s];
    return gen_plan_rows(planner, rows, len, n, plan) == RMLP_OK ? 0 : -1;
}

/* logits (vocab) of a full forward of seq (len tokens) at its last row, on a context without a cache,
 * soft-capped (in double) where the model caps them (Gemma 2's final_logit_softcapping). */
static int full_logits(rmlp_context *plain, rmlp_planner *planner, const uint32_t *seq, uint32_t len, float *hidden,
                       float *logits) {
    static uint32_t one[1][MAX_LEN * 2];
    memcpy(one[0], seq, len * sizeof(uint32_t));
    rmlp_plan plan;
    if (plan_of(planner, one, &len, 1, &plan) != 0 || rmlp_forward(plain, &plan, NULL, NULL, hidden) != RMLP_OK)
        return -1;
    const rmlp_model *m = plain->model;
    const model_weights *w = m->backend_model; /* a CPU model's (cpu/runner.h) */
    const float *last = hidden + (size_t)(len - 1) * m->config.hidden_size;
    for (uint32_t v = 0; v < m->config.vocab_size; v++) {
        double acc = 0.0;
        for (uint32_t d = 0; d < m->config.hidden_size; d++)
            acc += (double)last[d] * w->lm_head[(size_t)v * m->config.hidden_size + d];
        double cap = m->config.final_logit_softcapping;
        logits[v] = (float)(cap != 0 ? cap * tanh(acc / cap) : acc);
    }
    return 0;
}

static rmlp_context *cached_context(const rmlp_model *model, const rmlp_model_config *cfg, uint64_t slots) {
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = slots * kv_cache_slot_bytes(cfg, sizeof(float));
    rmlp_context *ctx = NULL;
    return rmlp_context_create_with_params(model, MAX_SEQS * MAX_LEN * 2, &params, &ctx) == RMLP_OK ? ctx : NULL;
}

static void check_unlocked(rmlp_context *ctx, const char *what) {
    char why[200];
    CHECK(kv_pool_check(ctx->cache->pool, why, sizeof why) == 0, "%s: after the session: %s", what, why);
}

/* What test_greedy's lockstep compares each row with: the full forward of the sequence so far. */
typedef struct greedy_check {
    const char *name;
    rmlp_context *plain;
    rmlp_planner *planner;
    float *ref, *hidden; /* (vocab), (MAX_LEN * 2, hidden_size) */
    double worst_full, worst_onoff;
} greedy_check;

/* Row i (sequence s) of a step: shared-prefix attention on (g->la) vs off (g->lb), and on vs the
 * full forward of the prompt and the ids generated so far, both within 1e-5 relative. */
static int compare_greedy(void *arg, const gen_lockstep *g, int step, size_t i, uint32_t s) {
    greedy_check *c = arg;
    const float *lon = g->la + i * g->vocab;
    double r = 0.0, d = tu_max_abs_diff(lon, g->lb + i * g->vocab, g->vocab, &r);
    c->worst_onoff = d / r > c->worst_onoff ? d / r : c->worst_onoff;
    CHECK(d <= 1e-5 * r, "%s, step %d, seq %u: shared-prefix attention on vs off: %.3g (max %.3g)", c->name, step, s,
          d, r);
    uint32_t seq[MAX_LEN * 2], len = g->f->prompt_len[s];
    memcpy(seq, g->f->prompt[s], len * sizeof *seq);
    memcpy(seq + len, g->got[s], g->got_len[s] * sizeof *seq);
    len += g->got_len[s];
    if (!CHECK(full_logits(c->plain, c->planner, seq, len, c->hidden, c->ref) == 0, "%s: full forward: %s", c->name,
               rmlp_last_error()))
        return 0;
    d = tu_max_abs_diff(lon, c->ref, g->vocab, &r);
    c->worst_full = d / r > c->worst_full ? d / r : c->worst_full;
    CHECK(d <= 1e-5 * r, "%s, step %d, seq %u: logits vs the full forward: %.3g (max %.3g)", c->name, step, s, d, r);
    return 1;
}

/* One fixture: greedy on and off in lockstep, every logits row against the full forward. */
static void test_greedy(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gen_fixture f;
    int read = read_fixture(path, &f);
    if (read == -1) {
        printf("%s: no generate.json (no LM head), skipped\n", name);
        return;
    }
    if (!CHECK(read == 0, "%s: generate.json is malformed", name)) return;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK && rmlp_model_get_config(model, &cfg) == RMLP_OK &&
                   rmlp_planner_create(&planner) == RMLP_OK,
               "%s: load: %s", name, rmlp_last_error()))
        return;
    size_t vocab = cfg.vocab_size;
    rmlp_context *on = cached_context(model, &cfg, 4096), *off = cached_context(model, &cfg, 4096), *plain = NULL;
    CHECK(rmlp_context_create(model, MAX_LEN * 2, &plain) == RMLP_OK && on && off, "%s: contexts: %s", name,
          rmlp_last_error());
    float *lon = tu_xmalloc(MAX_SEQS * vocab * 4), *loff = tu_xmalloc(MAX_SEQS * vocab * 4);
    greedy_check c = {name, plain, planner, tu_xmalloc(vocab * 4), tu_xmalloc(MAX_LEN * 2 * cfg.hidden_size * 4),
                      0.0, 0.0};
    static uint32_t seqs[MAX_SEQS][MAX_LEN * 2];
    uint32_t len[MAX_SEQS] = {0};
    for (uint32_t s = 0; s < f.n; s++) memcpy(seqs[s], f.prompt[s], f.prompt_len[s] * 4), len[s] = f.prompt_len[s];
    rmlp_plan plan;
    rmlp_generate_params gp_off = rmlp_generate_default_params();
    gp_off.max_new_tokens = f.max_new;
    gp_off.shared_prefix_attention = false;
    rmlp_generate_params gp_on = gp_off;
    gp_on.shared_prefix_attention = true;
    int ok = plain && on && off && plan_of(planner, seqs, len, f.n, &plan) == 0 &&
             CHECK(rmlp_generate_begin(on, &plan, &gp_on, lon) == RMLP_OK &&
                       rmlp_generate_begin(off, &plan, &gp_off, loff) == RMLP_OK,
                   "%s: begin: %s", name, rmlp_last_error());
    gen_lockstep g = {.f = &f, .a = on, .b = off, .la = lon, .lb = loff, .vocab = vocab};
    if (ok) ok = gen_run_lockstep(&g, name, compare_greedy, &c);
    if (ok) gen_check_generated(&g, name);
    if (ok) {
        rmlp_generate_stats st;
        CHECK(rmlp_generate_get_stats(on, &st) == RMLP_OK && st.n_seqs == f.n && st.n_active == 0 &&
                  st.rows_computed < st.rows && st.steps > 0,
              "%s: stats: %llu seqs, %llu active, %llu of %llu rows computed (the repeated prompt shares its rows)",
              name, (unsigned long long)st.n_seqs, (unsigned long long)st.n_active,
              (unsigned long long)st.rows_computed, (unsigned long long)st.rows);
    }
    CHECK(rmlp_generate_end(on) == RMLP_OK && rmlp_generate_end(off) == RMLP_OK, "%s: end", name);
    if (on) check_unlocked(on, name);
    printf("%s: greedy ids as transformers' (%u prompts x %u tokens); worst vs full forward %.3g, on vs off %.3g\n",
           name, f.n, f.max_new, c.worst_full, c.worst_onoff);
    free(lon), free(loff), free(c.ref), free(c.hidden);
    rmlp_context_free(on), rmlp_context_free(off), rmlp_context_free(plain);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
}

/* Runs `steps` greedy steps over the fixture's prompts on ctx, finishing sequence s after
 * finish_at[s] steps (0: never); logits of every step by sequence into out (steps+1, n, vocab; rows
 * of finished sequences left alone). */
static int run_session(rmlp_context *ctx, rmlp_planner *planner, const gen_fixture *f, int steps,
                       const int *finish_at, size_t vocab, const uint32_t *forced, float *out) {
    static uint32_t seqs[MAX_SEQS][MAX_LEN * 2];
    uint32_t len[MAX_SEQS] = {0}, active[MAX_SEQS], tokens[MAX_SEQS];
    for (uint32_t s = 0; s < f->n; s++) memcpy(seqs[s], f->prompt[s], f->prompt_len[s] * 4), len[s] = f->prompt_len[s];
    rmlp_plan plan;
    float *logits = tu_xmalloc(MAX_SEQS * vocab * 4);
    int ok = plan_of(planner, seqs, len, f->n, &plan) == 0 && rmlp_generate_begin(ctx, &plan, NULL, logits) == RMLP_OK;
    size_t n_active = f->n;
    for (uint32_t s = 0; s < f->n; s++) active[s] = s;
    for (int step = 0; ok && step <= steps; step++) {
        size_t next = 0;
        for (size_t i = 0; i < n_active; i++) {
            uint32_t s = active[i];
            memcpy(out + ((size_t)step * f->n + s) * vocab, logits + i * vocab, vocab * 4);
            if (finish_at[s] == step + 1) {
                ok &= rmlp_generate_finish(ctx, s) == RMLP_OK;
                continue;
            }
            tokens[next] = forced[(size_t)step * f->n + s];
            active[next++] = s;
        }
        n_active = next;
        if (ok && step < steps && n_active > 0) ok = rmlp_generate_step(ctx, tokens, n_active, logits) == RMLP_OK;
    }
    ok &= rmlp_generate_end(ctx) == RMLP_OK;
    free(logits);
    return ok ? 0 : -1;
}

/* qwen3_tiny's generate.json, model, config and a planner. 0, or -1 after a failed check. */
static int load_tiny(const char *dir, gen_fixture *f, rmlp_model **model, rmlp_model_config *cfg,
                     rmlp_planner **planner) {
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    return CHECK(read_fixture(path, f) == 0 && rmlp_model_load(path, NULL, model) == RMLP_OK &&
                     rmlp_model_get_config(*model, cfg) == RMLP_OK && rmlp_planner_create(planner) == RMLP_OK,
                 "qwen3_tiny: %s", rmlp_last_error())
               ? 0
               : -1;
}

/* tokens (n): pseudo-random ids below vocab, from seed. */
static void random_tokens(uint64_t seed, size_t vocab, uint32_t *tokens, size_t n) {
    for (size_t i = 0; i < n; i++) tokens[i] = tu_rand_range(&seed, 0, (uint32_t)vocab - 1);
}

/* Sequences finishing mid-batch; the same session again from the cache. */
static void test_finish(const char *dir) {
    gen_fixture f;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (load_tiny(dir, &f, &model, &cfg, &planner) != 0) return;
    enum { STEPS = 6 };
    size_t vocab = cfg.vocab_size, per = (STEPS + 1) * (size_t)f.n * vocab;
    uint32_t forced[(STEPS + 1) * MAX_SEQS];
    random_tokens(19, vocab, forced, sizeof forced / sizeof forced[0]);
    for (int step = 0; step <= STEPS; step++) forced[step * f.n + 5] = forced[step * f.n + 0]; /* 0 and 5: same prompt */
    int none[MAX_SEQS] = {0}, some[MAX_SEQS] = {0};
    some[1] = 2, some[4] = 3, some[5] = 1; /* finish after these many steps */
    float *all = tu_xmalloc(per * 4), *part = tu_xmalloc(per * 4), *again = tu_xmalloc(per * 4);
    rmlp_context *a = cached_context(model, &cfg, 4096), *b = cached_context(model, &cfg, 4096);
    int ok = CHECK(a && b && run_session(a, planner, &f, STEPS, none, vocab, forced, all) == 0 &&
                       run_session(b, planner, &f, STEPS, some, vocab, forced, part) == 0,
                   "sessions: %s", rmlp_last_error());
    double worst = 0.0;
    for (int step = 0; ok && step <= STEPS; step++)
        for (uint32_t s = 0; s < f.n; s++) {
            if (some[s] != 0 && step >= some[s]) continue;
            size_t at = ((size_t)step * f.n + s) * vocab;
            double r = 0.0, d = tu_max_abs_diff(part + at, all + at, vocab, &r);
            worst = d / r > worst ? d / r : worst;
            CHECK(d <= 1e-5 * r, "step %d, seq %u: others finishing changed the logits by %.3g (max %.3g)", step, s, d,
                  r);
        }
    printf("finishing mid-batch: worst change of the others' logits %.3g\n", worst);
    if (ok) check_unlocked(b, "finishing mid-batch");
    /* again on a: every row is cached now, prompts and generated ones */
    rmlp_cache_stats before, after;
    ok = ok && CHECK(rmlp_context_cache_stats(a, &before) == RMLP_OK &&
                         run_session(a, planner, &f, STEPS, none, vocab, forced, again) == 0 &&
                         rmlp_context_cache_stats(a, &after) == RMLP_OK,
                     "again: %s", rmlp_last_error());
    CHECK(ok && after.computed_tokens == before.computed_tokens, "again: %llu rows computed, all should be cached",
          (unsigned long long)(after.computed_tokens - before.computed_tokens));
    double r = 0.0, d = ok ? tu_max_abs_diff(again, all, per, &r) : 0.0;
    CHECK(ok && d <= 1e-6 * r, "again from the cache: logits differ by %.3g (max %.3g)", d, r);
    if (ok) check_unlocked(a, "again");
    free(all), free(part), free(again);
    rmlp_context_free(a), rmlp_context_free(b);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
}

/* Begin needs no rmlp_context_set_plan (gen_check_begin_plan): on the CPU the three sessions
 * compute the same rows through the same kernels, so their logits are the same bit for bit. */
static void test_begin_plan(const char *dir) {
    gen_fixture f;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (load_tiny(dir, &f, &model, &cfg, &planner) != 0) return;
    rmlp_context *ctx = cached_context(model, &cfg, 4096);
    if (CHECK(ctx != NULL, "context: %s", rmlp_last_error())) gen_check_begin_plan(ctx, &f, cfg.vocab_size, 0.0, "cpu");
    rmlp_context_free(ctx);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
}

/* The same session on one CPU thread and on four (the decode attention and the steps' few-row
 * linear layers then run on a pool of the session's threads, cpu/workers.c): the same logits, up
 * to OpenBLAS's rounding on more threads in the prefill and the one-row steps (1e-5 of the
 * largest; the attention and the few-row layers are the same bit for bit on any count:
 * test_decode_attention). */
static void test_threads(const char *dir) {
    gen_fixture f;
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (load_tiny(dir, &f, &model, &cfg, &planner) != 0) return;
    enum { STEPS = 4 };
    size_t vocab = cfg.vocab_size, per = (STEPS + 1) * (size_t)f.n * vocab;
    uint32_t forced[(STEPS + 1) * MAX_SEQS];
    random_tokens(23, vocab, forced, sizeof forced / sizeof forced[0]);
    int none[MAX_SEQS] = {0};
    float *one = tu_xmalloc(per * 4), *four = tu_xmalloc(per * 4);
    uint32_t before = rmlp_cpu_threads();
    rmlp_context *a = cached_context(model, &cfg, 4096), *b = cached_context(model, &cfg, 4096);
    int ok = CHECK(a && b && rmlp_set_cpu_threads(1) == RMLP_OK &&
                       run_session(a, planner, &f, STEPS, none, vocab, forced, one) == 0 &&
                       rmlp_set_cpu_threads(4) == RMLP_OK &&
                       run_session(b, planner, &f, STEPS, none, vocab, forced, four) == 0,
                   "sessions on 1 and 4 threads: %s", rmlp_last_error());
    rmlp_set_cpu_threads(before);
    double r = 0.0, d = ok ? tu_max_abs_diff(four, one, per, &r) : 0.0;
    CHECK(ok && d <= 1e-5 * r, "4 threads against 1: logits differ by %.3g (max %.3g)", d, r);
    printf("a session on 4 threads against 1: logits differ by %.3g (%s)\n", d,
           ok && memcmp(one, four, per * 4) == 0 ? "bit for bit the same" : "not bit for bit");
    free(one), free(four);
    rmlp_context_free(a), rmlp_context_free(b);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
}

#define EXPECT(call, want, text, ...)                                                                          \
    do {                                                                                                      \
        rmlp_status got_ = (call);                                                                           \
        tu_record_bad_input(__VA_ARGS__, got_, rmlp_last_error());                                           \
        CHECK(got_ == (want) && strstr(rmlp_last_error(), text) != NULL, __VA_ARGS__);                       \
        if (got_ != (want) || strstr(rmlp_last_error(), text) == NULL)                                       \
            printf("  got %d: %s\n", got_, rmlp_last_error());                                                \
    } while (0)

static void test_bad_input(const char *dir) {
    char path[1024];
    gen_fixture f;
    rmlp_model *model = NULL, *headless = NULL;
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    if (load_tiny(dir, &f, &model, &cfg, &planner) != 0) return;
    static uint32_t seqs[MAX_SEQS][MAX_LEN * 2];
    uint32_t len[MAX_SEQS] = {0};
    for (uint32_t s = 0; s < f.n; s++) memcpy(seqs[s], f.prompt[s], f.prompt_len[s] * 4), len[s] = f.prompt_len[s];
    size_t vocab = cfg.vocab_size;
    float *logits = tu_xmalloc(MAX_SEQS * vocab * 4);
    uint32_t tokens[MAX_SEQS] = {1, 2, 3, 4, 5, 6, 7, 8};
    rmlp_plan plan;
    if (!CHECK(plan_of(planner, seqs, len, f.n, &plan) == 0, "plan")) return;
    rmlp_context *plain = NULL, *ctx = cached_context(model, &cfg, 4096);
    CHECK(rmlp_context_create(model, 1024, &plain) == RMLP_OK && ctx, "contexts");
    EXPECT(rmlp_generate_begin(plain, &plan, NULL, logits), RMLP_ERR_UNSUPPORTED, "cache_bytes", "no cache");
    EXPECT(rmlp_generate_step(ctx, tokens, 6, logits), RMLP_ERR_INVALID_ARGUMENT, "no generation session",
           "a step without a session");
    EXPECT(rmlp_generate_finish(ctx, 0), RMLP_ERR_INVALID_ARGUMENT, "no generation session", "finish, no session");
    rmlp_generate_params bad = rmlp_generate_default_params();
    bad.struct_size = 3;
    EXPECT(rmlp_generate_begin(ctx, &plan, &bad, logits), RMLP_ERR_INVALID_ARGUMENT, "struct_size", "bad params");
    EXPECT(rmlp_generate_begin(ctx, &plan, NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "logits", "NULL logits");
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = 2;
    CHECK(rmlp_generate_begin(ctx, &plan, &gp, logits) == RMLP_OK, "begin: %s", rmlp_last_error());
    EXPECT(rmlp_generate_begin(ctx, &plan, &gp, logits), RMLP_ERR_INVALID_ARGUMENT, "session already",
           "a second begin");
    EXPECT(rmlp_context_cache_clear(ctx), RMLP_ERR_INVALID_ARGUMENT, "generation session", "clear during a session");
    EXPECT(rmlp_generate_step(ctx, tokens, 5, logits), RMLP_ERR_INVALID_ARGUMENT, "n_tokens=5", "wrong M");
    tokens[3] = (uint32_t)vocab;
    EXPECT(rmlp_generate_step(ctx, tokens, 6, logits), RMLP_ERR_INVALID_ARGUMENT, "tokens[3]=1000", "token >= vocab");
    tokens[3] = 4;
    EXPECT(rmlp_generate_step(ctx, tokens, 6, NULL), RMLP_ERR_INVALID_ARGUMENT, "logits is NULL", "NULL logits");
    EXPECT(rmlp_generate_finish(ctx, 6), RMLP_ERR_INVALID_ARGUMENT, "seq=6", "finish out of range");
    CHECK(rmlp_generate_finish(ctx, 2) == RMLP_OK, "finish 2: %s", rmlp_last_error());
    EXPECT(rmlp_generate_finish(ctx, 2), RMLP_ERR_INVALID_ARGUMENT, "finished already", "finish twice");
    size_t n_active = 0;
    uint32_t act[MAX_SEQS];
    CHECK(rmlp_generate_active(ctx, act, &n_active) == RMLP_OK && n_active == 5 && act[2] == 3,
          "active: %zu", n_active);
    CHECK(rmlp_generate_step(ctx, tokens, 5, logits) == RMLP_OK && rmlp_generate_step(ctx, tokens, 5, logits) == RMLP_OK,
          "two steps: %s", rmlp_last_error());
    EXPECT(rmlp_generate_step(ctx, tokens, 5, logits), RMLP_ERR_INVALID_ARGUMENT, "max_new_tokens=2", "past budget");
    for (uint32_t s = 0; s < 6; s++)
        if (s != 2) rmlp_generate_finish(ctx, s);
    EXPECT(rmlp_generate_step(ctx, tokens, 0, logits), RMLP_ERR_INVALID_ARGUMENT, "every sequence", "all finished");
    CHECK(rmlp_generate_end(ctx) == RMLP_OK && rmlp_generate_end(ctx) == RMLP_OK, "end twice: %s", rmlp_last_error());
    check_unlocked(ctx, "bad input");
    /* a cache smaller than the prompts */
    rmlp_context *tiny = cached_context(model, &cfg, 40); /* room for a path, not for the prompts */
    EXPECT(rmlp_generate_begin(tiny, &plan, &gp, logits), RMLP_ERR_TOO_LARGE, "do not fit", "prompts too large");
    CHECK(tiny && tiny->gen == NULL, "a failed begin left a session");
    rmlp_context_free(tiny);
    /* a cache the prompts fill: a step has no room until a sequence finishes (its rows evicted) */
    uint32_t two_len[2] = {len[0], len[3]}; /* batch.json's s0 and s4 */
    static uint32_t two[2][MAX_LEN * 2];
    memcpy(two[0], seqs[0], len[0] * 4), memcpy(two[1], seqs[3], len[3] * 4);
    rmlp_plan plan2;
    uint32_t distinct = len[0] + len[3] - 14; /* the 14-token template is shared */
    rmlp_context *full = cached_context(model, &cfg, distinct + 2);
    if (CHECK(full && plan_of(planner, two, two_len, 2, &plan2) == 0 && plan2.n_compact == distinct &&
                  rmlp_generate_begin(full, &plan2, &gp, logits) == RMLP_OK,
              "full cache: %s", rmlp_last_error())) {
        uint32_t t2[2] = {7, 8};
        CHECK(rmlp_generate_step(full, t2, 2, logits) == RMLP_OK, "one row fits: %s", rmlp_last_error());
        EXPECT(rmlp_generate_step(full, t2, 2, logits), RMLP_ERR_OUT_OF_MEMORY, "no room", "a full cache");
        rmlp_generate_stats st;
        CHECK(rmlp_generate_get_stats(full, &st) == RMLP_OK && st.steps == 1 && st.n_active == 2,
              "the failed step changed the session");
        CHECK(rmlp_generate_finish(full, 1) == RMLP_OK && rmlp_generate_step(full, t2, 1, logits) == RMLP_OK,
              "after finishing one, a step: %s", rmlp_last_error());
        rmlp_cache_stats cs;
        CHECK(rmlp_context_cache_stats(full, &cs) == RMLP_OK && cs.evicted_tokens > 0, "nothing evicted");
        CHECK(rmlp_generate_end(full) == RMLP_OK, "end");
        check_unlocked(full, "full cache");
    }
    rmlp_context_free(full);
    rmlp_context_free(plain), rmlp_context_free(ctx);
    /* no LM head */
    snprintf(path, sizeof path, "%s/qwen3_embedding_noprefix", dir);
    rmlp_model_config hcfg;
    if (CHECK(rmlp_model_load(path, NULL, &headless) == RMLP_OK && rmlp_model_get_config(headless, &hcfg) == RMLP_OK,
              "headless: %s", rmlp_last_error())) {
        rmlp_context *h = cached_context(headless, &hcfg, 4096);
        EXPECT(rmlp_generate_begin(h, &plan, NULL, logits), RMLP_ERR_UNSUPPORTED, "no LM head", "no LM head");
        rmlp_context_free(h);
    }
    rmlp_model_free(headless);
    free(logits);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("usage: test_generate FIXTURES_DIR\n");
        return 2;
    }
    static const char *const names[] = FIXTURE_NAMES;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) test_greedy(argv[1], names[i]);
    test_finish(argv[1]);
    test_threads(argv[1]);
    test_begin_plan(argv[1]);
    test_bad_input(argv[1]);
    return tu_summary();
}
