//! The breeding contract: the steps of a generation between two evaluations (the first
//! population, parent selection, variation, mapping genomes to trees, elitism's copies), on
//! populations where a backend keeps them. [`Breeder`] has two implementations that give the
//! same bits: [`super::cpu::breed::CpuBreeder`] on host populations (the host loop,
//! `evolve::host`) and [`super::cuda::CudaEngine`] on device buffers (the device loop,
//! `evolve::device`; `src/backend/cuda/breed.rs`). Every random choice is addressed by
//! `(seed, generation, row or slot, purpose)`, so neither depends on the order work is done in.

use anyhow::Result;

use crate::genome::init::InitConfig;
use crate::genome::vary::GeVaryConfig;
use crate::genome::{MapConfig, Mapper};
use crate::grammar::compile::RuleTable;
use crate::grammar::template::Templates;
use crate::program::{BreedConfig, TreeSpec, VaryConfig};
use crate::select::Tournament;

/// A grammar as the mapping step reads it: the compiled rules, the templates that turn a
/// derivation into a tree, and the mapper's limits.
#[derive(Clone, Copy, Debug)]
pub struct Grammar<'g> {
    /// The compiled grammar.
    pub table: &'g RuleTable,
    /// Templates turning derivations into trees.
    pub templates: &'g Templates,
    /// Mapping settings (wraps, depth, codons).
    pub map: MapConfig,
    /// Longest derivation, in entries: a longer one is an invalid mapping.
    pub max_derivation: usize,
}

impl<'g> Grammar<'g> {
    /// The mapper both backends map with: `map`'s settings with the GPU mapper's bounds
    /// ([`crate::genome::MAP_STACK`] pending symbols, `max_derivation` entries).
    pub fn mapper(&self) -> Mapper<'g> {
        Mapper::new(self.table, self.map).with_max_stack(crate::genome::MAP_STACK).with_max_derivation(self.max_derivation)
    }
}

/// The steps of a generation between two evaluations, on a backend's own populations.
///
/// Row layouts are the same on both sides: a population is `P` trees of at most `L` nodes
/// (prefix order), genomes are `P` rows of at most `capacity` codons, fitness is `[P]` f64
/// (lower is better, non-finite invalid). Parent slots come in pairs: child pair `j` has the
/// parents of slots `2j` and `2j + 1`.
pub trait Breeder {
    /// A population of trees.
    type Trees;
    /// A population of genomes.
    type Genomes;
    /// `[P]` fitness.
    type Fitness: ?Sized;
    /// Row indices: tournament winners, or the elite.
    type Rows;
    /// What the mapping step keeps between calls: each genome's used codons of its last
    /// mapping (`[P]`), which crossover and mutation read, and on a GPU the grammar's tables.
    type Mapping;
    /// What breeding trees reports: each child's operators and their outcomes.
    type Bred;

    /// `p` random trees of `spec` (ramped half-and-half), tree `i` from stream `(seed, 0, i, Init)`.
    fn random_trees(&self, spec: &TreeSpec, p: usize, seed: u64) -> Result<Self::Trees>;

    /// GE's first generation: `p` genomes of `grammar` (`init`'s method), of at most
    /// `capacity` codons, row `i` from stream `(seed, 0, i, Init)`.
    fn random_genomes(
        &self,
        grammar: &Grammar<'_>,
        init: &InitConfig,
        p: usize,
        capacity: usize,
        seed: u64,
    ) -> Result<Self::Genomes>;

    /// An empty mapping state for `p` genomes of `grammar`.
    fn mapping(&self, grammar: &Grammar<'_>, p: usize) -> Result<Self::Mapping>;

    /// Maps every genome with [`Grammar::mapper`], keeping the used codons in `mapping`, and
    /// with `trees` builds each genome's tree into the same row (an empty row, an invalid
    /// individual, where it does not map or its tree does not fit).
    fn map(
        &self,
        grammar: &Grammar<'_>,
        mapping: &mut Self::Mapping,
        genomes: &Self::Genomes,
        trees: Option<&mut Self::Trees>,
    ) -> Result<()>;

    /// `n_slots` tournament winners among the valid individuals: slot `s` is
    /// [`Tournament::pick`] with stream `(seed, generation, s, Select)` (`trees` gives the sizes
    /// a bloat-controlling tournament reads).
    fn select_parents(
        &self,
        fit: &Self::Fitness,
        trees: &Self::Trees,
        n_slots: usize,
        tournament: &Tournament,
        seed: u64,
        generation: u32,
    ) -> Result<Self::Rows>;

    /// Breeds every row of `children` from the pair of `parents` in slots `2k, 2k + 1` of
    /// `pairs` ([`crate::program::breed`]: crossover, then mutation, with `mix`'s rates).
    #[allow(clippy::too_many_arguments)]
    fn breed(
        &self,
        parents: &Self::Trees,
        pairs: &Self::Rows,
        children: &mut Self::Trees,
        seed: u64,
        generation: u32,
        vary: &VaryConfig,
        mix: &BreedConfig,
    ) -> Result<Self::Bred>;

    /// Elitism: rows `rows[..n]` of `src` copied to rows `0..n` of `dst`.
    fn copy_trees(&self, src: &Self::Trees, rows: &Self::Rows, n: usize, dst: &mut Self::Trees) -> Result<()>;

    /// GE crossover (`cfg.crossover_op`: [`crate::genome::vary::crossover`] within the
    /// parents' used codons, `mapping`, of `parents`' last mapping, or
    /// [`crate::genome::subtree::subtree_crossover`] on the parents mapped with
    /// [`Grammar::mapper`]): pair `j` of `pairs` crossed with stream
    /// `(seed, generation, j, Crossover)`, its children written to rows `first_row + 2j` and
    /// `first_row + 2j + 1` of `children` (those below its size).
    #[allow(clippy::too_many_arguments)]
    fn crossover(
        &self,
        grammar: &Grammar<'_>,
        parents: &Self::Genomes,
        mapping: &Self::Mapping,
        pairs: &Self::Rows,
        children: &mut Self::Genomes,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()>;

    /// GE mutation (`cfg.mutation_op`: [`crate::genome::vary::int_flip`] within each genome's
    /// own used codons, `mapping`, of `genomes`' last mapping, or
    /// [`crate::genome::subtree::subtree_mutate`] with [`Grammar::mapper`]) of rows
    /// `first_row..` of `genomes` in place, row `k` with stream `(seed, generation, k, Mutate)`.
    #[allow(clippy::too_many_arguments)]
    fn mutate(
        &self,
        grammar: &Grammar<'_>,
        genomes: &mut Self::Genomes,
        mapping: &Self::Mapping,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()>;

    /// Elitism for genomes: rows `rows[..n]` of `src` copied to rows `0..n` of `dst`.
    fn copy_genomes(&self, src: &Self::Genomes, rows: &Self::Rows, n: usize, dst: &mut Self::Genomes) -> Result<()>;
}
