/* tiny_load.c: the fuzz targets' tiny random model (tiny_load.h). */
#define _POSIX_C_SOURCE 200809L

#include "tiny_load.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench/tiny_model.h"

int fuzz_tiny_model_load(const char *target, uint64_t seed, rmlp_model **out) {
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 8, .hidden_size = FUZZ_TINY_HIDDEN,
                             .intermediate_size = 24, .num_hidden_layers = 2, .num_attention_heads = 2,
                             .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                             .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/rmlp_%s_model.XXXXXX", tmp && tmp[0] ? tmp : "/tmp", target);
    if (mkdtemp(dir) == NULL) return -1;
    int ok = tiny_model_write(dir, &cfg, seed) == 0 && rmlp_model_load(dir, NULL, out) == RMLP_OK;
    tiny_model_remove(dir);
    return ok ? 0 : -1;
}
