// Broken GEMVs for tests/test_mutations_gpu.py: gemv_naive's arguments, z = alpha*A.x + beta*y.
// 0: correct. 1: drops the last row. 2: drops one warp (warp 1 of block 0). 3: drops one block.
// 4: writes one element wrong.
#ifndef MUTATION
#define MUTATION 0
#endif

extern "C" __global__ void gemv_mutant(const float *__restrict__ A, const float *__restrict__ x,
                                       const float *__restrict__ y, float *__restrict__ z,
                                       int M, int N, float alpha, float beta)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M)
        return;
#if MUTATION == 1
    if (row == M - 1)
        return;
#elif MUTATION == 2
    if (blockIdx.x == 0 && threadIdx.x / 32 == 1)
        return;
#elif MUTATION == 3
    if (blockIdx.x == 1)
        return;
#endif
    float sum = 0.f;
    for (int j = 0; j < N; ++j)
        sum = fmaf(A[(size_t)row * N + j], x[j], sum);
    float v = alpha * sum + (beta != 0.f ? beta * y[row] : 0.f);
#if MUTATION == 4
    if (row == 5)
        v += 1.0f;
#endif
    z[row] = v;
}
