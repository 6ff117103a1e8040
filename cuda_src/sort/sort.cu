// Parallel sorting: a bitonic network, a counting (rank) merge sort and an LSD radix sort (4-bit
// passes). The 8-bit onesweep radix sort is in sort_onesweep.cu (its build is the slow one: apart, the
// other variants compile in less); what both use is in sort_common.cuh.
//
// The element type comes in as ELEM_T (int or float; -DELEM_T=int). Sizes and indices are int or
// unsigned int: the family refuses n > 2^28 (a padded bitonic buffer is then at most 2^28).
//
// No kernel returns early before a barrier: the shared-memory kernels run the same loops in every
// thread and guard each element instead.

#include "sort_common.cuh"

// The padding value: sorts after every key (+inf, INT_MAX). A real key equal to it is the same
// value, so padded and real copies are interchangeable in a keys-only sort.
__device__ __forceinline__ float pad_value(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ int pad_value(int) { return 0x7fffffff; }

__device__ __forceinline__ void compare_exchange(elem_t &a, elem_t &b, bool ascending)
{
    if ((a > b) == ascending) {
        elem_t t = a;
        a = b;
        b = t;
    }
}

// Index of the lower element of compare-exchange pair number t at distance j (a power of two):
// t with a zero bit inserted at bit log2(j).
__device__ __forceinline__ unsigned pair_low(unsigned t, unsigned j)
{
    return ((t & ~(j - 1u)) << 1) | (t & (j - 1u));
}

// --- bitonic ------------------------------------------------------------------------------------------
//
// The buffer holds N2 = a power of two >= max(n, tile) elements, tile = PER * blockDim.x (a power of
// two; each thread handles PER / 2 pairs per step). The direction of every compare-exchange comes from
// the element's global index ((i & k) == 0: ascending), so the tiles sorted in shared memory already
// form the bitonic sequences that the global merge steps expect. The host drives:
//
//   sort_bitonic_tile(in -> buf)                           k = 2 .. tile, in shared memory
//   for k = 2 * tile .. N2:
//       sort_bitonic_step4 / 3 / 2 / step (global memory)   j = k/2 .. tile, up to 4 distances a pass
//       sort_bitonic_merge                                  j = tile/2 .. 1, in shared memory

#ifndef PER
#define PER 4
#endif

// Every step of stage k at distances j = jtop .. 1 on the tile in shared memory s.
__device__ __forceinline__ void bitonic_tile_steps(elem_t *s, unsigned base, unsigned k, unsigned jtop)
{
    for (unsigned j = jtop; j > 0; j >>= 1) {
#pragma unroll
        for (int p = 0; p < PER / 2; ++p) {
            unsigned i = pair_low(threadIdx.x + p * blockDim.x, j);
            compare_exchange(s[i], s[i + j], ((base + i) & k) == 0);
        }
        __syncthreads();
    }
}

extern "C" __global__ void sort_bitonic_tile(const elem_t *__restrict__ in, int n, elem_t *buf)
{
    extern __shared__ unsigned char smem_raw[];
    elem_t *s = reinterpret_cast<elem_t *>(smem_raw);
    const unsigned tile = PER * blockDim.x;
    const unsigned base = blockIdx.x * tile;
    for (unsigned l = threadIdx.x; l < tile; l += blockDim.x) {
        unsigned g = base + l;
        s[l] = g < (unsigned)n ? in[g] : pad_value(elem_t());
    }
    __syncthreads();
    for (unsigned k = 2; k <= tile; k <<= 1)
        bitonic_tile_steps(s, base, k, k >> 1);
    for (unsigned l = threadIdx.x; l < tile; l += blockDim.x)
        buf[base + l] = s[l];
}

// The last steps of merge stage k (j = tile/2 .. 1) for one tile, in shared memory.
extern "C" __global__ void sort_bitonic_merge(elem_t *buf, unsigned k)
{
    extern __shared__ unsigned char smem_raw[];
    elem_t *s = reinterpret_cast<elem_t *>(smem_raw);
    const unsigned tile = PER * blockDim.x;
    const unsigned base = blockIdx.x * tile;
    for (unsigned l = threadIdx.x; l < tile; l += blockDim.x)
        s[l] = buf[base + l];
    __syncthreads();
    bitonic_tile_steps(s, base, k, tile >> 1);
    for (unsigned l = threadIdx.x; l < tile; l += blockDim.x)
        buf[base + l] = s[l];
}

// L global steps in one pass, at distances j, j/2, .. j/2^(L-1) (all >= tile): thread t owns the 2^L
// elements that these steps exchange only among themselves, keeps them in registers, and reads and
// writes each once: 1/L of the global-memory passes of one step per launch.
template <int L>
__device__ __forceinline__ void bitonic_global_steps(elem_t *buf, unsigned n2, unsigned k, unsigned j)
{
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (n2 >> L))
        return;                               // no barrier in these kernels
    unsigned i = t;
#pragma unroll
    for (int b = L - 1; b >= 0; --b)          // zero bits at log2(j >> b), lowest first
        i = pair_low(i, j >> b);
    const bool asc = (i & k) == 0;            // k > j: the same for all 2^L elements
    elem_t v[1 << L];
#pragma unroll
    for (int e = 0; e < (1 << L); ++e) {      // element e sits at i + the distances of e's set bits
        unsigned off = 0;
#pragma unroll
        for (int b = 0; b < L; ++b)
            if (e & (1 << b))
                off += j >> (L - 1 - b);
        v[e] = buf[i + off];
    }
#pragma unroll
    for (int b = L - 1; b >= 0; --b) {        // distance j first (bit L-1 of e), then halving
#pragma unroll
        for (int e = 0; e < (1 << L); ++e)
            if (!(e & (1 << b)))
                compare_exchange(v[e], v[e | (1 << b)], asc);
    }
#pragma unroll
    for (int e = 0; e < (1 << L); ++e) {
        unsigned off = 0;
#pragma unroll
        for (int b = 0; b < L; ++b)
            if (e & (1 << b))
                off += j >> (L - 1 - b);
        buf[i + off] = v[e];
    }
}

// One global step at distance j >= tile: thread t handles pair t of N2 / 2.
extern "C" __global__ void sort_bitonic_step(elem_t *buf, unsigned n2, unsigned k, unsigned j)
{
    bitonic_global_steps<1>(buf, n2, k, j);
}

// Distances j and j/2 in one pass (j/2 >= tile): four elements a thread.
extern "C" __global__ void sort_bitonic_step2(elem_t *buf, unsigned n2, unsigned k, unsigned j)
{
    bitonic_global_steps<2>(buf, n2, k, j);
}

// Distances j, j/2 and j/4 in one pass (j/4 >= tile): eight elements a thread.
extern "C" __global__ void sort_bitonic_step3(elem_t *buf, unsigned n2, unsigned k, unsigned j)
{
    bitonic_global_steps<3>(buf, n2, k, j);
}

// Distances j .. j/8 in one pass (j/8 >= tile): sixteen elements a thread.
extern "C" __global__ void sort_bitonic_step4(elem_t *buf, unsigned n2, unsigned k, unsigned j)
{
    bitonic_global_steps<4>(buf, n2, k, j);
}

// --- merge-rank: stable counting merge sort, keys with their original index ------------------------------
//
// Merging two sorted runs L (left) and R (right) needs no sequential merge: an element's place in
// the merged run is its place in its own run plus the number of elements of the other run that go
// before it. For stability, ties go left first: an element of L counts the elements of R that are
// strictly smaller (lower bound), an element of R counts the elements of L that are smaller or equal
// (upper bound). Each element is placed by its own thread, with no barrier between them.
//
// sort_merge_tile sorts runs of tile = blockDim.x * ITEMS elements in shared memory, merging runs of
// 1, 2, 4, ... by rank; sort_merge_pass then doubles the run in global memory until one run is left.
// The payload is the element's original index, so the result shows whether the sort was stable.

// Number of elements of a[lo, hi) that go before key: < key (strict) or <= key (!strict).
__device__ __forceinline__ int rank_in(const elem_t *a, int lo, int hi, elem_t key, bool strict)
{
    int first = lo;
    while (lo < hi) {
        int mid = lo + ((hi - lo) >> 1);
        bool before = strict ? a[mid] < key : !(key < a[mid]);
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - first;
}

// Where element l of runs of width w (the first m elements of the array are real) goes.
__device__ __forceinline__ int merged_position(const elem_t *a, int m, int w, int l, elem_t key)
{
    int run = l / w;
    int left = (run & ~1) * w;            // start of the pair of runs
    if ((run & 1) == 0) {                 // in L: count R's elements < key
        int r0 = left + w;
        if (r0 >= m)
            return l;                     // no right run: already in place
        int r1 = min(r0 + w, m);
        return l + rank_in(a, r0, r1, key, true);
    }
    // in R: count L's elements <= key; L is full (w elements)
    return l - w + rank_in(a, left, left + w, key, false);
}

extern "C" __global__ void sort_merge_tile(const elem_t *__restrict__ in, int n, elem_t *keys_out, int *vals_out)
{
    extern __shared__ unsigned char smem_raw[];
    const int tile = blockDim.x * ITEMS;
    elem_t *k0 = reinterpret_cast<elem_t *>(smem_raw);
    elem_t *k1 = k0 + tile;
    int *v0 = reinterpret_cast<int *>(k1 + tile);
    int *v1 = v0 + tile;
    const int base = blockIdx.x * tile;
    const int m = min(tile, n - base);    // real elements in this tile (>= 1: grid = ceil(n / tile))
    for (int l = threadIdx.x; l < m; l += blockDim.x) {
        k0[l] = in[base + l];
        v0[l] = base + l;
    }
    __syncthreads();
    for (int w = 1; w < tile; w <<= 1) {  // same trip count in every thread
        for (int l = threadIdx.x; l < m; l += blockDim.x) {
            elem_t key = k0[l];
            int p = merged_position(k0, m, w, l, key);
            k1[p] = key;
            v1[p] = v0[l];
        }
        __syncthreads();
        elem_t *tk = k0; k0 = k1; k1 = tk;
        int *tv = v0; v0 = v1; v1 = tv;
    }
    for (int l = threadIdx.x; l < m; l += blockDim.x) {
        keys_out[base + l] = k0[l];
        vals_out[base + l] = v0[l];
    }
}

// One merge pass in global memory: runs of width w become runs of 2w (one thread per element).
extern "C" __global__ void sort_merge_pass(const elem_t *__restrict__ keys, const int *__restrict__ vals, int n,
                                           int w, elem_t *keys_out, int *vals_out)
{
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= n)
        return;                           // no barrier in this kernel
    elem_t key = keys[l];
    int p = merged_position(keys, n, w, l, key);
    keys_out[p] = key;
    vals_out[p] = vals[l];
}

// --- radix: stable LSD radix sort, 4-bit digits --------------------------------------------------------
//
// After Satish, Harris & Garland, "Designing efficient sorting algorithms for manycore GPUs" (2009),
// with the in-tile ranking done by warp votes (Ha et al.'s 4-way split, widened to 16 digits). Each of
// 8 passes sorts by the digit at bits shift .. shift + 3 (shift = 0, 4, .., 28) and is stable, so after
// the last pass the keys are ordered by all 32 bits. A pass is three launches:
//
//   sort_radix_hist     block b counts the 16 digits of its tile -> counts[digit * numBlocks + b]
//   sort_radix_scan     one block: exclusive prefix sum over counts, in place (digit-major order, so
//                       counts[d * numBlocks + b] becomes where block b's keys of digit d start)
//   sort_radix_scatter  block b ranks each key among the keys of its tile with the same digit, in
//                       tile order, and writes it to out[start + rank]
//
// A tile is TILE = ITEMS * blockDim.x keys; element k of thread t is key tileStart + k * blockDim.x + t,
// so every load is coalesced and the tile order is (k, warp, lane). The digits are those of an unsigned
// image of the key whose order is the key's order (radix_image); the keys themselves move unchanged.
// blockDim.x must be a multiple of 32 (whole warps vote), and at most 1024.

#define RADIX_BITS 4
#define RADIX 16                          // digits a pass; at most 32: lane d counts digit d

__device__ __forceinline__ unsigned radix_digit(elem_t k, int shift)
{
    return (radix_image(k) >> shift) & (RADIX - 1);
}

// The lanes of this warp whose digit is `digit`, among `lanes`, from the 4 votes bit[b] (lanes whose
// own digit has bit b set).
__device__ __forceinline__ unsigned lanes_with_digit(const unsigned bit[RADIX_BITS], unsigned digit, unsigned lanes)
{
#pragma unroll
    for (int b = 0; b < RADIX_BITS; ++b)
        lanes &= ((digit >> b) & 1u) ? bit[b] : ~bit[b];
    return lanes;
}

// Load this thread's ITEMS keys of the tile (keys past n are not loaded; `valid` marks the real ones).
__device__ __forceinline__ void radix_load(const elem_t *__restrict__ in, int n, elem_t key[ITEMS])
{
    const unsigned tileStart = blockIdx.x * (ITEMS * blockDim.x);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        unsigned e = tileStart + k * blockDim.x + threadIdx.x;
        key[k] = e < (unsigned)n ? in[e] : elem_t(0);
    }
}

__device__ __forceinline__ bool radix_valid(int n, int k)
{
    return blockIdx.x * (ITEMS * blockDim.x) + k * blockDim.x + threadIdx.x < (unsigned)n;
}

// One item slot k across the warp: the slot's digit d in this lane, a ballot per digit bit, and the
// lanes that hold a key at all (returned). lanes_with_digit(bit, x, valid) then names the lanes of digit x.
__device__ __forceinline__ unsigned radix_ballots(elem_t key, int shift, int n, int k, unsigned &d,
                                                  unsigned bit[RADIX_BITS])
{
    d = radix_digit(key, shift);
#pragma unroll
    for (int b = 0; b < RADIX_BITS; ++b)
        bit[b] = __ballot_sync(FULL_MASK, (d >> b) & 1u);
    return __ballot_sync(FULL_MASK, radix_valid(n, k));
}

extern "C" __global__ void sort_radix_hist(const elem_t *__restrict__ in, int n, int shift, unsigned *counts)
{
    __shared__ unsigned warp_count[32][RADIX];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    elem_t key[ITEMS];
    radix_load(in, n, key);
    unsigned mine = 0;                    // lane d < RADIX: this warp's keys of digit d
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        unsigned d, bit[RADIX_BITS];
        const unsigned valid = radix_ballots(key[k], shift, n, k, d, bit);
        mine += __popc(lanes_with_digit(bit, lane & (RADIX - 1), valid));
    }
    if (lane < RADIX)
        warp_count[warp][lane] = mine;
    __syncthreads();
    if (threadIdx.x < RADIX) {
        unsigned sum = 0;
        for (unsigned w = 0; w < warps; ++w)
            sum += warp_count[w][threadIdx.x];
        counts[threadIdx.x * gridDim.x + blockIdx.x] = sum;
    }
}

// Exclusive prefix sum of counts[0 .. total) in place, by one block (total is a multiple of 16: RADIX
// digits a tile). Each round takes 16 consecutive counts a thread (four uint4 loads) and carries the
// running total into the next round.
#define SCAN_PER 16
extern "C" __global__ void sort_radix_scan(unsigned *counts, int total)
{
    __shared__ unsigned warp_sum[32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    uint4 *c4 = reinterpret_cast<uint4 *>(counts);
    unsigned carry = 0;
    for (int base = 0; base < total; base += SCAN_PER * blockDim.x) {   // the same rounds in every thread
        const int first = base + SCAN_PER * threadIdx.x;
        uint4 v[SCAN_PER / 4];
#pragma unroll
        for (int j = 0; j < SCAN_PER / 4; ++j)
            v[j] = first + 4 * j < total ? c4[first / 4 + j] : make_uint4(0, 0, 0, 0);
        unsigned sum = 0;
#pragma unroll
        for (int j = 0; j < SCAN_PER / 4; ++j)
            sum += v[j].x + v[j].y + v[j].z + v[j].w;
        const unsigned incl = warp_inclusive_scan(sum, lane);
        if (lane == 31)
            warp_sum[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            unsigned w = lane < warps ? warp_sum[lane] : 0;
            w = warp_inclusive_scan(w, lane);
            warp_sum[lane] = w;
        }
        __syncthreads();
        unsigned run = carry + (warp ? warp_sum[warp - 1] : 0) + incl - sum;
        carry += warp_sum[warps - 1];
#pragma unroll
        for (int j = 0; j < SCAN_PER / 4; ++j) {
            uint4 o;
            o.x = run; run += v[j].x;
            o.y = run; run += v[j].y;
            o.z = run; run += v[j].z;
            o.w = run; run += v[j].w;
            if (first + 4 * j < total)
                c4[first / 4 + j] = o;
        }
        __syncthreads();                  // warp_sum is written again next round
    }
}

// Dynamic shared memory: RADIX rows of ITEMS * warps + 1 counts (the +1 spreads the 16 lanes that
// write one slot each over 16 banks).
extern "C" __global__ void sort_radix_scatter(const elem_t *__restrict__ in, int n, int shift,
                                              const unsigned *__restrict__ offsets, elem_t *__restrict__ out)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned *slot = reinterpret_cast<unsigned *>(smem_raw);   // slot[d * pitch + k * warps + warp]
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const unsigned slots = ITEMS * warps, pitch = slots + 1;
    const unsigned below = (1u << lane) - 1u;                  // lanes before this one
    elem_t key[ITEMS];
    unsigned rank[ITEMS];                 // among this warp's keys of the same digit at this k
    radix_load(in, n, key);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        unsigned d, bit[RADIX_BITS];
        const unsigned valid = radix_ballots(key[k], shift, n, k, d, bit);
        rank[k] = __popc(lanes_with_digit(bit, d, valid) & below);
        if (lane < RADIX)
            slot[lane * pitch + k * warps + warp] = __popc(lanes_with_digit(bit, lane, valid));
    }
    __syncthreads();
    // Per digit, an exclusive scan over the slots in tile order, started at the block's place for that
    // digit in the output: slot then holds where the keys of (digit, k, warp) begin. One warp a digit.
    for (unsigned d = warp; d < RADIX; d += warps) {
        unsigned carry = offsets[d * gridDim.x + blockIdx.x];
        for (unsigned j0 = 0; j0 < slots; j0 += 32) {
            const unsigned j = j0 + lane;
            const unsigned v = j < slots ? slot[d * pitch + j] : 0;
            const unsigned incl = warp_inclusive_scan(v, lane);
            if (j < slots)
                slot[d * pitch + j] = carry + incl - v;
            carry += __shfl_sync(FULL_MASK, incl, 31);
        }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (radix_valid(n, k)) {
            const unsigned d = radix_digit(key[k], shift);
            out[slot[d * pitch + k * warps + warp] + rank[k]] = key[k];
        }
    }
}
