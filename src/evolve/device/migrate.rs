//! Migration between the device loop's islands: [`DeviceIslands`] is the islands as a
//! [`Transport`] that never leaves the devices. Each island chooses its emigrants and the rows
//! they replace on its GPU (`CudaEngine::elite_and_worst`: a radix select, the twin of
//! `select::elite` and `islands::worst`), gathers the emigrants' rows, fitness and (GE) genomes
//! and used codons there, and the receiver scatters them over its worst; between GPUs the
//! gathered rows are copied over the run's [`Link`] (peer to peer, or NCCL). No fitness, index
//! or row comes to the host.

use anyhow::Result;

use super::{Island, Transfers, bytes};
use crate::backend::cuda::{DeviceFitness, DeviceGenomes, DeviceIndices, DevicePopulation, DeviceUsed, Link};
use crate::evolve::islands::{self, Transport};

/// Emigrants in flight, gathered on the sender's GPU: rows, their fitness, and for GE their
/// genomes and used codons.
struct DevicePacket {
    from: usize,
    trees: DevicePopulation,
    fit: DeviceFitness,
    genomes: Option<DeviceGenomes>,
    used: Option<DeviceUsed>,
}

/// The islands of the device loop as a [`Transport`].
struct DeviceIslands<'a, 't, 'r, 'g> {
    isl: &'a mut [Island<'t, 'r, 'g>],
    /// How rows cross between GPUs.
    link: Link<'a>,
    tr: &'a mut Transfers,
}

impl Transport for DeviceIslands<'_, '_, '_, '_> {
    type Rows = DeviceIndices;
    type Packet = DevicePacket;

    fn islands(&self) -> usize {
        self.isl.len()
    }

    fn choose(&mut self, i: usize, k: usize) -> Result<(DeviceIndices, DeviceIndices)> {
        let isl = &self.isl[i];
        let e = isl.engine();
        // NSGA-II: the survivors are the island's population.
        let fit = isl.survival.as_ref().map_or(&isl.fit, |s| &s.surv.fit);
        Ok(e.elite_and_worst(fit, k)?)
    }

    fn send(&mut self, i: usize, rows: &DeviceIndices) -> Result<DevicePacket> {
        let isl = &self.isl[i];
        let e = isl.engine();
        let k = rows.len();
        let mut trees = e.alloc_rows_uninit(k, isl.pop.max_len(), isl.pop.n_outputs())?;
        let (pop, fit) = isl.survival.as_ref().map_or((&isl.pop, &isl.fit), |s| (&s.surv.trees, &s.surv.fit));
        e.gather_trees(pop, rows, k, &mut trees)?;
        let fit = e.gather_fitness(fit, rows, k)?;
        let (genomes, used) = match (&isl.ge, &isl.survival) {
            (Some(g), None) => {
                let mut out = e.alloc_genomes(k, g.genomes.capacity())?;
                e.gather_genomes(&g.genomes, rows, k, &mut out)?;
                (Some(out), Some(e.gather_used(&g.mapping.scratch, rows, k)?))
            }
            (Some(g), Some(s)) => {
                let (Some(sg), Some(su)) = (&s.surv.genomes, &s.surv.used) else {
                    anyhow::bail!("GE's survivors keep their genomes");
                };
                let mut out = e.alloc_genomes(k, g.genomes.capacity())?;
                e.gather_genomes(sg, rows, k, &mut out)?;
                (Some(out), Some(e.gather_used_rows(su, rows, k)?))
            }
            (None, _) => (None, None),
        };
        Ok(DevicePacket { from: i, trees, fit, genomes, used })
    }

    fn receive(&mut self, j: usize, rows: &DeviceIndices, p: DevicePacket) -> Result<()> {
        let k = rows.len();
        anyhow::ensure!(p.fit.size() == k, "{} immigrants for {k} rows", p.fit.size());
        let e = self.isl[j].engine();
        let p = if std::ptr::eq(self.isl[p.from].engine(), e) {
            p
        } else {
            // Another GPU's rows: copied onto this one first, over the run's link.
            self.tr.migration_peer_bytes +=
                p.trees.bytes() + bytes::fitness(p.fit.size()) + p.genomes.as_ref().map_or(0, DeviceGenomes::bytes) + p.used.as_ref().map_or(0, |u| bytes::of::<u32>(u.size()));
            DevicePacket {
                from: j,
                trees: e.copy_population_from(&p.trees, self.link)?,
                fit: e.copy_fitness_from(&p.fit, self.link)?,
                genomes: p.genomes.as_ref().map(|g| e.copy_genomes_from(g, self.link)).transpose()?,
                used: p.used.as_ref().map(|u| e.copy_used_from(u, self.link)).transpose()?,
            }
        };
        let isl = &mut self.isl[j];
        let ge = isl.ge.is_some();
        let immigrants = || match (&p.genomes, &p.used) {
            (Some(genomes), Some(used)) => Ok((genomes, used)),
            _ => Err(anyhow::anyhow!("an island of grammatical evolution received rows without genomes")),
        };
        match isl.survival.as_mut() {
            // NSGA-II: the immigrants replace survivors (kept again for the next survival by
            // the caller).
            Some(s) => {
                e.scatter_trees(&p.trees, rows, k, &mut s.surv.trees)?;
                e.scatter_fitness(&p.fit, rows, k, &mut s.surv.fit)?;
                if ge {
                    let (genomes, used) = immigrants()?;
                    let (Some(sg), Some(su)) = (s.surv.genomes.as_mut(), s.surv.used.as_mut()) else {
                        anyhow::bail!("GE's survivors keep their genomes");
                    };
                    e.scatter_genomes(genomes, rows, k, sg)?;
                    e.scatter_used_rows(used, rows, k, su)?;
                }
            }
            None => {
                e.scatter_trees(&p.trees, rows, k, &mut isl.pop)?;
                e.scatter_fitness(&p.fit, rows, k, &mut isl.fit)?;
                if let Some(g) = isl.ge.as_mut() {
                    let (genomes, used) = immigrants()?;
                    e.scatter_genomes(genomes, rows, k, &mut g.genomes)?;
                    e.scatter_used(used, rows, k, &mut g.mapping.scratch)?;
                }
            }
        }
        Ok(())
    }
}

/// One migration on the devices: [`islands::migrate`] over [`DeviceIslands`] (with NSGA-II,
/// between the islands' survivors, which are then kept for the next survival, as the host
/// loop's), then each island's elite chosen again from its fitness with the immigrants' (`elite_and_stats`, as
/// after evaluating: `select::elite`'s twin; the host loop breeds after migrating too). The
/// statistics it writes again into the mailbox are not read: the generation's were read before
/// migrating.
pub(super) fn migrate_on_device(isl: &mut [Island<'_, '_, '_>], k: usize, n_elite: usize, link: Link<'_>, tr: &mut Transfers) -> Result<()> {
    islands::migrate(&mut DeviceIslands { isl, link, tr }, k)?;
    for i in isl.iter_mut() {
        let e = i.task.engine();
        i.elite = Some(e.elite_and_stats(&i.fit, &i.pop, n_elite, &mut i.es, &mut i.mail)?);
        if let Some(s) = i.survival.as_mut() {
            s.keep(e)?;
        }
    }
    tr.migrations += 1;
    Ok(())
}
