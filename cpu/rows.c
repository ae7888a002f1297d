/*
 * rows.c: the fused elementwise passes of rows.h. One job per call: the rows cut into one block
 * per pool thread (a small job runs on the calling thread alone), each block run by the kernel
 * copy the CPU takes: AVX-512 (sixteen lanes), AVX2 + FMA or the baseline (eight lanes), or the
 * one portable copy elsewhere. The per-row bodies are written once (rows_body.h) and inlined into
 * each copy: no vector crosses a call, so the compilers' ABI warning for vectors passed without
 * AVX is off for this file (-Wno-psabi, CMakeLists.txt).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "rows.h"
#include "vec8.h"

#define INLINE VEC8_INLINE

/* ---- jobs ------------------------------------------------------------------------------------- */

typedef enum job_kind {
    JOB_RMSNORM, JOB_ADD_RMSNORM, JOB_NORM_ADD_RMSNORM, JOB_ADD, JOB_SILU_MUL, JOB_GELU_TANH_MUL, JOB_GELU_MUL,
    JOB_QK_NORM_ROPE
} job_kind;

typedef struct job {
    job_kind kind;
    size_t rows, block, dim;
    float *y;              /* the rows written in place (hidden, qkv) */
    const float *x;        /* the rows read (x, add, gu) */
    float *out;            /* the rows written (out, normed) */
    float *z;              /* the rows normed in place before their add (JOB_NORM_ADD_RMSNORM) */
    const float *weight;   /* the norm's weight (q_norm for JOB_QK_NORM_ROPE) */
    const float *weight_z; /* z's norm weight */
    const float *weight_k; /* k_norm */
    const float *cs;       /* the rope table */
    size_t n_q, n_kv, head_dim;
    double eps;
} job;

/* The exact GELU times up, erff element by element (no vector erf here: a Gemma checkpoint that
 * asks for it is the one user, and its GEMMs dwarf this). */
INLINE void gelu_mul_row(const float *gate, const float *up, size_t inter, float *out) {
    for (size_t i = 0; i < inter; i++) out[i] = 0.5f * gate[i] * (1.0f + erff(gate[i] * 0.70710678118654752f)) * up[i];
}

INLINE float sum_lanes8(const v8 *v) {
    v8 a = *v;
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

INLINE float sum_lanes16(const v16 *v) {
    v16 a = *v;
    return (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) +
           (((a[8] + a[9]) + (a[10] + a[11])) + ((a[12] + a[13]) + (a[14] + a[15])));
}

#define VF v8
#define VW 8
#define VEXP exp8
#define VSUM_LANES sum_lanes8
#define RB(name) name##_8
#include "rows_body.h"

#define VF v16
#define VW 16
#define VEXP exp16
#define VSUM_LANES sum_lanes16
#define RB(name) name##_16
#include "rows_body.h"

/* ---- the instruction-set copies ------------------------------------------------------------- */

typedef void (*rows_fn)(const job *j, size_t lo, size_t hi);

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512vl,avx512dq,fma"))) static void run_rows_avx512(const job *j, size_t lo,
                                                                                     size_t hi) {
    run_rows_16(j, lo, hi);
}

__attribute__((target("avx2,fma"))) static void run_rows_avx2(const job *j, size_t lo, size_t hi) {
    run_rows_8(j, lo, hi);
}
#endif

static void run_rows_base(const job *j, size_t lo, size_t hi) { run_rows_8(j, lo, hi); }

static const struct {
    const char *name;
    rows_fn fn;
} copies[] = {
#if defined(__x86_64__) && defined(__GNUC__)
    {"avx512", run_rows_avx512},
    {"avx2-fma", run_rows_avx2},
#endif
    {"baseline", run_rows_base},
};
#define N_COPIES (sizeof copies / sizeof copies[0])

static bool copy_runs(size_t i) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (copies[i].fn == run_rows_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    if (copies[i].fn == run_rows_avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)i;
    return true;
}

static rows_fn forced; /* rows_kernels_force's choice; NULL: the widest this CPU runs */

static rows_fn pick(void) {
    rows_fn f = __atomic_load_n(&forced, __ATOMIC_ACQUIRE);
    if (f != NULL) return f;
    for (size_t i = 0; i < N_COPIES; i++)
        if (copy_runs(i)) return copies[i].fn;
    return run_rows_base;
}

size_t rows_kernels(const char **names, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < N_COPIES; i++)
        if (copy_runs(i) && n < cap) names[n++] = copies[i].name;
    return n;
}

int rows_kernels_force(const char *name) {
    for (size_t i = 0; i < N_COPIES; i++)
        if (name == NULL || (strcmp(copies[i].name, name) == 0 && copy_runs(i))) {
            __atomic_store_n(&forced, name == NULL ? NULL : copies[i].fn, __ATOMIC_RELEASE);
            return 0;
        }
    return -1;
}

static void task(void *arg, size_t t, size_t worker) {
    (void)worker;
    const job *j = arg;
    size_t lo = t * j->block, hi = lo + j->block < j->rows ? lo + j->block : j->rows;
    if (lo >= hi) return;
    pick()(j, lo, hi);
}

/* Below this many floats a job runs on the calling thread: waking the pool costs more. */
#define ROWS_MIN_PARALLEL 16384

static void run(workers *pool, job *j) {
    size_t n = j->rows * j->dim < ROWS_MIN_PARALLEL ? 1 : workers_count(pool);
    if (n > j->rows) n = j->rows;
    if (n == 0) return;
    j->block = (j->rows + n - 1) / n;
    workers_run(n > 1 ? pool : NULL, n, task, j);
}

/* ---- rows.h ------------------------------------------------------------------------------------ */

void rows_rope_table(const uint32_t *positions, size_t rows, size_t head_dim, const model_rope *rope, float *cs) {
    size_t half = head_dim / 2;
    float factor = rope->attention_factor;
    for (size_t r = 0; r < rows; r++) {
        float pos = (float)positions[r];
        for (size_t i = 0; i < half; i++) { /* transformers': fp32 angle, cos and sin times the factor */
            float angle = pos * rope->inv_freq[i];
            cs[r * head_dim + i] = cosf(angle) * factor;
            cs[r * head_dim + half + i] = sinf(angle) * factor;
        }
    }
}

void rows_rmsnorm(workers *pool, const float *x, size_t rows, size_t dim, const float *weight, double eps,
                  float *out) {
    job j = {.kind = JOB_RMSNORM, .rows = rows, .dim = dim, .x = x, .out = out, .weight = weight, .eps = eps};
    run(pool, &j);
}

void rows_add_rmsnorm(workers *pool, float *hidden, const float *add, size_t rows, size_t dim, const float *weight,
                      double eps, float *normed) {
    job j = {.kind = JOB_ADD_RMSNORM, .rows = rows, .dim = dim, .y = hidden, .x = add, .out = normed,
             .weight = weight, .eps = eps};
    run(pool, &j);
}

void rows_norm_add_rmsnorm(workers *pool, float *hidden, float *sub, const float *sub_weight, size_t rows, size_t dim,
                           const float *weight, double eps, float *normed) {
    job j = {.kind = JOB_NORM_ADD_RMSNORM, .rows = rows, .dim = dim, .y = hidden, .z = sub, .weight_z = sub_weight,
             .out = normed, .weight = weight, .eps = eps};
    run(pool, &j);
}

void rows_add(workers *pool, float *y, const float *x, size_t rows, size_t dim) {
    job j = {.kind = JOB_ADD, .rows = rows, .dim = dim, .y = y, .x = x};
    run(pool, &j);
}

void rows_silu_mul(workers *pool, const float *gu, size_t rows, size_t inter, float *out) {
    job j = {.kind = JOB_SILU_MUL, .rows = rows, .dim = inter, .x = gu, .out = out};
    run(pool, &j);
}

void rows_gated_mul(workers *pool, rmlp_activation activation, const float *gu, size_t rows, size_t inter,
                    float *out) {
    job_kind kind = activation == RMLP_ACTIVATION_GELU_TANH ? JOB_GELU_TANH_MUL
                    : activation == RMLP_ACTIVATION_GELU    ? JOB_GELU_MUL
                                                            : JOB_SILU_MUL;
    job j = {.kind = kind, .rows = rows, .dim = inter, .x = gu, .out = out};
    run(pool, &j);
}

void rows_qk_norm_rope(workers *pool, float *qkv, size_t rows, size_t width, size_t n_q, size_t n_kv,
                       size_t head_dim, const float *q_norm, const float *k_norm, double eps, const float *cs) {
    job j = {.kind = JOB_QK_NORM_ROPE, .rows = rows, .dim = width, .y = qkv, .weight = q_norm, .weight_k = k_norm,
             .cs = cs, .n_q = n_q, .n_kv = n_kv, .head_dim = head_dim, .eps = eps};
    run(pool, &j);
}
