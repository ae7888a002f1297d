/*
 * model_host.c: a C host of the whole library, built by run.sh against the installed package every
 * documented way (CMake shared and static, pkg-config shared and --static). It loads a checkpoint,
 * runs one batch with radix on and off and checks the two agree, and asks for CUDA devices: calling
 * the model and CUDA entry points makes a static link pull in all of libradix_mlp.a, so every
 * dependency it has (OpenBLAS, jansson; in a CUDA build the CUDA runtime and libstdc++) must be on
 * the link line, or the link fails.
 * Usage: model_host CHECKPOINT_DIR
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <radix_mlp.h>

#define EXPECT(cond)                                                                                            \
    do {                                                                                                        \
        if (!(cond)) {                                                                                          \
            fprintf(stderr, "model_host: check failed: %s (%s)\n", #cond, rmlp_last_error());                   \
            return 1;                                                                                           \
        }                                                                                                       \
    } while (0)

/* Plans the batch with `threshold` and runs the model on it: out (15, hidden_size). */
static rmlp_status run(rmlp_context *ctx, rmlp_planner *planner, double threshold, float *out, uint32_t *n_compact) {
    static const uint32_t ids[] = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9};
    static const uint32_t pos[] = {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7};
    static const uint32_t cu[] = {0, 7, 10, 15};
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = threshold;
    rmlp_plan plan;
    rmlp_status status = rmlp_plan_build(planner, ids, pos, 15, cu, 3, &params, &plan);
    if (status != RMLP_OK) return status;
    *n_compact = plan.n_compact;
    return rmlp_forward(ctx, &plan, NULL, NULL, out);
}

int main(int argc, char **argv) {
    EXPECT(argc == 2);
    EXPECT(rmlp_version() == RMLP_VERSION);
    rmlp_model *model = NULL;
    EXPECT(rmlp_model_load(argv[1], NULL, &model) == RMLP_OK);
    rmlp_model_config cfg;
    EXPECT(rmlp_model_get_config(model, &cfg) == RMLP_OK);
    EXPECT(cfg.vocab_size > 9);
    rmlp_context *ctx = NULL;
    EXPECT(rmlp_context_create(model, 15, &ctx) == RMLP_OK);
    rmlp_planner *planner = NULL;
    EXPECT(rmlp_planner_create(&planner) == RMLP_OK);
    size_t n = 15 * (size_t)cfg.hidden_size;
    float *on = malloc(n * sizeof *on), *off = malloc(n * sizeof *off);
    EXPECT(on != NULL && off != NULL);
    uint32_t compact_on = 0, compact_off = 0;
    EXPECT(run(ctx, planner, 1.0, on, &compact_on) == RMLP_OK && compact_on == 12);
    EXPECT(run(ctx, planner, 0.0, off, &compact_off) == RMLP_OK && compact_off == 15);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        EXPECT(isfinite(on[i]));
        double d = fabs((double)on[i] - off[i]) / (1.0 + fabs((double)off[i]));
        worst = d > worst ? d : worst;
    }
    EXPECT(worst <= 1e-5);

    int32_t devices = -1;
    rmlp_status cuda = rmlp_cuda_device_count(&devices);
    if (rmlp_build_flags() & RMLP_BUILD_CUDA)
        EXPECT(cuda == RMLP_OK || cuda == RMLP_ERR_NO_DEVICE || cuda == RMLP_ERR_CUDA);
    else
        EXPECT(cuda == RMLP_ERR_UNSUPPORTED);

    free(on);
    free(off);
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    printf("model_host: radix_mlp %s (%s): radix on (%u rows) and off (%u rows) agree within %.2g; CUDA: %s\n",
           rmlp_version_string(), (rmlp_build_flags() & RMLP_BUILD_CUDA) ? "CUDA build" : "CPU build", compact_on,
           compact_off, worst, rmlp_status_string(cuda));
    return 0;
}
