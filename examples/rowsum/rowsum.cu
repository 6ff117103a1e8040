// Row sums: y[r] = x[r][0] + ... + x[r][cols - 1].

#ifndef COLS_SKIPPED
#define COLS_SKIPPED 0  // the wrong twin sets 1: the last column is never added
#endif

// extent (rows,): thread r of the 1-D grid sums row r.
extern "C" __global__ void row_thread(float *y, const float *x, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *row = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += row[c];
    y[r] = s;
}

// extent (32, rows), block 32 x k: each warp (one threadIdx.y) sums row blockIdx.y * k + threadIdx.y.
extern "C" __global__ void row_warp(float *y, const float *x, int rows, int cols) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows) return;  // the whole warp leaves together: the shuffles below see 32 lanes
    const float *row = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols - COLS_SKIPPED; c += 32) s += row[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) y[r] = s;
}
