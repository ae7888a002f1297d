/*
 * elementwise.c: row-wise fp32 operations of a layer: RMSNorm, rotate-half RoPE, SiLU- and
 * GELU-gated products, residual add, row gather. RMSNorm and RoPE follow transformers' fp32
 * arithmetic (mean of squares in fp32, inverse frequencies and angles in fp32) so results match
 * it to rounding.
 */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

void cpu_rmsnorm(const float *x, size_t rows, size_t dim, size_t stride, const float *weight, double eps, float *out) {
    for (size_t r = 0; r < rows; r++) {
        const float *row = x + r * stride;
        float *dst = out + r * stride;
        float sum = 0.0f;
        for (size_t i = 0; i < dim; i++) sum += row[i] * row[i];
        float inv = 1.0f / sqrtf(sum / (float)dim + (float)eps);
        for (size_t i = 0; i < dim; i++) dst[i] = weight[i] * (row[i] * inv);
    }
}

void cpu_rope(float *x, size_t rows, size_t stride, size_t heads, size_t head_dim, const uint32_t *positions,
              double theta) {
    size_t half = head_dim / 2;
    for (size_t r = 0; r < rows; r++) {
        float pos = (float)positions[r];
        for (size_t i = 0; i < half; i++) {
            float inv_freq = 1.0f / powf((float)theta, (float)(2 * i) / (float)head_dim);
            float angle = pos * inv_freq;
            float c = cosf(angle), s = sinf(angle);
            for (size_t h = 0; h < heads; h++) {
                float *v = x + r * stride + h * head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

void cpu_silu_mul(const float *gu, size_t rows, size_t inter, float *out) {
    for (size_t r = 0; r < rows; r++) {
        const float *gate = gu + r * 2 * inter, *up = gate + inter;
        float *dst = out + r * inter;
        for (size_t i = 0; i < inter; i++) dst[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    }
}

void cpu_gelu_tanh_mul(const float *gu, size_t rows, size_t inter, float *out) {
    const float beta = 0.7978845608028654f, kappa = 0.044715f; /* sqrt(2 / pi), PyTorch's constants */
    for (size_t r = 0; r < rows; r++) {
        const float *gate = gu + r * 2 * inter, *up = gate + inter;
        float *dst = out + r * inter;
        for (size_t i = 0; i < inter; i++) {
            float x = gate[i];
            dst[i] = 0.5f * x * (1.0f + tanhf(beta * (x + kappa * x * x * x))) * up[i];
        }
    }
}

void cpu_gelu_mul(const float *gu, size_t rows, size_t inter, float *out) {
    for (size_t r = 0; r < rows; r++) {
        const float *gate = gu + r * 2 * inter, *up = gate + inter;
        float *dst = out + r * inter;
        for (size_t i = 0; i < inter; i++) dst[i] = 0.5f * gate[i] * (1.0f + erff(gate[i] * 0.70710678118654752f)) * up[i];
    }
}

void cpu_add(float *y, const float *x, size_t rows, size_t dim) {
    size_t n = rows * dim;
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void cpu_gather_rows(const float *src, size_t src_stride, const uint32_t *index, size_t rows, size_t dim, float *dst) {
    for (size_t r = 0; r < rows; r++) memcpy(dst + r * dim, src + (size_t)index[r] * src_stride, dim * sizeof(float));
}
