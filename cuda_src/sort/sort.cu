// Parallel sorting: a bitonic network and a counting (rank) merge sort.
//
// The element type comes in as ELEM_T (int or float; -DELEM_T=int). Sizes and indices are int or
// unsigned int: the family refuses n > 2^26 (a padded bitonic buffer is then at most 2^27).
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
