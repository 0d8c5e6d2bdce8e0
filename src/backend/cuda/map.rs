//! Mapping genomes on the GPU: the host side of `kernels/map.cu`, twin of the CPU reference
//! [`Mapper::map`](crate::genome::Mapper::map), whose results it matches exactly (validity and
//! reason, codons used, depth, nodes, derivation; `tests/cuda_map.rs` checks it).
//!
//! The rule table goes to the map module's constant memory (`grove_table`), uploaded again only
//! when a call brings another table. Each launch maps every genome with one thread; a genome
//! whose explicit stack would outgrow [`MAP_STACK`](super::kernels::MAP_STACK) entries is mapped again here on the CPU, so
//! the caller never sees the kernel's bound. The derivation buffer is a fixed row of
//! `max_derivation` entries per genome: a longer derivation stops the mapping with
//! [`Invalid::DerivationTooLong`], as [`Mapper::with_max_derivation`] does on the CPU.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::{GE_SUBTREE_CROSSOVER, GE_SUBTREE_MUTATE, INIT_GENOMES, MAP, MAP_KERNEL, MAP_TABLE_SYMBOL, MAP_TREES_KERNEL};
use super::params::{
    InitParams, MapOut, MapParams, MapStatus, MapTreesParams, SubtreeMutateParams, SubtreeParams, subtree_mutate_scratch_words, subtree_scratch_words,
};
use super::CudaEngine;
use crate::genome::map::Invalid;
use crate::genome::{Codons, Genomes, MapConfig, Mapped, Mapper};
use crate::grammar::compile::RuleTable;
use crate::grammar::template::DeviceTables;
use super::population::{DeviceGenomes, DevicePopulation};

/// Most table bytes a block stages in shared memory (larger tables are read from constant
/// memory; 48 KiB is what a block gets without opting in).
pub const SHARED_TABLE_MAX_BYTES: usize = 32 * 1024;

/// Launch settings of `grove_map`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapLaunch {
    /// Threads per block (one genome each): a multiple of 32, at most 1024. Default 128.
    pub threads_per_block: u32,
    /// Stage the table in shared memory when it fits [`SHARED_TABLE_MAX_BYTES`] (default);
    /// false reads it from constant memory.
    pub shared_table: bool,
}

impl Default for MapLaunch {
    fn default() -> Self {
        Self { threads_per_block: 128, shared_table: true }
    }
}

/// The kernel's outputs on the device: `out: [P]` and `derivation: [P × max_derivation]`.
pub struct DeviceMapOutput {
    pub(super) out: CudaSlice<MapOut>,
    derivation: CudaSlice<u32>,
    pub(super) n: usize,
    max_derivation: usize,
}

/// The outcome of mapping a population on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuMapping {
    /// `[P]` per genome: validity, codons used, depth, nodes (as [`Mapper::map`] returns them).
    pub mapped: Vec<Mapped>,
    /// `[P]` derivation entries of each genome (complete when valid).
    pub derivation_len: Vec<u32>,
    /// `[P × max_derivation]`: row `i` holds genome `i`'s derivation (global production
    /// indices and codon-value offsets, as [`Mapper::derivation`]), zero after its length.
    pub derivation: Vec<u32>,
    /// Row stride of [`Self::derivation`].
    pub max_derivation: usize,
    /// Genomes whose stack outgrew the kernel's [`MAP_STACK`](super::kernels::MAP_STACK) and were mapped on the CPU.
    pub cpu_fallbacks: Vec<u32>,
}

impl GpuMapping {
    /// Genome `i`'s derivation.
    pub fn derivation(&self, i: usize) -> &[u32] {
        &self.derivation[i * self.max_derivation..][..self.derivation_len[i] as usize]
    }
}

/// Throughput of the mapping kernel (see [`bench_map`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MapBench {
    /// Genomes mapped per launch.
    pub genomes: usize,
    /// Codons read per launch (sum of `used_codons`).
    pub codons_read: u64,
    /// Fraction of genomes that mapped validly.
    pub valid_fraction: f64,
    /// Median seconds of one launch (kernel only: genomes and table already on the device).
    pub kernel_seconds: f64,
    /// Median seconds of one [`CudaEngine::map_genomes`] call (upload, kernel, read-back).
    pub end_to_end_seconds: f64,
}

impl MapBench {
    /// Codons read per second by the kernel alone.
    pub fn kernel_codons_per_second(&self) -> f64 {
        self.codons_read as f64 / self.kernel_seconds
    }
    /// Codons read per second including the copies.
    pub fn end_to_end_codons_per_second(&self) -> f64 {
        self.codons_read as f64 / self.end_to_end_seconds
    }
}

/// The mapper's parameters for `genomes` under `cfg`.
fn map_params(genomes: &DeviceGenomes, cfg: &MapConfig, max_derivation: usize, table_words: u32) -> MapParams {
    MapParams {
        n_genomes: genomes.n as u32,
        capacity: genomes.capacity as u32,
        max_wraps: cfg.max_wraps,
        lazy: (cfg.codons == Codons::Lazy) as u32,
        max_depth: cfg.max_depth,
        max_nodes: cfg.max_nodes,
        max_derivation: max_derivation as u32,
        table_words,
    }
}

fn to_mapped(o: &MapOut) -> Result<Mapped> {
    let invalid = match MapStatus::from_code(o.status) {
        Some(MapStatus::Valid) => None,
        Some(MapStatus::OutOfCodons) => Some(Invalid::OutOfCodons),
        Some(MapStatus::TooDeep) => Some(Invalid::TooDeep),
        Some(MapStatus::TooManyNodes) => Some(Invalid::TooManyNodes),
        Some(MapStatus::DerivationFull) => Some(Invalid::DerivationTooLong),
        Some(_) | None => {
            return Err(GpuError::Input(format!("{MAP_KERNEL} returned status {}", o.status)));
        }
    };
    Ok(Mapped { invalid, used_codons: o.used_codons, depth: o.depth, nodes: o.nodes })
}

impl CudaEngine {
    /// Device buffers for mapping `n` genomes with derivation rows of `max_derivation`.
    pub fn alloc_map_output(&self, n: usize, max_derivation: usize) -> Result<DeviceMapOutput> {
        if max_derivation > u32::MAX as usize {
            return Err(GpuError::Input(format!("max_derivation {max_derivation} is over {}", u32::MAX)));
        }
        let total = n.checked_mul(max_derivation).ok_or_else(|| GpuError::Input("derivation buffer too large".into()))?;
        Ok(DeviceMapOutput {
            out: self.alloc::<MapOut>(n, false, "allocating map results")?,
            derivation: self.stream.alloc_zeros::<u32>(total.max(1)).during(|| "allocating derivations".into())?,
            n,
            max_derivation,
        })
    }

    /// Launches `grove_map` over `genomes` into `out` (asynchronous: the stream orders it
    /// before any later read). Rows that report [`MapStatus::StackOverflow`] are left for the
    /// caller ([`Self::map_genomes`] maps them on the CPU).
    pub fn map_launch(
        &self,
        table: &RuleTable,
        genomes: &DeviceGenomes,
        cfg: &MapConfig,
        out: &mut DeviceMapOutput,
        launch: &MapLaunch,
    ) -> Result<()> {
        let t = launch.threads_per_block;
        if t == 0 || t % 32 != 0 || t > 1024 {
            return Err(GpuError::Config(format!("{t} threads per block: use a multiple of 32 up to 1024")));
        }
        if genomes.engine != self.id {
            return Err(GpuError::Input("the genomes were uploaded by another engine".into()));
        }
        if out.n != genomes.n {
            return Err(GpuError::Input(format!("output for {} genomes, but {} genomes", out.n, genomes.n)));
        }
        if genomes.n == 0 {
            return Ok(());
        }
        // The table lives in the module's constant memory, shared by every launch on this
        // engine: the lock keeps another thread's table out between the upload and the launch
        // (both are queued on the one stream, which orders them).
        let _order = self.map_order.lock().unwrap_or_else(|e| e.into_inner());
        let blob = table.to_device_blob();
        let table_words = if launch.shared_table && blob.len() <= SHARED_TABLE_MAX_BYTES { blob.len().div_ceil(4) as u32 } else { 0 };
        let f = self.map_kernel(MAP_KERNEL, &blob)?;
        let params = map_params(genomes, cfg, out.max_derivation, table_words);
        let lc = LaunchConfig {
            grid_dim: ((genomes.n as u32).div_ceil(t), 1, 1),
            block_dim: (t, 1, 1),
            shared_mem_bytes: table_words * 4,
        };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&genomes.codons).arg(&genomes.len).arg(&mut out.out).arg(&mut out.derivation);
        // SAFETY: matches `grove_map(GroveMapParams, const unsigned* genomes, const unsigned*
        // lens, GroveMapOut* out, unsigned* derivation)` with `MapParams` laid out as
        // `GroveMapParams`. genomes holds P × capacity codons and lens P lengths, each at most
        // capacity (checked on upload), so reads stay in row i; out holds P entries and
        // derivation P × max_derivation, and the kernel writes row i's first max_derivation at
        // most. The table in constant memory is a whole blob of a compiled RuleTable, whose
        // indices all point inside it; table_words words of it fit the dynamic shared memory.
        unsafe { b.launch(lc) }.during(|| format!("launching {MAP_KERNEL}"))?;
        Ok(())
    }

    /// Maps every genome on the GPU: the same results as [`Mapper::map`] with
    /// [`Mapper::with_max_derivation`]`(max_derivation)`, derivations included.
    pub fn map_genomes(
        &self,
        table: &RuleTable,
        genomes: &Genomes,
        cfg: &MapConfig,
        max_derivation: usize,
    ) -> Result<GpuMapping> {
        self.map_genomes_with(table, genomes, cfg, max_derivation, &MapLaunch::default())
    }

    /// [`Self::map_genomes`] with explicit launch settings.
    pub fn map_genomes_with(
        &self,
        table: &RuleTable,
        genomes: &Genomes,
        cfg: &MapConfig,
        max_derivation: usize,
        launch: &MapLaunch,
    ) -> Result<GpuMapping> {
        let p = genomes.size();
        let dev = self.upload_genomes(genomes)?;
        let mut out = self.alloc_map_output(p, max_derivation)?;
        self.map_launch(table, &dev, cfg, &mut out, launch)?;
        self.stream.synchronize().during(|| format!("running {MAP_KERNEL}"))?;
        let raw = if p == 0 { Vec::new() } else { self.stream.clone_dtoh(&out.out).during(|| "reading map results".into())? };
        let mut derivation = self.stream.clone_dtoh(&out.derivation).during(|| "reading derivations".into())?;
        derivation.truncate(p * max_derivation);
        let mut mapping = GpuMapping {
            mapped: Vec::with_capacity(p),
            derivation_len: Vec::with_capacity(p),
            derivation,
            max_derivation,
            cpu_fallbacks: Vec::new(),
        };
        let mut cpu: Option<Mapper<'_>> = None;
        for (i, o) in raw.iter().enumerate() {
            if o.status == MapStatus::StackOverflow as u32 {
                let m = cpu.get_or_insert_with(|| Mapper::new(table, *cfg).with_max_derivation(max_derivation));
                let r = m.map(genomes.get(i));
                let d = m.derivation();
                let row = &mut mapping.derivation[i * max_derivation..(i + 1) * max_derivation];
                row[..d.len()].copy_from_slice(d);
                row[d.len()..].fill(0);
                mapping.mapped.push(r);
                mapping.derivation_len.push(d.len() as u32);
                mapping.cpu_fallbacks.push(i as u32);
            } else {
                mapping.mapped.push(to_mapped(o)?);
                mapping.derivation_len.push(o.n_derivation);
            }
        }
        Ok(mapping)
    }
}

/// GPU mapping throughput on `genomes`: median over `reps` launches (after one warm-up) of the
/// kernel alone with `launch` (genomes and table on the device, timed to stream
/// synchronisation) and of whole [`CudaEngine::map_genomes`] calls. For reporting; never
/// asserted.
pub fn bench_map(
    engine: &CudaEngine,
    table: &RuleTable,
    genomes: &Genomes,
    cfg: &MapConfig,
    max_derivation: usize,
    launch: &MapLaunch,
    reps: usize,
) -> Result<MapBench> {
    let reps = reps.max(1);
    let dev = engine.upload_genomes(genomes)?;
    let mut out = engine.alloc_map_output(genomes.size(), max_derivation)?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut kernel = Vec::with_capacity(reps);
    for rep in 0..=reps {
        engine.stream.synchronize().during(|| "waiting for the stream".into())?;
        let t = std::time::Instant::now();
        engine.map_launch(table, &dev, cfg, &mut out, launch)?;
        engine.stream.synchronize().during(|| format!("running {MAP_KERNEL}"))?;
        if rep > 0 {
            kernel.push(t.elapsed().as_secs_f64());
        }
    }
    let mut whole = Vec::with_capacity(reps);
    let mut last = None;
    for rep in 0..=reps.min(3) {
        let t = std::time::Instant::now();
        let m = engine.map_genomes_with(table, genomes, cfg, max_derivation, launch)?;
        if rep > 0 {
            whole.push(t.elapsed().as_secs_f64());
        }
        last = Some(m);
    }
    let m = last.expect("at least one call");
    let codons_read = m.mapped.iter().map(|r| r.used_codons as u64).sum();
    let valid = m.mapped.iter().filter(|r| r.valid()).count();
    Ok(MapBench {
        genomes: genomes.size(),
        codons_read,
        valid_fraction: valid as f64 / genomes.size().max(1) as f64,
        kernel_seconds: median(kernel),
        end_to_end_seconds: median(whole),
    })
}


/// The scratch and per-genome results of [`CudaEngine::map_trees`]: the derivation and its
/// sub-derivation sizes `[max_derivation × P]` u32 (entry `j` of genome `i` at `j·P + i`), and
/// per genome a status ([`MapStatus`] code) and the codons read.
pub struct MapTreesScratch {
    der: CudaSlice<u32>,
    span: CudaSlice<u32>,
    pub(super) status: CudaSlice<u32>,
    pub(super) used: CudaSlice<u32>,
    n: usize,
    max_derivation: usize,
    pub(super) engine: u64,
}

impl MapTreesScratch {
    /// `P`.
    pub fn size(&self) -> usize {
        self.n
    }
    /// The codons each genome read, `[P]` (for GE crossover and int-flip).
    pub fn used(&self) -> &CudaSlice<u32> {
        &self.used
    }
}

/// What the mapping of a population, trees included, reads on the host ([`CudaEngine::map_population`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MappedTrees {
    /// The trees; rows of genomes that did not map or build are empty.
    pub population: crate::program::tree::Population,
    /// `[P]` codons read.
    pub used: Vec<u32>,
    /// `[P]` [`MapStatus`] codes.
    pub status: Vec<u32>,
}

impl CudaEngine {
    /// Scratch for mapping `p` genomes to trees with derivations of up to `max_derivation`
    /// entries (at most 2¹⁶: the builder packs an entry into 16 bits).
    pub fn alloc_map_trees(&self, p: usize, max_derivation: usize) -> Result<MapTreesScratch> {
        if max_derivation == 0 || max_derivation > 1 << 16 || p == 0 || p > u32::MAX as usize {
            return Err(GpuError::Input(format!("mapping {p} genomes with derivations of {max_derivation} entries (1 to 65536)")));
        }
        let total = p.checked_mul(max_derivation).ok_or_else(|| GpuError::Input("derivation scratch too large".into()))?;
        // SAFETY: uninitialised; the kernel writes each derivation and span entry before it
        // reads it (entries below n_derivation only), and status and used for every genome.
        let (der, span) = unsafe { (self.stream.alloc::<u32>(total), self.stream.alloc::<u32>(total)) };
        let der = der.during(|| format!("allocating derivation scratch ({} MiB)", (total * 4) >> 20))?;
        let span = span.during(|| "allocating span scratch".into())?;
        Ok(MapTreesScratch {
            der,
            span,
            status: self.stream.alloc_zeros::<u32>(p).during(|| "allocating map statuses".into())?,
            used: self.stream.alloc_zeros::<u32>(p).during(|| "allocating used codons".into())?,
            n: p,
            max_derivation,
            engine: self.id,
        })
    }

    /// Map kernel `name`, from the module whose constant memory holds `blob` (the rule table
    /// and templates), uploaded unless it is there already. A user operator registered since
    /// the last upload (a `--loss`, a `--define`) loads map.cu afresh (the module key counts the
    /// registry), with its own, empty constant memory, so the table is uploaded again there (it
    /// was not, and every genome then mapped to nothing). The kernel comes from the module the
    /// table is in; the module is looked up (its key hashes map.cu's text) only when the
    /// registry or the table changed, not at every launch.
    fn map_kernel(&self, name: &'static str, blob: &[u8]) -> Result<CudaFunction> {
        let users = crate::program::ops::user::registered().len();
        let mut current = self.map_table.lock().unwrap_or_else(|e| e.into_inner());
        let module = match &*current {
            Some(t) if t.users == users && t.blob[..] == *blob => t.module.clone(),
            _ => {
                let (module, _) = self.load(&MAP, &[])?;
                let mut sym = module.get_global(MAP_TABLE_SYMBOL, &self.stream).during(|| format!("finding {MAP_TABLE_SYMBOL}"))?;
                if blob.len() > sym.len() {
                    return Err(GpuError::Input(format!("rule table and templates of {} bytes; constant memory holds {}", blob.len(), sym.len())));
                }
                self.stream.memcpy_htod(blob, &mut sym).during(|| "uploading the rule table".into())?;
                *current = Some(super::MapTable { users, module: module.clone(), blob: blob.to_vec() });
                module
            }
        };
        module.load_function(name).during(|| format!("finding kernel {name} in {}", MAP.file))
    }

    /// Queues `grove_map_trees`: every genome mapped (with `cfg`, at most [`crate::genome::MAP_STACK`]
    /// pending symbols and the scratch's `max_derivation` entries) and, with `trees`, its tree
    /// built into the same row there (an empty row where it does not map or build): the device
    /// twin of `backend::cpu::breed::map_population`. Statuses and used codons stay in `scratch`.
    pub fn map_trees(
        &self,
        tables: &DeviceTables,
        genomes: &DeviceGenomes,
        cfg: &MapConfig,
        trees: Option<&mut DevicePopulation>,
        scratch: &mut MapTreesScratch,
        launch: &MapLaunch,
    ) -> Result<()> {
        let t = launch.threads_per_block;
        if t == 0 || t % 32 != 0 || t > 1024 {
            return Err(GpuError::Config(format!("{t} threads per block: use a multiple of 32 up to 1024")));
        }
        let p = genomes.n;
        if genomes.engine != self.id || scratch.engine != self.id || scratch.n != p {
            return Err(GpuError::Input(format!("mapping {p} genomes with scratch for {}", scratch.n)));
        }
        let blob = &tables.blob;
        // One blob for both kernels of the module: the lock (inside) keeps another table out
        // until the launch is queued.
        let _order = self.map_order.lock().unwrap_or_else(|e| e.into_inner());
        let f = self.map_kernel(MAP_TREES_KERNEL, blob)?;
        let table_words = if launch.shared_table && blob.len() <= SHARED_TABLE_MAX_BYTES { blob.len().div_ceil(4) as u32 } else { 0 };
        let max_len = trees.as_ref().map_or(0, |pop| pop.max_len());
        if let Some(pop) = &trees {
            if pop.size() != p || pop.engine != self.id {
                return Err(GpuError::Input(format!("trees for {} rows, {p} genomes", pop.size())));
            }
            if max_len > crate::genome::build::BUILD_FRAMES {
                return Err(GpuError::Config(format!(
                    "rows of {max_len} nodes: the GPU tree builder takes at most {}",
                    crate::genome::build::BUILD_FRAMES
                )));
            }
        }
        let params = MapTreesParams {
            map: map_params(genomes, cfg, scratch.max_derivation, table_words),
            templates_at: tables.templates_at as u32,
            max_len: max_len as u32,
            build: trees.is_some() as u32,
            reading: MapTreesParams::reading_code(cfg.reading),
        };
        let lc = LaunchConfig { grid_dim: ((p as u32).div_ceil(t), 1, 1), block_dim: (t, 1, 1), shared_mem_bytes: table_words * 4 };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&genomes.codons).arg(&genomes.len).arg(&mut scratch.der).arg(&mut scratch.span);
        // A map-only launch never touches the tree arrays: hand it one-element dummies.
        let mut dummy = None;
        match trees {
            Some(pop) => {
                b.arg(&mut pop.op).arg(&mut pop.value).arg(&mut pop.size).arg(&mut pop.out).arg(&mut pop.len);
            }
            None => {
                let d = dummy.insert(self.alloc_population(1, 1, 0)?);
                b.arg(&mut d.op).arg(&mut d.value).arg(&mut d.size).arg(&mut d.out).arg(&mut d.len);
            }
        }
        b.arg(&mut scratch.status).arg(&mut scratch.used);
        // SAFETY: matches `grove_map_trees(GroveMapTreesParams, const unsigned* genomes, const
        // unsigned* lens, unsigned* der, unsigned* span, unsigned char* op, float* value,
        // unsigned short* size, unsigned char* outs, unsigned short* len, unsigned* status,
        // unsigned* used)` with MapTreesParams laid out as GroveMapTreesParams. Genome rows are
        // read within their lengths (at most the capacity, DeviceGenomes' invariant); thread i
        // writes scratch entries j·P + i for j < max_derivation (the kernel stops a longer
        // derivation), tree row i below L (the builder checks the length before each node) and
        // len, status and used at i. The blob is a compiled RuleTable followed by its Templates
        // (DeviceTables), whose indices point inside it; table_words words fit the launch's
        // dynamic shared memory.
        unsafe { b.launch(lc) }.during(|| format!("launching {MAP_TREES_KERNEL}"))?;
        Ok(())
    }

    /// Maps genomes to trees on the GPU and reads everything back (for tests and `grove bench`):
    /// the device twin of `backend::cpu::breed::map_population`, statuses included.
    pub fn map_population(
        &self,
        tables: &DeviceTables,
        genomes: &Genomes,
        cfg: &MapConfig,
        max_derivation: usize,
        max_len: usize,
        n_outputs: usize,
    ) -> Result<MappedTrees> {
        let p = genomes.size();
        let dev = self.upload_genomes(genomes)?;
        let mut scratch = self.alloc_map_trees(p, max_derivation)?;
        let mut pop = self.alloc_population(p, max_len, n_outputs)?;
        self.map_trees(tables, &dev, cfg, Some(&mut pop), &mut scratch, &MapLaunch::default())?;
        let used = self.stream.clone_dtoh(&scratch.used).during(|| "reading used codons".into())?;
        let status = self.stream.clone_dtoh(&scratch.status).during(|| "reading map statuses".into())?;
        let derivation = cfg.reading == crate::grammar::template::Reading::Derivation;
        if let Some(i) = status.iter().position(|&s| derivation && s == MapStatus::BuildFramesFull as u32) {
            return Err(GpuError::Input(format!("genome {i}: its tree needs more open templates than the builder keeps")));
        }
        Ok(MappedTrees { population: self.download_population(&pop)?, used, status })
    }
}

impl CudaEngine {
    /// GE's first generation made on the device: `genome::init::init_genomes` of `table`'s
    /// grammar (the rule table at the start of `tables`), row `i` from stream
    /// `(seed, 0, i, Init)`, equal to the CPU's. Rows whose sensible derivation would outgrow
    /// the kernel's stack (flagged; rare) are made on the host and copied in; PI grow, which has
    /// no kernel, is made on the host whole and uploaded.
    #[allow(clippy::too_many_arguments)]
    pub fn init_genomes(
        &self,
        table: &RuleTable,
        tables: &DeviceTables,
        cfg: &crate::genome::InitConfig,
        codons: Codons,
        p: usize,
        capacity: usize,
        seed: u64,
    ) -> Result<DeviceGenomes> {
        if p == 0 || p > u32::MAX as usize || capacity > u32::MAX as usize || cfg.codon_size == 0 {
            return Err(GpuError::Input(format!("{p} genomes of capacity {capacity}, codons below {}", cfg.codon_size)));
        }
        if cfg.method == crate::genome::InitMethod::PiGrow {
            // PI grow has no kernel: the host makes the genomes (once per run) and uploads them,
            // so they are the CPU's bit for bit.
            return self.upload_genomes(&crate::genome::init::init_genomes(table, cfg, codons, p, capacity, seed));
        }
        let mut g = self.alloc_genomes(p, capacity)?;
        let mut flag = self.stream.alloc_zeros::<u32>(p).during(|| "allocating init flags".into())?;
        let _order = self.map_order.lock().unwrap_or_else(|e| e.into_inner());
        let f = self.map_kernel(INIT_GENOMES, &tables.blob)?;
        let table_words = if tables.blob.len() <= SHARED_TABLE_MAX_BYTES { tables.blob.len().div_ceil(4) as u32 } else { 0 };
        let params = InitParams {
            n: p as u32,
            capacity: capacity as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            sensible: (cfg.method == crate::genome::InitMethod::Sensible) as u32,
            length: cfg.length.min(u32::MAX as usize) as u32,
            codon_size: cfg.codon_size,
            min_depth: cfg.min_depth,
            max_depth: cfg.max_depth,
            tail_fraction: cfg.tail_fraction,
            lazy: (codons == Codons::Lazy) as u32,
            table_words,
        };
        let t = 128u32;
        let lc = LaunchConfig { grid_dim: ((p as u32).div_ceil(t), 1, 1), block_dim: (t, 1, 1), shared_mem_bytes: table_words * 4 };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&mut g.codons).arg(&mut g.len).arg(&mut flag);
        // SAFETY: matches `grove_init_genomes(GroveInitParams, unsigned* codons, unsigned* lens,
        // unsigned* flag)`: codons hold P × capacity words (thread i writes row i below the
        // capacity), lens and flag P; the table in constant memory is a compiled RuleTable
        // (DeviceTables' first part), whose indices point inside it; table_words words fit the
        // launch's dynamic shared memory.
        unsafe { b.launch(lc) }.during(|| format!("launching {INIT_GENOMES}"))?;
        drop(_order);
        let flags = self.stream.clone_dtoh(&flag).during(|| "reading init flags".into())?;
        let mut buf = Vec::new();
        for i in (0..p).filter(|&i| flags[i] != 0) {
            crate::genome::init::init_genome(table, cfg, codons, i, p, seed, capacity, &mut buf);
            let mut row = vec![0u32; capacity];
            let n = buf.len().min(capacity);
            row[..n].copy_from_slice(&buf[..n]);
            let at = i * capacity;
            let mut dst = g.codons.slice_mut(at..at + capacity);
            self.stream.memcpy_htod(&row, &mut dst).during(|| "writing a genome made on the host".into())?;
            let mut dst = g.len.slice_mut(i..i + 1);
            self.stream.memcpy_htod(&[n as u32], &mut dst).during(|| "writing a genome's length".into())?;
        }
        Ok(g)
    }
}

impl CudaEngine {
    /// GE subtree crossover, twin of
    /// [`subtree_crossover`](crate::genome::subtree::subtree_crossover) as the GE loops call it
    /// (`backend::cpu::breed`): pair `j` crosses parents `pairs[2j]`, `pairs[2j + 1]` of
    /// `parents` on stream `(seed, generation, j, Crossover)`, mapped with `cfg` and the loops'
    /// bounds ([`crate::genome::MAP_STACK`] pending symbols, `max_derivation` entries, as
    /// `Grammar::mapper`); its children go to rows `first_row + 2j` and `+ 1` of `children`
    /// where those exist. Pairs: `pairs.len() / 2`. Parents and children must be different
    /// buffers of equal capacity. The per-thread scratch (`subtree_scratch_words` u32 a pair)
    /// is kept in the engine.
    #[allow(clippy::too_many_arguments)]
    pub fn ge_subtree_crossover(
        &self,
        tables: &DeviceTables,
        cfg: &MapConfig,
        max_derivation: usize,
        parents: &DeviceGenomes,
        pairs: &super::DeviceIndices,
        children: &mut DeviceGenomes,
        first_row: usize,
        vary: &crate::genome::vary::GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        if parents.engine != self.id || children.engine != self.id || pairs.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if parents.capacity != children.capacity || pairs.bound > parents.n || first_row > children.n || children.n > u32::MAX as usize {
            return Err(GpuError::Input(format!(
                "parents of capacity {}, children of {} from row {first_row} of {}, indices below {} of {} parents",
                parents.capacity, children.capacity, children.n, pairs.bound, parents.n
            )));
        }
        if max_derivation == 0 || max_derivation > 1 << 16 {
            return Err(GpuError::Input(format!("derivations of {max_derivation} entries (1 to 65536)")));
        }
        let n_pairs = pairs.n / 2;
        if n_pairs == 0 {
            return Ok(());
        }
        let stride = subtree_scratch_words(max_derivation, parents.capacity);
        if stride > u32::MAX as usize {
            return Err(GpuError::Input(format!("{stride} scratch words a pair")));
        }
        let words = n_pairs.checked_mul(stride).ok_or_else(|| GpuError::Input("subtree crossover scratch too large".into()))?;
        let blob = &tables.blob;
        let _order = self.map_order.lock().unwrap_or_else(|e| e.into_inner());
        let f = self.map_kernel(GE_SUBTREE_CROSSOVER, blob)?;
        let table_words = if blob.len() <= SHARED_TABLE_MAX_BYTES { blob.len().div_ceil(4) as u32 } else { 0 };
        let params = SubtreeParams {
            map: map_params(parents, cfg, max_derivation, table_words),
            n_pairs: n_pairs as u32,
            first_row: first_row as u32,
            n_rows: children.n as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            p_crossover: vary.crossover,
            scratch_stride: stride as u32,
        };
        let mut guard = self.subtree_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = super::memory::grow_device(&self.stream, &mut guard, words, "allocating subtree crossover scratch")?;
        let t = 128u32;
        let lc = LaunchConfig { grid_dim: ((n_pairs as u32).div_ceil(t), 1, 1), block_dim: (t, 1, 1), shared_mem_bytes: table_words * 4 };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&pairs.idx).arg(&parents.codons).arg(&parents.len).arg(&mut children.codons).arg(&mut children.len);
        b.arg(scratch);
        // SAFETY: matches `grove_ge_subtree_crossover(GroveSubtreeParams, const unsigned* pairs,
        // const unsigned* codons, const unsigned* len, unsigned* child_codons, unsigned*
        // child_len, unsigned* scratch)` with SubtreeParams laid out as GroveSubtreeParams.
        // pairs holds 2 n_pairs indices below the parents' P; parent rows are read within their
        // lengths (at most the capacity, DeviceGenomes' invariant); thread j uses scratch words
        // j·stride .. (j + 1)·stride (the buffer holds n_pairs·stride), derivations of at most
        // max_derivation entries (the mapper stops longer ones) and children of at most the
        // capacity (checked before they are written); child rows below n_rows are written,
        // distinct per thread. The blob is a compiled RuleTable followed by its Templates
        // (DeviceTables), whose indices point inside it; table_words words fit the launch's
        // dynamic shared memory.
        unsafe { b.launch(lc) }.during(|| format!("launching {GE_SUBTREE_CROSSOVER}"))?;
        Ok(())
    }

    /// GE subtree mutation, twin of [`subtree_mutate`](crate::genome::subtree::subtree_mutate)
    /// as the GE loops call it (`backend::cpu::breed`): rows `first_row..` of `genomes` in place,
    /// row `k` on stream `(seed, generation, k, Mutate)`, mapped with `cfg` and the loops' bounds
    /// ([`crate::genome::MAP_STACK`] pending symbols, `max_derivation` entries, as
    /// `Grammar::mapper`). The per-thread scratch (`subtree_mutate_scratch_words` u32 a row)
    /// shares the engine's subtree buffer with crossover.
    #[allow(clippy::too_many_arguments)]
    pub fn ge_subtree_mutate(
        &self,
        tables: &DeviceTables,
        cfg: &MapConfig,
        max_derivation: usize,
        genomes: &mut DeviceGenomes,
        first_row: usize,
        vary: &crate::genome::vary::GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        if genomes.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if first_row > genomes.n || genomes.n > u32::MAX as usize {
            return Err(GpuError::Input(format!("mutation from row {first_row} of {}", genomes.n)));
        }
        if max_derivation == 0 || max_derivation > 1 << 16 {
            return Err(GpuError::Input(format!("derivations of {max_derivation} entries (1 to 65536)")));
        }
        let n = genomes.n - first_row;
        if n == 0 || genomes.capacity == 0 {
            return Ok(());
        }
        let stride = subtree_mutate_scratch_words(max_derivation, genomes.capacity);
        if stride > u32::MAX as usize {
            return Err(GpuError::Input(format!("{stride} scratch words a row")));
        }
        let words = n.checked_mul(stride).ok_or_else(|| GpuError::Input("subtree mutation scratch too large".into()))?;
        let blob = &tables.blob;
        let _order = self.map_order.lock().unwrap_or_else(|e| e.into_inner());
        let f = self.map_kernel(GE_SUBTREE_MUTATE, blob)?;
        let table_words = if blob.len() <= SHARED_TABLE_MAX_BYTES { blob.len().div_ceil(4) as u32 } else { 0 };
        let params = SubtreeMutateParams {
            map: map_params(genomes, cfg, max_derivation, table_words),
            first_row: first_row as u32,
            n_rows: genomes.n as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            p_mutation: vary.mutation,
            codon_size: vary.codon_size,
            scratch_stride: stride as u32,
        };
        let mut guard = self.subtree_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = super::memory::grow_device(&self.stream, &mut guard, words, "allocating subtree mutation scratch")?;
        let t = 128u32;
        let lc = LaunchConfig { grid_dim: ((n as u32).div_ceil(t), 1, 1), block_dim: (t, 1, 1), shared_mem_bytes: table_words * 4 };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&mut genomes.codons).arg(&mut genomes.len).arg(scratch);
        // SAFETY: matches `grove_ge_subtree_mutate(GroveSubtreeMutateParams, unsigned* codons,
        // unsigned* len, unsigned* scratch)` with SubtreeMutateParams laid out as
        // GroveSubtreeMutateParams. Thread t reads and writes row first_row + t only (below
        // n_rows = the genomes' P), within the capacity (children are checked before they are
        // written); it uses scratch words t·stride .. (t + 1)·stride (the buffer holds
        // n·stride): derivations of at most max_derivation entries, fresh codons of at most
        // capacity + 1, a child of at most the capacity. The blob is a compiled RuleTable
        // followed by its Templates (DeviceTables); table_words words fit the launch's dynamic
        // shared memory.
        unsafe { b.launch(lc) }.during(|| format!("launching {GE_SUBTREE_MUTATE}"))?;
        Ok(())
    }
}
