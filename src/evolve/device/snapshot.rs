//! What the host takes from the devices outside a generation's reads: a snapshot between
//! generations (every island's next population, trees or genomes, and NSGA-II's survivors, end
//! to end, for a checkpoint or a stop), and the outcome's rows once the run ends. Each copy is
//! counted in [`super::Transfers`].

use anyhow::Result;

use super::{DeviceLoop, Island, bytes};
use crate::evolve::{Archive, ArchiveRef, Observer, Representation, Snapshot, islands};
use crate::program::tree::Population;

impl DeviceLoop<'_, '_, '_, '_> {
    /// Copies every island's next population (generation `self.gen`, bred: trees, or GE's
    /// genomes) and NSGA-II's survivors back, end to end, counts the bytes and hands the
    /// snapshot to `observer`.
    pub(super) fn snapshot(&mut self, observer: &mut dyn Observer) -> Result<()> {
        let isl = &self.isl;
        let (trees, genomes) = match self.rep {
            Representation::Trees(_) => {
                let each = isl.iter().map(|i| i.engine().download_population(&i.pop)).collect::<std::result::Result<Vec<_>, _>>()?;
                (Some(one_or_joined(each, |all| islands::concat_trees(all))), None)
            }
            Representation::Grammar(_) => {
                let each = isl
                    .iter()
                    .map(|i| i.engine().download_genomes(&i.ge.as_ref().expect("GE keeps its genomes").genomes))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                (None, Some(one_or_joined(each, |all| islands::concat_genomes(all))))
            }
        };
        // NSGA-II: the survivors the next generation competes with, every island's end to end.
        let archive = if self.cfg.bloat == crate::select::Bloat::Nsga2 {
                let each = isl
                    .iter()
                    .map(|i| i.survival.as_ref().expect("NSGA-II keeps survivors").archive(i.engine()))
                    .collect::<Result<Vec<_>>>()?;
                Some(one_or_joined(each, |all| Archive {
                    trees: islands::concat_trees(all.iter().map(|a| &a.trees)),
                    genomes: all.iter().map(|a| a.genomes.as_ref()).collect::<Option<Vec<_>>>().map(islands::concat_genomes),
                    fitness: all.iter().flat_map(|a| a.fitness.iter().copied()).collect(),
                }))
        } else {
            None
        };
        let bytes = trees.as_ref().map_or(0, bytes::population) + genomes.as_ref().map_or(0, bytes::genomes) + archive.as_ref().map_or(0, bytes::archive);
        let tr = &mut self.books.tr;
        tr.snapshots += 1;
        tr.snapshot_bytes += bytes;
        tr.population_bytes_between_generations += bytes;
        let state = Snapshot {
            generation: self.gen,
            genomes: genomes.as_ref(),
            population: trees.as_ref(),
            best: &self.books.best,
            history: &self.history,
            islands: isl.len(),
            island_history: &self.island_history,
            archive: archive.as_ref().map(|a| ArchiveRef { trees: &a.trees, genomes: a.genomes.as_ref(), fitness: &a.fitness }),
        };
        observer.snapshot(&state)
    }
}

/// One island's rows as they are, several islands' joined end to end by `join`.
fn one_or_joined<T>(mut each: Vec<T>, join: impl FnOnce(&[T]) -> T) -> T {
    if each.len() == 1 { each.pop().expect("one island") } else { join(&each) }
}

/// The outcome's population and fitness: every island's evaluated rows (`pop`; with NSGA-II,
/// its survivors), copied to the host end to end; none where they are not `wanted`
/// ([`Observer::wants_population`]).
pub(super) fn outcome_rows(isl: &[Island<'_, '_, '_>], wanted: bool) -> Result<(Population, Vec<f64>)> {
    if !wanted {
        let first = &isl[0].pop;
        return Ok((Population::new(0, first.max_len(), first.n_outputs()), Vec::new()));
    }
    let mut pops = Vec::with_capacity(isl.len());
    let mut fitness = Vec::new();
    for i in isl {
        // NSGA-II: the survivors are the population.
        let (pop, fit) = match &i.survival {
            Some(s) => (&s.surv.trees, &s.surv.fit),
            None => (&i.pop, &i.fit),
        };
        pops.push(i.engine().download_population(pop)?);
        fitness.extend(i.engine().download_fitness(fit)?);
    }
    Ok((one_or_joined(pops, |all| islands::concat_trees(all)), fitness))
}
