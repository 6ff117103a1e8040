// Multi-stage cp.async fp32 GEMM body shared by the matmul and gemm families (gemm includes it as
// "../matmul/sgemm_async.cuh"): Z = alpha * A.B + beta * C, all row-major, A is M x K, B is K x N.
//
// Pipeline. STAGES shared-memory buffers; each K slice (BK wide) of A and B is copied from global
// to shared memory with cp.async, straight into shared memory (no register staging, no store
// instructions), STAGES - 1 slices ahead of the one being multiplied. One barrier per slice:
// after it, slice t has landed (cp.async.wait_group) and everyone has finished multiplying slice
// t - 1, whose buffer the next copy may then overwrite.
//
// Layouts. B rows are copied 16 bytes at a time (cp.async.cg) into Bs[k][n]. A is stored
// transposed, As[k][m], so that a thread reads the 4 consecutive rows it needs at one k as one
// float4: a 16-byte copy cannot transpose, so A moves in 4-byte copies (cp.async.ca), lanes along
// k (coalesced: a warp reads BK consecutive floats of 32 / BK rows) and rows padded by 4 floats
// (the transposing writes of a warp then land in different banks for BK = 8).
//
// Thread tile. Each thread owns TM x TN outputs in registers (TM = 4*MI rows as MI float4 groups
// RSM apart, TN = 4*NI columns as NI float4 groups CS apart), so every shared read is a 16-byte
// vector and a warp's reads are consecutive vectors (no bank conflicts). WM == 0 spreads the
// threads over the block tile like matmul dbuf (16 x 16 threads, groups 64 apart): the async
// rung. WM > 0 gives each warp a compact WM x WN warp tile (LY x LX lanes, LY = WM / TM,
// LX = WN / TN): the warp-tiling rung.
//
// Edges. Any M, N, K: a copy that would read outside A or B asks cp.async for 0 source bytes,
// which zero-fills its shared bytes, and only stores inside Z happen. When B's rows are not
// 16-byte aligned (N % 4 != 0) B moves in 4-byte copies too (uniform per launch).
//
// Two K loops. Blocks whose tile lies inside M and N, when B's rows are 16-byte aligned and the
// slices they multiply are all whole (K a multiple of BK, or a K range that ends before K's last
// partial slice), run a copy of the K loop with no bound arithmetic: base pointers and shared
// offsets are computed once and the copies of one slice differ by constants (about 90% of the
// loop's instructions are then FFMA, against 72% with per-copy checks, which cost 15% of the
// speed). The other blocks run the checked loop.
//
// Pieces. SaCfg holds one configuration's constants; sa_thread_origin places a thread in the block
// tile, sa_tile_origin turns a tile number into its block row and column (GROUP order),
// sa_mainloop multiplies the K slices [s0, s1) of one tile into a thread's accumulators, and
// sa_store writes them to Z (the alpha/beta epilogue when GEMM). sgemm_async is one tile a block
// over all of K; sgemm_streamk.cuh runs the same pieces from a persistent grid.

#pragma once

__device__ __forceinline__ void sa_cp16(float *smem, const float *gmem, bool valid)
{
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const size_t g = __cvta_generic_to_global(gmem);
    const int bytes = valid ? 16 : 0;  // 0 source bytes: 16 zero bytes written
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(bytes) : "memory");
}

__device__ __forceinline__ void sa_cp4(float *smem, const float *gmem, bool valid)
{
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const size_t g = __cvta_generic_to_global(gmem);
    const int bytes = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(g), "r"(bytes) : "memory");
}

// Interior copies: every source byte is inside the matrix, no source-size operand.
__device__ __forceinline__ void sa_cp4_in(unsigned smem, const float *gmem)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem), "l"(__cvta_generic_to_global(gmem)) : "memory");
}

__device__ __forceinline__ void sa_cp16_in(unsigned smem, const float *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(__cvta_generic_to_global(gmem)) : "memory");
}

__device__ __forceinline__ void sa_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void sa_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

template <bool B>
struct SaBool {
    static constexpr bool value = B;
};

// Dynamic shared memory bytes for one configuration (family.toml's `shared` must match).
#define SA_SMEM_BYTES(BM, BN, BK, STAGES) ((STAGES) * ((BK) * ((BM) + 4) + (BK) * (BN)) * 4)

// One configuration: a BM x BN block tile, K slices of BK, NT threads, MI x NI float4 groups a
// thread, STAGES buffers, WM x WN warp tiles (WM == 0: threads spread over the block tile).
// SERP: the FFMA order of one k step (sa_mainloop): serpentine instead of row by row.
template <int BM_, int BN_, int BK_, int NT_, int MI_, int NI_, int STAGES_, int WM_, int WN_, bool SERP_ = false>
struct SaCfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, NT = NT_, MI = MI_, NI = NI_, STAGES = STAGES_;
    static constexpr int WM = WM_, WN = WN_;
    static constexpr bool SERP = SERP_;
    static constexpr int TM = 4 * MI, TN = 4 * NI;
    static constexpr int AST = BM + 4, BST = BN;                // shared row strides (floats)
    static constexpr int ASZ = BK * AST, BSZ = BK * BST;        // one stage of A and of B
    static constexpr int LA = BM * BK / NT, LB = BK * BN / 4 / NT;  // copies per thread: 4-byte (A), 16-byte (B)
    static_assert(LA * NT == BM * BK && LB * NT * 4 == BK * BN && NT % BK == 0, "copies must tile evenly");
    static_assert(STAGES >= 2, "at least two stages");
    // Layout: rows rbase + RSM*mi + r, columns cbase + CS*ni + c (r, c < 4).
    static constexpr int LX = WM ? WN / TN : 8;
    static constexpr int RSM = WM ? (32 / LX) * 4 : BM / MI, CS = WM ? LX * 4 : BN / NI;
    static_assert(WM ? (WM % TM == 0 && WN % TN == 0 && (WM / TM) * (WN / TN) == 32 &&
                        (BM / WM) * (BN / WN) * 32 == NT)
                     : ((BM / TM) * (BN / TN) == NT && (BN / TN) % 8 == 0), "threads must tile the block");
    // Copy coordinates: A lanes run along k (RA rows apart from one copy to the next), B lanes along
    // n (RB rows apart).
    static constexpr int RA = NT / BK, BV = BN / 4, RB = NT / BV;
    static_assert(NT % BK == 0 && NT % BV == 0, "copy lanes must tile a row");
};

// This thread's first row and column inside the block tile.
template <class Cfg>
__device__ __forceinline__ void sa_thread_origin(int &rbase, int &cbase)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if constexpr (Cfg::WM > 0) {
        constexpr int WX = Cfg::BN / (Cfg::WM > 0 ? Cfg::WN : 1);
        rbase = (warp / WX) * Cfg::WM + (lane / Cfg::LX) * 4;
        cbase = (warp % WX) * Cfg::WN + (lane % Cfg::LX) * 4;
    } else {
        constexpr int WXS = Cfg::BN / Cfg::TN / 8;  // warps across; a warp is 8 x 4 threads
        rbase = ((warp / WXS) * 4 + (lane >> 3)) * 4;
        cbase = ((warp % WXS) * 8 + (lane & 7)) * 4;
    }
}

// Tile number bid (row-major over gx x gy tiles) to its tile column bx and row by. GROUP > 0 walks
// GROUP tile rows at a time down the grid (consecutive tiles share B's column panels and a few A
// row panels in L2).
template <int GROUP>
__device__ __forceinline__ void sa_tile_origin(int bid, int gx, int gy, int &bx, int &by)
{
    if constexpr (GROUP > 0) {
        const int per = GROUP * gx, first = (bid / per) * GROUP;
        const int rows = min(gy - first, GROUP);
        by = first + (bid % per) % rows;
        bx = (bid % per) / rows;
    } else {
        by = bid / gx;
        bx = bid % gx;
    }
}

template <class Cfg>
__device__ __forceinline__ void sa_zero(float (&acc)[Cfg::TM][Cfg::TN])
{
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0.f;
}

// acc += the product of the tile at (row0, col0) over K slices [s0, s1) (slice s is k in
// [s*BK, s*BK + BK) clipped to K). whole: the caller knows every slice of the range is whole
// (s1 * BK <= K), so interior tiles may take the unchecked copies. tid: threadIdx.x (a persistent
// caller passes it opaquely, so that the thread's copy addresses are computed again each tile, not
// held in registers across its loop). Starts by filling the pipeline and ends with every copy landed,
// but without a barrier after the last slice: a caller that multiplies again with the same shared
// memory must __syncthreads() first.
template <class Cfg>
__device__ __forceinline__ void sa_mainloop(float (&acc)[Cfg::TM][Cfg::TN], const float *__restrict__ A,
                                            const float *__restrict__ B, int M, int N, int K, int row0, int col0,
                                            int s0, int s1, bool whole, int rbase, int cbase,
                                            int tid = threadIdx.x)
{
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, NT = Cfg::NT, MI = Cfg::MI, NI = Cfg::NI;
    constexpr int STAGES = Cfg::STAGES, TM = Cfg::TM, TN = Cfg::TN, AST = Cfg::AST, BST = Cfg::BST;
    constexpr int ASZ = Cfg::ASZ, BSZ = Cfg::BSZ, LA = Cfg::LA, LB = Cfg::LB, RSM = Cfg::RSM, CS = Cfg::CS;
    constexpr int RA = Cfg::RA, BV = Cfg::BV, RB = Cfg::RB;

    extern __shared__ __align__(16) float sa_smem[];
    float *As = sa_smem;
    float *Bs = sa_smem + STAGES * ASZ;

    const bool bvec = (N & 3) == 0;
    const int ka = tid % BK, ma = tid / BK, nb = (tid % BV) * 4, kb = tid / BV;
    // Interior blocks (the tile inside M and N, B rows 16-byte aligned) copy full slices with no
    // bounds arithmetic: base pointers and shared offsets are computed once, the copies differ by
    // constants. Edge blocks and the last partial slice take the checked path.
    const bool interior = bvec && row0 + BM <= M && col0 + BN <= N;
    // Based at slice s0: the loop's copies of slice s0 + t are then at t * BK, as for a block that
    // starts at k = 0 (a persistent caller's varying s0 would otherwise add 64-bit arithmetic to
    // every slice's addresses: about 0.6% more instructions in a loop bound by FFMA issue).
    const float *pa = A + (size_t)(row0 + ma) * K + ka + (size_t)s0 * BK;
    const float *pb = B + (size_t)(kb + s0 * BK) * N + col0 + nb;
    const size_t stra = (size_t)RA * K, strb = (size_t)RB * N;
    const unsigned sa0 = static_cast<unsigned>(__cvta_generic_to_shared(As + ka * AST + ma));
    const unsigned sb0 = static_cast<unsigned>(__cvta_generic_to_shared(Bs + kb * BST + nb));

    auto load_fast = [&](int stage, int t) {  // slice s0 + t
        const float *ga = pa + t * BK;
        const float *gb = pb + (size_t)(t * BK) * N;
        const unsigned sa = sa0 + stage * ASZ * 4, sb = sb0 + stage * BSZ * 4;
#pragma unroll
        for (int l = 0; l < LA; ++l) sa_cp4_in(sa + l * RA * 4, ga + l * stra);
#pragma unroll
        for (int l = 0; l < LB; ++l) sa_cp16_in(sb + l * RB * BST * 4, gb + l * strb);
    };
    auto load_checked = [&](int stage, int t) {  // slice s0 + t
        const int k0 = (s0 + t) * BK;
        float *as = As + stage * ASZ, *bs = Bs + stage * BSZ;
#pragma unroll 1
        for (int l = 0; l < LA; ++l) {
            const int f = tid + l * NT;
            const int m = f / BK, k = f % BK;
            const int gr = row0 + m, gk = k0 + k;
            const bool ok = gr < M && gk < K;
            sa_cp4(as + k * AST + m, ok ? A + (size_t)gr * K + gk : A, ok);
        }
#pragma unroll 1
        for (int l = 0; l < LB; ++l) {
            const int f = tid + l * NT;
            const int k = f / (BN / 4), n = (f % (BN / 4)) * 4;
            const int gk = k0 + k, gc = col0 + n;
            float *dst = bs + k * BST + n;
            if (bvec) {
                const bool ok = gk < K && gc < N;
                sa_cp16(dst, ok ? B + (size_t)gk * N + gc : B, ok);
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const bool ok = gk < K && gc + c < N;
                    sa_cp4(dst + c, ok ? B + (size_t)gk * N + gc + c : B, ok);
                }
            }
        }
    };

    // The K loop, compiled twice: interior blocks whose slices are all whole never test a bound.
    auto pipeline = [&](auto fast) {
        auto load = [&](int stage, int t) {
            if constexpr (decltype(fast)::value)
                load_fast(stage, t);
            else
                load_checked(stage, t);
        };
        const int slices = s1 - s0;
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < slices) load(s, s);
            sa_commit();  // one group per slice, empty ones too: the wait count stays uniform
        }
        int rs = 0, ws = STAGES - 1;  // the stages read and written in this iteration
        for (int t = 0; t < slices; ++t) {
            sa_wait<STAGES - 2>();  // this thread's copies of slice t have landed ...
            __syncthreads();        // ... everyone's too, and slice t - 1's buffer is free
            const int nt = t + STAGES - 1;
            if (nt < slices) load(ws, nt);
            sa_commit();
            const float *as = As + rs * ASZ + rbase;
            const float *bs = Bs + rs * BSZ + cbase;
            rs = rs == STAGES - 1 ? 0 : rs + 1;
            ws = ws == STAGES - 1 ? 0 : ws + 1;
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                float a[TM], b[TN];
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) {
                    const float4 v = *reinterpret_cast<const float4 *>(as + k * AST + mi * RSM);
                    a[mi * 4 + 0] = v.x;
                    a[mi * 4 + 1] = v.y;
                    a[mi * 4 + 2] = v.z;
                    a[mi * 4 + 3] = v.w;
                }
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    const float4 v = *reinterpret_cast<const float4 *>(bs + k * BST + ni * CS);
                    b[ni * 4 + 0] = v.x;
                    b[ni * 4 + 1] = v.y;
                    b[ni * 4 + 2] = v.z;
                    b[ni * 4 + 3] = v.w;
                }
                // SERP (streamk): odd rows walk the columns backwards, so each row's first FFMA shares
                // its b register with the last one's. The order changes how ptxas schedules and allocates
                // the loop: ncu on an H100 at 4096^3, streamk row order -> serpentine: short_scoreboard
                // stalls 0.18 -> 0.15 per issue, wait 0.04 -> 0.03, dispatch 0.20 -> 0.19, issue slots
                // busy 81.1% -> 82.0% (same instruction count), 96.5% -> 97.5% of cuBLAS. async and
                // warptile lose 2-3% with it, so they keep the row order. Each acc[i][j] sums the same
                // products in the same order either way.
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int jj = 0; jj < TN; ++jj) {
                        const int j = Cfg::SERP && (i & 1) ? TN - 1 - jj : jj;
                        acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                    }
            }
        }
    };
    if (interior && whole)
        pipeline(SaBool<true>{});
    else
        pipeline(SaBool<false>{});
}

// Epilogue: float4 stores along rows where Z's rows are 16-byte aligned and the group is inside;
// element stores at the right edge. GEMM reads C only when beta != 0.
template <class Cfg, bool GEMM>
__device__ __forceinline__ void sa_store(const float (&acc)[Cfg::TM][Cfg::TN], const float *__restrict__ C,
                                         float *__restrict__ Z, int M, int N, int row0, int col0, int rbase,
                                         int cbase, float alpha, float beta)
{
    constexpr int TM = Cfg::TM, NI = Cfg::NI, RSM = Cfg::RSM, CS = Cfg::CS;
    const bool bvec = (N & 3) == 0;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + rbase + (i >> 2) * RSM + (i & 3);
        if (r >= M) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int c = col0 + cbase + ni * CS;
            const size_t idx = (size_t)r * N + c;
            float v[4] = {acc[i][ni * 4 + 0], acc[i][ni * 4 + 1], acc[i][ni * 4 + 2], acc[i][ni * 4 + 3]};
            if (bvec && c + 3 < N) {
                if (GEMM) {
                    if (beta != 0.f) {
                        const float4 cin = __ldg(reinterpret_cast<const float4 *>(C + idx));
                        v[0] = fmaf(alpha, v[0], beta * cin.x);
                        v[1] = fmaf(alpha, v[1], beta * cin.y);
                        v[2] = fmaf(alpha, v[2], beta * cin.z);
                        v[3] = fmaf(alpha, v[3], beta * cin.w);
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j) v[j] *= alpha;
                    }
                }
                *reinterpret_cast<float4 *>(Z + idx) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (c + j < N)
                        Z[idx + j] = !GEMM ? v[j] : beta != 0.f ? fmaf(alpha, v[j], beta * C[idx + j]) : alpha * v[j];
            }
        }
    }
}

// One tile a block (grid: the tiles of Z, x along N), the whole of K.
template <int BM, int BN, int BK, int NT, int MI, int NI, int STAGES, int WM, int WN, int GROUP, bool GEMM>
__device__ __forceinline__ void sgemm_async(const float *__restrict__ A, const float *__restrict__ B,
                                            const float *__restrict__ C, float *__restrict__ Z,
                                            int M, int N, int K, float alpha, float beta)
{
    using Cfg = SaCfg<BM, BN, BK, NT, MI, NI, STAGES, WM, WN>;
    int rbase, cbase;
    sa_thread_origin<Cfg>(rbase, cbase);
    int bx = blockIdx.x, by = blockIdx.y;
    if constexpr (GROUP > 0) sa_tile_origin<GROUP>(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, bx, by);
    const int row0 = by * BM, col0 = bx * BN;

    float acc[Cfg::TM][Cfg::TN];
    sa_zero<Cfg>(acc);
    sa_mainloop<Cfg>(acc, A, B, M, N, K, row0, col0, 0, (K + BK - 1) / BK, K % BK == 0, rbase, cbase);
    sa_store<Cfg, GEMM>(acc, C, Z, M, N, row0, col0, rbase, cbase, alpha, beta);
}
