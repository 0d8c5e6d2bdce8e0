//! The CUDA backend: one device, one stream, and the kernels of `kernels/*.cu` compiled by NVRTC
//! for the device's own architecture on first use.
//!
//! [`CudaEngine::new`] probes for the driver, a device and NVRTC before touching cudarc (see
//! [`probe`]) and answers [`NoGpu`] when any is missing. Kernel modules are loaded lazily and
//! cached twice: in memory behind a lock for the engine's life, and on disk ([`cache`]) so that
//! the next process skips NVRTC. A caller with something to run meanwhile can have a module
//! compiled on another thread ([`CudaEngine::module_ready`]) instead of waiting for NVRTC.

pub mod breed;
pub mod cache;
pub mod classify;
pub mod common;
pub mod control;
pub mod error;
pub mod fit;
pub mod eval;
pub mod generation;
pub mod kernels;
pub mod map;
pub mod memory;
pub mod nccl;
pub mod nvrtc;
pub mod pack;
pub mod params;
pub mod pareto;
pub mod peer;
pub mod population;
pub mod probe;
pub mod sim;
pub mod select;
pub mod vary;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

pub use breed::DeviceMapping;
pub use cache::Origin;
pub use classify::DeviceClassData;
pub use error::{CompileFailure, GpuError, Result};
pub use eval::{DeviceBatch, DeviceDataset, EvalConfig, EvalTiming, Launch};
pub use generation::{EliteScratch, FitnessScratch, Mailbox, MailboxRead, TreeOrder};
pub use kernels::KernelSource;
pub use map::{bench_map, DeviceMapOutput, GpuMapping, MapBench, MapLaunch, MapTreesScratch, MappedTrees};
pub use nvrtc::{Defines, Target};
pub use probe::{DriverInfo, NoGpu, NvrtcInfo};
pub use select::{DeviceErrors, DeviceFitness, DeviceIndices};
pub use pareto::DeviceRanking;
pub use nccl::{Comms, Nccl};
pub use peer::{DeviceUsed, Link};
pub use population::{DeviceGenomes, DevicePopulation};
pub use vary::{BredCounts, DeviceBred};

use error::During;

/// A kernel module compiling on another thread ([`CudaEngine::module_ready`]): its image, where
/// it came from and the seconds it took.
type Behind = std::thread::JoinHandle<Result<(nvrtc::Image, Origin, f64)>>;

/// The name a module is kept under in an engine: the file, its defines, the text's hash (sim.cu
/// is one file with a header generated per model, and keying by file name alone handed every
/// model the first one's module: swimmer's physics for a hopper, Euler for RK4, on the GPU) and
/// the registered user operators, which the generated headers define.
fn module_id(src: &KernelSource<'_>, defines: Defines<'_>) -> String {
    format!("{} {defines:?} {:016x} {}", src.file, text_hash(src.text), crate::program::ops::user::registered().len())
}

/// How to open an engine.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Device ordinal.
    pub ordinal: usize,
    /// Disk cache of compiled kernels; `None` compiles every process anew.
    pub cache_dir: Option<PathBuf>,
}

impl Default for EngineOptions {
    /// Device 0; the cache directory from the environment ([`cache::default_dir`]).
    fn default() -> Self {
        Self { ordinal: 0, cache_dir: cache::default_dir() }
    }
}

/// How a kernel module was obtained (for logs, tests and benchmarks).
#[derive(Clone, Debug)]
pub struct ModuleLoad {
    /// The kernel file and its defines (`eval.cu [("GROVE_K", 4)]`).
    pub module: String,
    /// Compiled now, read from disk, or already in memory.
    pub origin: Origin,
    /// Seconds the caller waited for it: compiling or reading it (or, for a module compiled on
    /// another thread, the rest of that compile), and loading it into the context.
    pub seconds: f64,
    /// NVRTC's warnings, if it compiled.
    pub log: String,
}

/// The rule table blob uploaded into a map.cu module's constant memory: the module (loaded
/// while `users` user operators were registered) and the blob.
struct MapTable {
    users: usize,
    module: Arc<CudaModule>,
    blob: Vec<u8>,
}

/// A CUDA device with its stream and kernel modules.
pub struct CudaEngine {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    cc: (i32, i32),
    sm_count: u32,
    /// The most shared memory a block may ask for, bytes (the opt-in limit).
    shared_per_block: u32,
    target: Target,
    driver: DriverInfo,
    nvrtc: NvrtcInfo,
    cache_dir: Option<PathBuf>,
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    /// Compiles running on other threads ([`Self::module_ready`]), by module id; [`Self::load`]
    /// takes each one's image when it needs the module.
    behind: Mutex<HashMap<String, Behind>>,
    functions: Mutex<HashMap<(&'static str, usize), CudaFunction>>,
    loads: Mutex<Vec<ModuleLoad>>,
    /// The rule table in map.cu's constant memory, and the module that holds it (see `map.rs`).
    map_table: Mutex<Option<MapTable>>,
    /// Held from a map launch's table upload until the launch is queued.
    map_order: Mutex<()>,
    /// Buffers reused by evaluation calls (locked for a whole call).
    scratch: Mutex<eval::Scratch>,
    /// Buffers reused by the tree variation kernels.
    vary_scratch: Mutex<vary::Scratch>,
    /// Per-thread scratch of GE subtree crossover (map.cu), kept between calls; only grows.
    subtree_scratch: Mutex<Option<cudarc::driver::CudaSlice<u32>>>,
    /// Lexicase's buffers (cases, predictions, errors, candidates), kept between generations;
    /// they only grow.
    lexicase_scratch: Mutex<select::LexicaseScratch>,
    id: u64,
    ordinal: usize,
    /// Lanes an episode of the control roll-outs, 0 for each model's default
    /// (`control::default_episode_lanes`; `set_episode_lanes`).
    episode_lanes: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for CudaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaEngine")
            .field("device", &self.name)
            .field("compute_capability", &self.cc)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl CudaEngine {
    /// Device 0, kernel cache from the environment. Fails with a one-line reason when there is
    /// no usable driver, device or NVRTC; never panics.
    pub fn new() -> Result<Self, NoGpu> {
        Self::with_options(EngineOptions::default())
    }

    /// An engine on the given device, with the given cache directory.
    pub fn with_options(opts: EngineOptions) -> Result<Self, NoGpu> {
        let driver = probe::driver()?;
        let nvrtc = probe::nvrtc()?;
        if opts.ordinal >= driver.devices as usize {
            return Err(NoGpu::new(format!("no CUDA device {} (the driver sees {})", opts.ordinal, driver.devices)));
        }
        let no = |what: &str, e: cudarc::driver::DriverError| {
            NoGpu::new(format!("{what} failed on device {}: {}", opts.ordinal, GpuError::Driver { during: what.into(), error: e }))
        };
        let ctx = CudaContext::new(opts.ordinal).map_err(|e| no("creating a CUDA context", e))?;
        let name = ctx.name().map_err(|e| no("reading the device name", e))?;
        let cc = ctx.compute_capability().map_err(|e| no("reading the compute capability", e))?;
        let sm_count = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| no("reading the multiprocessor count", e))? as u32;
        let shared_per_block = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| no("reading the shared memory a block may have", e))? as u32;
        let target = nvrtc::target_for(cc).map_err(|e| match e {
            GpuError::NoGpu(n) => n,
            other => NoGpu::new(other.to_string()),
        })?;
        let stream = ctx.default_stream();
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Ok(Self {
            ctx,
            stream,
            name,
            cc,
            sm_count,
            shared_per_block,
            target,
            driver,
            nvrtc,
            cache_dir: opts.cache_dir,
            modules: Mutex::new(HashMap::new()),
            behind: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            loads: Mutex::new(Vec::new()),
            map_table: Mutex::new(None),
            map_order: Mutex::new(()),
            scratch: Mutex::new(eval::Scratch::default()),
            vary_scratch: Mutex::new(vary::Scratch::default()),
            subtree_scratch: Mutex::new(None),
            lexicase_scratch: Mutex::new(select::LexicaseScratch::default()),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            ordinal: opts.ordinal,
            episode_lanes: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// The device's name ("NVIDIA H100 80GB HBM3").
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// The device's ordinal (the driver's number for it).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's compute capability, `(major, minor)`.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }

    /// Streaming multiprocessors on the device.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// What NVRTC compiles for on this device (`sm_90`, CUBIN, when it can).
    pub fn target(&self) -> Target {
        self.target
    }

    /// The driver library and version found by the probe.
    pub fn driver(&self) -> &DriverInfo {
        &self.driver
    }

    /// The NVRTC library and version found by the probe.
    pub fn nvrtc(&self) -> &NvrtcInfo {
        &self.nvrtc
    }

    /// The context (for code that launches its own kernels).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every operation of this engine runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Every module load so far, in order.
    pub fn module_loads(&self) -> Vec<ModuleLoad> {
        self.loads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The module of `src` with `defines`, loading it on first use: from the disk cache when
    /// there, else compiled by NVRTC (and stored), or taken from a compile that
    /// [`Self::module_ready`] started on another thread (waiting for it to end). Returns where it
    /// came from.
    pub fn load(&self, src: &KernelSource<'_>, defines: Defines<'_>) -> Result<(Arc<CudaModule>, Origin)> {
        self.load_found(src, defines, None)
    }

    /// [`Self::load`], with the image already read from the disk cache when `found` holds it.
    fn load_found(&self, src: &KernelSource<'_>, defines: Defines<'_>, found: Option<nvrtc::Image>) -> Result<(Arc<CudaModule>, Origin)> {
        let id = module_id(src, defines);
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(&id) {
            return Ok((m.clone(), Origin::Memory));
        }
        let start = std::time::Instant::now();
        let dir = self.cache_dir.as_deref();
        let behind = self.behind.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        let (image, mut origin, _) = match (found, behind) {
            (Some(image), _) => (image, Origin::Disk, 0.0),
            // A panic there is a bug; it goes on here, where the module was needed.
            (None, Some(h)) => h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            (None, None) => cache::compile_cached(dir, src, self.target, defines, &self.name, self.cc)?,
        };
        let mut log = image.log.clone();
        let module = match self.ctx.load_module(Ptx::from_binary(image.bytes)) {
            Ok(m) => m,
            Err(_) if origin == Origin::Disk => {
                // A damaged cache entry: compile afresh and replace it.
                let image = nvrtc::compile(src, self.target, defines)?;
                if let Some(d) = dir {
                    let key = cache::CacheKey::new(src, self.target, defines, &self.name, self.cc, self.nvrtc.version);
                    let _ = cache::write(&d.join("kernels"), &key, &image);
                }
                origin = Origin::Compiled;
                log = image.log.clone();
                self.ctx.load_module(Ptx::from_binary(image.bytes)).during(|| format!("loading the {} module", src.file))?
            }
            Err(e) => return Err(e).during(|| format!("loading the {} module", src.file)),
        };
        modules.insert(id.clone(), module.clone());
        let seconds = start.elapsed().as_secs_f64();
        self.loads.lock().unwrap_or_else(|e| e.into_inner()).push(ModuleLoad {
            module: id,
            origin,
            seconds,
            log,
        });
        Ok((module, origin))
    }

    /// The module of `src` with `defines` if it can be had without waiting for NVRTC: already
    /// loaded, in the disk cache, or compiled on another thread by an earlier call and done.
    /// Otherwise this starts that compile on another thread (once; with the disk cache it is
    /// stored there as by [`Self::load`]) and answers `None`, for a caller that has something
    /// else to run meanwhile: the control roll-out plays with the module it already has, at
    /// another width of lanes and with the same bits, until the one it chose is compiled. A
    /// later call, or [`Self::load`], takes the compile's result.
    pub fn module_ready(&self, src: &KernelSource<'_>, defines: Defines<'_>) -> Result<Option<Arc<CudaModule>>> {
        let id = module_id(src, defines);
        if let Some(m) = self.modules.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
            return Ok(Some(m.clone()));
        }
        let mut behind = self.behind.lock().unwrap_or_else(|e| e.into_inner());
        let found = match behind.get(&id) {
            Some(h) if !h.is_finished() => return Ok(None),
            Some(_) => None,
            None => {
                let found = cache::lookup(self.cache_dir.as_deref(), src, self.target, defines, &self.name, self.cc)?;
                if found.is_none() {
                    let (file, text) = (src.file.to_string(), src.text.to_string());
                    let owned: Vec<(String, u32)> = defines.iter().map(|&(k, v)| (k.to_string(), v)).collect();
                    let (dir, target, name, cc) = (self.cache_dir.clone(), self.target, self.name.clone(), self.cc);
                    let compile = move || {
                        let defines: Vec<(&str, u32)> = owned.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                        cache::compile_cached(dir.as_deref(), &KernelSource { file: &file, text: &text }, target, &defines, &name, cc)
                    };
                    // Without a thread to spare, the caller compiles it now (below).
                    if let Ok(h) = std::thread::Builder::new().name(format!("nvrtc {}", src.file)).spawn(compile) {
                        behind.insert(id, h);
                        return Ok(None);
                    }
                }
                found
            }
        };
        drop(behind);
        self.load_found(src, defines, found).map(|(m, _)| Some(m))
    }

    /// The kernel `name` of `src` compiled with `defines`, loading the module on first use.
    /// Kernels are remembered by name and the number of registered user operators: one that
    /// several variants hold is loaded once, and a registration loads them afresh.
    pub fn function(&self, src: &KernelSource<'_>, defines: Defines<'_>, name: &'static str) -> Result<CudaFunction> {
        let key = (name, crate::program::ops::user::registered().len());
        if let Some(f) = self.functions.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(f.clone());
        }
        let (module, _) = self.load(src, defines)?;
        let f = module.load_function(name).during(|| format!("finding kernel {name} in {}", src.file))?;
        self.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(key, f.clone());
        Ok(f)
    }
}

impl Drop for CudaEngine {
    /// Waits for the compiles this engine started on threads of their own ([`Self::module_ready`],
    /// the device loop's compiles ahead) that nothing loaded, so that none is inside NVRTC when
    /// the process ends: a test process that exited while one compiled ended in a segmentation
    /// fault after every test had passed (`cuda_evolve`, an H100, 2026-12-07). A finished
    /// compile's image is written to the disk cache by its thread, so the wait is not lost.
    fn drop(&mut self) {
        let pending: Vec<Behind> = self.behind.get_mut().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, h)| h).collect();
        for h in pending {
            let _ = h.join();
        }
    }
}

/// A 64-bit hash of a kernel's text (FNV-1a), part of the in-memory module key.
fn text_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    /// Regression: the module cache keyed by file name gave every sim.cu model the first one's.
    #[test]
    fn module_keys_differ_by_text() {
        assert_ne!(super::text_hash("#define GROVE_NV 5"), super::text_hash("#define GROVE_NV 6"));
        assert_eq!(super::text_hash("sim"), super::text_hash("sim"));
    }

    #[test]
    fn the_engine_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::CudaEngine>();
        shareable::<super::DeviceDataset>();
    }
}
