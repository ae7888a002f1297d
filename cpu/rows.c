/*
 * rows.c: the fused elementwise passes of rows.h. One job per call: the rows cut into one block
 * per pool thread (a small job runs on the calling thread alone), each block run by the kernel
 * copy the CPU takes: AVX2 + FMA, or the baseline (x86-64), or the one portable copy elsewhere.
 * The per-row bodies are written once, on eight-lane vectors (GCC/Clang vector extensions), and
 * inlined into each copy: no vector crosses a call, so the compilers' ABI warning for vectors
 * passed without AVX is off for this file (-Wno-psabi, CMakeLists.txt).
 */
#include <math.h>
#include <string.h>

#include "rows.h"
#include "vec8.h"

#define INLINE VEC8_INLINE

INLINE v8 load8(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

/* A row's tail (dim % 8 floats) goes through the same vector code, padded with zeros. */
INLINE v8 load_tail(const float *p, size_t n) {
    v8 v = SPLAT(0.0f);
    memcpy(&v, p, n * sizeof(float));
    return v;
}

INLINE void store_tail(float *p, v8 v, size_t n) { memcpy(p, &v, n * sizeof(float)); }

INLINE float sum_lanes(const v8 *v) {
    v8 a = *v;
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* 1 / sqrt(mean of squares + eps) of x (dim). */
INLINE float inv_rms(const float *x, size_t dim, double eps) {
    v8 acc = SPLAT(0.0f);
    size_t i = 0;
    for (; i + 8 <= dim; i += 8) {
        v8 v = load8(x + i);
        acc += v * v;
    }
    if (i < dim) {
        v8 v = load_tail(x + i, dim - i);
        acc += v * v;
    }
    return 1.0f / sqrtf(sum_lanes(&acc) / (float)dim + (float)eps);
}

/* out = weight * (x * inv) over dim (out may be x). */
INLINE void scale_row(const float *x, size_t dim, const float *weight, float inv, float *out) {
    size_t i = 0;
    for (; i + 8 <= dim; i += 8) store8(out + i, load8(weight + i) * (load8(x + i) * SPLAT(inv)));
    if (i < dim)
        store_tail(out + i, load_tail(weight + i, dim - i) * (load_tail(x + i, dim - i) * SPLAT(inv)), dim - i);
}

INLINE void add_row(float *y, const float *x, size_t dim) {
    size_t i = 0;
    for (; i + 8 <= dim; i += 8) store8(y + i, load8(y + i) + load8(x + i));
    for (; i < dim; i++) y[i] += x[i];
}

INLINE v8 silu_mul8(v8 g, v8 u) { return g / (SPLAT(1.0f) + exp8(-g)) * u; }

/* GELU (tanh form) times up: 0.5 g (1 + tanh(u)) = g / (1 + e^(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3),
 * the logistic form of the same function, which needs no tanh and keeps its accuracy near 0. */
INLINE v8 gelu_tanh_mul8(v8 g, v8 u) {
    v8 inner = SPLAT(0.7978845608028654f) * (g + SPLAT(0.044715f) * g * g * g);
    return g / (SPLAT(1.0f) + exp8(SPLAT(-2.0f) * inner)) * u;
}

INLINE void gelu_tanh_mul_row(const float *gate, const float *up, size_t inter, float *out) {
    size_t i = 0;
    for (; i + 8 <= inter; i += 8) store8(out + i, gelu_tanh_mul8(load8(gate + i), load8(up + i)));
    if (i < inter)
        store_tail(out + i, gelu_tanh_mul8(load_tail(gate + i, inter - i), load_tail(up + i, inter - i)), inter - i);
}

/* The exact GELU times up, erff element by element (no vector erf here: a Gemma checkpoint that
 * asks for it is the one user, and its GEMMs dwarf this). */
INLINE void gelu_mul_row(const float *gate, const float *up, size_t inter, float *out) {
    for (size_t i = 0; i < inter; i++) out[i] = 0.5f * gate[i] * (1.0f + erff(gate[i] * 0.70710678118654752f)) * up[i];
}

INLINE void silu_mul_row(const float *gate, const float *up, size_t inter, float *out) {
    size_t i = 0;
    for (; i + 8 <= inter; i += 8) store8(out + i, silu_mul8(load8(gate + i), load8(up + i)));
    if (i < inter)
        store_tail(out + i, silu_mul8(load_tail(gate + i, inter - i), load_tail(up + i, inter - i)), inter - i);
}

/* Rotate-half RoPE of one head (head_dim = 2 * half) by a row's cos (cs) and sin (cs + half). */
INLINE void rope_head(float *v, const float *cs, size_t half) {
    size_t i = 0;
    for (; i + 8 <= half; i += 8) {
        v8 a = load8(v + i), b = load8(v + half + i), c = load8(cs + i), s = load8(cs + half + i);
        store8(v + i, a * c - b * s);
        store8(v + half + i, b * c + a * s);
    }
    for (; i < half; i++) {
        float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

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

INLINE void qk_row(const job *j, float *row, const float *cs) {
    size_t hd = j->head_dim;
    for (size_t h = 0; h < j->n_q + j->n_kv; h++) {
        float *v = row + h * hd;
        const float *w = h < j->n_q ? j->weight : j->weight_k;
        if (w != NULL) scale_row(v, hd, w, inv_rms(v, hd, j->eps), v);
        rope_head(v, cs, hd / 2);
    }
}

/* Rows lo .. hi of the job: the body each kernel copy compiles. */
INLINE void run_rows(const job *j, size_t lo, size_t hi) {
    size_t d = j->dim;
    for (size_t r = lo; r < hi; r++) {
        switch (j->kind) {
        case JOB_RMSNORM: scale_row(j->x + r * d, d, j->weight, inv_rms(j->x + r * d, d, j->eps), j->out + r * d); break;
        case JOB_ADD_RMSNORM:
            add_row(j->y + r * d, j->x + r * d, d);
            scale_row(j->y + r * d, d, j->weight, inv_rms(j->y + r * d, d, j->eps), j->out + r * d);
            break;
        case JOB_NORM_ADD_RMSNORM:
            scale_row(j->z + r * d, d, j->weight_z, inv_rms(j->z + r * d, d, j->eps), j->z + r * d);
            add_row(j->y + r * d, j->z + r * d, d);
            if (j->out != NULL)
                scale_row(j->y + r * d, d, j->weight, inv_rms(j->y + r * d, d, j->eps), j->out + r * d);
            break;
        case JOB_ADD: add_row(j->y + r * d, j->x + r * d, d); break;
        case JOB_SILU_MUL: silu_mul_row(j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d); break;
        case JOB_GELU_TANH_MUL: gelu_tanh_mul_row(j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d); break;
        case JOB_GELU_MUL: gelu_mul_row(j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d); break;
        case JOB_QK_NORM_ROPE: qk_row(j, j->y + r * d, j->cs + r * j->head_dim); break;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void run_rows_avx2(const job *j, size_t lo, size_t hi) {
    run_rows(j, lo, hi);
}
#endif

static void run_rows_base(const job *j, size_t lo, size_t hi) { run_rows(j, lo, hi); }

static void task(void *arg, size_t t, size_t worker) {
    (void)worker;
    const job *j = arg;
    size_t lo = t * j->block, hi = lo + j->block < j->rows ? lo + j->block : j->rows;
    if (lo >= hi) return;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        run_rows_avx2(j, lo, hi);
        return;
    }
#endif
    run_rows_base(j, lo, hi);
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
