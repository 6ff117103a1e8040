// Broken copies for tests/test_mutations_gpu.py: copy_naive's arguments, one bug per MUTATION.
// 0: correct (the control). 1: drops the last element. 2: drops one warp (warp 1 of block 0,0).
// 3: drops one block (block 1,0). 4: writes one element wrong. 5: writes into the row padding.
#ifndef MUTATION
#define MUTATION 0
#endif

extern "C" __global__ void copy_mutant(float *out, const float *in, int rows, int cols, int pitch)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= cols || y >= rows)
        return;
#if MUTATION == 1
    if (x == cols - 1 && y == rows - 1)
        return;
#elif MUTATION == 2
    if (blockIdx.x == 0 && blockIdx.y == 0 && (threadIdx.y * blockDim.x + threadIdx.x) / 32 == 1)
        return;
#elif MUTATION == 3
    if (blockIdx.x == 1 && blockIdx.y == 0)
        return;
#endif
    float v = in[(size_t)y * pitch + x];
#if MUTATION == 4
    if (x == 3 && y == 2)
        v += 1.0f;
#endif
    out[(size_t)y * pitch + x] = v;
#if MUTATION == 5
    if (x == cols - 1 && y == 1 && pitch > cols)
        out[(size_t)y * pitch + cols] = v;   // one element past the row's end: padding
#endif
}
