// A deliberately wrong copy of my_reduce.cu (an edge bug), to see how cudalab reports it:
//   cudalab reduce --add docs/examples/my_reduce_edge.cu:my_reduce_edge@block=512,per_thread=2
// The family's convention (cudalab list reduce): one partial sum per block into partial[blockIdx.x];
// ELEM_T is the element type of --dtype and BLOCK_X the block size, both defined by cudalab.

extern "C" __global__ void my_reduce_edge(ELEM_T *data, ELEM_T *partial, unsigned int n)
{
    __shared__ ELEM_T sum[BLOCK_X];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + tid;  // each thread first adds two elements
    ELEM_T v = 0;
    if (i < n)
        v = data[i];
    if (i + blockDim.x < n - 1)  // BUG: off by one, the last element is dropped
        v += data[i + blockDim.x];
    sum[tid] = v;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            sum[tid] += sum[tid + stride];
        __syncthreads();  // every thread reaches it: no barrier inside a branch
    }
    if (tid == 0)
        partial[blockIdx.x] = sum[0];
}
