/*
 * flashinfer.cu: FlashInfer's batch prefill kernels behind the C launcher of gpu/flashinfer.h (read
 * it first: layouts, plan/run split, capture). The kernels are FlashInfer's FA2 templates
 * (attention/prefill.cuh, sm_80 and up: mma.sync on tensor cores, cp.async, online softmax in fp32)
 * from the pinned headers scripts/setup.sh fetches; this file only fills their parameter structs and
 * instantiates them: {ragged, paged} x {f16, bf16} x head_dim {64, 128, 256} with a sliding window
 * (window_left -1 where the layer has none), and head_dim 256 with a window and a logit soft-cap
 * (Gemma 2 2B and 9B; at 128, Gemma 2 27B's, it would cost about as much compile time as the
 * head_dim-256 soft-cap for one model, so such layers take the reference kernel), causal, no
 * positional encoding in the kernel (RoPE ran before), for every architecture the build targets. Query tiles: 128 rows at head_dim 64 and 128, 64 rows at 256
 * (CTA_TILE_Q: FlashInfer's choice in CUDA-graph mode whenever (rows - sequences + 1) x group is
 * above 64, resp. 16, i.e. for any batch but tiny ones, which the reference kernel takes). Each
 * instantiation compiles one kernel per key tile size FlashInfer may pick at run time (from the
 * device's shared memory), so the list is kept to what the models need: see docs/gpu_attention.md
 * ("Which layers FlashInfer takes") for which layers, and docs/building.md ("CMake") for build times.
 *
 * FlashInfer reports bad configurations with C++ exceptions and, in debug builds, prints failed
 * CUDA calls: this file is compiled with exceptions (CMakeLists.txt), catches every one at the C
 * boundary (a plan's: GPU_FI_PLAN_ERROR and its message, the reference kernel then runs the batch;
 * a launch's: cudaErrorNotSupported), and defines NDEBUG so nothing prints. Full space reads K/V
 * either as ragged rows or as pages through the scatter (kv_indices given), on the same plan.
 * Without RMLP_WITH_FLASHINFER it is the stubs that make every context take the reference kernel.
 */
#ifndef NDEBUG
#define NDEBUG 1 /* FLASHINFER_CUDA_CALL prints to stderr otherwise; the library never prints */
#endif

#include "flashinfer.h"
#include "host.h"
#ifdef RMLP_WITH_FLASHINFER_SM90
#include "flashinfer_sm90.h"
#endif

#ifdef RMLP_WITH_FLASHINFER

#include <exception>
#include <new>
#include <stdio.h>

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include "flashinfer_variants.cuh"

namespace fi = flashinfer;

/* The query tile instantiated per head_dim (see the top): FlashInfer's FA2DetermineCtaTileQ picks
 * 128 rows below head_dim 256 and 64 at 256 for all but tiny batches. */
static constexpr uint32_t cta_tile_q(uint32_t head_dim) { return head_dim == 256 ? 64 : 128; }
/* Offsets are computed in 32 bits in places (IdType row index x stride): rows x stride must fit. */
#define FI_MAX_ELEMENTS ((size_t)INT32_MAX)

struct gpu_flashinfer {
    rmlp_dtype dtype;
    uint32_t n_heads, n_kv_heads, head_dim;
    size_t max_rows, max_seqs;
    size_t int_bytes;  /* FlashInfer's int workspace per layout (a bound for any batch of the capacity) */
    void *device;      /* one allocation: the int workspace of each layout, then `ones` */
    void *pinned;      /* page-locked: the staging of each layout's plan */
    int32_t *ones;     /* (max_seqs) the last page length of every sequence: pages of 1 row */
    unsigned starve;   /* gpu_flashinfer_test_starve: plans left to make with too small a workspace */
    struct gpu_fi_sm90 *sm90; /* the Hopper kernels' state (gpu/flashinfer_sm90.h), NULL where they do not serve */
    struct plan {
        gpu_fi_reason reason; /* GPU_FI_OK: planned for n_seqs, n_rows; else why not */
        fi::PrefillPlanInfo info;
        size_t n_seqs, n_rows, n_keys; /* n_keys: kv_indptr[n_seqs], a count (the graph's bound) */
        void *ints, *staging; /* int_bytes each: device, page-locked */
    } plans[2];
};

extern "C" bool gpu_flashinfer_built(void) { return true; }

extern "C" bool gpu_flashinfer_supports(rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads, size_t head_dim) {
    return (dtype == RMLP_DTYPE_F16 || dtype == RMLP_DTYPE_BF16) &&
           (head_dim == 64 || head_dim == 128 || head_dim == 256) && n_kv_heads > 0 && n_heads >= n_kv_heads &&
           n_heads % n_kv_heads == 0 && n_heads <= 65535;
}

extern "C" bool gpu_flashinfer_takes_layer(size_t head_dim, uint32_t window, float softcap) {
    (void)window; /* every head_dim has the window */
    return (head_dim == 64 || head_dim == 128 || head_dim == 256) && fi_variant_exists(head_dim, softcap);
}

extern "C" void gpu_flashinfer_free(gpu_flashinfer *f) {
    if (f == NULL) return;
    if (f->device != NULL) (void)cudaFree(f->device);
    if (f->pinned != NULL) (void)cudaFreeHost(f->pinned);
    (void)cudaGetLastError();
#ifdef RMLP_WITH_FLASHINFER_SM90
    gpu_fi_sm90_free(f->sm90);
#endif
    delete f;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* No FlashInfer for this context, for the reason `why`: RMLP_OK (NULL state), or with `setting`
 * (FlashInfer required) RMLP_ERR_UNSUPPORTED saying so. */
static rmlp_status unavailable(const char *fn, const char *setting, const char *why) {
    if (setting == NULL) return RMLP_OK;
    return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "%s asks for FlashInfer's attention, but %s", setting, why);
}

extern "C" rmlp_status gpu_flashinfer_create(const char *fn, rmlp_dtype dtype, size_t n_heads, size_t n_kv_heads,
                                             size_t head_dim, size_t max_rows, size_t max_seqs, const char *setting,
                                             bool sm90, gpu_flashinfer **out) {
    *out = NULL;
    char why[200];
    if (!gpu_flashinfer_supports(dtype, n_heads, n_kv_heads, head_dim)) {
        snprintf(why, sizeof why, "its kernels here are for f16 and bf16 models of head_dim 64, 128 or 256 whose query "
                 "heads are a multiple of the KV heads (this model: %s, head_dim %zu, %zu query / %zu KV heads)",
                 dtype == RMLP_DTYPE_F32 ? "f32" : dtype == RMLP_DTYPE_F16 ? "f16" : "bf16", head_dim, n_heads,
                 n_kv_heads);
        return unavailable(fn, setting, why);
    }
    if (max_rows == 0 || max_seqs == 0 || max_rows > INT32_MAX / 16 || max_seqs > INT32_MAX / 16 ||
        max_rows * (n_heads / n_kv_heads) > INT32_MAX) { /* FlashInfer packs (row, head in group) in 32 bits */
        snprintf(why, sizeof why, "a context of %zu rows is past its 32-bit row indexing", max_rows);
        return unavailable(fn, setting, why);
    }
    int device = 0, major = 0, minor = 0, n_sm = 0;
    GPU_TRY(fn, cudaGetDevice(&device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    GPU_TRY(fn, cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    if (major < 8) { /* the FA2 kernels need sm_80 */
        snprintf(why, sizeof why, "device %d is sm_%d%d and its kernels need sm_80 or newer", device, major, minor);
        return unavailable(fn, setting, why);
    }
    /* The plan's int arrays in CUDA-graph mode: request, query tile and key tile indices and the
     * block mask for padded_batch_size blocks, o_indptr for the sequences, two words, each 16-byte
     * aligned. padded_batch_size = max(2 x SMs / kv heads, ceil(rows x group / tile) + seqs - 1),
     * with the smallest tile FlashInfer picks (16). */
    size_t group = n_heads / n_kv_heads, split_bound = 2 * (size_t)n_sm / n_kv_heads;
    size_t tiles = (max_rows * group + 15) / 16 + max_seqs;
    size_t padded = tiles > split_bound ? tiles : split_bound;
    size_t int_bytes = round_up(13 * padded + 4 * max_seqs + 512, 256); /* + alignment padding */

    gpu_flashinfer *f = new (std::nothrow) gpu_flashinfer(); /* zeroed, the plan infos constructed */
    if (f == NULL) return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the FlashInfer state failed");
    f->dtype = dtype;
    f->n_heads = (uint32_t)n_heads, f->n_kv_heads = (uint32_t)n_kv_heads, f->head_dim = (uint32_t)head_dim;
    f->max_rows = max_rows, f->max_seqs = max_seqs, f->int_bytes = int_bytes;
    size_t device_bytes = 2 * int_bytes + max_seqs * sizeof(int32_t);
    rmlp_status status = RMLP_OK;
    cudaError_t error = cudaMalloc(&f->device, device_bytes);
    if (error != cudaSuccess) f->device = NULL, status = gpu_fail(fn, "cudaMalloc (FlashInfer workspace)", error);
    if (status == RMLP_OK && (error = cudaHostAlloc(&f->pinned, 2 * int_bytes, cudaHostAllocDefault)) != cudaSuccess)
        f->pinned = NULL, status = gpu_fail(fn, "cudaHostAlloc (FlashInfer plan staging)", error);
    if (status == RMLP_OK) {
        f->ones = (int32_t *)((char *)f->device + 2 * int_bytes);
        for (int l = 0; l < 2; l++) {
            f->plans[l].reason = GPU_FI_UNPLANNED;
            f->plans[l].ints = (char *)f->device + l * int_bytes;
            f->plans[l].staging = (char *)f->pinned + l * int_bytes;
        }
        /* The ones are written once, through the staging (free until the first plan; it holds
         * 2 int_bytes >= 8 max_seqs bytes). */
        int32_t *host = (int32_t *)f->pinned;
        for (size_t i = 0; i < max_seqs; i++) host[i] = 1;
        if ((error = cudaMemcpy(f->ones, host, max_seqs * sizeof(int32_t), cudaMemcpyHostToDevice)) != cudaSuccess)
            status = gpu_fail(fn, "cudaMemcpy (FlashInfer last page lengths)", error);
    }
#ifdef RMLP_WITH_FLASHINFER_SM90
    if (status == RMLP_OK && sm90)
        status = gpu_fi_sm90_create(fn, dtype, n_heads, n_kv_heads, head_dim, max_rows, max_seqs, &f->sm90);
#else
    (void)sm90;
#endif
    if (status != RMLP_OK) {
        gpu_flashinfer_free(f);
        return status;
    }
    *out = f;
    return RMLP_OK;
}

extern "C" bool gpu_flashinfer_has_sm90(const gpu_flashinfer *f) { return f != NULL && f->sm90 != NULL; }

extern "C" void gpu_flashinfer_unplan(gpu_flashinfer *f) {
    if (f == NULL) return;
    f->plans[GPU_FI_FULL].reason = f->plans[GPU_FI_COMPACT].reason = GPU_FI_UNPLANNED;
#ifdef RMLP_WITH_FLASHINFER_SM90
    gpu_fi_sm90_unplan(f->sm90);
#endif
}

extern "C" void gpu_flashinfer_test_starve(gpu_flashinfer *f, unsigned n) {
    if (f != NULL) f->starve = n;
}

static const char *layout_name(gpu_fi_layout layout) { return layout == GPU_FI_FULL ? "full" : "compact"; }

/* gpu_flashinfer_plan's work: GPU_FI_OK with p's info and counts set, or why not. */
static gpu_fi_reason plan_layout(gpu_flashinfer *f, gpu_fi_layout layout, const uint32_t *qo_indptr,
                                 const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream, char *error,
                                 size_t cap) {
    gpu_flashinfer::plan *p = &f->plans[layout];
    size_t n_rows = n_seqs > 0 ? qo_indptr[n_seqs] : 0, n_keys = n_seqs > 0 ? kv_indptr[n_seqs] : 0;
    if (n_seqs == 0 || n_rows == 0) return GPU_FI_UNPLANNED; /* nothing to run */
    if (n_seqs > f->max_seqs || n_rows > f->max_rows || n_keys > INT32_MAX) return GPU_FI_TOO_LARGE;
    size_t int_bytes = f->int_bytes;
    if (f->starve > 0) f->starve--, int_bytes = 16; /* the test hook: FlashInfer's allocator throws */
    fi::PrefillPlanInfo info;
    cudaError_t status;
    const char *what = NULL;
    try {
        /* IdType int32: the uint32 offsets are below 2^31 (checked above). FlashInfer reads but
         * does not write them. */
        status = fi::PrefillPlan<int32_t>(
            /*float_buffer*/ nullptr, 0, p->ints, p->staging, int_bytes, info, (int32_t *)qo_indptr,
            (int32_t *)kv_indptr, (uint32_t)n_rows, (uint32_t)n_seqs, f->n_heads, f->n_kv_heads, f->head_dim,
            f->head_dim, /*page_size*/ 1, /*enable_cuda_graph*/ true, /*sizeof_dtype_o*/ 2, /*window_left*/ -1,
            /*fixed_split_size*/ -1, /*disable_split_kv*/ true, /*num_colocated_ctas*/ 0, /*uniform_q_len*/ 0, stream,
            /*kv_dtype_bytes*/ 2);
    } catch (const std::exception &e) {
        what = e.what();
        status = cudaSuccess;
    } catch (...) {
        what = "an exception that is not a std::exception";
        status = cudaSuccess;
    }
    if (what == NULL && status != cudaSuccess) {
        (void)cudaGetLastError(); /* the call's own error, not a later launch's */
        what = cudaGetErrorString(status);
    }
    if (what != NULL) {
        snprintf(error, cap, "FlashInfer's PrefillPlan (%s layout, %zu rows, %zu sequences) failed: %s",
                 layout_name(layout), n_rows, n_seqs, what);
        return GPU_FI_PLAN_ERROR;
    }
    if (info.cta_tile_q != cta_tile_q(f->head_dim) || info.split_kv) return GPU_FI_SMALL_BATCH; /* not instantiated */
    p->info = info;
    p->n_seqs = n_seqs, p->n_rows = n_rows, p->n_keys = n_keys;
    return GPU_FI_OK;
}

extern "C" gpu_fi_reason gpu_flashinfer_plan(gpu_flashinfer *f, gpu_fi_layout layout, const uint32_t *qo_indptr,
                                             const uint32_t *kv_indptr, size_t n_seqs, cudaStream_t stream,
                                             char *error, size_t cap, gpu_fi_reason *sm90) {
    if (sm90 != NULL) *sm90 = GPU_FI_UNPLANNED;
    if (f == NULL) return GPU_FI_UNPLANNED;
    f->plans[layout].reason = GPU_FI_UNPLANNED; /* while planning */
    gpu_fi_reason reason = plan_layout(f, layout, qo_indptr, kv_indptr, n_seqs, stream, error, cap);
    f->plans[layout].reason = reason;
#ifdef RMLP_WITH_FLASHINFER_SM90
    if (f->sm90 != NULL) { /* its error message only where FA2's planner had none */
        char sm90_error[384];
        gpu_fi_reason hopper = gpu_fi_sm90_plan(f->sm90, layout, qo_indptr, kv_indptr, n_seqs, stream, sm90_error,
                                                sizeof sm90_error);
        if (hopper == GPU_FI_PLAN_ERROR && reason != GPU_FI_PLAN_ERROR) snprintf(error, cap, "%s", sm90_error);
        if (sm90 != NULL) *sm90 = hopper;
    }
#endif
    return reason;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" gpu_fi_reason gpu_flashinfer_ready(const gpu_flashinfer *f, gpu_fi_layout layout, bool paged,
                                              const gpu_compact_rows *r, size_t n_seqs, size_t n_rows, size_t n_heads,
                                              size_t n_kv_heads, size_t head_dim) {
    if (f == NULL) return GPU_FI_UNPLANNED;
    const gpu_flashinfer::plan &p = f->plans[layout];
    if (p.reason != GPU_FI_OK) return p.reason;
    if (p.n_seqs != n_seqs || p.n_rows != n_rows || (layout == GPU_FI_COMPACT && !paged)) return GPU_FI_UNPLANNED;
    if (n_heads != f->n_heads || n_kv_heads != f->n_kv_heads || head_dim != f->head_dim) return GPU_FI_BUFFERS;
    size_t qd = (size_t)f->n_heads * f->head_dim, kvd = (size_t)f->n_kv_heads * f->head_dim;
    /* k/v rows: as many as the queries (ragged), or the compact rows the pages index (at most
     * max_rows, the context's capacity) */
    size_t kv_rows = paged ? f->max_rows : n_rows;
    if (n_rows * r->q_stride > FI_MAX_ELEMENTS || n_rows * qd > FI_MAX_ELEMENTS ||
        kv_rows * r->k_stride > FI_MAX_ELEMENTS)
        return GPU_FI_TOO_LARGE;
    bool readable = r->out_stride == qd && r->q_stride >= qd && r->k_stride >= kvd && r->k_stride == r->v_stride &&
                    r->q_stride % 8 == 0 && r->k_stride % 8 == 0 && aligned16(r->q) && aligned16(r->k) &&
                    aligned16(r->v) && aligned16(r->out);
    return readable ? GPU_FI_OK : GPU_FI_BUFFERS;
}

/* The plan's arrays in the device workspace, and the layer's window and soft-cap, into either
 * parameter struct. */
template <class Params>
static void set_plan(Params &p, const gpu_flashinfer::plan &plan, int32_t window_left, float softcap) {
    const fi::PrefillPlanInfo &info = plan.info;
    char *ints = (char *)plan.ints;
    p.request_indices = (int32_t *)(ints + info.request_indices_offset);
    p.qo_tile_indices = (int32_t *)(ints + info.qo_tile_indices_offset);
    p.kv_tile_indices = (int32_t *)(ints + info.kv_tile_indices_offset);
    p.o_indptr = (int32_t *)(ints + info.o_indptr_offset);
    p.kv_chunk_size_ptr = (int32_t *)(ints + info.kv_chunk_size_ptr_offset);
    p.merge_indptr = nullptr; /* no split: no merge */
    p.block_valid_mask = (bool *)(ints + info.block_valid_mask_offset);
    p.total_num_rows = (uint32_t *)(ints + info.total_num_rows_offset);
    p.max_total_num_rows = (uint32_t)info.total_num_rows;
    p.padded_batch_size = (uint32_t)info.padded_batch_size;
    p.partition_kv = false;
    p.window_left = window_left;
    p.logits_soft_cap = softcap;
}

/* What one launch runs: the buffers, the device index arrays, the layer's scoring. */
struct launch {
    const gpu_flashinfer *f;
    gpu_fi_layout layout;
    const gpu_compact_rows *r;
    const uint32_t *qo_indptr, *kv_indptr, *kv_indices;
    float scale, softcap;
    int32_t window_left;
    cudaStream_t stream;
};

template <class T, uint32_t HEAD_DIM, class Variant> static cudaError_t run_ragged(const launch &l) {
    typedef fi::BatchPrefillRaggedParams<T, T, T, int32_t> Params;
    const gpu_flashinfer *f = l.f;
    const gpu_compact_rows *r = l.r;
    Params p;
    p.q = (T *)r->q, p.k = (T *)r->k, p.v = (T *)r->v, p.o = (T *)r->out;
    p.q_indptr = (int32_t *)l.qo_indptr, p.kv_indptr = (int32_t *)l.kv_indptr;
    p.num_qo_heads = f->n_heads, p.num_kv_heads = f->n_kv_heads;
    p.group_size = fi::uint_fastdiv(f->n_heads / f->n_kv_heads);
    p.q_stride_n = (uint32_t)r->q_stride, p.q_stride_h = HEAD_DIM;
    p.k_stride_n = (uint32_t)r->k_stride, p.k_stride_h = HEAD_DIM;
    p.v_stride_n = (uint32_t)r->v_stride, p.v_stride_h = HEAD_DIM;
    p.sm_scale = l.scale;
    set_plan(p, f->plans[GPU_FI_FULL], l.window_left, l.softcap);
    return fi::BatchPrefillWithRaggedKVCacheDispatched<cta_tile_q(HEAD_DIM), HEAD_DIM, HEAD_DIM,
                                                       fi::PosEncodingMode::kNone, /*fp16 qk reduction*/ false,
                                                       fi::MaskMode::kCausal, Variant, Params>(
        p, /*tmp_v*/ nullptr, /*tmp_s*/ nullptr, /*enable_pdl*/ false, l.stream);
}

template <class T, uint32_t HEAD_DIM, class Variant> static cudaError_t run_paged(const launch &l) {
    typedef fi::BatchPrefillPagedParams<T, T, T, int32_t> Params;
    const gpu_flashinfer *f = l.f;
    const gpu_compact_rows *r = l.r;
    const gpu_flashinfer::plan &plan = f->plans[l.layout];
    /* Pages of one row: page stride = row stride; NHD: (page, entry, head, dim) strides. */
    const int64_t strides[3] = {(int64_t)r->k_stride, (int64_t)r->k_stride, HEAD_DIM};
    Params p;
    p.paged_kv = fi::paged_kv_t<T, int32_t>(f->n_kv_heads, /*page_size*/ 1, HEAD_DIM, (uint32_t)plan.n_seqs,
                                            fi::QKVLayout::kNHD, (T *)r->k, (T *)r->v, strides,
                                            (int32_t *)l.kv_indices, (int32_t *)l.kv_indptr, f->ones);
    p.q = (T *)r->q, p.o = (T *)r->out;
    p.q_indptr = (int32_t *)l.qo_indptr;
    p.num_qo_heads = f->n_heads;
    p.group_size = fi::uint_fastdiv(f->n_heads / f->n_kv_heads);
    p.q_stride_n = (int32_t)r->q_stride, p.q_stride_h = HEAD_DIM;
    p.sm_scale = l.scale;
    set_plan(p, plan, l.window_left, l.softcap);
    return fi::BatchPrefillWithPagedKVCacheDispatched</*same kv strides*/ true, cta_tile_q(HEAD_DIM), HEAD_DIM,
                                                      HEAD_DIM, fi::PosEncodingMode::kNone, false,
                                                      fi::MaskMode::kCausal, Variant, Params>(p, nullptr, nullptr,
                                                                                              false, l.stream);
}

template <class T, uint32_t HEAD_DIM, class Variant> static cudaError_t run_layout(const launch &l) {
    return l.kv_indices == NULL ? run_ragged<T, HEAD_DIM, Variant>(l) : run_paged<T, HEAD_DIM, Variant>(l);
}

/* The instantiations (the list at the top): the soft-cap variant where the layer caps (head_dim 256
 * only: gpu_flashinfer_takes_layer said yes before). */
template <class T> static cudaError_t run_dtype(const launch &l) {
    bool capped = l.softcap != 0.0f;
    switch (l.f->head_dim) {
    case 64: return run_layout<T, 64, FiWindowed>(l);
    case 128: return run_layout<T, 128, FiWindowed>(l);
    default: return capped ? run_layout<T, 256, FiCapped>(l) : run_layout<T, 256, FiWindowed>(l);
    }
}

extern "C" cudaError_t gpu_flashinfer_run(const gpu_flashinfer *f, gpu_fi_layout layout, const gpu_compact_rows *r,
                                          const uint32_t *qo_indptr, const uint32_t *kv_indptr,
                                          const uint32_t *kv_indices, layer_attention la, cudaStream_t stream,
                                          bool *sm90) {
    if (sm90 != NULL) *sm90 = false;
    if (f == NULL || f->plans[layout].reason != GPU_FI_OK || (layout == GPU_FI_COMPACT && kv_indices == NULL) ||
        !gpu_flashinfer_takes_layer(f->head_dim, la.window, la.softcap))
        return cudaErrorInvalidValue;
    const gpu_flashinfer::plan &p = f->plans[layout];
    launch l = {f, layout, r, qo_indptr, kv_indptr, kv_indices, la.scale, la.softcap,
                window_left_of(la.window, p.n_keys), stream};
#ifdef RMLP_WITH_FLASHINFER_SM90
    /* the Hopper kernels have neither a window nor a soft-cap: such layers run FA2 */
    if (kv_indices != NULL && l.window_left < 0 && l.softcap == 0.0f &&
        gpu_fi_sm90_ready(f->sm90, layout, p.n_seqs, p.n_rows)) {
        cudaError_t error = gpu_fi_sm90_run(f->sm90, layout, r, kv_indices, la.scale, stream);
        if (error != cudaErrorNotSupported) { /* refused before launching: the FA2 kernels take it */
            if (sm90 != NULL) *sm90 = true;
            return error;
        }
    }
#endif
    try {
        return f->dtype == RMLP_DTYPE_BF16 ? run_dtype<nv_bfloat16>(l) : run_dtype<half>(l);
    } catch (...) { /* a configuration FlashInfer refuses on this device (shared memory) */
        return cudaErrorNotSupported;
    }
}

#else /* no FlashInfer in this build: every context takes the reference kernel */

extern "C" bool gpu_flashinfer_built(void) { return false; }

extern "C" bool gpu_flashinfer_supports(rmlp_dtype, size_t, size_t, size_t) { return false; }

extern "C" bool gpu_flashinfer_takes_layer(size_t, uint32_t, float) { return false; }

extern "C" rmlp_status gpu_flashinfer_create(const char *fn, rmlp_dtype, size_t, size_t, size_t, size_t, size_t,
                                             const char *setting, bool, gpu_flashinfer **out) {
    *out = NULL;
    if (setting == NULL) return RMLP_OK;
    return rmlp_fail(RMLP_ERR_UNSUPPORTED, fn, "%s asks for FlashInfer's attention, but this libradix_mlp was built "
                     "without it (RMLP_FLASHINFER=OFF, or no headers in third_party/flashinfer: scripts/setup.sh "
                     "fetches them)", setting);
}

extern "C" void gpu_flashinfer_free(gpu_flashinfer *) {}

extern "C" bool gpu_flashinfer_has_sm90(const gpu_flashinfer *) { return false; }

extern "C" gpu_fi_reason gpu_flashinfer_plan(gpu_flashinfer *, gpu_fi_layout, const uint32_t *, const uint32_t *,
                                             size_t, cudaStream_t, char *, size_t, gpu_fi_reason *sm90) {
    if (sm90 != NULL) *sm90 = GPU_FI_UNPLANNED;
    return GPU_FI_UNPLANNED;
}

extern "C" void gpu_flashinfer_unplan(gpu_flashinfer *) {}

extern "C" gpu_fi_reason gpu_flashinfer_ready(const gpu_flashinfer *, gpu_fi_layout, bool, const gpu_compact_rows *,
                                              size_t, size_t, size_t, size_t, size_t) {
    return GPU_FI_UNPLANNED;
}

extern "C" cudaError_t gpu_flashinfer_run(const gpu_flashinfer *, gpu_fi_layout, const gpu_compact_rows *,
                                          const uint32_t *, const uint32_t *, const uint32_t *, layer_attention,
                                          cudaStream_t, bool *sm90) {
    if (sm90 != NULL) *sm90 = false;
    return cudaErrorInvalidValue;
}

extern "C" void gpu_flashinfer_test_starve(gpu_flashinfer *, unsigned) {}

#endif
