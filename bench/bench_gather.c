/*
 * bench_gather.c: the bandwidth of the row gather gpu_gather_rows (gpu/kernels.h) against a
 * device-to-device cudaMemcpyAsync of as many bytes, measured in the same run, on the batch of
 * `radixmlp bench`'s case b32_p2048_s256 (32 sequences, shared prefix 2048, suffix 256; with
 * --quick 8 x (256 + 64)), planned by the library's planner (radix always on). Per dtype (bf16,
 * f16, f32), row width (1024, 2048, 2560, 4096: hidden sizes and q widths of Qwen3-0.6B/4B/8B) and
 * direction: scatter (n_tokens rows from n_compact source rows, index = plan.scatter) and fold
 * (n_compact rows from n_tokens source rows, index = plan.fold_gather). Each is timed with CUDA
 * events, one launch at a time after warm-up, L2 flushed before each; the median of REPS. Bandwidth
 * is (bytes read + bytes written) / time = 2 x rows x dim x elem_size / time for both. After the
 * timing the gather's output is compared bit for bit with the same gather on the host; a mismatch
 * prints FAIL and the program exits 1. Without a CUDA device it prints SKIP and exits 77.
 * Usage: bench_gather [--quick] [--json]   (--json: one JSON object per line instead of a table)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "gpu/kernels.h"
#include "radix_mlp.h"
#include "workload.h"

#define SKIP_CODE 77
#define WARMUP 3
#define REPS 20
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_BF16, RMLP_DTYPE_F16, RMLP_DTYPE_F32};
static const char *const DTYPE_NAMES[] = {"bf16", "f16", "f32"};
static const size_t DIMS[] = {1024, 2048, 2560, 4096};
#define MAX_DIM 4096
#define MAX_ELEM 4

/* Everything the program holds, freed by cleanup() on every way out. */
static struct {
    rmlp_planner *planner;
    workload w;
    unsigned char *h_src, *h_dst;              /* (max_rows * MAX_DIM * MAX_ELEM) bytes, host */
    unsigned char *d_src, *d_dst, *d_copy;     /* the same, device: source, gather output, memcpy output */
    unsigned char *d_flush;                    /* (flush_bytes) written before each timed launch */
    uint32_t *d_scatter, *d_fold;              /* (n_tokens), (n_compact) */
    cudaStream_t stream;
    cudaEvent_t start[REPS], stop[REPS];
} g;

static void cleanup(void) {
    if (g.stream != NULL) cudaStreamSynchronize(g.stream);
    for (int i = 0; i < REPS; i++) {
        if (g.start[i] != NULL) cudaEventDestroy(g.start[i]);
        if (g.stop[i] != NULL) cudaEventDestroy(g.stop[i]);
    }
    if (g.stream != NULL) cudaStreamDestroy(g.stream);
    cudaFree(g.d_src), cudaFree(g.d_dst), cudaFree(g.d_copy), cudaFree(g.d_flush);
    cudaFree(g.d_scatter), cudaFree(g.d_fold);
    free(g.h_src), free(g.h_dst);
    workload_free(&g.w);
    rmlp_planner_free(g.planner);
}

static void die(const char *what, const char *why) {
    printf("FAIL: %s: %s\n", what, why);
    cleanup();
    exit(1);
}

#define CUDA(call)                                                 \
    do {                                                           \
        cudaError_t e_ = (call);                                   \
        if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_)); \
    } while (0)

/* Median milliseconds of one launch of the gather (gather != 0) or of the memcpy. */
static float time_ms(int gather, unsigned char *dst, const uint32_t *index, size_t rows, size_t dim, rmlp_dtype dt,
                     size_t bytes, size_t flush_bytes) {
    double ms[REPS];
    for (int i = 0; i < WARMUP + REPS; i++) {
        CUDA(cudaMemsetAsync(g.d_flush, i & 0xFF, flush_bytes, g.stream)); /* evict dst and src from L2 */
        if (i >= WARMUP) CUDA(cudaEventRecord(g.start[i - WARMUP], g.stream));
        if (gather)
            CUDA(gpu_gather_rows(dst, g.d_src, dim, index, rows, dim, dt, g.stream));
        else
            CUDA(cudaMemcpyAsync(dst, g.d_dst, bytes, cudaMemcpyDeviceToDevice, g.stream));
        if (i >= WARMUP) CUDA(cudaEventRecord(g.stop[i - WARMUP], g.stream));
    }
    CUDA(cudaStreamSynchronize(g.stream));
    for (int i = 0; i < REPS; i++) {
        float elapsed;
        CUDA(cudaEventElapsedTime(&elapsed, g.start[i], g.stop[i]));
        ms[i] = elapsed;
    }
    return (float)cli_sort_median(ms, REPS);
}

/* Times and checks one configuration; returns 0, or 1 after printing FAIL. */
static int run_config(int di, size_t dim, int fold, const rmlp_plan *plan, const char *device_name,
                      size_t flush_bytes, int json) {
    rmlp_dtype dt = DTYPES[di];
    size_t es = dt == RMLP_DTYPE_F32 ? 4 : 2, row_bytes = dim * es;
    size_t rows = fold ? plan->n_compact : plan->n_tokens, bytes = rows * row_bytes;
    const uint32_t *index = fold ? plan->fold_gather : plan->scatter; /* host (rows) */
    const char *direction = fold ? "fold" : "scatter";

    /* 0xFF bytes: a value the source never holds (its 16-bit words have bit 14 clear), so an
     * unwritten element fails the check. */
    CUDA(cudaMemsetAsync(g.d_dst, 0xFF, bytes, g.stream));
    float gather_ms = time_ms(1, g.d_dst, fold ? g.d_fold : g.d_scatter, rows, dim, dt, bytes, flush_bytes);
    float copy_ms = time_ms(0, g.d_copy, NULL, rows, dim, dt, bytes, flush_bytes);

    CUDA(cudaMemcpy(g.h_dst, g.d_dst, bytes, cudaMemcpyDeviceToHost));
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *got = g.h_dst + r * row_bytes, *want = g.h_src + (size_t)index[r] * row_bytes;
        if (memcmp(got, want, row_bytes) == 0) continue;
        size_t e = 0;
        while (memcmp(got + e * es, want + e * es, es) == 0) e++;
        printf("FAIL: %s dim=%zu %s: row %zu (source row %u) element %zu differs from the host gather\n",
               DTYPE_NAMES[di], dim, direction, r, index[r], e);
        return 1;
    }

    double moved = 2.0 * (double)bytes, gather_gbps = moved / (gather_ms * 1e6), copy_gbps = moved / (copy_ms * 1e6);
    if (json)
        printf("{\"bench\":\"gather\",\"dtype\":\"%s\",\"dim\":%zu,\"direction\":\"%s\",\"rows\":%zu,\"bytes\":%zu,"
               "\"gather_gbps\":%.1f,\"memcpy_gbps\":%.1f,\"ratio\":%.3f,\"device_name\":\"%s\"}\n",
               DTYPE_NAMES[di], dim, direction, rows, 2 * bytes, gather_gbps, copy_gbps, gather_gbps / copy_gbps,
               device_name);
    else
        printf("%-4s %5zu %-7s %7zu %9.1f %11.1f %11.1f %6.3f\n", DTYPE_NAMES[di], dim, direction, rows, moved / 1e6,
               gather_gbps, copy_gbps, gather_gbps / copy_gbps);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "usage: bench_gather [--quick] [--json]\n");
            return 2;
        }
    }
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device: %s\n",
               error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount reports 0 devices");
        return SKIP_CODE;
    }
    struct cudaDeviceProp prop;
    CUDA(cudaGetDeviceProperties(&prop, 0));

    /* The batch and its plan (radix always on, as `radixmlp bench` runs it; no padding). */
    size_t n_seqs = quick ? 8 : 32, prefix = quick ? 256 : 2048, suffix = quick ? 64 : 256;
    if (workload_shared_prefix(&g.w, n_seqs, prefix + suffix, prefix, 7) != 0)
        die("workload_shared_prefix", "out of memory");
    if (rmlp_planner_create(&g.planner) != RMLP_OK) die("rmlp_planner_create", rmlp_last_error());
    rmlp_plan_params params = rmlp_plan_default_params();
    params.threshold = 1.0;
    rmlp_plan plan;
    if (rmlp_plan_build(g.planner, g.w.input_ids, g.w.position_ids, g.w.n_tokens, g.w.cu_seqlens, g.w.n_seqs, &params,
                        &plan) != RMLP_OK)
        die("rmlp_plan_build", rmlp_last_error());

    /* One source for every configuration: its first rows x dim elements of the dtype. Bytes from a
     * counter hash, each 16-bit word's bit 14 cleared (no NaN or inf in f16, bf16 or f32). */
    size_t max_bytes = (size_t)plan.n_tokens * MAX_DIM * MAX_ELEM, flush_bytes = (size_t)prop.l2CacheSize * 2;
    g.h_src = malloc(max_bytes), g.h_dst = malloc(max_bytes);
    if (g.h_src == NULL || g.h_dst == NULL) die("malloc", "out of memory");
    for (size_t i = 0; i < max_bytes / 2; i++) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        uint16_t word = (uint16_t)((z >> 32) & 0xBFFFu);
        memcpy(g.h_src + 2 * i, &word, 2);
    }
    /* A blocking stream: it waits for the uploads done on the legacy default stream. */
    CUDA(cudaStreamCreate(&g.stream));
    for (int i = 0; i < REPS; i++) {
        CUDA(cudaEventCreate(&g.start[i]));
        CUDA(cudaEventCreate(&g.stop[i]));
    }
    CUDA(cudaMalloc((void **)&g.d_src, max_bytes));
    CUDA(cudaMalloc((void **)&g.d_dst, max_bytes));
    CUDA(cudaMalloc((void **)&g.d_copy, max_bytes));
    CUDA(cudaMalloc((void **)&g.d_flush, flush_bytes));
    CUDA(cudaMalloc((void **)&g.d_scatter, plan.n_tokens * sizeof(uint32_t)));
    CUDA(cudaMalloc((void **)&g.d_fold, plan.n_compact * sizeof(uint32_t)));
    CUDA(cudaMemcpy(g.d_src, g.h_src, max_bytes, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(g.d_scatter, plan.scatter, plan.n_tokens * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(g.d_fold, plan.fold_gather, plan.n_compact * sizeof(uint32_t), cudaMemcpyHostToDevice));

    if (!json)
        printf("device: %s; batch %zu x (%zu + %zu): n_tokens %u, n_compact %u\n"
               "%-4s %5s %-7s %7s %9s %11s %11s %6s\n",
               prop.name, n_seqs, prefix, suffix, plan.n_tokens, plan.n_compact, "type", "dim", "dir", "rows",
               "MB moved", "gather GB/s", "memcpy GB/s", "ratio");
    int failed = 0;
    for (size_t di = 0; di < COUNT(DTYPES); di++)
        for (size_t k = 0; k < COUNT(DIMS); k++)
            for (int fold = 0; fold < 2; fold++)
                failed |= run_config((int)di, DIMS[k], fold, &plan, prop.name, flush_bytes, json);
    cleanup();
    return failed;
}
