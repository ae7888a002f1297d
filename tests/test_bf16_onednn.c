/*
 * test_bf16_onednn.c: oneDNN's bf16 GEMMs for bf16-weight CPU models (cpu/linear_onednn.h, the
 * choice of cpu/bf16_gemm.h: rmlp_model_params::cpu_bf16_gemm, RADIX_MLP_CPU_BF16_GEMM,
 * rmlp_model_cpu_bf16_gemm).
 * On every CPU, in a build with oneDNN's header:
 *   - the plumbing: onednn_f32_matmul, the same descriptors, memories, stream and arguments as the
 *     bf16 GEMM with fp32 operands (which oneDNN runs everywhere), against a plain product: 1, 3
 *     and 37 rows, with and without bias. In a child process that leaves with _exit: once oneDNN's
 *     OpenMP threads exist, LeakSanitizer (gcc 12's) crashes at exit reading their dynamic TLS, so
 *     the parent, which never loads oneDNN on a CPU without bf16 instructions, keeps its leak check
 *     (where the CPU has them, an ASan build runs on one thread, oneDNN's OpenMP included, for the same
 *     reason);
 *   - the choice: an fp32 model answers NONE; a bf16 model by default ONEDNN where this CPU runs
 *     bf16 in hardware (the detail says how to widen instead), else WIDEN (the detail says why
 *     not oneDNN); WIDEN when asked (by the params or the variable); asked for ONEDNN, ONEDNN
 *     where this CPU runs bf16 in hardware, else RMLP_ERR_UNSUPPORTED saying why; a
 *     bad variable, an unknown value and a value for fp32 weights are refused by name.
 * Where the CPU runs bf16 in hardware (elsewhere a SKIP line says so):
 *   - a bf16 x bf16 GEMM against the widening path on the same rounded x (1e-5 of the largest
 *     value: summation order only), and x's rounding happens (it differs from the unrounded x);
 *   - the tiny model on oneDNN against the widening path within ONEDNN_VS_WIDEN, radix off, on,
 *     compact and through the prefix cache, each way within 1e-4 of the others, no fallbacks;
 *   - the transformers fixtures within ONEDNN_VS_TRANSFORMERS.
 * Usage: test_bf16_onednn FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bad_input_row.h"
#include "cpu/linear_bf16.h"
#include "cpu/linear_onednn.h"
#include "forward_modes.h"
#include "model/weights_bf16.h"
#include "st_writer.h"
#include "test_util.h"
#include "bench/tiny_model.h"

/* The stated tolerances (docs/backends.md#bf16-weights-on-the-cpu), max abs error over the
 * largest value: the activations rounded to bf16 too, each GEMM's input within 2^-9 relative. */
#define ONEDNN_VS_WIDEN 2e-2
#define ONEDNN_VS_TRANSFORMERS 3e-2
#define ONEDNN_WAYS 1e-4 /* radix off / on / compact / cache: other row counts, other blockings */
#define CAP 512

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void fill(float *a, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) a[i] = (float)((double)(tu_rand(rng) % 20001u) / 10000.0 - 1.0);
}

#ifdef RMLP_WITH_ONEDNN /* the plumbing check: in builds with oneDNN's header (main says SKIP elsewhere) */
static void plain_product(const float *x, size_t rows, size_t in, const float *w, const float *bias, size_t out,
                          float *y) {
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double s = bias ? bias[o] : 0.0;
            for (size_t k = 0; k < in; k++) s += (double)x[r * in + k] * w[o * in + k];
            y[r * out + o] = (float)s;
        }
}

static void test_plumbing(void) {
    enum { IN = 48, OUT = 80, ROWS = 37 };
    uint64_t rng = 0x0DD11;
    float *x = tu_xmalloc(ROWS * IN * sizeof(float)), *w = tu_xmalloc(OUT * IN * sizeof(float));
    float *bias = tu_xmalloc(OUT * sizeof(float)), *got = tu_xmalloc(ROWS * OUT * sizeof(float));
    float *want = tu_xmalloc(ROWS * OUT * sizeof(float));
    fill(x, ROWS * IN, &rng), fill(w, OUT * IN, &rng), fill(bias, OUT, &rng);
    static const size_t row_counts[] = {1, 3, ROWS};
    for (size_t i = 0; i < 3; i++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            size_t rows = row_counts[i];
            char why[300] = "";
            memset(got, 0xff, ROWS * OUT * sizeof(float)); /* NaN: every element must be written */
            int s = onednn_f32_matmul(x, rows, IN, w, with_bias ? bias : NULL, OUT, got, why, sizeof why);
            if (!CHECK(s == 0, "oneDNN f32 matmul, %zu rows: %s", rows, why)) continue;
            plain_product(x, rows, IN, w, with_bias ? bias : NULL, OUT, want);
            double ref = 0.0, d = tu_max_abs_diff(got, want, rows * OUT, &ref);
            CHECK(d <= 1e-5 * ref, "oneDNN f32 matmul, %zu rows, bias %d: %.3g of %.3g off the plain product", rows,
                  with_bias, d, ref);
        }
    free(x), free(w), free(bias), free(got), free(want);
}
#endif

/* The hardware GEMM against the widening path on the same rounded x. */
static void test_gemm(void) {
    enum { IN = 96, OUT = 160, ROWS = 37 };
    uint64_t rng = 0xBF16BF16;
    float *x = tu_xmalloc(ROWS * IN * sizeof(float)), *xr = tu_xmalloc(ROWS * IN * sizeof(float));
    float *wf = tu_xmalloc(OUT * IN * sizeof(float)), *bias = tu_xmalloc(OUT * sizeof(float));
    float *got = tu_xmalloc(ROWS * OUT * sizeof(float)), *want = tu_xmalloc(ROWS * OUT * sizeof(float));
    float *unrounded = tu_xmalloc(ROWS * OUT * sizeof(float));
    float *wide = tu_xmalloc(cpu_linear_bf16_scratch_floats(IN, OUT) * sizeof(float));
    uint16_t *w = tu_xmalloc(OUT * IN * sizeof(uint16_t)), *x16 = tu_xmalloc(ROWS * IN * sizeof(uint16_t));
    fill(x, ROWS * IN, &rng), fill(wf, OUT * IN, &rng), fill(bias, OUT, &rng);
    for (size_t i = 0; i < OUT * IN; i++) w[i] = weights_f32_to_bf16(wf[i]);
    for (size_t i = 0; i < ROWS * IN; i++) xr[i] = from_bits((uint32_t)weights_f32_to_bf16(x[i]) << 16);
    int s = cpu_linear_onednn(x, ROWS, IN, w, bias, OUT, got, x16, NULL);
    if (CHECK(s == 0, "cpu_linear_onednn: dnnl status %d", s)) {
        cpu_linear_bf16(xr, ROWS, IN, w, bias, OUT, want, wide, NULL);
        cpu_linear_bf16(x, ROWS, IN, w, bias, OUT, unrounded, wide, NULL);
        double ref = 0.0, d = tu_max_abs_diff(got, want, ROWS * OUT, &ref);
        double apart = tu_max_abs_diff(got, unrounded, ROWS * OUT, NULL);
        CHECK(d <= 1e-5 * ref, "oneDNN bf16 GEMM vs widening on the rounded x: %.3g of %.3g", d, ref);
        CHECK(apart > 10 * d && apart <= ONEDNN_VS_WIDEN * ref, "x was not rounded to bf16? %.3g off the unrounded "
              "x's product (vs %.3g off the rounded x's)", apart, d);
        printf("bf16 GEMM (%d x %d x %d): vs widening on rounded x %.3g, on x %.3g, of %.3g\n", ROWS, IN, OUT, d, apart,
               ref);
    }
    free(x), free(xr), free(wf), free(bias), free(got), free(want), free(unrounded), free(wide), free(w), free(x16);
}

static rmlp_model *load(const char *dir, rmlp_dtype weights, rmlp_cpu_bf16_gemm gemm, rmlp_status *status) {
    rmlp_model_params p = rmlp_model_default_params();
    p.cpu_weight_dtype = weights;
    p.cpu_bf16_gemm = gemm;
    rmlp_model *m = NULL;
    *status = rmlp_model_load(dir, &p, &m);
    return m;
}

static rmlp_cpu_bf16_gemm kind_of(const rmlp_model *m, const char **detail) {
    rmlp_cpu_bf16_gemm k = -1;
    uint64_t fallbacks = 99;
    CHECK(rmlp_model_cpu_bf16_gemm(m, &k, &fallbacks, detail) == RMLP_OK && fallbacks == 0,
          "rmlp_model_cpu_bf16_gemm: %s (fallbacks %llu)", rmlp_last_error(), (unsigned long long)fallbacks);
    return k;
}

/* Loads dir with bf16 weights under `env` (NULL: unset) and params `gemm`: the status, and the kind. */
static rmlp_status load_with_env(const char *dir, const char *env, rmlp_cpu_bf16_gemm gemm, rmlp_cpu_bf16_gemm *kind,
                                 const char **msg) {
    if (env != NULL) setenv("RADIX_MLP_CPU_BF16_GEMM", env, 1);
    else unsetenv("RADIX_MLP_CPU_BF16_GEMM");
    rmlp_status status;
    rmlp_model *m = load(dir, RMLP_DTYPE_BF16, gemm, &status);
    *msg = rmlp_last_error();
    *kind = m != NULL ? kind_of(m, NULL) : -1;
    rmlp_model_free(m);
    unsetenv("RADIX_MLP_CPU_BF16_GEMM");
    return status;
}

static void test_choice(const char *dir, bool hardware, const char *why_not) {
    rmlp_status status;
    const char *detail = NULL, *msg = NULL;
    rmlp_cpu_bf16_gemm k;
    rmlp_model *f32 = load(dir, RMLP_DTYPE_F32, RMLP_CPU_BF16_GEMM_AUTO, &status);
    if (CHECK(f32 != NULL, "fp32 load: %s", rmlp_last_error()))
        CHECK(kind_of(f32, &detail) == RMLP_CPU_BF16_GEMM_NONE && strstr(detail, "no bf16"), "fp32 model: \"%s\"",
              detail);
    rmlp_model_free(f32);
    CHECK(rmlp_model_cpu_bf16_gemm(NULL, &k, NULL, NULL) == RMLP_ERR_INVALID_ARGUMENT, "NULL model accepted");

    rmlp_model *m = load(dir, RMLP_DTYPE_BF16, RMLP_CPU_BF16_GEMM_AUTO, &status);
    if (CHECK(m != NULL, "bf16 load: %s", rmlp_last_error())) {
        k = kind_of(m, &detail);
        if (hardware) /* oneDNN where it runs, saying how to widen instead */
            CHECK(k == RMLP_CPU_BF16_GEMM_ONEDNN && strstr(detail, "the default (auto)") &&
                      strstr(detail, "RADIX_MLP_CPU_BF16_GEMM=widen"),
                  "the default: kind %d, \"%s\"", k, detail);
        else /* elsewhere the widening path, saying why not oneDNN */
            CHECK(k == RMLP_CPU_BF16_GEMM_WIDEN && strstr(detail, "the default (auto)") && strstr(detail, "cannot run") &&
                      strstr(detail, why_not),
                  "the default: kind %d, \"%s\" (oneDNN cannot run: %s)", k, detail, why_not);
        printf("default GEMM of a bf16 model: %s\n", detail);
    }
    rmlp_model_free(m);

    status = load_with_env(dir, NULL, RMLP_CPU_BF16_GEMM_WIDEN, &k, &msg);
    CHECK(status == RMLP_OK && k == RMLP_CPU_BF16_GEMM_WIDEN, "params WIDEN: %d, kind %d, %s", status, k, msg);
    status = load_with_env(dir, "widen", RMLP_CPU_BF16_GEMM_AUTO, &k, &msg);
    CHECK(status == RMLP_OK && k == RMLP_CPU_BF16_GEMM_WIDEN, "variable widen: %d, kind %d, %s", status, k, msg);
    status = load_with_env(dir, "onednn", RMLP_CPU_BF16_GEMM_WIDEN, &k, &msg);
    CHECK(status == RMLP_OK && k == RMLP_CPU_BF16_GEMM_WIDEN, "params WIDEN over the variable: %d, kind %d", status, k);
    for (int via_env = 0; via_env < 2; via_env++) {
        status = load_with_env(dir, via_env ? "onednn" : NULL, via_env ? RMLP_CPU_BF16_GEMM_AUTO
                                                                       : RMLP_CPU_BF16_GEMM_ONEDNN, &k, &msg);
        if (hardware)
            CHECK(status == RMLP_OK && k == RMLP_CPU_BF16_GEMM_ONEDNN, "oneDNN asked for (%s): %d, kind %d, %s",
                  via_env ? "variable" : "params", status, k, msg);
        else
            CHECK(status == RMLP_ERR_UNSUPPORTED && strstr(msg, via_env ? "RADIX_MLP_CPU_BF16_GEMM=onednn asks"
                                                                        : "params->cpu_bf16_gemm=RMLP_CPU_BF16_GEMM_ONEDNN asks") &&
                      strstr(msg, "cannot run") && strstr(msg, why_not),
                  "oneDNN asked for without it (%s): status %d, \"%s\"", via_env ? "variable" : "params", status, msg);
    }
    status = load_with_env(dir, "amx", RMLP_CPU_BF16_GEMM_AUTO, &k, &msg);
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, "RADIX_MLP_CPU_BF16_GEMM='amx' is not auto, widen or onednn"),
          "a bad variable: status %d, \"%s\"", status, msg);
    tu_record_bad_input("RADIX_MLP_CPU_BF16_GEMM=amx, bf16 weights", status, msg);

    static const struct {
        rmlp_dtype weights;
        rmlp_cpu_bf16_gemm gemm;
        const char *name, *says;
    } refused[] = {
        {RMLP_DTYPE_BF16, 7, "cpu_bf16_gemm 7", "params->cpu_bf16_gemm=7 is not"},
        {RMLP_DTYPE_F32, RMLP_CPU_BF16_GEMM_ONEDNN, "cpu_bf16_gemm ONEDNN, fp32 weights",
         "params->cpu_bf16_gemm=RMLP_CPU_BF16_GEMM_ONEDNN applies to bf16 weight matrices only"},
        {RMLP_DTYPE_F32, RMLP_CPU_BF16_GEMM_WIDEN, "cpu_bf16_gemm WIDEN, fp32 weights",
         "params->cpu_bf16_gemm=RMLP_CPU_BF16_GEMM_WIDEN applies to bf16 weight matrices only"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        m = load(dir, refused[i].weights, refused[i].gemm, &status);
        msg = rmlp_last_error();
        CHECK(status == RMLP_ERR_INVALID_ARGUMENT && m == NULL && strstr(msg, refused[i].says), "%s: status %d, \"%s\"",
              refused[i].name, status, msg);
        tu_record_bad_input(refused[i].name, status, msg);
        rmlp_model_free(m);
    }
}

/* The tiny model on oneDNN against the widening path, way by way. */
static void test_model(const char *dir, size_t hidden) {
    rmlp_status status;
    rmlp_model *hw = load(dir, RMLP_DTYPE_BF16, RMLP_CPU_BF16_GEMM_ONEDNN, &status);
    rmlp_model *widen = load(dir, RMLP_DTYPE_BF16, RMLP_CPU_BF16_GEMM_WIDEN, &status);
    if (!CHECK(hw != NULL && widen != NULL, "loads: %s", rmlp_last_error())) goto done;
    uint64_t rng = 0x0DE;
    tu_batch_shape shape = {.n_seqs = 8, .max_len = 48, .vocab = 1000, .prefix_len = 24};
    tu_batch b = tu_random_batch(&rng, &shape);
    size_t n = b.n_tokens * hidden;
    float *ways[FM_MODES], *want = tu_xmalloc(n * sizeof(float));
    for (int mode = 0; mode < FM_MODES; mode++) {
        ways[mode] = tu_xmalloc(n * sizeof(float));
        if (fm_forward(hw, &b, mode, CAP, ways[mode]) != 0 || fm_forward(widen, &b, mode, CAP, want) != 0) continue;
        double ref = 0.0, d = tu_max_abs_diff(ways[mode], want, n, &ref);
        CHECK(d <= ONEDNN_VS_WIDEN * ref, "%s: oneDNN vs widening %.3g of %.3g", fm_mode_names[mode], d, ref);
        double off = mode == 0 ? 0.0 : tu_max_abs_diff(ways[mode], ways[0], n, NULL);
        CHECK(off <= ONEDNN_WAYS * ref, "%s vs radix off, both on oneDNN: %.3g of %.3g", fm_mode_names[mode], off, ref);
        printf("%s: oneDNN vs widening %.3g (relative %.2e), vs radix off %.3g\n", fm_mode_names[mode], d, d / ref, off);
    }
    uint64_t fallbacks = 99;
    rmlp_cpu_bf16_gemm k;
    CHECK(rmlp_model_cpu_bf16_gemm(hw, &k, &fallbacks, NULL) == RMLP_OK && fallbacks == 0, "%llu GEMMs fell back",
          (unsigned long long)fallbacks);
    for (int mode = 0; mode < FM_MODES; mode++) free(ways[mode]);
    free(want);
    tu_batch_free(&b);
done:
    rmlp_model_free(hw), rmlp_model_free(widen);
}

static rmlp_model *load_onednn(const char *path) {
    rmlp_status status;
    rmlp_model *m = load(path, RMLP_DTYPE_BF16, RMLP_CPU_BF16_GEMM_ONEDNN, &status);
    CHECK(m != NULL, "%s: %s", path, rmlp_last_error());
    return m;
}

static void check_fixture(const char *name, double d, double ref) {
    CHECK(d <= ONEDNN_VS_TRANSFORMERS * ref, "%s: oneDNN bf16 vs transformers: %.3g of %.3g", name, d, ref);
    printf("%s: oneDNN bf16 vs transformers fp32: max abs %.3g, relative %.2e\n", name, d, d / ref);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_bf16_onednn FIXTURES_DIR\n");
        return 2;
    }
    unsetenv("RADIX_MLP_CPU_BF16_GEMM");
#ifdef __SANITIZE_ADDRESS__
    /* gcc 12's LeakSanitizer crashes at exit reading the dynamic TLS of OpenMP's threads, which
     * oneDNN starts (as many as rmlp_cpu_threads) where the CPU runs bf16; on one thread the whole
     * test stays under the leak check (the plain build runs the machine's thread count). */
    CHECK(rmlp_set_cpu_threads(1) == RMLP_OK, "rmlp_set_cpu_threads(1): %s", rmlp_last_error());
#endif
    char what[128] = "", why_not[300] = "";
    bool hardware = onednn_bf16_probe(true, what, sizeof what, why_not, sizeof why_not);
#ifdef RMLP_WITH_ONEDNN
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        test_plumbing();
        printf("plumbing (child): %d passed, %d failed\n", tu_passed, tu_failed);
        fflush(stdout);
        _exit(tu_failed == 0 && tu_passed > 0 ? 0 : 1);
    }
    int wstatus = 0;
    bool waited = child > 0 && waitpid(child, &wstatus, 0) == child;
    CHECK(waited && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
          "the plumbing check's child failed (fork %d, wait status 0x%x): its lines above say why", (int)child,
          (unsigned)wstatus);
#else
    printf("SKIP: the plumbing check: this build has no oneDNN (libdnnl-dev's header was not found, or "
           "RMLP_ONEDNN=OFF)\n");
#endif
    char *root = stw_mkdtemp();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny", root);
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 1000, .hidden_size = 64,
                              .intermediate_size = 96, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .head_dim = 16, .max_position_embeddings = 256,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true, .tie_word_embeddings = true};
    if (CHECK(mkdir(dir, 0700) == 0 && tiny_model_write(dir, &tiny, 23) == 0, "writing %s", dir)) {
        test_choice(dir, hardware, why_not);
        if (hardware) {
            printf("bf16 in hardware: %s\n", what);
            test_gemm();
            test_model(dir, tiny.hidden_size);
        }
    }
    stw_rmtree(root);
    free(root);
    if (hardware) fm_each_fixture(argv[1], load_onednn, CAP, check_fixture);
    else printf("SKIP: oneDNN's bf16 GEMMs, on a model and on the fixtures: %s\n", why_not);
    return tu_summary();
}
