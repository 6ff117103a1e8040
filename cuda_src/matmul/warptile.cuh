// The warptile's shape, shared by matmul_warptile.cu, matmul_streamk.cu (its persistent stream-K form) and the gemm
// family's gemm.cu: the WT_ defines' defaults (the family.toml files' `defines` restate them) and WT_THREADS.

#pragma once

// warptile: a WT_BM x WT_BN block tile split into WT_WM x WT_WN warp tiles; each lane owns
// (4*WT_MI) x (4*WT_NI) outputs; WT_STAGES cp.async stages of WT_BK; blocks walk WT_GROUP block
// rows at a time (L2 reuse). Threads: (WT_BM / WT_WM) * (WT_BN / WT_WN) * 32, at least WT_MINB
// blocks an SM. The defaults are the tuned shape: 128 x 256 tile, 8 warps of 64 x 64, 8 x 16 per
// lane (1 block an SM, up to 255 registers a thread). Shared: SA_SMEM_BYTES(WT_BM, WT_BN, WT_BK, WT_STAGES).
#ifndef WT_BM
#define WT_BM 128
#endif
#ifndef WT_BN
#define WT_BN 256
#endif
#ifndef WT_BK
#define WT_BK 16
#endif
#ifndef WT_WM
#define WT_WM 64
#endif
#ifndef WT_WN
#define WT_WN 64
#endif
#ifndef WT_MI
#define WT_MI 2
#endif
#ifndef WT_NI
#define WT_NI 4
#endif
#ifndef WT_STAGES
#define WT_STAGES 3
#endif
#ifndef WT_MINB
#define WT_MINB 1
#endif
#ifndef WT_GROUP
#define WT_GROUP 8
#endif
#define WT_THREADS ((WT_BM / WT_WM) * (WT_BN / WT_WN) * 32)
