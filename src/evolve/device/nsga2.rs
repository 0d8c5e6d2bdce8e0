//! NSGA-II in the device loop (`--bloat nsga2`), the host loop's survival and parent choice on
//! the device: each generation's children join the last survivors in a pool of `2P` rows, the
//! `P` best by front and crowding distance survive ([`CudaEngine::pareto_survivors`]), and the
//! next children's parents are drawn from the survivors by crowded-comparison tournaments
//! ([`CudaEngine::select_pareto`]). The children stay where they were evaluated, so the host's
//! reads of the generation (best program, hall of fame) see what the host loop's see; the
//! survivors are the run's population (its outcome and a checkpoint's archive).

use anyhow::Result;

use crate::backend::cuda::{CudaEngine, DeviceFitness, DeviceGenomes, DevicePopulation, DeviceUsed, EliteScratch, Mailbox};
use crate::evolve::{Archive, Representation};

/// One island's NSGA-II state on its GPU.
pub(super) struct Survival {
    /// Rows `[0, P)`: the last survivors; rows `[P, 2P)`: this generation's children (copied in
    /// before the survivors are chosen).
    pool: Rows,
    /// Whether the pool holds survivors yet (not before the first generation's survival,
    /// unless a checkpoint gave them).
    kept: bool,
    /// This generation's survivors, best first: the parents of the next generation.
    pub(super) surv: Rows,
}

/// Rows of a population with their fitness and, for GE, genomes and used codons.
pub(super) struct Rows {
    pub(super) trees: DevicePopulation,
    pub(super) fit: DeviceFitness,
    pub(super) genomes: Option<DeviceGenomes>,
    pub(super) used: Option<DeviceUsed>,
}

impl Rows {
    fn alloc(e: &CudaEngine, n: usize, max_len: usize, n_outputs: usize, genome_capacity: Option<usize>) -> Result<Rows> {
        Ok(Rows {
            trees: e.alloc_population(n, max_len, n_outputs)?,
            fit: e.alloc_fitness(n)?,
            genomes: genome_capacity.map(|c| e.alloc_genomes(n, c)).transpose()?,
            used: genome_capacity.map(|_| e.alloc_used(n)).transpose()?,
        })
    }

    /// `src`'s rows (trees, fitness, GE's genomes and used codons `used`) over rows `at ..`.
    fn copy_from(&mut self, e: &CudaEngine, trees: &DevicePopulation, fit: &DeviceFitness, ge: Option<(&DeviceGenomes, &cudarc::driver::CudaSlice<u32>)>, at: usize) -> Result<()> {
        e.copy_rows_into(trees, &mut self.trees, at)?;
        e.copy_fitness_into(fit, &mut self.fit, at)?;
        if let (Some((g, u)), Some(dg), Some(du)) = (ge, self.genomes.as_mut(), self.used.as_mut()) {
            e.copy_genomes_into(g, dg, at)?;
            e.copy_used_into(u, g.size(), du, at)?;
        }
        Ok(())
    }
}

impl Survival {
    /// The buffers for islands of `p`, with the survivors of `archive` (a checkpoint's) kept.
    pub(super) fn new(e: &CudaEngine, p: usize, max_len: usize, n_outputs: usize, rep: Representation<'_, '_>, archive: Option<&Archive>) -> Result<Survival> {
        let capacity = match rep {
            Representation::Grammar(r) => Some(r.genome_capacity),
            Representation::Trees(_) => None,
        };
        let mut s = Survival { pool: Rows::alloc(e, 2 * p, max_len, n_outputs, capacity)?, kept: false, surv: Rows::alloc(e, p, max_len, n_outputs, capacity)? };
        if let Some(a) = archive {
            anyhow::ensure!(a.fitness.len() == p && a.trees.size() == p, "the checkpoint's survivors ({}) are not an island of {p}", a.fitness.len());
            let trees = e.upload_population(&a.trees)?;
            let fit = e.upload_fitness(&a.fitness)?;
            match (rep, &a.genomes) {
                (Representation::Grammar(r), Some(g)) => {
                    // Their used codons, as the host loop finds them: mapped again.
                    let genomes = e.upload_genomes(g)?;
                    use crate::backend::breed::Breeder;
                    let mut mapping = e.mapping(&r.grammar(), p)?;
                    Breeder::map(e, &r.grammar(), &mut mapping, &genomes, None)?;
                    s.pool.copy_from(e, &trees, &fit, Some((&genomes, mapping.scratch.used())), 0)?;
                }
                (Representation::Trees(_), None) => s.pool.copy_from(e, &trees, &fit, None, 0)?,
                _ => anyhow::bail!("the checkpoint's survivors do not fit this representation"),
            }
            s.kept = true;
        }
        Ok(s)
    }

    /// This generation's survivors from its evaluated children (`trees`, `fit`; GE: `genomes` and
    /// the mapping's used codons), as the host loop's `survive`: all of them before the first
    /// survival, else the best `P` of the pool; they are then kept for the next generation.
    pub(super) fn survive(
        &mut self,
        e: &CudaEngine,
        trees: &DevicePopulation,
        fit: &DeviceFitness,
        ge: Option<(&DeviceGenomes, &cudarc::driver::CudaSlice<u32>)>,
    ) -> Result<()> {
        let p = fit.size();
        if self.kept {
            self.pool.copy_from(e, trees, fit, ge, p)?;
            let idx = e.pareto_survivors(&self.pool.fit, &self.pool.trees, p)?;
            e.gather_trees(&self.pool.trees, &idx, p, &mut self.surv.trees)?;
            self.surv.fit = e.gather_fitness(&self.pool.fit, &idx, p)?;
            if let (Some(pg), Some(pu), Some(sg)) = (&self.pool.genomes, &self.pool.used, self.surv.genomes.as_mut()) {
                e.gather_genomes(pg, &idx, p, sg)?;
                self.surv.used = Some(e.gather_used_rows(pu, &idx, p)?);
            }
        } else {
            self.surv.copy_from(e, trees, fit, ge, 0)?;
        }
        self.keep(e)
    }

    /// Queues the survivors' statistics into `mail` (read as [`MailboxRead::survivors`]): the
    /// generation's, as the host loop's statistics after its survival.
    ///
    /// [`MailboxRead::survivors`]: crate::backend::cuda::MailboxRead::survivors
    pub(super) fn post_stats(&self, e: &CudaEngine, scratch: &mut EliteScratch, mail: &mut Mailbox) -> Result<()> {
        Ok(e.post_stats(&self.surv.fit, &self.surv.trees, scratch, mail)?)
    }

    /// The survivors (as they are now: after a migration, with their immigrants) kept in the
    /// pool for the next generation's survival.
    pub(super) fn keep(&mut self, e: &CudaEngine) -> Result<()> {
        let Rows { trees, fit, genomes, used } = &self.surv;
        let ge = genomes.as_ref().zip(used.as_ref().map(|u| e.used_counts(u)));
        self.pool.copy_from(e, trees, fit, ge, 0)?;
        self.kept = true;
        Ok(())
    }

    /// The survivors on the host, for a checkpoint's archive.
    pub(super) fn archive(&self, e: &CudaEngine) -> Result<Archive> {
        Ok(Archive {
            trees: e.download_population(&self.surv.trees)?,
            genomes: self.surv.genomes.as_ref().map(|g| e.download_genomes(g)).transpose()?,
            fitness: e.download_fitness(&self.surv.fit)?,
        })
    }
}
