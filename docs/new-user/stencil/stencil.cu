// Five-point Jacobi step on a rows x cols float32 grid; the border is copied unchanged.
__device__ __forceinline__ bool border(int r, int c, int rows, int cols) {
    return r == 0 || c == 0 || r == rows - 1 || c == cols - 1;
}

extern "C" __global__ void stencil_global(float *out, const float *a, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    size_t i = (size_t)r * cols + c;
    out[i] = border(r, c, rows, cols) ? a[i] : 0.25f * (a[i - cols] + a[i + cols] + a[i - 1] + a[i + 1]);
}

#ifndef TX
#define TX 32
#define TY 32
#define RPT 4
#endif

extern "C" __global__ void stencil_shared(float *out, const float *a, int rows, int cols) {
    __shared__ float t[TY + 2][TX + 2];
    int c0 = blockIdx.x * TX, r0 = blockIdx.y * TY;
    // the tile and its halo, (TY + 2) x (TX + 2), loaded by the whole block
    for (int k = threadIdx.y * blockDim.x + threadIdx.x; k < (TY + 2) * (TX + 2); k += blockDim.x * blockDim.y) {
        int tr = k / (TX + 2), tc = k % (TX + 2);
        int r = min(max(r0 + tr - 1, 0), rows - 1), c = min(max(c0 + tc - 1, 0), cols - 1);
        t[tr][tc] = a[(size_t)r * cols + c];
    }
    __syncthreads();
    int c = c0 + threadIdx.x;
    for (int k = 0; k < RPT; ++k) {
        int ty = threadIdx.y + k * blockDim.y, r = r0 + ty;
        if (r >= rows || c >= cols) continue;
        float v = border(r, c, rows, cols) ? t[ty + 1][threadIdx.x + 1]
                : 0.25f * (t[ty][threadIdx.x + 1] + t[ty + 2][threadIdx.x + 1] + t[ty + 1][threadIdx.x] + t[ty + 1][threadIdx.x + 2]);
        out[(size_t)r * cols + c] = v;
    }
}
