/*
 * linear.c: x W^T through BLAS (OpenBLAS): sgemm for row blocks, sgemv for a single row.
 * OpenBLAS allocates its own work buffers outside common/alloc.h and outside our control: when
 * that fails OpenBLAS handles it itself (it prints, and may stop the process), and no status of
 * ours can carry it; test_alloc_failure covers every allocation but those.
 */
#include <string.h>

#include <cblas.h>

#include "cpu_ops.h"

void cpu_linear(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                float *y) {
    if (rows == 0) return;
    float beta = 0.0f;
    if (bias != NULL) {
        for (size_t r = 0; r < rows; r++) memcpy(y + r * out_dim, bias, out_dim * sizeof(float));
        beta = 1.0f;
    }
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)out_dim, (int)in_dim, 1.0f, w, (int)in_dim, x, 1, beta, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out_dim, (int)in_dim, 1.0f, x,
                    (int)in_dim, w, (int)in_dim, beta, y, (int)out_dim);
}
