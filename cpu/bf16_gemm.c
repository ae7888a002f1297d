/*
 * bf16_gemm.c: bf16_gemm.h. The variable is read at each load, as RADIX_MLP_GPU_ATTENTION is at
 * each context's creation; a value the caller sets in the params wins over it.
 */
#include "bf16_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "linear_onednn.h"

#define ENV "RADIX_MLP_CPU_BF16_GEMM"

static const char *kind_name(rmlp_cpu_bf16_gemm k) {
    return k == RMLP_CPU_BF16_GEMM_WIDEN ? "RMLP_CPU_BF16_GEMM_WIDEN"
           : k == RMLP_CPU_BF16_GEMM_ONEDNN ? "RMLP_CPU_BF16_GEMM_ONEDNN"
                                            : "RMLP_CPU_BF16_GEMM_AUTO";
}

rmlp_status cpu_bf16_gemm_check_params(const char *fn, const rmlp_model_params *params) {
    rmlp_cpu_bf16_gemm k = params->cpu_bf16_gemm;
    if (k != RMLP_CPU_BF16_GEMM_AUTO && k != RMLP_CPU_BF16_GEMM_WIDEN && k != RMLP_CPU_BF16_GEMM_ONEDNN)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->cpu_bf16_gemm=%d is not RMLP_CPU_BF16_GEMM_AUTO (0), "
                         "_WIDEN (1) or _ONEDNN (2)", k);
    if (k != RMLP_CPU_BF16_GEMM_AUTO && params->cpu_weight_dtype != RMLP_DTYPE_BF16)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->cpu_bf16_gemm=%s applies to bf16 weight matrices "
                         "only (params->cpu_weight_dtype=RMLP_DTYPE_BF16); with fp32 ones leave it "
                         "RMLP_CPU_BF16_GEMM_AUTO", kind_name(k));
    return RMLP_OK;
}

rmlp_status cpu_bf16_gemm_choose(const char *fn, const rmlp_model_params *params, const rmlp_model_config *config,
                                 model_weights *w) {
    w->bf16_gemm = RMLP_CPU_BF16_GEMM_NONE;
    snprintf(w->bf16_gemm_detail, sizeof w->bf16_gemm_detail, "the model holds no bf16 CPU matrices");
    if (params->cpu_weight_dtype != RMLP_DTYPE_BF16) return RMLP_OK;
    rmlp_cpu_bf16_gemm want = params->cpu_bf16_gemm;
    char source[160] = "the default (auto)";
    if (want != RMLP_CPU_BF16_GEMM_AUTO) snprintf(source, sizeof source, "params->cpu_bf16_gemm=%s", kind_name(want));
    const char *env = getenv(ENV);
    if (want == RMLP_CPU_BF16_GEMM_AUTO && env != NULL && env[0] != '\0') {
        if (strcmp(env, "auto") == 0) want = RMLP_CPU_BF16_GEMM_AUTO;
        else if (strcmp(env, "widen") == 0) want = RMLP_CPU_BF16_GEMM_WIDEN;
        else if (strcmp(env, "onednn") == 0) want = RMLP_CPU_BF16_GEMM_ONEDNN;
        else
            return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, ENV "='%.40s' is not auto, widen or onednn (or unset: auto)",
                             env);
        snprintf(source, sizeof source, ENV "=%s", env);
    }
    w->bf16_gemm = RMLP_CPU_BF16_GEMM_WIDEN;
    if (want == RMLP_CPU_BF16_GEMM_WIDEN) {
        snprintf(w->bf16_gemm_detail, sizeof w->bf16_gemm_detail, "widened to fp32 for rmlp_cpu_sgemm's sgemm (%s)",
                 source);
        return RMLP_OK;
    }
    char what[96] = "", why[224] = "";
    int ok = onednn_bf16_probe(true, what, sizeof what, why, sizeof why);
    if (ok && config->num_hidden_layers > 0) {
        size_t hidden = config->hidden_size;
        size_t width = ((size_t)config->num_attention_heads + 2 * (size_t)config->num_key_value_heads) * config->head_dim;
        ok = onednn_bf16_self_check(w->layers[0].qkv_bf16, hidden, width, why, sizeof why);
        if (ok < 0) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "%s", why);
    }
    if (!ok && want == RMLP_CPU_BF16_GEMM_AUTO) { /* the widening path where oneDNN cannot run */
        snprintf(w->bf16_gemm_detail, sizeof w->bf16_gemm_detail, "widened to fp32 for rmlp_cpu_sgemm's sgemm "
                 "(%s: oneDNN's bf16 GEMMs cannot run here: %s)", source, why);
        return RMLP_OK;
    }
    if (!ok)
        return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "%s asks for oneDNN's bf16 GEMMs, which this process cannot run: %s",
                         source, why);
    if (want == RMLP_CPU_BF16_GEMM_AUTO)
        snprintf(source + strlen(source), sizeof source - strlen(source), ": oneDNN where it runs; " ENV "=widen "
                 "for the widening path");
    w->bf16_gemm = RMLP_CPU_BF16_GEMM_ONEDNN;
    snprintf(w->bf16_gemm_detail, sizeof w->bf16_gemm_detail, "%s (%s)", what, source);
    return RMLP_OK;
}

void cpu_bf16_gemm_query(const void *model, rmlp_cpu_bf16_gemm *kind, uint64_t *fallbacks, const char **detail) {
    const model_weights *w = model;
    *kind = w->bf16_gemm;
    *fallbacks = __atomic_load_n(&w->bf16_gemm_fallbacks, __ATOMIC_RELAXED);
    *detail = w->bf16_gemm_detail;
}
