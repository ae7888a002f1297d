/*
 * lm_head.h: which LM head a model uses when config.json and the checkpoint disagree:
 * tie_word_embeddings true with a lm_head.weight of its own. Decided as transformers 5 decides it
 * (PreTrainedModel.tie_weights during from_pretrained): a head equal to the embedding is tied; one
 * that differs is kept, untied (transformers warns "... both are present in the checkpoints with
 * different values, so we will NOT tie them"). Both the CPU and CUDA loaders follow the decision,
 * since it is made on the checkpoint and the config before either runs.
 */
#ifndef RMLP_MODEL_LM_HEAD_H
#define RMLP_MODEL_LM_HEAD_H

#include "checkpoint.h"

typedef enum lm_head_choice {
    LM_HEAD_AS_CONFIGURED, /* no conflict: tied without a head of its own, or the file's head untied */
    LM_HEAD_TIED_EQUAL,    /* tied, and the file's lm_head.weight equal to the embedding: hidden, unused */
    LM_HEAD_UNTIED,        /* tied in config.json, but the file's lm_head.weight differs: used, and
                              config->tie_word_embeddings set to false */
} lm_head_choice;

/* Makes the decision on ckpt (checkpoint_hide) and config. The embedding is `prefix`
 * "embed_tokens.weight"; a head whose shape differs from it counts as differing (the loader then
 * names the shape that disagrees with config.json). */
lm_head_choice lm_head_resolve(checkpoint *ckpt, rmlp_model_config *config, const char *prefix);

#endif
