/*
 * rows_body.h: the per-row bodies of the fused elementwise passes (rows.c), written once over a
 * vector of VW floats. No include guard: rows.c includes this file once per vector width, with
 *   VF          the float vector type (vec8.h: v8 or v16),
 *   VW          its lane count (8 or 16),
 *   VEXP        its e^x (exp8, exp16),
 *   VSUM_LANES  the sum of its lanes, in a fixed order,
 *   RB(name)    the name of this width's copy of a function;
 * it undefines them at its end. Every function is inlined into the caller's instruction-set copy
 * (rows.c's run_rows_*), which passes only pointers in. A row's result depends on the row and on
 * VW alone: never on which rows share a block.
 */

INLINE VF RB(load)(const float *p) {
    VF v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE void RB(store)(float *p, VF v) { memcpy(p, &v, sizeof v); }

/* A row's tail (dim % VW floats) goes through the same vector code, padded with zeros. */
INLINE VF RB(load_tail)(const float *p, size_t n) {
    VF v = VSPLAT(VF, 0.0f);
    memcpy(&v, p, n * sizeof(float));
    return v;
}

INLINE void RB(store_tail)(float *p, VF v, size_t n) { memcpy(p, &v, n * sizeof(float)); }

/* 1 / sqrt(mean of squares + eps) of x (dim). */
INLINE float RB(inv_rms)(const float *x, size_t dim, double eps) {
    VF acc = VSPLAT(VF, 0.0f);
    size_t i = 0;
    for (; i + VW <= dim; i += VW) {
        VF v = RB(load)(x + i);
        acc += v * v;
    }
    if (i < dim) {
        VF v = RB(load_tail)(x + i, dim - i);
        acc += v * v;
    }
    return 1.0f / sqrtf(VSUM_LANES(&acc) / (float)dim + (float)eps);
}

/* out = weight * (x * inv) over dim (out may be x). */
INLINE void RB(scale_row)(const float *x, size_t dim, const float *weight, float inv, float *out) {
    size_t i = 0;
    for (; i + VW <= dim; i += VW) RB(store)(out + i, RB(load)(weight + i) * (RB(load)(x + i) * VSPLAT(VF, inv)));
    if (i < dim)
        RB(store_tail)(out + i,
                       RB(load_tail)(weight + i, dim - i) * (RB(load_tail)(x + i, dim - i) * VSPLAT(VF, inv)), dim - i);
}

INLINE void RB(add_row)(float *y, const float *x, size_t dim) {
    size_t i = 0;
    for (; i + VW <= dim; i += VW) RB(store)(y + i, RB(load)(y + i) + RB(load)(x + i));
    for (; i < dim; i++) y[i] += x[i];
}

INLINE VF RB(silu_mul)(VF g, VF u) { return g / (VSPLAT(VF, 1.0f) + VEXP(-g)) * u; }

/* GELU (tanh form) times up: 0.5 g (1 + tanh(u)) = g / (1 + e^(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3),
 * the logistic form of the same function, which needs no tanh and keeps its accuracy near 0. */
INLINE VF RB(gelu_tanh_mul)(VF g, VF u) {
    VF inner = VSPLAT(VF, 0.7978845608028654f) * (g + VSPLAT(VF, 0.044715f) * g * g * g);
    return g / (VSPLAT(VF, 1.0f) + VEXP(VSPLAT(VF, -2.0f) * inner)) * u;
}

/* out (inter) = f(gate, up) lane by lane, f one of the two gated products above. */
#define RB_GATED_ROW(f, gate, up, inter, out)                                                                    \
    do {                                                                                                         \
        size_t i_ = 0;                                                                                           \
        for (; i_ + VW <= (inter); i_ += VW) RB(store)((out) + i_, f(RB(load)((gate) + i_), RB(load)((up) + i_))); \
        if (i_ < (inter))                                                                                        \
            RB(store_tail)((out) + i_,                                                                           \
                           f(RB(load_tail)((gate) + i_, (inter) - i_), RB(load_tail)((up) + i_, (inter) - i_)),  \
                           (inter) - i_);                                                                        \
    } while (0)

/* Rotate-half RoPE of one head (head_dim = 2 * half) by a row's cos (cs) and sin (cs + half). */
INLINE void RB(rope_head)(float *v, const float *cs, size_t half) {
    size_t i = 0;
    for (; i + VW <= half; i += VW) {
        VF a = RB(load)(v + i), b = RB(load)(v + half + i), c = RB(load)(cs + i), s = RB(load)(cs + half + i);
        RB(store)(v + i, a * c - b * s);
        RB(store)(v + half + i, b * c + a * s);
    }
    for (; i < half; i++) {
        float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

INLINE void RB(qk_row)(const job *j, float *row, const float *cs) {
    size_t hd = j->head_dim;
    for (size_t h = 0; h < j->n_q + j->n_kv; h++) {
        float *v = row + h * hd;
        const float *w = h < j->n_q ? j->weight : j->weight_k;
        if (w != NULL) RB(scale_row)(v, hd, w, RB(inv_rms)(v, hd, j->eps), v);
        RB(rope_head)(v, cs, hd / 2);
    }
}

/* Rows lo .. hi of the job: the body each instruction-set copy compiles. */
INLINE void RB(run_rows)(const job *j, size_t lo, size_t hi) {
    size_t d = j->dim;
    for (size_t r = lo; r < hi; r++) {
        switch (j->kind) {
        case JOB_RMSNORM:
            RB(scale_row)(j->x + r * d, d, j->weight, RB(inv_rms)(j->x + r * d, d, j->eps), j->out + r * d);
            break;
        case JOB_ADD_RMSNORM:
            RB(add_row)(j->y + r * d, j->x + r * d, d);
            RB(scale_row)(j->y + r * d, d, j->weight, RB(inv_rms)(j->y + r * d, d, j->eps), j->out + r * d);
            break;
        case JOB_NORM_ADD_RMSNORM:
            RB(scale_row)(j->z + r * d, d, j->weight_z, RB(inv_rms)(j->z + r * d, d, j->eps), j->z + r * d);
            RB(add_row)(j->y + r * d, j->z + r * d, d);
            if (j->out != NULL)
                RB(scale_row)(j->y + r * d, d, j->weight, RB(inv_rms)(j->y + r * d, d, j->eps), j->out + r * d);
            break;
        case JOB_ADD: RB(add_row)(j->y + r * d, j->x + r * d, d); break;
        case JOB_SILU_MUL: RB_GATED_ROW(RB(silu_mul), j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d); break;
        case JOB_GELU_TANH_MUL:
            RB_GATED_ROW(RB(gelu_tanh_mul), j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d);
            break;
        case JOB_GELU_MUL: gelu_mul_row(j->x + r * 2 * d, j->x + r * 2 * d + d, d, j->out + r * d); break;
        case JOB_QK_NORM_ROPE: RB(qk_row)(j, j->y + r * d, j->cs + r * j->head_dim); break;
        }
    }
}

#undef RB_GATED_ROW
#undef VF
#undef VW
#undef VEXP
#undef VSUM_LANES
#undef RB
