/*
 * test_cpu_sgemm.c: which library the fp32 GEMMs run (cpu/sgemm.h: rmlp_cpu_sgemm,
 * RADIX_MLP_CPU_SGEMM). The choice is made once per process, so each setting runs in a child
 * process forked before anything chose (the parent never multiplies):
 *   - a bad value: rmlp_cpu_sgemm and a model load both refused, naming the variable and value;
 *   - openblas, and onednn (where this build has oneDNN's header and libdnnl.so.2 loads; else
 *     RMLP_ERR_UNSUPPORTED saying why): the kind and the detail; cpu_sgemm_nt against a plain
 *     double product (1, 3, 37 rows; beta 0 and 1; a row stride wider than n); the tiny model in
 *     the four ways (forward_modes.h), radix on / compact / cache within 1e-5 of radix off;
 *   - auto: its kind agrees with its detail (oneDNN only where OpenBLAS's kernels are narrower
 *     than the CPU), NULL arguments refused;
 * then, in the parent, the tiny model's outputs through the two libraries within 1e-4.
 * Usage: test_cpu_sgemm
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bad_input_row.h"
#include "bench/tiny_model.h"
#include "cpu/sgemm.h"
#include "forward_modes.h"
#include "st_writer.h"
#include "test_util.h"

#define CAP 512
#define WAYS_TOL 1e-5    /* radix on / compact / cache vs radix off, one library: blockings only */
#define LIBRARIES_TOL 1e-4 /* OpenBLAS vs oneDNN: summation order through 2 layers */

static const rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 1000, .hidden_size = 64,
                                       .intermediate_size = 96, .num_hidden_layers = 2, .num_attention_heads = 4,
                                       .num_key_value_heads = 2, .head_dim = 16, .max_position_embeddings = 256,
                                       .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true,
                                       .tie_word_embeddings = true};

static void fill(float *a, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) a[i] = (float)((double)(tu_rand(rng) % 20001u) / 10000.0 - 1.0);
}

/* cpu_sgemm_nt on the chosen library against a double product. */
static void test_products(const char *lib) {
    enum { IN = 72, N = 40, LDY = 45, ROWS = 37 };
    uint64_t rng = 0x5E3;
    float *x = tu_xmalloc(ROWS * IN * sizeof(float)), *w = tu_xmalloc(N * IN * sizeof(float));
    float *y = tu_xmalloc(ROWS * LDY * sizeof(float)), *y0 = tu_xmalloc(ROWS * LDY * sizeof(float));
    fill(x, ROWS * IN, &rng), fill(w, N * IN, &rng), fill(y0, ROWS * LDY, &rng);
    static const size_t row_counts[] = {1, 3, ROWS};
    for (size_t i = 0; i < 3; i++)
        for (int beta = 0; beta < 2; beta++) {
            size_t rows = row_counts[i], ldy = rows == 1 ? N : LDY;
            memcpy(y, y0, ROWS * LDY * sizeof(float));
            cpu_sgemm_nt(x, rows, IN, w, N, (float)beta, y, ldy);
            double worst = 0.0, peak = 0.0;
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < ldy; c++) {
                    double want = y0[r * ldy + c]; /* columns past n stay as they were */
                    if (c < N) {
                        want = beta ? want : 0.0;
                        for (size_t k = 0; k < IN; k++) want += (double)x[r * IN + k] * w[c * IN + k];
                    }
                    double d = fabs(y[r * ldy + c] - want);
                    worst = d > worst || d != d ? d : worst;
                    peak = fabs(want) > peak ? fabs(want) : peak;
                }
            CHECK(worst <= 1e-5 * peak, "%s sgemm, %zu rows, beta %d: %.3g of %.3g off the double product", lib, rows,
                  beta, worst, peak);
        }
    free(x), free(w), free(y), free(y0);
}

/* The tiny model in dir, the four ways into out[mode] (n floats each), each within WAYS_TOL of
 * radix off. */
static void test_model(const char *dir, const tu_batch *b, const char *lib, float *out) {
    rmlp_model_params p = rmlp_model_default_params();
    rmlp_model *m = NULL;
    if (!CHECK(rmlp_model_load(dir, &p, &m) == RMLP_OK, "%s: load: %s", lib, rmlp_last_error())) return;
    size_t n = b->n_tokens * tiny.hidden_size;
    for (int mode = 0; mode < FM_MODES; mode++) {
        if (fm_forward(m, b, mode, CAP, out + mode * n) != 0 || mode == 0) continue;
        double ref = 0.0, d = tu_max_abs_diff(out + mode * n, out, n, &ref);
        CHECK(d <= WAYS_TOL * ref, "%s: %s vs radix off: %.3g of %.3g", lib, fm_mode_names[mode], d, ref);
    }
    CHECK(cpu_sgemm_fallbacks() == 0, "%s: %llu GEMMs fell back to OpenBLAS", lib,
          (unsigned long long)cpu_sgemm_fallbacks());
    rmlp_model_free(m);
}

static bool onednn_expected(char *why, size_t size) {
#ifdef RMLP_WITH_ONEDNN
    void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
        dlclose(lib);
        return true;
    }
    snprintf(why, size, "libdnnl.so.2 does not load here");
#else
    snprintf(why, size, "this build has no oneDNN");
#endif
    return false;
}

/* One child's checks under RADIX_MLP_CPU_SGEMM=env (NULL: unset); out: the model's outputs on b,
 * the four ways. */
static void child(const char *env, const char *dir, const tu_batch *b, float *out) {
    if (env != NULL) setenv("RADIX_MLP_CPU_SGEMM", env, 1);
    else unsetenv("RADIX_MLP_CPU_SGEMM");
    rmlp_cpu_sgemm_kind kind = -1;
    const char *detail = NULL;
    rmlp_status s = rmlp_cpu_sgemm(&kind, &detail);
    const char *label = env != NULL ? env : "auto";
    if (env != NULL && strcmp(env, "bogus") == 0) {
        const char *msg = rmlp_last_error();
        CHECK(s == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, "RADIX_MLP_CPU_SGEMM='bogus'") &&
                  strstr(msg, "rmlp_cpu_sgemm"),
              "bogus: status %d, \"%s\"", s, msg);
        tu_record_bad_input("RADIX_MLP_CPU_SGEMM=bogus", s, msg);
        rmlp_model_params p = rmlp_model_default_params();
        rmlp_model *m = NULL;
        s = rmlp_model_load(dir, &p, &m);
        msg = rmlp_last_error();
        CHECK(s == RMLP_ERR_INVALID_ARGUMENT && m == NULL && strstr(msg, "RADIX_MLP_CPU_SGEMM='bogus'") &&
                  strstr(msg, "rmlp_model_load"),
              "a load under bogus: status %d, \"%s\"", s, msg);
        tu_record_bad_input("RADIX_MLP_CPU_SGEMM=bogus, an fp32 model", s, msg);
        return;
    }
    char why[160] = "";
    if (env != NULL && strcmp(env, "onednn") == 0 && !onednn_expected(why, sizeof why)) {
        CHECK(s == RMLP_ERR_UNSUPPORTED && strstr(rmlp_last_error(), "cannot run"), "onednn without it: %d, \"%s\"", s,
              rmlp_last_error());
        printf("SKIP: oneDNN's sgemm: %s\n", why);
        return;
    }
    if (!CHECK(s == RMLP_OK, "%s: %s", label, rmlp_last_error())) return;
    printf("%s: %s\n", label, detail);
    if (env == NULL) {
        CHECK(strstr(detail, "auto") != NULL, "auto's detail: \"%s\"", detail);
        CHECK(kind == RMLP_CPU_SGEMM_OPENBLAS || (kind == RMLP_CPU_SGEMM_ONEDNN && strstr(detail, "this CPU runs AVX")),
              "auto: kind %d, \"%s\"", kind, detail);
        CHECK(rmlp_cpu_sgemm(NULL, &detail) == RMLP_ERR_INVALID_ARGUMENT &&
                  rmlp_cpu_sgemm(&kind, NULL) == RMLP_ERR_INVALID_ARGUMENT,
              "NULL arguments accepted");
        return;
    }
    bool onednn = strcmp(env, "onednn") == 0;
    CHECK(kind == (onednn ? RMLP_CPU_SGEMM_ONEDNN : RMLP_CPU_SGEMM_OPENBLAS) &&
              strstr(detail, onednn ? "oneDNN's sgemm" : "OpenBLAS's sgemm") && strstr(detail, env),
          "%s: kind %d, \"%s\"", env, kind, detail);
    test_products(env);
    test_model(dir, b, env, out);
}

int main(void) {
    char *root = stw_mkdtemp();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny", root);
    if (!CHECK(mkdir(dir, 0700) == 0 && tiny_model_write(dir, &tiny, 29) == 0, "writing %s", dir)) return tu_summary();
    uint64_t rng = 0x0DE;
    tu_batch_shape shape = {.n_seqs = 8, .max_len = 48, .vocab = 1000, .prefix_len = 24};
    tu_batch b = tu_random_batch(&rng, &shape);
    /* the children's outputs: radix off and the three other ways, for openblas [0] and onednn [1] */
    size_t n = b.n_tokens * tiny.hidden_size, bytes = 2 * FM_MODES * n * sizeof(float);
    float *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(shared != MAP_FAILED, "mmap of %zu bytes failed", bytes)) return tu_summary();
    memset(shared, 0, bytes);
    static const char *settings[] = {"bogus", "openblas", "onednn", NULL};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            child(settings[i], dir, &b, shared + (i == 2) * FM_MODES * n);
            printf("child %s: %d passed, %d failed\n", settings[i] ? settings[i] : "auto", tu_passed, tu_failed);
            fflush(stdout);
            _exit(tu_failed == 0 && tu_passed > 0 ? 0 : 1);
        }
        int ws = 0;
        bool waited = pid > 0 && waitpid(pid, &ws, 0) == pid;
        CHECK(waited && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child %s failed (wait status 0x%x): its lines above "
              "say why", settings[i] ? settings[i] : "auto", (unsigned)ws);
    }
    char why[160];
    if (onednn_expected(why, sizeof why)) {
        for (int mode = 0; mode < FM_MODES; mode++) {
            double ref = 0.0, d = tu_max_abs_diff(shared + mode * n, shared + (FM_MODES + mode) * n, n, &ref);
            CHECK(ref > 0.0 && d <= LIBRARIES_TOL * ref, "%s: OpenBLAS vs oneDNN %.3g of %.3g", fm_mode_names[mode],
                  d, ref);
            printf("%s: OpenBLAS vs oneDNN %.3g (relative %.2e)\n", fm_mode_names[mode], d, ref > 0 ? d / ref : 0.0);
        }
    }
    munmap(shared, bytes);
    tu_batch_free(&b);
    stw_rmtree(root);
    free(root);
    return tu_summary();
}
