//! Between GPUs: one engine's buffers copied into another's on the device, peer to peer (over
//! NVLink or PCIe; cudarc's `memcpy_dtod` takes the peer path when the contexts differ and
//! orders the copy after the source stream's work), with no copy through the host. Migration
//! between islands on different GPUs moves its rows this way (src/evolve/device/migrate.rs).

use cudarc::driver::{CudaSlice, DeviceRepr, sys};

use super::error::{During, GpuError, Result};
use super::{CudaEngine, DeviceFitness, DeviceGenomes, DevicePopulation, MapTreesScratch};

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

    /// A copy on this engine of `src`, another engine's rows (or this one's).
    pub fn copy_population_from(&self, src: &DevicePopulation) -> Result<DevicePopulation> {
        let mut dst = self.alloc_rows_uninit(src.n, src.max_len, src.n_outputs)?;
        self.copy_population_into(src, &mut dst)?;
        Ok(dst)
    }

    /// `src` (another engine's rows, or this one's) copied over `dst` (this engine's, the same
    /// shape): a row shard's GPU receives each generation's population this way.
    pub fn copy_population_into(&self, src: &DevicePopulation, dst: &mut DevicePopulation) -> Result<()> {
        if (src.n, src.max_len, src.n_outputs) != (dst.n, dst.max_len, dst.n_outputs) || dst.engine != self.id {
            return Err(GpuError::Input(format!("copying {} rows of L = {} into {} rows of L = {}", src.n, src.max_len, dst.n, dst.max_len)));
        }
        self.copy(&src.op, &mut dst.op)?;
        self.copy(&src.value, &mut dst.value)?;
        self.copy(&src.size, &mut dst.size)?;
        self.copy(&src.out, &mut dst.out)?;
        self.copy(&src.len, &mut dst.len)
    }

    /// A copy on this engine of another engine's genomes.
    pub fn copy_genomes_from(&self, src: &DeviceGenomes) -> Result<DeviceGenomes> {
        let mut dst = self.alloc_genomes(src.n, src.capacity)?;
        self.copy(&src.codons, &mut dst.codons)?;
        self.copy(&src.len, &mut dst.len)?;
        Ok(dst)
    }

    /// A copy on this engine of another engine's fitness values.
    pub fn copy_fitness_from(&self, src: &DeviceFitness) -> Result<DeviceFitness> {
        let mut fit = self.alloc::<f64>(src.n, false, "allocating copied fitness")?;
        self.copy(&src.fit, &mut fit)?;
        Ok(DeviceFitness { fit, n: src.n, engine: self.id })
    }

    /// A copy on this engine of another engine's used codons.
    pub fn copy_used_from(&self, src: &DeviceUsed) -> Result<DeviceUsed> {
        let mut used = self.alloc::<u32>(src.n, false, "allocating copied used codons")?;
        self.copy(&src.used, &mut used)?;
        Ok(DeviceUsed { used, n: src.n, engine: self.id })
    }

    /// `src` (of any engine) into `dst` (of this one), on this engine's stream after the
    /// source's queued work.
    fn copy<T: DeviceRepr>(&self, src: &CudaSlice<T>, dst: &mut CudaSlice<T>) -> Result<()> {
        if src.len() > dst.len() {
            return Err(GpuError::Input(format!("copying {} elements into {}", src.len(), dst.len())));
        }
        self.stream.memcpy_dtod(src, dst).during(|| "copying between GPUs".into())
    }
}
