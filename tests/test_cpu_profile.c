/*
 * test_cpu_profile.c: rmlp_context_cpu_profile, where a CPU context's forwards spend their time.
 *
 * - Off (a new context), forwards are neither counted nor timed; on, every whole forward is
 *   counted (full and compact space, with and without a prefix cache), each phase of a measured
 *   forward gets time, the phases add up to no more than the forwards' total, and the total is no
 *   more than the wall time around the calls.
 * - A read restarts the count from zero; NULL sets measuring without reading.
 * - Measuring changes no output bit.
 * - A host attention callback's time is attention: a callback that sleeps 5 ms per layer gives
 *   attention at least that.
 * - A struct_size that is not an rmlp_cpu_profile's is refused with a message; a newer header's
 *   larger struct gets its unknown tail zeroed.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>
#include <time.h>

#include "test_util.h"
#include "tiny_setup.h"

#define CAP 256

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static rmlp_cpu_profile read_profile(rmlp_context *ctx, bool measure) {
    rmlp_cpu_profile p;
    memset(&p, 0xA5, sizeof p);
    p.struct_size = sizeof p;
    CHECK_EQ(rmlp_context_cpu_profile(ctx, measure, &p), RMLP_OK, "read: %s", rmlp_last_error());
    return p;
}

static double phases(const rmlp_cpu_profile *p) {
    return p->gemm_ms + p->attention_ms + p->elementwise_ms + p->gather_ms;
}

static void check_zero(const rmlp_cpu_profile *p, const char *what) {
    CHECK(p->cpu && p->forwards == 0 && p->total_ms == 0.0 && phases(p) == 0.0,
          "%s: cpu %d, %llu forwards, %.3f ms total, %.3f ms in phases (want nothing measured)", what, p->cpu,
          (unsigned long long)p->forwards, p->total_ms, phases(p));
}

/* A measured read of `forwards` forwards that took `wall_ms` around them. */
static void check_measured(const rmlp_cpu_profile *p, uint64_t forwards, double wall_ms, const char *what) {
    CHECK(p->cpu && p->forwards == forwards, "%s: %llu forwards counted, want %llu", what,
          (unsigned long long)p->forwards, (unsigned long long)forwards);
    CHECK(p->gemm_ms > 0.0 && p->attention_ms > 0.0 && p->elementwise_ms > 0.0 && p->gather_ms > 0.0,
          "%s: a phase got no time: gemm %.4f, attention %.4f, elementwise %.4f, gather %.4f ms", what, p->gemm_ms,
          p->attention_ms, p->elementwise_ms, p->gather_ms);
    CHECK(phases(p) <= p->total_ms + 1e-6 && p->total_ms <= wall_ms + 1e-6,
          "%s: phases %.4f ms, total %.4f ms, wall %.4f ms (want phases <= total <= wall)", what, phases(p),
          p->total_ms, wall_ms);
}

static rmlp_status sleepy_attention(void *user_data, const rmlp_attention_args *args) {
    struct timespec five_ms = {0, 5000000};
    nanosleep(&five_ms, NULL);
    return rmlp_attention(user_data, args);
}

static void test_struct_size(rmlp_context *ctx) {
    rmlp_cpu_profile p = {.struct_size = 8};
    rmlp_status status = rmlp_context_cpu_profile(ctx, false, &p);
    const char *msg = rmlp_last_error();
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, "out->struct_size=8 is not the size of an rmlp_cpu_profile"),
          "struct_size 8: status %d, \"%s\"", status, msg);
    tu_record_bad_input("rmlp_cpu_profile.struct_size too small", status, msg);
    struct {
        rmlp_cpu_profile p;
        char tail[24];
    } newer;
    memset(&newer, 0x5A, sizeof newer);
    newer.p.struct_size = sizeof newer;
    CHECK_EQ(rmlp_context_cpu_profile(ctx, false, &newer.p), RMLP_OK, "a newer header's struct: %s", rmlp_last_error());
    int zero = newer.p.struct_size == sizeof(rmlp_cpu_profile);
    for (size_t i = 0; i < sizeof newer.tail; i++) zero &= newer.tail[i] == 0;
    CHECK(zero, "a newer header's struct: struct_size %u, the tail not zeroed", newer.p.struct_size);
}

int main(void) {
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 1000, .hidden_size = 64,
                              .intermediate_size = 96, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .head_dim = 16, .max_position_embeddings = 256,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    tiny_setup t;
    if (!tiny_setup_open(&t, &tiny, 7, CAP, 4u << 20)) return tu_summary();
    rmlp_model_config cfg = t.cfg;
    rmlp_planner *planner = t.planner;
    rmlp_context *ctx = t.ctx, *cached = t.cached; /* without and with a prefix cache */
    uint64_t rng = 0x9F0F;
    tu_batch_shape shape = {.n_seqs = 6, .max_len = 40, .vocab = 1000, .prefix_len = 20};
    tu_batch b = tu_random_batch(&rng, &shape);
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 8);
    size_t bytes = (size_t)(b.n_tokens + 8) * cfg.hidden_size * sizeof(float);
    float *plain = tu_xmalloc(bytes), *measured = tu_xmalloc(bytes);
    CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &pp, &plan) == RMLP_OK && plan.use_radix,
          "plan: %s", rmlp_last_error());

    check_zero(&(rmlp_cpu_profile){.cpu = true}, "self-check");
    CHECK_EQ(rmlp_forward(ctx, &plan, NULL, NULL, plain), RMLP_OK, "unmeasured forward: %s", rmlp_last_error());
    rmlp_cpu_profile p = read_profile(ctx, true);
    check_zero(&p, "a new context's forward (measuring off)");

    double start = now_ms();
    CHECK_EQ(rmlp_forward(ctx, &plan, NULL, NULL, measured), RMLP_OK, "measured forward: %s", rmlp_last_error());
    CHECK(memcmp(plain, measured, (size_t)b.n_tokens * cfg.hidden_size * sizeof(float)) == 0,
          "measuring changed the forward's output");
    CHECK_EQ(rmlp_forward_compact(ctx, &plan, NULL, NULL, measured), RMLP_OK, "compact: %s", rmlp_last_error());
    p = read_profile(ctx, true);
    check_measured(&p, 2, now_ms() - start, "full and compact forwards");

    p = read_profile(ctx, false);
    check_zero(&p, "a read right after a read");
    CHECK_EQ(rmlp_forward(ctx, &plan, NULL, NULL, measured), RMLP_OK, "forward: %s", rmlp_last_error());
    check_zero((p = read_profile(ctx, false), &p), "measuring turned off by the previous read");

    CHECK_EQ(rmlp_context_cpu_profile(ctx, true, NULL), RMLP_OK, "NULL out: %s", rmlp_last_error());
    start = now_ms();
    CHECK_EQ(rmlp_forward(ctx, &plan, sleepy_attention, ctx, measured), RMLP_OK, "callback: %s", rmlp_last_error());
    p = read_profile(ctx, false);
    check_measured(&p, 1, now_ms() - start, "a forward with a host callback");
    CHECK(p.attention_ms >= 5.0 * cfg.num_hidden_layers, "callback sleeping 5 ms per layer: attention %.3f ms",
          p.attention_ms);
    CHECK(memcmp(plain, measured, (size_t)b.n_tokens * cfg.hidden_size * sizeof(float)) == 0,
          "the callback's forward differs from the built-in one");

    CHECK_EQ(rmlp_context_cpu_profile(cached, true, NULL), RMLP_OK, "cached: %s", rmlp_last_error());
    start = now_ms();
    CHECK_EQ(rmlp_forward(cached, &plan, NULL, NULL, measured), RMLP_OK, "cached forward: %s", rmlp_last_error());
    p = read_profile(cached, false);
    check_measured(&p, 1, now_ms() - start, "a forward through the prefix cache");

    test_struct_size(ctx);
    free(plain), free(measured);
    tu_batch_free(&b);
    tiny_setup_close(&t);
    return tu_summary();
}
