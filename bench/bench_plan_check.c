/*
 * bench_plan_check.c: what the plan checks every model call makes (issue 31: the maps checked
 * against each other, ffi/src/plan_checks.c, with the range checks before them) cost against a
 * forward, on a batch of `radixmlp bench`'s grid (default its largest, b32_p2048_s256: 32 sequences
 * of 2048 shared + 256 own tokens) and its built-in model (Qwen3-0.6B-shaped layers, vocab 8192,
 * --layers of them, 2 by default, fp32, CPU). The checks are timed through rmlp_context_set_plan,
 * which on a CPU context runs them and nothing else (median of --reps calls); the forward is
 * rmlp_forward_compact, timed once. Prints one JSON object:
 *   {"case", "n_tokens", "n_compact", "layers", "check_us", "forward_ms", "check_share",
 *    "per_layer_share"}
 * check_share: one check / one forward (rmlp_forward runs one); per_layer_share: the 2 L + 2
 * checks a host driving the per-layer calls makes per forward (embed, L pre, L post, final norm).
 * Usage: bench_plan_check [--layers L] [--reps R] [--batch B PREFIX SUFFIX]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "radix_mlp.h"
#include "tiny_model.h"
#include "workload.h"

static int fail(const char *what) {
    fprintf(stderr, "bench_plan_check: %s: %s\n", what, rmlp_last_error());
    return 1;
}

int main(int argc, char **argv) {
    unsigned long layers = 2, reps = 200, seqs = 32, prefix = 2048, suffix = 256;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0 && i + 3 < argc)
            seqs = strtoul(argv[i + 1], NULL, 10), prefix = strtoul(argv[i + 2], NULL, 10),
            suffix = strtoul(argv[i + 3], NULL, 10), i += 3;
        else {
            fprintf(stderr, "usage: bench_plan_check [--layers L] [--reps R] [--batch B PREFIX SUFFIX]\n");
            return 2;
        }
    }
    if (layers == 0 || reps == 0 || seqs == 0 || prefix + suffix == 0) {
        fprintf(stderr, "bench_plan_check: --layers, --reps, B and PREFIX + SUFFIX must be at least 1\n");
        return 2;
    }
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 8192, .hidden_size = 1024,
                             .intermediate_size = 3072, .num_hidden_layers = (uint32_t)layers,
                             .num_attention_heads = 16, .num_key_value_heads = 8, .head_dim = 128,
                             .max_position_embeddings = 40960, .rms_norm_eps = 1e-6, .rope_theta = 1e6,
                             .tie_word_embeddings = true, .qk_norm = true};
    char dir[] = "/tmp/bench-plan-check-XXXXXX", path[64];
    rmlp_model *model = NULL;
    if (mkdtemp(dir) == NULL || tiny_model_write(dir, &cfg, 1) != 0) return fail("writing the model");
    rmlp_status status = rmlp_model_load(dir, NULL, &model);
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    rmdir(dir);
    if (status != RMLP_OK) return fail("loading the model");

    workload w;
    if (workload_shared_prefix(&w, seqs, prefix + suffix, prefix, 7) != 0) return fail("the batch");
    for (size_t i = 0; i < w.n_tokens; i++) w.input_ids[i] %= cfg.vocab_size; /* as radixmlp bench does */
    rmlp_planner *planner = NULL;
    rmlp_context *ctx = NULL;
    rmlp_plan plan;
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0;
    if (rmlp_planner_create(&planner) != RMLP_OK ||
        rmlp_plan_build(planner, w.input_ids, w.position_ids, w.n_tokens, w.cu_seqlens, w.n_seqs, &params, &plan) !=
            RMLP_OK ||
        rmlp_context_create(model, w.n_tokens, &ctx) != RMLP_OK)
        return fail("setup");
    double *samples = malloc(reps * sizeof *samples);
    float *out = malloc((size_t)plan.n_compact_padded * cfg.hidden_size * sizeof(float));
    if (samples == NULL || out == NULL) return fail("out of memory");
    for (unsigned long r = 0; r < reps; r++) {
        double start = cli_now_ms();
        if (rmlp_context_set_plan(ctx, &plan) != RMLP_OK) return fail("rmlp_context_set_plan");
        samples[r] = (cli_now_ms() - start) * 1e3;
    }
    double check_us = cli_sort_median(samples, reps);
    double start = cli_now_ms();
    if (rmlp_forward_compact(ctx, &plan, NULL, NULL, out) != RMLP_OK) return fail("rmlp_forward_compact");
    double forward_ms = cli_now_ms() - start;
    printf("{\"case\": \"b%lu_p%lu_s%lu\", \"n_tokens\": %u, \"n_compact\": %u, \"layers\": %lu, \"check_us\": %.1f, "
           "\"forward_ms\": %.1f, \"check_share\": %.2e, \"per_layer_share\": %.2e}\n",
           seqs, prefix, suffix, plan.n_tokens, plan.n_compact, layers, check_us, forward_ms,
           check_us / (forward_ms * 1e3), (2.0 * layers + 2) * check_us / (forward_ms * 1e3));
    free(samples), free(out);
    rmlp_context_free(ctx);
    rmlp_planner_free(planner);
    rmlp_model_free(model);
    workload_free(&w);
    return 0;
}
