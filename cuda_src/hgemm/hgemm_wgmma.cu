// wgmma rung of the hgemm family (sm_90a): C = A.B, row-major, A M x K and B K x N (bf16 or fp16,
// HG_BF16), C M x N fp32, accumulated in fp32 by Hopper's asynchronous warp-group MMA.
//
// One block computes a 128 x 256 tile of C with three warp groups:
//   warp group 0, the producer: one thread issues TMA (cp.async.bulk.tensor) copies of each K slice of
//     64 (A: one 128 x 64 box; B: four 64 x 64 boxes) into a WG_STAGES-deep ring of shared-memory
//     stages, each completing on that stage's "full" mbarrier (transaction bytes);
//   warp groups 1 and 2, the consumers: each waits for a stage, runs four wgmma.m64n256k16 on it (its
//     64 rows of A against all 256 columns of B, operands read straight from shared memory through
//     matrix descriptors, accumulators in 128 registers a thread), waits for them, and releases the
//     stage on its "empty" mbarrier, which the producer waits on before refilling it.
// setmaxnreg moves registers from the producer (40 a thread) to the consumers (232; WG_PRODUCER_REGS,
// WG_CONSUMER_REGS).
//
// Shared layouts are the 128-byte swizzle that TMA writes and wgmma reads: A K-major (rows of 64
// elements = 128 bytes, 8-row atoms of 1024 bytes), B MN-major (rows of 64 n = 128 bytes, k-rows
// 128 bytes apart, one 8 KiB box per 64 columns). TMA fills whatever lies outside the matrices with
// zeros, so partial tiles need nothing; its row strides must be multiples of 16 bytes, so K and N must
// be multiples of 8 (the family refuses other sizes, naming the rule).
//
// The tensor maps (cuTensorMapEncodeTiled on the host) live in global memory: `tmaps` points at two
// 128-byte CUtensorMap, A's then B's.
//
// Built for sm_90a only: under any other target (the plain sm_90 build `cudalab compile` makes) the
// kernel is a stub that traps, so the file still compiles everywhere.

#ifndef WG_STAGES  // before any toolkit header, like hgemm_common.cuh's defaults (cudalab/restated.py)
#define WG_STAGES 4
#endif
// Blocks walk WG_GROUP block rows at a time (hg_block_origin: tiles in flight share A's rows in L2).
#ifndef WG_GROUP
#define WG_GROUP 8
#endif
// setmaxnreg: the producer warp group gives registers back (WG_PRODUCER_REGS a thread), the two
// consumers take them (WG_CONSUMER_REGS). Multiples of 8 in 24..256; the block starts with 168 a
// thread (65536 / 384, rounded down to 8), so 128 x producer + 256 x consumer <= 384 x 168:
// 2 x WG_CONSUMER_REGS + WG_PRODUCER_REGS <= 504.
#ifndef WG_PRODUCER_REGS
#define WG_PRODUCER_REGS 40
#endif
#ifndef WG_CONSUMER_REGS
#define WG_CONSUMER_REGS 232
#endif

#include "hgemm_common.cuh"

#define WG_BM 128
#define WG_BN 256
#define WG_BK 64
#define WG_THREADS 384
#define WG_A_BYTES (WG_BM * WG_BK * 2)               // 16 KiB a stage
#define WG_B_BYTES (WG_BK * WG_BN * 2)               // 32 KiB a stage
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
// Dynamic shared memory: the stages, 1024-byte aligned by hand, then 2 * WG_STAGES mbarriers.
#define WG_SMEM_BYTES (WG_STAGES * WG_STAGE_BYTES + 1024 + 2 * WG_STAGES * 8)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define HG_WGMMA_ASM(TYPE) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
    "}, %128, %129, p, 1, 1, 0, 1;\n}\n"

#define HG_WGMMA_OUTS \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

__device__ __forceinline__ void wg_bar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void wg_bar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wg_bar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void wg_bar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
// A 2-D TMA box, coordinates (c0 innermost, c1), into shared memory at dst, completing on bar.
__device__ __forceinline__ void wg_tma_2d(uint32_t dst, const void *tmap, int c0, int c1, uint32_t bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// A shared-memory matrix descriptor with the 128-byte swizzle: start address, leading and stride
// byte offsets (each >> 4 in 14 bits), swizzle mode 1 in bits 62-63.
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_mma(float (&d)[128], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile(HG_WGMMA_ASM(HG_MMA_TYPE) : HG_WGMMA_OUTS : "l"(da), "l"(db), "r"(scale_d));
}

extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
hgemm_wgmma(const hg_t *__restrict__ A, const hg_t *__restrict__ B, float *__restrict__ C, int M, int N, int K,
            const uint64_t *__restrict__ tmaps)
{
    extern __shared__ unsigned char wg_smem_raw[];
    const uint32_t raw = hg_smem_addr(wg_smem_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;                 // stage s: A at base + s * STAGE, B after A
    const uint32_t bars = base + WG_STAGES * WG_STAGE_BYTES;      // full[s] at bars + 8 s, empty[s] after
    const int tid = threadIdx.x, wg = tid / 128;

    if (tid == 0) {
        for (int s = 0; s < WG_STAGES; ++s) {
            wg_bar_init(bars + 8 * s, 1);                        // the producer's arrive (+ TMA bytes)
            wg_bar_init(bars + 8 * (WG_STAGES + s), 8);          // each consumer warp's arrive
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    int m0, n0;
    hg_block_origin<WG_GROUP>(WG_BM, WG_BN, m0, n0);
    int ktiles = (K + WG_BK - 1) / WG_BK;
#if HG_MUTATION == 1
    ktiles -= 1;
#endif

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(WG_PRODUCER_REGS));
        if (tid == 0) {
            const void *tmap_a = tmaps, *tmap_b = tmaps + 16;
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(tmap_a) : "memory");
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(tmap_b) : "memory");
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % WG_STAGES;
                const uint32_t full = bars + 8 * s, empty = bars + 8 * (WG_STAGES + s);
                if (kt >= WG_STAGES) wg_bar_wait(empty, ((kt / WG_STAGES) & 1) ^ 1);
                wg_bar_expect_tx(full, WG_STAGE_BYTES);
                const uint32_t sa = base + s * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
                wg_tma_2d(sa, tmap_a, kt * WG_BK, m0, full);
#pragma unroll
                for (int j = 0; j < WG_BN / 64; ++j) wg_tma_2d(sb + j * (WG_BK * 128), tmap_b, n0 + 64 * j, kt * WG_BK, full);
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(WG_CONSUMER_REGS));
        const int c = wg - 1;                 // consumer: rows c * 64 .. c * 64 + 63 of the block tile
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.f;
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % WG_STAGES;
            wg_bar_wait(bars + 8 * s, (kt / WG_STAGES) & 1);
            const uint32_t sa = base + s * WG_STAGE_BYTES + c * (64 * 128), sb = base + s * WG_STAGE_BYTES + WG_A_BYTES;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; ++kk) {
                // A, K-major: 16 k = 32 bytes along the swizzled row; 8-row groups 1024 bytes apart.
                // B, MN-major: 16 k = 16 rows of 128 bytes; 64-column boxes 8 KiB apart (leading),
                // 8-k-row groups 1024 bytes apart (stride).
                wg_mma(d, wg_desc(sa + kk * 32, 16, 1024), wg_desc(sb + kk * 2048, WG_BK * 128, 1024), 1);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if ((tid % 32) == 0) wg_bar_arrive(bars + 8 * (WG_STAGES + s));
        }
        // d[4j .. 4j + 3]: rows lane / 4 and lane / 4 + 8 of the warp's 16, columns 8j + 2 (lane % 4), + 1.
        const int warp = (tid % 128) / 32, lane = tid % 32;
        const int row = m0 + c * 64 + warp * 16 + lane / 4;
        const int col = n0 + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            hg_store2(C, M, N, row, col + 8 * j, d[4 * j], d[4 * j + 1]);
            hg_store2(C, M, N, row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3]);
        }
    }
}

#else   // not sm_90a: a stub with the same signature, so the plain sm_90 build compiles

extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
hgemm_wgmma(const hg_t *__restrict__ A, const hg_t *__restrict__ B, float *__restrict__ C, int M, int N, int K,
            const uint64_t *__restrict__ tmaps)
{
    __trap();   // wgmma and setmaxnreg exist only in sm_90a code; the family builds this file for sm_90a
}

#endif
