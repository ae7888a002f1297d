/*
 * gpu_test_util.h: what the tests of the CUDA path (test_gpu_kernels.c, test_gpu_flashinfer.c,
 * test_gpu_model.c) share: F16 and BF16 on the host (round to nearest even, as the device's
 * __float2half_rn and __float2bfloat16_rn and the library's upload do), conversions of
 * little-endian storage to and from fp32, random inputs, a context's GPU stats, device buffers that
 * must be had (a failed CUDA call there ends the test with its summary line: nothing after it would
 * mean anything), and the kernel tests' comparison with per-element and norm tolerances (and a
 * line reporting the errors). Include after test_util.h (it CHECKs), in the one translation unit
 * of a test.
 */
#ifndef RMLP_GPU_TEST_UTIL_H
#define RMLP_GPU_TEST_UTIL_H

#include <math.h>

#include <cuda_runtime_api.h>

/* ---- dtypes on the host ------------------------------------------------------------------- */

static inline uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_f16(float f) { /* round to nearest even; overflow to inf, NaN stays NaN */
    uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);                                     /* >= 65520: inf */
    if (a < 0x38800000u) return (uint16_t)(sign | (uint32_t)nearbyintf(fabsf(f) * 16777216.0f)); /* subnormal */
    a += 0xFFFu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -v : v;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
    uint32_t x = bits_of(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

static inline float bf16_to_f32(uint16_t b) { return from_bits((uint32_t)b << 16); }

static inline size_t elem_size(rmlp_dtype dt) { return dt == RMLP_DTYPE_F32 ? 4 : 2; }

/* f as the dtype stores it, back in fp32. */
static inline float round_to(rmlp_dtype dt, float f) {
    return dt == RMLP_DTYPE_F16 ? f16_to_f32(f32_to_f16(f)) : dt == RMLP_DTYPE_BF16 ? bf16_to_f32(f32_to_bf16(f)) : f;
}

/* n uniform values in [lo, hi], rounded to dt. */
static inline float *random_values(uint64_t *rng, size_t n, float lo, float hi, rmlp_dtype dt) {
    float *x = tu_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = round_to(dt, lo + (hi - lo) * (float)((tu_rand(rng) >> 40) * 0x1p-24));
    return x;
}

/* out (n) fp32 = the n elements of dtype dt at p (little-endian, possibly unaligned). */
static inline void dtype_to_f32(const unsigned char *p, rmlp_dtype dt, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) {
        if (dt == RMLP_DTYPE_F32) {
            memcpy(&out[i], p + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            out[i] = dt == RMLP_DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
    }
}

/* out (n elements of dtype dt) = x (n) rounded to the dtype. */
static inline void f32_to_dtype(const float *x, size_t n, rmlp_dtype dt, unsigned char *out) {
    for (size_t i = 0; i < n; i++) {
        if (dt == RMLP_DTYPE_F32) {
            memcpy(out + 4 * i, &x[i], 4);
        } else {
            uint16_t v = dt == RMLP_DTYPE_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
            memcpy(out + 2 * i, &v, 2);
        }
    }
}

/* rmlp_context_gpu_stats of a CUDA context (CHECKed: OK and `cuda`). */
static inline rmlp_gpu_stats gpu_stats_of(rmlp_context *ctx) {
    rmlp_gpu_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(rmlp_context_gpu_stats(ctx, &s) == RMLP_OK && s.cuda, "rmlp_context_gpu_stats: %s", rmlp_last_error());
    return s;
}

/* ---- device buffers ------------------------------------------------------------------------- */

/* A CUDA call that must succeed: on failure the test cannot go on. */
#define CUDA_MUST(call)                                                                                                \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (!CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_))) {                                      \
            tu_summary();                                                                                              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Waits until the uploads (cudaMemcpy from pageable memory may return before its DMA lands) and
 * cudaMemsets (asynchronous on device memory) before it have written the device: both run on the
 * legacy default stream, which the tests' non-blocking streams do not wait for. Outside captures. */
static inline void uploads_landed(void) { CUDA_MUST(cudaDeviceSynchronize()); }

static inline void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_MUST(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

/* n fp32 values stored as dtype dt at device address d, landed (uploads_landed). */
static inline void upload_as(void *d, const float *x, size_t n, rmlp_dtype dt) {
    unsigned char *h = tu_xmalloc(n * elem_size(dt));
    f32_to_dtype(x, n, dt, h);
    CUDA_MUST(cudaMemcpy(d, h, n * elem_size(dt), cudaMemcpyHostToDevice));
    uploads_landed();
    free(h);
}

/* The n values of dtype dt at device address d, as fp32 (cudaMemcpy: the caller has synchronised
 * the stream that wrote them). */
static inline float *download_as(const void *d, size_t n, rmlp_dtype dt) {
    unsigned char *h = tu_xmalloc(n * elem_size(dt));
    float *x = tu_xmalloc(n * sizeof(float));
    CUDA_MUST(cudaMemcpy(h, d, n * elem_size(dt), cudaMemcpyDeviceToHost));
    dtype_to_f32(h, dt, n, x);
    free(h);
    return x;
}

static inline void *upload(const float *x, size_t n, rmlp_dtype dt) {
    void *d = dev_alloc(n * elem_size(dt));
    upload_as(d, x, n, dt);
    return d;
}

static inline void *upload_u32(const uint32_t *x, size_t n) {
    void *d = dev_alloc(n * sizeof(uint32_t));
    CUDA_MUST(cudaMemcpy(d, x, n * sizeof(uint32_t), cudaMemcpyHostToDevice));
    uploads_landed();
    return d;
}

/* n elements of dtype dt, every byte 0xFF (NaN). */
static inline void *poisoned(size_t n, rmlp_dtype dt) {
    void *d = dev_alloc(n * elem_size(dt));
    CUDA_MUST(cudaMemset(d, 0xFF, n * elem_size(dt)));
    uploads_landed();
    return d;
}

/* A launcher's return value, then its stream: a fault inside the kernel shows here. */
static inline int launched_on(cudaError_t error, const char *what, cudaStream_t stream) {
    if (!CHECK(error == cudaSuccess, "%s: launch returned %s", what, cudaGetErrorString(error))) return 0;
    CUDA_MUST(cudaStreamSynchronize(stream));
    return 1;
}

/* Device 0's properties, printed; without a device a SKIP line saying why, and 0 (the test then
 * exits 77 after its device-free checks). */
static inline int gpu_test_device(struct cudaDeviceProp *prop) {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount reports 0 devices");
        return 0;
    }
    CUDA_MUST(cudaGetDeviceProperties(prop, 0));
    printf("device 0: %s (compute capability %d.%d)\n", prop->name, prop->major, prop->minor);
    return 1;
}

/* A compact layout of two sequences by hand: sequence 0 owns its whole path of l0 rows (compact
 * rows 0 .. l0), sequence 1 shares its first `shared` rows and owns l1 more (rows l0 .. l0 + l1).
 * qo (3), kv_indptr (3), kv_indices (l0 + shared + l1). */
static inline void two_paths(uint32_t l0, uint32_t shared, uint32_t l1, uint32_t *qo, uint32_t *kv, uint32_t *idx) {
    qo[0] = 0, qo[1] = l0, qo[2] = l0 + l1;
    kv[0] = 0, kv[1] = l0, kv[2] = l0 + shared + l1;
    for (uint32_t i = 0; i < l0; i++) idx[i] = i;
    for (uint32_t i = 0; i < shared; i++) idx[l0 + i] = i;
    for (uint32_t i = 0; i < l1; i++) idx[l0 + shared + i] = l0 + i;
}

/* Does FlashInfer pick the query tile gpu/flashinfer.cu instantiates for this batch? Its choice in
 * CUDA-graph mode (FA2DetermineCtaTileQ of (rows - sequences + 1) x the GQA group, computed in 32
 * bits): 128-row tiles above 64 below head_dim 256, 64-row tiles above 16 at 256; other batches
 * take the reference attention. */
static inline int flashinfer_tiles(size_t n_rows, size_t n_seqs, size_t group, size_t head_dim) {
    uint32_t longest = (uint32_t)n_rows - (uint32_t)n_seqs + 1u;
    return (uint64_t)longest * group > (head_dim == 256 ? 16u : 64u);
}

/* ---- comparison of kernel outputs ------------------------------------------------------------ */

/* |got - ref| <= atol + rtol * |ref| per element, and ||got - ref|| <= norm * ||ref|| overall. */
typedef struct tol {
    double atol, rtol, norm;
} tol;

static inline void compare(const char *what, const float *got, const float *ref, size_t n, tol t) {
    size_t bad = n, worst = 0;
    double err2 = 0, ref2 = 0, worst_excess = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]), bound = t.atol + t.rtol * fabs((double)ref[i]);
        double excess = isnan(d) ? INFINITY : d - bound;
        if (!(d <= bound) && bad == n) bad = i; /* NaN fails too */
        if (excess > worst_excess) worst = i, worst_excess = excess;
        err2 += d * d;
        ref2 += (double)ref[i] * ref[i];
    }
    if (!CHECK(bad == n, "%s: element %zu is %.9g, want %.9g (largest excess at %zu: %.9g vs %.9g)", what, bad,
               bad < n ? got[bad] : 0.0, bad < n ? ref[bad] : 0.0, worst, (double)got[worst], (double)ref[worst]))
        return;
    CHECK(sqrt(err2) <= t.norm * sqrt(ref2), "%s: relative norm error %.3g > %.3g", what,
          sqrt(err2 / (ref2 ? ref2 : 1)), t.norm);
}

/* compare(), then one line with the measured errors (scripts/device/first_run.sh collects them). Not inlined:
 * GCC then cannot mistake a download's rows for uninitialized memory (-Wmaybe-uninitialized). */
static __attribute__((noinline, unused)) void compare_report(const char *what, const float *got, const float *ref,
                                                             size_t n, tol t) {
    compare(what, got, ref, n, t);
    double max_ref = 0, err2 = 0, ref2 = 0, max_abs = tu_max_abs_diff(got, ref, n, &max_ref);
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        err2 += d * d, ref2 += (double)ref[i] * ref[i];
    }
    printf("  %-100s max abs %.3g (of max %.3g), rel norm %.3g\n", what, max_abs, max_ref,
           sqrt(err2 / (ref2 ? ref2 : 1)));
}

#endif
