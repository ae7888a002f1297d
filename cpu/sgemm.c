/*
 * sgemm.c: sgemm.h. The choice compares the ISA of OpenBLAS's kernels (its core's name) with the
 * widest this CPU runs (cpuid and the OS's saved state, through __builtin_cpu_supports): AVX-512,
 * AVX2 + FMA, or less. auto keeps OpenBLAS unless its kernels are narrower than the CPU, and then
 * takes oneDNN where oneDNN's own ISA covers the CPU's and its sgemm agrees with OpenBLAS's on a
 * fixed product; otherwise OpenBLAS, the detail saying why and how to give it the right kernels.
 */
#include "sgemm.h"

#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/status.h"
#include "linear_onednn.h"

#define ENV "RADIX_MLP_CPU_SGEMM"

static struct {
    rmlp_status code; /* RMLP_OK, or why every cpu_sgemm_choose fails */
    rmlp_cpu_sgemm_kind kind;
    char detail[1024]; /* the detail, or the failure's message */
} chosen = {RMLP_OK, RMLP_CPU_SGEMM_OPENBLAS, ""};
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t fallbacks;

static const char *level_name[] = {"less than AVX2 + FMA", "AVX2 + FMA", "AVX-512"};

/* The widest this CPU runs, as the level_name index. */
static int cpu_level(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
    return 0;
}

/* The ISA of OpenBLAS's kernels for a core name (openblas_get_corename), as the level_name index. */
static int openblas_level(const char *core) {
    static const char *avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    static const char *avx2[] = {"haswell", "zen"};
    char low[32] = "";
    for (size_t i = 0; core[i] != '\0' && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)core[i]);
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        if (strcmp(low, avx512[i]) == 0) return 2;
    for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
        if (strcmp(low, avx2[i]) == 0) return 1;
    return 0;
}

/* oneDNN's sgemm against OpenBLAS's on a fixed 9 x 40 x 24 product, within 1e-5 of its largest
 * value (summation order only). */
static bool onednn_agrees(char *why, size_t why_size) {
    enum { M = 9, K = 40, N = 24 };
    float x[M * K], w[N * K], want[M * N], got[M * N];
    for (size_t i = 0; i < M * K; i++) x[i] = (float)((int)(i * 2654435761u % 2001u) - 1000) / 997.0f;
    for (size_t i = 0; i < N * K; i++) w[i] = (float)((int)(i * 40503u % 1999u) - 999) / 1013.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, want, N);
    int s = onednn_sgemm_nt(x, M, K, w, N, 0.0f, got, N);
    if (s != 0) {
        snprintf(why, why_size, "its sgemm of (%d, %d) x (%d, %d) failed (dnnl status %d)", M, K, K, N, s);
        return false;
    }
    float worst, peak;
    if (onednn_close(got, want, M * N, 1e-5f, &worst, &peak)) return true;
    snprintf(why, why_size, "its sgemm disagreed with OpenBLAS's by %g of values up to %g (allowed: 1e-5 of it)",
             (double)worst, (double)peak);
    return false;
}

/* "OpenBLAS 0.3.21" from openblas_get_config(), the library loaded (its first two words). */
static void openblas_name(char *out, size_t size) {
    const char *config = openblas_get_config();
    size_t n = 0;
    for (int words = 0; config != NULL && config[n] != '\0'; n++)
        if (config[n] == ' ' && ++words == 2) break;
    snprintf(out, size, "%.*s", (int)(n < 40 ? n : 40), n > 0 ? config : "OpenBLAS");
}

static void decide(void) {
    const char *env = getenv(ENV);
    int want = 0; /* 0 auto, 1 openblas, 2 onednn */
    if (env != NULL && env[0] != '\0') {
        if (strcmp(env, "openblas") == 0) want = 1;
        else if (strcmp(env, "onednn") == 0) want = 2;
        else if (strcmp(env, "auto") != 0) {
            chosen.code = RMLP_ERR_INVALID_ARGUMENT;
            snprintf(chosen.detail, sizeof chosen.detail, ENV "='%.40s' is not auto, openblas or onednn (or unset: "
                     "auto)", env);
            return;
        }
    }
    char source[64], name[48], blas[160];
    snprintf(source, sizeof source, want == 0 ? "auto; " ENV "=openblas or =onednn decides" : ENV "=%s", env);
    const char *core = openblas_get_corename();
    int cpu = cpu_level(), have = openblas_level(core != NULL ? core : "");
    openblas_name(name, sizeof name);
    snprintf(blas, sizeof blas, "%s's kernels are for %s (%s), this CPU runs %s", name,
             core != NULL ? core : "an unnamed core", level_name[have], level_name[cpu]);
    if (want == 1 || (want == 0 && have >= cpu)) {
        snprintf(chosen.detail, sizeof chosen.detail, "OpenBLAS's sgemm: %s (%s)", blas, source);
        return;
    }
    char what[96] = "", why[224] = "";
    int dnnl = onednn_sgemm_probe(what, sizeof what, why, sizeof why);
    if (dnnl >= 0 && dnnl < cpu && want == 0) snprintf(why, sizeof why, "%s runs %s here", what, level_name[dnnl]);
    if (dnnl >= 0 && (dnnl >= cpu || want == 2) && onednn_agrees(why, sizeof why)) {
        chosen.kind = RMLP_CPU_SGEMM_ONEDNN;
        snprintf(chosen.detail, sizeof chosen.detail, "oneDNN's sgemm (%s): %s (%s)", what, blas, source);
    } else if (want == 2) {
        chosen.code = RMLP_ERR_UNSUPPORTED;
        snprintf(chosen.detail, sizeof chosen.detail, ENV "=onednn asks for oneDNN's sgemm, which this process cannot "
                 "run: %s", why);
    } else {
        snprintf(chosen.detail, sizeof chosen.detail, "OpenBLAS's sgemm: %s, and oneDNN's cannot stand in: %s (%s; "
                 "OPENBLAS_CORETYPE=%s set before the process starts gives OpenBLAS wider kernels)", blas, why, source,
                 cpu == 2 ? "SkylakeX" : "Haswell");
    }
}

rmlp_status cpu_sgemm_choose(const char *fn, rmlp_cpu_sgemm_kind *kind, const char **detail) {
    pthread_once(&once, decide);
    if (chosen.code != RMLP_OK) return rmlp_fail(chosen.code, fn, "%s", chosen.detail);
    *kind = chosen.kind;
    *detail = chosen.detail;
    return RMLP_OK;
}

void cpu_sgemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                  size_t ldy) {
    pthread_once(&once, decide);
    if (chosen.kind == RMLP_CPU_SGEMM_ONEDNN) {
        if (onednn_sgemm_nt(x, rows, in_dim, w, n, beta, y, ldy) == 0) return;
        __atomic_fetch_add(&fallbacks, 1, __ATOMIC_RELAXED);
    }
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)in_dim, 1.0f, w, (int)in_dim, x, 1, beta, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)in_dim, 1.0f, x, (int)in_dim, w,
                    (int)in_dim, beta, y, (int)ldy);
}

uint64_t cpu_sgemm_fallbacks(void) { return __atomic_load_n(&fallbacks, __ATOMIC_RELAXED); }
