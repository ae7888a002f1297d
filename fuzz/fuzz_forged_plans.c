/*
 * fuzz_forged_plans.c: libFuzzer target for plans a host forged (issue 31): genuine batches and
 * one-to-four-element mutations of their plans, run on a context with a prefix cache and on one
 * without, one tiny random model (written and loaded once per process). One input is a cache size
 * (0 to 63 slots) and a sequence of steps, each a batch of a few sequences from a 3-token alphabet
 * (so batches share, extend, diverge from and re-enter the cached paths) planned by the library,
 * then run as planned or forged: a copy of the plan (planner NULL) with elements of scatter,
 * fold_gather, compact_parent, the compact ids and positions, qo_indptr or the runs overwritten.
 *
 * Oracle, at every step: both contexts answer alike, a forged plan refused by both
 * (RMLP_ERR_INVALID_ARGUMENT, message naming the call) or run by both to the same output; a
 * genuine plan run by both to the same output (max |cached - uncached| <= 1e-5 of the largest
 * value), so no forged batch that came before poisoned the cache; and the cache's index consistent
 * (kv_pool_check). Any violation aborts with the reason.
 *
 * Layout of an input: byte 0 & 63: cache slots; then steps: a head byte (sequences 1 + (head & 7)
 * % 6; 0x08 compact output, 0x10 padding, 0x20 radix off, 0x40 forged, 0x80 clear the cache
 * after), per sequence a length byte (% 13) and token bytes (% 3, about two tokens per byte); a
 * forged step then has a count byte (1 + % 4 mutations) and three bytes per mutation: the array
 * (% 8), the element (% its length) and the change (low 2 bits: +1, -1, the value byte >> 2, or
 * RMLP_NO_PARENT).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/kv_cache.h"
#include "ffi/src/model_internal.h"
#include "harness.h"
#include "radix_mlp.h"
#include "tests/test_util.h"
#include "tiny_load.h"

#define MAX_SEQS 6
#define MAX_LEN 12
#define MAX_TOKENS (MAX_SEQS * MAX_LEN)
#define MAX_ROWS (MAX_TOKENS + RMLP_MAX_PAD_MULTIPLE)

static const char TARGET[] = "fuzz_forged_plans";

static rmlp_model *model;
static rmlp_context *plain;
static rmlp_planner *planner;

/* The tiny model (tiny_load.h), a context without a cache and a planner. */
static int setup(void) {
    return fuzz_tiny_model_load(TARGET, 31, &model) == 0 && rmlp_context_create(model, MAX_TOKENS, &plain) == RMLP_OK &&
                   rmlp_planner_create(&planner) == RMLP_OK
               ? 0
               : -1;
}

/* A plan whose arrays are these (planner NULL), as a host keeps one. */
typedef struct owned {
    rmlp_plan plan;
    uint32_t gather[MAX_ROWS], scatter[MAX_TOKENS], ids[MAX_ROWS], pos[MAX_ROWS], parent[MAX_ROWS];
    uint32_t cu[MAX_SEQS + 1], qo[MAX_SEQS + 1], run_indptr[MAX_SEQS + 1], run_start[MAX_TOKENS];
} owned;

static void copy_plan(const rmlp_plan *p, owned *o) {
    size_t nc = p->n_compact_padded * sizeof(uint32_t), ns = (p->n_seqs + 1) * sizeof(uint32_t);
    memcpy(o->gather, p->fold_gather, nc), memcpy(o->ids, p->compact_input_ids, nc);
    memcpy(o->pos, p->compact_position_ids, nc), memcpy(o->parent, p->compact_parent, nc);
    memcpy(o->scatter, p->scatter, p->n_tokens * sizeof(uint32_t)), memcpy(o->cu, p->cu_seqlens, ns);
    memcpy(o->qo, p->qo_indptr, ns), memcpy(o->run_indptr, p->run_indptr, ns);
    memcpy(o->run_start, p->run_start, p->n_runs * sizeof(uint32_t));
    o->plan = *p;
    o->plan.planner = NULL, o->plan.generation = 0;
    o->plan.fold_gather = o->gather, o->plan.scatter = o->scatter, o->plan.compact_input_ids = o->ids;
    o->plan.compact_position_ids = o->pos, o->plan.compact_parent = o->parent, o->plan.cu_seqlens = o->cu;
    o->plan.qo_indptr = o->qo, o->plan.run_indptr = o->run_indptr, o->plan.run_start = o->run_start;
}

/* One mutation from three input bytes. */
static void mutate(owned *o, uint8_t which, uint8_t where, uint8_t how) {
    const rmlp_plan *p = &o->plan;
    struct {
        uint32_t *array, n;
    } maps[8] = {{o->scatter, p->n_tokens},    {o->gather, p->n_compact_padded}, {o->parent, p->n_compact_padded},
                 {o->ids, p->n_compact_padded}, {o->pos, p->n_compact_padded},   {o->qo, p->n_seqs + 1},
                 {o->run_indptr, p->n_seqs + 1}, {o->run_start, p->n_runs}};
    if (maps[which % 8].n == 0) return;
    uint32_t *x = &maps[which % 8].array[where % maps[which % 8].n];
    switch (how & 3) {
    case 0: *x += 1; break;
    case 1: *x -= 1; break;
    case 2: *x = how >> 2; break;
    default: *x = RMLP_NO_PARENT; break;
    }
}

static void violation(const char *what, int step, const char *message) {
    char detail[700];
    snprintf(detail, sizeof detail, "step %d: %s", step, message);
    fuzz_violation(TARGET, what, detail);
}

/* The plan on both contexts; the oracle of the header. */
static void run_both(rmlp_context *cached, const rmlp_plan *plan, int compact, int forged, int step) {
    static float got[MAX_ROWS * FUZZ_TINY_HIDDEN], want[MAX_ROWS * FUZZ_TINY_HIDDEN];
    const char *fn = compact ? "rmlp_forward_compact: " : "rmlp_forward: ";
    rmlp_status warm = tu_forward(cached, plan, compact, got);
    char warm_msg[512];
    snprintf(warm_msg, sizeof warm_msg, "%s", rmlp_last_error());
    rmlp_status cold = tu_forward(plain, plan, compact, want);
    if (warm != cold) violation("the cached and uncached contexts answer differently", step, warm_msg);
    if (warm != RMLP_OK) {
        if (!forged) violation("a genuine plan was refused", step, warm_msg);
        if (warm != RMLP_ERR_INVALID_ARGUMENT || strncmp(warm_msg, fn, strlen(fn)) != 0)
            violation("a forged plan was refused without RMLP_ERR_INVALID_ARGUMENT and a message naming the call",
                      step, warm_msg);
        return;
    }
    double ref = 0.0, worst = tu_max_abs_diff(got, want, (compact ? plan->n_compact : plan->n_tokens) * FUZZ_TINY_HIDDEN,
                                              &ref);
    if (!(worst <= 1e-5 * (ref > 1.0 ? ref : 1.0))) {
        char detail[160];
        snprintf(detail, sizeof detail, "max |cached - uncached| = %g of outputs up to %g (%s plan)", worst, ref,
                 forged ? "a forged" : "a genuine");
        violation("the cached context's output differs from the uncached one's", step, detail);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (model == NULL && setup() != 0) fuzz_violation(TARGET, "setup", rmlp_last_error());
    if (size == 0) return 0;
    rmlp_model_config cfg;
    rmlp_model_get_config(model, &cfg);
    rmlp_context_params params = rmlp_context_default_params();
    uint64_t slot = kv_cache_slot_bytes(&cfg, sizeof(float));
    params.cache_bytes = (data[0] & 63) * slot + slot / 2; /* 0 slots: every batch bypasses the cache */
    rmlp_context *cached = NULL;
    if (rmlp_context_create_with_params(model, MAX_TOKENS, &params, &cached) != RMLP_OK)
        fuzz_violation(TARGET, "context", rmlp_last_error());
    static owned forged;
    uint32_t ids[MAX_TOKENS], pos[MAX_TOKENS], cu[MAX_SEQS + 1];
    size_t at = 1;
    for (int step = 0; at + 2 <= size; step++) {
        uint8_t head = data[at++];
        uint32_t n_seqs = 1 + (head & 7) % MAX_SEQS, n = 0;
        cu[0] = 0;
        for (uint32_t s = 0; s < n_seqs; s++) {
            uint32_t len = at < size ? data[at++] % (MAX_LEN + 1) : 0;
            for (uint32_t t = 0; t < len; t++) {
                ids[n] = at < size ? 1 + data[at] % 3 : 1;
                at += t % 2 == 1;
                pos[n++] = t;
            }
            cu[s + 1] = n;
        }
        if (n == 0) continue; /* an empty batch is refused before any plan is read */
        rmlp_plan_params pp = rmlp_plan_default_params();
        pp.threshold = head & 0x20 ? 0.0 : 1.0;
        pp.pad = (head & 0x10) != 0;
        rmlp_plan plan;
        if (rmlp_plan_build(planner, ids, pos, n, cu, n_seqs, &pp, &plan) != RMLP_OK)
            violation("rmlp_plan_build", step, rmlp_last_error());
        if (head & 0x40) {
            copy_plan(&plan, &forged);
            uint32_t mutations = at < size ? 1 + data[at++] % 4 : 1;
            for (uint32_t m = 0; m < mutations && at + 3 <= size; m++, at += 3)
                mutate(&forged, data[at], data[at + 1], data[at + 2]);
            run_both(cached, &forged.plan, head & 0x08, 1, step);
        } else {
            run_both(cached, &plan, head & 0x08, 0, step);
        }
        char why[200];
        if (kv_pool_check(cached->cache->pool, why, sizeof why) != 0) violation("kv_pool_check", step, why);
        if (head & 0x80) rmlp_context_cache_clear(cached);
    }
    rmlp_context_free(cached);
    return 0;
}
