// fp32 matrix product C = A.B, row-major: A is M x K, B is K x N, C is M x N (no padding).
// The ladder from one thread per element to register-blocked, double-buffered tiles, then
// cp.async pipelines and warp tiles; the last rungs live in sgemm.cuh and sgemm_async.cuh, which
// the gemm family shares.

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

// ---- the async-copy and warp-tiling rungs (sgemm_async.cuh) -------------------------------------

#include "sgemm_async.cuh"

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
matmul_async(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    sgemm_async<128, 128, AS_BK, 256, 2, 2, AS_STAGES, 0, 0, 0, false>(A, B, nullptr, C, M, N, K, 1.f, 0.f);
}

// warptile: a WT_BM x WT_BN block tile split into WT_WM x WT_WN warp tiles; each lane owns
// (4*WT_MI) x (4*WT_NI) outputs; WT_STAGES cp.async stages of WT_BK; blocks walk WT_GROUP block
// rows at a time (L2 reuse). Threads: (WT_BM / WT_WM) * (WT_BN / WT_WN) * 32, at least WT_MINB
// blocks an SM. The defaults are the tuned shape: 128 x 256 tile, 8 warps of 64 x 64, 8 x 16 per
// lane (1 block an SM, up to 255 registers a thread). Shared: SA_SMEM_BYTES(WT_BM, WT_BN, WT_BK, WT_STAGES).
#ifndef WT_BM
#define WT_BM 128
#endif
#ifndef WT_BN
#define WT_BN 256
#endif
#ifndef WT_BK
#define WT_BK 16
#endif
#ifndef WT_WM
#define WT_WM 64
#endif
#ifndef WT_WN
#define WT_WN 64
#endif
#ifndef WT_MI
#define WT_MI 2
#endif
#ifndef WT_NI
#define WT_NI 4
#endif
#ifndef WT_STAGES
#define WT_STAGES 3
#endif
#ifndef WT_MINB
#define WT_MINB 1
#endif
#ifndef WT_GROUP
#define WT_GROUP 8
#endif
#define WT_THREADS ((WT_BM / WT_WM) * (WT_BN / WT_WN) * 32)

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MINB)
matmul_warptile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    sgemm_async<WT_BM, WT_BN, WT_BK, WT_THREADS, WT_MI, WT_NI, WT_STAGES, WT_WM, WT_WN, WT_GROUP, false>(
        A, B, nullptr, C, M, N, K, 1.f, 0.f);
}

// ---- stream-K (sgemm_streamk.cuh) ----------------------------------------------------------------

#include "sgemm_streamk.cuh"

// streamk: warptile's tile, pipeline and epilogue (the WT_ macros) from a persistent grid of one
// block an SM: whole tiles data-parallel but for the last partial wave and SK_WAVES - 1 full ones,
// whose K slices are split evenly over all blocks. ws: SK_WORKSPACE_BYTES(gridDim.x, WT_BM, WT_BN),
// its flags zero before the first launch (each launch leaves them zero).
#ifndef SK_WAVES
#define SK_WAVES 2
#endif
#ifndef SK_FIRST
#define SK_FIRST 1
#endif
#ifndef SK_DYNAMIC
#define SK_DYNAMIC 1
#endif

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MINB)
matmul_streamk(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K,
               float *__restrict__ ws)
{
    sgemm_streamk<SaCfg<WT_BM, WT_BN, WT_BK, WT_THREADS, WT_MI, WT_NI, WT_STAGES, WT_WM, WT_WN>, WT_GROUP, SK_WAVES,
                  SK_FIRST != 0, SK_DYNAMIC != 0, false>(A, B, nullptr, C, M, N, K, 1.f, 0.f, ws);
}
