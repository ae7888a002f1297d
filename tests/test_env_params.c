/*
 * test_env_params.c: rmlp_plan_params_from_env, the switches deployments set
 * (RADIX_MLP_THRESHOLD, RADIX_MLP_PAD, RADIX_MLP_GATE): defaults when unset (TEI's gate rule),
 * values when valid, and an error naming the variable and value when invalid, never a silent
 * default.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "test_util.h"

static void set(const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

/* RADIX_MLP_GATE: which rule the gate follows (the threshold and padding variables unset). */
static void test_gate(void) {
    static const struct {
        const char *gate;
        rmlp_status want;
        rmlp_gate want_gate;
        const char *want_msg;
    } cases[] = {
        /* unset: TEI's rule, as the variables are TEI's; `distinct` opts into this library's */
        {NULL, RMLP_OK, RMLP_GATE_TEI, ""},
        {"", RMLP_OK, RMLP_GATE_TEI, ""},
        {"distinct", RMLP_OK, RMLP_GATE_DISTINCT, ""},
        {"tei", RMLP_OK, RMLP_GATE_TEI, ""},
        {"TEI", RMLP_ERR_INVALID_ARGUMENT, 0, "RADIX_MLP_GATE='TEI' is neither 'distinct'"},
        {"padded", RMLP_ERR_INVALID_ARGUMENT, 0, "RADIX_MLP_GATE='padded' is neither 'distinct'"},
    };
    set("RADIX_MLP_THRESHOLD", NULL);
    set("RADIX_MLP_PAD", NULL);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        set("RADIX_MLP_GATE", cases[k].gate);
        rmlp_plan_params p;
        rmlp_status status = rmlp_plan_params_from_env(&p);
        const char *msg = rmlp_last_error();
        char input[96];
        snprintf(input, sizeof input, "environment RADIX_MLP_GATE=%s", cases[k].gate ? cases[k].gate : "(unset)");
        tu_record_bad_input(input, status, msg);
        CHECK(status == cases[k].want && strstr(msg, cases[k].want_msg) != NULL, "%s: status %d, message \"%s\"",
              input, status, msg);
        if (status == RMLP_OK) CHECK(p.gate == cases[k].want_gate, "%s: gate %d", input, p.gate);
    }
    set("RADIX_MLP_GATE", NULL);
}

int main(void) {
    set("RADIX_MLP_GATE", NULL);
    static const struct {
        const char *threshold, *pad;
        rmlp_status want;
        double want_threshold;
        int want_pad;
        uint32_t want_multiple;
        const char *want_msg;
    } cases[] = {
        {NULL, NULL, RMLP_OK, RMLP_DEFAULT_THRESHOLD, 0, RMLP_DEFAULT_PAD_MULTIPLE, ""},
        {"", "", RMLP_OK, RMLP_DEFAULT_THRESHOLD, 0, RMLP_DEFAULT_PAD_MULTIPLE, ""},
        {"0", NULL, RMLP_OK, 0.0, 0, RMLP_DEFAULT_PAD_MULTIPLE, ""},
        {"0.95", "64", RMLP_OK, 0.95, 1, 64, ""},
        {"1", "1", RMLP_OK, 1.0, 1, 1, ""},
        {"abc", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD='abc'"},
        {"-0.5", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD='-0.5'"},
        {"nan", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD='nan'"},
        {"0.5x", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD='0.5x'"},
        {NULL, "0", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='0' is not a whole number in 1..4096"},
        {NULL, "8.5", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='8.5'"},
        {NULL, "4097", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='4097'"},
        {NULL, "eight", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='eight'"},
        {NULL, "0x10", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='0x10'"},
        {NULL, "1e1", RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_PAD='1e1'"},
        {" 0.5", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD=' 0.5'"},
        {"0x1", NULL, RMLP_ERR_INVALID_ARGUMENT, 0, 0, 0, "RADIX_MLP_THRESHOLD='0x1'"},
        {"1e-1", "16", RMLP_OK, 0.1, 1, 16, ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        set("RADIX_MLP_THRESHOLD", cases[k].threshold);
        set("RADIX_MLP_PAD", cases[k].pad);
        rmlp_plan_params p;
        rmlp_status status = rmlp_plan_params_from_env(&p);
        const char *msg = rmlp_last_error();
        char input[128];
        snprintf(input, sizeof input, "environment RADIX_MLP_THRESHOLD=%s RADIX_MLP_PAD=%s",
                 cases[k].threshold ? cases[k].threshold : "(unset)", cases[k].pad ? cases[k].pad : "(unset)");
        tu_record_bad_input(input, status, msg);
        CHECK(status == cases[k].want && strstr(msg, cases[k].want_msg) != NULL,
              "case %zu (%s, %s): status %d, message \"%s\"", k, cases[k].threshold ? cases[k].threshold : "unset",
              cases[k].pad ? cases[k].pad : "unset", status, msg);
        if (cases[k].want == RMLP_OK)
            CHECK(p.threshold == cases[k].want_threshold && p.pad == cases[k].want_pad &&
                      p.pad_multiple_of == cases[k].want_multiple && p.struct_size == sizeof p,
                  "case %zu: threshold %g pad %d multiple %u", k, p.threshold, p.pad, p.pad_multiple_of);
    }
    CHECK(rmlp_plan_params_from_env(NULL) == RMLP_ERR_INVALID_ARGUMENT, "NULL out");
    /* On an error, *out holds what an empty environment gives, never a half-read environment. */
    set("RADIX_MLP_THRESHOLD", "0.5");
    set("RADIX_MLP_PAD", "0");
    rmlp_plan_params half;
    CHECK(rmlp_plan_params_from_env(&half) == RMLP_ERR_INVALID_ARGUMENT && half.threshold == RMLP_DEFAULT_THRESHOLD &&
              !half.pad && half.gate == RMLP_GATE_TEI,
          "THRESHOLD=0.5 PAD=0: threshold %g pad %d gate %d", half.threshold, half.pad, half.gate);
    set("RADIX_MLP_THRESHOLD", NULL);
    set("RADIX_MLP_PAD", NULL);
    test_gate();
    return tu_summary();
}
