// Row-wise softmax of a rows x cols float32 matrix: y[r][c] = exp(x[r][c] - max_r) / sum_r.
// (expf, fmaxf and __fdividef come with nvcc's implicit cuda_runtime.h: no toolkit header is included, so
// a launch that restates RV's default shares its build.)

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide reduction through shared memory (blockDim.x a multiple of 32, at most 1024).
template <bool MAX>
__device__ float block_reduce(float v, float *smem) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < warps ? smem[lane] : (MAX ? -INFINITY : 0.0f);
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();  // smem is reused by the next reduction
    return v;
}

// One block per row, three passes over the row: the max, the sum of exponentials, the write.
extern "C" __global__ void softmax_block_row(float *y, const float *x, int rows, int cols) {
    __shared__ float smem[32];
    int r = blockIdx.y;
    if (r >= rows) return;  // whole block: the barriers below stay uniform
    const float *xr = x + (size_t)r * cols;
    float *yr = y + (size_t)r * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce<true>(m, smem);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce<false>(s, smem);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}

// One warp per row (blockDim 32 x rows-per-block), online softmax: one pass keeps a running max and
// a sum rescaled whenever the max grows (Milakov & Gimelshein 2018), then one pass writes.
// float4 loads where the row is 16-byte aligned (cols % 4 == 0), scalar otherwise.
__device__ __forceinline__ void online(float &m, float &s, float v) {
    if (v > m) {
#ifndef NO_RESCALE
        s *= expf(m - v);
#endif
        m = v;
    }
    s += expf(v - m);
}

extern "C" __global__ void softmax_warp_online(float *y, const float *x, int rows, int cols) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows) return;  // no block barriers: a warp leaving early is fine
    int lane = threadIdx.x;
    const float *xr = x + (size_t)r * cols;
    float *yr = y + (size_t)r * cols;
    float m = -INFINITY, s = 0.0f;
    bool vec = (cols & 3) == 0;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        for (int c = lane; c < cols / 4; c += 32) {
            float4 v = x4[c];
            online(m, s, v.x); online(m, s, v.y); online(m, s, v.z); online(m, s, v.w);
        }
    } else {
        for (int c = lane; c < cols; c += 32) online(m, s, xr[c]);
    }
    // merge the lanes' (m, s) pairs
    float gm = warp_max(m);
    s = (m == -INFINITY) ? 0.0f : s * expf(m - gm);
    s = warp_sum(s);
    float inv = 1.0f / s;
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        float4 *y4 = reinterpret_cast<float4 *>(yr);
        for (int c = lane; c < cols / 4; c += 32) {
            float4 v = x4[c];
            y4[c] = make_float4(expf(v.x - gm) * inv, expf(v.y - gm) * inv, expf(v.z - gm) * inv, expf(v.w - gm) * inv);
        }
    } else {
        for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - gm) * inv;
    }
}

// One block per row, the row read once: each thread keeps up to RV float4 vectors of it in registers
// (RV x 4 x blockDim.x elements a row; the rest, and rows not 16-byte aligned, are read again from
// global memory), so x is read once and y written once when the row fits: 16 KiB rows at 256 x 4.
#ifndef RV
#define RV 4
#endif

extern "C" __global__ void softmax_block_regs(float *y, const float *x, int rows, int cols) {
    __shared__ float smem[32];
    int r = blockIdx.y;
    if (r >= rows) return;  // whole block: the barriers below stay uniform
    const float *xr = x + (size_t)r * cols;
    float *yr = y + (size_t)r * cols;
    const float4 *x4 = reinterpret_cast<const float4 *>(xr);
    float4 *y4 = reinterpret_cast<float4 *>(yr);
    int kept = (cols & 3) == 0 ? min(cols / 4, RV * (int)blockDim.x) : 0;  // vectors held in registers
    int rest = kept * 4;                                                    // the first element not held
    float4 v[RV];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < RV; ++k) {
        int c = threadIdx.x + k * blockDim.x;
        if (c < kept) {
            v[k] = x4[c];
            m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
        }
    }
    for (int c = rest + threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce<true>(m, smem);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < RV; ++k) {
        int c = threadIdx.x + k * blockDim.x;
        if (c < kept) {
            v[k] = make_float4(expf(v[k].x - m), expf(v[k].y - m), expf(v[k].z - m), expf(v[k].w - m));
            s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
    }
    for (int c = rest + threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce<false>(s, smem);
    float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < RV; ++k) {
        int c = threadIdx.x + k * blockDim.x;
        if (c < kept) y4[c] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
    }
    for (int c = rest + threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
