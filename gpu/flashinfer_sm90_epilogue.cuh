/*
 * flashinfer_sm90_epilogue.cuh: the output store of FlashInfer's Hopper prefill kernel
 * (attention/hopper/prefill_sm90.cuh), replaced for gpu/flashinfer_sm90.cu, which includes it after
 * FlashInfer's headers and before any launch is instantiated.
 *
 * Why: FlashInfer's CollectiveEpilogue::store (hopper/epilogue.cuh: 0.7.2.post1, the version
 * scripts/setup.sh pins, and unchanged on its main branch as of 2026-08-22) stages the output tile in shared memory that aliases the V stages (smem_o and
 * smem_v are a union). Its 256 consumer threads each write their part of O there, then call
 * NamedBarrier::arrive(256, EpilogueBarrier) and later NamedBarrier::sync(256, EpilogueBarrier) on
 * the same barrier. A named barrier counts arrivals per warp whatever the instruction, so an arrive
 * and a sync by the same warp both count: 4 warps that arrive and sync complete the 256, and go on
 * to copy the tile to global memory while the other warps may not have written their rows yet. Those
 * rows then carry the last V tile's values. The first H200 run showed exactly this under
 * compute-sanitizer, whose slowdown opens the window: rows 6 and 13 of one tile, from column 112 on,
 * held V's rows 38 and 45 (where they alias in the union) instead of the output.
 *
 * The replacement writes each thread's accumulators straight to global memory (two adjacent columns
 * of a row per 4-byte store), rounded as FlashInfer rounds (to nearest even). It uses no shared memory
 * and so needs no barrier: nothing else changes in the kernel (its barrier_O handshake before the next
 * tile's V loads stays, and is now merely conservative), and the results are the bits a race-free
 * FlashInfer epilogue gives. It writes no LSE (gpu/flashinfer_sm90.cu passes lse_ptr NULL).
 *
 * Mechanism: a partial specialization of flashinfer::CollectiveEpilogue for every
 * AttentionKernelTraits, so FlashInfer's own dispatch (BatchPrefillWithPagedKVCacheDispatched, whose
 * tile shapes we do not restate) picks it up. It derives from FlashInfer's primary template
 * instantiated over a wrapper of the same traits, and so keeps its parameters, store_zero and the
 * rest; only store is ours. A FlashInfer version that renames or reshapes CollectiveEpilogue fails
 * to compile here; one that launches another epilogue class needs this file reviewed (a version bump
 * in scripts/setup.sh is the time).
 */
#ifndef RMLP_GPU_FLASHINFER_SM90_EPILOGUE_CUH
#define RMLP_GPU_FLASHINFER_SM90_EPILOGUE_CUH

#include <stdint.h>

#include <flashinfer/attention/hopper/epilogue.cuh>
#include <flashinfer/attention/hopper/kernel_traits.cuh>

namespace flashinfer {

/* The same traits under another name: CollectiveEpilogue over it is FlashInfer's primary template. */
template <class Ktraits> struct RmlpFlashInferTraits : Ktraits {};

template <bool USE_TMA_LOAD_KV, int HEAD_DIM_QK, int HEAD_DIM_VO, int CTA_Q, int CTA_KV, int NUM_STAGES, class DTypeQ,
          class DTypeKV, class DTypeO, class IdType, class AttentionVariant>
struct CollectiveEpilogue<AttentionKernelTraits<USE_TMA_LOAD_KV, HEAD_DIM_QK, HEAD_DIM_VO, CTA_Q, CTA_KV, NUM_STAGES,
                                                DTypeQ, DTypeKV, DTypeO, IdType, AttentionVariant>>
    : CollectiveEpilogue<RmlpFlashInferTraits<AttentionKernelTraits<USE_TMA_LOAD_KV, HEAD_DIM_QK, HEAD_DIM_VO, CTA_Q,
                                                                    CTA_KV, NUM_STAGES, DTypeQ, DTypeKV, DTypeO,
                                                                    IdType, AttentionVariant>>> {
    /* The kernel's call: o is this thread's fragment of the finished (CTA_Q, HEAD_DIM_VO) output
     * tile in fp32, laid out as tiled_mma's accumulator; coord is (query tile, query head, KV head,
     * the sequence's first query row, its first key, its query rows, its keys, its index). */
    template <class BlockCoord, class SharedStorage, class FragmentO, class FragmentLse, class TiledMma>
    CUTLASS_DEVICE void store(typename CollectiveEpilogue::Params const &params, FragmentO const &o,
                              FragmentLse const &, SharedStorage &, TiledMma tiled_mma, int thread_idx,
                              BlockCoord const &coord) {
        const int q_tile = cute::get<0>(coord), qo_head = cute::get<1>(coord);
        const int qo_first = cute::get<3>(coord), qo_len = cute::get<5>(coord);
        const int rows = qo_len - q_tile * CTA_Q < CTA_Q ? qo_len - q_tile * CTA_Q : CTA_Q; /* the tile's rows */
        const int64_t row_stride = cute::stride<0>(params.layout_O), head_stride = cute::stride<2>(params.layout_O);
        DTypeO *tile = params.O_ptr + ((int64_t)qo_first + (int64_t)q_tile * CTA_Q) * row_stride +
                       (int64_t)qo_head * head_stride;
        const bool words = row_stride % 2 == 0 && ((uintptr_t)tile & 3) == 0; /* pairs at even columns align */
        /* (row, column) in the tile of each element of o */
        auto at = tiled_mma.get_thread_slice(thread_idx)
                      .partition_C(cute::make_identity_tensor(cute::Shape<cute::Int<CTA_Q>, cute::Int<HEAD_DIM_VO>>{}));
        static_assert(decltype(cute::size(o))::value % 2 == 0, "the accumulator holds column pairs");
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < decltype(cute::size(o))::value; i += 2) {
            const int row = cute::get<0>(at(i)), col = cute::get<1>(at(i));
            const int row2 = cute::get<0>(at(i + 1)), col2 = cute::get<1>(at(i + 1));
            const DTypeO lo(static_cast<float>(o(i))), hi(static_cast<float>(o(i + 1)));
            if (words && row2 == row && col2 == col + 1 && col % 2 == 0) { /* the pair as one 4-byte store */
                if (row < rows)
                    *reinterpret_cast<uint32_t *>(tile + row * row_stride + col) =
                        (uint32_t)lo.raw() | (uint32_t)hi.raw() << 16;
            } else {
                if (row < rows) tile[row * row_stride + col] = lo;
                if (row2 < rows) tile[row2 * row_stride + col2] = hi;
            }
        }
    }
};

}  // namespace flashinfer

#endif
