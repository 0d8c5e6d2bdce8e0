//! Where populations are evaluated: the CPU (rayon, the reference) or CUDA (cudarc: context,
//! module cache, kernel launches). The CUDA backend is always compiled; at run time it probes
//! for the driver and NVRTC before touching cudarc, so a machine without a GPU gets a
//! [`cuda::NoGpu`] error, never a panic, and `--device auto` falls back to the CPU with one line
//! saying why.
//!
//! One contract, two implementations: [`Backend`] evaluates host populations (regression and
//! classification sums, constant fitting, control roll-outs; DESIGN.md, contract 3), its CPU
//! arm calling the CPU code and its CUDA arm the kernels; [`breed::Breeder`] runs the steps
//! between two evaluations (selection, variation, mapping, elitism), implemented on host
//! populations by [`cpu::breed::CpuBreeder`] (the host loop) and on device buffers by
//! [`cuda::CudaEngine`] (the device loop).

pub mod breed;
pub mod cpu;
pub mod cuda;
pub mod device_task;

use anyhow::Result;

use cpu::fit::{FitConfig, FitResult};
use crate::program::fitness::{ClassSums, RegressionSums};
use crate::program::tree::Population;

/// Which device a command asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// CUDA if a usable GPU is found, else the CPU (with one line saying why).
    #[default]
    Auto,
    /// The CPU reference backend.
    Cpu,
    /// The CUDA backend; an error if there is no usable GPU.
    Cuda,
}

impl DeviceChoice {
    /// Whether a run asked for this device will have a GPU (`auto`: whether the driver sees
    /// one), for defaults that depend on the device.
    pub fn has_gpu(self) -> bool {
        match self {
            DeviceChoice::Cpu => false,
            DeviceChoice::Cuda => true,
            DeviceChoice::Auto => cuda::probe::driver().is_ok_and(|d| d.devices > 0),
        }
    }
}

/// How the GPUs of one run exchange data (migrants between islands, a row shard's population
/// and sums): the driver's peer copies, or NCCL's sends and receives (loaded at run time; a
/// machine without it gets one line). Both move the same bytes, so results do not depend on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuLink {
    /// Peer-to-peer copies by the CUDA driver (over NVLink or PCIe).
    #[default]
    Peer,
    /// NCCL's `ncclSend`/`ncclRecv`, one communicator rank per GPU.
    Nccl,
}

impl GpuLink {
    /// Whether this is the default, [`GpuLink::Peer`] (reports leave it out).
    pub fn is_peer(&self) -> bool {
        *self == GpuLink::Peer
    }
}

impl std::str::FromStr for GpuLink {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "peer" => Ok(GpuLink::Peer),
            "nccl" => Ok(GpuLink::Nccl),
            _ => Err(format!("`{s}`: give peer (the driver's copies) or nccl")),
        }
    }
}

impl std::fmt::Display for GpuLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GpuLink::Peer => "peer",
            GpuLink::Nccl => "nccl",
        })
    }
}

/// Which GPUs a run may use: all the driver sees, the first `N`, or a list of ordinals.
/// Written `all`, `N`, or `A,B,...` (a list has a comma: `3,` is GPU 3 alone).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Gpus {
    /// Every GPU the driver sees.
    #[default]
    All,
    /// The first `N` GPUs.
    Count(usize),
    /// These device ordinals, in this order.
    List(Vec<usize>),
}

impl std::str::FromStr for Gpus {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("all") {
            return Ok(Gpus::All);
        }
        let bad = || format!("`{s}`: give all, a number of GPUs (2), or a list of device ordinals (0,1 or 3,)");
        if s.contains(',') {
            let list: Vec<usize> = s
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| p.parse().map_err(|_| bad()))
                .collect::<Result<_, _>>()?;
            if list.is_empty() {
                return Err(bad());
            }
            let mut seen = list.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != list.len() {
                return Err(format!("`{s}`: a GPU is listed twice"));
            }
            return Ok(Gpus::List(list));
        }
        match s.parse::<usize>() {
            Ok(0) => Err(format!("`{s}`: at least one GPU")),
            Ok(n) => Ok(Gpus::Count(n)),
            Err(_) => Err(bad()),
        }
    }
}

impl std::fmt::Display for Gpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gpus::All => write!(f, "all"),
            Gpus::Count(n) => write!(f, "{n}"),
            Gpus::List(l) if l.len() == 1 => write!(f, "{},", l[0]),
            Gpus::List(l) => write!(f, "{}", l.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")),
        }
    }
}

impl TryFrom<String> for Gpus {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

impl From<Gpus> for String {
    fn from(g: Gpus) -> String {
        g.to_string()
    }
}

impl Gpus {
    /// The ordinals to use among `available` devices, and a line saying what was left out
    /// when the choice asks for devices that are not there (the run goes on with the others).
    pub fn resolve(&self, available: usize) -> (Vec<usize>, Option<String>) {
        match self {
            Gpus::All => ((0..available.max(1)).collect(), None),
            Gpus::Count(n) if *n <= available => ((0..*n).collect(), None),
            Gpus::Count(n) => (
                (0..available.max(1)).collect(),
                Some(format!("--gpus {n}: the driver sees {available} GPU(s); running on {}", available.max(1))),
            ),
            Gpus::List(l) => {
                let (there, missing): (Vec<usize>, Vec<usize>) = l.iter().partition(|&&d| d < available);
                if missing.is_empty() {
                    (there, None)
                } else if there.is_empty() {
                    (vec![0], Some(format!("--gpus {self}: the driver sees {available} GPU(s); running on GPU 0")))
                } else {
                    let note = format!(
                        "--gpus {self}: no GPU {} (the driver sees {available}); running on {}",
                        missing.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
                        there.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
                    );
                    (there, Some(note))
                }
            }
        }
    }
}

/// A backend ready to evaluate.
pub enum Backend {
    /// The CPU interpreter on all cores.
    Cpu,
    /// A CUDA device.
    Cuda(Box<cuda::CudaEngine>),
}

/// A backend [`Backend::open`] opened, and the lines that say what it left out (GPUs the
/// driver does not have, the CPU fallback of `auto`), for the caller to show: the command line
/// prints them ([`Opened::print_notes`]), the Python package warns with them.
#[must_use = "the notes say why a run is not where it was asked to be"]
pub struct Opened {
    /// The backend.
    pub backend: Backend,
    /// One line each, without a `note:` prefix.
    pub notes: Vec<String>,
}

impl Opened {
    /// The backend, its notes printed on standard error (`note: …`) unless `quiet`.
    pub fn print_notes(self, quiet: bool) -> Backend {
        if !quiet {
            for note in &self.notes {
                eprintln!("note: {note}");
            }
        }
        self.backend
    }
}

impl Backend {
    /// Opens the backend `choice` names, on the first of the GPUs `gpus` chooses (device 0 for
    /// `all`: a run whose islands spread over several GPUs opens the others with
    /// [`Self::more_gpus`]). Prints nothing: what it left out comes back as notes. `auto`
    /// without a usable GPU is the CPU and a note (`running on the CPU (...)`); `cuda` without
    /// one is an error; a choice of GPUs the driver does not have is a note, and the run goes
    /// on with those that are there.
    pub fn open(choice: DeviceChoice, gpus: &Gpus) -> Result<Opened> {
        let ordinal = match (choice, gpus) {
            (DeviceChoice::Cpu, _) => return Ok(Opened { backend: Backend::Cpu, notes: Vec::new() }),
            (_, Gpus::All) => None,
            // No driver: opening device 0 says so (auto) or fails (cuda).
            _ => cuda::probe::driver().ok().map(|d| gpus.resolve(d.devices as usize)),
        };
        let (ordinal, mut notes) = match ordinal {
            Some((ordinals, note)) => (ordinals[0], note.into_iter().collect()),
            None => (0, Vec::new()),
        };
        match cuda::CudaEngine::with_options(cuda::EngineOptions { ordinal, ..cuda::EngineOptions::default() }) {
            Ok(e) => Ok(Opened { backend: Backend::Cuda(Box::new(e)), notes }),
            Err(e) if choice == DeviceChoice::Cuda => Err(anyhow::anyhow!("--device cuda: {e}")),
            Err(e) => {
                notes.push(format!("running on the CPU ({e})"));
                Ok(Opened { backend: Backend::Cpu, notes })
            }
        }
    }

    /// The CUDA engine, `None` on the CPU.
    fn engine(&self) -> Option<&cuda::CudaEngine> {
        match self {
            Backend::Cpu => None,
            Backend::Cuda(e) => Some(e),
        }
    }

    /// Whether this backend runs on a GPU (the CUDA backend), for the notes and defaults that
    /// depend on it.
    pub fn is_gpu(&self) -> bool {
        self.engine().is_some()
    }

    /// How many GPUs the driver sees, for a backend on a GPU (`None` on the CPU).
    pub fn visible_gpus(&self) -> Result<Option<usize>> {
        match self {
            Backend::Cpu => Ok(None),
            Backend::Cuda(_) => Ok(Some(cuda::probe::driver().map_err(|e| anyhow::anyhow!("{e}"))?.devices as usize)),
        }
    }

    /// The engine a data set on the device belongs to: an error on the CPU, which cannot read
    /// it.
    fn device(&self) -> Result<&cuda::CudaEngine> {
        self.engine().ok_or_else(|| anyhow::anyhow!("data set uploaded for another backend"))
    }

    /// The other GPUs a run of `islands` islands spreads over, besides this backend's: for a
    /// CUDA backend, an engine on each further GPU that `gpus` chooses, up to one per island
    /// (none on the CPU, for one island, or on a machine with one GPU). Opened in the order
    /// `gpus` lists them; islands go to this backend first.
    pub fn more_gpus(&self, gpus: &Gpus, islands: usize) -> Result<Vec<Backend>> {
        let Some(primary) = self.engine() else { return Ok(Vec::new()) };
        if islands < 2 {
            return Ok(Vec::new());
        }
        let devices = cuda::probe::driver().map_err(|e| anyhow::anyhow!("{e}"))?.devices as usize;
        let (ordinals, _) = gpus.resolve(devices);
        let used = ordinals.len().min(islands);
        let others: Vec<usize> = ordinals.into_iter().filter(|&o| o != primary.ordinal()).take(used.saturating_sub(1)).collect();
        others
            .into_iter()
            .map(|o| {
                let e = cuda::CudaEngine::with_options(cuda::EngineOptions { ordinal: o, ..cuda::EngineOptions::default() })
                    .map_err(|e| anyhow::anyhow!("--gpus: GPU {o}: {e}"))?;
                Ok(Backend::Cuda(Box::new(e)))
            })
            .collect()
    }

    /// How many GPUs a run of `islands` islands on this backend spreads over (as
    /// [`Self::more_gpus`] opens them, with this one): 0 on the CPU, else at least 1.
    pub fn gpus_for(&self, gpus: Gpus, islands: usize) -> usize {
        match self {
            Backend::Cpu => 0,
            Backend::Cuda(_) if islands < 2 => 1,
            Backend::Cuda(_) => match cuda::probe::driver() {
                Ok(d) => gpus.resolve(d.devices as usize).0.len().clamp(1, islands),
                Err(_) => 1,
            },
        }
    }

    /// The GPU's free memory in bytes (`None` on the CPU).
    pub fn free_memory(&self) -> Result<Option<u64>> {
        let Some(engine) = self.engine() else { return Ok(None) };
        let (free, _total) = engine.context().mem_get_info().map_err(|e| anyhow::anyhow!("asking the GPU for its free memory: {e:?}"))?;
        Ok(Some(free as u64))
    }

    /// The kernel modules this backend compiled or read from the disk cache so far: how many
    /// of each and the seconds they took (none on the CPU).
    pub fn kernel_loads(&self) -> KernelLoads {
        let loads = self.engine().map(|e| e.module_loads()).unwrap_or_default();
        loads.iter().fold(KernelLoads::default(), |k, l| KernelLoads {
            compiled: k.compiled + (l.origin == cuda::Origin::Compiled) as usize,
            from_disk: k.from_disk + (l.origin == cuda::Origin::Disk) as usize,
            seconds: k.seconds + l.seconds,
        })
    }

    /// A short description: `cpu (2 threads)` or the GPU's name.
    pub fn describe(&self) -> String {
        match self {
            Backend::Cpu => format!("cpu ({} threads)", rayon::current_num_threads()),
            Backend::Cuda(e) => format!("cuda ({})", e.device_name()),
        }
    }

    /// Puts a regression data set where this backend reads it (once per run). On a GPU, a data
    /// set larger than [`device_data_budget`] stays on the host and is streamed to the device in
    /// chunks of rows at every evaluation, the chunks' sums merged in row order.
    pub fn regression_data<'d>(&self, x: &'d [f32], y: &'d [f32], n_rows: usize, n_features: usize) -> Result<RegressionData<'d>> {
        self.regression_data_within(x, y, n_rows, n_features, None)
    }

    /// [`Backend::regression_data`] with an explicit device budget in bytes (`None`: the
    /// default, [`device_data_budget`]).
    pub fn regression_data_within<'d>(
        &self,
        x: &'d [f32],
        y: &'d [f32],
        n_rows: usize,
        n_features: usize,
        budget: Option<usize>,
    ) -> Result<RegressionData<'d>> {
        Ok(match self {
            Backend::Cpu => RegressionData::Host { x, y, n_rows },
            Backend::Cuda(e) => {
                let row_bytes = (n_features + 1) * size_of::<f32>();
                let budget = match budget {
                    Some(b) => b,
                    None => device_data_budget(e)?,
                };
                if n_rows * row_bytes <= budget {
                    RegressionData::Device(e.upload_dataset(x, y, n_rows, n_features)?)
                } else {
                    anyhow::ensure!(
                        x.len() == n_rows * n_features && y.len() == n_rows,
                        "x has {} values and y {}; expected {n_features} × {n_rows} and {n_rows}",
                        x.len(),
                        y.len()
                    );
                    let chunk_rows = (budget / row_bytes).max(1);
                    RegressionData::Streamed { x, y, n_rows, n_features, chunk_rows }
                }
            }
        })
    }

    /// Fused regression sums of every individual of `pop` on `data`.
    pub fn regression_sums(&self, pop: &Population, data: &RegressionData<'_>) -> Result<Vec<RegressionSums>> {
        match (self, data) {
            (Backend::Cpu, RegressionData::Host { x, y, n_rows }) => {
                Ok(cpu::eval::evaluate_regression(pop, x, y, *n_rows)?)
            }
            (Backend::Cuda(e), RegressionData::Device(d)) => {
                Ok(e.evaluate_regression(pop, d)?)
            }
            (Backend::Cuda(e), RegressionData::Streamed { x, y, n_rows, n_features, chunk_rows }) => {
                let mut total: Option<Vec<RegressionSums>> = None;
                let mut xc = Vec::new();
                for r0 in (0..*n_rows).step_by(*chunk_rows) {
                    let r1 = (r0 + chunk_rows).min(*n_rows);
                    // The chunk's columns, feature-major like the whole.
                    xc.clear();
                    for f in 0..*n_features {
                        xc.extend_from_slice(&x[f * n_rows + r0..f * n_rows + r1]);
                    }
                    let d = e.upload_dataset(&xc, &y[r0..r1], r1 - r0, *n_features)?;
                    let part = e.evaluate_regression(pop, &d)?;
                    match &mut total {
                        None => total = Some(part),
                        Some(t) => t.iter_mut().zip(&part).for_each(|(t, p)| t.merge(p)),
                    }
                }
                Ok(total.unwrap_or_default())
            }
            _ => anyhow::bail!("data set uploaded for another backend"),
        }
    }

    /// Every individual's outputs at `n_rows` rows `x` (`[n_features][n_rows]`, host memory):
    /// `[P × max(1, n_outputs) × n_rows]`, on the GPU where this backend is one (the rows
    /// uploaded for the call), else on the CPU ([`cpu::eval::predict_all`]).
    pub fn predictions(&self, pop: &Population, x: &[f32], n_rows: usize, n_features: usize) -> Result<Vec<f32>> {
        anyhow::ensure!(x.len() == n_rows * n_features, "x has {} values; expected {n_features} × {n_rows}", x.len());
        match self {
            Backend::Cpu => Ok(cpu::eval::predict_all(pop, x, n_rows)?),
            Backend::Cuda(e) => {
                let d = e.upload_dataset(x, &vec![0.0; n_rows], n_rows, n_features)?;
                Ok(e.predict(pop, &d)?)
            }
        }
    }

    /// Every individual's sums of a loss of the user's own over `data`'s rows at its prediction
    /// `a·f + b`, `(a, b)` its linear scaling where `scaled` (else `(1, 0)`): on the GPU when the
    /// data is there (`grove_loss_sums` after the prediction kernels), else on the CPU
    /// ([`cpu::eval::evaluate_loss`], the scaling from the fused sums).
    pub fn loss_sums(&self, pop: &Population, data: &RegressionData<'_>, loss: &crate::program::fitness::Loss, scaled: bool) -> Result<Vec<crate::program::fitness::LossSums>> {
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                let scale: Vec<(f64, f64)> = if scaled {
                    cpu::eval::evaluate_regression(pop, x, y, *n_rows)?.iter().map(|s| if s.is_valid() { s.scale() } else { (1.0, 0.0) }).collect()
                } else {
                    vec![(1.0, 0.0); pop.size()]
                };
                Ok(cpu::eval::evaluate_loss(pop, x, y, *n_rows, loss.op, &scale)?)
            }
            RegressionData::Device(d) => Ok(self.device()?.evaluate_loss(pop, d, loss.op, scaled)?),
        }
    }

    /// Every individual's predictions at `data`'s rows under its linear scaling where `scaled`,
    /// for a fitness function of the user's own: on the GPU when the data is there, left on the
    /// device ([`cuda::CudaEngine::scaled_predictions`]), else on the CPU.
    pub fn prediction_batch(&self, pop: &Population, data: &RegressionData<'_>, scaled: bool) -> Result<PredictionBatch> {
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                let n = *n_rows;
                let mut pred = cpu::eval::predict_all(pop, x, n)?;
                if scaled {
                    for f in pred.chunks_mut(n.max(1)) {
                        let s = RegressionSums::of_rows(f, y);
                        if s.is_valid() {
                            let (a, b) = s.scale();
                            f.iter_mut().for_each(|v| *v = crate::program::fitness::scaled_prediction(*v, a, b));
                        }
                    }
                }
                Ok(PredictionBatch::Host { pred, y: y.to_vec(), programs: pop.size(), rows: n })
            }
            RegressionData::Device(d) => Ok(PredictionBatch::Device(self.device()?.scaled_predictions(pop, d, scaled)?)),
        }
    }

    /// A batch of predictions computed on the host (`programs × rows`) with their targets, for a
    /// fitness function of the user's own: copied onto the GPU on a GPU backend (the function
    /// then gets device arrays at every call of a GPU run), else kept on the host.
    pub fn host_prediction_batch(&self, pred: Vec<f32>, y: &[f32], programs: usize, rows: usize) -> Result<PredictionBatch> {
        match self.engine() {
            Some(e) if programs > 0 => Ok(PredictionBatch::Device(e.upload_batch(&pred, y, programs, rows)?)),
            _ => Ok(PredictionBatch::Host { pred, y: y.to_vec(), programs, rows }),
        }
    }

    /// The fitted head's sums ([`crate::program::head::HeadSums`]) of every individual of
    /// `pop` (`2 ..= MAX_HEAD` output slots) on `data`: on the GPU when the data is there
    /// (`grove_head_sums` after the prediction kernels), else on the CPU
    /// ([`cpu::eval::evaluate_head`]).
    pub fn head_sums(&self, pop: &Population, data: &RegressionData<'_>) -> Result<Vec<crate::program::head::HeadSums>> {
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                Ok(cpu::eval::evaluate_head(pop, x, y, *n_rows)?)
            }
            RegressionData::Device(d) => Ok(self.device()?.evaluate_head(pop, d)?),
        }
    }

    /// The sums of every individual's classifier head over its outputs
    /// ([`crate::program::head::ClassHeadSums`]), `data`'s target holding the rows' class
    /// indices (as floats), of which `counts[c]` are `c`: on the GPU when the data is there
    /// (`grove_class_head_sums` after the prediction kernels), else on the CPU
    /// ([`cpu::eval::evaluate_class_head`], which reads the labels' counts itself and checks them).
    pub fn class_head_sums(&self, pop: &Population, data: &RegressionData<'_>, counts: &[u64]) -> Result<Vec<crate::program::head::ClassHeadSums>> {
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                Ok(cpu::eval::evaluate_class_head(pop, x, y, *n_rows, counts.len())?)
            }
            RegressionData::Device(d) => {
                let e = self.device()?;
                anyhow::ensure!(counts.iter().sum::<u64>() == d.n_rows() as u64, "class counts of {} rows for {} rows", counts.iter().sum::<u64>(), d.n_rows());
                Ok(e.evaluate_class_head(pop, d, counts)?)
            }
        }
    }

    /// The sums of every individual's joint fit with linear terms of the inputs
    /// ([`crate::program::linear::Joint`]; `data`'s target is the terms' residual, `inputs`
    /// their columns): on the GPU when the data is there (`grove_joint_sums` after the
    /// prediction kernels), else on the CPU ([`cpu::eval::evaluate_joint`]).
    pub fn joint_sums(&self, pop: &Population, data: &RegressionData<'_>, inputs: &[usize]) -> Result<Vec<crate::program::linear::JointSums>> {
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                Ok(cpu::eval::evaluate_joint(pop, x, y, *n_rows, inputs)?)
            }
            RegressionData::Device(d) => Ok(self.device()?.evaluate_joint(pop, d, inputs)?),
        }
    }

    /// Fits the numeric constants of rows `rows` of `pop` in place on `data` by
    /// Levenberg–Marquardt ([`cpu::fit`]): on the GPU when the data is there
    /// (`kernels/fit.cu`, the same bits), else on the CPU. One result per row.
    pub fn fit_constants(&self, pop: &mut Population, rows: &[usize], data: &RegressionData<'_>, cfg: FitConfig) -> Result<Vec<FitResult>> {
        if let Some(&r) = rows.iter().find(|&&r| r >= pop.size()) {
            anyhow::bail!("row {r} of a population of {}", pop.size());
        }
        match data {
            RegressionData::Host { x, y, n_rows } | RegressionData::Streamed { x, y, n_rows, .. } => {
                Ok(cpu::fit::fit_constants(pop, rows, x, y, *n_rows, cfg))
            }
            RegressionData::Device(d) => Ok(self.device()?.fit_constants(pop, rows, d, cfg)?),
        }
    }

    /// Fits the numeric constants of rows `rows` of the classification population `pop` in
    /// place on `data` by Levenberg–Marquardt on the softmax cross-entropy, with the data's
    /// offsets (the linear terms of the inputs) under the outputs as the fitness adds them
    /// ([`cpu::fit::class::fit_class_constants`]): on the GPU when the data is there
    /// (`kernels/fit.cu`, the same bits), else on the CPU. One result per row.
    pub fn fit_class_constants(&self, pop: &mut Population, rows: &[usize], data: &ClassData<'_>, steps: u32) -> Result<Vec<FitResult>> {
        if let Some(&r) = rows.iter().find(|&&r| r >= pop.size()) {
            anyhow::bail!("row {r} of a population of {}", pop.size());
        }
        match data {
            ClassData::Host { x, labels, n_rows, n_classes, offset } => {
                if let Some(o) = offset {
                    anyhow::ensure!(o.len() == pop.n_outputs.max(1) * n_rows, "offsets for {} outputs, programs of {}", o.len() / n_rows, pop.n_outputs);
                }
                Ok(cpu::fit::class::fit_class_constants(pop, rows, x, labels, *offset, *n_rows, *n_classes, steps))
            }
            ClassData::Device(d) => Ok(self.device()?.fit_class_constants(pop, rows, d, steps)?),
        }
    }

    /// Puts a classification data set where this backend reads it (once per run): features
    /// `x` `[n_features][n_rows]` (f32, feature-major) and `labels` `[n_rows]`, each `< n_classes`.
    ///
    /// On CUDA the data goes to the device and [`Backend::classification_sums`] runs
    /// `kernels/classify.cu` (parity: `classify_matches_reference` in `tests/cuda_eval.rs`);
    /// `GROVE_CLASSIFY_KERNEL=0` keeps the data on the host and runs the CPU reference instead.
    pub fn classification_data<'d>(&self, x: &'d [f32], labels: &'d [u32], n_rows: usize, n_classes: usize) -> Result<ClassData<'d>> {
        self.classification_data_with(x, labels, n_rows, n_classes, None)
    }

    /// [`Backend::classification_data`] with `offset` (`[slots][n_rows]`, finite: `slots` is
    /// `n_classes`, or 1 for one-output programs of two classes) added to the programs' outputs
    /// before they are scored: the linear terms of the inputs ([`crate::program::logistic`]).
    pub fn classification_data_with<'d>(
        &self,
        x: &'d [f32],
        labels: &'d [u32],
        n_rows: usize,
        n_classes: usize,
        offset: Option<&'d [f32]>,
    ) -> Result<ClassData<'d>> {
        anyhow::ensure!(labels.len() == n_rows && n_rows > 0, "{} labels for {n_rows} rows", labels.len());
        anyhow::ensure!(x.len() % n_rows == 0, "{} feature values do not fill {n_rows} rows", x.len());
        anyhow::ensure!(labels.iter().all(|&l| (l as usize) < n_classes), "a label is not below {n_classes}");
        if let Some(o) = offset {
            let slots = o.len() / n_rows;
            anyhow::ensure!(
                o.len() % n_rows == 0 && (slots == n_classes || (slots == 1 && n_classes == 2)),
                "{} offsets for {n_rows} rows of {n_classes} classes",
                o.len()
            );
            anyhow::ensure!(o.iter().all(|v| v.is_finite()), "an offset is not finite");
        }
        Ok(match self {
            Backend::Cuda(e) if classify_kernel_opted_in() => {
                let mut d = e.upload_class_data(x, labels, n_rows, x.len() / n_rows, n_classes)?;
                if let Some(o) = offset {
                    e.set_class_offset(&mut d, o)?;
                }
                ClassData::Device(d)
            }
            _ => ClassData::Host { x, labels, n_rows, n_classes, offset },
        })
    }

    /// Fused classification sums (per-class correct counts, cross-entropy) of every
    /// individual of `pop` on `data`: `pop.n_outputs == n_classes`, or 0 with two classes
    /// (the sign of the single output).
    pub fn classification_sums(&self, pop: &Population, data: &ClassData<'_>) -> Result<Vec<ClassSums>> {
        match data {
            ClassData::Host { x, labels, n_rows, n_classes, offset } => {
                if let Some(o) = offset {
                    anyhow::ensure!(o.len() == pop.n_outputs.max(1) * n_rows, "offsets for {} outputs, programs of {}", o.len() / n_rows, pop.n_outputs);
                }
                Ok(cpu::classify::evaluate_classification_with(pop, x, labels, *n_rows, *n_classes, *offset)?)
            }
            ClassData::Device(d) => Ok(self.device()?.evaluate_classification(pop, d)?),
        }
    }

    /// Mean return of every individual of `pop` (a policy with one output per actuator of `m`)
    /// over the episodes of `run` (NaN for an invalid individual), and the control steps played
    /// in all. CPU: [`cpu::control`]; CUDA: `kernels/sim.cu`'s `grove_control_rollout`, whole
    /// episodes in one launch, and `grove_control_reduce`.
    pub fn control_returns(&self, pop: &Population, m: &crate::sim::Model, run: &cpu::control::ControlRun) -> Result<(Vec<f64>, u64)> {
        let (means, _, steps) = self.control_episodes(pop, m, run)?;
        Ok((means, steps))
    }

    /// [`Backend::control_returns`] with every episode's return besides, individual-major
    /// (`[P × episodes]`, NaN for an invalid episode): the cases lexicase selection reads.
    pub fn control_episodes(&self, pop: &Population, m: &crate::sim::Model, run: &cpu::control::ControlRun) -> Result<(Vec<f64>, Vec<f64>, u64)> {
        let (means, eps) = match self {
            Backend::Cpu => {
                let eps = cpu::control::control_rollout(pop, m, run);
                (cpu::control::mean_returns(&eps, run.episodes), eps)
            }
            Backend::Cuda(e) => {
                let out = e.control_returns(pop, m, run)?;
                (out.means, out.episodes)
            }
        };
        let steps = eps.iter().map(|e| e.steps as u64).sum();
        Ok((means, episode_returns(&eps), steps))
    }

    /// [`Backend::control_returns`] with the statistics of the observations each individual's
    /// policy read over its episodes (merged in episode order), the policies reading them through
    /// `scale` when given: the same bits on both backends. CPU:
    /// [`cpu::control::control_rollout_observed`]; CUDA: `grove_control_rollout` with its
    /// `observed` and `scale` buffers.
    pub fn control_returns_observed(
        &self,
        pop: &Population,
        m: &crate::sim::Model,
        run: &cpu::control::ControlRun,
        scale: Option<&crate::sim::stats::InputScale>,
    ) -> Result<(Vec<f64>, u64, Vec<crate::sim::stats::ObsStats>, Vec<f64>)> {
        let (means, eps, seen) = match self {
            Backend::Cpu => {
                let (eps, seen) = cpu::control::control_rollout_observed(pop, m, run, scale);
                (cpu::control::mean_returns(&eps, run.episodes), eps, seen)
            }
            Backend::Cuda(e) => {
                let out = e.control_returns_observed(pop, m, run, cuda::control::ControlGrid::Resident, scale)?;
                (out.means, out.episodes, out.observed)
            }
        };
        let steps = eps.iter().map(|e| e.steps as u64).sum();
        Ok((means, steps, cpu::control::observed_by_individual(&seen, run.episodes), episode_returns(&eps)))
    }

    /// True when classification fitness runs on the CPU although this backend is CUDA
    /// (`GROVE_CLASSIFY_KERNEL=0`); the command says so.
    pub fn classification_on_host(&self) -> bool {
        self.engine().is_some() && !classify_kernel_opted_in()
    }
}

/// Each episode's return, NaN where it was invalid.
fn episode_returns(eps: &[cpu::control::Episode]) -> Vec<f64> {
    eps.iter().map(|e| if e.valid { e.ret } else { f64::NAN }).collect()
}

/// Classification fitness on CUDA runs `kernels/classify.cu` unless `GROVE_CLASSIFY_KERNEL=0`
/// (the CPU reference, for comparisons).
fn classify_kernel_opted_in() -> bool {
    std::env::var("GROVE_CLASSIFY_KERNEL").map_or(true, |v| v != "0")
}

/// A batch of predictions for a fitness function of the user's own
/// ([`Backend::prediction_batch`]): `[programs × rows]` f32, row-major, and the rows' targets.
#[derive(Debug)]
pub enum PredictionBatch {
    /// In host memory.
    Host {
        /// `[programs × rows]`.
        pred: Vec<f32>,
        /// `[rows]`.
        y: Vec<f32>,
        /// Programs.
        programs: usize,
        /// Rows.
        rows: usize,
    },
    /// On a GPU.
    Device(cuda::DeviceBatch),
}

impl PredictionBatch {
    /// `(programs, rows)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            PredictionBatch::Host { programs, rows, .. } => (*programs, *rows),
            PredictionBatch::Device(d) => d.shape(),
        }
    }

    /// `[programs]`: whether each program's predictions are finite at every row (an empty
    /// program's are NaN).
    pub fn valid(&self) -> Vec<bool> {
        match self {
            PredictionBatch::Host { rows, programs, .. } if *rows == 0 => vec![false; *programs],
            PredictionBatch::Host { pred, rows, .. } => pred.chunks(*rows).map(|f| f.iter().all(|v| v.is_finite())).collect(),
            PredictionBatch::Device(d) => d.valid().to_vec(),
        }
    }
}

/// A classification data set as a backend reads it.
pub enum ClassData<'d> {
    /// Host memory.
    Host {
        /// `[n_features][n_rows]`, feature-major, f32.
        x: &'d [f32],
        /// `[n_rows]` class of each row.
        labels: &'d [u32],
        /// Rows.
        n_rows: usize,
        /// Classes.
        n_classes: usize,
        /// Added to the programs' outputs before scoring: `[max(1, n_outputs)][n_rows]`
        /// ([`Backend::classification_data_with`]).
        offset: Option<&'d [f32]>,
    },
    /// Uploaded to a GPU.
    Device(cuda::DeviceClassData),
}

/// A regression data set as a backend reads it.
pub enum RegressionData<'d> {
    /// Host memory, feature-major.
    Host {
        /// `[n_features][n_rows]`.
        x: &'d [f32],
        /// `[n_rows]`.
        y: &'d [f32],
        /// Rows.
        n_rows: usize,
    },
    /// Uploaded to a GPU.
    Device(cuda::DeviceDataset),
    /// Too large for the GPU at once: read from host memory and streamed in chunks of
    /// `chunk_rows` rows at every evaluation.
    Streamed {
        /// `[n_features][n_rows]`.
        x: &'d [f32],
        /// `[n_rows]`.
        y: &'d [f32],
        /// Rows.
        n_rows: usize,
        /// Features.
        n_features: usize,
        /// Rows per chunk.
        chunk_rows: usize,
    },
}

/// How many bytes of data a run may keep on the GPU: `GROVE_DEVICE_DATA_BYTES` when set (to
/// test streaming, or to leave room for other work), else half the device's free memory.
pub fn device_data_budget(engine: &cuda::CudaEngine) -> Result<usize> {
    if let Ok(v) = std::env::var("GROVE_DEVICE_DATA_BYTES") {
        return v.trim().parse::<usize>().map_err(|_| anyhow::anyhow!("GROVE_DEVICE_DATA_BYTES={v}: give a number of bytes"));
    }
    let (free, _total) = engine.context().mem_get_info().map_err(|e| anyhow::anyhow!("asking the GPU for its free memory: {e:?}"))?;
    Ok(free / 2)
}

/// Writes a test body once and runs it on every backend: `cpu` always, `cuda` when the tests
/// were built with `GROVE_TEST_GPU=1` (then a missing GPU fails the test; otherwise it reports
/// as ignored). The body is a closure taking a `&Backend`.
///
/// ```ignore
/// grove::test_device!(sums_are_finite, |backend: &grove::backend::Backend| { /* … */ });
/// ```
#[macro_export]
macro_rules! test_device {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn cpu() {
                let backend = $crate::backend::Backend::Cpu;
                ($body)(&backend);
            }

            #[test]
            #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
            fn cuda() {
                let backend = $crate::backend::Backend::open($crate::backend::DeviceChoice::Cuda, &$crate::backend::Gpus::All)
                    .expect("GROVE_TEST_GPU=1: a usable CUDA GPU is required")
                    .backend;
                ($body)(&backend);
            }
        }
    };
}

/// Kernel modules a backend compiled (NVRTC) or read from the disk cache, and the seconds they
/// took ([`Backend::kernel_loads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelLoads {
    /// Compiled by NVRTC.
    pub compiled: usize,
    /// Read from the disk cache.
    pub from_disk: usize,
    /// Seconds of both, loading into the context included.
    pub seconds: f64,
}
