// Broken transposes for tests/test_mutations_gpu.py: transpose_naive's arguments, one bug per MUTATION.
// 0: correct. 1: drops the last element. 2: drops one warp. 3: drops one block.
// 4: writes one element wrong. 5: writes into the output's row padding.
#ifndef MUTATION
#define MUTATION 0
#endif

extern "C" __global__ void transpose_mutant(float *out, const float *in, int rows, int cols,
                                            int pitch_in_elem, int pitch_out_elem)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;   // column of in
    int y = blockIdx.y * blockDim.y + threadIdx.y;   // row of in
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
    float v = in[(size_t)y * pitch_in_elem + x];
#if MUTATION == 4
    if (x == 3 && y == 2)
        v += 1.0f;
#endif
    out[(size_t)x * pitch_out_elem + y] = v;
#if MUTATION == 5
    if (y == rows - 1 && x == 1 && pitch_out_elem > rows)
        out[(size_t)x * pitch_out_elem + rows] = v;   // past the end of output row x: padding
#endif
}
