// fp32 matrix product C = A.B, row-major: A is M x K, B is K x N, C is M x N (no padding).
// The ladder's first rungs, from one thread per element to register-blocked, double-buffered tiles
// (sgemm.cuh, which the gemm family shares); the cp.async, warp-tile and stream-K rungs are in
// matmul_async.cu, matmul_warptile.cu and matmul_streamk.cu, so that a run of these rungs (say --block 16)
// does not build those (8 s of nvcc).

#include "sgemm.cuh"

extern "C" __global__ void matmul_naive(const float *__restrict__ A, const float *__restrict__ B,
                                        float *__restrict__ C, int M, int N, int K)
{
    // One thread per C element; x runs along a row of C, so a warp reads one A element
    // (broadcast) and 32 consecutive B elements (coalesced) per k. Every operand comes from
    // global memory (L1/L2): 2 loads per FMA.
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    const float *a = A + (size_t)row * K;
    float sum = 0.f;
    for (int k = 0; k < K; ++k)
        sum = fmaf(a[k], B[(size_t)k * N + col], sum);
    C[(size_t)row * N + col] = sum;
}

#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void matmul_tiled(const float *__restrict__ A, const float *__restrict__ B,
                                        float *__restrict__ C, int M, int N, int K)
{
    // The textbook shared-memory kernel: a TILE x TILE block loads one tile of A and one of B,
    // multiplies them from shared memory, and moves on along K. Each global element is read
    // M/TILE (or N/TILE) times instead of M (or N). No bounds checks: the launcher refuses
    // M, N or K that are not multiples of TILE.
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float sum = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = A[(size_t)row * K + k0 + tx];
        Bs[ty][tx] = B[(size_t)(k0 + ty) * N + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            sum = fmaf(As[ty][k], Bs[k][tx], sum);
        __syncthreads();  // the next iteration overwrites the tiles
    }
    C[(size_t)row * N + col] = sum;
}

#ifndef MAXTILE
#define MAXTILE 32
#endif

extern "C" __global__ void matmul_tiled_any(const float *__restrict__ A, const float *__restrict__ B,
                                            float *__restrict__ C, int M, int N, int K, int tile)
{
    // The tiled kernel for any M, N, K: the tile width is a run-time argument (block tile x tile,
    // tile <= MAXTILE), loads outside the matrices put zeros in the tile so the partial last
    // tile adds nothing, and only threads inside C store. Every thread reaches every barrier
    // (no early return), which the barrier requires.
    __shared__ float As[MAXTILE][MAXTILE + 1];
    __shared__ float Bs[MAXTILE][MAXTILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * tile + ty, col = blockIdx.x * tile + tx;
    float sum = 0.f;
    for (int k0 = 0; k0 < K; k0 += tile) {
        const int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.f;
        __syncthreads();
        const int kn = min(tile, K - k0);  // guarded k loop: the last tile may be partial
        for (int k = 0; k < kn; ++k)
            sum = fmaf(As[ty][k], Bs[k][tx], sum);
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = sum;
}

extern "C" __global__ void __launch_bounds__(SG_THREADS, 2)
matmul_regblock(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    // 128x128 tile, 8x8 outputs per thread in registers, float4 loads, one shared buffer.
    sgemm_128x128<false, false>(A, B, nullptr, C, M, N, K, 1.f, 0.f);
}

extern "C" __global__ void __launch_bounds__(SG_THREADS, 2)
matmul_dbuf(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    // The same with double-buffered shared memory and the next slice prefetched to registers.
    sgemm_128x128<true, false>(A, B, nullptr, C, M, N, K, 1.f, 0.f);
}
