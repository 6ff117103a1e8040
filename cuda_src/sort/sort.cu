// Parallel sorting: a bitonic network, a counting (rank) merge sort and two LSD radix sorts (4-bit
// passes; 8-bit onesweep with decoupled look-back).
//
// The element type comes in as ELEM_T (int or float; -DELEM_T=int). Sizes and indices are int or
// unsigned int: the family refuses n > 2^28 (a padded bitonic buffer is then at most 2^28).
//
// No kernel returns early before a barrier: the shared-memory kernels run the same loops in every
// thread and guard each element instead.

#ifndef ELEM_T
#define ELEM_T float
#endif

typedef ELEM_T elem_t;

#ifndef ITEMS
#define ITEMS 4
#endif

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
#define FULL_MASK 0xffffffffu

// Unsigned image with the key's order: int flips the sign bit; float flips the sign bit of positives
// and every bit of negatives (-0.0 comes just before +0.0; no NaN is sorted).
__device__ __forceinline__ unsigned radix_image(int k)
{
    return (unsigned)k ^ 0x80000000u;
}

__device__ __forceinline__ unsigned radix_image(float k)
{
    unsigned u = __float_as_uint(k);
    return u ^ ((unsigned)((int)u >> 31) | 0x80000000u);
}

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

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v, unsigned lane)
{
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        unsigned t = __shfl_up_sync(FULL_MASK, v, off);
        if (lane >= off)
            v += t;
    }
    return v;
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
