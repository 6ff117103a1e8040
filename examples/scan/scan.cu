// Inclusive prefix sum of int32: y[i] = x[0] + ... + x[i] (wrapping as int32 does).
// A tile is blockDim.x threads x ITEMS consecutive elements a thread.
#ifndef ITEMS
#define ITEMS 8
#endif
#define FULL 0xffffffffu

// Inclusive scan of one value a thread across the block; *total gets the block's sum.
__device__ int block_scan(int v, int *total) {
    __shared__ int warp_sums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        int t = __shfl_up_sync(FULL, v, o);
        if (lane >= o) v += t;
    }
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int w = lane < warps ? warp_sums[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int t = __shfl_up_sync(FULL, w, o);
            if (lane >= o) w += t;
        }
        if (lane < warps) warp_sums[lane] = w;
    }
    __syncthreads();
    int out = v + (warp > 0 ? warp_sums[warp - 1] : 0);
    *total = warp_sums[warps - 1];
    __syncthreads();  // warp_sums is reused by the next call
    return out;
}

// Load a thread's ITEMS elements (zeros past n), scan them in registers; returns the thread's sum.
__device__ int load_scan(const int *x, int base, int n, int v[ITEMS]) {
    int first = base + threadIdx.x * ITEMS;
    if (first + ITEMS <= n && ITEMS % 4 == 0) {
        const int4 *p = reinterpret_cast<const int4 *>(x + first);
        #pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) {
            int4 q = p[k];
            v[4 * k] = q.x; v[4 * k + 1] = q.y; v[4 * k + 2] = q.z; v[4 * k + 3] = q.w;
        }
    } else {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) v[k] = first + k < n ? x[first + k] : 0;
    }
    #pragma unroll
    for (int k = 1; k < ITEMS; ++k) v[k] += v[k - 1];
    return v[ITEMS - 1];
}

__device__ void store(int *y, int base, int n, const int v[ITEMS], int add) {
    int first = base + threadIdx.x * ITEMS;
    if (first + ITEMS <= n && ITEMS % 4 == 0) {
        int4 *p = reinterpret_cast<int4 *>(y + first);
        #pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k)
            p[k] = make_int4(v[4 * k] + add, v[4 * k + 1] + add, v[4 * k + 2] + add, v[4 * k + 3] + add);
    } else {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (first + k < n) y[first + k] = v[k] + add;
    }
}

// --- reduce-then-scan: three kernels ------------------------------------------------------------
// 1. each tile's sum
extern "C" __global__ void scan_reduce(const int *x, int *sums, int n) {
    int v[ITEMS], total;
    int mine = load_scan(x, blockIdx.x * blockDim.x * ITEMS, n, v);
    block_scan(mine, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// 2. one block: the tile sums become exclusive prefixes, blockDim.x at a time with a carry
extern "C" __global__ void scan_sums(int *sums, int tiles) {
    int carry = 0;
    for (int base = 0; base < tiles; base += blockDim.x) {
        int i = base + threadIdx.x, total;
        int s = i < tiles ? sums[i] : 0;
        int inc = block_scan(s, &total);
        if (i < tiles) sums[i] = carry + inc - s;
        carry += total;
    }
}

// 3. each tile scanned again, offset by the sum of the tiles before it
extern "C" __global__ void scan_apply(int *y, const int *x, const int *sums, int n) {
    int v[ITEMS], total;
    int base = blockIdx.x * blockDim.x * ITEMS;
    int mine = load_scan(x, base, n, v);
    int inc = block_scan(mine, &total);
    store(y, base, n, v, sums[blockIdx.x] + inc - mine);
}

// --- single pass: decoupled look-back (Merrill & Garland 2016) ----------------------------------
// status[t] packs a flag (high 32 bits: 1 = the tile's own sum, 2 = its inclusive prefix) and a value.
// Tiles are numbered in the order blocks start (an atomic counter), so every tile a block waits on
// belongs to a block already running: no deadlock whatever the scheduler does. The first warp looks
// back 32 tiles at a time: each lane reads one predecessor's status; once all 32 have published, the
// lanes up to the nearest PREFIX add their values (a warp sum) and the window moves on if none was.
#define AGG 1ull
#define PREFIX 2ull

__device__ int look_back(const unsigned long long *status, int tile) {
    int lane = threadIdx.x & 31, excl = 0;
    for (int top = tile - 1;;) {
        int j = top - lane;
        unsigned long long s = j >= 0 ? *(volatile const unsigned long long *)&status[j] : (PREFIX << 32);
        if (__any_sync(FULL, (s >> 32) == 0)) continue;  // a predecessor has not published yet: read again
        unsigned prefixes = __ballot_sync(FULL, (s >> 32) == PREFIX);
        int last = prefixes ? __ffs(prefixes) - 1 : 31;  // the nearest tile with its inclusive prefix
        int v = lane <= last ? (int)(unsigned)(s & 0xffffffffull) : 0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        excl += v;
        if (prefixes) return excl;
        top -= 32;
    }
}

extern "C" __global__ void scan_lookback(int *y, const int *x, unsigned long long *status, int *counter, int n) {
    __shared__ int tile_s, excl_s;
    if (threadIdx.x == 0) tile_s = atomicAdd(counter, 1);
    __syncthreads();
    int tile = tile_s;
    int v[ITEMS], total;
    int base = tile * blockDim.x * ITEMS;
    int mine = load_scan(x, base, n, v);
    int inc = block_scan(mine, &total);
    if (threadIdx.x < 32) {
        int excl = 0;
#ifndef NO_LOOKBACK
        if (tile == 0) {
            if (threadIdx.x == 0) atomicExch(&status[0], (PREFIX << 32) | (unsigned)total);
        } else {
            if (threadIdx.x == 0) atomicExch(&status[tile], (AGG << 32) | (unsigned)total);
            excl = look_back(status, tile);
            if (threadIdx.x == 0) atomicExch(&status[tile], (PREFIX << 32) | (unsigned)(excl + total));
        }
#endif
        if (threadIdx.x == 0) excl_s = excl;
    }
    __syncthreads();
    store(y, base, n, v, excl_s + inc - mine);
}
