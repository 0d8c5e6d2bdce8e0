// order.cuh: select.rs's order of fitness values, shared by select.cu and generation.cu.
#ifndef GROVE_ORDER_CUH
#define GROVE_ORDER_CUH

// select::key: NaN reads as +inf.
__device__ __forceinline__ double grove_key(double f) {
    return isnan(f) ? __longlong_as_double(0x7FF0000000000000ll) : f;
}

// f64::total_cmp's order as a signed integer: flip the magnitude bits of negative numbers.
__device__ __forceinline__ long long grove_total_order(double f) {
    long long b = __double_as_longlong(f);
    b ^= (long long)(((unsigned long long)(b >> 63)) >> 1);
    return b;
}

#endif  // GROVE_ORDER_CUH
