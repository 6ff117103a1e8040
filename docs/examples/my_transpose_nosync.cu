// A deliberately wrong copy of my_transpose.cu (a missing barrier), to see how cudalab reports it:
//   cudalab transpose --add docs/examples/my_transpose_nosync.cu:my_transpose_nosync@block=32x8,tile=32x32
// The family's convention (cudalab list transpose): out is cols x rows, in is rows x cols, both pitched.
// TILE_X / TILE_Y come from the launch (tile=32x32); blockDim.y rows of threads move the tile in steps.

extern "C" __global__ void my_transpose_nosync(float *out, const float *in, int rows, int cols, int pitch_in,
                                        int pitch_out)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];  // +1: the column reads below hit 32 different banks
    int x = blockIdx.x * TILE_X + threadIdx.x;   // input column
    int y = blockIdx.y * TILE_Y + threadIdx.y;   // input row
    for (int j = 0; j < TILE_Y; j += blockDim.y)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * pitch_in + x];
    // BUG: no __syncthreads() here: threads read tile elements other warps may not have written yet
    x = blockIdx.y * TILE_Y + threadIdx.x;       // output column = input row
    y = blockIdx.x * TILE_X + threadIdx.y;       // output row = input column
    for (int j = 0; j < TILE_X; j += blockDim.y)
        if (x < rows && y + j < cols)
            out[(size_t)(y + j) * pitch_out + x] = tile[threadIdx.x][threadIdx.y + j];
}
