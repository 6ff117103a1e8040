// Onesweep: a stable LSD radix sort with 8-bit digits and decoupled look-back (the sort family's fastest
// rung; the other rungs are in sort.cu, what both use in sort_common.cuh).
//
// The element type comes in as ELEM_T (int or float; -DELEM_T=int), ITEMS keys a thread.

#include "sort_common.cuh"

// --- onesweep: stable LSD radix sort, 8-bit digits, one histogram pass and decoupled look-back ----------
//
// After Adinets & Merrill, "Onesweep: a faster least significant digit radix sort for GPUs" (2022).
// The 4-bit radix above reads the keys twice a digit (histogram, then scatter) and runs a global scan
// between the two: 24 launches for 8 digits. Onesweep takes 8-bit digits (4 passes) and reads the keys
// once a digit: one upfront launch counts all four digit histograms at once, and each scatter pass finds
// where its tile's keys of digit d go by looking back at the tiles before it, in the same launch:
//
//   sort_onesweep_init   zero the scratch: the 4 x 256 digit counts, the 4 tile counters and the
//                        4 x tiles x 256 look-back words (every run starts from zero, so runs repeat)
//   sort_onesweep_hist   every key once: counts of digit d at byte p of the key, for all 4 bytes
//   sort_onesweep_pass   x 4 (byte 0 .. 3): rank in the tile, look back, scatter
//
// A pass block takes its tile from an atomic counter, not from blockIdx: a tile's predecessors were
// taken by blocks that already run, so waiting on them can never wait on a block that is not
// scheduled (forward progress on any GPU, under any tool). In the tile, warp w owns keys
// [w * 32 * ITEMS, (w + 1) * 32 * ITEMS), slot i of lane l being key w * 32 * ITEMS + 32 * i + l: loads
// are coalesced and (warp, i, lane) is the input order. A tile goes through three steps:
//
//   count   each warp counts its keys' digits in its own 256 counters (shared-memory atomics); a scan
//           over the warps gives each warp its start per digit and the tile's count per digit, which
//           the block publishes at once (before ranking: its successors' look-back waits less); a
//           scan over the digits gives where each digit starts in the tile
//   rank    item by item (input order), each warp finds the lanes that share a lane's digit (8
//           ballots, one per digit bit: a warp-level multi-split; OS_MATCH=1 takes __match_any_sync,
//           measured slower on an H100); the lowest such lane takes that many places from the warp's
//           counter for the digit, and each key goes straight to its place in the tile's digit order
//           in shared memory: start of the digit + the warp's start + keys before it
//   write   thread t takes slots t, t + blockDim.x, ... of the ordered tile: keys of one digit are
//           contiguous in the output, so neighbouring threads write neighbouring addresses
//
// Look-back, per digit d (one thread each), between rank and write: word [tile][d] of the pass's status
// array packs a flag in bits 30-31 and a count below. The block's count carries flag AGGREGATE; the
// walk goes back over the tiles before it, adding counts: a predecessor's AGGREGATE is added and the
// walk goes on, its PREFIX (the inclusive count over every tile up to it, the digit's start in the
// output included) is added and ends the walk, a zero word (not yet published) is read again. Then the
// block publishes its own PREFIX. Tile 0 publishes PREFIX straight away: the digit's start (an
// exclusive scan of the upfront histogram) plus its count. Each word is one 32-bit store, so flag and
// count arrive together: relaxed loads and stores at GPU scope are enough.
//
// Requirements: blockDim.x a multiple of 32 and >= 256 (threads 0..255 own one digit each) and at most
// BLOCK (compiled: __launch_bounds__); dynamic shared memory
// 4 * ITEMS * blockDim.x (the ordered tile) + 1024 * warps (the counters) bytes; n < 2^30 (the counts'
// bits).
//
// MUTATION (tests only; 0 in every real build): 1 the look-back drops the predecessor's inclusive
// prefix, 2 the tail tile stores nothing, 3 ranks equal digits in reverse lane order (not stable).
// A mutant's stores skip places past n (its later passes read keys it mangled), so it fails by its
// answer, not by a fault.

#ifndef MUTATION
#define MUTATION 0
#endif

#define OS_BITS 8
#define OS_RADIX 256
#define OS_PASSES 4
#define OS_COUNTERS 32                    // words for the 4 tile counters (padded: status stays 16-byte aligned)
#define OS_FLAG_AGGREGATE 0x40000000u
#define OS_FLAG_PREFIX 0x80000000u
#define OS_COUNT_MASK 0x3fffffffu
#ifndef BLOCK
#define BLOCK 256                         // the pass kernel's blockDim.x (the family passes block_x)
#endif
// Blocks an SM must hold (the register cap): 3 of 256 threads (80 registers a thread) keeps 24 keys a
// thread in registers; 4 (64 registers) spills them.
#ifndef OS_MIN_BLOCKS
#define OS_MIN_BLOCKS (768 / BLOCK > 0 ? 768 / BLOCK : 1)
#endif

__device__ __forceinline__ unsigned os_digit(elem_t k, int pass)
{
    return (radix_image(k) >> (OS_BITS * pass)) & (OS_RADIX - 1);
}

__device__ __forceinline__ int os_from_bits(unsigned u, int) { return (int)u; }
__device__ __forceinline__ float os_from_bits(unsigned u, float) { return __uint_as_float(u); }

// The lanes of this warp whose digit equals this lane's (d: a digit, or 0xffffffff for an empty slot).
// OS_MATCH 0 (default): a ballot per digit bit, plus one on the slot being filled when the tile has
// empty slots; 1: one __match_any_sync. On an H100 at 2^24 int32 keys (16 items, 256 threads) the
// ballots took 0.53 ms a sort and match_any 0.74 (time both with -D OS_MATCH=0,1).
#ifndef OS_MATCH
#define OS_MATCH 0
#endif
template <bool FULL>
__device__ __forceinline__ unsigned os_peers(unsigned d)
{
#if OS_MATCH
    return __match_any_sync(FULL_MASK, d);
#else
    unsigned peers = FULL_MASK;
#pragma unroll
    for (int b = 0; b < OS_BITS; ++b) {
        const unsigned vote = __ballot_sync(FULL_MASK, (d >> b) & 1u);
        peers &= ((d >> b) & 1u) ? vote : ~vote;
    }
    if (!FULL) {
        const unsigned filled = __ballot_sync(FULL_MASK, d < OS_RADIX);
        peers &= d < OS_RADIX ? filled : ~filled;
    }
    return peers;
#endif
}

__device__ __forceinline__ unsigned os_load_relaxed(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void os_store_relaxed(unsigned *p, unsigned v)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// Zero words [0, words) of the scratch (words a multiple of 4; 16-byte aligned).
extern "C" __global__ void sort_onesweep_init(unsigned *scratch, unsigned words)
{
    uint4 *s4 = reinterpret_cast<uint4 *>(scratch);
    const unsigned quads = words / 4;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < quads; i += gridDim.x * blockDim.x)
        s4[i] = make_uint4(0, 0, 0, 0);
}

// All four digit histograms in one read of the keys: counts[p * 256 + d] += keys whose byte p (of the
// radix image) is d. Each block counts in shared memory over a grid-stride loop of 4-key loads, then
// adds its counts to the global ones. blockDim.x: any multiple of 32.
extern "C" __global__ void sort_onesweep_hist(const elem_t *__restrict__ in, int n, unsigned *counts)
{
    __shared__ unsigned hist[OS_PASSES * OS_RADIX];
    for (unsigned i = threadIdx.x; i < OS_PASSES * OS_RADIX; i += blockDim.x)
        hist[i] = 0;
    __syncthreads();
    const unsigned quads = (unsigned)n / 4;
    const uint4 *in4 = reinterpret_cast<const uint4 *>(in);
    for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
        const uint4 v = in4[q];
        const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned u = radix_image(os_from_bits(w[j], elem_t()));
#pragma unroll
            for (int p = 0; p < OS_PASSES; ++p)
                atomicAdd(&hist[p * OS_RADIX + ((u >> (OS_BITS * p)) & (OS_RADIX - 1))], 1u);
        }
    }
    // The last n % 4 keys, one thread each, in block 0.
    if (blockIdx.x == 0 && threadIdx.x < ((unsigned)n & 3u)) {
        const unsigned u = radix_image(in[4 * quads + threadIdx.x]);
#pragma unroll
        for (int p = 0; p < OS_PASSES; ++p)
            atomicAdd(&hist[p * OS_RADIX + ((u >> (OS_BITS * p)) & (OS_RADIX - 1))], 1u);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < OS_PASSES * OS_RADIX; i += blockDim.x)
        if (hist[i])
            atomicAdd(&counts[i], hist[i]);
}

// Exclusive scan of v over threads 0..255 of the block (threads >= 256 pass 0 and get garbage);
// every thread of the block must call it. Uses warp_sum[8]; ends with a barrier.
__device__ __forceinline__ unsigned os_block_scan256(unsigned v, unsigned *warp_sum)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned incl = warp_inclusive_scan(v, lane);
    if (lane == 31 && warp < OS_RADIX / 32)
        warp_sum[warp] = incl;
    __syncthreads();
    unsigned before = 0;
#pragma unroll
    for (unsigned w = 0; w < OS_RADIX / 32; ++w)
        before += w < warp ? warp_sum[w] : 0u;
    __syncthreads();                      // warp_sum may be written again by the next call
    return before + incl - v;
}

// Load, count, publish and rank one tile's keys into `sorted` in digit order (FULL: no key of the tile
// is past n, no guard). A slot past n gets a digit no key has: it ranks apart and counts nowhere.
// Leaves the tile's count of digit d in `total` of thread d, and s_local[d].
template <bool FULL>
__device__ __forceinline__ void os_rank(const elem_t *__restrict__ in, unsigned n, int pass, unsigned first,
                                        unsigned *count, elem_t *sorted, unsigned start, unsigned tile,
                                        unsigned *status, unsigned *s_local, unsigned *s_warp_sum, unsigned &total)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    elem_t key[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        key[i] = FULL || first + 32 * i < n ? in[first + 32 * i] : elem_t(0);
    unsigned *mine = count + warp * OS_RADIX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (FULL || first + 32 * i < n)
            atomicAdd(&mine[os_digit(key[i], pass)], 1u);
    __syncthreads();

    // Per digit (thread d): each warp's start among the tile's keys of d, and the tile's count of d,
    // published at once: tile 0 its inclusive prefix, the others their aggregate.
    total = 0;
    if (threadIdx.x < OS_RADIX) {
        const unsigned d = threadIdx.x;
        for (unsigned w = 0; w < warps; ++w) {
            const unsigned c = count[w * OS_RADIX + d];
            count[w * OS_RADIX + d] = total;
            total += c;
        }
        os_store_relaxed(&status[tile * OS_RADIX + d],
                         tile == 0 ? (OS_FLAG_PREFIX | (start + total)) : (OS_FLAG_AGGREGATE | total));
    }
    const unsigned local = os_block_scan256(total, s_warp_sum);   // ends with a barrier
    if (threadIdx.x < OS_RADIX) {
        s_local[threadIdx.x] = local;
        for (unsigned w = 0; w < warps; ++w)
            count[w * OS_RADIX + threadIdx.x] += local;
    }
    __syncthreads();

    // Rank and place, item by item: the warp's counter for d now holds the place of its next key of d.
    const unsigned lower = (1u << lane) - 1u;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const bool valid = FULL || first + 32 * i < n;
        const unsigned d = valid ? os_digit(key[i], pass) : 0xffffffffu;
        const unsigned peers = os_peers<FULL>(d);
        const unsigned leader = __ffs(peers) - 1;
#if MUTATION == 3
        const unsigned ahead = __popc(peers & ~(lower | (1u << lane)));
#else
        const unsigned ahead = __popc(peers & lower);
#endif
        unsigned old = 0;
        if (valid && lane == leader) {
            old = mine[d];
            mine[d] = old + __popc(peers);
        }
        old = __shfl_sync(FULL_MASK, old, leader);
        if (valid)
            sorted[old + ahead] = key[i];
        __syncwarp();
    }
}

// One digit pass over a tile of ITEMS * blockDim.x keys: in -> out, by byte `pass` of the key.
// scratch: [0, 1024) the upfront counts, [1024, 1024 + 4) the tile counters, then the status words of
// pass p at 1024 + OS_COUNTERS + p * tiles * 256.
extern "C" __global__ void __launch_bounds__(BLOCK, OS_MIN_BLOCKS) sort_onesweep_pass(
    const elem_t *__restrict__ in, int n, int pass, unsigned *scratch, elem_t *__restrict__ out)
{
    extern __shared__ unsigned char smem_raw[];
    const unsigned tile_keys = ITEMS * blockDim.x;
    // The tile's keys in digit order, then the warps' digit counters count[warp][256].
    elem_t *sorted = reinterpret_cast<elem_t *>(smem_raw);
    unsigned *count = reinterpret_cast<unsigned *>(smem_raw) + tile_keys;
    __shared__ unsigned s_local[OS_RADIX];    // where digit d starts in the tile's digit order
    __shared__ unsigned s_global[OS_RADIX];   // output index of digit d's first key, minus s_local[d]
    __shared__ unsigned s_warp_sum[OS_RADIX / 32];
    __shared__ unsigned s_tile;

    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned tiles = ((unsigned)n + tile_keys - 1) / tile_keys;
    unsigned *status = scratch + OS_PASSES * OS_RADIX + OS_COUNTERS + (size_t)pass * tiles * OS_RADIX;

    if (threadIdx.x == 0)
        s_tile = atomicAdd(&scratch[OS_PASSES * OS_RADIX + pass], 1u);
#pragma unroll
    for (unsigned j = 0; j < OS_RADIX / 32; ++j)
        count[warp * OS_RADIX + j * 32 + lane] = 0;
    __syncthreads();
    const unsigned tile = s_tile;
    const unsigned base = tile * tile_keys;

    // Tile 0 starts each digit at its place in the output: the exclusive scan of the upfront counts.
    unsigned start = 0;
    if (tile == 0) {                      // block-uniform: the barriers inside are reached by all
        const unsigned c = threadIdx.x < OS_RADIX ? scratch[pass * OS_RADIX + threadIdx.x] : 0u;
        start = os_block_scan256(c, s_warp_sum);
    }

    const unsigned first = base + warp * (32 * ITEMS) + lane;
    unsigned total;
    const unsigned left = (unsigned)n - base;
    if (left >= tile_keys)                // block-uniform
        os_rank<true>(in, n, pass, first, count, sorted, start, tile, status, s_local, s_warp_sum, total);
    else
        os_rank<false>(in, n, pass, first, count, sorted, start, tile, status, s_local, s_warp_sum, total);

    // Look back (thread d): the count of d over all tiles before this one, the digit's start included.
    if (threadIdx.x < OS_RADIX) {
        const unsigned d = threadIdx.x;
        unsigned prefix = start;
        if (tile > 0) {
            prefix = 0;
            unsigned j = tile - 1;
            while (true) {
                const unsigned w = os_load_relaxed(&status[j * OS_RADIX + d]);
                if (w & OS_FLAG_PREFIX) {
#if MUTATION != 1
                    prefix += w & OS_COUNT_MASK;
#endif
                    break;
                }
                if (w & OS_FLAG_AGGREGATE) {
                    prefix += w & OS_COUNT_MASK;
                    --j;                  // tile 0 always ends with PREFIX: j never passes 0
                }
            }
            os_store_relaxed(&status[tile * OS_RADIX + d], OS_FLAG_PREFIX | (prefix + total));
        }
        s_global[d] = prefix - s_local[d];
    }
    __syncthreads();

    // Write the tile in digit order: slot j holds a key of digit d, whose place is s_global[d] + j.
#if MUTATION == 2
    const unsigned m = left >= tile_keys ? tile_keys : 0u;
#else
    const unsigned m = left < tile_keys ? left : tile_keys;
#endif
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const unsigned j = i * blockDim.x + threadIdx.x;
        if (j < m) {
            const elem_t k = sorted[j];
            const unsigned at = s_global[os_digit(k, pass)] + j;
#if MUTATION != 0
            if (at >= (unsigned)n)        // a mutant's later passes count keys it mangled: stay in bounds
                continue;
#endif
            out[at] = k;
        }
    }
}
