// Matrix transpose: out (cols x rows) = in (rows x cols)^T. Both matrices are row-major with a
// row pitch in elements (pitch_in_elem, pitch_out_elem). Every kernel handles any size: the
// blocks on the right and bottom edges check bounds.

extern "C" __global__ void transpose_naive(float *out, const float *in, int rows, int cols,
                                           int pitch_in_elem, int pitch_out_elem)
{
    // Global memory only: reads along rows (coalesced), writes along columns (strided).
    int x = blockIdx.x * blockDim.x + threadIdx.x;   // column of in
    int y = blockIdx.y * blockDim.y + threadIdx.y;   // row of in
    if (x < cols && y < rows)
        out[(size_t)x * pitch_out_elem + y] = in[(size_t)y * pitch_in_elem + x];
}

#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void transpose_shared(float *out, const float *in, int rows, int cols,
                                            int pitch_in_elem, int pitch_out_elem)
{
    // Through a shared tile, but each thread writes its own element to the transposed place:
    // the writes stay strided, so the tile buys nothing.
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    bool inside = x < cols && y < rows;
    if (inside)
        tile[threadIdx.y][threadIdx.x] = in[(size_t)y * pitch_in_elem + x];
    __syncthreads();
    if (inside)
        out[(size_t)x * pitch_out_elem + y] = tile[threadIdx.y][threadIdx.x];
}

#ifndef PAD
#define PAD 0
#endif

// block (swapped block indices) and bankopt share this body; PAD is 0 or 1.
extern "C" __global__ void transpose_block(float *out, const float *in, int rows, int cols,
                                           int pitch_in_elem, int pitch_out_elem)
{
    // Load a tile along rows, then write the transposed tile along rows of out: both global
    // accesses coalesced. Reading tile[tx][ty] walks a column: with PAD 0 all 32 threads of a
    // warp hit one bank (32-way conflict); with PAD 1 the row stride is 33 words, one bank each.
    __shared__ float tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < cols && y < rows)
        tile[threadIdx.y][threadIdx.x] = in[(size_t)y * pitch_in_elem + x];
    __syncthreads();
    int ox = blockIdx.y * TILE + threadIdx.x;   // column of out = row of in
    int oy = blockIdx.x * TILE + threadIdx.y;   // row of out = column of in
    if (ox < rows && oy < cols)
        out[(size_t)oy * pitch_out_elem + ox] = tile[threadIdx.x][threadIdx.y];
}

#ifndef ROWS
#define ROWS 8
#endif

// STREAM 1: evict-first stores (the transposed output is not read again by this kernel).
#ifndef STREAM
#define STREAM 0
#endif
#if STREAM
#define STORE(p, v) __stcs(p, v)
#else
#define STORE(p, v) (*(p) = (v))
#endif

// TS_LDHINT 1: the tile's loads ask L2 for 256-byte blocks (ld.global.nc.L2::256B): each block's
// 64-float rows are 256 bytes, so one request fetches a whole tile row.
#ifndef TS_LDHINT
#define TS_LDHINT 0
#endif

__device__ __forceinline__ float ts_load(const float *p)
{
#if TS_LDHINT
    float v;
    asm("ld.global.nc.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
#else
    return *p;
#endif
}

// One TILE x TILE tile (input tile column bx, tile row by) moved by TILE x ROWS threads.
__device__ __forceinline__ void transpose_tile(float *out, const float *in, int rows, int cols,
                                               int pitch_in_elem, int pitch_out_elem, int bx, int by)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = bx * TILE + threadIdx.x;
    int y0 = by * TILE + threadIdx.y;
    if (x < cols) {
#pragma unroll
        for (int j = 0; j < TILE; j += ROWS)
            if (y0 + j < rows)
                tile[threadIdx.y + j][threadIdx.x] = ts_load(in + (size_t)(y0 + j) * pitch_in_elem + x);
    }
    __syncthreads();
    int ox = by * TILE + threadIdx.x;
    int oy0 = bx * TILE + threadIdx.y;
    if (ox < rows) {
#pragma unroll
        for (int j = 0; j < TILE; j += ROWS)
            if (oy0 + j < cols)
                STORE(out + (size_t)(oy0 + j) * pitch_out_elem + ox, tile[threadIdx.x][threadIdx.y + j]);
    }
}

extern "C" __global__ void transpose_tiled(float *out, const float *in, int rows, int cols,
                                           int pitch_in_elem, int pitch_out_elem)
{
    // A TILE x TILE tile moved by TILE x ROWS threads, TILE/ROWS elements each: more independent
    // loads in flight per thread and fewer blocks. The tile is padded by one word per row.
    transpose_tile(out, in, rows, cols, pitch_in_elem, pitch_out_elem, blockIdx.x, blockIdx.y);
}

// Launch order -> tile. BAND = 0: the launch order (row by row: the blocks resident together
// read a few whole input rows but write a short piece of every output row). BAND = G > 0: bands
// of G tile columns, walked row by row inside each band, so the blocks resident together read runs
// of G tiles of each input row and write long runs of each output row (BAND = 1: column by column).
// The tile of number id (0 .. gx*gy-1) in that order, for a gx x gy grid of tiles.
__device__ __forceinline__ void band_tile(int id, int gx, int gy, int band_w, int &bx, int &by)
{
    if (band_w <= 0) {
        bx = id % gx;
        by = id / gx;
        return;
    }
    const int per = band_w * gy, first = (id / per) * band_w;
    const int w = min(gx - first, band_w);
    bx = first + (id % per) % w;
    by = (id % per) / w;
}

__device__ __forceinline__ void transpose_band_tile(int band_w, int &bx, int &by)
{
    band_tile(blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, band_w, bx, by);
}

#ifndef TS_BAND
#define TS_BAND 1
#endif

extern "C" __global__ void transpose_tiled_band(float *out, const float *in, int rows, int cols,
                                                int pitch_in_elem, int pitch_out_elem)
{
    // transpose_tiled with the tiles taken in bands of TS_BAND tile columns (see
    // transpose_band_tile): the writes of the blocks in flight land in long runs of few output rows.
    int bx, by;
    transpose_band_tile(TS_BAND, bx, by);
    transpose_tile(out, in, rows, cols, pitch_in_elem, pitch_out_elem, bx, by);
}

#ifndef VROWS
#define VROWS 16
#endif

extern "C" __global__ void transpose_vec4(float *out, const float *in, int rows, int cols,
                                          int pitch_in_elem, int pitch_out_elem)
{
    // A 64x64 tile moved with 16-byte global accesses: 16 threads cover a 64-wide row with one
    // float4 each, VROWS rows per pass. Loads read float4 along input rows; stores write float4
    // along output rows, each gathered from a column of the padded tile (2-way bank conflicts on
    // the scalar shared accesses, far cheaper than 4x as many global instructions).
    __shared__ float tile[64][65];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * 64, row0 = blockIdx.y * 64;
    // float4 needs every row start 16-byte aligned and whole vectors inside each row.
    const bool vec = ((cols | rows | pitch_in_elem | pitch_out_elem) & 3) == 0;
    for (int r = ty; r < 64; r += VROWS) {
        const int y = row0 + r, x = col0 + 4 * tx;
        if (y >= rows)
            break;
        const float *src = in + (size_t)y * pitch_in_elem + x;
        if (vec && x < cols) {
            float4 v = __ldg(reinterpret_cast<const float4 *>(src));
            tile[r][4 * tx] = v.x;
            tile[r][4 * tx + 1] = v.y;
            tile[r][4 * tx + 2] = v.z;
            tile[r][4 * tx + 3] = v.w;
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (x + k < cols)
                    tile[r][4 * tx + k] = src[k];
        }
    }
    __syncthreads();
    for (int r = ty; r < 64; r += VROWS) {
        const int oy = col0 + r, ox = row0 + 4 * tx;   // output row = input column
        if (oy >= cols)
            break;
        float *dst = out + (size_t)oy * pitch_out_elem + ox;
        if (vec && ox < rows) {
            *reinterpret_cast<float4 *>(dst) =
                make_float4(tile[4 * tx][r], tile[4 * tx + 1][r], tile[4 * tx + 2][r], tile[4 * tx + 3][r]);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (ox + k < rows)
                    dst[k] = tile[4 * tx + k][r];
        }
    }
}

// ---- 16-byte accesses without bank conflicts ----------------------------------------------------

#ifndef TV_TILE
#define TV_TILE 64
#endif
#ifndef TV_ROWS
#define TV_ROWS 16
#endif
// TV_STCS 1: evict-first stores (st.global.cs). TV_LDHINT 1: loads skip L1 and ask L2 for 256-byte
// blocks (ld.global.nc.L1::no_allocate.L2::256B).
#ifndef TV_STCS
#define TV_STCS 0
#endif
#ifndef TV_LDHINT
#define TV_LDHINT 0
#endif
// TV_BAND: tiles taken in bands of TV_BAND tile columns (transpose_band_tile; 0: launch order).
#ifndef TV_BAND
#define TV_BAND 1
#endif
// TV_WX: each warp moves TV_WX vectors of 32 / TV_WX rows (16: two whole rows of a 64-wide tile).
#ifndef TV_WX
#define TV_WX 16
#endif
#ifndef TV_SWZ
#define TV_SWZ 1
#endif
// The shared tile's element (r, c): row pitch TV_TILE + 1, and with TV_SWZ bit 1 of the column flipped
// when exactly one of r and c is in the second 32. The padding alone leaves rows r and r + 32 on one
// bank for a column, and columns c and c + 32 for a row: warps 16 vectors wide meet both.
#define TV_AT(r, c) tile[r][(c) ^ (TV_SWZ * ((((r) ^ (c)) >> 4) & 2))]

__device__ __forceinline__ float4 tv_load(const float *p)
{
#if TV_LDHINT
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
#else
    return __ldg(reinterpret_cast<const float4 *>(p));
#endif
}

__device__ __forceinline__ void tv_store(float *p, float4 v)
{
#if TV_STCS
    __stcs(reinterpret_cast<float4 *>(p), v);
#else
    *reinterpret_cast<float4 *>(p) = v;
#endif
}

extern "C" __global__ void transpose_vec4_cf(float *out, const float *in, int rows, int cols,
                                             int pitch_in_elem, int pitch_out_elem)
{
    // A TV_TILE x TV_TILE tile moved with 16-byte loads and stores by (TV_TILE/4) x TV_ROWS threads,
    // every load issued before the first shared store. Each warp moves whole tile rows (TV_WX = 16:
    // 16 vectors x 2 rows of a 64-wide tile), so one load or store instruction touches two 256-byte
    // runs of memory, not four 128-byte ones as with 8 x 4 warps (TV_WX 8): the same bytes in the same
    // tile order ran 0.5-0.8 point of the roofline faster on H200s that way (a kernel with this traffic
    // and no shared step measured it too: scripts/probe_transpose_spread.py pattern). The swizzled
    // tile (TV_AT) keeps the scalar shared accesses free of bank conflicts for both warp shapes. Tiles
    // are taken in bands of TV_BAND tile columns (1: column by column), which kept the H200 near copy
    // speed (launch order: 4 points lower). The cache hints (TV_LDHINT, TV_STCS) measured slower on
    // H100 and H200.
    constexpr int TW = TV_TILE / 4;          // vectors per tile row (threads along x)
    constexpr int PER = TV_TILE / TV_ROWS;   // rows per thread
    static_assert(TW % 8 == 0 && TV_ROWS % 4 == 0 && TV_TILE % TV_ROWS == 0, "tile shape");
    __shared__ float tile[TV_TILE][TV_TILE + 1];
    const int t = threadIdx.y * TW + threadIdx.x, lane = t & 31, warp = t >> 5;
    static_assert((TV_WX == 8 || TV_WX == 16) && TW % TV_WX == 0 && TV_ROWS % (32 / TV_WX) == 0, "warp shape");
    const int tx = (warp % (TW / TV_WX)) * TV_WX + lane % TV_WX;
    const int ty = (warp / (TW / TV_WX)) * (32 / TV_WX) + lane / TV_WX;
    int bx, by;
    transpose_band_tile(TV_BAND, bx, by);
    const int col0 = bx * TV_TILE, row0 = by * TV_TILE;
    const bool vec = ((cols | rows | pitch_in_elem | pitch_out_elem) & 3) == 0;
    const int x = col0 + 4 * tx;
    if (vec && x < cols) {
        float4 v[PER];
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int y = row0 + ty + j * TV_ROWS;
            if (y < rows) v[j] = tv_load(in + (size_t)y * pitch_in_elem + x);
        }
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int r = ty + j * TV_ROWS;
            TV_AT(r, 4 * tx) = v[j].x;
            TV_AT(r, 4 * tx + 1) = v[j].y;
            TV_AT(r, 4 * tx + 2) = v[j].z;
            TV_AT(r, 4 * tx + 3) = v[j].w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int y = row0 + ty + j * TV_ROWS;
            if (y < rows)
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    if (x + k < cols) TV_AT(ty + j * TV_ROWS, 4 * tx + k) = in[(size_t)y * pitch_in_elem + x + k];
        }
    }
    __syncthreads();
    const int ox = row0 + 4 * tx;  // output column = input row
#pragma unroll
    for (int j = 0; j < PER; ++j) {
        const int r = ty + j * TV_ROWS, oy = col0 + r;  // output row = input column
        if (oy >= cols) break;
        float *dst = out + (size_t)oy * pitch_out_elem + ox;
        if (vec && ox < rows) {
            tv_store(dst, make_float4(TV_AT(4 * tx, r), TV_AT(4 * tx + 1, r), TV_AT(4 * tx + 2, r), TV_AT(4 * tx + 3, r)));
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (ox + k < rows) dst[k] = TV_AT(4 * tx + k, r);
        }
    }
}
