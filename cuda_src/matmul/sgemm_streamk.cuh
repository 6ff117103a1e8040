// Persistent hybrid data-parallel + stream-K fp32 GEMM over sgemm_async.cuh's pieces (its tile,
// pipeline and epilogue): Z = alpha * A.B + beta * C, row-major, A is M x K, B is K x N.
//
// Why. One tile a block leaves the last wave partly empty: 4096^3 in 128 x 256 tiles is 512 tiles
// on 132 SMs (3.88 waves, run as 4), 8192^3 is 2048 (15.52 as 16): about 3% of the SMs' time idle.
//
// Schedule (every block computes it alike from M, N, K and the grid G, which must be co-resident:
// one block an SM, grid = SM count, family.toml's grid = "sm:1"). The T tiles are numbered in
// sa_tile_origin's GROUP order. With T = W*G + R (R > 0), S = R + (WAVES - 1)*G tiles (at most T)
// are stream-K tiles: their K slices (S * slices-a-tile iterations) are cut into G contiguous
// ranges of equal length (to one slice), one a block. A block walks its range in order, so a range
// holds at most: the tail of a tile (its first segment, not starting at k = 0), whole tiles, the
// head of a tile (its last segment, starting at k = 0 and ending before the tile's end). The other
// T - S tiles (whole waves) are data-parallel, each whole on one block. FIRST (the default): the
// stream-K tiles are tiles 0 .. S-1 and every block walks its range first, all starting together;
// else they are the last S and come after the data-parallel tiles. DYNAMIC (the default): a block
// takes the next data-parallel tile from a counter when it is done with the last, as the hardware
// hands out a tiled grid's blocks, so SMs that run a little slower take fewer tiles; else block b
// takes tiles b, b + G, ... (a static split: the slowest SM sets the time).
//
// Fix-up. A segment that does not start at k = 0 (at most one a block: its first) is a partial:
// written to the block's slot of the workspace, then the block's flag is set (release). A segment
// that starts at k = 0 owns the tile: when it does not cover the whole tile, the other segments
// are the first segments of the next blocks whose ranges start inside the tile; the owner waits
// for each one's flag (acquire), adds its partial, resets the flag to 0 (so the next launch starts
// clean) and stores the tile. The partials are added in block order: the result does not depend on
// timing. No deadlock: a block writes its partial before it ever waits, and it waits only for
// later blocks, all resident.
//
// Workspace: G slots of BM * BN floats (a thread's accumulators as float4s, lane-consecutive),
// then G int flags, zero before the first launch. Block 0 never writes a partial (its range starts
// a tile), so flags[0] is the data-parallel tile counter: every block takes from it until it comes
// up empty, once, so a launch takes T - S + G times; the last of them sets it back to 0.

#pragma once

#include "sgemm_async.cuh"

__device__ __forceinline__ int sk_ld_acquire(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(__cvta_generic_to_global(p)) : "memory");
    return v;
}

__device__ __forceinline__ void sk_st_release(int *p, int v)
{
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(__cvta_generic_to_global(p)), "r"(v) : "memory");
}

__device__ __forceinline__ int sk_nsmid()
{
    int n;
    asm("mov.u32 %0, %%nsmid;\n" : "=r"(n));
    return n;
}

// threadIdx.x read afresh (volatile: not hoisted out of the persistent loop, see sa_mainloop).
__device__ __forceinline__ int sk_tid()
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
    return t;
}

// Workspace bytes for a grid of G blocks (the host allocates this; matmul.py's setup).
#define SK_WORKSPACE_BYTES(G, BM, BN) ((size_t)(G) * ((size_t)(BM) * (BN) * 4 + 4))

// The schedule, in shared memory: thread 0 computes it and hands out the block's work a unit (a
// tile's slices [s0, s1)) at a time. Kept out of registers, which the K loop needs (the values are
// read again after it: its asm memory clobbers make the compiler reload them).
struct SkSched {
    int gx, gy, ipt, q, r;   // tiles across and down, slices a tile, the stream-K ranges' split
    int dp_tiles, dp0, sk0;  // data-parallel tiles, the first one's number, the first stream-K tile's
    int dp, it, end;         // this block's cursors: data-parallel (< 0: done), stream-K iteration, its end
    int t, s0, s1;           // the unit at hand (t < 0: none left)
};

template <class Cfg, int GROUP, int WAVES, bool FIRST, bool DYNAMIC, bool GEMM>
__device__ __forceinline__ void sgemm_streamk(const float *__restrict__ A, const float *__restrict__ B,
                                              const float *__restrict__ C, float *__restrict__ Z, int M, int N,
                                              int K, float alpha, float beta, float *__restrict__ ws)
{
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, NT = Cfg::NT, TM = Cfg::TM, TN = Cfg::TN;
    constexpr int NI = Cfg::NI, SLOT = BM * BN / 4;  // float4s a workspace slot
    static_assert(WAVES >= 1, "the stream-K region is the partial wave plus WAVES - 1 full ones");
    __shared__ SkSched sk;
    const int G = gridDim.x, b = blockIdx.x, tid = threadIdx.x;
    float4 *const slots = reinterpret_cast<float4 *>(ws);
    int *const flags = reinterpret_cast<int *>(ws + (size_t)G * BM * BN);
    int *const counter = flags;  // block 0 never writes a partial (its range starts a tile): flags[0] is free
    // int is enough: tiles * slices < 2^29 for any M, N, K whose matrices have < 2^31 elements.
    auto first = [&](int i) { return i * sk.q + min(i, sk.r); };  // where block i's stream-K range starts
    if (tid == 0) {
        const int gx = (N + BN - 1) / BN, gy = (M + BM - 1) / BM, tiles = gx * gy, ipt = (K + BK - 1) / BK;
        const int waves = tiles / G, rem = tiles % G;
        // No stream-K (every tile whole) when there is no partial wave, or when the grid exceeds the
        // SMs (%nsmid: the SM ids' upper bound): the waits need every block resident (one an SM).
        const int sk_tiles = rem == 0 || ipt < 2 || G > sk_nsmid() ? 0 : rem + min(waves, WAVES - 1) * G;
        const int iters = sk_tiles * ipt;
        sk.gx = gx, sk.gy = gy, sk.ipt = ipt, sk.q = iters / G, sk.r = iters % G;
        sk.dp_tiles = tiles - sk_tiles, sk.dp0 = FIRST ? sk_tiles : 0, sk.sk0 = FIRST ? 0 : tiles - sk_tiles;
        sk.dp = DYNAMIC ? 0 : b, sk.it = first(b), sk.end = first(b + 1);
    }

    int rbase, cbase;
    sa_thread_origin<Cfg>(rbase, cbase);
    float acc[TM][TN];

    // Thread 0 hands out the block's work a unit at a time: data-parallel tiles (static: b, b + G,
    // ...; DYNAMIC: the next from a counter, as the hardware hands out the blocks of a tiled grid),
    // and the stream-K range a segment of one tile at a time; FIRST: the stream-K range first.
    auto next_dp = [&]() {
        int idx;
        if constexpr (DYNAMIC) {
            if (sk.dp < 0) return false;
            // Every block grabs until it fails, once: dp_tiles + G grabs a launch; the last resets.
            idx = atomicAdd(counter, 1);
            if (idx == sk.dp_tiles + G - 1) atomicExch(counter, 0);
            if (idx >= sk.dp_tiles) {
                sk.dp = -1;
                return false;
            }
        } else {
            if (sk.dp >= sk.dp_tiles) return false;
            idx = sk.dp;
            sk.dp += G;
        }
        sk.t = sk.dp0 + idx, sk.s0 = 0, sk.s1 = sk.ipt;
        return true;
    };
    auto next_sk = [&]() {
        if (sk.it >= sk.end) return false;
        const int k = sk.it / sk.ipt, tile0 = k * sk.ipt;
        sk.t = sk.sk0 + k, sk.s0 = sk.it - tile0, sk.s1 = min(sk.end, tile0 + sk.ipt) - tile0;
        sk.it = tile0 + sk.s1;
        return true;
    };
    while (true) {
        __syncthreads();  // sk is written; everyone is done with the last unit's shared memory and sk
        if (tid == 0) {
            const bool got = FIRST ? next_sk() || next_dp() : next_dp() || next_sk();
            if (!got) sk.t = -1;
        }
        __syncthreads();
        if (sk.t < 0) break;
        {
            int bx, by;
            sa_tile_origin<GROUP>(sk.t, sk.gx, sk.gy, bx, by);
            sa_zero<Cfg>(acc);
            sa_mainloop<Cfg>(acc, A, B, M, N, K, by * BM, bx * BN, sk.s0, sk.s1, sk.s1 <= K / BK, rbase, cbase,
                             sk_tid());
        }
        const int s0 = sk.s0, s1 = sk.s1, ipt = sk.ipt;
        if (s0 > 0) {  // a partial (this block's first stream-K segment): to its slot, then its flag
            float4 *slot = slots + (size_t)b * SLOT + tid;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    __stcg(slot + (i * NI + ni) * NT, make_float4(acc[i][ni * 4 + 0], acc[i][ni * 4 + 1],
                                                                  acc[i][ni * 4 + 2], acc[i][ni * 4 + 3]));
            __threadfence();
            __syncthreads();
            if (tid == 0) sk_st_release(flags + b, 1);
            continue;
        }
        if (s1 < ipt) {  // the owner of a split tile: add the later blocks' partials, in block order
            const int tile_end = (sk.t - sk.sk0 + 1) * ipt;
            for (int j = b + 1; j < G && first(j) < tile_end; ++j) {
                if (first(j + 1) == first(j)) continue;  // an empty range (fewer iterations than blocks)
                if (tid == 0) {
                    while (sk_ld_acquire(flags + j) == 0) __nanosleep(32);
                    flags[j] = 0;  // consumed: the next launch starts clean
                }
                __syncthreads();
                const float4 *slot = slots + (size_t)j * SLOT + tid;
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int ni = 0; ni < NI; ++ni) {
                        const float4 p = __ldcg(slot + (i * NI + ni) * NT);
                        acc[i][ni * 4 + 0] += p.x;
                        acc[i][ni * 4 + 1] += p.y;
                        acc[i][ni * 4 + 2] += p.z;
                        acc[i][ni * 4 + 3] += p.w;
                    }
            }
        }
        int bx, by;
        sa_tile_origin<GROUP>(sk.t, sk.gx, sk.gy, bx, by);
        sa_store<Cfg, GEMM>(acc, C, Z, M, N, by * BM, bx * BN, rbase, cbase, alpha, beta);
    }
}
