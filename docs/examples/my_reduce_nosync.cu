// A deliberately wrong copy of my_reduce.cu (a missing barrier), to see how cudalab reports it:
//   cudalab reduce --add docs/examples/my_reduce_nosync.cu:my_reduce_nosync@block=512,per_thread=2
// The family's convention (cudalab list reduce): one partial sum per block into partial[blockIdx.x];
// ELEM_T is the element type of --dtype and BLOCK_X the block size, both defined by cudalab.

extern "C" __global__ void my_reduce_nosync(ELEM_T *data, ELEM_T *partial, unsigned int n)
{
    __shared__ ELEM_T sum[BLOCK_X];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + tid;  // each thread first adds two elements
    ELEM_T v = 0;
    if (i < n)
        v = data[i];
    if (i + blockDim.x < n)
        v += data[i + blockDim.x];
    sum[tid] = v;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            sum[tid] += sum[tid + stride];
        // BUG: no __syncthreads() here: the next step reads sums other warps may not have added yet
    }
    if (tid == 0)
        partial[blockIdx.x] = sum[0];
}
