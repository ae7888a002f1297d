/*
 * flashinfer_variants.cuh: the attention variants the library instantiates FlashInfer's kernels
 * with, shared by the prefill (gpu/flashinfer.cu) and the batch decode (gpu/flashinfer_decode.cu):
 * every layer takes FiWindowed (a sliding window, -1 for none) or, with a logit soft-cap, FiCapped;
 * and the window_left a layer's window gives. Include after FlashInfer's attention/variants.cuh.
 */
#ifndef RMLP_GPU_FLASHINFER_VARIANTS_CUH
#define RMLP_GPU_FLASHINFER_VARIANTS_CUH

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every layer without a soft-cap: FlashInfer's default variant with the sliding-window flag. A
 * query at position i of its sequence (qo_len queries, the last of kv_len keys: i = kv_len - qo_len
 * + its index) keeps key j where j + window_left >= i, i.e. i - window_left <= j <= i with the
 * causal mask; window_left -1 means kv_len, which keeps every key the causal mask keeps, and the
 * masked key tiles are the same as without the flag (their count is computed from window_left
 * whatever the flag), so a layer without a window gets what the plain variant gives. */
typedef flashinfer::DefaultAttention</*custom mask*/ false, /*sliding window*/ true, /*soft cap*/ false,
                                     /*alibi*/ false>
    FiWindowed;

/* Soft-capped layers (Gemma 2): FlashInfer's soft-cap variant turns the logit x = q.k into
 * tanh(x * sm_scale / cap) and scales it by cap in the softmax (sm_scale_log2 = cap log2 e), so
 * the capped score is cap * tanh(sm_scale x / cap): the scale first, then the cap, as the library
 * and transformers compute it (model/model_ext.h). FlashInfer evaluates tanh with tanh.approx.f32
 * (a relative error of about 2^-11, some 0.01 on a score of 25 under Gemma 2's cap of 50); this
 * variant keeps its closure and mask and takes the accurate tanhf instead, as the reference
 * kernel and the CPU path do. */
struct FiCapped : flashinfer::DefaultAttention<false, /*sliding window*/ true, /*soft cap*/ true, false> {
    typedef flashinfer::DefaultAttention<false, true, true, false> Base;
    template <typename Params>
    __device__ __host__ FiCapped(const Params &params, uint32_t batch_idx, uint8_t *smem)
        : Base(params, batch_idx, smem) {
        soft_cap_pre_tanh_scale = params.sm_scale / params.logits_soft_cap; /* not FlashInfer's approximate rcp */
    }
    REGISTER_LOGITS_TRANSFORM(params, logits, batch_idx, qo_idx, kv_idx, qo_head_idx, kv_head_idx,
                              { return tanhf(logits * soft_cap_pre_tanh_scale); })
};

/* Whether a layer of head_dim with this soft-cap (0: none) has an instantiated variant, in the
 * prefill and in the decode alike: FiWindowed at every head_dim, FiCapped at 256 only (Gemma 2 2B
 * and 9B; gpu/flashinfer.cu's top says why not 128). */
static inline bool fi_variant_exists(size_t head_dim, float softcap) { return softcap == 0.0f || head_dim == 256; }

/* FlashInfer's window_left for a layer's window: keys i - window_left .. i for a query at i, the
 * layer's `window` keys up to and including its own (model/model_ext.h), so window - 1; -1 (none)
 * for no window or one no sequence of the planned counts can outgrow (at least their n_keys keys
 * in all), a bound on the counts alone, so a captured launch stays right for any batch it is
 * replayed over. */
static inline int32_t window_left_of(uint32_t window, size_t n_keys) {
    return window == 0 || window >= n_keys ? -1 : (int32_t)(window - 1);
}

#endif
