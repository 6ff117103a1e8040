// Shared pieces of the hgemm kernels: the element type, a tile loader that handles every size,
// the grouped block order, and the bounded fp32 epilogue.
//
// C = A.B, row-major: A is M x K, B is K x N (16-bit elements: bf16 or fp16), C is M x N fp32.
// HG_BF16 = 1 (the family's --dtype bfloat16) or 0 (float16) picks the element type.
#pragma once

// Defaults before the toolkit headers (cudalab/restated.py: a launch that restates them shares the build).
#ifndef HG_BF16
#define HG_BF16 1
#endif
#ifndef HG_MUTATION
#define HG_MUTATION 0  // 1: a kernel broken on purpose for the mutation tests (drop the last K tile)
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#if HG_BF16
typedef __nv_bfloat16 hg_t;
#define HG_MMA_TYPE "bf16"
#else
typedef __half hg_t;
#define HG_MMA_TYPE "f16"
#endif


// Rows of 16-bit elements whose 16-byte chunks are whole and aligned: K and N multiples of 8
// (cudaMalloc'd bases are 256-byte aligned). Then a chunk is either wholly inside the matrix or
// wholly outside it, and one 16-byte copy (or a zero fill) moves it.
__device__ __forceinline__ bool hg_rows_aligned(int K, int N) { return (K % 8) == 0 && (N % 8) == 0; }

__device__ __forceinline__ uint32_t hg_smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; src_bytes = 0 writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void hg_cp_async16(void *smem, const void *gmem, bool valid)
{
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(hg_smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes));
}
__device__ __forceinline__ void hg_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void hg_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// One 16-byte chunk of row `row`, elements col..col+7 of a rows x cols row-major matrix, read
// element by element with bounds (zeros outside): the path for sizes whose rows are not whole chunks.
__device__ __forceinline__ uint4 hg_load_chunk_any(const hg_t *__restrict__ src, int rows, int cols, int row, int col)
{
    union {
        uint4 v;
        unsigned short h[8];
    } u;
    const unsigned short *s = reinterpret_cast<const unsigned short *>(src);
#pragma unroll
    for (int e = 0; e < 8; ++e)
        u.h[e] = (row < rows && col + e < cols) ? s[(size_t)row * cols + col + e] : (unsigned short)0;
    return u.v;
}

// A chunk of a whole-chunk matrix (see hg_rows_aligned): one 16-byte load, or zeros outside.
__device__ __forceinline__ uint4 hg_load_chunk_aligned(const hg_t *__restrict__ src, int rows, int cols, int row, int col)
{
    if (row < rows && col < cols)
        return __ldg(reinterpret_cast<const uint4 *>(src + (size_t)row * cols + col));
    return make_uint4(0, 0, 0, 0);
}

// The block's tile origin, blocks walked GROUP block rows at a time (column by column inside a
// group) so that the blocks in flight share rows of A and columns of B in L2.
template <int GROUP>
__device__ __forceinline__ void hg_block_origin(int BM, int BN, int &m0, int &n0)
{
    const int tiles_n = gridDim.x, tiles_m = gridDim.y;
    const int pid = blockIdx.y * tiles_n + blockIdx.x;
    const int per_group = GROUP * tiles_n;
    const int group = pid / per_group;
    const int first_m = group * GROUP;
    const int rows_here = min(tiles_m - first_m, GROUP);
    const int in_group = pid - group * per_group;
    m0 = (first_m + in_group % rows_here) * BM;
    n0 = (in_group / rows_here) * BN;
}

// Store two adjacent fp32 results at (row, col), (row, col + 1), each only where it is inside C.
__device__ __forceinline__ void hg_store2(float *__restrict__ C, int M, int N, int row, int col, float v0, float v1)
{
    if (row >= M) return;
    float *p = C + (size_t)row * N + col;
    if ((N % 2) == 0 && col + 1 < N) {
        *reinterpret_cast<float2 *>(p) = make_float2(v0, v1);   // 8-byte aligned: N and col even
    } else {
        if (col < N) p[0] = v0;
        if (col + 1 < N) p[1] = v1;
    }
}
