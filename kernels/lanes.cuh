// lanes.cuh: a group of GROVE_LANES lanes of one warp working as one (vary.cu's children,
// select.cu's lexicase selections): the group's mask, ballots, sums and broadcasts within it.
// The including file #defines GROVE_LANES (a power of two, at most 32) first; blocks are
// multiples of GROVE_LANES threads. The emulator (tests/cuda_host_shim.h) runs a group as a
// block of GROVE_LANES real threads.

#ifndef GROVE_LANES
#error "lanes.cuh needs GROVE_LANES"
#endif

struct GroveLanes {
    unsigned lane;   // 0 .. GROVE_LANES
    unsigned mask;   // the group's lanes within its warp, for the *_sync intrinsics
    unsigned shift;  // the group's first lane within its warp
};

// The group of the calling thread (blocks are multiples of GROVE_LANES threads).
__device__ __forceinline__ GroveLanes grove_lanes() {
    const unsigned lane = threadIdx.x % GROVE_LANES;
    const unsigned shift = threadIdx.x % 32u - lane;
    const unsigned ones = GROVE_LANES == 32 ? 0xffffffffu : (1u << (GROVE_LANES % 32)) - 1u;
    GroveLanes g = {lane, ones << shift, shift};
    return g;
}

// The calling group's index in the grid (vary.cu: its child; select.cu: its selection).
__device__ __forceinline__ unsigned grove_group_index() {
    return (blockIdx.x * blockDim.x + threadIdx.x) / GROVE_LANES;
}

__device__ __forceinline__ void grove_sync(GroveLanes g) { __syncwarp(g.mask); }

// Bit j: lane j's p.
__device__ __forceinline__ unsigned grove_ballot(GroveLanes g, bool p) {
    return (__ballot_sync(g.mask, p) & g.mask) >> g.shift;
}

__device__ __forceinline__ unsigned grove_sum(GroveLanes g, unsigned v) {
    for (unsigned o = GROVE_LANES / 2; o > 0; o /= 2) v += __shfl_xor_sync(g.mask, v, o, GROVE_LANES);
    return v;
}

__device__ __forceinline__ unsigned long long grove_or(GroveLanes g, unsigned long long v) {
    for (unsigned o = GROVE_LANES / 2; o > 0; o /= 2) v |= __shfl_xor_sync(g.mask, v, o, GROVE_LANES);
    return v;
}

// Lane `from`'s value, on every lane.
__device__ __forceinline__ unsigned grove_from(GroveLanes g, unsigned v, unsigned from) { return __shfl_sync(g.mask, v, from, GROVE_LANES); }

// Lane 0's value, on every lane.
__device__ __forceinline__ unsigned grove_share(GroveLanes g, unsigned v) { return __shfl_sync(g.mask, v, 0, GROVE_LANES); }

// Lane 0's stream, on every lane: after lane 0 drew alone.
__device__ __forceinline__ void grove_share(GroveLanes g, GroveStream& s) {
    s.c0 = grove_share(g, s.c0);
    s.c1 = grove_share(g, s.c1);
    s.c2 = grove_share(g, s.c2);
    s.c3 = grove_share(g, s.c3);
    s.b0 = grove_share(g, s.b0);
    s.b1 = grove_share(g, s.b1);
    s.b2 = grove_share(g, s.b2);
    s.b3 = grove_share(g, s.b3);
    s.used = grove_share(g, s.used);
}

// The lane of the k-th set bit of `bits` (k < popc(bits)), found by one more ballot.
__device__ __forceinline__ unsigned grove_nth_bit(GroveLanes g, unsigned bits, unsigned k) {
    const unsigned below = g.lane == 0 ? 0u : bits & (0xffffffffu >> (32u - g.lane));
    const unsigned hit = grove_ballot(g, ((bits >> g.lane) & 1u) != 0 && (unsigned)__popc(below) == k);
    return (unsigned)__ffs(hit) - 1u;
}

// The least of the group's v (never NaN; +inf where every lane has +inf).
__device__ __forceinline__ double grove_min(GroveLanes g, double v) {
    for (unsigned o = GROVE_LANES / 2; o > 0; o /= 2) v = fmin(v, __shfl_xor_sync(g.mask, v, o, GROVE_LANES));
    return v;
}
