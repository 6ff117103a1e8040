// Parallel search: the first index of a key (linear), every index of a key (stream compaction) and
// many sorted-array queries at once (binary, lower bound).
//
// The element type comes in as ELEM_T (int or float; -DELEM_T=int). Indices are int: the family
// refuses n >= 2^30, so an index, a count and the sentinels below never overflow.
//
// No kernel returns early before a barrier: loops whose trip count depends on the data are guarded
// per element, and every thread of a block runs the same number of barrier rounds.

#ifndef ELEM_T
#define ELEM_T float
#endif

typedef ELEM_T elem_t;

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ int warp_min(int v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = min(v, __shfl_down_sync(FULL_MASK, v, offset));
    return v;
}

// --- linear: first index of key --------------------------------------------------------------------
//
// *first must hold a value >= n before the launch (the family fills it with 0x7f7f7f7f, which is
// above every legal index). Every thread scans its grid-stride share to the end, keeps its smallest
// hit, the warp takes the minimum with shuffles and one lane per warp does atomicMin. Unlike a CPU
// loop, nothing stops early: every element is read even when the key sits at index 0.

extern "C" __global__ void search_linear(const elem_t *__restrict__ x, int n, elem_t key, int *first)
{
    int best = 0x7fffffff;
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (x[i] == key) {
            best = i;      // the first hit of this thread's share is its smallest index
            break;         // no barrier below: leaving the loop early is safe
        }
    }
    best = warp_min(best);
    if ((threadIdx.x & 31) == 0 && best < n)
        atomicMin(first, best);
}

// Not found: turn the sentinel (anything >= n) into -1. One thread.
extern "C" __global__ void search_linear_finish(int *first, int n)
{
    if (blockIdx.x == 0 && threadIdx.x == 0 && *first >= n)
        *first = -1;
}

// --- all: every index of key, ascending (stream compaction) ----------------------------------------
//
// Block b owns the contiguous chunk [b * chunk, (b + 1) * chunk), chunk = blockDim.x * ITEMS, and walks
// it in ITEMS rounds of blockDim.x consecutive elements, so the order of the hits is the order of
// (round, thread). Three kernels:
//   1. search_all_count: hits per block (__syncthreads_count per round),
//   2. search_all_scan: one block turns the counts into exclusive offsets and writes the total,
//   3. search_all_scatter: each block ranks its hits (warp ballot + scan over warps) and writes the
//      index of each at offsets[b] + rank.
// blockDim.x must be a multiple of 32 (family.toml requires it).

#ifndef ITEMS
#define ITEMS 8
#endif

extern "C" __global__ void search_all_count(const elem_t *__restrict__ x, int n, elem_t key, int *counts)
{
    long long base = (long long)blockIdx.x * blockDim.x * ITEMS;
    int c = 0;
    for (int r = 0; r < ITEMS; ++r) {
        long long i = base + (long long)r * blockDim.x + threadIdx.x;
        int hit = i < n && x[i] == key;
        c += __syncthreads_count(hit);   // every thread of the block, every round
    }
    if (threadIdx.x == 0)
        counts[blockIdx.x] = c;
}

// Exclusive prefix sum of counts[0..nblocks) into offsets, total into *total. One block of any
// multiple of 32 threads up to 1024; it walks the counts in chunks of blockDim.x with a carry.
extern "C" __global__ void search_all_scan(const int *__restrict__ counts, int nblocks, int *offsets, int *total)
{
    __shared__ int warp_sums[32];
    __shared__ int carry_s;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (threadIdx.x == 0)
        carry_s = 0;
    __syncthreads();
    for (int start = 0; start < nblocks; start += blockDim.x) {   // same trip count for every thread
        int i = start + threadIdx.x;
        int v = i < nblocks ? counts[i] : 0;
        int incl = v;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            int t = __shfl_up_sync(FULL_MASK, incl, off);
            if (lane >= off)
                incl += t;
        }
        if (lane == 31)
            warp_sums[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            int w = lane < nwarps ? warp_sums[lane] : 0;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                int t = __shfl_up_sync(FULL_MASK, w, off);
                if (lane >= off)
                    w += t;
            }
            if (lane < nwarps)
                warp_sums[lane] = w;   // inclusive over warps
        }
        __syncthreads();
        int carry = carry_s;
        int before = (warp > 0 ? warp_sums[warp - 1] : 0) + incl - v;
        if (i < nblocks)
            offsets[i] = carry + before;
        __syncthreads();                      // everyone has read carry_s and warp_sums
        if (threadIdx.x == 0)
            carry_s = carry + warp_sums[nwarps - 1];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *total = carry_s;
}

extern "C" __global__ void search_all_scatter(const elem_t *__restrict__ x, int n, elem_t key,
                                              const int *__restrict__ offsets, int *out)
{
    __shared__ int warp_sums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    long long base = (long long)blockIdx.x * blockDim.x * ITEMS;
    int carry = offsets[blockIdx.x];
    for (int r = 0; r < ITEMS; ++r) {
        long long i = base + (long long)r * blockDim.x + threadIdx.x;
        int hit = i < n && x[i] == key;
        unsigned mask = __ballot_sync(FULL_MASK, hit);
        int rank = __popc(mask & ((1u << lane) - 1u));
        if (lane == 0)
            warp_sums[warp] = __popc(mask);
        __syncthreads();
        if (warp == 0) {
            int w = lane < nwarps ? warp_sums[lane] : 0;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                int t = __shfl_up_sync(FULL_MASK, w, off);
                if (lane >= off)
                    w += t;
            }
            if (lane < nwarps)
                warp_sums[lane] = w;
        }
        __syncthreads();
        if (hit)
            out[carry + (warp > 0 ? warp_sums[warp - 1] : 0) + rank] = (int)i;
        carry += warp_sums[nwarps - 1];
        __syncthreads();                      // warp_sums is rewritten next round
    }
}

// --- binary: many queries against a sorted array -----------------------------------------------------
//
// One thread per query; lower bound (the first i with a[i] >= q, n when none), as NumPy's
// searchsorted(side="left").

extern "C" __global__ void search_binary(const elem_t *__restrict__ a, int n, const elem_t *__restrict__ queries,
                                         int nq, int *out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nq)
        return;                               // no barrier in this kernel
    elem_t q = queries[t];
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + ((hi - lo) >> 1);
        if (a[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    out[t] = lo;
}
