// Kernels that go wrong the ways a kernel under development does, in the transpose signature, to show
// that each one is one row and the rows after it still run (tests/test_isolation_gpu.py):
//
//   cudalab transpose --n 4096 --variant bankopt \
//       --add docs/examples/hostile.cu:hostile_oob@block=32x8 --add docs/examples/hostile.cu:hostile_trap@block=32x8 \
//       --add docs/examples/hostile.cu:hostile_hang@block=32x8 --add docs/examples/hostile.cu:hostile_misaligned@block=32x8 \
//       --add docs/examples/hostile.cu:hostile_smem@block=32x8,shared=1048576 \
//       --add docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32 --timeout 5
//
// Each of the first four breaks the CUDA context (a sticky error) or never finishes: cudalab runs
// them in a worker process, names the error, and goes on in a fresh one.

// An out-of-bounds write far past the output: "an illegal memory access was encountered".
extern "C" __global__ void hostile_oob(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    out[i + ((size_t)1 << 36)] = in[0];
}

// A device-side trap: "unspecified launch failure".
extern "C" __global__ void hostile_trap(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        __trap();
}

// A loop that never ends: a volatile flag nobody sets (volatile: the compiler must read it every time).
extern "C" __global__ void hostile_hang(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)
{
    __shared__ volatile int flag;
    if (threadIdx.x == 0 && threadIdx.y == 0)
        flag = 0;
    __syncthreads();
    while (flag == 0) {
    }
    out[0] = in[0];
}

// A float4 load from an address that is not 16-byte aligned: "misaligned address".
extern "C" __global__ void hostile_misaligned(float *out, const float *in, int rows, int cols, int pitch_in,
                                              int pitch_out)
{
    const float4 *v = reinterpret_cast<const float4 *>(in + 1);
    float4 x = v[threadIdx.x];
    out[threadIdx.x] = x.x + x.y + x.z + x.w;
}

// More shared memory than any GPU has: launched with @shared=1048576 (1 MiB; an H100 or H200 gives a block
// 227 KiB at most), it is refused before the launch with the device's limit named, the context untouched.
extern "C" __global__ void hostile_smem(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)
{
    extern __shared__ float big[];
    big[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = big[(threadIdx.x + 1) % blockDim.x];
}
