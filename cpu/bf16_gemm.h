/*
 * bf16_gemm.h: which GEMM a bf16-weight CPU model runs (rmlp_model_params::cpu_bf16_gemm,
 * RADIX_MLP_CPU_BF16_GEMM): the widening path (linear_bf16.h) or oneDNN's hardware bf16 matmul
 * (linear_onednn.h), chosen once at load and kept in the model (model/weights.h).
 */
#ifndef RMLP_CPU_BF16_GEMM_H
#define RMLP_CPU_BF16_GEMM_H

#include "model/weights.h"
#include "radix_mlp/types.h"

/* params->cpu_bf16_gemm as the CPU can take it, before anything is read: a known value, and
 * AUTO unless cpu_weight_dtype is BF16. */
rmlp_status cpu_bf16_gemm_check_params(const char *fn, const rmlp_model_params *params);

/* Sets w->bf16_gemm and its detail for a model just loaded (NONE for fp32 matrices). With AUTO
 * the variable RADIX_MLP_CPU_BF16_GEMM decides (auto, widen, onednn). oneDNN can run where it
 * loads, runs bf16 in hardware here and agrees with the widening path on layer 0's Q/K/V matrix;
 * auto takes it there (1.25-1.45x the widening path's speed on SmolLM2-135M, docs/bench/cpu-path.md)
 * and widens elsewhere, the detail saying why. Errors: RMLP_ERR_INVALID_ARGUMENT for a bad
 * variable, RMLP_ERR_UNSUPPORTED when oneDNN was asked for and cannot run (the message says why),
 * RMLP_ERR_OUT_OF_MEMORY. */
rmlp_status cpu_bf16_gemm_choose(const char *fn, const rmlp_model_params *params, const rmlp_model_config *config,
                                 model_weights *w);

/* rmlp_model_cpu_bf16_gemm's answer for a CPU model (common/backend.h). */
void cpu_bf16_gemm_query(const void *model, rmlp_cpu_bf16_gemm *kind, uint64_t *fallbacks, const char **detail);

#endif
