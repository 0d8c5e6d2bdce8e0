//! Between GPUs: one engine's buffers copied into another's on the device, with no copy through
//! the host, over a [`Link`]: peer to peer by the driver (over NVLink or PCIe; cudarc's
//! `memcpy_dtod` takes the peer path when the contexts differ and orders the copy after the
//! source stream's work), or by NCCL's send and receive (`nccl.rs`). Migration between islands
//! on different GPUs moves its rows this way (src/evolve/device/migrate.rs), and a row shard's
//! GPU its population, order and sums.

use cudarc::driver::{CudaSlice, DeviceRepr, sys};

use super::error::{During, GpuError, Result};
use super::nccl::Comms;
use super::{CudaEngine, DeviceFitness, DeviceGenomes, DevicePopulation, MapTreesScratch};

/// How bytes cross from one engine's memory to another's. Both move the same bytes: a run's
/// results do not depend on the link.
#[derive(Clone, Copy, Debug)]
pub enum Link<'a> {
    /// The driver's peer copies (`cuMemcpyPeerAsync`).
    Peer,
    /// NCCL's send and receive between the communicators' ranks.
    Nccl(&'a Comms),
}

/// The used codons of some rows of a mapping, on the device (migrants', gathered by
/// [`CudaEngine::gather_used`]).
pub struct DeviceUsed {
    pub(super) used: CudaSlice<u32>,
    pub(super) n: usize,
    pub(super) engine: u64,
}

impl DeviceUsed {
    /// Rows.
    pub fn size(&self) -> usize {
        self.n
    }
}

impl CudaEngine {
    /// Lets this engine's context read and write `other`'s memory directly (peer access), where
    /// the two devices can; `Ok(false)` where they cannot (copies between them still work, staged
    /// by the driver). Asking again is harmless.
    pub fn enable_peer_access(&self, other: &CudaEngine) -> Result<bool> {
        if self.ordinal == other.ordinal {
            return Ok(true);
        }
        let mut can = 0;
        // SAFETY: both handles come from live contexts; the driver writes one int.
        let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), other.ctx.cu_device()) };
        r.result().during(|| "asking whether two GPUs can reach each other".into())?;
        if can == 0 {
            return Ok(false);
        }
        self.ctx.bind_to_thread().during(|| "binding a context".into())?;
        // SAFETY: this engine's context is current on the thread (bound above); the peer's
        // context outlives the call.
        let r = unsafe { sys::cuCtxEnablePeerAccess(other.ctx.cu_ctx(), 0) };
        match r {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
            other => other.result().map(|_| true).during(|| "enabling peer access between two GPUs".into()),
        }
    }

    /// The used codons of rows `idx[..n]` of the last mapping, in that order.
    pub fn gather_used(&self, s: &MapTreesScratch, idx: &super::DeviceIndices, n: usize) -> Result<DeviceUsed> {
        if s.engine != self.id || idx.engine != self.id || n > idx.n || idx.bound > s.size() {
            return Err(GpuError::Input(format!("gathering {n} used-codon counts by {} indices below {} of {}", idx.n, idx.bound, s.size())));
        }
        let mut used = self.alloc::<u32>(n, false, "allocating gathered used codons")?;
        self.words(super::kernels::GATHER_WORDS, n, 1, &idx.idx, &s.used, &mut used)?;
        Ok(DeviceUsed { used, n, engine: self.id })
    }

    /// Rows `idx[..n]` of the last mapping take `src`'s used codons in order (immigrants').
    pub fn scatter_used(&self, src: &DeviceUsed, idx: &super::DeviceIndices, n: usize, s: &mut MapTreesScratch) -> Result<()> {
        if src.engine != self.id || s.engine != self.id || idx.engine != self.id || n > idx.n || n > src.n || idx.bound > s.size() {
            return Err(GpuError::Input(format!("scattering {n} used-codon counts by {} indices below {} into {}", idx.n, idx.bound, s.size())));
        }
        self.words(super::kernels::SCATTER_WORDS, n, 1, &idx.idx, &src.used, &mut s.used)
    }

    /// A copy on this engine of `src`, another engine's rows (or this one's), over `link`.
    pub fn copy_population_from(&self, src: &DevicePopulation, link: Link<'_>) -> Result<DevicePopulation> {
        let mut dst = self.alloc_rows_uninit(src.n, src.max_len, src.n_outputs)?;
        self.copy_population_into(src, &mut dst, link)?;
        Ok(dst)
    }

    /// `src` (another engine's rows, or this one's) copied over `dst` (this engine's, the same
    /// shape), over `link`: a row shard's GPU receives each generation's population this way.
    pub fn copy_population_into(&self, src: &DevicePopulation, dst: &mut DevicePopulation, link: Link<'_>) -> Result<()> {
        if (src.n, src.max_len, src.n_outputs) != (dst.n, dst.max_len, dst.n_outputs) || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {} rows of L = {} into {} rows of L = {}", src.n, src.max_len, dst.n, dst.max_len)));
        }
        let from = src.engine;
        self.cross(link, from, &src.op, &mut dst.op)?;
        self.cross(link, from, &src.value, &mut dst.value)?;
        self.cross(link, from, &src.size, &mut dst.size)?;
        self.cross(link, from, &src.out, &mut dst.out)?;
        self.cross(link, from, &src.len, &mut dst.len)
    }

    /// A copy on this engine of another engine's genomes, over `link`.
    pub fn copy_genomes_from(&self, src: &DeviceGenomes, link: Link<'_>) -> Result<DeviceGenomes> {
        let mut dst = self.alloc_genomes(src.n, src.capacity)?;
        self.cross(link, src.engine, &src.codons, &mut dst.codons)?;
        self.cross(link, src.engine, &src.len, &mut dst.len)?;
        Ok(dst)
    }

    /// A copy on this engine of another engine's fitness values, over `link`.
    pub fn copy_fitness_from(&self, src: &DeviceFitness, link: Link<'_>) -> Result<DeviceFitness> {
        let mut fit = self.alloc::<f64>(src.n, false, "allocating copied fitness")?;
        self.cross(link, src.engine, &src.fit, &mut fit)?;
        Ok(DeviceFitness { fit, n: src.n, engine: self.id })
    }

    /// A copy on this engine of another engine's used codons, over `link`.
    pub fn copy_used_from(&self, src: &DeviceUsed, link: Link<'_>) -> Result<DeviceUsed> {
        let mut used = self.alloc::<u32>(src.n, false, "allocating copied used codons")?;
        self.cross(link, src.engine, &src.used, &mut used)?;
        Ok(DeviceUsed { used, n: src.n, engine: self.id })
    }

    /// `src` (of any engine) into `dst` (of this one), on this engine's stream after the
    /// source's queued work.
    /// Every row of `src` copied over rows `at ..` of `dst` (this engine's, the same row shape):
    /// NSGA-II's pool holds the last survivors and this generation's children side by side.
    pub fn copy_rows_into(&self, src: &DevicePopulation, dst: &mut DevicePopulation, at: usize) -> Result<()> {
        if (src.max_len, src.n_outputs) != (dst.max_len, dst.n_outputs) || at + src.n > dst.n || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {} rows of L = {} into rows {at}.. of {} of L = {}", src.n, src.max_len, dst.n, dst.max_len)));
        }
        let l = src.max_len;
        self.copy_at(&src.op, src.n * l, &mut dst.op, at * l)?;
        self.copy_at(&src.value, src.n * l, &mut dst.value, at * l)?;
        self.copy_at(&src.size, src.n * l, &mut dst.size, at * l)?;
        self.copy_at(&src.out, src.n * l, &mut dst.out, at * l)?;
        self.copy_at(&src.len, src.n, &mut dst.len, at)
    }

    /// `src`'s fitness values copied over entries `at ..` of `dst`.
    pub fn copy_fitness_into(&self, src: &DeviceFitness, dst: &mut DeviceFitness, at: usize) -> Result<()> {
        if at + src.n > dst.n || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {} fitness values into entries {at}.. of {}", src.n, dst.n)));
        }
        self.copy_at(&src.fit, src.n, &mut dst.fit, at)
    }

    /// `src`'s genomes copied over genomes `at ..` of `dst` (the same capacity).
    pub fn copy_genomes_into(&self, src: &DeviceGenomes, dst: &mut DeviceGenomes, at: usize) -> Result<()> {
        if src.capacity != dst.capacity || at + src.n > dst.n || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {} genomes into genomes {at}.. of {}", src.n, dst.n)));
        }
        self.copy_at(&src.codons, src.n * src.capacity, &mut dst.codons, at * dst.capacity)?;
        self.copy_at(&src.len, src.n, &mut dst.len, at)
    }

    /// Used-codon counts for `n` rows, uninitialised.
    pub fn alloc_used(&self, n: usize) -> Result<DeviceUsed> {
        Ok(DeviceUsed { used: self.alloc::<u32>(n, false, "allocating used codons")?, n, engine: self.id })
    }

    /// The first `n` used-codon counts of `src` (a mapping's, or another list's) copied over
    /// entries `at ..` of `dst`.
    pub fn copy_used_into(&self, src: &CudaSlice<u32>, n: usize, dst: &mut DeviceUsed, at: usize) -> Result<()> {
        if at + n > dst.n || n > src.len() || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {n} used-codon counts into entries {at}.. of {}", dst.n)));
        }
        self.copy_at(src, n, &mut dst.used, at)
    }

    /// The used-codon counts of rows `idx[..n]` of `src`, in that order.
    pub fn gather_used_rows(&self, src: &DeviceUsed, idx: &super::DeviceIndices, n: usize) -> Result<DeviceUsed> {
        if src.engine != self.id || idx.engine != self.id || n > idx.n || idx.bound > src.n {
            return Err(GpuError::Input(format!("gathering {n} used-codon counts by {} indices below {} of {}", idx.n, idx.bound, src.n)));
        }
        let mut used = self.alloc::<u32>(n, false, "allocating gathered used codons")?;
        self.words(super::kernels::GATHER_WORDS, n, 1, &idx.idx, &src.used, &mut used)?;
        Ok(DeviceUsed { used, n, engine: self.id })
    }

    /// Rows `idx[..n]` of `dst` take `src`'s used-codon counts in order (immigrants').
    pub fn scatter_used_rows(&self, src: &DeviceUsed, idx: &super::DeviceIndices, n: usize, dst: &mut DeviceUsed) -> Result<()> {
        if src.engine != self.id || dst.engine != self.id || idx.engine != self.id || n > idx.n || n > src.n || idx.bound > dst.n {
            return Err(GpuError::Input(format!("scattering {n} used-codon counts by {} indices below {} into {}", idx.n, idx.bound, dst.n)));
        }
        self.words(super::kernels::SCATTER_WORDS, n, 1, &idx.idx, &src.used, &mut dst.used)
    }

    /// The counts themselves (`[n]`), for kernels that read them.
    pub fn used_counts<'a>(&self, u: &'a DeviceUsed) -> &'a CudaSlice<u32> {
        &u.used
    }

    /// `n` elements of `src` over `dst[at .. at + n]` (the callers check the bounds).
    fn copy_at<T: DeviceRepr>(&self, src: &CudaSlice<T>, n: usize, dst: &mut CudaSlice<T>, at: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if n > src.len() || at + n > dst.len() {
            return Err(GpuError::Input(format!("copying {n} of {} elements into {at}.. of {}", src.len(), dst.len())));
        }
        let mut view = dst.slice_mut(at..at + n);
        self.stream.memcpy_dtod(&src.slice(..n), &mut view).during(|| "copying rows".into())
    }

    /// All of `src` (engine `from`'s) into the start of `dst` (this engine's), over `link`.
    pub(super) fn cross<T: DeviceRepr>(&self, link: Link<'_>, from: u64, src: &CudaSlice<T>, dst: &mut CudaSlice<T>) -> Result<()> {
        self.cross_first(link, from, src, src.len(), dst)
    }

    /// The first `n` elements of `src` (engine `from`'s) into the start of `dst` (this
    /// engine's), over `link`, ordered after `from`'s queued work and before this engine's
    /// later work.
    pub(super) fn cross_first<T: DeviceRepr>(&self, link: Link<'_>, from: u64, src: &CudaSlice<T>, n: usize, dst: &mut CudaSlice<T>) -> Result<()> {
        if n > src.len() || n > dst.len() {
            return Err(GpuError::Input(format!("copying {n} of {} elements into {}", src.len(), dst.len())));
        }
        match link {
            Link::Peer => self.stream.memcpy_dtod(&src.slice(..n), &mut dst.slice_mut(..n)).during(|| "copying between GPUs".into()),
            Link::Nccl(c) => c.copy(from, src, self.id, dst, n),
        }
    }
}
