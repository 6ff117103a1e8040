// A register-blocked SGEMM as a user writes it for tuning: C = A.B, row-major, any M, N, K.
//
// A block of BLOCK_X x BLOCK_Y threads computes a BM x BN tile of C (BM = BLOCK_Y * TY rows,
// BN = BLOCK_X * TX columns); each thread keeps TY x TX outputs in registers, its rows and columns
// strided by the block (conflict-free shared-memory reads, coalesced stores). K is walked in slices
// of BK through shared memory. BLOCK_X and BLOCK_Y come from the launch (cudalab defines them, as
// kernel_tuner defines block_size_x); TX, TY and BK are the tuned defines. The grid covers C in
// tiles of BN x BM, so the launch says: tile=block_x*TX x block_y*TY.
//
//   cudalab tune matmul --n 2048 --add 'docs/examples/tune/my_sgemm.cu:my_sgemm@tile=block_x*TX x block_y*TY' \
//       --block 8x8,16x8,16x16,32x8 -D TX=1..8:pow2 -D TY=1..8:pow2 -D BK=8,16 --strategy grid

#if !defined(BLOCK_X) && defined(block_size_x)  // the same file under kernel_tuner, which names them so
#define BLOCK_X block_size_x
#define BLOCK_Y block_size_y
#endif
#ifndef TX
#define TX 4
#endif
#ifndef TY
#define TY 4
#endif
#ifndef BK
#define BK 16
#endif

#define BM (BLOCK_Y * TY)
#define BN (BLOCK_X * TX)

extern "C" __global__ void my_sgemm(const float *A, const float *B, float *C, int M, int N, int K)
{
    __shared__ float As[BK][BM];  // the A tile transposed: a k row of BM values
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * BLOCK_X + tx;
    const int threads = BLOCK_X * BLOCK_Y;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TY][TX];
#pragma unroll
    for (int i = 0; i < TY; ++i)
#pragma unroll
        for (int j = 0; j < TX; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += threads) {  // consecutive threads read consecutive k
            const int m = e / BK, k = e % BK;
            const int r = row0 + m, kk = k0 + k;
            As[k][m] = (r < M && kk < K) ? A[(size_t)r * K + kk] : 0.0f;
        }
        for (int e = tid; e < BK * BN; e += threads) {  // consecutive threads read consecutive columns
            const int k = e / BN, n = e % BN;
            const int kk = k0 + k, c = col0 + n;
            Bs[k][n] = (kk < K && c < N) ? B[(size_t)kk * N + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TY], b[TX];
#pragma unroll
            for (int i = 0; i < TY; ++i)
                a[i] = As[k][ty + i * BLOCK_Y];
#pragma unroll
            for (int j = 0; j < TX; ++j)
                b[j] = Bs[k][tx + j * BLOCK_X];
#pragma unroll
            for (int i = 0; i < TY; ++i)
#pragma unroll
                for (int j = 0; j < TX; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TY; ++i) {
        const int r = row0 + ty + i * BLOCK_Y;
#pragma unroll
        for (int j = 0; j < TX; ++j) {
            const int c = col0 + tx + j * BLOCK_X;
            if (r < M && c < N)
                C[(size_t)r * N + c] = acc[i][j];
        }
    }
}
