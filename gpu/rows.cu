/*
 * rows.cu: row gather, dst[r] = src[index[r]] (or each sequence's last row), row put, dst[index[r]] = src[r], row broadcast, dst[r] = src, and row add,
 * dst[r] += src. The gather serves the embedding lookup of compact ids, the scatter of compact
 * rows to the batch's full rows, and the gather of full rows back to compact ones; the
 * put writes computed rows into the prefix cache's slots; the broadcast writes a bias into every row of a GEMM output before the GEMM accumulates onto it,
 * and the add puts a bias onto rows that already hold a value (the residual stream) before a
 * GEMM accumulates onto them. Gather and broadcast copy bits, so the dtype only sets the element
 * size; the add loads, adds in fp32 and stores in the dtype. Rows move as 16-byte vectors when
 * the row size, the strides and the pointers allow it, element by element otherwise. Threads of
 * a block walk a row (x) for a few rows (y). And the scale of Gemma's embedding rows.
 */
#include "common.cuh"
#include "kernels.h"

/* Which source row the gather copies to row r: index[r]. */
struct listed_rows {
    const uint32_t *index;
    __device__ uint32_t operator()(size_t r) const { return index[r]; }
};

/* Sequence s's last row, cu[s + 1] - 1, through scatter to its compact row and then through fold
 * to its representative batch row, each where given (rmlp_forward_last's reads). */
struct last_rows {
    const uint32_t *cu, *scatter, *fold;
    __device__ uint32_t operator()(size_t s) const {
        uint32_t r = cu[s + 1] - 1;
        if (scatter != NULL) r = scatter[r];
        return fold != NULL ? fold[r] : r;
    }
};

/* dst (rows, units) = src[row_of(r)] (units), src rows at src_stride; U is the unit copied. */
template <typename U, typename Rows>
static __global__ void gather_rows_kernel(U *__restrict__ dst, const U *__restrict__ src, size_t src_stride,
                                          Rows row_of, size_t rows, size_t units) {
    size_t r = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    const U *s = src + (size_t)row_of(r) * src_stride;
    U *d = dst + r * units;
    for (size_t c = threadIdx.x; c < units; c += blockDim.x) d[c] = s[c];
}

template <typename U, typename Rows>
static cudaError_t launch_gather(void *dst, const void *src, size_t src_stride, Rows row_of, size_t rows,
                                 size_t units, cudaStream_t stream) {
    dim3 block = row_block(units);
    gather_rows_kernel<U, Rows>
        <<<row_grid(rows, block), block, 0, stream>>>((U *)dst, (const U *)src, src_stride, row_of, rows, units);
    return cudaGetLastError();
}

/* The gather in the widest unit the row size, the strides and the pointers allow. */
template <typename Rows>
static cudaError_t gather(void *dst, const void *src, size_t src_row_stride, Rows row_of, size_t rows, size_t dim,
                          rmlp_dtype dtype, cudaStream_t stream) {
    size_t elem = dtype_size(dtype);
    if (elem == 0 || src_row_stride < dim || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    size_t row_bytes = dim * elem, stride_bytes = src_row_stride * elem;
    if (row_bytes % 16 == 0 && stride_bytes % 16 == 0 && aligned16(dst) && aligned16(src))
        return launch_gather<uint4>(dst, src, stride_bytes / 16, row_of, rows, row_bytes / 16, stream);
    if (elem == 4) return launch_gather<uint32_t>(dst, src, src_row_stride, row_of, rows, dim, stream);
    return launch_gather<uint16_t>(dst, src, src_row_stride, row_of, rows, dim, stream);
}

extern "C" cudaError_t gpu_gather_rows(void *dst, const void *src, size_t src_row_stride, const uint32_t *index,
                                       size_t rows, size_t dim, rmlp_dtype dtype, cudaStream_t stream) {
    return gather(dst, src, src_row_stride, listed_rows{index}, rows, dim, dtype, stream);
}

extern "C" cudaError_t gpu_gather_last_rows(void *dst, const void *src, size_t src_row_stride, const uint32_t *cu,
                                            const uint32_t *scatter, const uint32_t *fold, size_t n_seqs, size_t dim,
                                            rmlp_dtype dtype, cudaStream_t stream) {
    return gather(dst, src, src_row_stride, last_rows{cu, scatter, fold}, n_seqs, dim, dtype, stream);
}

/* dst[index[r]] (units), dst rows at dst_stride = src (rows, units), src rows at src_stride. */
template <typename U>
static __global__ void put_rows_kernel(U *__restrict__ dst, size_t dst_stride, const uint32_t *__restrict__ index,
                                       const U *__restrict__ src, size_t src_stride, size_t rows, size_t units) {
    size_t r = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    const U *s = src + r * src_stride;
    U *d = dst + (size_t)index[r] * dst_stride;
    for (size_t c = threadIdx.x; c < units; c += blockDim.x) d[c] = s[c];
}

template <typename U>
static cudaError_t launch_put(void *dst, size_t dst_stride, const uint32_t *index, const void *src, size_t src_stride,
                              size_t rows, size_t units, cudaStream_t stream) {
    dim3 block = row_block(units);
    put_rows_kernel<U><<<row_grid(rows, block), block, 0, stream>>>((U *)dst, dst_stride, index, (const U *)src,
                                                                     src_stride, rows, units);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_put_rows(void *dst, size_t dst_row_stride, const uint32_t *index, const void *src,
                                    size_t src_row_stride, size_t rows, size_t dim, rmlp_dtype dtype,
                                    cudaStream_t stream) {
    size_t elem = dtype_size(dtype);
    if (elem == 0 || dst_row_stride < dim || src_row_stride < dim || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    size_t row_bytes = dim * elem, dst_bytes = dst_row_stride * elem, src_bytes = src_row_stride * elem;
    if (row_bytes % 16 == 0 && dst_bytes % 16 == 0 && src_bytes % 16 == 0 && aligned16(dst) && aligned16(src))
        return launch_put<uint4>(dst, dst_bytes / 16, index, src, src_bytes / 16, rows, row_bytes / 16, stream);
    if (elem == 4) return launch_put<uint32_t>(dst, dst_row_stride, index, src, src_row_stride, rows, dim, stream);
    return launch_put<uint16_t>(dst, dst_row_stride, index, src, src_row_stride, rows, dim, stream);
}

/* dst (rows, units) at dst_stride = src (units) on every row. */
template <typename U>
static __global__ void broadcast_row_kernel(U *__restrict__ dst, size_t dst_stride, const U *__restrict__ src,
                                            size_t rows, size_t units) {
    size_t r = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    U *d = dst + r * dst_stride;
    for (size_t c = threadIdx.x; c < units; c += blockDim.x) d[c] = src[c];
}

template <typename U>
static cudaError_t launch_broadcast(void *dst, size_t dst_stride, const void *src, size_t rows, size_t units,
                                    cudaStream_t stream) {
    dim3 block = row_block(units);
    broadcast_row_kernel<U>
        <<<row_grid(rows, block), block, 0, stream>>>((U *)dst, dst_stride, (const U *)src, rows, units);
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_broadcast_row(void *dst, size_t dst_row_stride, const void *src, size_t rows, size_t dim,
                                         rmlp_dtype dtype, cudaStream_t stream) {
    size_t elem = dtype_size(dtype);
    if (elem == 0 || dst_row_stride < dim || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    size_t row_bytes = dim * elem, stride_bytes = dst_row_stride * elem;
    if (row_bytes % 16 == 0 && stride_bytes % 16 == 0 && aligned16(dst) && aligned16(src))
        return launch_broadcast<uint4>(dst, stride_bytes / 16, src, rows, row_bytes / 16, stream);
    if (elem == 4) return launch_broadcast<uint32_t>(dst, dst_row_stride, src, rows, dim, stream);
    return launch_broadcast<uint16_t>(dst, dst_row_stride, src, rows, dim, stream);
}

/* dst (rows, dim) at dst_stride += src (dim); W elements per access. */
template <class D, int W>
static __global__ void add_row_kernel(typename D::S *__restrict__ dst, size_t dst_stride,
                                      const typename D::S *__restrict__ src, size_t rows, size_t dim) {
    size_t r = (size_t)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    typename D::S *d = dst + r * dst_stride;
    for (size_t c = (size_t)threadIdx.x * W; c < dim; c += (size_t)blockDim.x * W) {
        float a[W], b[W];
        load_chunk<D, W>(d + c, a);
        load_chunk<D, W>(src + c, b);
#pragma unroll
        for (int e = 0; e < W; e++) a[e] += b[e];
        store_chunk<D, W>(d + c, a);
    }
}

template <class D>
static cudaError_t launch_add_row(void *dst, size_t dst_stride, const void *src, size_t rows, size_t dim,
                                  cudaStream_t stream) {
    constexpr int V = Vec<D>::W;
    typedef typename D::S S;
    if (dim % V == 0 && dst_stride % V == 0 && aligned16(dst) && aligned16(src)) {
        dim3 block = row_block(dim / V);
        add_row_kernel<D, V><<<row_grid(rows, block), block, 0, stream>>>((S *)dst, dst_stride, (const S *)src, rows,
                                                                          dim);
    } else {
        dim3 block = row_block(dim);
        add_row_kernel<D, 1><<<row_grid(rows, block), block, 0, stream>>>((S *)dst, dst_stride, (const S *)src, rows,
                                                                          dim);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t gpu_add_row(void *dst, size_t dst_row_stride, const void *src, size_t rows, size_t dim,
                                   rmlp_dtype dtype, cudaStream_t stream) {
    if (dtype_size(dtype) == 0 || dst_row_stride < dim || rows > INT32_MAX) return cudaErrorInvalidValue;
    if (rows == 0 || dim == 0) return cudaSuccess;
    switch (dtype) {
    case RMLP_DTYPE_F32: return launch_add_row<F32>(dst, dst_row_stride, src, rows, dim, stream);
    case RMLP_DTYPE_F16: return launch_add_row<F16>(dst, dst_row_stride, src, rows, dim, stream);
    default: return launch_add_row<BF16>(dst, dst_row_stride, src, rows, dim, stream);
    }
}

/* x (n) *= the scale as stored in the dtype, one element per thread. */
template <class D>
static __global__ void scale_kernel(typename D::S *__restrict__ x, size_t n, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = D::store(D::load(x[i]) * D::load(D::store(scale)));
}

extern "C" cudaError_t gpu_scale(void *x, size_t n, double scale, rmlp_dtype dtype, cudaStream_t stream) {
    size_t blocks = (n + 255) / 256;
    if (dtype_size(dtype) == 0 || blocks > INT32_MAX) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    float s = (float)scale; /* transformers' normalizer: the double sqrt as an fp32 tensor, then the dtype */
    switch (dtype) {
    case RMLP_DTYPE_F32: scale_kernel<F32><<<(unsigned)blocks, 256, 0, stream>>>((float *)x, n, s); break;
    case RMLP_DTYPE_F16: scale_kernel<F16><<<(unsigned)blocks, 256, 0, stream>>>((unsigned short *)x, n, s); break;
    default: scale_kernel<BF16><<<(unsigned)blocks, 256, 0, stream>>>((unsigned short *)x, n, s);
    }
    return cudaGetLastError();
}
