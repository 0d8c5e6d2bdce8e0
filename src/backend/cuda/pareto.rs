//! NSGA-II on the GPU: the host side of `kernels/select.cu`'s `grove_pareto_*` and
//! `grove_radix_*` kernels, twin of [`crate::select::pareto`]. [`CudaEngine::pareto_ranking`]
//! gives `Ranking::of(fit, sizes)` (ranks and crowding distances, bit for bit),
//! [`CudaEngine::pareto_survivors`] gives `survivors(&points(fit, sizes), keep)`, and
//! [`CudaEngine::select_pareto`] gives `Ranking::tournament` for every slot. The fitness, sizes
//! and results stay on the device.
//!
//! Each step sorts the points stably by a key of two 64-bit words (an LSD radix sort of four
//! bits a pass, 2048 keys a tile), then reads the sorted order once: the fronts by sizes in
//! increasing order (one block, a prefix maximum per size), each objective's neighbours within a
//! front, and the survivors' order (rank, then crowding distance, largest first). Ties keep the
//! points' index order, as the CPU's comparisons do.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::{
    PARETO_CROWDING, PARETO_KEYS, PARETO_RANKS, PARETO_THREADS, PARETO_TOURNAMENT, RADIX_COUNT, RADIX_OFFSETS, RADIX_SCATTER, RADIX_THREADS,
    RADIX_TILE, SELECT, TILE_THREADS,
};
use super::{CudaEngine, DeviceFitness, DeviceIndices, DevicePopulation};

/// NSGA-II's ranks and crowding distances of `n` individuals, on the device.
pub struct DeviceRanking {
    pub(super) rank: CudaSlice<u32>,
    pub(super) crowd: CudaSlice<f64>,
    pub(super) n: usize,
    pub(super) engine: u64,
}

impl DeviceRanking {
    /// Individuals ranked.
    pub fn size(&self) -> usize {
        self.n
    }
}

/// What a sort orders the points by (`grove_pareto_keys`' mode): the high word first.
#[derive(Clone, Copy)]
enum Key {
    /// (size, error): the ranks.
    SizeError = 0,
    /// (rank, error): the first objective's neighbours.
    RankError = 1,
    /// (rank, size): the second's.
    RankSize = 2,
    /// (rank, crowding distance largest first): the survivors.
    RankCrowding = 3,
}

/// Four-bit digits that hold every value up to `max`.
fn digits(max: u64) -> u32 {
    (64 - max.leading_zeros()).div_ceil(4).max(1)
}

/// Keys and values of a sort, sorted in place.
struct Sorted {
    lo: CudaSlice<u64>,
    hi: CudaSlice<u64>,
    idx: CudaSlice<u32>,
}

impl CudaEngine {
    /// NSGA-II's ranks and crowding distances of the individuals with fitness `fit`, whose sizes
    /// are `pop`'s row lengths ([`crate::select::pareto::Ranking::of`]).
    pub fn pareto_ranking(&self, fit: &DeviceFitness, pop: &DevicePopulation) -> Result<DeviceRanking> {
        self.check_points(fit, pop)?;
        let n = fit.n;
        let mut r = DeviceRanking {
            rank: self.alloc::<u32>(n, false, "allocating ranks")?,
            crowd: self.alloc::<f64>(n, false, "allocating crowding distances")?,
            n,
            engine: self.id,
        };
        let (size_digits, rank_digits) = (digits(pop.max_len as u64 + 1), digits(n as u64 - 1));
        // The fronts, from the points sorted by (size, error).
        let s = self.pareto_sort(fit, pop, &r, Key::SizeError, 16, size_digits)?;
        let mut front_min = self.alloc::<u64>(n, false, "allocating the fronts' minima")?;
        let mut at = self.alloc::<u32>(n, false, "allocating the sorted ranks")?;
        let f = self.function(&SELECT, &[], PARETO_RANKS)?;
        let n32 = n as u32;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&s.lo).arg(&s.hi).arg(&s.idx).arg(&mut front_min).arg(&mut at).arg(&mut r.rank);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (PARETO_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_pareto_ranks(unsigned n, const unsigned long long* lo, const
        // unsigned long long* hi, const unsigned* idx, unsigned long long* front_min, unsigned*
        // at, unsigned* rank)`: the sorted keys and idx (a permutation of 0..n) hold n entries,
        // as do front_min, at and rank; one block of a multiple of 32 threads.
        unsafe { b.launch(one) }.during(|| format!("launching {PARETO_RANKS}"))?;
        drop(s);
        // The crowding distances: each objective's neighbours within a front.
        for (m, key, lo_digits) in [(0u32, Key::RankError, 16), (1u32, Key::RankSize, size_digits)] {
            let s = self.pareto_sort(fit, pop, &r, key, lo_digits, rank_digits)?;
            let f = self.function(&SELECT, &[], PARETO_CROWDING)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&n32).arg(&m).arg(&s.hi).arg(&s.idx).arg(&fit.fit).arg(&pop.len).arg(&mut r.crowd);
            // SAFETY: matches `grove_pareto_crowding(unsigned n, unsigned m, const unsigned long
            // long* hi, const unsigned* idx, const double* fit, const unsigned short* len,
            // double* crowd)`: hi and idx hold the n sorted entries, idx a permutation of 0..n
            // below fit's and len's n rows and crowd's n entries (each thread writes its own).
            unsafe { b.launch(per_point(n)) }.during(|| format!("launching {PARETO_CROWDING}"))?;
        }
        Ok(r)
    }

    /// NSGA-II's survivors: the `keep` best of the individuals by front, then crowding distance
    /// (largest first), then index; best first ([`crate::select::pareto::survivors`] of
    /// [`crate::select::pareto::points`]). Indices below `fit`'s size.
    pub fn pareto_survivors(&self, fit: &DeviceFitness, pop: &DevicePopulation, keep: usize) -> Result<DeviceIndices> {
        let r = self.pareto_ranking(fit, pop)?;
        let keep = keep.min(fit.n);
        let s = self.pareto_sort(fit, pop, &r, Key::RankCrowding, 16, digits(fit.n as u64 - 1))?;
        let idx = if keep == fit.n { s.idx } else { self.stream.clone_dtod(&s.idx.slice(..keep.max(1))).during(|| "keeping the survivors".into())? };
        Ok(DeviceIndices { idx, n: keep, bound: fit.n, engine: self.id })
    }

    /// Reads a ranking back: ranks and crowding distances.
    pub fn download_ranking(&self, r: &DeviceRanking) -> Result<(Vec<u32>, Vec<f64>)> {
        let mut rank = self.stream.clone_dtoh(&r.rank).during(|| "reading ranks".into())?;
        let mut crowd = self.stream.clone_dtoh(&r.crowd).during(|| "reading crowding distances".into())?;
        rank.truncate(r.n);
        crowd.truncate(r.n);
        Ok((rank, crowd))
    }

    /// `n_slots` NSGA-II tournament winners: slot `s` is `Ranking::tournament(&valid_indices(fit),
    /// k, seed, generation, s)` ([`crate::select::pareto::Ranking::tournament`]).
    pub fn select_pareto(
        &self,
        fit: &DeviceFitness,
        ranking: &DeviceRanking,
        n_slots: usize,
        k: usize,
        seed: u64,
        generation: u32,
    ) -> Result<DeviceIndices> {
        if ranking.engine != self.id || ranking.n != fit.n {
            return Err(GpuError::Input(format!("a ranking of {} individuals for {} fitness values", ranking.n, fit.n)));
        }
        let mut params = self.select_params(fit, n_slots, seed, generation)?;
        params.k = k.min(u32::MAX as usize) as u32;
        let (pool, n_valid) = self.valid_pool(fit, None, &params)?;
        let mut winners = self.alloc::<u32>(n_slots, false, "allocating winners")?;
        if n_slots > 0 {
            let f = self.function(&SELECT, &[], PARETO_TOURNAMENT)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ranking.rank).arg(&ranking.crowd).arg(&pool).arg(&n_valid).arg(&mut winners);
            // SAFETY: matches `grove_pareto_tournament(GroveSelectParams, const unsigned* rank,
            // const double* crowd, const unsigned* pool, const unsigned* n_valid, unsigned*
            // winners)`: rank and crowd hold P entries (checked), the pool n_valid[0] <= P
            // indices below P written just before on this stream; winners holds n_slots.
            unsafe { b.launch(per_point(n_slots)) }.during(|| format!("launching {PARETO_TOURNAMENT}"))?;
        }
        Ok(DeviceIndices { idx: winners, n: n_slots, bound: fit.n, engine: self.id })
    }

    fn check_points(&self, fit: &DeviceFitness, pop: &DevicePopulation) -> Result<()> {
        self.check_fitness(fit)?;
        if pop.engine != self.id || pop.n != fit.n {
            return Err(GpuError::Input(format!("{} fitness values for {} trees", fit.n, pop.n)));
        }
        if fit.n > u32::MAX as usize / 2 {
            return Err(GpuError::Input(format!("{} individuals: NSGA-II on the GPU takes at most {}", fit.n, u32::MAX / 2)));
        }
        Ok(())
    }

    /// The points sorted stably by `key`, whose low word has `lo_digits` and high word
    /// `hi_digits` four-bit digits.
    fn pareto_sort(&self, fit: &DeviceFitness, pop: &DevicePopulation, r: &DeviceRanking, key: Key, lo_digits: u32, hi_digits: u32) -> Result<Sorted> {
        let n = fit.n;
        let n32 = n as u32;
        let mut a = Sorted {
            lo: self.alloc::<u64>(n, false, "allocating sort keys")?,
            hi: self.alloc::<u64>(n, false, "allocating sort keys")?,
            idx: self.alloc::<u32>(n, false, "allocating the sort's order")?,
        };
        let mut z = Sorted {
            lo: self.alloc::<u64>(n, false, "allocating sort keys")?,
            hi: self.alloc::<u64>(n, false, "allocating sort keys")?,
            idx: self.alloc::<u32>(n, false, "allocating the sort's order")?,
        };
        let (mode, max_len) = (key as u32, pop.max_len as u32);
        let f = self.function(&SELECT, &[], PARETO_KEYS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&mode).arg(&max_len).arg(&fit.fit).arg(&pop.len).arg(&r.rank).arg(&r.crowd);
        b.arg(&mut a.lo).arg(&mut a.hi).arg(&mut a.idx);
        // SAFETY: matches `grove_pareto_keys(unsigned n, unsigned mode, unsigned max_len, const
        // double* fit, const unsigned short* len, const unsigned* rank, const double* crowd,
        // unsigned long long* lo, unsigned long long* hi, unsigned* idx)`: every array holds n
        // entries (rank and crowd are read only by the modes after the ranks are written).
        unsafe { b.launch(per_point(n)) }.during(|| format!("launching {PARETO_KEYS}"))?;
        let tiles = n.div_ceil(RADIX_TILE as usize) as u32;
        let mut counts = self.alloc::<u64>(16 * tiles as usize, false, "allocating the radix counts")?;
        let grid = LaunchConfig { grid_dim: (tiles, 1, 1), block_dim: (RADIX_THREADS, 1, 1), shared_mem_bytes: 0 };
        let (count_f, offsets_f, scatter_f) =
            (self.function(&SELECT, &[], RADIX_COUNT)?, self.function(&SELECT, &[], RADIX_OFFSETS)?, self.function(&SELECT, &[], RADIX_SCATTER)?);
        let entries = 16 * tiles;
        for d in 0..lo_digits + hi_digits {
            let mut b = self.stream.launch_builder(&count_f);
            b.arg(&n32).arg(&d).arg(&lo_digits).arg(&a.lo).arg(&a.hi).arg(&mut counts);
            // SAFETY: matches `grove_radix_count(unsigned n, unsigned d, unsigned lo_digits,
            // const unsigned long long* lo, const unsigned long long* hi, unsigned long long*
            // counts)`: a block per tile of RADIX_TILE keys below n; counts holds 16 entries per
            // tile.
            unsafe { b.launch(grid) }.during(|| format!("launching {RADIX_COUNT}"))?;
            let mut b = self.stream.launch_builder(&offsets_f);
            b.arg(&entries).arg(&mut counts);
            let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: matches `grove_radix_offsets(unsigned n_entries, unsigned long long* counts)`: one
            // block of GROVE_TILE_THREADS threads over the 16 x tiles counts.
            unsafe { b.launch(one) }.during(|| format!("launching {RADIX_OFFSETS}"))?;
            let mut b = self.stream.launch_builder(&scatter_f);
            b.arg(&n32).arg(&d).arg(&lo_digits).arg(&a.lo).arg(&a.hi).arg(&a.idx).arg(&counts);
            b.arg(&mut z.lo).arg(&mut z.hi).arg(&mut z.idx);
            // SAFETY: matches `grove_radix_scatter(unsigned n, unsigned d, unsigned lo_digits,
            // const unsigned long long* lo, const unsigned long long* hi, const unsigned* idx,
            // const unsigned long long* offsets, unsigned long long* lo_out, unsigned long long* hi_out,
            // unsigned* idx_out)`: the same grid as the counts; the offsets of the counts place
            // each of the n keys at a distinct position below n.
            unsafe { b.launch(grid) }.during(|| format!("launching {RADIX_SCATTER}"))?;
            std::mem::swap(&mut a, &mut z);
        }
        Ok(a)
    }
}

/// One thread per point.
fn per_point(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: ((n as u32).div_ceil(256).max(1), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn digits_cover_the_largest_value() {
        assert_eq!(super::digits(0), 1);
        assert_eq!(super::digits(15), 1);
        assert_eq!(super::digits(16), 2);
        assert_eq!(super::digits(129), 2);
        assert_eq!(super::digits(2_000_000), 6);
        assert_eq!(super::digits(u64::MAX), 16);
    }
}
