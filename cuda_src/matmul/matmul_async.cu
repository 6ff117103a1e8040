// fp32 matrix product C = A.B, row-major, as in matmul.cu: the cp.async rung (sgemm_async.cuh, which the gemm
// family shares). The ladder's last rungs have a file each (matmul_warptile.cu, matmul_streamk.cu): a build
// compiles its whole file, and a tuning trial of one rung paid for the others (the three kernels took 2.5 times
// the nvcc time of the warptile's alone), as every define set of matmul.cu's first rungs once paid for these.

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
