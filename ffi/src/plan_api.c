/*
 * plan_api.c: the exported planner entry points. Every argument is checked here, with a
 * message that names the argument and index, before the trie/ code (which trusts its input)
 * runs. Each call on a planner holds its guard (common/guard.h): a freed planner or another
 * kind of handle is refused, and so is a planner another thread is using (RMLP_ERR_BUSY).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "radix_mlp.h"
#include "trie/planner.h"
#include "common/export.h"
#include "common/status.h"
#include "common/guard.h"
#include "validate.h"

/* rmlp_plan_params as 0.1.0 released it: the size callers compiled against that header pass. */
typedef struct plan_params_0_1 {
    uint32_t struct_size;
    bool pad;
    uint32_t pad_multiple_of;
    double threshold;
} plan_params_0_1;

static const size_t older_plan_params_sizes[] = {sizeof(plan_params_0_1)};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

RMLP_EXPORT rmlp_plan_params rmlp_plan_default_params(void) {
    rmlp_plan_params params;
    memset(&params, 0, sizeof params); /* padding bytes too, so params compare with memcmp */
    params.struct_size = (uint32_t)sizeof(rmlp_plan_params);
    params.pad = false;
    params.pad_multiple_of = RMLP_DEFAULT_PAD_MULTIPLE;
    params.threshold = RMLP_DEFAULT_THRESHOLD;
    params.gate = RMLP_GATE_DISTINCT;
    return params;
}

/* A finite decimal number filling all of `text` (no blanks, no hex); 0 on success. With
 * `whole`, digits only. */
static int parse_env_number(const char *text, int whole, double *out) {
    for (const char *c = text; *c; c++)
        if (!(isdigit((unsigned char)*c) || (!whole && (*c == '.' || *c == 'e' || *c == 'E' || *c == '+' || *c == '-'))))
            return -1;
    char *end = NULL;
    errno = 0;
    *out = strtod(text, &end);
    return end == text || *end != '\0' || errno != 0 || !isfinite(*out) ? -1 : 0;
}

RMLP_EXPORT rmlp_status rmlp_plan_params_from_env(rmlp_plan_params *out) {
    static const char fn[] = "rmlp_plan_params_from_env";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    rmlp_plan_params p = rmlp_plan_default_params();
    p.gate = RMLP_GATE_TEI; /* the variables are TEI's: they decide as TEI's code does */
    *out = p;               /* what an empty environment gives, also on an error below */
    double value = 0.0;
    const char *threshold = getenv("RADIX_MLP_THRESHOLD");
    if (threshold != NULL && *threshold != '\0') {
        if (parse_env_number(threshold, 0, &value) != 0 || value < 0.0)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "RADIX_MLP_THRESHOLD='%s' is not a number >= 0 (0 = off, >= 1 = always on)", threshold);
        p.threshold = value;
    }
    const char *pad = getenv("RADIX_MLP_PAD");
    if (pad != NULL && *pad != '\0') {
        if (parse_env_number(pad, 1, &value) != 0 || value < 1.0 || value > RMLP_MAX_PAD_MULTIPLE)
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "RADIX_MLP_PAD='%s' is not a whole number in 1..%u", pad,
                             (unsigned)RMLP_MAX_PAD_MULTIPLE);
        p.pad = true;
        p.pad_multiple_of = (uint32_t)value;
    }
    const char *gate = getenv("RADIX_MLP_GATE");
    if (gate != NULL && *gate != '\0') {
        if (strcmp(gate, "distinct") == 0)
            p.gate = RMLP_GATE_DISTINCT;
        else if (strcmp(gate, "tei") == 0)
            p.gate = RMLP_GATE_TEI;
        else
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                             "RADIX_MLP_GATE='%s' is neither 'distinct' (this library's rule) nor 'tei' (TEI's)", gate);
    }
    *out = p;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_planner_create(rmlp_planner **out) {
    static const char fn[] = "rmlp_planner_create";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = trie_planner_new();
    if (*out == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the planner (%zu bytes) failed", trie_planner_size());
    rmlp_guard_init((rmlp_guard *)*out, RMLP_MAGIC_PLANNER); /* the planner's first member */
    return RMLP_OK;
}

RMLP_EXPORT void rmlp_planner_free(rmlp_planner *planner) {
    if (planner != NULL &&
        rmlp_guard_retire("rmlp_planner_free", planner, RMLP_MAGIC_PLANNER, "planner", "rmlp_planner"))
        trie_planner_delete(planner);
}

/* The guard of every other planner call: NULL, freed, another kind, or busy are refused. */
static rmlp_status enter(const char *fn, rmlp_planner *planner) {
    return rmlp_guard_enter(fn, planner, RMLP_MAGIC_PLANNER, "planner", "rmlp_planner");
}

/* Rows a padded compact space can need; the 32-bit indices must reach all of them. */
static rmlp_status check_sizes(const char *fn, size_t n_tokens, size_t n_seqs, uint32_t pad_multiple) {
    if (n_tokens > UINT32_MAX)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "n_tokens=%zu exceeds 2^32-1", n_tokens);
    if (n_seqs > UINT32_MAX) return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "n_seqs=%zu exceeds 2^32-1", n_seqs);
    uint64_t padded = pad_multiple > 1 ? ((uint64_t)n_tokens + pad_multiple - 1) / pad_multiple * pad_multiple
                                       : (uint64_t)n_tokens;
    if (padded > UINT32_MAX)
        return rmlp_fail(RMLP_ERR_TOO_LARGE, fn, "n_tokens=%zu padded to a multiple of %u exceeds 2^32-1", n_tokens,
                         pad_multiple);
    return RMLP_OK;
}

static rmlp_status reserve(const char *fn, rmlp_planner *planner, size_t n_tokens, size_t n_seqs,
                           uint32_t max_pad_multiple) {
    if (max_pad_multiple > RMLP_MAX_PAD_MULTIPLE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "max_pad_multiple=%u exceeds RMLP_MAX_PAD_MULTIPLE=%u",
                         max_pad_multiple, (unsigned)RMLP_MAX_PAD_MULTIPLE);
    rmlp_status status = check_sizes(fn, n_tokens, n_seqs, max_pad_multiple);
    if (status != RMLP_OK) return status;
    trie_alloc_failure failed;
    if (trie_planner_reserve(planner, n_tokens, n_seqs, max_pad_multiple, &failed) != 0)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %s (%zu bytes) for %zu tokens in %zu sequences failed",
                         failed.what, failed.bytes, n_tokens, n_seqs);
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_planner_reserve(rmlp_planner *planner, size_t n_tokens, size_t n_seqs,
                                             uint32_t max_pad_multiple) {
    static const char fn[] = "rmlp_planner_reserve";
    rmlp_clear_error();
    rmlp_status status = enter(fn, planner);
    return status != RMLP_OK ? status
                             : rmlp_guard_leave(planner, reserve(fn, planner, n_tokens, n_seqs, max_pad_multiple));
}

/* The caller's params (any version: validate.h) checked into the trie's options. */
static rmlp_status check_params(const char *fn, const rmlp_plan_params *caller, trie_options *options) {
    rmlp_plan_params params = rmlp_plan_default_params();
    rmlp_status status = rmlp_read_params(fn, "rmlp_plan_params", caller, &params, sizeof params,
                                          older_plan_params_sizes,
                                          sizeof older_plan_params_sizes / sizeof older_plan_params_sizes[0]);
    if (status != RMLP_OK) return status;
    if (isnan(params.threshold)) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->threshold is NaN");
    if (params.threshold < 0.0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->threshold=%g is negative (0 turns radix off)",
                         params.threshold);
    if (params.pad && params.pad_multiple_of == 0)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->pad is set but params->pad_multiple_of is 0");
    if (params.pad && params.pad_multiple_of > RMLP_MAX_PAD_MULTIPLE)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->pad_multiple_of=%u exceeds RMLP_MAX_PAD_MULTIPLE=%u",
                         params.pad_multiple_of, (unsigned)RMLP_MAX_PAD_MULTIPLE);
    if (params.gate != RMLP_GATE_DISTINCT && params.gate != RMLP_GATE_TEI)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->gate=%d is neither RMLP_GATE_DISTINCT nor RMLP_GATE_TEI", params.gate);
    options->pad_multiple = params.pad ? params.pad_multiple_of : 0;
    options->threshold = params.threshold;
    options->gate = params.gate;
    return RMLP_OK;
}

static rmlp_status check_batch(const char *fn, const uint32_t *input_ids, const uint32_t *position_ids,
                               size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs) {
    if (n_tokens > 0 && input_ids == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "input_ids is NULL but n_tokens=%zu", n_tokens);
    if (n_tokens > 0 && position_ids == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "position_ids is NULL but n_tokens=%zu", n_tokens);
    return rmlp_check_cu_seqlens(fn, cu_seqlens, n_seqs, n_tokens);
}

static rmlp_status build(const char *fn, rmlp_planner *planner, const uint32_t *input_ids,
                         const uint32_t *position_ids, size_t n_tokens, const uint32_t *cu_seqlens, size_t n_seqs,
                         const rmlp_plan_params *params, rmlp_plan *out) {
    rmlp_plan_params defaults = rmlp_plan_default_params();
    trie_options options;
    rmlp_status status = check_params(fn, params != NULL ? params : &defaults, &options);
    if (status == RMLP_OK) status = check_sizes(fn, n_tokens, n_seqs, options.pad_multiple);
    if (status == RMLP_OK) status = check_batch(fn, input_ids, position_ids, n_tokens, cu_seqlens, n_seqs);
    if (status != RMLP_OK) return status;

    trie_alloc_failure failed;
    if (trie_plan_build(planner, input_ids, position_ids, n_tokens, cu_seqlens, n_seqs, &options, out, &failed) != 0) {
        memset(out, 0, sizeof *out);
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating %s (%zu bytes) for %zu tokens in %zu sequences failed",
                         failed.what, failed.bytes, n_tokens, n_seqs);
    }
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_plan_build(rmlp_planner *planner, const uint32_t *input_ids,
                                        const uint32_t *position_ids, size_t n_tokens, const uint32_t *cu_seqlens,
                                        size_t n_seqs, const rmlp_plan_params *params, rmlp_plan *out) {
    static const char fn[] = "rmlp_plan_build";
    double start = now_us();
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    memset(out, 0, sizeof *out);
    rmlp_status status = enter(fn, planner);
    if (status != RMLP_OK) return status;
    status = rmlp_guard_leave(planner, build(fn, planner, input_ids, position_ids, n_tokens, cu_seqlens, n_seqs,
                                             params, out));
    if (status == RMLP_OK) out->build_us = now_us() - start;
    return status;
}
