/*
 * test_bad_input.c: every invalid argument gets its exact status and a message naming the
 * argument and index, *out is zeroed, and the planner still builds a valid batch afterwards.
 * One table row per bad input. Also: reserve/create/free edge cases, last error cleared on
 * success, and the status strings.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/plan_verify.h"
#include "radix_mlp.h"
#include "test_util.h"

#define U(...) ((const uint32_t[]){__VA_ARGS__})

enum params_kind {
    P_DEFAULT, P_NULL, P_PAD0, P_PAD8, P_PAD_HUGE, P_NAN, P_NEG, P_NEG_INF, P_SIZE0, P_SIZE_SMALL, P_SIZE_LARGE,
    P_SIZE_HUGE, P_GATE
};

/* Params with room behind them, so a struct_size larger than this header's is read from memory
 * the test owns (as a caller compiled against a newer header would pass it). */
typedef struct params_buffer {
    rmlp_plan_params p;
    unsigned char newer[16]; /* fields of a newer header */
} params_buffer;

typedef struct bad_case {
    const char *name;
    int null_planner, null_out;
    const uint32_t *ids, *pos;
    size_t n_tokens;
    const uint32_t *cu;
    size_t n_seqs;
    enum params_kind params;
    rmlp_status want;
    const char *want_msg; /* substring of rmlp_last_error() */
} bad_case;

/* Dummy data for the size checks, which must fail before anything is read. */
static const uint32_t dummy[4] = {0, 0, 0, 0};
#define HUGE_N ((size_t)UINT32_MAX + 1)

static const bad_case bad_cases[] = {
    {"cu_seqlens[0] != 0", 0, 0, U(1, 2, 3), U(0, 1, 2), 3, U(1, 3), 1, P_DEFAULT, RMLP_ERR_INVALID_SEQLENS,
     "cu_seqlens[0]=1"},
    {"decreasing cu_seqlens", 0, 0, U(1, 2, 3, 4), U(0, 1, 2, 3), 4, U(0, 3, 1, 4), 3, P_DEFAULT,
     RMLP_ERR_INVALID_SEQLENS, "cu_seqlens[2]=1 < cu_seqlens[1]=3"},
    {"last cu_seqlens != n_tokens", 0, 0, U(1, 2, 3, 4), U(0, 1, 2, 3), 4, U(0, 2, 3), 2, P_DEFAULT,
     RMLP_ERR_INVALID_SEQLENS, "cu_seqlens[2]=3, must equal n_tokens=4"},
    {"last cu_seqlens > n_tokens", 0, 0, U(1, 2), U(0, 1), 2, U(0, 5), 1, P_DEFAULT, RMLP_ERR_INVALID_SEQLENS,
     "cu_seqlens[1]=5, must equal n_tokens=2"},
    {"n_seqs 0", 0, 0, NULL, NULL, 0, U(0), 0, P_DEFAULT, RMLP_ERR_INVALID_SEQLENS, "n_seqs is 0"},
    {"n_tokens > 2^32-1", 0, 0, dummy, dummy, HUGE_N, dummy, 1, P_DEFAULT, RMLP_ERR_TOO_LARGE,
     "n_tokens=4294967296 exceeds 2^32-1"},
    {"n_seqs > 2^32-1", 0, 0, dummy, dummy, 1, dummy, HUGE_N, P_DEFAULT, RMLP_ERR_TOO_LARGE,
     "n_seqs=4294967296 exceeds 2^32-1"},
    {"padded size > 2^32-1", 0, 0, dummy, dummy, UINT32_MAX - 4, dummy, 1, P_PAD8, RMLP_ERR_TOO_LARGE,
     "n_tokens=4294967291 padded to a multiple of 8 exceeds 2^32-1"},
    {"NULL input_ids", 0, 0, NULL, U(0, 1, 2), 3, U(0, 3), 1, P_DEFAULT, RMLP_ERR_INVALID_ARGUMENT,
     "input_ids is NULL but n_tokens=3"},
    {"NULL position_ids", 0, 0, U(1, 2, 3), NULL, 3, U(0, 3), 1, P_DEFAULT, RMLP_ERR_INVALID_ARGUMENT,
     "position_ids is NULL but n_tokens=3"},
    {"NULL cu_seqlens", 0, 0, U(1, 2, 3), U(0, 1, 2), 3, NULL, 1, P_DEFAULT, RMLP_ERR_INVALID_ARGUMENT,
     "cu_seqlens is NULL but n_seqs=1"},
    {"NULL planner", 1, 0, U(1), U(0), 1, U(0, 1), 1, P_DEFAULT, RMLP_ERR_INVALID_ARGUMENT, "planner is NULL"},
    {"NULL out", 0, 1, U(1), U(0), 1, U(0, 1), 1, P_DEFAULT, RMLP_ERR_INVALID_ARGUMENT, "out is NULL"},
    {"pad with pad_multiple_of 0", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_PAD0, RMLP_ERR_INVALID_ARGUMENT,
     "pad_multiple_of is 0"},
    {"pad_multiple_of over the maximum", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_PAD_HUGE, RMLP_ERR_INVALID_ARGUMENT,
     "params->pad_multiple_of=4097 exceeds RMLP_MAX_PAD_MULTIPLE=4096"},
    {"threshold NaN", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_NAN, RMLP_ERR_INVALID_ARGUMENT, "threshold is NaN"},
    {"threshold negative", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_NEG, RMLP_ERR_INVALID_ARGUMENT,
     "threshold=-0.5 is negative"},
    {"threshold -inf", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_NEG_INF, RMLP_ERR_INVALID_ARGUMENT,
     "threshold=-inf is negative"},
    {"struct_size 0", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_SIZE0, RMLP_ERR_INVALID_ARGUMENT, "params->struct_size=0"},
    {"struct_size of no release (4 less than this header's)", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_SIZE_SMALL,
     RMLP_ERR_INVALID_ARGUMENT, "is not the size of a rmlp_plan_params"},
    {"struct_size larger, a field past this library's set", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_SIZE_LARGE,
     RMLP_ERR_INVALID_ARGUMENT, "past the 32 bytes of this library's rmlp_plan_params, is 1, not 0"},
    {"struct_size 0xFFFFFFFF", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_SIZE_HUGE, RMLP_ERR_INVALID_ARGUMENT,
     "params->struct_size=4294967295 is not the size of any rmlp_plan_params"},
    {"gate neither DISTINCT nor TEI", 0, 0, U(1), U(0), 1, U(0, 1), 1, P_GATE, RMLP_ERR_INVALID_ARGUMENT,
     "params->gate=2 is neither RMLP_GATE_DISTINCT nor RMLP_GATE_TEI"},
};

static params_buffer make_params(enum params_kind kind) {
    params_buffer buffer;
    memset(&buffer, 0, sizeof buffer);
    buffer.p = rmlp_plan_default_params();
    rmlp_plan_params *p = &buffer.p;
    switch (kind) {
    case P_DEFAULT: case P_NULL: break;
    case P_PAD0: p->pad = true, p->pad_multiple_of = 0; break;
    case P_PAD8: p->pad = true, p->pad_multiple_of = 8; break;
    case P_PAD_HUGE: p->pad = true, p->pad_multiple_of = RMLP_MAX_PAD_MULTIPLE + 1; break;
    case P_NAN: p->threshold = NAN; break;
    case P_NEG: p->threshold = -0.5; break;
    case P_NEG_INF: p->threshold = -INFINITY; break;
    case P_SIZE0: p->struct_size = 0; break;
    case P_SIZE_SMALL: p->struct_size = (uint32_t)sizeof(rmlp_plan_params) - 4; break;
    case P_SIZE_LARGE: p->struct_size = (uint32_t)sizeof(rmlp_plan_params) + 8, buffer.newer[3] = 1; break;
    case P_SIZE_HUGE: p->struct_size = UINT32_MAX; break;
    case P_GATE: p->gate = 2; break;
    }
    return buffer;
}

/* After an error the planner must still build a valid plan: [1,2,3],[1,2,4] gives N' = 4. */
static void check_still_usable(const char *name, rmlp_planner *planner) {
    static const uint32_t ids[6] = {1, 2, 3, 1, 2, 4}, pos[6] = {0, 1, 2, 0, 1, 2}, cu[3] = {0, 3, 6};
    rmlp_plan_params params = rmlp_plan_default_params();
    params.pad = true;
    params.threshold = 1.0;
    rmlp_plan plan;
    char why[256];
    rmlp_status status = rmlp_plan_build(planner, ids, pos, 6, cu, 2, &params, &plan);
    if (!CHECK(status == RMLP_OK, "%s: valid build afterwards: status %d (%s)", name, status, rmlp_last_error()))
        return;
    CHECK(rmlp_last_error()[0] == '\0', "%s: last error after success is \"%s\"", name, rmlp_last_error());
    CHECK(plan_verify(ids, pos, 6, cu, 2, 8, &plan, why, sizeof why) == 0, "%s: valid build afterwards: %s", name,
          why);
    CHECK(plan.n_compact == 4 && plan.n_compact_padded == 8 && plan.scatter[5] == 3 && plan.fold_gather[3] == 5,
          "%s: valid build afterwards: N'=%u padded %u", name, plan.n_compact, plan.n_compact_padded);
}

static void test_plan_build_errors(rmlp_planner *planner) {
    for (size_t c = 0; c < sizeof bad_cases / sizeof bad_cases[0]; c++) {
        const bad_case *k = &bad_cases[c];
        params_buffer params = make_params(k->params);
        rmlp_plan out;
        memset(&out, 0xAB, sizeof out);
        rmlp_status status = rmlp_plan_build(k->null_planner ? NULL : planner, k->ids, k->pos, k->n_tokens, k->cu,
                                             k->n_seqs, k->params == P_NULL ? NULL : &params.p,
                                             k->null_out ? NULL : &out);
        const char *msg = rmlp_last_error();
        tu_record_bad_input(k->name, status, msg);
        CHECK(status == k->want, "%s: status %d (%s), want %d (%s); message \"%s\"", k->name, status,
              rmlp_status_string(status), k->want, rmlp_status_string(k->want), msg);
        CHECK(strstr(msg, k->want_msg) != NULL, "%s: message \"%s\" lacks \"%s\"", k->name, msg, k->want_msg);
        CHECK(strncmp(msg, "rmlp_plan_build: ", 17) == 0, "%s: message \"%s\" does not name the function", k->name,
              msg);
        if (!k->null_out) {
            rmlp_plan zero;
            memset(&zero, 0, sizeof zero);
            CHECK(memcmp(&out, &zero, sizeof out) == 0, "%s: *out not zeroed (n_tokens=%u, scatter=%p)", k->name,
                  out.n_tokens, (const void *)out.scatter);
        }
        check_still_usable(k->name, planner);
    }
}

/* Valid edge cases that must not be rejected. */
static void test_accepted_edges(rmlp_planner *planner) {
    rmlp_plan plan;
    rmlp_status status = rmlp_plan_build(planner, NULL, NULL, 0, U(0, 0), 1, NULL, &plan);
    CHECK(status == RMLP_OK && plan.n_tokens == 0 && plan.n_compact == 0,
          "NULL ids/positions with n_tokens 0: status %d (%s)", status, rmlp_last_error());
    rmlp_plan_params params = rmlp_plan_default_params();
    params.pad_multiple_of = 0; /* ignored while pad is false */
    status = rmlp_plan_build(planner, U(1), U(0), 1, U(0, 1), 1, &params, &plan);
    CHECK(status == RMLP_OK, "pad_multiple_of 0 without pad: status %d (%s)", status, rmlp_last_error());
    params = rmlp_plan_default_params();
    params.threshold = -0.0;
    status = rmlp_plan_build(planner, U(1), U(0), 1, U(0, 1), 1, &params, &plan);
    CHECK(status == RMLP_OK && !plan.use_radix, "threshold -0.0 (= off): status %d (%s)", status, rmlp_last_error());
}

static void test_planner_errors(rmlp_planner *planner) {
    rmlp_status status = rmlp_planner_create(NULL);
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT, "rmlp_planner_create(NULL): status %d", status);
    CHECK(strstr(rmlp_last_error(), "rmlp_planner_create: out is NULL") != NULL, "create(NULL): message \"%s\"",
          rmlp_last_error());

    static const struct {
        const char *name;
        int null_planner;
        size_t n_tokens, n_seqs;
        uint32_t pad;
        rmlp_status want;
        const char *want_msg;
    } reserves[] = {
        {"reserve(NULL)", 1, 10, 1, 8, RMLP_ERR_INVALID_ARGUMENT, "rmlp_planner_reserve: planner is NULL"},
        {"reserve n_tokens > 2^32-1", 0, HUGE_N, 1, 0, RMLP_ERR_TOO_LARGE, "n_tokens=4294967296 exceeds 2^32-1"},
        {"reserve n_seqs > 2^32-1", 0, 10, HUGE_N, 0, RMLP_ERR_TOO_LARGE, "n_seqs=4294967296 exceeds 2^32-1"},
        {"reserve padded > 2^32-1", 0, UINT32_MAX, 1, 2, RMLP_ERR_TOO_LARGE,
         "n_tokens=4294967295 padded to a multiple of 2 exceeds 2^32-1"},
        {"reserve pad over the maximum", 0, 10, 1, RMLP_MAX_PAD_MULTIPLE + 1, RMLP_ERR_INVALID_ARGUMENT,
         "max_pad_multiple=4097 exceeds RMLP_MAX_PAD_MULTIPLE=4096"},
        {"reserve small", 0, 100, 4, 8, RMLP_OK, ""},
    };
    for (size_t r = 0; r < sizeof reserves / sizeof reserves[0]; r++) {
        status = rmlp_planner_reserve(reserves[r].null_planner ? NULL : planner, reserves[r].n_tokens,
                                      reserves[r].n_seqs, reserves[r].pad);
        const char *msg = rmlp_last_error();
        tu_record_bad_input(reserves[r].name, status, msg);
        CHECK(status == reserves[r].want, "%s: status %d, want %d (%s)", reserves[r].name, status, reserves[r].want,
              msg);
        CHECK(strstr(msg, reserves[r].want_msg) != NULL && (reserves[r].want != RMLP_OK || msg[0] == '\0'),
              "%s: message \"%s\", want \"%s\"", reserves[r].name, msg, reserves[r].want_msg);
        check_still_usable(reserves[r].name, planner);
    }
    rmlp_planner_free(NULL); /* a no-op; crashing here fails the test */
    CHECK(1, "rmlp_planner_free(NULL)");
}

static void test_status_strings(void) {
    static const rmlp_status codes[] = {RMLP_OK,           RMLP_ERR_INVALID_ARGUMENT, RMLP_ERR_INVALID_SEQLENS,
                                        RMLP_ERR_TOO_LARGE, RMLP_ERR_OUT_OF_MEMORY,    RMLP_ERR_UNSUPPORTED,
                                        RMLP_ERR_CUDA,      RMLP_ERR_NO_DEVICE,        RMLP_ERR_INTERNAL,
                                        RMLP_ERR_IO,        RMLP_ERR_FORMAT,           RMLP_ERR_MODEL,
                                        RMLP_ERR_BUSY,      RMLP_ERR_FULL};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t a = 0; a < n; a++) {
        const char *s = rmlp_status_string(codes[a]);
        CHECK(s != NULL && s[0] != '\0' && strcmp(s, "unknown status") != 0, "rmlp_status_string(%d)=\"%s\"",
              codes[a], s ? s : "(null)");
        for (size_t b = 0; b < a && s != NULL; b++)
            CHECK(strcmp(s, rmlp_status_string(codes[b])) != 0, "codes %d and %d share \"%s\"", codes[a], codes[b], s);
    }
    static const rmlp_status unknown[] = {1, -14, 100, INT32_MIN, INT32_MAX};
    for (size_t u = 0; u < sizeof unknown / sizeof unknown[0]; u++) {
        const char *s = rmlp_status_string(unknown[u]);
        CHECK(s != NULL && strcmp(s, "unknown status") == 0, "rmlp_status_string(%d)=\"%s\"", unknown[u],
              s ? s : "(null)");
    }
}

int main(void) {
    rmlp_planner *planner = NULL;
    if (rmlp_planner_create(&planner) != RMLP_OK) {
        printf("FAIL: rmlp_planner_create: %s\n", rmlp_last_error());
        return 1;
    }
    CHECK(rmlp_last_error()[0] == '\0', "last error after a successful create is \"%s\"", rmlp_last_error());
    test_plan_build_errors(planner);
    test_accepted_edges(planner);
    test_planner_errors(planner);
    test_status_strings();
    rmlp_planner_free(planner);
    return tu_summary();
}
