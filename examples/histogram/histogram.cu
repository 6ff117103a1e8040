// 256-bin histogram of bytes: bins[v] counts the elements equal to v. Grid-stride over the data.
#define BINS 256

// Every element one atomic add on the global bins: 256 addresses, heavy contention.
extern "C" __global__ void hist_global(unsigned int *bins, const unsigned char *data, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[data[i]], 1u);
}

// Privatised bins: each block counts into shared memory (4 bytes a load), then adds its 256
// counts to the global bins once.
extern "C" __global__ void hist_shared(unsigned int *bins, const unsigned char *data, int n) {
    __shared__ unsigned int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    int quads = n / 4;
    const uchar4 *d4 = reinterpret_cast<const uchar4 *>(data);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < quads; i += gridDim.x * blockDim.x) {
        uchar4 q = d4[i];
        atomicAdd(&local[q.x], 1u); atomicAdd(&local[q.y], 1u);
        atomicAdd(&local[q.z], 1u); atomicAdd(&local[q.w], 1u);
    }
    if (blockIdx.x == 0)  // the tail past the last whole uchar4
        for (int i = quads * 4 + threadIdx.x; i < n; i += blockDim.x) atomicAdd(&local[data[i]], 1u);
    __syncthreads();
#ifdef ONE_BIN_A_THREAD
    // the bug: assumes blockDim.x >= 256, so with fewer threads the upper bins are never added
    if (threadIdx.x < BINS && local[threadIdx.x]) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
#else
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b]) atomicAdd(&bins[b], local[b]);
#endif
}
