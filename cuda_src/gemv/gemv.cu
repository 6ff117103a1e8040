// fp32 GEMV z = alpha * A.x + beta * y: A is M x N row-major, x has N elements, y and z M.
// z is a separate output so every timed launch does the same work; with beta == 0, y is not
// read (the BLAS convention). Every kernel handles any M and N.

__device__ __forceinline__ float gemv_out(float dot, const float *__restrict__ y, int row, float alpha, float beta)
{
    return beta != 0.f ? fmaf(alpha, dot, beta * y[row]) : alpha * dot;
}

extern "C" __global__ void gemv_naive(const float *__restrict__ A, const float *__restrict__ x,
                                      const float *__restrict__ y, float *__restrict__ z,
                                      int M, int N, float alpha, float beta)
{
    // One thread per row, walking along it: at each step the 32 threads of a warp read 32
    // addresses N floats apart, 32 memory transactions for 128 useful bytes (uncoalesced).
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float *a = A + (size_t)row * N;
    float sum = 0.f;
    for (int j = 0; j < N; ++j)
        sum = fmaf(a[j], __ldg(x + j), sum);
    z[row] = gemv_out(sum, y, row, alpha, beta);
}

extern "C" __global__ void gemv_coalesced(const float *__restrict__ At, const float *__restrict__ x,
                                          const float *__restrict__ y, float *__restrict__ z,
                                          int M, int N, float alpha, float beta)
{
    // Still one thread per row, but A is given transposed (At is N x M, i.e. A column-major):
    // at step j the warp reads At[j][row..row+31], 128 consecutive bytes, one transaction.
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float sum = 0.f;
    for (int j = 0; j < N; ++j)
        sum = fmaf(At[(size_t)j * M + row], __ldg(x + j), sum);
    z[row] = gemv_out(sum, y, row, alpha, beta);
}

#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" __global__ void gemv_warp_row(const float *__restrict__ A, const float *__restrict__ x,
                                         const float *__restrict__ y, float *__restrict__ z,
                                         int M, int N, float alpha, float beta)
{
    // One warp per row (block 32 x R: R rows per block). The lanes read the row in 16-byte
    // vectors, UNROLL of them in flight per lane, then add their partial sums with shuffles.
    // A is streamed (__ldcs: evict-first) so that x, read by every warp, stays in cache.
    const int lane = threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M) return;  // the whole warp leaves together: the shuffles below stay full-warp
    const float *a = A + (size_t)row * N;
    float sum = 0.f;
    if ((N & 3) == 0) {  // rows start 16-byte aligned
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        const int n4 = N >> 2;
        int j = lane;
        for (; j + 32 * (UNROLL - 1) < n4; j += 32 * UNROLL) {
            float4 av[UNROLL], xv[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) av[u] = __ldcs(a4 + j + 32 * u);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) xv[u] = __ldg(x4 + j + 32 * u);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                sum += av[u].x * xv[u].x + av[u].y * xv[u].y + av[u].z * xv[u].z + av[u].w * xv[u].w;
        }
        for (; j < n4; j += 32) {
            const float4 av = __ldcs(a4 + j), xv = __ldg(x4 + j);
            sum += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
        }
    } else {  // rows not 16-byte aligned: coalesced scalar loads
        for (int j = lane; j < N; j += 32)
            sum = fmaf(__ldcs(a + j), __ldg(x + j), sum);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0)
        z[row] = gemv_out(sum, y, row, alpha, beta);
}

// ---- one block per row ---------------------------------------------------------------------------

#ifndef GB_UNROLL
#define GB_UNROLL 2
#endif
// GB_HINT: A loads 0 = __ldg, 1 = __ldcs (evict-first), 2 = ld.global.nc.L1::no_allocate.L2::256B
// (A skips L1, which x keeps to itself, and each L2 miss fetches 256 bytes: the next lanes' data).
#ifndef GB_HINT
#define GB_HINT 2
#endif

__device__ __forceinline__ float4 gb_load(const float4 *p)
{
#if GB_HINT == 2
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
#elif GB_HINT == 1
    return __ldcs(p);
#else
    return __ldg(p);
#endif
}

extern "C" __global__ void gemv_block_row(const float *__restrict__ A, const float *__restrict__ x,
                                          const float *__restrict__ y, float *__restrict__ z,
                                          int M, int N, float alpha, float beta)
{
    // Block T x R: R rows per block, T threads (whole warps) per row. A row is read in sweeps of
    // T * GB_UNROLL 16-byte vectors (8192 floats for T = 1024, GB_UNROLL = 2: a whole row with
    // every load in flight at once), partial sums meet through warp shuffles and one shared word
    // per warp. Small blocks with short lives: the grid of M / R blocks streams through the SMs
    // without the tail that long-lived warps leave (warp-row: 8192 rows of 32 KB on 132 SMs run
    // in 1.5 to 2 waves of warps, the last one part-empty).
    __shared__ float part[32];
    const int tid = threadIdx.x, T = blockDim.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int lane = tid & 31, w = tid >> 5, wpr = T >> 5;
    float sum = 0.f;
    if (row < M) {
        const float *a = A + (size_t)row * N;
        if ((N & 3) == 0) {
            const float4 *a4 = reinterpret_cast<const float4 *>(a);
            const float4 *x4 = reinterpret_cast<const float4 *>(x);
            const int n4 = N >> 2;
            int j = tid;
            for (; j + T * (GB_UNROLL - 1) < n4; j += T * GB_UNROLL) {
                float4 av[GB_UNROLL], xv[GB_UNROLL];
#pragma unroll
                for (int u = 0; u < GB_UNROLL; ++u) av[u] = gb_load(a4 + j + T * u);
#pragma unroll
                for (int u = 0; u < GB_UNROLL; ++u) xv[u] = __ldg(x4 + j + T * u);
#pragma unroll
                for (int u = 0; u < GB_UNROLL; ++u)
                    sum += av[u].x * xv[u].x + av[u].y * xv[u].y + av[u].z * xv[u].z + av[u].w * xv[u].w;
            }
            for (; j < n4; j += T) {
                const float4 av = gb_load(a4 + j), xv = __ldg(x4 + j);
                sum += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
            }
        } else {
            for (int j = tid; j < N; j += T)
                sum = fmaf(__ldcs(a + j), __ldg(x + j), sum);
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) part[threadIdx.y * wpr + w] = sum;
    __syncthreads();  // every thread gets here: rows past M only skip their loads
    if (w == 0) {
        float s = lane < wpr ? part[threadIdx.y * wpr + lane] : 0.f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0 && row < M) z[row] = gemv_out(s, y, row, alpha, beta);
    }
}
