//! Populations and genomes in device memory ([`DevicePopulation`], [`DeviceGenomes`]: the
//! layouts of [`Population`] and [`Genomes`]) and their copies to and from the host. No kernels
//! of their own: a read of chosen rows ([`CudaEngine::download_trees`]) gathers them with
//! `vary.cu`'s `grove_gather_trees` first.

use cudarc::driver::CudaSlice;

use super::CudaEngine;
use super::error::{During, GpuError, Result};
use super::memory::zeros;
use crate::genome::Genomes;
use crate::program::tree::{Node, Population};

/// A population of trees on the device, laid out as [`Population`]: `op`, `value`, `size`,
/// `out` `[P × L]` (u8, f32, u16, u8) and `len` `[P]` u16; prefix order, padding zero.
pub struct DevicePopulation {
    pub(super) op: CudaSlice<u8>,
    pub(super) value: CudaSlice<f32>,
    pub(super) size: CudaSlice<u16>,
    pub(super) out: CudaSlice<u8>,
    pub(super) len: CudaSlice<u16>,
    pub(super) n: usize,
    pub(super) max_len: usize,
    pub(super) n_outputs: usize,
    pub(super) engine: u64,
}

impl std::fmt::Debug for DevicePopulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePopulation").field("n", &self.n).field("max_len", &self.max_len).finish_non_exhaustive()
    }
}

impl DevicePopulation {
    /// `P`.
    pub fn size(&self) -> usize {
        self.n
    }
    /// `L`.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
    /// Output slots.
    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }
    /// Bytes of device memory the rows take (opcode, value, size, output slot per node; a
    /// length per row).
    pub fn bytes(&self) -> usize {
        self.n * self.max_len * (1 + 4 + 2 + 1) + self.n * 2
    }
}

/// Genomes on the device: codons `[P × capacity]` u32 (row-major) and lengths `[P]` u32.
pub struct DeviceGenomes {
    pub(super) codons: CudaSlice<u32>,
    pub(super) len: CudaSlice<u32>,
    pub(super) n: usize,
    pub(super) capacity: usize,
    pub(super) engine: u64,
}

impl std::fmt::Debug for DeviceGenomes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceGenomes").field("n", &self.n).field("capacity", &self.capacity).finish()
    }
}

impl DeviceGenomes {
    /// `P`: genomes.
    pub fn size(&self) -> usize {
        self.n
    }
    /// Bytes of device memory the genomes take (codons and lengths).
    pub fn bytes(&self) -> usize {
        (self.n * self.capacity + self.n) * 4
    }
    /// Row stride, codons.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl CudaEngine {
    /// Copies a population to the device (checked with [`Population::validate`] first: the
    /// kernels rely on every invariant).
    pub fn upload_population(&self, pop: &Population) -> Result<DevicePopulation> {
        pop.validate().map_err(|e| GpuError::Input(format!("population to upload: {e}")))?;
        if pop.size() > u32::MAX as usize / 2 {
            return Err(GpuError::Input(format!("{} trees: at most {}", pop.size(), u32::MAX / 2)));
        }
        Ok(DevicePopulation {
            op: self.upload(&pop.op, "uploading opcodes")?,
            value: self.upload(&pop.value, "uploading values")?,
            size: self.upload(&pop.size, "uploading sizes")?,
            out: self.upload(&pop.out, "uploading output slots")?,
            len: self.upload(&pop.len, "uploading lengths")?,
            n: pop.size(),
            max_len: pop.max_len,
            n_outputs: pop.n_outputs,
            engine: self.id,
        })
    }

    /// An empty population on the device (every row of length 0), `p` rows of `max_len`.
    pub fn alloc_population(&self, p: usize, max_len: usize, n_outputs: usize) -> Result<DevicePopulation> {
        let nodes = p.checked_mul(max_len).ok_or_else(|| GpuError::Input("population too large".into()))?;
        Ok(DevicePopulation {
            op: zeros(&self.stream, nodes, "allocating opcodes")?,
            value: zeros(&self.stream, nodes, "allocating values")?,
            size: zeros(&self.stream, nodes, "allocating sizes")?,
            out: zeros(&self.stream, nodes, "allocating output slots")?,
            len: zeros(&self.stream, p, "allocating lengths")?,
            n: p,
            max_len,
            n_outputs,
            engine: self.id,
        })
    }

    /// `p` rows of `max_len` whose memory is not cleared: for rows written whole before they
    /// are read (a gather's or a copy's destination; migration's packets), which saves the five
    /// memsets of [`Self::alloc_population`].
    pub fn alloc_rows_uninit(&self, p: usize, max_len: usize, n_outputs: usize) -> Result<DevicePopulation> {
        let nodes = p.checked_mul(max_len).ok_or_else(|| GpuError::Input("population too large".into()))?;
        // SAFETY: the memory is uninitialised; the callers write every row (all L nodes and
        // the length) before anything reads it.
        unsafe {
            Ok(DevicePopulation {
                op: self.stream.alloc(nodes.max(1)).during(|| "allocating opcodes".into())?,
                value: self.stream.alloc(nodes.max(1)).during(|| "allocating values".into())?,
                size: self.stream.alloc(nodes.max(1)).during(|| "allocating sizes".into())?,
                out: self.stream.alloc(nodes.max(1)).during(|| "allocating output slots".into())?,
                len: self.stream.alloc(p.max(1)).during(|| "allocating lengths".into())?,
                n: p,
                max_len,
                n_outputs,
                engine: self.id,
            })
        }
    }

    /// Copies a population back.
    pub fn download_population(&self, d: &DevicePopulation) -> Result<Population> {
        let mut pop = Population::new(d.n, d.max_len, d.n_outputs);
        let nodes = d.n * d.max_len;
        let mut op = self.stream.clone_dtoh(&d.op).during(|| "reading opcodes".into())?;
        let mut value = self.stream.clone_dtoh(&d.value).during(|| "reading values".into())?;
        let mut size = self.stream.clone_dtoh(&d.size).during(|| "reading sizes".into())?;
        let mut out = self.stream.clone_dtoh(&d.out).during(|| "reading output slots".into())?;
        let mut len = self.stream.clone_dtoh(&d.len).during(|| "reading lengths".into())?;
        op.truncate(nodes);
        value.truncate(nodes);
        size.truncate(nodes);
        out.truncate(nodes);
        len.truncate(d.n);
        (pop.op, pop.value, pop.size, pop.out, pop.len) = (op, value, size, out, len);
        Ok(pop)
    }

    /// Empty genomes on the device, `p` rows of `capacity` codons.
    pub fn alloc_genomes(&self, p: usize, capacity: usize) -> Result<DeviceGenomes> {
        let total = p.checked_mul(capacity).ok_or_else(|| GpuError::Input("genomes too large".into()))?;
        Ok(DeviceGenomes {
            codons: zeros(&self.stream, total, "allocating genomes")?,
            len: zeros(&self.stream, p, "allocating genome lengths")?,
            n: p,
            capacity,
            engine: self.id,
        })
    }

    /// Copies genomes to the device (rows checked: every length within the capacity).
    pub fn upload_genomes(&self, genomes: &Genomes) -> Result<DeviceGenomes> {
        let (p, cap) = (genomes.size(), genomes.capacity);
        if p > u32::MAX as usize || cap > u32::MAX as usize || genomes.codons.len() != p * cap {
            return Err(GpuError::Input(format!(
                "{} codons for {p} genomes of capacity {cap} (at most {} genomes and capacity)",
                genomes.codons.len(),
                u32::MAX
            )));
        }
        if let Some(i) = genomes.len.iter().position(|&l| l as usize > cap) {
            return Err(GpuError::Input(format!("genome {i}: length {} over capacity {cap}", genomes.len[i])));
        }
        Ok(DeviceGenomes {
            codons: self.upload(&genomes.codons, "uploading genomes")?,
            len: self.upload(&genomes.len, "uploading genome lengths")?,
            n: p,
            capacity: cap,
            engine: self.id,
        })
    }

    /// Copies genome `i` back (its codons, without the row's padding).
    pub fn download_genome(&self, g: &DeviceGenomes, i: usize) -> Result<Vec<u32>> {
        if i >= g.n || g.engine != self.id {
            return Err(GpuError::Input(format!("genome {i} of {}", g.n)));
        }
        let mut len = [0u32];
        self.stream.memcpy_dtoh(&g.len.slice(i..i + 1), &mut len[..]).during(|| "reading a genome's length".into())?;
        self.stream.synchronize().during(|| "reading a genome's length".into())?;
        let n = (len[0] as usize).min(g.capacity);
        let mut codons = vec![0u32; n];
        if n > 0 {
            let at = i * g.capacity;
            self.stream.memcpy_dtoh(&g.codons.slice(at..at + n), &mut codons[..]).during(|| "reading a genome".into())?;
            self.stream.synchronize().during(|| "reading a genome".into())?;
        }
        Ok(codons)
    }

    /// Copies genomes back.
    pub fn download_genomes(&self, g: &DeviceGenomes) -> Result<Genomes> {
        let mut out = Genomes::new(g.n, g.capacity);
        let mut codons = self.stream.clone_dtoh(&g.codons).during(|| "reading genomes".into())?;
        let mut len = self.stream.clone_dtoh(&g.len).during(|| "reading genome lengths".into())?;
        codons.truncate(g.n * g.capacity);
        len.truncate(g.n);
        (out.codons, out.len) = (codons, len);
        Ok(out)
    }

    /// Rows `idx` of `pop`, copied back as trees (one gather on the device, one copy).
    pub fn download_trees(&self, pop: &DevicePopulation, idx: &[u32]) -> Result<Vec<Vec<Node>>> {
        if idx.is_empty() {
            return Ok(Vec::new());
        }
        let dev_idx = self.upload_indices(idx, pop.size())?;
        let mut small = self.alloc_population(idx.len(), pop.max_len(), pop.n_outputs())?;
        self.gather_trees(pop, &dev_idx, idx.len(), &mut small)?;
        let host = self.download_population(&small)?;
        Ok((0..idx.len()).map(|r| host.tree(r).nodes()).collect())
    }
}
