/*
 * audit.c: the checkpoint audit of audit.h. What the model uses is what the weight loaders load:
 * the embedding, the final norm, lm_head.weight when present (and not tied away: lm_head.h), and
 * each layer's tensors as weights_layer_tensors lists them. The finiteness check reads the tensors' stored bits (F32,
 * F16, BF16: an exponent of all ones is an infinity or a NaN), so it costs one pass over the
 * mapped file and no conversion, whichever device the weights go to.
 */
#include "audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "arch.h"
#include "lm_head.h"
#include "report_append.h"
#include "weights.h"

static const char fn[] = "rmlp_model_load";

#define LISTED_NAMES 8 /* unused tensors named in the report; the rest are counted */
#define CHUNK 4096     /* elements tested before looking for which one it was */

/* Whether element i of t has an exponent of all ones (infinity or NaN); *nan tells which. */
static bool not_finite_at(const st_tensor *t, uint64_t i, bool *nan) {
    const unsigned char *p = t->data;
    if (t->dtype == RMLP_DTYPE_F32) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                     (uint32_t)p[4 * i + 3] << 24;
        *nan = (u & 0x7fffffu) != 0;
        return (u & 0x7f800000u) == 0x7f800000u;
    }
    uint32_t h = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
    uint32_t exp = t->dtype == RMLP_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
    *nan = (h & (0x7fffu & ~exp)) != 0;
    return (h & exp) == exp;
}

/* Index of the first element of t that is not finite, or UINT64_MAX. Chunks are tested with a
 * branch-free OR of their exponents (the common case: all finite) before an element search. */
static uint64_t first_not_finite(const st_tensor *t) {
    uint64_t size = t->dtype == RMLP_DTYPE_F32 ? 4 : 2, n = t->nbytes / size;
    const unsigned char *p = t->data;
    for (uint64_t start = 0; start < n; start += CHUNK) {
        uint64_t end = n - start < CHUNK ? n : start + CHUNK;
        unsigned hit = 0;
        if (t->dtype == RMLP_DTYPE_F32) /* the high byte's 7 bits and the next byte's top bit */
            for (uint64_t i = start; i < end; i++) hit |= (p[4 * i + 3] & 0x7fu) == 0x7fu && (p[4 * i + 2] & 0x80u);
        else if (t->dtype == RMLP_DTYPE_BF16)
            for (uint64_t i = start; i < end; i++) hit |= (p[2 * i + 1] & 0x7fu) == 0x7fu && (p[2 * i] & 0x80u);
        else
            for (uint64_t i = start; i < end; i++) hit |= (p[2 * i + 1] & 0x7cu) == 0x7cu;
        if (!hit) continue;
        bool nan;
        for (uint64_t i = start; i < end; i++)
            if (not_finite_at(t, i, &nan)) return i;
    }
    return UINT64_MAX;
}

static rmlp_status check_finite_tensor(const st_tensor *t) {
    if (t == NULL) return RMLP_OK; /* missing: the loader names it */
    uint64_t i = first_not_finite(t);
    if (i == UINT64_MAX) return RMLP_OK;
    bool nan;
    not_finite_at(t, i, &nan);
    uint64_t n = t->nbytes / (t->dtype == RMLP_DTYPE_F32 ? 4 : 2);
    return rmlp_fail(RMLP_ERR_MODEL, fn,
                     "tensor '%s' holds %s at element %llu of %llu (params.skip_finite_check loads it unchecked)",
                     t->name, nan ? "NaN" : "an infinity", (unsigned long long)i, (unsigned long long)n);
}

/* Every tensor the model uses, through check_finite_tensor. */
static rmlp_status check_finite(const checkpoint *ckpt, const rmlp_model_config *c, const char *prefix) {
    char name[160];
    static const char *const globals[] = {"embed_tokens.weight", "norm.weight"};
    rmlp_status status = check_finite_tensor(checkpoint_find(ckpt, "lm_head.weight"));
    for (size_t g = 0; g < 2 && status == RMLP_OK; g++) {
        weights_name(name, sizeof name, prefix, -1, globals[g]);
        status = check_finite_tensor(checkpoint_find(ckpt, name));
    }
    layer_tensor tensors[W_ROLES];
    size_t n = weights_layer_tensors(c, tensors);
    for (uint32_t layer = 0; layer < c->num_hidden_layers && status == RMLP_OK; layer++)
        for (size_t k = 0; k < n && status == RMLP_OK; k++) {
            weights_name(name, sizeof name, prefix, (long)layer, tensors[k].suffix);
            status = check_finite_tensor(checkpoint_find(ckpt, name));
        }
    return status;
}

/* Whether the loaders take the tensor `name` for this config. */
static bool used(const rmlp_model_config *c, const char *prefix, const char *name) {
    size_t plen = strlen(prefix);
    if (strcmp(name, "lm_head.weight") == 0) return true;
    if (strncmp(name, prefix, plen) != 0) return false;
    name += plen;
    if (strcmp(name, "embed_tokens.weight") == 0 || strcmp(name, "norm.weight") == 0) return true;
    if (strncmp(name, "layers.", 7) != 0 || name[7] < '0' || name[7] > '9') return false;
    char *end;
    unsigned long layer = strtoul(name + 7, &end, 10);
    char canonical[32]; /* "layers.<n>." as the loaders spell it: no leading zeros */
    int len = snprintf(canonical, sizeof canonical, "layers.%lu.", layer);
    if (layer >= c->num_hidden_layers || strncmp(name, canonical, (size_t)len) != 0) return false;
    layer_tensor tensors[W_ROLES];
    size_t n = weights_layer_tensors(c, tensors);
    for (size_t k = 0; k < n; k++)
        if (strcmp(name + len, tensors[k].suffix) == 0) return true;
    return false;
}

static bool ignored(const char *name) {
    size_t n = strlen(name), k = strlen("rotary_emb.inv_freq");
    return n >= k && strcmp(name + n - k, "rotary_emb.inv_freq") == 0;
}


/* The report's line on unused tensors into buf (NUL-terminated when cap suffices); returns its
 * length without the NUL (0: every tensor is used). */
static size_t unused_report(const checkpoint *ckpt, const rmlp_model_config *c, const char *prefix, char *buf,
                            size_t cap) {
    size_t unused = 0, len = 0;
    for (size_t s = 0; s < checkpoint_shard_count(ckpt); s++) {
        const st_file *file = checkpoint_shard(ckpt, s);
        for (size_t i = 0; i < st_count(file); i++)
            unused += !used(c, prefix, st_at(file, i)->name) && !ignored(st_at(file, i)->name);
    }
    if (unused == 0) return 0;
    const arch_info *arch = arch_by_id(c->architecture); /* config_read's: never NULL */
    APPEND(buf, cap, &len, "%zu tensor%s of the checkpoint %s not used by a %s model of %u layer%s as config.json "
           "describes it, and ignored (as transformers ignores them, with a warning):", unused, unused > 1 ? "s" : "",
           unused > 1 ? "are" : "is", arch ? arch->model_type : "?", c->num_hidden_layers,
           c->num_hidden_layers > 1 ? "s" : "");
    size_t listed = 0;
    for (size_t s = 0; s < checkpoint_shard_count(ckpt) && listed < LISTED_NAMES; s++) {
        const st_file *file = checkpoint_shard(ckpt, s);
        for (size_t i = 0; i < st_count(file) && listed < LISTED_NAMES; i++) {
            const char *name = st_at(file, i)->name;
            if (!used(c, prefix, name) && !ignored(name)) APPEND(buf, cap, &len, "%s '%s'", listed++ ? "," : "", name);
        }
    }
    if (unused > listed) APPEND(buf, cap, &len, " and %zu more", unused - listed);
    APPEND(buf, cap, &len, "\n");
    return len;
}

/* The report's line on tensors the shards hold but the index's weight_map lacks (used all the same). */
static size_t unindexed_report(const checkpoint *ckpt, char *buf, size_t cap) {
    size_t unindexed = 0, listed = 0, len = 0;
    for (size_t s = 0; s < checkpoint_shard_count(ckpt); s++)
        for (size_t i = 0; i < st_count(checkpoint_shard(ckpt, s)); i++)
            unindexed += !checkpoint_indexed(ckpt, st_at(checkpoint_shard(ckpt, s), i)->name);
    if (unindexed == 0) return 0;
    APPEND(buf, cap, &len, "%zu tensor%s of the shards %s not in the index's weight_map, and found in %s shard all "
           "the same (transformers loads every tensor of the shards an index names):", unindexed,
           unindexed > 1 ? "s" : "", unindexed > 1 ? "are" : "is", unindexed > 1 ? "their" : "its");
    for (size_t s = 0; s < checkpoint_shard_count(ckpt) && listed < LISTED_NAMES; s++) {
        const st_file *file = checkpoint_shard(ckpt, s);
        for (size_t i = 0; i < st_count(file) && listed < LISTED_NAMES; i++)
            if (!checkpoint_indexed(ckpt, st_at(file, i)->name))
                APPEND(buf, cap, &len, "%s '%s' (%s)", listed++ ? "," : "", st_at(file, i)->name, st_path(file));
    }
    if (unindexed > listed) APPEND(buf, cap, &len, " and %zu more", unindexed - listed);
    APPEND(buf, cap, &len, "\n");
    return len;
}

/* The report's line on the LM head when config.json ties it and the checkpoint has its own. */
static size_t head_report(lm_head_choice choice, char *buf, size_t cap) {
    size_t len = 0;
    if (choice == LM_HEAD_TIED_EQUAL)
        APPEND(buf, cap, &len, "tie_word_embeddings is true and the checkpoint's lm_head.weight equals the embedding: "
               "the LM head is the embedding (tied)\n");
    else if (choice == LM_HEAD_UNTIED)
        APPEND(buf, cap, &len, "tie_word_embeddings is true, but the checkpoint's lm_head.weight differs from the "
               "embedding: the LM head is lm_head.weight, not tied (as transformers does, with a warning); the "
               "config reads tie_word_embeddings false\n");
    return len;
}

/* The whole report into buf (cap bytes; NULL to measure); its length. */
static size_t report_text(const checkpoint *ckpt, const rmlp_model_config *config, const char *prefix,
                          lm_head_choice head, char *buf, size_t cap) {
    size_t len = head_report(head, buf, cap);
    len += unindexed_report(ckpt, buf && len < cap ? buf + len : NULL, cap > len ? cap - len : 0);
    len += unused_report(ckpt, config, prefix, buf && len < cap ? buf + len : NULL, cap > len ? cap - len : 0);
    return len;
}

rmlp_status audit_checkpoint(checkpoint *ckpt, rmlp_model_config *config, bool finite, char **report) {
    *report = NULL;
    const char *prefix = weights_prefix(ckpt);
    lm_head_choice head = lm_head_resolve(ckpt, config, prefix);
    rmlp_status status = finite ? check_finite(ckpt, config, prefix) : RMLP_OK;
    size_t len = status == RMLP_OK ? report_text(ckpt, config, prefix, head, NULL, 0) : 0;
    if (len == 0) return status;
    if ((*report = rmlp_malloc(len + 1)) == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the load report (%zu bytes) failed", len + 1);
    report_text(ckpt, config, prefix, head, *report, len + 1);
    return RMLP_OK;
}
