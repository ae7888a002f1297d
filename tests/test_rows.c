/*
 * test_rows.c: the fused elementwise passes of cpu/rows.h against the scalar kernels of
 * cpu/cpu_ops.h (elementwise.c), on random rows of widths with and without a tail (dim % 8), on
 * pools of 1, 2 and 3 threads: within 1e-6 relative of the reference (RMSNorm, residual add,
 * SiLU-gated product, q/k head norms and RoPE, including SiLU's saturated ends), and bit for bit
 * the same whatever the thread count (a row's result never depends on the split); each kernel copy
 * this CPU runs in turn (AVX-512, AVX2 + FMA, baseline), widths with a tail for each lane count.
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu_ops.h"
#include "cpu/rows.h"
#include "test_util.h"

static uint64_t rng = 0x5EED;

static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(tu_rand(&rng) >> 40) / (float)(1 << 24); }

static float *random_floats(size_t n, float lo, float hi) {
    float *x = tu_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
    return x;
}

/* max |got - want| / max(|want|, floor) over n. */
static double rel_err(const float *got, const float *want, size_t n, double floor) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(fabs((double)want[i]), floor);
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    return worst;
}

static void check_close(const char *what, size_t dim, size_t threads, const float *got, const float *want, size_t n,
                        double tol, double floor) {
    double e = rel_err(got, want, n, floor);
    CHECK(e <= tol, "%s, dim %zu, %zu threads: relative error %.3g > %.3g", what, dim, threads, e, tol);
}

static void check_same(const char *what, size_t dim, size_t threads, const float *got, const float *first, size_t n) {
    CHECK(memcmp(got, first, n * sizeof(float)) == 0, "%s, dim %zu: %zu threads differ from 1 thread", what, dim,
          threads);
}

static void test_width(size_t rows, size_t dim, workers *pools[3]) {
    size_t n = rows * dim;
    float *x = random_floats(n, -3.0f, 3.0f), *add = random_floats(n, -1.0f, 1.0f);
    float *w = random_floats(dim, 0.5f, 1.5f), *gu = random_floats(2 * n, -20.0f, 20.0f);
    gu[0] = -100.0f, gu[1] = 100.0f, gu[2] = 0.0f; /* SiLU's saturated ends, and zero */
    float *want = tu_xmalloc(n * sizeof(float)), *got = tu_xmalloc(n * sizeof(float));
    float *first[3] = {tu_xmalloc(n * sizeof(float)), tu_xmalloc(n * sizeof(float)), tu_xmalloc(n * sizeof(float))};
    float *hidden = tu_xmalloc(n * sizeof(float));
    for (size_t p = 0; p < 3; p++) {
        size_t threads = p + 1;
        cpu_rmsnorm(x, rows, dim, dim, w, 1e-6, want);
        rows_rmsnorm(pools[p], x, rows, dim, w, 1e-6, got);
        check_close("rmsnorm", dim, threads, got, want, n, 1e-6, 1e-3);
        if (p == 0) memcpy(first[0], got, n * sizeof(float));
        else check_same("rmsnorm", dim, threads, got, first[0], n);

        memcpy(want, x, n * sizeof(float)), memcpy(hidden, x, n * sizeof(float));
        cpu_add(want, add, rows, dim);
        rows_add(pools[p], hidden, add, rows, dim);
        CHECK(memcmp(hidden, want, n * sizeof(float)) == 0, "add, dim %zu, %zu threads: not the exact sum", dim,
              threads);

        cpu_silu_mul(gu, rows, dim, want);
        rows_silu_mul(pools[p], gu, rows, dim, got);
        check_close("silu_mul", dim, threads, got, want, n, 1e-6, 1e-3);
        if (p == 0) memcpy(first[1], got, n * sizeof(float));
        else check_same("silu_mul", dim, threads, got, first[1], n);
    }
    free(x), free(add), free(w), free(gu), free(want), free(got), free(hidden);
    for (int i = 0; i < 3; i++) free(first[i]);
}

/* q/k head norms and RoPE on qkv rows (q heads, k heads, v heads), positions up to 4000. */
static void test_qk(size_t rows, size_t n_q, size_t n_kv, size_t hd, bool norms, workers *pools[3]) {
    size_t width = (n_q + 2 * n_kv) * hd, n = rows * width;
    float *qkv = random_floats(n, -2.0f, 2.0f), *want = tu_xmalloc(n * sizeof(float));
    float *got = tu_xmalloc(n * sizeof(float)), *first = tu_xmalloc(n * sizeof(float));
    float *qn = norms ? random_floats(hd, 0.5f, 1.5f) : NULL, *kn = norms ? random_floats(hd, 0.5f, 1.5f) : NULL;
    float *cs = tu_xmalloc(rows * hd * sizeof(float)), *inv_freq = tu_xmalloc(hd / 2 * sizeof(float));
    model_rope rope = {inv_freq, 1.0f, 1e6};
    model_rope_default(1e6, (uint32_t)hd, inv_freq);
    uint32_t *pos = tu_xmalloc(rows * sizeof(uint32_t));
    for (size_t r = 0; r < rows; r++) pos[r] = tu_rand_range(&rng, 0, 4000);
    memcpy(want, qkv, n * sizeof(float));
    for (size_t r = 0; norms && r < rows; r++) {
        cpu_rmsnorm(want + r * width, n_q, hd, hd, qn, 1e-6, want + r * width);
        cpu_rmsnorm(want + r * width + n_q * hd, n_kv, hd, hd, kn, 1e-6, want + r * width + n_q * hd);
    }
    cpu_rope(want, rows, width, n_q, hd, pos, 1e6);
    cpu_rope(want + n_q * hd, rows, width, n_kv, hd, pos, 1e6);
    for (size_t p = 0; p < 3; p++) {
        memcpy(got, qkv, n * sizeof(float));
        rows_rope_table(pos, rows, hd, &rope, cs);
        rows_qk_norm_rope(pools[p], got, rows, width, n_q, n_kv, hd, qn, kn, 1e-6, cs);
        /* RoPE mixes two values: relative to the row's scale, not each element's */
        check_close(norms ? "qk norm + rope" : "rope", hd, p + 1, got, want, n, 1e-6, 1.0);
        if (p == 0) memcpy(first, got, n * sizeof(float));
        else check_same("qk norm + rope", hd, p + 1, got, first, n);
    }
    free(qkv), free(want), free(got), free(first), free(qn), free(kn), free(cs), free(pos), free(inv_freq);
}

int main(void) {
    workers *pools[3] = {NULL, NULL, NULL};
    int error = 0;
    for (size_t p = 1; p < 3; p++) CHECK((pools[p] = workers_create(p + 1, &error)) != NULL, "pool: error %d", error);
    const char *copies[4];
    size_t n_copies = rows_kernels(copies, 4);
    CHECK(n_copies >= 1, "no kernel copy runs on this CPU");
    CHECK(rows_kernels_force("no-such-copy") == -1, "an unknown copy's name was taken");
    size_t dims[] = {1, 7, 8, 24, 64, 576, 1003};
    for (size_t c = 0; c < n_copies; c++) {
        CHECK(rows_kernels_force(copies[c]) == 0, "copy %s refused", copies[c]);
        printf("# kernel copy %s\n", copies[c]);
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
            test_width(3, dims[i], pools);
            test_width(97, dims[i], pools); /* above the size a job runs alone on the calling thread */
        }
        test_qk(50, 9, 3, 64, false, pools);
        test_qk(300, 16, 8, 128, true, pools);
        test_qk(5, 2, 1, 12, true, pools); /* half a head not a multiple of 8 */
        test_qk(7, 3, 1, 40, true, pools); /* half a head of 20: one 16-lane block and a scalar tail */
    }
    CHECK(rows_kernels_force(NULL) == 0, "back to the widest copy");
    for (size_t p = 0; p < 3; p++) workers_destroy(pools[p]);
    return tu_summary();
}
