/*
 * bench_core_peak.c: how close one core's fp32 GEMMs come to what the core can do, and whether
 * another maintained BLAS does better on a forward's shapes. On one thread it times: the FMA peak
 * (independent 8-wide FMA chains in registers; 16-wide too where the CPU has AVX-512, the peak the
 * percentages then take), a GEMM inner loop held in L1 (6 x 16 register tile:
 * two vector loads, six broadcasts and twelve FMAs per step, what every BLAS micro-kernel for AVX2
 * does), then one forward's GEMMs (SmolLM2-135M's four shapes by default, 30 layers, M rows) and a
 * square GEMM through OpenBLAS (linked), BLIS (libblis.so.4, native API) and oneDNN (libdnnl.so.2,
 * dnnl_sgemm), each dlopen'ed where installed and checked against OpenBLAS's result. A benchmark:
 * nothing tests its figures (docs/bench/cpu-path.md, "The floor").
 * Usage: bench_core_peak [--m M] [--layers L] [--rounds R (<= 64)] [--square S]
 */
#define _GNU_SOURCE /* RTLD_* */

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__x86_64__)
#define FMA8(c, a, b) c = _mm256_fmadd_ps(a, b, c)

/* GFLOP/s of ten independent FMA chains (latency 4, two pipes: eight keep both busy). */
__attribute__((target("avx2,fma"))) static double fma_peak(void) {
    __m256 c0 = _mm256_set1_ps(1.0f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
           c9 = c0, m = _mm256_set1_ps(0.9999999f), k = _mm256_set1_ps(1e-7f);
#define STEP(c) c = _mm256_fmadd_ps(c, m, k) /* c m + k: stays at 1, never denormal */
    const long steps = 100000000;
    double t = cli_now_ms();
    for (long i = 0; i < steps; i++) {
        STEP(c0), STEP(c1), STEP(c2), STEP(c3), STEP(c4), STEP(c5), STEP(c6), STEP(c7), STEP(c8), STEP(c9);
    }
    t = cli_now_ms() - t;
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(_mm256_add_ps(c6, c7),
                                                                                 _mm256_add_ps(c8, c9))));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] == 12345.0f ? 0.0 : (double)steps * 10 * 16 / t / 1e6;
}

/* The same with twelve 16-wide chains (AVX-512: two pipes, latency 4 on the Xeons that have it). */
__attribute__((target("avx512f"))) static double fma_peak512(void) {
    __m512 c[12], m = _mm512_set1_ps(0.9999999f), k = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) c[i] = _mm512_set1_ps(1.0f);
    const long steps = 50000000;
    double t = cli_now_ms();
    for (long i = 0; i < steps; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) c[j] = _mm512_fmadd_ps(c[j], m, k);
    }
    t = cli_now_ms() - t;
    for (int j = 1; j < 12; j++) c[0] = _mm512_add_ps(c[0], c[j]);
    return _mm512_reduce_add_ps(c[0]) == 12345.0f ? 0.0 : (double)steps * 12 * 32 / t / 1e6;
}

/* GFLOP/s of a 6 x 16 register tile over packed panels of depth k held in L1 (a: 6 per step, b: 16). */
__attribute__((target("avx2,fma"))) static double l1_tile_loop(const float *a, const float *b, int k, long reps) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    double t = cli_now_ms();
    for (long r = 0; r < reps; r++) {
        const float *pa = a, *pb = b;
        for (int i = 0; i < k; i++, pa += 6, pb += 16) {
            __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8), x;
            x = _mm256_broadcast_ss(pa + 0), FMA8(c00, x, b0), FMA8(c01, x, b1);
            x = _mm256_broadcast_ss(pa + 1), FMA8(c10, x, b0), FMA8(c11, x, b1);
            x = _mm256_broadcast_ss(pa + 2), FMA8(c20, x, b0), FMA8(c21, x, b1);
            x = _mm256_broadcast_ss(pa + 3), FMA8(c30, x, b0), FMA8(c31, x, b1);
            x = _mm256_broadcast_ss(pa + 4), FMA8(c40, x, b0), FMA8(c41, x, b1);
            x = _mm256_broadcast_ss(pa + 5), FMA8(c50, x, b0), FMA8(c51, x, b1);
        }
    }
    t = cli_now_ms() - t;
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c00, c01), _mm256_add_ps(c10, c11)),
                             _mm256_add_ps(_mm256_add_ps(c20, c21), _mm256_add_ps(c30, c31)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c40, c41), _mm256_add_ps(c50, c51)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] == 12345.0f ? 0.0 : (double)reps * k * 6 * 16 * 2 / t / 1e6;
}
#endif

/* y (m, n) = x (m, k) W^T, W (n, k) row-major: one library's single-threaded GEMM. */
typedef void (*gemm_fn)(int m, int n, int k, const float *x, const float *w, float *y);

static void openblas_gemm(int m, int n, int k, const float *x, const float *w, float *y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

/* BLIS's typed API with strides (no transpose flags): its dim_t and inc_t are 64-bit in Debian's build. */
static void (*bli_sgemm_p)(int, int, int64_t, int64_t, int64_t, const float *, const float *, int64_t, int64_t,
                           const float *, int64_t, int64_t, const float *, float *, int64_t, int64_t);
static void blis_gemm(int m, int n, int k, const float *x, const float *w, float *y) {
    const float one = 1.0f, zero = 0.0f;
    bli_sgemm_p(0, 0, m, n, k, &one, x, k, 1, w, 1, k, &zero, y, n, 1);
}

static int (*dnnl_sgemm_p)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                           int64_t, float, float *, int64_t);
static void dnnl_gemm(int m, int n, int k, const float *x, const float *w, float *y) {
    dnnl_sgemm_p('N', 'T', m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

/* dlopen a BLAS; NULL (and a line saying why) where it is not installed. */
static gemm_fn load_blis(void) {
    void *lib = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    void (*threads)(int64_t) = NULL;
    if (lib != NULL) {
        *(void **)&bli_sgemm_p = dlsym(lib, "bli_sgemm");
        *(void **)&threads = dlsym(lib, "bli_thread_set_num_threads");
    }
    if (bli_sgemm_p == NULL || threads == NULL) {
        printf("# BLIS: not timed (%s)\n", lib == NULL ? dlerror() : "bli_sgemm missing");
        return NULL;
    }
    threads(1);
    return blis_gemm;
}

static gemm_fn load_dnnl(void) {
    void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) *(void **)&dnnl_sgemm_p = dlsym(lib, "dnnl_sgemm");
    if (dnnl_sgemm_p == NULL) {
        printf("# oneDNN: not timed (%s)\n", lib == NULL ? dlerror() : "dnnl_sgemm missing");
        return NULL;
    }
    void (*omp_threads)(int) = NULL; /* oneDNN's OpenMP runtime, loaded with it */
    *(void **)&omp_threads = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (omp_threads == NULL) *(void **)&omp_threads = dlsym(lib, "omp_set_num_threads");
    if (omp_threads != NULL) omp_threads(1);
    return dnnl_gemm;
}

static float *filled(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; p != NULL && i < n; i++) p[i] = (float)((i * 7 + seed) % 23) * 0.01f - 0.11f;
    return p;
}

int main(int argc, char **argv) {
    unsigned long opts[4] = {482, 30, 5, 2048}; /* 482: half SmolLM2's rerank batch's N', per thread */
    const char *flags[4] = {"--m", "--layers", "--rounds", "--square"};
    const unsigned long most[4] = {65536, 1000, 64, 8192};
    for (int i = 1; i < argc; i++) {
        int o = 0;
        while (o < 4 && strcmp(argv[i], flags[o]) != 0) o++;
        if (o == 4 || i + 1 >= argc) {
            fprintf(stderr, "usage: bench_core_peak [--m M] [--layers L] [--rounds R (<= 64)] [--square S]\n");
            return 2;
        }
        if (cli_parse_count(flags[o], argv[++i], most[o], &opts[o]) != 0) return 2;
    }
    int m = (int)opts[0], layers = (int)opts[1], rounds = (int)opts[2], square = (int)opts[3];
    openblas_set_num_threads(1);
    double peak = 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        float *a = filled(6 * 256, 1), *b = filled(16 * 256, 2);
        peak = fma_peak();
        double tile = l1_tile_loop(a, b, 256, 1000000);
        printf("one thread: FMA peak %.1f GFLOP/s; GEMM inner loop in L1 (6 x 16 tile, depth 256) %.1f GFLOP/s (%.0f%%)\n",
               peak, tile, 100 * tile / peak);
        free(a), free(b);
    }
    if (__builtin_cpu_supports("avx512f")) {
        peak = fma_peak512();
        printf("one thread: AVX-512 FMA peak %.1f GFLOP/s (the percentages below are of it)\n", peak);
    }
#endif
    const int in[4] = {576, 576, 576, 1536}, out[4] = {960, 576, 3072, 576}; /* qkv, o, gate_up, down */
    const char *names[3] = {"OpenBLAS", "BLIS", "oneDNN"};
    gemm_fn fns[3] = {openblas_gemm, load_blis(), load_dnnl()};
    size_t widest = 3072, big = (size_t)square * (size_t)square;
    float *x = filled((size_t)m * widest, 3), *y = malloc((size_t)m * widest * sizeof(float));
    float *ref = malloc((size_t)m * widest * sizeof(float)), **w = calloc((size_t)layers * 4, sizeof(float *));
    float *sa = filled(big, 4), *sb = filled(big, 5), *sc = malloc(big * sizeof(float));
    if (x == NULL || y == NULL || ref == NULL || w == NULL || sa == NULL || sb == NULL || sc == NULL) {
        fprintf(stderr, "bench_core_peak: out of memory\n");
        return 1;
    }
    for (int l = 0; l < layers * 4; l++)
        if ((w[l] = filled((size_t)in[l % 4] * (size_t)out[l % 4], (unsigned)l)) == NULL) {
            fprintf(stderr, "bench_core_peak: out of memory\n");
            return 1;
        }
    double flop = 0, sq_flop = 2.0 * square * (double)square * square;
    for (int g = 0; g < 4; g++) flop += 2.0 * m * in[g] * out[g] * layers;
    openblas_gemm(m, out[2], in[2], x, w[2], ref);
    printf("# one thread; %d layers of GEMMs on M = %d rows (in->out 576->960, 576->576, 576->3072, 1536->576), "
           "and %d^3; best and median of %d rounds, the libraries alternating; OpenBLAS's kernels: %s\n", layers, m,
           square, rounds, openblas_get_corename());
    double t[3][2][64];
    int n = rounds;
    for (int r = 0; r <= n; r++)
        for (int b = 0; b < 3; b++) {
            if (fns[b] == NULL) continue;
            double t0 = cli_now_ms();
            for (int l = 0; l < layers; l++)
                for (int g = 0; g < 4; g++) fns[b](m, out[g], in[g], x, w[l * 4 + g], y);
            double t1 = cli_now_ms();
            fns[b](square, square, square, sa, sb, sc);
            double t2 = cli_now_ms();
            if (r > 0) t[b][0][r - 1] = t1 - t0, t[b][1][r - 1] = t2 - t1; /* round 0 warms up */
        }
    for (int b = 0; b < 3; b++) {
        if (fns[b] == NULL) continue;
        fns[b](m, out[2], in[2], x, w[2], y);
        double diff = 0, scale = 0;
        for (size_t i = 0; i < (size_t)m * out[2]; i++)
            diff = fmax(diff, fabs(y[i] - ref[i])), scale = fmax(scale, fabs(ref[i]));
        double median = cli_sort_median(t[b][0], (size_t)n); /* sorted: [0] the best */
        cli_sort_median(t[b][1], (size_t)n);
        double f = flop / t[b][0][0] / 1e6, fm = flop / median / 1e6, s = sq_flop / t[b][1][0] / 1e6;
        printf("%-9s forward GEMMs best %7.1f ms %6.1f GFLOP/s (median %6.1f)", names[b], t[b][0][0], f, fm);
        if (peak > 0) printf(" %3.0f%% of peak", 100 * f / peak);
        printf("; %d^3 %6.1f GFLOP/s; max|diff| vs OpenBLAS %.1e of %.1e\n", square, s, diff, scale);
        if (diff > 1e-3 * scale) {
            fprintf(stderr, "bench_core_peak: %s disagrees with OpenBLAS\n", names[b]);
            return 1;
        }
    }
    for (int l = 0; l < layers * 4; l++) free(w[l]);
    free(w), free(x), free(y), free(ref), free(sa), free(sb), free(sc);
    return 0;
}
