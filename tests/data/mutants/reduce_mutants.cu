// Broken reductions for tests/test_mutations_gpu.py: the in-place kernels' arguments
// (data, partial, n), one partial per block, interleaved tree in shared memory (power-of-two blocks).
// 0: correct. 1: drops the last element. 2: drops one warp (warp 1 of block 0).
// 3: drops one block (block 1 never writes its partial). 4: writes one partial wrong (+1).
#ifndef ELEM_T
#define ELEM_T float
#endif
#ifndef MUTATION
#define MUTATION 0
#endif
typedef ELEM_T elem_t;

extern "C" __global__ void reduce_mutant(elem_t *g_idata, elem_t *g_odata, unsigned int n)
{
    __shared__ elem_t s[1024];
    unsigned int tid = threadIdx.x;
    unsigned int idx = blockIdx.x * blockDim.x + tid;
    elem_t v = idx < n ? g_idata[idx] : elem_t(0);
#if MUTATION == 1
    if (idx == n - 1)
        v = elem_t(0);
#elif MUTATION == 2
    if (blockIdx.x == 0 && (tid >> 5) == 1)
        v = elem_t(0);
#endif
    s[tid] = v;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            s[tid] += s[tid + stride];
        __syncthreads();
    }
#if MUTATION == 3
    if (blockIdx.x == 1)
        return;
#endif
    if (tid == 0) {
#if MUTATION == 4
        g_odata[blockIdx.x] = s[0] + (blockIdx.x == 2 ? elem_t(1) : elem_t(0));
#else
        g_odata[blockIdx.x] = s[0];
#endif
    }
}
