/*
 * embed.c: the library end to end, in the order a host calls it: plan a batch whose sequences share
 * a prefix, run the model once per distinct (token, position) path, pool one vector per sequence.
 *
 *     build/examples/embed integration_tests/fixtures/qwen3_tiny
 *
 * The batch: a 20-token sequence, its first 12 tokens as a second sequence (every row of it is
 * already in the first, so it costs nothing), and an unrelated 3-token one. It prints N, N' and the
 * first values of each sequence's vector (the last row's final hidden state); RADIX_MLP_THRESHOLD=0
 * turns radix off and must print the same vectors. Every call returns an rmlp_status; on an error
 * rmlp_last_error() says what was wrong and where, and the program frees what it made (freeing NULL
 * is a no-op) and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "radix_mlp.h"

#define CHECK(call)                                                                     \
    do {                                                                                \
        rmlp_status status = (call);                                                    \
        if (status != RMLP_OK) {                                                        \
            fprintf(stderr, "%s: %s\n", rmlp_status_string(status), rmlp_last_error()); \
            goto done;                                                                  \
        }                                                                               \
    } while (0)

enum { N_TOKENS = 35, N_SEQS = 3 };

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: embed MODEL_DIR\n"), 2;
    const uint32_t ids[N_TOKENS] = {864, 524, 338, 839, 576, 600, 76, 394, 974, 553, 645, 576, 937, 758, 318, 852,
                                    624, 507, 137, 372,                                          /* sequence 0 */
                                    864, 524, 338, 839, 576, 600, 76, 394, 974, 553, 645, 576,   /* 1: 0's prefix */
                                    871, 524, 285};                                              /* 2: its own */
    const uint32_t cu_seqlens[N_SEQS + 1] = {0, 20, 32, 35}; /* sequence s is rows cu[s] .. cu[s+1] */
    uint32_t positions[N_TOKENS];
    for (int s = 0; s < N_SEQS; s++)
        for (uint32_t i = cu_seqlens[s]; i < cu_seqlens[s + 1]; i++) positions[i] = i - cu_seqlens[s];

    int exit_code = 1;
    rmlp_planner *planner = NULL;
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    float *hidden = NULL, *vectors = NULL;
    rmlp_plan_params plan_params = rmlp_plan_default_params();
    rmlp_model_params model_params = rmlp_model_default_params(); /* the CPU, fp32 */
    rmlp_plan plan;
    rmlp_model_config config;

    /* 1. Plan: the maps between the N batch rows and the N' compact rows (owned by the planner). */
    CHECK(rmlp_plan_params_from_env(&plan_params)); /* RADIX_MLP_THRESHOLD, RADIX_MLP_PAD, RADIX_MLP_GATE */
    CHECK(rmlp_planner_create(&planner));
    CHECK(rmlp_plan_build(planner, ids, positions, N_TOKENS, cu_seqlens, N_SEQS, &plan_params, &plan));
    printf("N=%u N'=%u radix=%s\n", plan.n_tokens, plan.n_compact, plan.use_radix ? "on" : "off");

    /* 2. A model (here on the CPU) and a context: the workspace for batches of up to N_TOKENS rows. */
    CHECK(rmlp_model_load(argv[1], &model_params, &model));
    CHECK(rmlp_model_get_config(model, &config));
    CHECK(rmlp_context_create(model, N_TOKENS, &ctx));

    /* 3. Forward: every layer on the compact rows, the built-in attention (NULL), out (N, hidden). */
    hidden = malloc(sizeof(float) * N_TOKENS * config.hidden_size);
    vectors = malloc(sizeof(float) * N_SEQS * config.hidden_size);
    if (!hidden || !vectors) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    CHECK(rmlp_forward(ctx, &plan, NULL, NULL, hidden));

    /* 4. Pool: one vector per sequence (last row; MEAN and FIRST too, optionally L2-normalised). */
    CHECK(rmlp_context_pool(ctx, hidden, N_TOKENS, cu_seqlens, N_SEQS, RMLP_POOLING_LAST, false, vectors));
    for (int s = 0; s < N_SEQS; s++) {
        const float *v = vectors + (size_t)s * config.hidden_size;
        printf("sequence %d: %.6f %.6f %.6f %.6f ...\n", s, v[0], v[1], v[2], v[3]);
    }
    exit_code = 0;

done:
    free(vectors);
    free(hidden);
    rmlp_context_free(ctx); /* contexts before their model */
    rmlp_model_free(model);
    rmlp_planner_free(planner);
    return exit_code;
}
