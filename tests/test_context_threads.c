/*
 * test_context_threads.c: one context used from several threads at once is refused, never run.
 *
 * - Deterministic: a forward on one thread is held inside its host attention callback while the
 *   main thread calls every context entry point on the same context: each returns RMLP_ERR_BUSY
 *   with a message and changes nothing, rmlp_context_free leaves the context alone, a second
 *   context of the same model runs meanwhile (a model is shared), and the held forward then
 *   finishes with the serial result. The callback computes its attention with rmlp_attention on
 *   its own context: those calls of one thread nest. Freeing the context from inside its own
 *   callback is refused too.
 * - Nested: an attention callback calling any other entry point on the context running it (a
 *   forward, a per-layer call, a read-out, set_plan, the cache, generation) gets RMLP_ERR_BUSY and
 *   changes nothing; the outer forward returns the serial result.
 * - Racing: threads share one context for many forwards; every call returns RMLP_OK with exactly
 *   the serial output, or RMLP_ERR_BUSY (and at least one does). Without the guard about 9% of the
 *   outputs were wrong, each call returning RMLP_OK.
 * Built for the plain suite and for ThreadSanitizer (scripts/tsan.sh, label tsan).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "test_util.h"
#include "tiny_setup.h"

#define N_RACERS 4
#define N_BATCHES 4
#define MAX_TOKENS 64

static rmlp_model *model;
static rmlp_model_config cfg;
static tu_batch batches[N_BATCHES];
static float *serial[N_BATCHES]; /* (n_tokens, hidden) of each batch, built-in attention */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rmlp_status forward(rmlp_planner *planner, rmlp_context *ctx, int b, rmlp_attention_fn attention,
                           void *user_data, float *out) {
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 8);
    const tu_batch *batch = &batches[b];
    rmlp_status status =
        rmlp_plan_build(planner, batch->ids, batch->pos, batch->n_tokens, batch->cu, batch->n_seqs, &params, &plan);
    return status != RMLP_OK ? status : rmlp_forward(ctx, &plan, attention, user_data, out);
}

/* ---- a forward held inside its attention callback ------------------------------------------------ */

typedef struct held {
    rmlp_context *ctx;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int inside, release;  /* under lock */
    rmlp_status status;   /* of the held thread's forward */
    rmlp_status free_try; /* what rmlp_last_error said after the callback tried to free its context */
    char free_msg[256];
    float *out;
} held;

/* Attention through the library (rmlp_attention on the running context: a nested call of this
 * thread); at layer 0 it first says it is inside and waits for the main thread. */
static rmlp_status held_attention(void *user_data, const rmlp_attention_args *args) {
    held *h = user_data;
    if (args->layer == 0) {
        rmlp_context_free(h->ctx); /* from inside its own call: refused */
        snprintf(h->free_msg, sizeof h->free_msg, "%s", rmlp_last_error());
        pthread_mutex_lock(&h->lock);
        h->inside = 1;
        pthread_cond_broadcast(&h->changed);
        while (!h->release) pthread_cond_wait(&h->changed, &h->lock);
        pthread_mutex_unlock(&h->lock);
    }
    return rmlp_attention(h->ctx, args);
}

static void *run_held(void *arg) {
    held *h = arg;
    rmlp_planner *planner = NULL;
    h->status = rmlp_planner_create(&planner);
    if (h->status == RMLP_OK) h->status = forward(planner, h->ctx, 0, held_attention, h, h->out);
    if (h->status != RMLP_OK) { /* never leave the main thread waiting */
        pthread_mutex_lock(&h->lock);
        h->inside = 1;
        pthread_cond_broadcast(&h->changed);
        pthread_mutex_unlock(&h->lock);
    }
    rmlp_planner_free(planner);
    return NULL;
}

/* Every context entry point on a context another thread is inside: RMLP_ERR_BUSY. */
static void calls_while_busy(rmlp_context *ctx, const rmlp_plan *plan) {
    float buf[MAX_TOKENS * 32], logits[16], prob[8];
    uint32_t cu[2] = {0, 1};
    rmlp_attention_args args = {.n_tokens = 1, .n_seqs = 1, .n_heads = cfg.num_attention_heads,
                                .n_kv_heads = cfg.num_key_value_heads, .head_dim = cfg.head_dim, .scale = 0.5f,
                                .dtype = RMLP_DTYPE_F32, .cu_seqlens = cu, .q = buf, .k = buf, .v = buf, .out = buf};
    static const char *const names[] = {"rmlp_embed", "rmlp_layer_pre_attention", "rmlp_layer_post_attention",
                                        "rmlp_final_norm", "rmlp_attention", "rmlp_forward", "rmlp_context_pool",
                                        "rmlp_score_pair", "rmlp_context_set_stream", "rmlp_context_set_plan"};
    for (int k = 0; k < 10; k++) {
        rmlp_status status;
        switch (k) {
        case 0: status = rmlp_embed(ctx, plan, buf); break;
        case 1: status = rmlp_layer_pre_attention(ctx, 0, plan, buf, buf, buf, buf); break;
        case 2: status = rmlp_layer_post_attention(ctx, 0, plan, buf, buf); break;
        case 3: status = rmlp_final_norm(ctx, plan, buf, buf); break;
        case 4: status = rmlp_attention(ctx, &args); break;
        case 5: status = rmlp_forward(ctx, plan, NULL, NULL, buf); break;
        case 6: status = rmlp_context_pool(ctx, buf, 1, cu, 1, RMLP_POOLING_LAST, false, buf); break;
        case 7: status = rmlp_score_pair(ctx, buf, 1, cu, 1, 1, 2, logits, prob); break;
        case 8: status = rmlp_context_set_stream(ctx, NULL); break;
        default: status = rmlp_context_set_plan(ctx, plan); break;
        }
        const char *msg = rmlp_last_error();
        tu_record_bad_input("the context is in a call on another thread", status, msg);
        CHECK(status == RMLP_ERR_BUSY && strncmp(msg, names[k], strlen(names[k])) == 0 &&
                  strstr(msg, "context is in use by a call on another thread") != NULL,
              "%s while another thread is inside: status %d, message \"%s\"", names[k], status, msg);
    }
    rmlp_context_free(ctx);
    CHECK(strstr(rmlp_last_error(), "rmlp_context_free: context is in use by a call on another thread; not freed"),
          "rmlp_context_free while another thread is inside: \"%s\"", rmlp_last_error());
}

static void test_held_forward(void) {
    held h = {.status = -100};
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.changed, NULL);
    h.out = tu_xmalloc(MAX_TOKENS * cfg.hidden_size * sizeof(float));
    rmlp_planner *planner = NULL;
    rmlp_context *other = NULL;
    float *other_out = tu_xmalloc(MAX_TOKENS * cfg.hidden_size * sizeof(float));
    pthread_t thread;
    if (!CHECK(rmlp_context_create(model, MAX_TOKENS, &h.ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_context_create(model, MAX_TOKENS, &other) == RMLP_OK &&
                   pthread_create(&thread, NULL, run_held, &h) == 0,
               "setup: %s", rmlp_last_error()))
        exit(tu_summary());
    pthread_mutex_lock(&h.lock);
    while (!h.inside) pthread_cond_wait(&h.changed, &h.lock);
    pthread_mutex_unlock(&h.lock);

    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 0);
    const tu_batch *b = &batches[1];
    if (CHECK(rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &plan) == RMLP_OK,
              "plan: %s", rmlp_last_error()))
        calls_while_busy(h.ctx, &plan);
    /* The model is not exclusive: another context of it runs while the first is busy. */
    CHECK(forward(planner, other, 2, NULL, NULL, other_out) == RMLP_OK &&
              memcmp(other_out, serial[2], batches[2].n_tokens * cfg.hidden_size * sizeof(float)) == 0,
          "a second context of the model, meanwhile: %s", rmlp_last_error());

    pthread_mutex_lock(&h.lock);
    h.release = 1;
    pthread_cond_broadcast(&h.changed);
    pthread_mutex_unlock(&h.lock);
    pthread_join(thread, NULL);
    CHECK(h.status == RMLP_OK, "the held forward: status %d", h.status);
    CHECK(strstr(h.free_msg, "context is in use by a call of this thread (freed from within that call); not freed"),
          "rmlp_context_free from the context's own callback: \"%s\"", h.free_msg);
    CHECK(h.status != RMLP_OK ||
              memcmp(h.out, serial[0], batches[0].n_tokens * cfg.hidden_size * sizeof(float)) == 0,
          "the held forward (attention by a nested rmlp_attention) differs from the serial one");
    /* Idle again: the main thread may use it now. */
    CHECK(forward(planner, h.ctx, 3, NULL, NULL, other_out) == RMLP_OK &&
              memcmp(other_out, serial[3], batches[3].n_tokens * cfg.hidden_size * sizeof(float)) == 0,
          "the context after the other thread's call: %s", rmlp_last_error());
    rmlp_context_free(h.ctx);
    CHECK(rmlp_last_error()[0] == '\0', "freeing the idle context: \"%s\"", rmlp_last_error());
    rmlp_context_free(other);
    rmlp_planner_free(planner);
    free(h.out);
    free(other_out);
    pthread_cond_destroy(&h.changed);
    pthread_mutex_destroy(&h.lock);
}

/* ---- calls back into the context from its own attention callback -------------------------------- */

typedef struct nested {
    rmlp_context *ctx;
    const rmlp_plan *plan;
    int tried; /* calls tried from the callback at layer 0 */
} nested;

/* At layer 0, every other context call on the running context: RMLP_ERR_BUSY, nothing done (the
 * outer forward then matches the serial one). The attention itself by rmlp_attention, which nests. */
static rmlp_status nesting_attention(void *user_data, const rmlp_attention_args *args) {
    nested *n = user_data;
    float buf[MAX_TOKENS * 32], logits[16], prob[8];
    uint32_t cu[2] = {0, 1};
    rmlp_cache_stats stats;
    static const char *const names[] = {"rmlp_forward", "rmlp_forward_compact", "rmlp_embed",
                                        "rmlp_layer_pre_attention", "rmlp_layer_post_attention_compact",
                                        "rmlp_final_norm", "rmlp_context_pool", "rmlp_score_pair",
                                        "rmlp_context_set_plan", "rmlp_context_cache_stats",
                                        "rmlp_context_cache_clear", "rmlp_context_cpu_profile",
                                        "rmlp_generate_begin"};
    for (int k = 0; args->layer == 0 && k < 13; k++, n->tried++) {
        rmlp_status status;
        switch (k) {
        case 0: status = rmlp_forward(n->ctx, n->plan, NULL, NULL, buf); break;
        case 1: status = rmlp_forward_compact(n->ctx, n->plan, NULL, NULL, buf); break;
        case 2: status = rmlp_embed(n->ctx, n->plan, buf); break;
        case 3: status = rmlp_layer_pre_attention(n->ctx, 1, n->plan, buf, buf, buf, buf); break;
        case 4: status = rmlp_layer_post_attention_compact(n->ctx, 1, n->plan, buf, buf); break;
        case 5: status = rmlp_final_norm(n->ctx, n->plan, buf, buf); break;
        case 6: status = rmlp_context_pool(n->ctx, buf, 1, cu, 1, RMLP_POOLING_LAST, false, buf); break;
        case 7: status = rmlp_score_pair(n->ctx, buf, 1, cu, 1, 1, 2, logits, prob); break;
        case 8: status = rmlp_context_set_plan(n->ctx, n->plan); break;
        case 9: status = rmlp_context_cache_stats(n->ctx, &stats); break;
        case 10: status = rmlp_context_cache_clear(n->ctx); break;
        case 11: status = rmlp_context_cpu_profile(n->ctx, true, NULL); break;
        default: status = rmlp_generate_begin(n->ctx, n->plan, NULL, logits); break;
        }
        const char *msg = rmlp_last_error();
        if (k < 2) tu_record_bad_input("the same context, from inside its own attention callback", status, msg);
        CHECK(status == RMLP_ERR_BUSY && strncmp(msg, names[k], strlen(names[k])) == 0 &&
                  strstr(msg, "context is inside a call on this thread already (a host attention callback may call "
                              "only rmlp_attention or rmlp_attention_compact") != NULL,
              "%s from the context's own attention callback: status %d, message \"%s\"", names[k], status, msg);
    }
    return rmlp_attention(n->ctx, args);
}

static void test_nested_calls(void) {
    rmlp_planner *planner = NULL;
    nested n = {0};
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 8);
    const tu_batch *b = &batches[0];
    float *out = tu_xmalloc(MAX_TOKENS * cfg.hidden_size * sizeof(float));
    if (CHECK(rmlp_context_create(model, MAX_TOKENS, &n.ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                  rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &params, &plan) ==
                      RMLP_OK,
              "setup: %s", rmlp_last_error())) {
        n.plan = &plan;
        CHECK(rmlp_forward(n.ctx, &plan, nesting_attention, &n, out) == RMLP_OK, "the outer forward: %s",
              rmlp_last_error());
        CHECK(n.tried == 13 && memcmp(out, serial[0], b->n_tokens * cfg.hidden_size * sizeof(float)) == 0,
              "the outer forward (%d nested calls refused) differs from the serial one", n.tried);
    }
    rmlp_context_free(n.ctx);
    rmlp_planner_free(planner);
    free(out);
}

/* ---- threads racing for one context ---------------------------------------------------------------- */

static rmlp_context *shared;
static atomic_int busy_seen; /* any racer saw RMLP_ERR_BUSY */

typedef struct racer {
    int index;
    long ok, busy, wrong, failed;
    char first_problem[300];
} racer;

static void *run_racer(void *arg) {
    racer *r = arg;
    rmlp_planner *planner = NULL;
    float *out = tu_xmalloc(MAX_TOKENS * cfg.hidden_size * sizeof(float));
    if (rmlp_planner_create(&planner) != RMLP_OK) r->failed++;
    double deadline = now_s() + 20.0;
    /* At least 200 forwards each, then on until some racer has been refused (or the deadline). */
    for (long k = 0; planner != NULL && (k < 200 || (!atomic_load(&busy_seen) && now_s() < deadline)); k++) {
        int b = (int)((k + r->index) % N_BATCHES);
        size_t floats = batches[b].n_tokens * cfg.hidden_size;
        memset(out, 0xff, floats * sizeof(float));
        rmlp_status status = forward(planner, shared, b, NULL, NULL, out);
        if (status == RMLP_ERR_BUSY) {
            r->busy++;
            atomic_store(&busy_seen, 1);
        } else if (status != RMLP_OK) {
            if (r->failed++ == 0) snprintf(r->first_problem, sizeof r->first_problem, "%s", rmlp_last_error());
        } else if (memcmp(out, serial[b], floats * sizeof(float)) != 0) {
            if (r->wrong++ == 0) snprintf(r->first_problem, sizeof r->first_problem, "batch %d differs", b);
        } else {
            r->ok++;
        }
    }
    rmlp_planner_free(planner);
    free(out);
    return NULL;
}

static void test_racing(void) {
    if (!CHECK(rmlp_context_create(model, MAX_TOKENS, &shared) == RMLP_OK, "context: %s", rmlp_last_error())) return;
    racer racers[N_RACERS];
    pthread_t threads[N_RACERS];
    int started[N_RACERS];
    for (int t = 0; t < N_RACERS; t++) {
        memset(&racers[t], 0, sizeof racers[t]);
        racers[t].index = t;
        started[t] = pthread_create(&threads[t], NULL, run_racer, &racers[t]) == 0;
        CHECK(started[t], "pthread_create %d", t);
    }
    long ok = 0, busy = 0;
    for (int t = 0; t < N_RACERS; t++) {
        if (started[t]) pthread_join(threads[t], NULL);
        racer *r = &racers[t];
        CHECK(r->wrong == 0 && r->failed == 0, "racer %d: %ld wrong outputs, %ld failures (of %ld ok); first: %s", t,
              r->wrong, r->failed, r->ok, r->first_problem);
        ok += r->ok, busy += r->busy;
    }
    CHECK(busy > 0, "%d threads on one context were never refused (%ld forwards ran)", N_RACERS, ok);
    printf("%d threads on one context: %ld forwards ran, each equal to the serial one; %ld refused as busy\n",
           N_RACERS, ok, busy);
    rmlp_context_free(shared);
}

int main(void) {
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 40, .hidden_size = 32,
                              .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .head_dim = 8, .max_position_embeddings = 128,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    tiny_setup t;
    if (!tiny_setup_open(&t, &tiny, 11, MAX_TOKENS, 0)) return tu_summary();
    model = t.model, cfg = t.cfg;
    uint64_t rng = 0x5eed;
    for (int b = 0; b < N_BATCHES; b++) {
        tu_batch_shape shape = {tu_rand_range(&rng, 2, 5), 12, 12, tu_rand_range(&rng, 2, 6), 0};
        do {
            tu_batch_free(&batches[b]);
            batches[b] = tu_random_batch(&rng, &shape);
        } while (batches[b].n_tokens == 0 || batches[b].n_tokens > MAX_TOKENS);
        serial[b] = tu_xmalloc(batches[b].n_tokens * cfg.hidden_size * sizeof(float));
        CHECK(forward(t.planner, t.ctx, b, NULL, NULL, serial[b]) == RMLP_OK, "serial batch %d: %s", b,
              rmlp_last_error());
    }
    rmlp_context_free(t.ctx);
    rmlp_planner_free(t.planner);
    t.ctx = NULL, t.planner = NULL;

    test_held_forward();
    test_nested_calls();
    test_racing();

    for (int b = 0; b < N_BATCHES; b++) {
        free(serial[b]);
        tu_batch_free(&batches[b]);
    }
    tiny_setup_close(&t);
    return tu_summary();
}
