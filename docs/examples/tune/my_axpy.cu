// A memory-bound 1-D kernel as a user writes it for tuning: z = a * x + y over n floats.
//
// Each thread handles EPT vectors of VW floats (VW = 1, 2 or 4: float, float2, float4 loads),
// the vectors of one thread a block apart, so a warp's loads stay contiguous. A block covers
// BLOCK_X * EPT * VW elements: the grid divisor of the launch (kernel_tuner's
// grid_div_x = ["block_size_x", "EPT", "VW"], cudalab's tile=block_x*EPT*VW). The tail that does
// not fill a vector is done one float at a time by the last block.

#if !defined(BLOCK_X) && defined(block_size_x)  // the same file under kernel_tuner, which names it so
#define BLOCK_X block_size_x
#endif
#ifndef EPT
#define EPT 4
#endif
#ifndef VW
#define VW 4
#endif

#if VW == 4
typedef float4 vec_t;
#elif VW == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif

__device__ __forceinline__ float4 axpy_v(float a, float4 x, float4 y)
{
    return make_float4(a * x.x + y.x, a * x.y + y.y, a * x.z + y.z, a * x.w + y.w);
}
__device__ __forceinline__ float2 axpy_v(float a, float2 x, float2 y)
{
    return make_float2(a * x.x + y.x, a * x.y + y.y);
}
__device__ __forceinline__ float axpy_v(float a, float x, float y) { return a * x + y; }

extern "C" __global__ void my_axpy(float *z, const float *x, const float *y, float a, int n)
{
    const int vectors = n / VW;  // whole vectors; the rest is the tail
    const vec_t *xv = reinterpret_cast<const vec_t *>(x);
    const vec_t *yv = reinterpret_cast<const vec_t *>(y);
    vec_t *zv = reinterpret_cast<vec_t *>(z);
    const long base = (long)blockIdx.x * blockDim.x * EPT + threadIdx.x;
#pragma unroll
    for (int e = 0; e < EPT; ++e) {
        const long v = base + (long)e * blockDim.x;
        if (v < vectors)
            zv[v] = axpy_v(a, xv[v], yv[v]);
    }
    if (blockIdx.x == gridDim.x - 1)
        for (int i = vectors * VW + threadIdx.x; i < n; i += blockDim.x)
            z[i] = a * x[i] + y[i];
}
