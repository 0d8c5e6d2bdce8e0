//! The island model: a run of `N` populations (islands) evolving side by side, each with its
//! own seed, which every `M` generations send their best `K` programs to the next island on a
//! ring (island `i` to `(i + 1) % N`), where they replace the worst `K`.
//!
//! Islands advance in lockstep, one generation of every island at a time, and migrate at fixed
//! generations, so a run is a function of its settings and seed whatever the threads or devices
//! (DESIGN.md, contract 5). Which rows leave and which are replaced depends only on the
//! islands' fitness ([`plan`]); moving them is a [`Transport`]'s job: host memory
//! ([`HostIslands`]), one GPU's memory, or several GPUs. With one island nothing here runs and a
//! run is exactly the single-population run.

use anyhow::{Result, ensure};

use super::GenerationStats;
/// Which GPUs a run's islands use, and how they exchange data (defined with the backends,
/// which open them).
pub use crate::backend::{GpuLink, Gpus};
use crate::genome::init::Genomes;
use crate::program::tree::Population;
use crate::select;

/// Most islands a run may have.
pub const MAX_ISLANDS: usize = 1 << 16;

/// The island model's settings (every command's `islands` block; `--islands`, `--migrate-every`,
/// `--migrants`, `--gpus`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IslandConfig {
    /// Islands, each a population of `engine.pop_size` (1: one population, no migration).
    pub count: usize,
    /// Generations between migrations: after evaluating every generation `g` that is a
    /// multiple of this (and neither the first nor the last).
    pub migrate_every: usize,
    /// Programs each island sends to the next at a migration (its best), replacing the
    /// receiver's worst; 0 keeps the islands apart.
    pub migrants: usize,
    /// GPUs the islands are spread over (on a CUDA run; results do not depend on it), or, with
    /// `shard_rows`, the GPUs the rows are split over.
    pub gpus: Gpus,
    /// One population whose training rows are split over the GPUs `gpus` chooses (data
    /// parallel: each GPU sums its rows, the first adds the sums in order; `--shard-rows`).
    /// Results depend on the number of shards, not on the GPUs (the CPU computes the same with
    /// the rows split the same way). Regression only, one island, no constant fitting. Written
    /// in reports only when on (reports of other runs read as before).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shard_rows: bool,
    /// How the GPUs exchange migrants and a row shard's data (`--gpu-link`; a CUDA run on
    /// several GPUs). Results do not depend on it. Written in reports only when not `peer`.
    #[serde(skip_serializing_if = "GpuLink::is_peer")]
    pub link: GpuLink,
}

impl Default for IslandConfig {
    /// One island; when there are more: a migration every 5 generations, of 20 programs each
    /// (on W1 with 8 islands of 625, better than every 10 generations with 5 programs, and than
    /// one population of 5000: docs/benchmarks.md).
    fn default() -> Self {
        Self { count: 1, migrate_every: 5, migrants: 20, gpus: Gpus::All, shard_rows: false, link: GpuLink::Peer }
    }
}

impl IslandConfig {
    /// One population: what a run without islands is.
    pub fn single() -> Self {
        Self::default()
    }

    /// Whether the islands migrate after evaluating generation `gen` of a run of
    /// `generations` generations.
    pub fn migrates_after(&self, gen: usize, generations: usize) -> bool {
        self.count > 1 && self.migrants > 0 && gen > 0 && gen < generations && gen % self.migrate_every.max(1) == 0
    }

    /// Checks the values against a population of `pop_size` per island; each message names the
    /// flag and the experiment-file field.
    pub fn check(&self, pop_size: usize) -> Result<()> {
        ensure!(self.count >= 1, "--islands (islands.count) must be at least 1, got {}", self.count);
        ensure!(self.count <= MAX_ISLANDS, "--islands (islands.count) must be at most {MAX_ISLANDS}, got {}", self.count);
        ensure!(self.migrate_every >= 1, "--migrate-every (islands.migrate_every) must be at least 1, got {}", self.migrate_every);
        ensure!(
            !self.shard_rows || self.count == 1,
            "--shard-rows (islands.shard_rows) splits one population's rows over the GPUs: it takes one island, got --islands {}",
            self.count
        );
        if self.count > 1 {
            ensure!(
                self.migrants <= pop_size,
                "--migrants (islands.migrants) must be at most the population of an island (--pop {pop_size}), got {}",
                self.migrants
            );
        }
        Ok(())
    }
}

/// The device (an index into the resolved ordinals, `0..n_devices`) of island `i` of `n`:
/// contiguous blocks, so that most ring neighbours share a device.
pub fn device_of(i: usize, n: usize, n_devices: usize) -> usize {
    let d = n_devices.clamp(1, n.max(1));
    i * d / n.max(1)
}

/// Island `i`'s seed: the run's seed for island 0 (so one island is the plain run), a mix of
/// the seed and `i` (SplitMix64's finaliser) for the others.
pub fn island_seed(seed: u64, i: usize) -> u64 {
    if i == 0 {
        return seed;
    }
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    mix(seed ^ mix((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

/// The run's statistics of one generation from its islands': the best of all; the mean
/// fitness and size over every valid individual (each island's mean weighted by its valid
/// count, in island order); invalid ones summed. One island's statistics are the run's.
pub fn combine(gen: usize, islands: &[GenerationStats], pop_size: usize, seconds: f64) -> GenerationStats {
    if let [one] = islands {
        return GenerationStats { seconds, ..one.clone() };
    }
    let (mut best, mut sum, mut size, mut n) = (f64::INFINITY, 0.0, 0.0, 0usize);
    let mut invalid = 0;
    for s in islands {
        let valid = pop_size.saturating_sub(s.invalid);
        invalid += s.invalid;
        if valid > 0 {
            best = best.min(s.best);
            sum += s.mean * valid as f64;
            size += s.mean_size * valid as f64;
            n += valid;
        }
    }
    let (mean, mean_size) = if n > 0 { (sum / n as f64, size / n as f64) } else { (f64::NAN, f64::NAN) };
    GenerationStats { generation: gen, best, mean, mean_size, invalid, seconds }
}

/// Who moves at one migration: for each island, the rows it sends (its best, in
/// `select::elite`'s order: fitness, then index) and the rows its immigrants overwrite (its
/// worst, worst first: the reverse of that order). Immigrant `j` (the sender's `j`-th best)
/// replaces `replace[j]`. Rows are indices on the host (`Vec<usize>`), or wherever a
/// [`Transport`] keeps them (a GPU's indices for the device loop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan<R = Vec<usize>> {
    /// `[N]`, each `[K]`: the rows island `i` sends to island `(i + 1) % N`.
    pub leave: Vec<R>,
    /// `[N]`, each `[K]`: the rows of island `i` its immigrants replace.
    pub replace: Vec<R>,
}

/// The `k` worst of `fit`, worst first: the last `k` of `select::elite`'s full order (NaN as
/// `+inf`; among equals the higher index is worse), reversed.
pub fn worst(fit: &[f64], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..fit.len()).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    let worse_first = |a: &usize, b: &usize| select::key(fit[*b]).total_cmp(&select::key(fit[*a])).then(b.cmp(a));
    idx.select_nth_unstable_by(k - 1, worse_first);
    idx.truncate(k);
    idx.sort_by(worse_first);
    idx
}

/// The migration of `k` programs per island given every island's fitness (`fits[i]`: `[P]`).
/// Who leaves and who is replaced are both chosen before anything moves.
pub fn plan(fits: &[Vec<f64>], k: usize) -> Plan {
    Plan {
        leave: fits.iter().map(|f| select::elite(f, k)).collect(),
        replace: fits.iter().map(|f| worst(f, k)).collect(),
    }
}

/// Where the islands' populations live, as migration sees them. The host loops keep them in
/// memory ([`HostIslands`]); the device loop on GPU buffers, where it also chooses who moves
/// (so no fitness comes to the host). [`migrate`] drives every transport the same way, and each
/// chooses as [`plan`] does, so the programs that move are the same wherever they live.
pub trait Transport {
    /// Rows of one island chosen for a migration, in order.
    type Rows;
    /// Emigrants in flight: rows, their fitness, and what else a row carries.
    type Packet;
    /// Number of islands.
    fn islands(&self) -> usize;
    /// Island `i`'s `k` best, best first (`select::elite(fit, k)`), and its `k` worst, worst
    /// first ([`worst`]`(fit, k)`).
    fn choose(&mut self, i: usize, k: usize) -> Result<(Self::Rows, Self::Rows)>;
    /// Copies rows `rows` of island `i` (and their fitness) out.
    fn send(&mut self, i: usize, rows: &Self::Rows) -> Result<Self::Packet>;
    /// Writes `packet`'s rows over rows `rows` of island `i` (and their fitness: an immigrant
    /// keeps the fitness it was evaluated with).
    fn receive(&mut self, i: usize, rows: &Self::Rows, packet: Self::Packet) -> Result<()>;
}

/// One migration of `k` programs per island around the ring: every island chooses its
/// emigrants and the rows they will replace first, then every island's emigrants are copied
/// out, then written over the next island's worst. Returns the plan it carried out.
pub fn migrate<T: Transport + ?Sized>(t: &mut T, k: usize) -> Result<Plan<T::Rows>> {
    let n = t.islands();
    let (leave, replace): (Vec<_>, Vec<_>) = (0..n).map(|i| t.choose(i, k)).collect::<Result<Vec<_>>>()?.into_iter().unzip();
    let packets = (0..n).map(|i| t.send(i, &leave[i])).collect::<Result<Vec<_>>>()?;
    for (i, packet) in packets.into_iter().enumerate() {
        let to = (i + 1) % n;
        t.receive(to, &replace[to], packet)?;
    }
    Ok(Plan { leave, replace })
}

/// One island of a host loop: its population and fitness, and for GE its genomes and their
/// used codons.
#[derive(Clone, Debug)]
pub struct HostIsland {
    /// Its seed ([`island_seed`]).
    pub seed: u64,
    /// The trees of the current generation.
    pub pop: Population,
    /// Their fitness (once evaluated).
    pub fit: Vec<f64>,
    /// GE: the genomes the trees were mapped from.
    pub genomes: Option<Genomes>,
    /// GE: codons each genome's mapping read.
    pub used: Vec<u32>,
}

/// Rows on their way between host islands.
#[derive(Clone, Debug)]
pub struct HostPacket {
    /// `[K]` trees.
    pub trees: Population,
    /// `[K]` fitness.
    pub fit: Vec<f64>,
    /// GE: `[K]` genomes.
    pub genomes: Option<Genomes>,
    /// GE: `[K]` used codons.
    pub used: Vec<u32>,
}

/// Host islands as a [`Transport`].
pub struct HostIslands<'a>(pub &'a mut [HostIsland]);

impl Transport for HostIslands<'_> {
    type Rows = Vec<usize>;
    type Packet = HostPacket;

    fn islands(&self) -> usize {
        self.0.len()
    }

    fn choose(&mut self, i: usize, k: usize) -> Result<(Vec<usize>, Vec<usize>)> {
        let fit = &self.0[i].fit;
        Ok((select::elite(fit, k), worst(fit, k)))
    }

    fn send(&mut self, i: usize, rows: &Vec<usize>) -> Result<HostPacket> {
        let isl = &self.0[i];
        let mut trees = Population::new(rows.len(), isl.pop.max_len, isl.pop.n_outputs);
        for (j, &r) in rows.iter().enumerate() {
            trees.copy_row(j, &isl.pop, r);
        }
        let genomes = isl.genomes.as_ref().map(|g| {
            let mut out = Genomes::new(rows.len(), g.capacity);
            for (j, &r) in rows.iter().enumerate() {
                out.set(j, g.get(r));
            }
            out
        });
        let used = if isl.used.is_empty() { Vec::new() } else { rows.iter().map(|&r| isl.used[r]).collect() };
        Ok(HostPacket { trees, fit: rows.iter().map(|&r| isl.fit[r]).collect(), genomes, used })
    }

    fn receive(&mut self, i: usize, rows: &Vec<usize>, p: HostPacket) -> Result<()> {
        let isl = &mut self.0[i];
        ensure!(rows.len() == p.fit.len(), "{} immigrants for {} rows", p.fit.len(), rows.len());
        for (j, &r) in rows.iter().enumerate() {
            isl.pop.copy_row(r, &p.trees, j);
            isl.fit[r] = p.fit[j];
            if let (Some(g), Some(from)) = (isl.genomes.as_mut(), p.genomes.as_ref()) {
                g.set(r, from.get(j));
            }
            if !isl.used.is_empty() && !p.used.is_empty() {
                isl.used[r] = p.used[j];
            }
        }
        Ok(())
    }
}

/// The islands' populations end to end (island 0's rows first): how snapshots, checkpoints
/// and outcomes hold them.
pub fn concat_trees<'a>(pops: impl IntoIterator<Item = &'a Population>) -> Population {
    let pops: Vec<&Population> = pops.into_iter().collect();
    let (l, o) = pops.first().map_or((0, 0), |p| (p.max_len, p.n_outputs));
    let mut all = Population::new(pops.iter().map(|p| p.size()).sum(), l, o);
    let mut k = 0;
    for p in pops {
        for i in 0..p.size() {
            all.copy_row(k, p, i);
            k += 1;
        }
    }
    all
}

/// [`concat_trees`] for genomes.
pub fn concat_genomes<'a>(gs: impl IntoIterator<Item = &'a Genomes>) -> Genomes {
    let gs: Vec<&Genomes> = gs.into_iter().collect();
    let cap = gs.first().map_or(0, |g| g.capacity);
    let mut all = Genomes { capacity: cap, codons: Vec::new(), len: Vec::new() };
    for g in gs {
        all.codons.extend_from_slice(&g.codons);
        all.len.extend_from_slice(&g.len);
    }
    all
}

/// Splits rows end to end into `n` islands of `p` (the inverse of [`concat_trees`]).
pub fn split_trees(all: &Population, n: usize, p: usize) -> Result<Vec<Population>> {
    ensure!(all.size() == n * p, "{} trees do not make {n} islands of {p}", all.size());
    Ok((0..n)
        .map(|i| {
            let mut pop = Population::new(p, all.max_len, all.n_outputs);
            for r in 0..p {
                pop.copy_row(r, all, i * p + r);
            }
            pop
        })
        .collect())
}

/// Splits genomes end to end into `n` islands of `p` (the inverse of [`concat_genomes`]).
pub fn split_genomes(all: &Genomes, n: usize, p: usize) -> Result<Vec<Genomes>> {
    ensure!(all.size() == n * p, "{} genomes do not make {n} islands of {p}", all.size());
    let c = all.capacity;
    Ok((0..n)
        .map(|i| Genomes { capacity: c, codons: all.codons[i * p * c..(i + 1) * p * c].to_vec(), len: all.len[i * p..(i + 1) * p].to_vec() })
        .collect())
}

/// Checks that a checkpoint of `saved` islands can continue a run of `cfg.count`.
pub fn check_resume(cfg: &IslandConfig, saved: usize) -> Result<()> {
    ensure!(
        saved == cfg.count,
        "the checkpoint holds {saved} island(s) and these settings ask for {}: a run resumes on the island count it was saved with (--islands {saved})",
        cfg.count
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_read_and_print_the_same() {
        for (text, want) in [("all", Gpus::All), ("2", Gpus::Count(2)), ("0,1", Gpus::List(vec![0, 1])), ("3,", Gpus::List(vec![3]))] {
            let g: Gpus = text.parse().unwrap();
            assert_eq!(g, want);
            assert_eq!(g.to_string().parse::<Gpus>().unwrap(), g);
        }
        for bad in ["0", "x", "1,1", ",", "1,a"] {
            assert!(bad.parse::<Gpus>().is_err(), "{bad}");
        }
        assert_eq!(Gpus::Count(4).resolve(2).0, [0, 1]);
        assert!(Gpus::Count(4).resolve(2).1.is_some());
        assert_eq!(Gpus::List(vec![1, 5]).resolve(2), (vec![1], Some("--gpus 1,5: no GPU 5 (the driver sees 2); running on 1".into())));
        assert_eq!(Gpus::All.resolve(3), (vec![0, 1, 2], None));
    }

    #[test]
    fn islands_are_spread_in_blocks() {
        let on: Vec<usize> = (0..8).map(|i| device_of(i, 8, 2)).collect();
        assert_eq!(on, [0, 0, 0, 0, 1, 1, 1, 1]);
        let on: Vec<usize> = (0..3).map(|i| device_of(i, 3, 8)).collect();
        assert_eq!(on, [0, 1, 2], "never more devices than islands");
        assert_eq!(device_of(5, 7, 1), 0);
    }

    #[test]
    fn island_seeds_differ_and_island_zero_is_the_run_seed() {
        assert_eq!(island_seed(42, 0), 42);
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|i| island_seed(42, i)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(island_seed(1, 1), island_seed(2, 1));
    }

    #[test]
    fn worst_is_the_reverse_of_the_elite_order() {
        let fit = [3.0, f64::NAN, 1.0, 3.0, f64::INFINITY, 0.5, 3.0];
        let mut all = select::elite(&fit, fit.len());
        all.reverse();
        for k in 0..=fit.len() {
            assert_eq!(worst(&fit, k), all[..k], "k = {k}");
        }
        assert_eq!(worst(&fit, 2), [4, 1], "NaN and +inf tie; the higher index is worse");
    }

    #[test]
    fn migration_on_a_ring_moves_the_best_over_the_worst() {
        // Island i's tree r has r + 1 nodes (a chain of sin over x0); fitness is given.
        let tree = |n: usize| {
            let mut nodes = vec![crate::program::tree::Node::func(crate::program::Op::Sin); n - 1];
            nodes.push(crate::program::tree::Node::var(0));
            nodes
        };
        let fits = [vec![5.0, 1.0, 4.0, 2.0], vec![0.5, 9.0, 9.0, 0.1], vec![7.0, 6.0, f64::NAN, 8.0]];
        let mut islands: Vec<HostIsland> = fits
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut pop = Population::new(4, 16, 0);
                for r in 0..4 {
                    pop.set_tree(r, &tree(1 + 4 * i + r)).unwrap();
                }
                HostIsland { seed: i as u64, pop, fit: f.clone(), genomes: None, used: Vec::new() }
            })
            .collect();
        let before = islands.clone();
        let plan = migrate(&mut HostIslands(&mut islands), 2).unwrap();
        assert_eq!(plan.leave, [vec![1, 3], vec![3, 0], vec![1, 0]]);
        assert_eq!(plan.replace, [vec![0, 2], vec![2, 1], vec![2, 3]]);
        for (to, isl) in islands.iter().enumerate() {
            let from = (to + 3 - 1) % 3;
            for r in 0..4 {
                match plan.replace[to].iter().position(|&w| w == r) {
                    Some(j) => {
                        let src = plan.leave[from][j];
                        assert_eq!(isl.pop.tree(r).nodes(), before[from].pop.tree(src).nodes(), "island {to} row {r}");
                        assert_eq!(isl.fit[r].to_bits(), before[from].fit[src].to_bits());
                    }
                    None => {
                        assert_eq!(isl.pop.tree(r).nodes(), before[to].pop.tree(r).nodes());
                        assert_eq!(isl.fit[r].to_bits(), before[to].fit[r].to_bits());
                    }
                }
            }
            isl.pop.validate().unwrap();
        }
    }

    #[test]
    fn concatenation_and_split_are_inverse() {
        let mut a = Population::new(2, 8, 0);
        a.set_tree(1, &[crate::program::tree::Node::var(0)]).unwrap();
        let b = Population::new(2, 8, 0);
        let all = concat_trees([&a, &b]);
        assert_eq!(split_trees(&all, 2, 2).unwrap(), [a, b]);
        let mut g = Genomes::new(3, 4);
        g.set(2, &[1, 2, 3]);
        let h = Genomes::new(3, 4);
        let all = concat_genomes([&g, &h]);
        let back = split_genomes(&all, 2, 3).unwrap();
        assert_eq!((&back[0].codons, &back[0].len), (&g.codons, &g.len));
        assert!(split_genomes(&all, 3, 3).is_err());
    }

    #[test]
    fn migration_happens_at_fixed_generations() {
        let c = IslandConfig { count: 4, migrate_every: 5, migrants: 2, gpus: Gpus::All, shard_rows: false, link: GpuLink::Peer };
        let at: Vec<usize> = (0..=20).filter(|&g| c.migrates_after(g, 20)).collect();
        assert_eq!(at, [5, 10, 15]);
        assert!(!IslandConfig { count: 1, ..c.clone() }.migrates_after(5, 20));
        assert!(!IslandConfig { migrants: 0, ..c.clone() }.migrates_after(5, 20));
        assert!(c.check(2).is_ok());
        assert!(c.check(1).unwrap_err().to_string().contains("--migrants"));
        assert!(IslandConfig { count: 0, ..c.clone() }.check(10).unwrap_err().to_string().contains("--islands"));
        assert!(IslandConfig { migrate_every: 0, ..c.clone() }.check(10).unwrap_err().to_string().contains("--migrate-every"));
        assert!(IslandConfig { shard_rows: true, ..c.clone() }.check(10).unwrap_err().to_string().contains("--shard-rows"));
        assert!(IslandConfig { shard_rows: true, count: 1, ..c }.check(10).is_ok());
    }
}
