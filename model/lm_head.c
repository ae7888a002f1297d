/*
 * lm_head.c: the LM head decision of lm_head.h. Equality is transformers' torch.equal of the two
 * loaded tensors: same shape and every element equal as a number (so +0 equals -0, and a NaN
 * equals nothing), compared on the stored values; identical bytes of one dtype are equal at once.
 */
#include "lm_head.h"

#include <string.h>

#include "weights.h"

static bool same_values(const st_tensor *a, const st_tensor *b) {
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, a->ndim * sizeof a->shape[0]) != 0) return false;
    if (a->dtype == b->dtype && a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0) return true;
    uint64_t n = a->nbytes / (a->dtype == RMLP_DTYPE_F32 ? 4 : 2);
    for (uint64_t i = 0; i < n; i++)
        if (weights_value_at(a, i) != weights_value_at(b, i)) return false;
    return true;
}

lm_head_choice lm_head_resolve(checkpoint *ckpt, rmlp_model_config *config, const char *prefix) {
    const st_tensor *head = checkpoint_find(ckpt, "lm_head.weight");
    if (!config->tie_word_embeddings || head == NULL) return LM_HEAD_AS_CONFIGURED;
    char name[160];
    weights_name(name, sizeof name, prefix, -1, "embed_tokens.weight");
    const st_tensor *embed = checkpoint_find(ckpt, name);
    if (embed != NULL && same_values(head, embed)) {
        checkpoint_hide(ckpt, "lm_head.weight");
        return LM_HEAD_TIED_EQUAL;
    }
    config->tie_word_embeddings = false;
    return LM_HEAD_UNTIED;
}
