//! The breeding contract ([`Breeder`]) on device buffers: each step calls the launcher of its
//! kernel file (`select.cu`: [`CudaEngine::select_tournament`]; `vary.cu`:
//! [`CudaEngine::init_trees`], [`CudaEngine::breed_trees`], the GE operators and the row
//! copies; `map.cu`: [`CudaEngine::init_genomes`], [`CudaEngine::map_trees`]), so the device
//! loop breeds through the same steps as the host loop, whose CPU side is
//! [`crate::backend::cpu::breed::CpuBreeder`].

use anyhow::{Result, anyhow};

use super::vary::UsedCodons;
use super::{CudaEngine, DeviceBred, DeviceFitness, DeviceGenomes, DeviceIndices, DevicePopulation, GpuError, MapLaunch, MapTreesScratch};
use crate::backend::breed::{Breeder, Grammar};
use crate::genome::init::InitConfig;
use crate::genome::vary::{GeCrossover, GeMutation, GeVaryConfig};
use crate::grammar::template::DeviceTables;
use crate::program::{BreedConfig, TreeSpec, VaryConfig};
use crate::select::{Bloat, Tournament};

/// The mapping step's state on the device: the grammar's tables (the mapper's constant memory)
/// and the scratch of the last mapping, whose used codons `[P]` crossover and mutation read.
pub struct DeviceMapping {
    /// The rule table and templates as `kernels/map.cu` reads them.
    pub tables: DeviceTables,
    /// Statuses and used codons of the last mapping.
    pub scratch: MapTreesScratch,
}

impl CudaEngine {
    /// GE crossover as `cfg.crossover_op` names it: one-point within `used` codons
    /// ([`Self::ge_crossover`]) or of derivation subtrees ([`Self::ge_subtree_crossover`], which
    /// maps the parents again itself), for the device loop's breeding and NSGA-II's survivors.
    #[allow(clippy::too_many_arguments)]
    pub fn ge_crossover_by_op(
        &self,
        grammar: &Grammar<'_>,
        tables: &DeviceTables,
        parents: &DeviceGenomes,
        used: UsedCodons<'_>,
        pairs: &DeviceIndices,
        children: &mut DeviceGenomes,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> super::error::Result<()> {
        match cfg.crossover_op {
            GeCrossover::Onepoint => self.ge_crossover(parents, used, pairs, children, first_row, cfg, seed, generation),
            GeCrossover::Subtree => {
                self.ge_subtree_crossover(tables, &grammar.map, grammar.max_derivation, parents, pairs, children, first_row, cfg, seed, generation)
            }
        }
    }
}

impl Breeder for CudaEngine {
    type Trees = DevicePopulation;
    type Genomes = DeviceGenomes;
    type Fitness = DeviceFitness;
    type Rows = DeviceIndices;
    type Mapping = DeviceMapping;
    type Bred = DeviceBred;

    fn random_trees(&self, spec: &TreeSpec, p: usize, seed: u64) -> Result<DevicePopulation> {
        Ok(self.init_trees(spec, p, seed)?)
    }

    fn random_genomes(
        &self,
        grammar: &Grammar<'_>,
        init: &InitConfig,
        p: usize,
        capacity: usize,
        seed: u64,
    ) -> Result<DeviceGenomes> {
        let tables = DeviceTables::new(grammar.table, grammar.templates).map_err(|m| anyhow!("{m}"))?;
        Ok(self.init_genomes(grammar.table, &tables, init, grammar.map.codons, p, capacity, seed)?)
    }

    fn mapping(&self, grammar: &Grammar<'_>, p: usize) -> Result<DeviceMapping> {
        let tables = DeviceTables::new(grammar.table, grammar.templates).map_err(|m| anyhow!("{m}"))?;
        Ok(DeviceMapping { tables, scratch: self.alloc_map_trees(p, grammar.max_derivation)? })
    }

    fn map(
        &self,
        grammar: &Grammar<'_>,
        m: &mut DeviceMapping,
        genomes: &DeviceGenomes,
        trees: Option<&mut DevicePopulation>,
    ) -> Result<()> {
        Ok(self.map_trees(&m.tables, genomes, &grammar.map, trees, &mut m.scratch, &MapLaunch::default())?)
    }

    fn select_parents(
        &self,
        fit: &DeviceFitness,
        trees: &DevicePopulation,
        n_slots: usize,
        tournament: &Tournament,
        seed: u64,
        generation: u32,
    ) -> Result<DeviceIndices> {
        // `grove_tournament` reads fitness only: bloat control by size stays on the host.
        if tournament.bloat != Bloat::None {
            return Err(GpuError::Config(format!("tournaments with bloat control ({:?}) run on the host", tournament.bloat)).into());
        }
        Ok(self.select_tournament(fit, tournament.unique.then_some(trees), n_slots, tournament.size, false, seed, generation)?)
    }

    fn breed(
        &self,
        parents: &DevicePopulation,
        pairs: &DeviceIndices,
        children: &mut DevicePopulation,
        seed: u64,
        generation: u32,
        vary: &VaryConfig,
        mix: &BreedConfig,
    ) -> Result<DeviceBred> {
        Ok(self.breed_trees(parents, pairs, children, seed, generation, vary, mix)?)
    }

    fn copy_trees(&self, src: &DevicePopulation, rows: &DeviceIndices, n: usize, dst: &mut DevicePopulation) -> Result<()> {
        Ok(self.gather_trees(src, rows, n, dst)?)
    }

    fn crossover(
        &self,
        grammar: &Grammar<'_>,
        parents: &DeviceGenomes,
        m: &DeviceMapping,
        pairs: &DeviceIndices,
        children: &mut DeviceGenomes,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        Ok(self.ge_crossover_by_op(grammar, &m.tables, parents, UsedCodons::Counts(m.scratch.used()), pairs, children, first_row, cfg, seed, generation)?)
    }

    fn mutate(
        &self,
        grammar: &Grammar<'_>,
        genomes: &mut DeviceGenomes,
        m: &DeviceMapping,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        match cfg.mutation_op {
            GeMutation::IntFlip => Ok(self.ge_int_flip(genomes, UsedCodons::Counts(m.scratch.used()), first_row, cfg, seed, generation)?),
            GeMutation::Subtree => {
                Ok(self.ge_subtree_mutate(&m.tables, &grammar.map, grammar.max_derivation, genomes, first_row, cfg, seed, generation)?)
            }
        }
    }

    fn copy_genomes(&self, src: &DeviceGenomes, rows: &DeviceIndices, n: usize, dst: &mut DeviceGenomes) -> Result<()> {
        Ok(self.gather_genomes(src, rows, n, dst)?)
    }
}
