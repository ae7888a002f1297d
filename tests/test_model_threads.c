/*
 * test_model_threads.c: one CPU model shared by several threads, each with its own context and
 * planner, running whole forwards at the same time, with the built-in attention and with a host
 * attention callback: every output must equal, bit for bit, what a serial run of the same batch
 * and attention gave. And rmlp_last_error is per thread: threads that fail at the same moment
 * with different messages each read back their own. Built for the plain suite and for
 * ThreadSanitizer (scripts/tsan.sh), which checks that nothing the threads share is written
 * without synchronisation.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

#include "test_util.h"
#include "tiny_setup.h"

#define N_THREADS 4
#define N_BATCHES 6
#define N_ROUNDS 3
#define N_ERROR_ROUNDS 200

enum { BUILTIN, HOST, N_MODES }; /* the attention a forward uses */

static rmlp_model *model;
static rmlp_model_config cfg;
static tu_batch batches[N_BATCHES];
static rmlp_plan_params batch_params[N_BATCHES];
static float *serial[N_BATCHES][N_MODES]; /* (n_tokens, hidden) of the serial run */
static size_t max_tokens, max_len;

/* ---- a host attention: causal, grouped-query, F32, the naive way ------------------------------- */

typedef struct host_state {
    float *scores; /* (max_len) */
    long calls;
} host_state;

static rmlp_status host_attention(void *user_data, const rmlp_attention_args *a) {
    host_state *state = user_data;
    const float *q = a->q, *k = a->k, *v = a->v; /* (n_tokens, heads, head_dim) */
    float *out = a->out;
    size_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    state->calls++;
    for (uint32_t s = 0; s < a->n_seqs; s++) {
        uint32_t begin = a->cu_seqlens[s], end = a->cu_seqlens[s + 1];
        for (uint32_t i = begin; i < end; i++) {
            for (size_t h = 0; h < a->n_heads; h++) {
                const float *qi = q + ((size_t)i * a->n_heads + h) * hd;
                size_t kvh = h / group;
                float top = -INFINITY, sum = 0.0f;
                for (uint32_t j = begin; j <= i; j++) {
                    const float *kj = k + ((size_t)j * a->n_kv_heads + kvh) * hd;
                    float dot = 0.0f;
                    for (size_t d = 0; d < hd; d++) dot += qi[d] * kj[d];
                    state->scores[j - begin] = dot * a->scale;
                    if (state->scores[j - begin] > top) top = state->scores[j - begin];
                }
                float *oi = out + ((size_t)i * a->n_heads + h) * hd;
                memset(oi, 0, hd * sizeof(float));
                for (uint32_t j = begin; j <= i; j++) {
                    float p = expf(state->scores[j - begin] - top);
                    const float *vj = v + ((size_t)j * a->n_kv_heads + kvh) * hd;
                    sum += p;
                    for (size_t d = 0; d < hd; d++) oi[d] += p * vj[d];
                }
                for (size_t d = 0; d < hd; d++) oi[d] /= sum;
            }
        }
    }
    return RMLP_OK;
}

/* ---- one thread's forwards -------------------------------------------------------------------- */

typedef struct worker {
    int index;
    int mismatches, failures;
    long forwards;
    host_state host;
    char first_problem[512];
} worker;

static void note(worker *w, int *counter, const char *what, const char *detail) {
    if ((*counter)++ == 0 && w->first_problem[0] == '\0')
        snprintf(w->first_problem, sizeof w->first_problem, "%s: %s", what, detail);
}

/* Plans batch b and runs it with the given attention into out; returns the status. */
static rmlp_status run_batch(rmlp_planner *planner, rmlp_context *ctx, int b, int mode, host_state *host,
                             float *out) {
    const tu_batch *batch = &batches[b];
    rmlp_plan plan;
    rmlp_status status = rmlp_plan_build(planner, batch->ids, batch->pos, batch->n_tokens, batch->cu, batch->n_seqs,
                                         &batch_params[b], &plan);
    if (status != RMLP_OK) return status;
    return rmlp_forward(ctx, &plan, mode == HOST ? host_attention : NULL, mode == HOST ? host : NULL, out);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    float *out = tu_xmalloc(max_tokens * cfg.hidden_size * sizeof(float));
    if (rmlp_context_create(model, max_tokens, &ctx) != RMLP_OK || rmlp_planner_create(&planner) != RMLP_OK) {
        note(w, &w->failures, "setup", rmlp_last_error());
    } else {
        char detail[64];
        for (int round = 0; round < N_ROUNDS; round++) {
            for (int k = 0; k < N_BATCHES * N_MODES; k++) {
                int item = (k + 5 * w->index + round) % (N_BATCHES * N_MODES);
                int b = item / N_MODES, mode = item % N_MODES;
                size_t floats = batches[b].n_tokens * cfg.hidden_size;
                memset(out, 0xff, floats * sizeof(float)); /* NaN: a forward that writes nothing fails */
                snprintf(detail, sizeof detail, "batch %d, %s attention", b, mode == HOST ? "host" : "built-in");
                if (run_batch(planner, ctx, b, mode, &w->host, out) != RMLP_OK)
                    note(w, &w->failures, detail, rmlp_last_error());
                else if (memcmp(out, serial[b][mode], floats * sizeof(float)) != 0)
                    note(w, &w->mismatches, "differs from the serial run", detail);
                w->forwards++;
            }
        }
    }
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    free(out);
    return NULL;
}

static void test_shared_model(void) {
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    host_state host = {tu_xmalloc(max_len * sizeof(float)), 0};
    if (!CHECK(rmlp_context_create(model, max_tokens, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK,
               "serial setup: %s", rmlp_last_error()))
        return;
    for (int b = 0; b < N_BATCHES; b++) {
        size_t floats = batches[b].n_tokens * cfg.hidden_size;
        for (int mode = 0; mode < N_MODES; mode++) {
            serial[b][mode] = tu_xmalloc(floats * sizeof(float));
            CHECK(run_batch(planner, ctx, b, mode, &host, serial[b][mode]) == RMLP_OK, "serial batch %d mode %d: %s",
                  b, mode, rmlp_last_error());
        }
        /* The host attention is another implementation of the same attention. */
        double worst = 0.0;
        for (size_t i = 0; i < floats; i++) {
            double d = fabs((double)serial[b][BUILTIN][i] - serial[b][HOST][i]);
            if (!(d <= worst)) worst = d; /* NaN sticks */
        }
        CHECK(worst <= 1e-4, "batch %d: host vs built-in attention differ by %g", b, worst);
    }
    CHECK_EQ(host.calls, (long)N_BATCHES * cfg.num_hidden_layers, "host attention calls in the serial run");
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    free(host.scores);

    worker workers[N_THREADS];
    pthread_t threads[N_THREADS];
    int started[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].index = t;
        workers[t].host.scores = tu_xmalloc(max_len * sizeof(float));
        started[t] = pthread_create(&threads[t], NULL, run_worker, &workers[t]) == 0;
        CHECK(started[t], "pthread_create %d", t);
    }
    for (int t = 0; t < N_THREADS; t++) {
        if (started[t]) pthread_join(threads[t], NULL);
        worker *w = &workers[t];
        CHECK(w->failures == 0 && w->mismatches == 0, "thread %d: %d failures, %d mismatches; first: %s", t,
              w->failures, w->mismatches, w->first_problem);
        CHECK_EQ(w->forwards, (long)N_ROUNDS * N_BATCHES * N_MODES, "thread %d forwards", t);
        CHECK_EQ(w->host.calls, (long)N_ROUNDS * N_BATCHES * cfg.num_hidden_layers, "thread %d host attention calls",
                 t);
        free(w->host.scores);
    }
    printf("%d threads x %d forwards on one model, equal to the serial run bit for bit\n", N_THREADS,
           N_ROUNDS * N_BATCHES * N_MODES);
}

/* ---- rmlp_last_error per thread ----------------------------------------------------------------- */

static pthread_barrier_t barrier;

typedef struct error_worker {
    int index;
    int wrong;
    char first_wrong[512];
} error_worker;

/* Each round every thread fails a call with a message only it makes, waits until all have failed,
 * then reads its own message back. */
static void *run_error_worker(void *arg) {
    error_worker *w = arg;
    rmlp_planner *planner = NULL;
    rmlp_context *ctx = NULL;
    int ready = rmlp_planner_create(&planner) == RMLP_OK && rmlp_context_create(model, 8, &ctx) == RMLP_OK;
    char want[128];
    for (int round = 0; round < N_ERROR_ROUNDS; round++) {
        uint32_t tag = (uint32_t)(1000 * (w->index + 1) + round);
        if (!ready) {
            snprintf(want, sizeof want, "(setup failed)");
        } else if (round % 2 == 0) { /* a model-level error: a context too large */
            size_t too_many = (size_t)UINT32_MAX + tag;
            snprintf(want, sizeof want, "max_tokens=%zu must be", too_many);
            rmlp_context *none = NULL;
            rmlp_context_create(model, too_many, &none);
        } else { /* an input error found by a layer call: a token id beyond the vocabulary */
            uint32_t ids[2] = {1, cfg.vocab_size + tag}, pos[2] = {0, 1}, cu[2] = {0, 2};
            rmlp_plan plan;
            rmlp_plan_params params = tu_params(1.0, 0);
            float hidden[1];
            snprintf(want, sizeof want, "input_ids[1]=%u >= vocab_size=%u", ids[1], cfg.vocab_size);
            if (rmlp_plan_build(planner, ids, pos, 2, cu, 1, &params, &plan) == RMLP_OK) rmlp_embed(ctx, &plan, hidden);
        }
        pthread_barrier_wait(&barrier); /* every thread has made its error */
        const char *got = rmlp_last_error();
        if (strstr(got, want) == NULL && w->wrong++ == 0)
            snprintf(w->first_wrong, sizeof w->first_wrong, "round %d: \"%s\", want \"%s\"", round, got, want);
        pthread_barrier_wait(&barrier); /* every thread has read it before the next round */
    }
    rmlp_context_free(ctx);
    rmlp_planner_free(planner);
    return NULL;
}

static void test_last_error_per_thread(void) {
    error_worker workers[N_THREADS];
    pthread_t threads[N_THREADS];
    if (!CHECK(pthread_barrier_init(&barrier, NULL, N_THREADS) == 0, "pthread_barrier_init")) return;
    int started = 0;
    for (int t = 0; t < N_THREADS; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].index = t;
        if (pthread_create(&threads[t], NULL, run_error_worker, &workers[t]) == 0) started++;
    }
    /* A thread that failed to start would leave the others waiting at the barrier forever. */
    if (!CHECK(started == N_THREADS, "only %d of %d threads started", started, N_THREADS)) exit(tu_summary());
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(threads[t], NULL);
        CHECK(workers[t].wrong == 0, "thread %d read %d messages not its own; first: %s", t, workers[t].wrong,
              workers[t].first_wrong);
    }
    pthread_barrier_destroy(&barrier);
    printf("%d threads x %d simultaneous errors, each read back by its own thread\n", N_THREADS, N_ERROR_ROUNDS);
}

int main(void) {
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 50, .hidden_size = 32,
                              .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .head_dim = 8, .max_position_embeddings = 128,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    tiny_setup t;
    if (!tiny_setup_open(&t, &tiny, 7, 0, 0)) return tu_summary(); /* the model only: each test makes its own */
    model = t.model, cfg = t.cfg;

    uint64_t rng = 0x7123ad;
    static const double thresholds[3] = {1.0, 0.85, 0.0}; /* radix always, gated, off */
    for (int b = 0; b < N_BATCHES; b++) {
        tu_batch_shape shape = {tu_rand_range(&rng, 2, 8), tu_rand_range(&rng, 1, 24), 12, 0, 0};
        if (b % 3 != 2) shape.prefix_len = tu_rand_range(&rng, 4, 16);
        do {
            tu_batch_free(&batches[b]);
            batches[b] = tu_random_batch(&rng, &shape);
        } while (batches[b].n_tokens == 0); /* a forward needs at least one token */
        batch_params[b] = tu_params(thresholds[b % 3], b % 2 ? 8 : 0);
        if (batches[b].n_tokens > max_tokens) max_tokens = batches[b].n_tokens;
        for (size_t s = 0; s < batches[b].n_seqs; s++)
            if (batches[b].cu[s + 1] - batches[b].cu[s] > max_len) max_len = batches[b].cu[s + 1] - batches[b].cu[s];
    }

    test_shared_model();
    test_last_error_per_thread();

    for (int b = 0; b < N_BATCHES; b++) {
        for (int mode = 0; mode < N_MODES; mode++) free(serial[b][mode]);
        tu_batch_free(&batches[b]);
    }
    tiny_setup_close(&t);
    return tu_summary();
}
