// fp32 matrix product C = A.B, row-major, as in matmul.cu: stream-K (sgemm_streamk.cuh), the warptile made
// persistent, in a file of its own so that its builds compile this kernel alone.

#include "sgemm_streamk.cuh"
#include "warptile.cuh"  // warptile's tile and pipeline: the WT_ defaults, WT_THREADS

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
