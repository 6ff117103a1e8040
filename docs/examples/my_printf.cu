// A kernel that prints: its printf output is its row's, not a flood between the progress lines.
//   cudalab transpose --n 1024 --variant naive --add docs/examples/my_printf.cu:my_printf@block=32x8,tile=32x32
// Each launch prints 2,560 lines (ten blocks of 256 threads); the table shows the first five under the row
// and counts the rest, and --json keeps every line of the row (its first 1 MiB) in extra.stdout.
#include <cstdio>

extern "C" __global__ void my_printf(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)
{
    if (blockIdx.y == 0 && blockIdx.x < 10)
        printf("%d %d\n", blockIdx.x, threadIdx.y * blockDim.x + threadIdx.x);
    int x = blockIdx.x * TILE_X + threadIdx.x;  // input column
    for (int y = blockIdx.y * TILE_Y + threadIdx.y; y < blockIdx.y * TILE_Y + TILE_Y; y += blockDim.y)
        if (x < cols && y < rows)
            out[(size_t)x * pitch_out + y] = in[(size_t)y * pitch_in + x];
}
