// Tensor-core GEMM C = A.B, row-major: A is M x K, B is K x N (bf16 or fp16, HG_BF16), C is M x N
// fp32, the products accumulated in fp32. Every kernel handles every size: tiles that stick out of
// the matrices are filled with zeros on the way in and cut off on the way out.
//
// Rungs (one idea each):
//   wmma  16x16x16 fragments (nvcuda::wmma) loaded from padded shared tiles; plain loads, one buffer.
//   mma   mma.sync.m16n8k16 fed by ldmatrix from XOR-swizzled shared tiles, filled by a cp.async
//         pipeline HG_STAGES deep; 128 x 256 block tile, 8 warps of 64 x 64, fragments double-buffered.
//   (wgmma: hgemm_wgmma.cu, sm_90a.)

// The mma rung's tile (the family's values: a launch that passes them shares this build, see
// cudalab/restated.py). Defaults come before any toolkit header, which then cannot depend on them.
#ifndef HG_BM
#define HG_BM 128
#endif
#ifndef HG_BN
#define HG_BN 256
#endif
#ifndef HG_BK
#define HG_BK 64
#endif
#ifndef HG_STAGES
#define HG_STAGES 4
#endif

#include "hgemm_common.cuh"

#include <mma.h>

// ---- wmma ------------------------------------------------------------------------------------
// Block tile 128 x 128, K slices of 32; 8 warps as 2 (M) x 4 (N), each a 64 x 32 warp tile of
// 4 x 2 accumulator fragments. Shared rows are padded by 8 elements (16 bytes) so that the rows a
// fragment load reads do not start in the same bank.
#define WM_BM 128
#define WM_BN 128
#define WM_BK 32
#define WM_PAD 8
#define WM_THREADS 256

extern "C" __global__ void __launch_bounds__(WM_THREADS, 2)
hgemm_wmma(const hg_t *__restrict__ A, const hg_t *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    using namespace nvcuda;
    __shared__ __align__(128) hg_t As[WM_BM][WM_BK + WM_PAD];
    __shared__ __align__(128) hg_t Bs[WM_BK][WM_BN + WM_PAD];
    __shared__ __align__(128) float Cs[WM_THREADS / 32][16][16];   // one staging fragment a warp

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / 4, wn = warp % 4;          // warp tile (wm * 64, wn * 32)
    int m0, n0;
    hg_block_origin<8>(WM_BM, WM_BN, m0, n0);
    const bool aligned = hg_rows_aligned(K, N);

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    int ktiles = (K + WM_BK - 1) / WM_BK;
#if HG_MUTATION == 1
    ktiles -= 1;
#endif
    for (int kt = 0; kt < ktiles; ++kt) {
        const int k0 = kt * WM_BK;
        // A: 128 rows x 4 chunks of 8; B: 32 rows x 16 chunks. Two chunks of each a thread.
#pragma unroll
        for (int c = tid; c < WM_BM * (WM_BK / 8); c += WM_THREADS) {
            const int r = c / (WM_BK / 8), ch = (c % (WM_BK / 8)) * 8;
            uint4 v = aligned ? hg_load_chunk_aligned(A, M, K, m0 + r, k0 + ch) : hg_load_chunk_any(A, M, K, m0 + r, k0 + ch);
            *reinterpret_cast<uint4 *>(&As[r][ch]) = v;
        }
#pragma unroll
        for (int c = tid; c < WM_BK * (WM_BN / 8); c += WM_THREADS) {
            const int r = c / (WM_BN / 8), ch = (c % (WM_BN / 8)) * 8;
            uint4 v = aligned ? hg_load_chunk_aligned(B, K, N, k0 + r, n0 + ch) : hg_load_chunk_any(B, K, N, k0 + r, n0 + ch);
            *reinterpret_cast<uint4 *>(&Bs[r][ch]) = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < WM_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, hg_t, wmma::row_major> fa[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, hg_t, wmma::row_major> fb[2];
#pragma unroll
            for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], &As[wm * 64 + i * 16][kk], WM_BK + WM_PAD);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[kk][wn * 32 + j * 16], WM_BN + WM_PAD);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();   // the next slice overwrites the tiles
    }

    // Epilogue: each fragment through the warp's 16 x 16 staging tile, then bounded stores (a lane
    // writes 8 consecutive floats of one row).
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(&Cs[warp][0][0], acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int r = lane / 2, c = (lane % 2) * 8;
            const int row = m0 + wm * 64 + i * 16 + r, col = n0 + wn * 32 + j * 16 + c;
#pragma unroll
            for (int e = 0; e < 8; e += 2) hg_store2(C, M, N, row, col + e, Cs[warp][r][c + e], Cs[warp][r][c + e + 1]);
            __syncwarp();
        }
}

// ---- mma ---------------------------------------------------------------------------------------
// Block tile HG_BM x HG_BN, K slices of HG_BK (32 or 64: rows of A of 64 or 128 bytes), HG_STAGES
// slices in flight through cp.async. 8 warps as 2 (M) x 4 (N), each a 64 x (HG_BN / 4) warp tile of
// m16n8k16 MMAs, operands from ldmatrix (B with .trans: it is stored k-major); the fragments of the
// next 16-wide k step are loaded while the MMAs of this one run (two register sets).
//
// Swizzle: shared rows hold 16-byte chunks; chunk c of row r is stored at chunk c ^ f(r) so that
// the 8 rows one ldmatrix reads (8 lanes' addresses, one chunk each) fall in 8 different 16-byte
// bank groups. A with 4 chunks a row (HG_BK 32: two rows a 128-byte line): f(r) = (r >> 1) & 3;
// A with 8 chunks (HG_BK 64) and B (HG_BN / 8 chunks a row): f(r) = r & 7.
#if HG_BK != 32 && HG_BK != 64
#error "HG_BK must be 32 or 64"
#endif
#define HG_THREADS 256
#define HG_WN (HG_BN / 4)      // warp tile columns
#define HG_MI 4                // 16-row MMA tiles a warp (64 rows)
#define HG_NI (HG_WN / 8)      // 8-column MMA tiles a warp
#define HG_KS (HG_BK / 16)     // 16-wide k steps a slice
#define HG_A_STAGE (HG_BM * HG_BK)
#define HG_B_STAGE (HG_BK * HG_BN)

__device__ __forceinline__ int hg_a_off(int r, int chunk)
{
#if HG_BK == 32
    return r * HG_BK + ((chunk ^ ((r >> 1) & 3)) * 8);
#else
    return r * HG_BK + ((chunk ^ (r & 7)) * 8);
#endif
}
__device__ __forceinline__ int hg_b_off(int r, int chunk) { return r * HG_BN + ((chunk ^ (r & 7)) * 8); }

__device__ __forceinline__ void hg_ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void hg_ldmatrix_x4_trans(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void hg_mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." HG_MMA_TYPE "." HG_MMA_TYPE ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Copy K slice `kt` into stage `s`: A 128 x 4 chunks, B 32 x (HG_BN / 8) chunks, spread over the
// block (consecutive threads take consecutive chunks of a row: coalesced). Whole-chunk sizes copy
// asynchronously (zeros outside); other sizes load element by element and store to shared.
__device__ __forceinline__ void hg_load_stage(const hg_t *__restrict__ A, const hg_t *__restrict__ B, hg_t *As, hg_t *Bs,
                                              int M, int N, int K, int m0, int n0, int kt, bool aligned)
{
    const int k0 = kt * HG_BK;
    const int tid = threadIdx.x;
    constexpr int A_CH = HG_BK / 8, B_CH = HG_BN / 8;
#pragma unroll
    for (int c = tid; c < HG_BM * A_CH; c += HG_THREADS) {
        const int r = c / A_CH, ch = c % A_CH;
        const int gr = m0 + r, gc = k0 + ch * 8;
        hg_t *dst = As + hg_a_off(r, ch);
        if (aligned) {
            const bool in = gr < M && gc < K;
            hg_cp_async16(dst, in ? (const void *)(A + (size_t)gr * K + gc) : (const void *)A, in);
        } else {
            *reinterpret_cast<uint4 *>(dst) = hg_load_chunk_any(A, M, K, gr, gc);
        }
    }
#pragma unroll
    for (int c = tid; c < HG_BK * B_CH; c += HG_THREADS) {
        const int r = c / B_CH, ch = c % B_CH;
        const int gr = k0 + r, gc = n0 + ch * 8;
        hg_t *dst = Bs + hg_b_off(r, ch);
        if (aligned) {
            const bool in = gr < K && gc < N;
            hg_cp_async16(dst, in ? (const void *)(B + (size_t)gr * N + gc) : (const void *)B, in);
        } else {
            *reinterpret_cast<uint4 *>(dst) = hg_load_chunk_any(B, K, N, gr, gc);
        }
    }
}

// The A and B fragments of 16-wide k step ks of a stage. A (x4): lane l reads row (l % 16) of a
// 16-row tile, chunk (l / 16) of the step. B (x4.trans): lane l reads k row (l % 16) of the step,
// chunk (l / 16) of a 16-column pair of n tiles.
__device__ __forceinline__ void hg_load_frags(const hg_t *as, const hg_t *bs, int ks, int a_row, int a_chk, int b_row,
                                              int b_chk, uint32_t (&af)[HG_MI][4], uint32_t (&bf)[HG_NI][2])
{
#pragma unroll
    for (int i = 0; i < HG_MI; ++i)
        hg_ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], hg_smem_addr(as + hg_a_off(a_row + i * 16, ks * 2 + a_chk)));
#pragma unroll
    for (int j = 0; j < HG_NI; j += 2)
        hg_ldmatrix_x4_trans(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1],
                             hg_smem_addr(bs + hg_b_off(ks * 16 + b_row, b_chk + j)));
}

extern "C" __global__ void __launch_bounds__(HG_THREADS, 1)
hgemm_mma(const hg_t *__restrict__ A, const hg_t *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
    extern __shared__ __align__(128) unsigned char hg_smem[];
    hg_t *As = reinterpret_cast<hg_t *>(hg_smem);                  // HG_STAGES x HG_A_STAGE
    hg_t *Bs = As + HG_STAGES * HG_A_STAGE;                        // HG_STAGES x HG_B_STAGE

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / 4, wn = warp % 4;       // warp tile origin (wm * 64, wn * HG_WN)
    int m0, n0;
    hg_block_origin<8>(HG_BM, HG_BN, m0, n0);
    const bool aligned = hg_rows_aligned(K, N);

    float acc[HG_MI][HG_NI][4];
#pragma unroll
    for (int i = 0; i < HG_MI; ++i)
#pragma unroll
        for (int j = 0; j < HG_NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    int ktiles = (K + HG_BK - 1) / HG_BK;
#if HG_MUTATION == 1
    ktiles -= 1;
#endif

    // Prologue: the first HG_STAGES - 1 slices in flight (a group committed for each, empty or not,
    // so that wait_group counts slices).
#pragma unroll
    for (int s = 0; s < HG_STAGES - 1; ++s) {
        if (s < ktiles) hg_load_stage(A, B, As + s * HG_A_STAGE, Bs + s * HG_B_STAGE, M, N, K, m0, n0, s, aligned);
        hg_cp_async_commit();
    }

    // ldmatrix lane addresses (see hg_load_frags).
    const int a_row = wm * 64 + (lane % 16);
    const int a_chk = lane / 16;
    const int b_row = lane % 16;
    const int b_chk = wn * (HG_WN / 8) + lane / 16;

    for (int kt = 0; kt < ktiles; ++kt) {
        hg_cp_async_wait<HG_STAGES - 2>();
        __syncthreads();   // slice kt is in shared memory for every thread; slice kt - 1's stage is free

        const int next = kt + HG_STAGES - 1;
        if (next < ktiles) {
            const int s = next % HG_STAGES;
            hg_load_stage(A, B, As + s * HG_A_STAGE, Bs + s * HG_B_STAGE, M, N, K, m0, n0, next, aligned);
        }
        hg_cp_async_commit();

        const hg_t *as = As + (kt % HG_STAGES) * HG_A_STAGE;
        const hg_t *bs = Bs + (kt % HG_STAGES) * HG_B_STAGE;
        uint32_t af[2][HG_MI][4];
        uint32_t bf[2][HG_NI][2];
        hg_load_frags(as, bs, 0, a_row, a_chk, b_row, b_chk, af[0], bf[0]);
#pragma unroll
        for (int ks = 0; ks < HG_KS; ++ks) {
            if (ks + 1 < HG_KS)   // the next step's fragments, in flight while these MMAs run
                hg_load_frags(as, bs, ks + 1, a_row, a_chk, b_row, b_chk, af[(ks + 1) & 1], bf[(ks + 1) & 1]);
#pragma unroll
            for (int i = 0; i < HG_MI; ++i)
#pragma unroll
                for (int j = 0; j < HG_NI; ++j) hg_mma16816(acc[i][j], af[ks & 1][i], bf[ks & 1][j][0], bf[ks & 1][j][1]);
        }
    }
    hg_cp_async_wait<0>();   // no copy may still be writing shared memory when the block exits

    // Epilogue: accumulator (i, j) holds rows lane / 4 and lane / 4 + 8 of its 16 x 8 tile, columns
    // 2 * (lane % 4) and the next: a quad writes 32 contiguous bytes of a row.
    const int row0 = m0 + wm * 64 + lane / 4;
    const int col0 = n0 + wn * HG_WN + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < HG_MI; ++i)
#pragma unroll
        for (int j = 0; j < HG_NI; ++j) {
            hg_store2(C, M, N, row0 + i * 16, col0 + j * 8, acc[i][j][0], acc[i][j][1]);
            hg_store2(C, M, N, row0 + i * 16 + 8, col0 + j * 8, acc[i][j][2], acc[i][j][3]);
        }
}
