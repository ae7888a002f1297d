/*
 * test_gpu_nonfinite.c: the check of a CUDA forward's output for infinities and NaN
 * (gpu/nonfinite.h), counted in rmlp_gpu_stats::nonfinite_outputs where a CPU forward returns
 * RMLP_ERR_MODEL:
 *   - the scan (gpu_nonfinite_scan) on planted values, f32, f16, bf16: the largest finite values
 *     pass; one count per scan however many elements are bad; the first bad element by index
 *     (NaN or +-infinity; in another block, in a later grid-stride sweep, in the tail past the
 *     last 16-byte vector, through the unaligned scalar path); a clean scan leaves the counter;
 *   - whole forwards on a model whose one weight of 3e38 (the final norm's element J) overflows
 *     exactly in the rows of token T (T's embedding holds 1 at J, every other token 0, and no
 *     layer writes column J: those rows of o_proj and down_proj are zero): the counter and the
 *     first row and element after rmlp_forward (batch row 8), rmlp_forward_compact (compact
 *     row 5), a prefix-cached forward, and a captured graph replayed twice (two more), the
 *     element also found in the downloaded output; rmlp_context_gpu_stats refused during the
 *     capture; the same model with a finite norm element counts nothing. In f16 the weight
 *     itself rounds to infinity, so every row is bad from row 0 (0 x inf is NaN).
 * The CPU forwards of both models are checked first (the overflowing rows named by
 * RMLP_ERR_MODEL, so the fixture is right); without a device the test then prints SKIP and
 * exits 77.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels.h"
#include "gpu/nonfinite.h"
#include "bench/tiny_model.h"
#include "test_util.h"
#include "gpu_test_util.h"

#define SKIP_CODE 77
#define HIDDEN 64u
#define J 5u /* the overflowing column */
#define T 9u /* the token whose rows overflow */

static const rmlp_dtype DTYPES[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
static const char *const DTYPE_NAMES[] = {"f32", "f16", "bf16"};

/* Three sequences, T at batch rows 8 and 11; compact rows in order of first occurrence: sequence
 * 1 shares 1, 2, 3 with sequence 0, so T's rows are compact rows 5 and 8. */
static const uint32_t IDS[12] = {1, 2, 3, 4, 5, 1, 2, 3, T, 6, 7, T}, POS[12] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1};
static const uint32_t CU[4] = {0, 5, 10, 12};
#define N_TOKENS 12u
#define FIRST_BATCH_ROW 8u
#define FIRST_COMPACT_ROW 5u

static cudaStream_t stream;

/* ---- the model -------------------------------------------------------------------------------- */

/* The float data of tensor `name` in a safetensors file image (bench/tiny_model.c's F32 layout). */
static float *tensor_data(unsigned char *file, size_t size, const char *name) {
    uint64_t header_len = 0;
    for (int b = 7; b >= 0; b--) header_len = header_len << 8 | file[b];
    char *header = tu_xmalloc(header_len + 1), key[160];
    memcpy(header, file + 8, header_len), header[header_len] = '\0';
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(header, key), *offsets = at ? strstr(at, "\"data_offsets\":[") : NULL;
    unsigned long long begin = 0, end = 0;
    int ok = offsets && sscanf(offsets, "\"data_offsets\":[%llu,%llu]", &begin, &end) == 2 &&
             8 + header_len + end <= size;
    free(header);
    if (!CHECK(ok, "tensor %s in the written checkpoint", name)) exit((tu_summary(), 1));
    return (float *)(file + 8 + header_len + begin);
}

/* Sets row `row` of a tensor of rows of `cols` floats to `value` (the data section starts 8-aligned
 * in the file image, so the floats are aligned). */
static void set_row(unsigned char *file, size_t size, const char *name, size_t cols, size_t row, float value) {
    float *t = tensor_data(file, size, name);
    for (size_t c = 0; c < cols; c++) t[row * cols + c] = value;
}

/* A random Llama model (tiny_model_write) in `dir` whose column J only T's rows reach the final
 * norm with: T's embedding holds 1 at J, every other token's 0, and each layer's o_proj and
 * down_proj rows J (the rows writing column J) are zero. The final norm's element J: norm_j. */
static int write_model(const char *dir, const rmlp_model_config *cfg, float norm_j) {
    if (tiny_model_write(dir, cfg, 11) != 0) return -1;
    char path[4096], name[96];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t size = 0;
    unsigned char *file = tu_read_file(path, &size);
    int ok = file != NULL && size > 8;
    if (!ok) {
        free(file);
        return -1;
    }
    float *embed = tensor_data(file, size, "model.embed_tokens.weight");
    for (uint32_t v = 0; v < cfg->vocab_size; v++) embed[(size_t)v * HIDDEN + J] = v == T ? 1.0f : 0.0f;
    for (uint32_t l = 0; l < cfg->num_hidden_layers; l++) {
        snprintf(name, sizeof name, "model.layers.%u.self_attn.o_proj.weight", l);
        set_row(file, size, name, (size_t)cfg->num_attention_heads * cfg->head_dim, J, 0.0f);
        snprintf(name, sizeof name, "model.layers.%u.mlp.down_proj.weight", l);
        set_row(file, size, name, cfg->intermediate_size, J, 0.0f);
    }
    tensor_data(file, size, "model.norm.weight")[J] = norm_j;
    FILE *f = fopen(path, "wb");
    ok = f != NULL && fwrite(file, 1, size, f) == size;
    if (f != NULL && fclose(f) != 0) ok = 0;
    free(file);
    return ok ? 0 : -1;
}

/* ---- the CPU forwards: the fixture overflows where the test says --------------------------------- */

/* The plan is main's: building another here would make it stale for the CUDA contexts after. */
static void test_cpu(const char *finite_dir, const char *overflow_dir, const rmlp_plan *plan) {
    for (int overflow = 0; overflow < 2; overflow++) {
        rmlp_model *model = NULL;
        rmlp_context *ctx = NULL;
        if (!CHECK(rmlp_model_load(overflow ? overflow_dir : finite_dir, NULL, &model) == RMLP_OK &&
                       rmlp_context_create(model, N_TOKENS, &ctx) == RMLP_OK,
                   "CPU model: %s", rmlp_last_error())) {
            rmlp_context_free(ctx), rmlp_model_free(model);
            continue;
        }
        float out[N_TOKENS * HIDDEN];
        for (int compact = 0; compact < 2; compact++) {
            rmlp_status status = tu_forward(ctx, plan, compact, out);
            char want[128];
            snprintf(want, sizeof want, "the output is not finite: %s row %u holds an infinity at element %u of %u",
                     compact ? "compact" : "batch", compact ? FIRST_COMPACT_ROW : FIRST_BATCH_ROW, J, HIDDEN);
            if (overflow)
                CHECK(status == RMLP_ERR_MODEL && strstr(rmlp_last_error(), want) != NULL,
                      "CPU %s forward of the overflowing model: status %d '%s', want '%s'",
                      compact ? "compact" : "batch-row", status, rmlp_last_error(), want);
            else
                CHECK(status == RMLP_OK, "CPU forward of the finite model: %s", rmlp_last_error());
        }
        rmlp_context_free(ctx), rmlp_model_free(model);
    }
}

/* ---- the scan on planted values ------------------------------------------------------------------- */

/* Every copy and scan of this part is on `stream`, which is non-blocking: it does not wait for the
 * legacy default stream, where cudaMemcpy from pageable memory may still be copying after it
 * returns (a scan then reads the previous contents). */
static gpu_nonfinite read_counter(const gpu_nonfinite *d_state) {
    gpu_nonfinite s;
    CUDA_MUST(cudaMemcpyAsync(&s, d_state, sizeof s, cudaMemcpyDeviceToHost, stream));
    CUDA_MUST(cudaStreamSynchronize(stream));
    return s;
}

/* Bits of dtype dt: the largest finite value, +infinity, a NaN. */
static uint32_t bits(rmlp_dtype dt, int which) {
    static const uint32_t F32[3] = {0x7F7FFFFFu, 0x7F800000u, 0x7FC00001u}, F16[3] = {0x7BFFu, 0x7C00u, 0x7E01u},
                          BF16[3] = {0x7F7Fu, 0x7F80u, 0x7FC1u};
    return dt == RMLP_DTYPE_F32 ? F32[which] : dt == RMLP_DTYPE_F16 ? F16[which] : BF16[which];
}

static void put(unsigned char *h, rmlp_dtype dt, size_t i, uint32_t b) {
    if (dt == RMLP_DTYPE_F32) memcpy(h + 4 * i, &b, 4);
    else h[2 * i] = (unsigned char)b, h[2 * i + 1] = (unsigned char)(b >> 8);
}

/* One scan of h (n elements; uploaded, scanned from element `from`: 1 is the unaligned scalar
 * path) that must count `want_hit` and then hold (row, col); clears the planted elements after. */
static void scan_case(const char *what, int di, unsigned char *h, void *d, size_t n, size_t from, uint32_t width,
                      gpu_nonfinite *d_state, uint64_t *outputs, int want_hit, size_t want_index) {
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt);
    gpu_nonfinite before = read_counter(d_state);
    CUDA_MUST(cudaMemcpyAsync(d, h, n * es, cudaMemcpyHostToDevice, stream));
    cudaError_t error = gpu_nonfinite_scan((const char *)d + from * es, n - from, width, dt, d_state, stream);
    CHECK(error == cudaSuccess, "%s %s: launch: %s", DTYPE_NAMES[di], what, cudaGetErrorString(error));
    gpu_nonfinite s = read_counter(d_state);
    *outputs += want_hit != 0;
    uint32_t row = want_hit ? (uint32_t)((want_index - from) / width) : before.row;
    uint32_t col = want_hit ? (uint32_t)((want_index - from) % width) : before.col;
    CHECK(s.outputs == *outputs && s.row == row && s.col == col && s.pending == 0 && s.blocks_done == 0,
          "%s %s: counter %llu at (%u, %u), pending %llu, blocks %u; want %llu at (%u, %u)", DTYPE_NAMES[di], what,
          s.outputs, s.row, s.col, s.pending, s.blocks_done, (unsigned long long)*outputs, row, col);
}

static void test_scan(void) {
    /* 50001 rows of 61: 3050061 elements, more than a grid's sweep (1024 blocks x 256 threads x
     * up to 8 elements per access) and not a multiple of 8 (a tail past the last vector) */
    const uint32_t width = 61;
    const size_t n = 50001u * width;
    for (int di = 0; di < 3; di++) {
        rmlp_dtype dt = DTYPES[di];
        size_t es = elem_size(dt), sweep = 1024u * 256u * (16 / es);
        uint32_t sign = 1u << (8 * es - 1), largest = bits(dt, 0);
        unsigned char *h = tu_xmalloc(n * es);
        for (size_t i = 0; i < n; i++) put(h, dt, i, i % 3 == 0 ? largest : i % 3 == 1 ? largest | sign : 0);
        void *d = dev_alloc(n * es);
        gpu_nonfinite *d_state = dev_alloc(sizeof(gpu_nonfinite));
        CUDA_MUST(cudaMemsetAsync(d_state, 0, sizeof(gpu_nonfinite), stream));
        uint64_t outputs = 0;
        scan_case("largest finite values", di, h, d, n, 0, width, d_state, &outputs, 0, 0);
        struct {
            const char *what;
            size_t at[3];  /* planted (n: none) */
            int kind[3];   /* 1 +inf, 2 NaN, 3 -inf */
            size_t from;   /* 1: the unaligned path */
            size_t first;  /* the index the counter must show */
        } cases[] = {
            {"NaN after an infinity in another block", {3 * 256 * 4 + 7, 100, n}, {1, 2, 0}, 0, 100},
            {"a later grid-stride sweep", {5 + sweep, n - 3, n}, {3, 1, 0}, 0, 5 + sweep},
            {"the last element (the tail)", {n - 1, n, n}, {2, 0, 0}, 0, n - 1},
            {"the unaligned scalar path", {n - 2, 70001, 2}, {1, 3, 2}, 1, 2},
            {"element 0 only", {0, n, n}, {3, 0, 0}, 0, 0},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            unsigned char saved[3][4] = {{0}};
            for (int k = 0; k < 3; k++)
                if (cases[c].at[k] < n) {
                    memcpy(saved[k], h + cases[c].at[k] * es, es);
                    int kind = cases[c].kind[k];
                    put(h, dt, cases[c].at[k], bits(dt, kind == 2 ? 2 : 1) | (kind == 3 ? sign : 0));
                }
            scan_case(cases[c].what, di, h, d, n, cases[c].from, width, d_state, &outputs, 1, cases[c].first);
            for (int k = 0; k < 3; k++)
                if (cases[c].at[k] < n) memcpy(h + cases[c].at[k] * es, saved[k], es);
            scan_case("clean again (the counter and the latest place stay)", di, h, d, n, 0, width, d_state, &outputs,
                      0, 0);
        }
        CHECK(gpu_nonfinite_scan(d, n, 0, dt, d_state, stream) == cudaErrorInvalidValue, "width 0 is refused");
        printf("scan %s: %llu scans found their first non-finite element\n", DTYPE_NAMES[di],
               (unsigned long long)outputs);
        cudaFree(d), cudaFree(d_state), free(h);
    }
}

/* ---- whole forwards -------------------------------------------------------------------------------- */

/* The counter after a forward: `want` forwards in all, the latest's first bad element at (row, J);
 * and the downloaded output's first non-finite element where the counter says (rows of out). */
static void expect_counted(const char *what, rmlp_context *ctx, const void *d_out, size_t rows, rmlp_dtype dt,
                           uint64_t want, uint32_t row) {
    rmlp_gpu_stats s = gpu_stats_of(ctx);
    CHECK(s.nonfinite_outputs == want && (want == 0 || (s.nonfinite_row == row && s.nonfinite_col == J)),
          "%s: nonfinite_outputs %llu at (%u, %u); want %llu at (%u, %u)", what,
          (unsigned long long)s.nonfinite_outputs, s.nonfinite_row, s.nonfinite_col, (unsigned long long)want, row, J);
    if (rows == 0) return;
    float *out = download_as(d_out, rows * HIDDEN, dt);
    size_t first = 0;
    while (first < rows * HIDDEN && isfinite(out[first])) first++;
    size_t want_first = want == 0 ? rows * HIDDEN : (size_t)row * HIDDEN + J;
    CHECK(first == want_first && (want == 0 || first == (size_t)s.nonfinite_row * HIDDEN + s.nonfinite_col),
          "%s: the output's first non-finite element is %zu (of %zu), want %zu; the counter says %u x %u + %u", what,
          first, rows * HIDDEN, want_first, s.nonfinite_row, HIDDEN, s.nonfinite_col);
    printf("  %-60s nonfinite_outputs %llu, first at (%u, %u)\n", what, (unsigned long long)s.nonfinite_outputs,
           s.nonfinite_row, s.nonfinite_col);
    free(out);
}

static rmlp_context *make_context(rmlp_model *model, uint64_t cache_bytes, const rmlp_plan *plan) {
    rmlp_context_params params = rmlp_context_default_params();
    params.cache_bytes = cache_bytes;
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create_with_params(model, N_TOKENS, &params, &ctx);
    if (status == RMLP_OK) status = rmlp_context_set_stream(ctx, stream);
    if (status == RMLP_OK) status = rmlp_context_set_plan(ctx, plan);
    if (CHECK(status == RMLP_OK, "context: %s", rmlp_last_error())) return ctx;
    rmlp_context_free(ctx);
    return NULL;
}

static void test_forwards(const char *dir, int overflow, int di, const rmlp_plan *plan) {
    rmlp_dtype dt = DTYPES[di];
    rmlp_model_params mp = rmlp_model_default_params();
    mp.device = RMLP_DEVICE_CUDA, mp.dtype = dt;
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(dir, &mp, &model) == RMLP_OK, "load %s: %s", DTYPE_NAMES[di], rmlp_last_error())) return;
    printf("%s model, %s:\n", overflow ? "overflowing" : "finite", DTYPE_NAMES[di]);
    /* f16: the weight itself is infinite, and 0 x inf is NaN in every other row */
    bool f16 = dt == RMLP_DTYPE_F16;
    uint32_t batch_row = f16 ? 0 : FIRST_BATCH_ROW, compact_row = f16 ? 0 : FIRST_COMPACT_ROW;
    uint64_t one = overflow ? 1 : 0;
    void *d_out = dev_alloc(N_TOKENS * HIDDEN * elem_size(dt));
    rmlp_context *ctx = make_context(model, 0, plan);
    if (ctx != NULL) {
        expect_counted("a new context", ctx, d_out, 0, dt, 0, 0);
        CHECK(rmlp_forward(ctx, plan, NULL, NULL, d_out) == RMLP_OK, "forward: %s", rmlp_last_error());
        expect_counted("rmlp_forward", ctx, d_out, N_TOKENS, dt, one, batch_row);
        CHECK(rmlp_forward_compact(ctx, plan, NULL, NULL, d_out) == RMLP_OK, "compact: %s", rmlp_last_error());
        expect_counted("rmlp_forward_compact", ctx, d_out, plan->n_compact, dt, 2 * one, compact_row);
        /* captured: the check is part of the graph, and each replay counts */
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        CUDA_MUST(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        rmlp_status captured = rmlp_forward(ctx, plan, NULL, NULL, d_out);
        rmlp_gpu_stats s;
        memset(&s, 0, sizeof s);
        s.struct_size = sizeof s;
        rmlp_status during = rmlp_context_gpu_stats(ctx, &s);
        CHECK(during == RMLP_ERR_INVALID_ARGUMENT && strstr(rmlp_last_error(), "capturing a graph") != NULL,
              "rmlp_context_gpu_stats during a capture: status %d '%s'", during, rmlp_last_error());
        cudaError_t end = cudaStreamEndCapture(stream, &graph);
        if (CHECK(captured == RMLP_OK && end == cudaSuccess, "capture: %d, end %s", captured,
                  cudaGetErrorString(end))) {
            CUDA_MUST(cudaGraphInstantiate(&exec, graph, 0));
            CUDA_MUST(cudaGraphLaunch(exec, stream));
            CUDA_MUST(cudaGraphLaunch(exec, stream));
            expect_counted("a captured rmlp_forward, replayed twice", ctx, d_out, N_TOKENS, dt, 4 * one, batch_row);
            cudaGraphExecDestroy(exec);
        }
        if (graph != NULL) cudaGraphDestroy(graph);
    }
    rmlp_context_free(ctx);
    ctx = make_context(model, 1u << 20, plan);
    if (ctx != NULL) {
        for (int k = 1; k <= 2; k++) { /* the second from the cache's slots only */
            CHECK(rmlp_forward(ctx, plan, NULL, NULL, d_out) == RMLP_OK, "cached: %s", rmlp_last_error());
            expect_counted(k == 1 ? "rmlp_forward through the prefix cache" : "again, every row cached", ctx, d_out,
                           N_TOKENS, dt, k * one, batch_row);
        }
    }
    rmlp_context_free(ctx);
    cudaFree(d_out);
    rmlp_model_free(model);
}

int main(void) {
    rmlp_model_config cfg = {.architecture = RMLP_ARCH_LLAMA, .vocab_size = 32, .hidden_size = HIDDEN,
                             .intermediate_size = 96, .num_hidden_layers = 2, .num_attention_heads = 4,
                             .num_key_value_heads = 2, .head_dim = 16, .max_position_embeddings = 128,
                             .rms_norm_eps = 1e-6, .rope_theta = 1e4};
    char finite_dir[] = "/tmp/test_gpu_nonfinite-XXXXXX", overflow_dir[] = "/tmp/test_gpu_nonfinite-XXXXXX";
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params pp = tu_params(1.0, 0);
    if (!CHECK(mkdtemp(finite_dir) != NULL && mkdtemp(overflow_dir) != NULL &&
                   write_model(finite_dir, &cfg, 1.0f) == 0 && write_model(overflow_dir, &cfg, 3e38f) == 0 &&
                   rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, IDS, POS, N_TOKENS, CU, 3, &pp, &plan) == RMLP_OK,
               "writing the models: %s", rmlp_last_error()))
        return tu_summary();
    CHECK(plan.n_compact == 9, "the plan has %u compact rows, want 9", plan.n_compact);
    test_cpu(finite_dir, overflow_dir, &plan);
    struct cudaDeviceProp prop;
    int device = gpu_test_device(&prop);
    if (device) {
        CUDA_MUST(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        test_scan();
        for (int di = 0; di < 3; di++) {
            test_forwards(finite_dir, 0, di, &plan);
            test_forwards(overflow_dir, 1, di, &plan);
        }
        CUDA_MUST(cudaStreamDestroy(stream));
    }
    rmlp_planner_free(planner);
    tiny_model_remove(finite_dir), tiny_model_remove(overflow_dir);
    if (!device) {
        printf("SKIP: the GPU checks need a device (%d device-free checks passed)\n", tu_passed);
        return tu_failed ? 1 : SKIP_CODE;
    }
    return tu_summary();
}
