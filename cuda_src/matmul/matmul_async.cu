// fp32 matrix product C = A.B, row-major, as in matmul.cu: the ladder's last rungs, cp.async pipelines,
// warp tiles and stream-K (sgemm_async.cuh, which the gemm family shares, and sgemm_streamk.cuh). Their
// own file: with matmul.cu's first rungs they made one 8 s build that every define set of those paid.

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
#ifndef SK_SERP
#define SK_SERP 1  // the serpentine FFMA order of a k step (sgemm_async.cuh, SaCfg::SERP)
#endif

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MINB)
matmul_streamk(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K,
               float *__restrict__ ws)
{
    sgemm_streamk<SaCfg<WT_BM, WT_BN, WT_BK, WT_THREADS, WT_MI, WT_NI, WT_STAGES, WT_WM, WT_WN, SK_SERP != 0>, WT_GROUP, SK_WAVES,
                  SK_FIRST != 0, SK_DYNAMIC != 0, false>(A, B, nullptr, C, M, N, K, 1.f, 0.f, ws);
}
