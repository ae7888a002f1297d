/*
 * test_prefix_cache.c: the prefix KV cache.
 *   - The index alone (cache/kv_pool.c) over random traces of planner-built batches from a small
 *     vocabulary (batches that share, extend, diverge from and re-enter earlier paths), pools of
 *     0 to 400 slots: every hit is a true hit (the slot's key is the row's token and position under
 *     the slot of the row's parent), every computed row is the end of the rows its sequence owns, a
 *     batch that does not fit changes nothing, and after every batch no slot is locked and the slot
 *     accounting balances (kv_pool_check).
 *   - The model (qwen3_tiny, and qwen2_window: sliding windows of 5 keys, shorter than the traces'
 *     shared documents of up to 24 tokens): contexts with caches of a few rows to many batches
 *     against a context without one, over random traces: every batch's output (rmlp_forward, batch
 *     rows) within 1e-5 of the largest value; rmlp_forward_compact through the cache too; the counters add up; a
 *     cache too small for any batch runs every batch without it, with no error; a host callback is
 *     refused; clearing empties it.
 *   - Threads (label tsan too): four threads, each with a cached context of its own on one shared
 *     model, run the same trace at once; every output within 1e-5 of the serial uncached one.
 * Usage: test_prefix_cache FIXTURES_DIR
 */
#include <math.h>
#include <pthread.h>

#include "cache/kv_pool.h"
#include "ffi/src/model_internal.h"
#include "cache/kv_cache.h"
#include "test_util.h"

static void test_index(void) {
    static const uint32_t slot_counts[] = {0, 1, 7, 40, 400};
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner")) return;
    uint64_t rng = 0xCAC4E;
    for (size_t c = 0; c < sizeof slot_counts / sizeof slot_counts[0]; c++) {
        kv_pool *pool = kv_pool_new(slot_counts[c]);
        uint32_t *slot_of = tu_xmalloc(64 * 20 * 4), *computed = tu_xmalloc(64 * 20 * 4), *cqo = tu_xmalloc(65 * 4);
        size_t hits = 0, bypassed = 0, bad_hits = 0, bad_order = 0;
        for (int batch = 0; pool != NULL && batch < 300; batch++) {
            tu_batch b = tu_trace_batch(&rng, 16, 40);
            rmlp_plan_params params = tu_params(batch % 3 == 0 ? 0.0 : 1.0, batch % 5 == 0 ? 8 : 0);
            rmlp_plan plan;
            if (!CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plan) == RMLP_OK,
                       "plan: %s", rmlp_last_error())) {
                tu_batch_free(&b);
                break;
            }
            kv_pool_counts before = kv_pool_counts_of(pool);
            kv_batch kb = {slot_of, computed, cqo, 0};
            if (kv_pool_begin(pool, &plan, &kb) != 0) {
                kv_pool_counts after = kv_pool_counts_of(pool);
                CHECK(after.used <= before.used && after.bypassed == before.bypassed + 1,
                      "slots %u: a bypassed batch took slots (%u -> %u used)", slot_counts[c], before.used, after.used);
                bypassed++;
            } else {
                uint32_t k = 0;
                for (uint32_t j = 0; j < plan.n_compact; j++) {
                    int is_computed = k < kb.n_computed && computed[k] == j;
                    k += is_computed;
                    uint32_t parent, token, position, pc = plan.compact_parent[j];
                    if (kv_pool_key(pool, slot_of[j], &parent, &token, &position) != 0 ||
                        token != plan.compact_input_ids[j] || position != plan.compact_position_ids[j] ||
                        parent != (pc == RMLP_NO_PARENT ? RMLP_NO_PARENT : slot_of[pc]))
                        bad_hits++;
                    hits += !is_computed;
                }
                for (uint32_t s = 0; s < plan.n_seqs; s++) /* computed rows: the end of the owned ones */
                    for (uint32_t q = cqo[s]; q < cqo[s + 1]; q++)
                        bad_order += computed[q] != plan.qo_indptr[s + 1] - (cqo[s + 1] - q);
                kv_pool_end(pool, &plan, &kb, batch % 7 != 3); /* now and then a batch that failed */
            }
            char why[200];
            CHECK(kv_pool_check(pool, why, sizeof why) == 0, "slots %u, batch %d: %s", slot_counts[c], batch, why);
            tu_batch_free(&b);
        }
        CHECK(bad_hits == 0, "slots %u: %zu rows with a slot whose key is not theirs", slot_counts[c], bad_hits);
        CHECK(bad_order == 0, "slots %u: %zu computed rows not at the end of their sequence's", slot_counts[c],
              bad_order);
        if (slot_counts[c] >= 400) CHECK(hits > 1000, "slots %u: only %zu hits over the trace", slot_counts[c], hits);
        if (slot_counts[c] == 0) CHECK(hits == 0, "an empty pool hit");
        printf("index, %u slots: %zu hits, %zu bypassed batches\n", slot_counts[c], hits, bypassed);
        free(slot_of), free(computed), free(cqo);
        kv_pool_free(pool);
    }
    rmlp_planner_free(planner);
}

static rmlp_status callback(void *user_data, const rmlp_attention_args *args) {
    return rmlp_attention(user_data, args);
}

/* Warm against cold on the fixture model `name`, cache budgets from a few rows to the whole trace. */
static void test_model(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    if (!CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK && rmlp_model_get_config(model, &cfg) == RMLP_OK,
               "load: %s", rmlp_last_error()))
        return;
    const size_t cap = 16 * 40, hsz = cfg.hidden_size;
    uint64_t slot_bytes = kv_cache_slot_bytes(&cfg, sizeof(float));
    static const uint64_t slot_budgets[] = {0, 3, 60, 300, 3000}; /* 0: smaller than one slot */
    rmlp_context *cold = NULL;
    rmlp_planner *planner = NULL;
    CHECK(rmlp_context_create(model, cap, &cold) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK, "setup");
    float *want = tu_xmalloc(cap * hsz * 4), *got = tu_xmalloc(cap * hsz * 4), *compact = tu_xmalloc((cap + 8) * hsz * 4);
    for (size_t k = 0; k < sizeof slot_budgets / sizeof slot_budgets[0]; k++) {
        rmlp_context_params params = rmlp_context_default_params();
        params.cache_bytes = slot_budgets[k] * slot_bytes + (k == 0 ? slot_bytes / 2 : 0);
        rmlp_context *warm = NULL;
        if (!CHECK(rmlp_context_create_with_params(model, cap, &params, &warm) == RMLP_OK, "cache of %llu slots: %s",
                   (unsigned long long)slot_budgets[k], rmlp_last_error()))
            continue;
        uint64_t rng = 0x7EA + k;
        rmlp_cache_stats seen = {0};
        double worst = 0.0;
        size_t tokens = 0, compact_rows = 0;
        for (int batch = 0; batch < 40; batch++) {
            tu_batch b = tu_trace_batch(&rng, 16, 40);
            rmlp_plan_params pp = tu_params(batch % 4 == 0 ? 0.0 : 1.0, batch % 3 == 0 ? 8 : 0);
            rmlp_plan plan;
            int ok = CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK &&
                               rmlp_forward(cold, &plan, NULL, NULL, want) == RMLP_OK,
                           "cold batch %d: %s", batch, rmlp_last_error());
            if (ok && batch % 5 == 4) { /* the compact output through the cache: batch rows via scatter */
                ok = CHECK(rmlp_forward_compact(warm, &plan, NULL, NULL, compact) == RMLP_OK, "warm compact %d: %s",
                           batch, rmlp_last_error());
                for (size_t i = 0; ok && i < b.n_tokens; i++)
                    memcpy(got + i * hsz, compact + (size_t)plan.scatter[i] * hsz, hsz * 4);
            } else if (ok) {
                ok = CHECK(rmlp_forward(warm, &plan, NULL, NULL, got) == RMLP_OK, "warm batch %d: %s", batch,
                           rmlp_last_error());
            }
            rmlp_cache_stats now;
            if (ok && CHECK(rmlp_context_cache_stats(warm, &now) == RMLP_OK, "stats: %s", rmlp_last_error())) {
                /* per batch: bypassed, or every compact row looked up and either hit or computed */
                uint64_t looked = now.lookups - seen.lookups, found = now.hit_tokens - seen.hit_tokens;
                uint64_t made = now.computed_tokens - seen.computed_tokens;
                CHECK(now.bypassed == seen.bypassed + 1 ? looked == 0 && made == 0
                                                        : looked == plan.n_compact && found + made == looked,
                      "cache of %llu slots, batch %d: %u compact rows, %llu looked up, %llu hit, %llu computed",
                      (unsigned long long)slot_budgets[k], batch, plan.n_compact, (unsigned long long)looked,
                      (unsigned long long)found, (unsigned long long)made);
                seen = now;
            }
            if (ok) {
                double ref = 0.0, diff = tu_max_abs_diff(got, want, b.n_tokens * hsz, &ref);
                worst = diff / ref > worst ? diff / ref : worst;
                CHECK(diff <= 1e-5 * ref, "cache of %llu slots, batch %d: warm vs cold differ by %.3g (max |value| %.3g)",
                      (unsigned long long)slot_budgets[k], batch, diff, ref);
                char why[200];
                CHECK(kv_pool_check(warm->cache->pool, why, sizeof why) == 0, "cache of %llu slots, batch %d: %s",
                      (unsigned long long)slot_budgets[k], batch, why);
                tokens += b.n_tokens, compact_rows += plan.n_compact;
            }
            tu_batch_free(&b);
        }
        rmlp_cache_stats st;
        CHECK(rmlp_context_cache_stats(warm, &st) == RMLP_OK, "stats: %s", rmlp_last_error());
        CHECK(st.batches == 40 && st.slots == slot_budgets[k] && st.bytes_per_slot == slot_bytes &&
                  st.bytes_in_use == st.slots_used * slot_bytes && st.slots_used <= st.slots,
              "cache of %llu slots: batches %llu, slots %llu, slot bytes %llu (want %llu), in use %llu",
              (unsigned long long)slot_budgets[k], (unsigned long long)st.batches, (unsigned long long)st.slots,
              (unsigned long long)st.bytes_per_slot, (unsigned long long)slot_bytes,
              (unsigned long long)st.bytes_in_use);
        CHECK(st.lookups <= compact_rows && st.hit_tokens + st.computed_tokens == st.lookups,
              "counters: lookups %llu, hits %llu, computed %llu of %zu compact rows", (unsigned long long)st.lookups,
              (unsigned long long)st.hit_tokens, (unsigned long long)st.computed_tokens, compact_rows);
        if (slot_budgets[k] == 0) CHECK(st.bypassed == 40 && st.hit_tokens == 0, "an empty cache ran batches");
        if (slot_budgets[k] == 300) /* smaller than the trace, larger than any batch: eviction makes room */
            CHECK(st.bypassed == 0 && st.evicted_tokens > 0 && st.slots_used <= 300,
                  "a cache of 300 slots: %llu bypassed, %llu evicted", (unsigned long long)st.bypassed,
                  (unsigned long long)st.evicted_tokens);
        if (slot_budgets[k] >= 3000) CHECK(st.bypassed == 0 && st.hit_tokens > st.computed_tokens / 4,
                                         "a large cache: %llu bypassed, %llu hits, %llu computed",
                                         (unsigned long long)st.bypassed, (unsigned long long)st.hit_tokens,
                                         (unsigned long long)st.computed_tokens);
        printf("model, cache of %llu slots: %llu batches (%llu bypassed), %llu of %llu rows hit, %llu evicted, "
               "worst warm/cold %.3g\n", (unsigned long long)slot_budgets[k], (unsigned long long)st.batches,
               (unsigned long long)st.bypassed, (unsigned long long)st.hit_tokens, (unsigned long long)st.lookups,
               (unsigned long long)st.evicted_tokens, worst);
        rmlp_context_free(warm);
    }
    /* a callback is refused; clearing empties the cache */
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = 100 * slot_bytes;
    rmlp_context *warm = NULL;
    uint64_t rng = 1;
    tu_batch b = tu_trace_batch(&rng, 4, 10);
    rmlp_plan_params pp = tu_params(1.0, 0);
    rmlp_plan plan;
    if (CHECK(rmlp_context_create_with_params(model, cap, &params, &warm) == RMLP_OK &&
                  rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK,
              "setup: %s", rmlp_last_error())) {
        rmlp_status status = rmlp_forward(warm, &plan, callback, warm, got);
        CHECK(status == RMLP_ERR_UNSUPPORTED && strstr(rmlp_last_error(), "prefix cache") != NULL,
              "callback with a cache: status %d, %s", status, rmlp_last_error());
        rmlp_cache_stats st;
        CHECK(rmlp_forward(warm, &plan, NULL, NULL, got) == RMLP_OK && rmlp_context_cache_stats(warm, &st) == RMLP_OK &&
                  st.slots_used > 0,
              "a batch cached nothing: %s", rmlp_last_error());
        CHECK(rmlp_context_cache_clear(warm) == RMLP_OK && rmlp_context_cache_stats(warm, &st) == RMLP_OK &&
                  st.slots_used == 0,
              "clear left %llu slots used", (unsigned long long)st.slots_used);
    }
    tu_batch_free(&b);
    rmlp_context_free(warm);
    free(want), free(got), free(compact);
    rmlp_planner_free(planner);
    rmlp_context_free(cold);
    rmlp_model_free(model);
}

/* ---- threads: a cached context each, one shared model ---------------------------------------- */

#define THREADS 4
#define THREAD_BATCHES 12

typedef struct shared_trace {
    rmlp_model *model;
    tu_batch batches[THREAD_BATCHES];
    float *want[THREAD_BATCHES]; /* serial, uncached, batch rows */
    size_t cap, hsz;
} shared_trace;

typedef struct thread_result {
    shared_trace *trace;
    int failures, mismatches;
} thread_result;

static void *run_thread(void *arg) {
    thread_result *r = arg;
    shared_trace *t = r->trace;
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = 200 * kv_cache_slot_bytes(&t->model->config, sizeof(float)); /* evicts along the trace */
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    float *out = malloc(t->cap * t->hsz * sizeof(float));
    if (out == NULL || rmlp_context_create_with_params(t->model, t->cap, &params, &ctx) != RMLP_OK ||
        rmlp_planner_create(&planner) != RMLP_OK)
        r->failures++;
    for (int b = 0; r->failures == 0 && b < THREAD_BATCHES; b++) {
        const tu_batch *batch = &t->batches[b];
        rmlp_plan_params pp = rmlp_plan_default_params();
        pp.threshold = 1.0;
        rmlp_plan plan;
        if (rmlp_plan_build(planner, batch->ids, batch->pos, batch->n_tokens, batch->cu, batch->n_seqs, &pp, &plan) !=
                RMLP_OK ||
            rmlp_forward(ctx, &plan, NULL, NULL, out) != RMLP_OK) {
            r->failures++;
            break;
        }
        double ref = 0.0, diff = tu_max_abs_diff(out, t->want[b], batch->n_tokens * t->hsz, &ref);
        r->mismatches += !(diff <= 1e-5 * ref);
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    free(out);
    return NULL;
}

static void test_threads(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    shared_trace t = {.cap = 16 * 40};
    rmlp_context *cold = NULL;
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_model_load(path, NULL, &t.model) == RMLP_OK && rmlp_context_create(t.model, t.cap, &cold) == RMLP_OK &&
                   rmlp_planner_create(&planner) == RMLP_OK,
               "thread setup: %s", rmlp_last_error()))
        goto done;
    t.hsz = t.model->config.hidden_size;
    uint64_t rng = 0x7457;
    for (int b = 0; b < THREAD_BATCHES; b++) {
        t.batches[b] = tu_trace_batch(&rng, 16, 40);
        t.want[b] = tu_xmalloc(t.batches[b].n_tokens * t.hsz * sizeof(float));
        rmlp_plan_params pp = rmlp_plan_default_params();
        pp.threshold = 1.0;
        rmlp_plan plan;
        CHECK(rmlp_plan_build(planner, t.batches[b].ids, t.batches[b].pos, t.batches[b].n_tokens, t.batches[b].cu,
                              t.batches[b].n_seqs, &pp, &plan) == RMLP_OK &&
                  rmlp_forward(cold, &plan, NULL, NULL, t.want[b]) == RMLP_OK,
              "serial batch %d: %s", b, rmlp_last_error());
    }
    pthread_t threads[THREADS];
    thread_result results[THREADS];
    for (int i = 0; i < THREADS; i++) {
        results[i] = (thread_result){&t, 0, 0};
        CHECK(pthread_create(&threads[i], NULL, run_thread, &results[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(results[i].failures == 0 && results[i].mismatches == 0, "thread %d: %d failures, %d batches off the serial run",
              i, results[i].failures, results[i].mismatches);
    }
    for (int b = 0; b < THREAD_BATCHES; b++) tu_batch_free(&t.batches[b]), free(t.want[b]);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(cold);
    rmlp_model_free(t.model);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_prefix_cache FIXTURES_DIR\n");
        return 2;
    }
    test_index();
    test_model(argv[1], "qwen3_tiny");
    test_model(argv[1], "qwen2_window");
    test_threads(argv[1]);
    return tu_summary();
}
