/*
 * test_handles.c: misused handles are refused, not followed. A handle of another kind (a planner
 * where a context belongs) or a garbage struct is RMLP_ERR_INVALID_ARGUMENT "... was freed or is
 * not an ... handle", and freeing one leaves it alone; a model is not freed while it has contexts;
 * a plan whose planner has built or reserved since is refused as stale, not read.
 *
 * Freed handles (a call or a second free after rmlp_*_free, a plan whose planner was freed) are
 * tried only in builds without AddressSanitizer: the library's check reads the freed handle's
 * magic word, which is the undefined behaviour it guards against (best-effort by design), and
 * which ASan rightly reports as a heap-use-after-free. Under ASan that report is the detection;
 * elsewhere glibc keeps small freed chunks mapped and overwrites their first bytes with its free
 * list, so the word no longer matches and the call is refused instead of running on freed memory.
 */
#include <stdio.h>

#include "test_util.h"
#include "tiny_setup.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static rmlp_model *model;
static rmlp_model_config cfg;

/* A batch of two sequences sharing a prefix, and one with nothing shared (both 6 tokens). */
static const uint32_t ids_a[6] = {1, 2, 3, 1, 2, 4}, ids_b[6] = {5, 6, 7, 8, 9, 10};
static const uint32_t pos6[6] = {0, 1, 2, 0, 1, 2}, cu6[3] = {0, 3, 6};

static rmlp_status build(rmlp_planner *planner, const uint32_t *ids, rmlp_plan *plan) {
    rmlp_plan_params params = tu_params(1.0, 0);
    return rmlp_plan_build(planner, ids, pos6, 6, cu6, 2, &params, plan);
}

/* status and message of the call just made, recorded for docs/errors.md's table when `record`. */
static void expect(const char *what, rmlp_status status, rmlp_status want, const char *want_msg, int record) {
    const char *msg = rmlp_last_error();
    if (record) tu_record_bad_input(what, status, msg);
    CHECK(status == want && strstr(msg, want_msg) != NULL, "%s: status %d (want %d), message \"%s\" (want \"%s\")",
          what, status, want, msg, want_msg);
}

/* After a free that must leave the handle alone: its message. */
static void expect_left_alone(const char *what, const char *want_msg) {
    const char *msg = rmlp_last_error();
    CHECK(strstr(msg, want_msg) != NULL, "%s: message \"%s\" (want \"%s\")", what, msg, want_msg);
}

static void test_wrong_kind(rmlp_planner *planner, rmlp_context *ctx) {
    rmlp_plan plan;
    float out[6 * 16];
    _Alignas(16) unsigned char zeros[256] = {0}, junk[256];
    memset(junk, 0xAB, sizeof junk);
    rmlp_model_config got;
    rmlp_context *none = NULL;
    expect("a context passed as the planner", rmlp_plan_build((rmlp_planner *)ctx, ids_a, pos6, 6, cu6, 2, NULL, &plan),
           RMLP_ERR_INVALID_ARGUMENT, "planner was freed or is not an rmlp_planner handle", 1);
    expect("a model passed as the planner", rmlp_planner_reserve((rmlp_planner *)model, 10, 1, 0),
           RMLP_ERR_INVALID_ARGUMENT, "planner was freed or is not an rmlp_planner handle", 1);
    expect("a garbage struct passed as the planner", rmlp_plan_build((rmlp_planner *)junk, ids_a, pos6, 6, cu6, 2,
                                                                     NULL, &plan),
           RMLP_ERR_INVALID_ARGUMENT, "planner was freed or is not an rmlp_planner handle", 0);
    if (!CHECK(build(planner, ids_a, &plan) == RMLP_OK, "build: %s", rmlp_last_error())) return;
    expect("a planner passed as the context", rmlp_forward((rmlp_context *)planner, &plan, NULL, NULL, out),
           RMLP_ERR_INVALID_ARGUMENT, "context was freed or is not an rmlp_context handle", 1);
    expect("a zeroed struct passed as the context", rmlp_embed((rmlp_context *)zeros, &plan, out),
           RMLP_ERR_INVALID_ARGUMENT, "context was freed or is not an rmlp_context handle", 1);
    expect("a model passed as the context", rmlp_context_set_plan((rmlp_context *)model, &plan),
           RMLP_ERR_INVALID_ARGUMENT, "context was freed or is not an rmlp_context handle", 0);
    expect("a context passed as the model", rmlp_context_create((const rmlp_model *)ctx, 8, &none),
           RMLP_ERR_INVALID_ARGUMENT, "model was freed or is not an rmlp_model handle", 1);
    expect("a planner passed as the model", rmlp_model_get_config((const rmlp_model *)planner, &got),
           RMLP_ERR_INVALID_ARGUMENT, "model was freed or is not an rmlp_model handle", 1);
    CHECK(none == NULL, "rmlp_context_create on a non-model set *out");

    /* Frees of the wrong kind or of garbage do nothing: every handle still works afterwards. */
    rmlp_planner_free((rmlp_planner *)ctx);
    expect_left_alone("rmlp_planner_free(a context)", "rmlp_planner_free: planner was freed or is not an rmlp_planner "
                                                      "handle; left alone");
    rmlp_context_free((rmlp_context *)planner);
    expect_left_alone("rmlp_context_free(a planner)", "rmlp_context_free: context was freed or is not");
    rmlp_model_free((rmlp_model *)ctx);
    expect_left_alone("rmlp_model_free(a context)", "rmlp_model_free: model was freed or is not");
    rmlp_model_free((rmlp_model *)junk);
    rmlp_context_free((rmlp_context *)zeros);
    CHECK(build(planner, ids_a, &plan) == RMLP_OK && rmlp_forward(ctx, &plan, NULL, NULL, out) == RMLP_OK &&
              rmlp_model_get_config(model, &got) == RMLP_OK,
          "the handles after wrong frees: %s", rmlp_last_error());
}

static void test_model_with_contexts(void) {
    rmlp_context *a = NULL, *b = NULL;
    if (!CHECK(rmlp_context_create(model, 8, &a) == RMLP_OK && rmlp_context_create(model, 8, &b) == RMLP_OK,
               "contexts: %s", rmlp_last_error()))
        return;
    rmlp_model_free(model); /* main()'s context, a and b */
    expect_left_alone("rmlp_model_free with 3 contexts", "rmlp_model_free: the model still has 3 context(s)");
    rmlp_context_free(a);
    CHECK(rmlp_last_error()[0] == '\0', "a free that succeeds leaves \"%s\"", rmlp_last_error());
    rmlp_model_free(model);
    expect_left_alone("rmlp_model_free with 2 contexts", "the model still has 2 context(s): free them first");
    rmlp_model_config got;
    CHECK(rmlp_model_get_config(model, &got) == RMLP_OK, "the model after refused frees: %s", rmlp_last_error());
    rmlp_context_free(b); /* main() frees the model, which must then succeed */
}

static void test_stale_plan(rmlp_planner *planner, rmlp_context *ctx) {
    float out[6 * 16], want[6 * 16];
    rmlp_plan first, second;
    if (!CHECK(build(planner, ids_a, &first) == RMLP_OK, "build: %s", rmlp_last_error())) return;
    CHECK(first.planner == planner && first.generation > 0, "plan names its planner (%p) and generation %llu",
          (const void *)first.planner, (unsigned long long)first.generation);
    rmlp_plan copy = tu_plan_copy(&first); /* a host's own copy: planner NULL */
    if (!CHECK(rmlp_forward(ctx, &first, NULL, NULL, want) == RMLP_OK, "forward: %s", rmlp_last_error())) return;
    if (!CHECK(build(planner, ids_b, &second) == RMLP_OK, "build: %s", rmlp_last_error())) return;
    CHECK(second.generation > first.generation, "generations %llu then %llu", (unsigned long long)first.generation,
          (unsigned long long)second.generation);
    /* first's counts and pointers would still pass every other check: its arrays now hold ids_b */
    expect("a plan whose planner has built again", rmlp_forward(ctx, &first, NULL, NULL, out),
           RMLP_ERR_INVALID_ARGUMENT, "the plan is stale: its planner has built or reserved since", 1);
    expect("the same, to rmlp_embed", rmlp_embed(ctx, &first, out), RMLP_ERR_INVALID_ARGUMENT, "the plan is stale",
           0);
    CHECK(rmlp_forward(ctx, &second, NULL, NULL, out) == RMLP_OK, "the planner's latest plan: %s",
          rmlp_last_error());
    CHECK(rmlp_forward(ctx, &copy, NULL, NULL, out) == RMLP_OK && memcmp(out, want, sizeof out) == 0,
          "a copy of the first plan still runs, and as before: %s", rmlp_last_error());
    CHECK(rmlp_planner_reserve(planner, 100, 4, 8) == RMLP_OK, "reserve: %s", rmlp_last_error());
    expect("a plan whose planner has reserved since", rmlp_context_set_plan(ctx, &second), RMLP_ERR_INVALID_ARGUMENT,
           "the plan is stale", 1);
    tu_plan_copy_free(&copy);
}

#if !UNDER_ASAN
/* Calls with freed handles: refused, and a second free does nothing (glibc would abort on a real
 * double free). */
static void test_freed_handles(void) {
    rmlp_planner *planner = NULL;
    rmlp_context *ctx = NULL;
    rmlp_plan plan;
    float out[6 * 16];
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK && rmlp_context_create(model, 8, &ctx) == RMLP_OK &&
                   build(planner, ids_a, &plan) == RMLP_OK,
               "setup: %s", rmlp_last_error()))
        return;
    rmlp_planner_free(planner);
    expect("a plan whose planner was freed", rmlp_forward(ctx, &plan, NULL, NULL, out), RMLP_ERR_INVALID_ARGUMENT,
           "the plan's planner was freed", 0);
    expect("a freed planner", build(planner, ids_a, &plan), RMLP_ERR_INVALID_ARGUMENT,
           "planner was freed or is not an rmlp_planner handle", 0);
    rmlp_planner_free(planner);
    expect_left_alone("a second rmlp_planner_free", "planner was freed or is not an rmlp_planner handle; left alone");

    rmlp_context_free(ctx);
    expect("a freed context", rmlp_context_set_plan(ctx, &plan), RMLP_ERR_INVALID_ARGUMENT,
           "context was freed or is not an rmlp_context handle", 0);
    rmlp_context_free(ctx);
    expect_left_alone("a second rmlp_context_free", "context was freed or is not an rmlp_context handle; left alone");

    rmlp_model_free(model);
    CHECK(rmlp_last_error()[0] == '\0', "freeing the model: \"%s\"", rmlp_last_error());
    rmlp_model_config got;
    rmlp_context *none = NULL;
    expect("a freed model", rmlp_model_get_config(model, &got), RMLP_ERR_INVALID_ARGUMENT,
           "model was freed or is not an rmlp_model handle", 0);
    expect("a context of a freed model", rmlp_context_create(model, 8, &none), RMLP_ERR_INVALID_ARGUMENT,
           "model was freed or is not an rmlp_model handle", 0);
    rmlp_model_free(model);
    expect_left_alone("a second rmlp_model_free", "model was freed or is not an rmlp_model handle; left alone");
    model = NULL;
}
#endif

int main(void) {
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 32, .hidden_size = 16,
                              .intermediate_size = 24, .num_hidden_layers = 2, .num_attention_heads = 2,
                              .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    tiny_setup t;
    if (!tiny_setup_open(&t, &tiny, 5, 8, 0)) return tu_summary();
    model = t.model, cfg = t.cfg;
    test_wrong_kind(t.planner, t.ctx);
    test_model_with_contexts();
    test_stale_plan(t.planner, t.ctx);
    rmlp_context_free(t.ctx);
    rmlp_planner_free(t.planner);
    t.ctx = NULL, t.planner = NULL;
#if UNDER_ASAN
    printf("freed handles not tried: this build has AddressSanitizer, which reports the use after free itself\n");
#else
    test_freed_handles();
    t.model = model; /* NULL once test_freed_handles freed it */
#endif
    tiny_setup_close(&t);
    return tu_summary();
}
