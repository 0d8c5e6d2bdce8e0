//! Migration between the device loop's islands: [`DeviceIslands`] is the islands as a
//! [`Transport`]: fitness (and GE's used codons) come to the host to choose who moves; rows move
//! on the device (a gather into the sender's staging rows, a scatter over the receiver's worst),
//! through the host only between GPUs.

use anyhow::{Result, anyhow};

use super::{Island, Transfers};
use crate::backend::cuda::{CudaEngine, DeviceGenomes, DevicePopulation};
use crate::evolve::islands::{self, Transport};

/// Rows on their way between islands of the device loop: gathered into the sender's
/// staging rows; `fit` and `used` (GE) are the host's copies.
struct DevicePacket {
    from: usize,
    fit: Vec<f64>,
    used: Vec<u32>,
}

/// Staging rows of one island for migration: its emigrants (and, on another GPU than the
/// sender's, its immigrants copied through the host).
pub(super) struct Staging {
    out: DevicePopulation,
    inbox: DevicePopulation,
    out_genomes: Option<DeviceGenomes>,
    inbox_genomes: Option<DeviceGenomes>,
}

/// The islands of the device loop as a [`Transport`]: fitness (and
/// GE's used codons) come to the host to choose who moves; rows move on the device (a gather
/// into the sender's staging rows, a scatter over the receiver's worst), through the host only
/// between GPUs.
struct DeviceIslands<'a, 't, 'r, 'g> {
    isl: &'a mut [Island<'t, 'r, 'g>],
    staging: &'a mut Vec<Option<Staging>>,
    fits: Vec<Vec<f64>>,
    used: Vec<Vec<u32>>,
    k: usize,
    tr: &'a mut Transfers,
}

impl DeviceIslands<'_, '_, '_, '_> {
    fn staging(&mut self, i: usize) -> Result<&mut Staging> {
        if self.staging[i].is_none() {
            let isl = &self.isl[i];
            let e = isl.engine();
            let (l, o) = (isl.pop.max_len(), isl.pop.n_outputs());
            let k = self.k.max(1);
            let genomes = |e: &CudaEngine| -> Result<Option<DeviceGenomes>> {
                Ok(match &isl.ge {
                    Some(g) => Some(e.alloc_genomes(k, g.genomes.capacity())?),
                    None => None,
                })
            };
            self.staging[i] = Some(Staging {
                out: e.alloc_population(k, l, o)?,
                inbox: e.alloc_population(k, l, o)?,
                out_genomes: genomes(e)?,
                inbox_genomes: genomes(e)?,
            });
        }
        Ok(self.staging[i].as_mut().expect("just made"))
    }
}

impl Transport for DeviceIslands<'_, '_, '_, '_> {
    type Packet = DevicePacket;

    fn islands(&self) -> usize {
        self.isl.len()
    }

    fn fitness(&mut self, i: usize) -> anyhow::Result<Vec<f64>> {
        let isl = &self.isl[i];
        let e = isl.engine();
        let fit = e.download_fitness(&isl.fit)?;
        let used = match &isl.ge {
            Some(g) => e.download_used(&g.mapping.scratch)?,
            None => Vec::new(),
        };
        self.tr.migration_bytes += fit.len() * 8 + used.len() * 4;
        self.tr.population_bytes_between_generations += fit.len() * 8 + used.len() * 4;
        self.fits[i] = fit.clone();
        self.used[i] = used;
        Ok(fit)
    }

    fn send(&mut self, i: usize, rows: &[usize]) -> anyhow::Result<DevicePacket> {
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        self.tr.migration_bytes += idx.len() * 4;
        let fit = rows.iter().map(|&r| self.fits[i][r]).collect();
        let used = if self.used[i].is_empty() { Vec::new() } else { rows.iter().map(|&r| self.used[i][r]).collect() };
        self.staging(i)?;
        let (isl, st) = (&self.isl[i], self.staging[i].as_mut().expect("made above"));
        let e = isl.engine();
        let dev = e.upload_indices(&idx, isl.pop.size())?;
        e.gather_trees(&isl.pop, &dev, idx.len(), &mut st.out)?;
        if let (Some(g), Some(out)) = (&isl.ge, st.out_genomes.as_mut()) {
            e.gather_genomes(&g.genomes, &dev, idx.len(), out)?;
        }
        Ok(DevicePacket { from: i, fit, used })
    }

    fn receive(&mut self, j: usize, rows: &[usize], packet: DevicePacket) -> anyhow::Result<()> {
        let n = rows.len();
        anyhow::ensure!(packet.fit.len() == n, "{} immigrants for {n} rows", packet.fit.len());
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        self.tr.migration_bytes += idx.len() * 4;
        self.staging(j)?;
        let from = packet.from;
        let same_gpu = std::ptr::eq(self.isl[from].engine(), self.isl[j].engine());
        if !same_gpu {
            // Between GPUs: through the host, into the receiver's inbox.
            let src = &self.isl[from];
            let st = self.staging[from].as_ref().expect("the sender staged its rows");
            let trees = src.engine().download_population(&st.out)?;
            let genomes = st.out_genomes.as_ref().map(|g| src.engine().download_genomes(g)).transpose()?;
            let e = self.isl[j].engine();
            let st = self.staging[j].as_mut().expect("made above");
            st.inbox = e.upload_population(&trees)?;
            self.tr.migration_bytes += 2 * (trees.op.len() * 8 + trees.len.len() * 2);
            if let Some(g) = genomes {
                self.tr.migration_bytes += 2 * (g.codons.len() + g.len.len()) * 4;
                st.inbox_genomes = Some(e.upload_genomes(&g)?);
            }
        }
        // The rows to write: the sender's staged emigrants on one GPU, else the receiver's inbox.
        let st = if same_gpu { self.staging[from].as_ref() } else { self.staging[j].as_ref() };
        let st = st.ok_or_else(|| anyhow!("no staged rows for island {j}"))?;
        let (rows_src, genomes_src) = if same_gpu { (&st.out, st.out_genomes.as_ref()) } else { (&st.inbox, st.inbox_genomes.as_ref()) };
        let isl = &mut self.isl[j];
        let e = isl.task.engine();
        let dev = e.upload_indices(&idx, isl.pop.size())?;
        e.scatter_trees(rows_src, &dev, n, &mut isl.pop)?;
        if let (Some(g), Some(src)) = (isl.ge.as_mut(), genomes_src) {
            e.scatter_genomes(src, &dev, n, &mut g.genomes)?;
        }
        for (k, &r) in rows.iter().enumerate() {
            self.fits[j][r] = packet.fit[k];
            if !packet.used.is_empty() {
                self.used[j][r] = packet.used[k];
            }
        }
        Ok(())
    }
}

/// One migration on the device: [`islands::migrate`] over [`DeviceIslands`], then each
/// island's fitness (and GE's used codons) written back with the immigrants', and its elite
/// chosen again from them (`select::elite`, as the host loop breeds after migrating).
pub(super) fn migrate_on_device(isl: &mut [Island<'_, '_, '_>], staging: &mut Vec<Option<Staging>>, k: usize, n_elite: usize, tr: &mut Transfers) -> Result<()> {
    let n = isl.len();
    let mut t = DeviceIslands { isl, staging, fits: vec![Vec::new(); n], used: vec![Vec::new(); n], k, tr };
    islands::migrate(&mut t, k)?;
    let DeviceIslands { isl, fits, used, tr, .. } = t;
    for ((i, fit), used) in isl.iter_mut().zip(&fits).zip(&used) {
        let e = i.task.engine();
        e.write_fitness(&mut i.fit, fit)?;
        if let Some(g) = i.ge.as_mut() {
            e.write_used(&mut g.mapping.scratch, used)?;
        }
        let elite: Vec<u32> = crate::select::elite(fit, n_elite).into_iter().map(|r| r as u32).collect();
        i.elite = Some(e.upload_indices(&elite, fit.len())?);
        tr.migration_bytes += fit.len() * 8 + used.len() * 4 + elite.len() * 4;
    }
    tr.migrations += 1;
    Ok(())
}
