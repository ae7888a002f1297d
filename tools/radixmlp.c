/*
 * radixmlp.c: the command-line program.
 *   radixmlp plan   plans a built-in reranking batch (no model needed)
 *   radixmlp run    runs a checkpoint on a JSONL batch: embeddings, hidden states or scores
 *   radixmlp bench  radix off vs on on a built-in random model shaped like Qwen3-0.6B layers
 *   radixmlp generate  greedy or sampled generation from prompts sharing prefixes (one batch)
 *   radixmlp version
 * `radixmlp COMMAND --help` describes each command's options. A command whose standard output
 * could not be written (a full disk) exits 1 with a message, whatever it returned.
 */
#include <stdio.h>
#include <string.h>

#include "bench/cli.h"
#include "commands.h"
#include "radix_mlp.h"

static int usage(FILE *to) {
    fprintf(to, "usage: radixmlp plan|run|generate|bench|version [options]   (radixmlp COMMAND --help for options)\n");
    return to == stdout ? 0 : 2;
}

static int command(int argc, char **argv) {
    if (argc < 2) return usage(stderr);
    if (strcmp(argv[1], "plan") == 0) return cmd_plan(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(argv[1], "bench") == 0) return cmd_bench(argc - 2, argv + 2);
    if (strcmp(argv[1], "generate") == 0) return cmd_generate(argc - 2, argv + 2);
    if (strcmp(argv[1], "version") == 0) {
        uint32_t flags = rmlp_build_flags();
        const char *attention = (flags & RMLP_BUILD_FLASHINFER)
                                    ? " (attention: FlashInfer for f16/bf16 head_dim 64/128/256)"
                                    : " (attention: the reference kernel, no FlashInfer)";
        printf("radixmlp %s (header %d.%d.%d)%s%s\n", rmlp_version_string(), RMLP_VERSION_MAJOR, RMLP_VERSION_MINOR,
               RMLP_VERSION_PATCH, (flags & RMLP_BUILD_CUDA) ? ", CUDA" : "",
               (flags & RMLP_BUILD_CUDA) ? attention : "");
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) return usage(stdout);
    fprintf(stderr, "radixmlp: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}

int main(int argc, char **argv) {
    int rc = command(argc, argv);
    if (rc == 0 && cli_finish_output(stdout, "standard output") != 0) rc = 1; /* a failure said why already */
    return rc;
}
