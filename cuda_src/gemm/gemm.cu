// fp32 GEMM Z = alpha * A.B + beta * C, row-major: A is M x K, B is K x N, C and Z are M x N.
// Z is a separate output so that every timed launch does the same work (C is never
// overwritten); with beta == 0, C is not read (the BLAS convention).
// The register-blocked, async-copy and warp-tiled kernels are the matmul family's, with the
// alpha/beta epilogue.

#include "../matmul/sgemm.cuh"

extern "C" __global__ void gemm_naive(const float *__restrict__ A, const float *__restrict__ B,
                                      const float *__restrict__ C, float *__restrict__ Z,
                                      int M, int N, int K, float alpha, float beta)
{
    // One thread per output element, operands from global memory: the baseline.
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    const float *a = A + (size_t)row * K;
    float sum = 0.f;
    for (int k = 0; k < K; ++k)
        sum = fmaf(a[k], B[(size_t)k * N + col], sum);
    const size_t idx = (size_t)row * N + col;
    Z[idx] = beta != 0.f ? fmaf(alpha, sum, beta * C[idx]) : alpha * sum;
}

extern "C" __global__ void __launch_bounds__(SG_THREADS, 2)
gemm_regblock(const float *__restrict__ A, const float *__restrict__ B, const float *__restrict__ C,
              float *__restrict__ Z, int M, int N, int K, float alpha, float beta)
{
    // 128x128 tile, 8x8 outputs per thread, float4 loads, one shared buffer; alpha/beta epilogue.
    sgemm_128x128<false, true>(A, B, C, Z, M, N, K, alpha, beta);
}

extern "C" __global__ void __launch_bounds__(SG_THREADS, 2)
gemm_dbuf(const float *__restrict__ A, const float *__restrict__ B, const float *__restrict__ C,
          float *__restrict__ Z, int M, int N, int K, float alpha, float beta)
{
    // Double-buffered shared memory with register prefetch; alpha/beta epilogue.
    sgemm_128x128<true, true>(A, B, C, Z, M, N, K, alpha, beta);
}

// ---- the matmul async-copy and warp-tiling rungs with the alpha/beta epilogue -------------------

#include "../matmul/sgemm_async.cuh"

// async: dbuf's 128 x 128 tile and 8 x 8 thread layout, with AS_STAGES slices of AS_BK in flight
// through cp.async instead of register prefetch. Dynamic shared memory:
// SA_SMEM_BYTES(128, 128, AS_BK, AS_STAGES) (family.toml's `shared`).
#ifndef AS_BK
#define AS_BK 16
#endif
#ifndef AS_STAGES
#define AS_STAGES 3
#endif

extern "C" __global__ void __launch_bounds__(256, 2)
gemm_async(const float *__restrict__ A, const float *__restrict__ B, const float *__restrict__ C,
           float *__restrict__ Z, int M, int N, int K, float alpha, float beta)
{
    sgemm_async<128, 128, AS_BK, 256, 2, 2, AS_STAGES, 0, 0, 0, true>(A, B, C, Z, M, N, K, alpha, beta);
}

// warptile: the matmul warptile's shape (its WT_ defaults and WT_THREADS, ../matmul/warptile.cuh) with the alpha/beta
// epilogue.
#include "../matmul/warptile.cuh"

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MINB)
gemm_warptile(const float *__restrict__ A, const float *__restrict__ B, const float *__restrict__ C,
              float *__restrict__ Z, int M, int N, int K, float alpha, float beta)
{
    sgemm_async<WT_BM, WT_BN, WT_BK, WT_THREADS, WT_MI, WT_NI, WT_STAGES, WT_WM, WT_WN, WT_GROUP, true>(
        A, B, C, Z, M, N, K, alpha, beta);
}
