// What sort.cu and sort_onesweep.cu share: the element type, the keys a thread holds, the radix image
// of a key and a warp's inclusive scan.

#ifndef SORT_COMMON_CUH
#define SORT_COMMON_CUH

#ifndef ELEM_T
#define ELEM_T float
#endif

typedef ELEM_T elem_t;

#ifndef ITEMS
#define ITEMS 4
#endif

#define FULL_MASK 0xffffffffu

// Unsigned image with the key's order: int flips the sign bit; float flips the sign bit of positives
// and every bit of negatives (-0.0 comes just before +0.0; no NaN is sorted).
__device__ __forceinline__ unsigned radix_image(int k)
{
    return (unsigned)k ^ 0x80000000u;
}

__device__ __forceinline__ unsigned radix_image(float k)
{
    unsigned u = __float_as_uint(k);
    return u ^ ((unsigned)((int)u >> 31) | 0x80000000u);
}

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v, unsigned lane)
{
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        unsigned t = __shfl_up_sync(FULL_MASK, v, off);
        if (lane >= off)
            v += t;
    }
    return v;
}

#endif  // SORT_COMMON_CUH
