//! Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
//! as 1, 2, 3", SC 2011), keyed by the run's seed and addressed by (generation, individual,
//! purpose). The same function is written in CUDA, so every random choice a GPU operator makes
//! has an exact CPU twin, and results do not depend on the thread count.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// One Philox4x32-10 block: 128 random bits from a 128-bit counter and a 64-bit key.
#[inline]
pub fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(W0);
            key[1] = key[1].wrapping_add(W1);
        }
        let p0 = (M0 as u64) * (ctr[0] as u64);
        let p1 = (M1 as u64) * (ctr[2] as u64);
        ctr = [
            ((p1 >> 32) as u32) ^ ctr[1] ^ key[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ ctr[3] ^ key[1],
            p0 as u32,
        ];
    }
    ctr
}

/// What a stream of random numbers is for; part of its address, so that adding a new use
/// never shifts the numbers an old one sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Purpose {
    /// Random genomes and trees of the first generation.
    Init = 1,
    /// Parent selection.
    Select = 2,
    /// Crossover points and choices.
    Crossover = 3,
    /// Mutation decisions.
    Mutate = 4,
    /// Data-set generation, splits and shuffles.
    Data = 5,
    /// Environment reset noise.
    Reset = 6,
    /// Benchmarks and tests.
    Bench = 7,
    /// Random search directions (`evolve::ars`).
    Directions = 8,
    /// The folds of cross-validation (`task::base::crossval`).
    Folds = 9,
    /// The cases down-sampled lexicase selection reads in a generation (`select::generation_cases`).
    Cases = 10,
    /// The individuals whose errors set lexicase's epsilons (`select::epsilon_sample`).
    Epsilon = 11,
    /// The candidates a group of lexicase selections shares (`select::lexicase_candidates`).
    LexicasePool = 12,
}

/// A stream of random numbers at one address `(seed; generation, individual, purpose)`.
/// Draw `k` of a stream is word `k % 4` of block `k / 4`, block `b` having counter
/// `[generation, individual, purpose, b]`.
#[derive(Clone, Debug)]
pub struct Stream {
    key: [u32; 2],
    ctr: [u32; 4],
    buf: [u32; 4],
    used: usize,
}

impl Stream {
    /// The stream for `purpose` of `individual` in `generation` of the run seeded `seed`.
    pub fn new(seed: u64, generation: u32, individual: u32, purpose: Purpose) -> Self {
        Self {
            key: [seed as u32, (seed >> 32) as u32],
            ctr: [generation, individual, purpose as u32, 0],
            buf: [0; 4],
            used: 4,
        }
    }

    /// The next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.buf = philox4x32_10(self.ctr, self.key);
            self.ctr[3] = self.ctr[3].wrapping_add(1);
            self.used = 0;
        }
        let v = self.buf[self.used];
        self.used += 1;
        v
    }

    /// A uniform integer in `0..n` (`n > 0`), by Lemire's multiply-shift (bias below 2^-32 · n).
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// A uniform float in `[0, 1)` with 24 random bits (exact in f32).
    #[inline]
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        let hi = (self.next_u32() >> 5) as u64;
        let lo = (self.next_u32() >> 6) as u64;
        ((hi << 26) | lo) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f32) -> bool {
        self.unit_f32() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32_10).
    #[test]
    fn philox_known_answers() {
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0]),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn streams_differ_by_address_and_repeat_by_address() {
        let a: Vec<u32> = {
            let mut s = Stream::new(7, 0, 1, Purpose::Init);
            (0..9).map(|_| s.next_u32()).collect()
        };
        let mut s = Stream::new(7, 0, 1, Purpose::Init);
        assert_eq!(a, (0..9).map(|_| s.next_u32()).collect::<Vec<_>>());
        let mut t = Stream::new(7, 0, 2, Purpose::Init);
        assert_ne!(a[0], t.next_u32());
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut s = Stream::new(1, 2, 3, Purpose::Bench);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[s.below(5) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }
}
