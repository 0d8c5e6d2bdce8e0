// rng.cuh: counter-based random numbers on the GPU, the twin of src/rng.rs.
//
// Philox4x32-10 keyed by the run's seed, a stream addressed by (generation, individual,
// purpose): draw k of a stream is word k % 4 of block k / 4, block b having counter
// [generation, individual, purpose, b]. Every helper below is the same function as the
// same-named Rust method (Stream::below, unit_f32, chance; vary::normal), written with integer
// operations and explicitly rounded float operations (__fmul_rn, __fadd_rn, __uint2float_rn),
// so no multiply-add is ever fused and the results are bitwise the CPU's.
//
// Included by vary.cu, select.cu and sim.cu (KernelSource::full_source pastes it in place of the
// #include line).

#define GROVE_PHILOX_M0 0xD2511F53u
#define GROVE_PHILOX_M1 0xCD9E8D57u
#define GROVE_PHILOX_W0 0x9E3779B9u
#define GROVE_PHILOX_W1 0xBB67AE85u

// Purpose codes (rng::Purpose).
#define GROVE_PURPOSE_INIT 1u
#define GROVE_PURPOSE_SELECT 2u
#define GROVE_PURPOSE_CROSSOVER 3u
#define GROVE_PURPOSE_MUTATE 4u
#define GROVE_PURPOSE_RESET 6u
#define GROVE_PURPOSE_EPSILON 11u
#define GROVE_PURPOSE_LEXICASE_POOL 12u

// One stream of random numbers (rng::Stream).
struct GroveStream {
    unsigned key0, key1;      // the seed's low and high words
    unsigned c0, c1, c2, c3;  // counter of the next block: generation, individual, purpose, block
    unsigned b0, b1, b2, b3;  // the current block
    unsigned used;            // words of the current block already drawn (4: none left)
};

// rng::philox4x32_10 on the stream's counter, into its block.
__device__ __forceinline__ void grove_philox_block(GroveStream& s) {
    unsigned c0 = s.c0, c1 = s.c1, c2 = s.c2, c3 = s.c3, k0 = s.key0, k1 = s.key1;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += GROVE_PHILOX_W0;
            k1 += GROVE_PHILOX_W1;
        }
        const unsigned hi0 = __umulhi(GROVE_PHILOX_M0, c0), lo0 = GROVE_PHILOX_M0 * c0;
        const unsigned hi1 = __umulhi(GROVE_PHILOX_M1, c2), lo1 = GROVE_PHILOX_M1 * c2;
        const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    s.b0 = c0;
    s.b1 = c1;
    s.b2 = c2;
    s.b3 = c3;
}

// Stream::new(seed, generation, individual, purpose).
__device__ __forceinline__ GroveStream grove_stream(unsigned seed_lo, unsigned seed_hi, unsigned generation,
                                                    unsigned individual, unsigned purpose) {
    GroveStream s;
    s.key0 = seed_lo;
    s.key1 = seed_hi;
    s.c0 = generation;
    s.c1 = individual;
    s.c2 = purpose;
    s.c3 = 0u;
    s.b0 = s.b1 = s.b2 = s.b3 = 0u;
    s.used = 4u;
    return s;
}

// Stream::next_u32: the next 32 random bits.
__device__ __forceinline__ unsigned grove_next_u32(GroveStream& s) {
    if (s.used == 4u) {
        grove_philox_block(s);
        s.c3 += 1u;
        s.used = 0u;
    }
    const unsigned u = s.used++;
    return u == 0u ? s.b0 : u == 1u ? s.b1 : u == 2u ? s.b2 : s.b3;
}

// The stream placed so that its next draw is draw k (draw k is word k % 4 of block k / 4, so
// any draw is reached without the ones before it): lanes sharing a stream split its draws.
__device__ __forceinline__ void grove_seek(GroveStream& s, unsigned k) {
    s.c3 = k / 4u;
    s.used = 4u;
    if (k % 4u != 0u) {
        grove_philox_block(s);
        s.c3 += 1u;
        s.used = k % 4u;
    }
}

// Block q of the stream (draws 4q .. 4q + 3) into w, the stream itself unchanged.
__device__ __forceinline__ void grove_block_at(GroveStream s, unsigned q, unsigned* w) {
    s.c3 = q;
    grove_philox_block(s);
    w[0] = s.b0;
    w[1] = s.b1;
    w[2] = s.b2;
    w[3] = s.b3;
}

// Stream::below: uniform in 0..n (n > 0), Lemire's multiply-shift: the high word of x * n.
__device__ __forceinline__ unsigned grove_below(GroveStream& s, unsigned n) {
    return __umulhi(grove_next_u32(s), n);
}

// Stream::unit_f32: uniform in [0, 1) with 24 bits; exact (a 24-bit integer times 2^-24).
__device__ __forceinline__ float grove_unit_f32(GroveStream& s) {
    return __fmul_rn(__uint2float_rn(grove_next_u32(s) >> 8), 5.9604644775390625e-8f);
}

// Stream::unit_f64: uniform in [0, 1) with 53 bits (27 from one draw, 26 from the next); exact.
__device__ __forceinline__ double grove_unit_f64(GroveStream& s) {
    const unsigned long long hi = grove_next_u32(s) >> 5;
    const unsigned long long lo = grove_next_u32(s) >> 6;
    return (double)((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

// Stream::chance: true with probability p.
__device__ __forceinline__ bool grove_chance(GroveStream& s, float p) {
    return grove_unit_f32(s) < p;
}

// program::vary::normal: Irwin-Hall, the integer sum of 12 draws' top 24 bits converted once
// (round to nearest), times 2^-24 (exact), minus 6 (rounded): the CPU's three operations.
__device__ __forceinline__ float grove_normal(GroveStream& s) {
    unsigned sum = 0u;
    for (int i = 0; i < 12; ++i) sum += grove_next_u32(s) >> 8;
    return __fsub_rn(__fmul_rn(__uint2float_rn(sum), 5.9604644775390625e-8f), 6.0f);
}
