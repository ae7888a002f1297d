/*
 * logit_softcap.h: the final-logit soft-capping of Gemma 2 (config final_logit_softcapping),
 * logits = cap * tanh(logits / cap), in fp32 as transformers computes it on an fp32 tensor. The
 * LM head's read-outs apply it on the host, where their logits land: the pair score (cpu/pool.c,
 * gpu/readout.cu) and generation's logits (generate/session.c).
 */
#ifndef RMLP_MODEL_LOGIT_SOFTCAP_H
#define RMLP_MODEL_LOGIT_SOFTCAP_H

#include <math.h>
#include <stddef.h>

/* x (n) soft-capped at cap in place; cap 0: unchanged. */
static inline void logit_softcap(float *x, size_t n, double cap) {
    if (cap == 0.0) return;
    float c = (float)cap;
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] / c) * c;
}

#endif
