// Broken products for tests/test_mutations_gpu.py: matmul_naive's arguments, C = A.B (row-major,
// A is MxK, B is KxN). 0: correct. 1: drops the last element. 2: drops one warp. 3: drops one block.
// 4: writes one element wrong.
#ifndef MUTATION
#define MUTATION 0
#endif

extern "C" __global__ void matmul_mutant(const float *__restrict__ A, const float *__restrict__ B,
                                         float *__restrict__ C, int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N)
        return;
#if MUTATION == 1
    if (row == M - 1 && col == N - 1)
        return;
#elif MUTATION == 2
    if (blockIdx.x == 0 && blockIdx.y == 0 && (threadIdx.y * blockDim.x + threadIdx.x) / 32 == 1)
        return;
#elif MUTATION == 3
    if (blockIdx.x == 1 && blockIdx.y == 0)
        return;
#endif
    float sum = 0.f;
    for (int k = 0; k < K; ++k)
        sum = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], sum);
#if MUTATION == 4
    if (row == 2 && col == 3)
        sum += 1.0f;
#endif
    C[(size_t)row * N + col] = sum;
}
