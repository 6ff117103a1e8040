// Broken shared-memory demos for tests/test_mutations_gpu.py. The kernel keeps the name
// setRowReadRow, so the family's model un-permutes its output as row-row's (int *out, one 32x32
// tile per block, block b writes out[b * 1024 ...]).
// 0: correct. 1: drops the last element. 2: drops one warp (warp 1 of block 0). 3: drops one block.
// 4: writes one element wrong.
#ifndef BDIMX
#define BDIMX 32
#endif
#ifndef BDIMY
#define BDIMY 32
#endif
#ifndef MUTATION
#define MUTATION 0
#endif

#define BLOCK_BASE ((unsigned int)blockIdx.x * blockDim.x * blockDim.y)

extern "C" __global__ void setRowReadRow(int *out)
{
    __shared__ int tile[BDIMY][BDIMX];
    unsigned int idx = threadIdx.y * blockDim.x + threadIdx.x;
    tile[threadIdx.y][threadIdx.x] = BLOCK_BASE + idx;
    __syncthreads();
#if MUTATION == 1
    if (blockIdx.x == gridDim.x - 1 && idx == blockDim.x * blockDim.y - 1)
        return;
#elif MUTATION == 2
    if (blockIdx.x == 0 && idx / 32 == 1)
        return;
#elif MUTATION == 3
    if (blockIdx.x == 1)
        return;
#endif
    int v = tile[threadIdx.y][threadIdx.x];
#if MUTATION == 4
    if (blockIdx.x == 0 && idx == 7)
        v += 1;
#endif
    out[BLOCK_BASE + idx] = v;
}
