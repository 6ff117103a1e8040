// fp32 matrix product C = A.B, row-major, as in matmul.cu: the warp-tiling rung (sgemm_async.cuh's pipeline with
// warp tiles), in a file of its own so that its builds (every `cudalab tune matmul --variant warptile` trial is
// one) compile this kernel alone.

#include "sgemm_async.cuh"
#include "warptile.cuh"  // the WT_ defaults, WT_THREADS

extern "C" __global__ void __launch_bounds__(WT_THREADS, WT_MINB)
matmul_warptile(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    sgemm_async<WT_BM, WT_BN, WT_BK, WT_THREADS, WT_MI, WT_NI, WT_STAGES, WT_WM, WT_WN, WT_GROUP, false>(
        A, B, nullptr, C, M, N, K, 1.f, 0.f);
}
