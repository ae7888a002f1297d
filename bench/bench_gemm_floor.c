/*
 * bench_gemm_floor.c: what the GEMMs of a CPU forward cost at best, the floor under `radixmlp
 * bench`'s gemm_ms. A layer's four GEMMs (SmolLM2-135M's shapes by default: hidden 576, q/k/v 576 +
 * 2 x 192, MLP 1536), each layer with weights of its own as a forward streams them, on M rows:
 * through the library's cpu_linear on a pool of T threads (each one single-threaded OpenBLAS call,
 * as a context runs them), on one thread alone (the per-thread rate), and through OpenBLAS's own T
 * threads (how the library ran them before; 0.3 s apart, so that OpenBLAS's idle threads, which spin
 * about 0.1 s after a call, have stopped when the others run). Prints the best and median of R rounds for L layers,
 * in ms and GFLOP/s; the three ways alternate round by round.
 * Usage: bench_gemm_floor [M ...] [--layers L] [--rounds R] [--threads T] [--hidden H --inter I
 *        --q Q --kv KV]   (docs/bench/cpu-path.md)
 */
#define _POSIX_C_SOURCE 200809L

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_ops.h"
#include "cpu/workers.h"

#define MAX_M 16

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct shapes {
    size_t in[4], out[4]; /* qkv, o, gate_up, down */
} shapes;

/* One forward's GEMMs on m rows: cpu_linear on `pool` (mode 0, 1) or OpenBLAS's threads (mode 2). */
static double forward_gemms(const shapes *s, float **w, size_t layers, const float *x, float *y, size_t m,
                            workers *pool, int mode) {
    double t = now_ms();
    for (size_t l = 0; l < layers; l++)
        for (int g = 0; g < 4; g++) {
            const float *wl = w[l * 4 + (size_t)g];
            if (mode == 2)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)s->out[g], (int)s->in[g], 1.0f, x,
                            (int)s->in[g], wl, (int)s->in[g], 0.0f, y, (int)s->out[g]);
            else cpu_linear(x, m, s->in[g], wl, NULL, s->out[g], y, mode == 0 ? pool : NULL);
        }
    t = now_ms() - t;
    if (mode == 2) { /* back to the library's setting, once OpenBLAS's idle threads stopped spinning */
        openblas_set_num_threads(1);
        nanosleep(&(struct timespec){0, 300000000L}, NULL);
    }
    return t;
}

int main(int argc, char **argv) {
    size_t ms[MAX_M], n_m = 0, layers = 30, rounds = 5, hidden = 576, inter = 1536, q = 576, kv = 192;
    int threads = 2, error = 0;
    for (int i = 1; i < argc; i++) {
        size_t *opt = NULL;
        if (strcmp(argv[i], "--layers") == 0) opt = &layers;
        else if (strcmp(argv[i], "--rounds") == 0) opt = &rounds;
        else if (strcmp(argv[i], "--hidden") == 0) opt = &hidden;
        else if (strcmp(argv[i], "--inter") == 0) opt = &inter;
        else if (strcmp(argv[i], "--q") == 0) opt = &q;
        else if (strcmp(argv[i], "--kv") == 0) opt = &kv;
        if (opt != NULL && i + 1 < argc) *opt = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (argv[i][0] != '-' && n_m < MAX_M) ms[n_m++] = strtoul(argv[i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_gemm_floor [M ...] [--layers L] [--rounds R] [--threads T] [--hidden H "
                            "--inter I --q Q --kv KV]\n");
            return 2;
        }
    }
    if (n_m == 0) ms[n_m++] = 964, ms[n_m++] = 1934; /* SmolLM2's rerank batch: N', N */
    if (layers < 1 || rounds < 1 || threads < 1 || hidden < 1 || inter < 1 || q < 1 || kv < 1) {
        fprintf(stderr, "bench_gemm_floor: --layers, --rounds, --threads and the sizes must be at least 1\n");
        return 2;
    }
    shapes s = {{hidden, q, hidden, inter}, {q + 2 * kv, hidden, 2 * inter, hidden}};
    size_t max_m = 0, widest = 0;
    for (size_t i = 0; i < n_m; i++) max_m = ms[i] > max_m ? ms[i] : max_m;
    for (int g = 0; g < 4; g++) {
        widest = s.in[g] > widest ? s.in[g] : widest;
        widest = s.out[g] > widest ? s.out[g] : widest;
    }
    float **w = calloc(layers * 4, sizeof(float *)), *x = malloc(max_m * widest * sizeof(float));
    float *y = malloc(max_m * widest * sizeof(float));
    workers *pool = workers_create((size_t)threads, &error);
    if (w == NULL || x == NULL || y == NULL || (threads > 1 && pool == NULL)) {
        fprintf(stderr, "bench_gemm_floor: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < max_m * widest; i++) x[i] = (float)(i % 17) * 0.01f - 0.08f;
    for (size_t l = 0; l < layers; l++)
        for (int g = 0; g < 4; g++) {
            size_t n = s.in[g] * s.out[g];
            if ((w[l * 4 + (size_t)g] = malloc(n * sizeof(float))) == NULL) {
                fprintf(stderr, "bench_gemm_floor: setup failed\n");
                return 1;
            }
            for (size_t i = 0; i < n; i++) w[l * 4 + (size_t)g][i] = (float)((i + l) % 13) * 0.01f - 0.06f;
        }
    const char *names[3] = {"cpu_linear on the pool", "one thread alone", "OpenBLAS's own threads"};
    printf("# %zu layers of GEMMs (in->out: %zu->%zu, %zu->%zu, %zu->%zu, %zu->%zu), %d threads, %zu rounds\n", layers,
           s.in[0], s.out[0], s.in[1], s.out[1], s.in[2], s.out[2], s.in[3], s.out[3], threads, rounds);
    for (size_t i = 0; i < n_m; i++) {
        double flop = 0, t[3][64];
        for (int g = 0; g < 4; g++) flop += 2.0 * (double)ms[i] * (double)s.in[g] * (double)s.out[g];
        flop *= (double)layers;
        for (size_t r = 0; r <= rounds && r < 64; r++)
            for (int mode = 0; mode < 3; mode++) {
                if (mode == 2) openblas_set_num_threads(threads);
                double ms_taken = forward_gemms(&s, w, layers, x, y, ms[i], pool, mode);
                if (r > 0) t[mode][r - 1] = ms_taken; /* round 0 warms up */
            }
        for (int mode = 0; mode < 3; mode++) {
            size_t n = rounds < 63 ? rounds : 63;
            qsort(t[mode], n, sizeof(double), cmp);
            printf("M=%-6zu %-24s best %8.1f ms (%6.1f GFLOP/s)  median %8.1f ms (%6.1f GFLOP/s)\n", ms[i], names[mode],
                   t[mode][0], flop / t[mode][0] / 1e6, t[mode][n / 2], flop / t[mode][n / 2] / 1e6);
        }
    }
    workers_destroy(pool);
    for (size_t l = 0; l < layers * 4; l++) free(w[l]);
    free(w), free(x), free(y);
    return 0;
}
