//! What the device loop ([`crate::evolve::device`]) needs from a task whose data lives on a GPU:
//! [`DeviceTask`], the engine and the task's device data and settings. The backend builds it
//! ([`Backend::regression_task`], [`Backend::classification_task`], [`Backend::control_task`]),
//! so a task says what it scores and never which device holds it: on the CPU each constructor
//! gives `None`, and the host loop runs.

use std::sync::Mutex;

use super::cpu::control::ControlRun;
use super::cuda::{CudaEngine, DeviceClassData, DeviceDataset, KernelSource};
use super::{Backend, ClassData, RegressionData};
use crate::program::fitness::{ClassFitness, RegressionConfig};

/// A regression task whose data lives on a GPU: what the device loop needs from the task.
#[derive(Clone, Copy)]
pub struct DeviceRegression<'a> {
    /// The engine holding the data.
    pub engine: &'a CudaEngine,
    /// The training data on the device.
    pub data: &'a DeviceDataset,
    /// Metric, scaling and parsimony.
    pub config: RegressionConfig,
    /// The rows' other shards when they are split over GPUs (`--shard-rows`; empty: every row
    /// is in `data`). Each generation's population is copied to each shard's GPU, which adds
    /// its sums; the first GPU adds them in shard order ([`crate::program::fitness::RegressionSums::merge`]'s
    /// order) and computes the fitness. Selection and breeding stay on the first GPU.
    pub shards: &'a [Shard<'a>],
    /// Linear terms of the inputs each program is fitted with: the fitness is then the joint
    /// fit's error (the target in `data` is the terms' residual), from each tree's values kept
    /// on the device (`CudaEngine::keep_joint`).
    pub joint: Option<&'a crate::program::linear::Joint>,
}

/// One shard of a regression task's rows on a GPU.
#[derive(Clone, Copy)]
pub struct Shard<'a> {
    /// The engine holding the rows.
    pub engine: &'a CudaEngine,
    /// The rows.
    pub data: &'a DeviceDataset,
}

/// A classification task whose data lives on a GPU.
#[derive(Clone, Copy)]
pub struct DeviceClassification<'a> {
    /// The engine holding the data.
    pub engine: &'a CudaEngine,
    /// The training data on the device.
    pub data: &'a DeviceClassData,
    /// Training points per class.
    pub counts: &'a [u64],
    /// What is minimised.
    pub fitness: ClassFitness,
    /// Added to the fitness per node.
    pub parsimony: f64,
}

/// A control task whose roll-outs run on a GPU: fitness is minus the mean return of `run`'s
/// episodes, plus parsimony.
#[derive(Clone, Copy)]
pub struct DeviceControl<'a> {
    /// The engine that plays the episodes.
    pub engine: &'a CudaEngine,
    /// The environment.
    pub model: &'a crate::sim::Model,
    /// Episodes, steps and reset noise.
    pub run: ControlRun,
    /// Every generation plays fresh starts ([`ControlRun::at_generation`]).
    pub fresh: bool,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Env steps played and seconds of the generations that played them, as the task counts
    /// them for its report.
    pub played: &'a Mutex<(u64, f64)>,
    /// The normaliser the policies read their observations through, learnt from what each
    /// generation's policies see ([`crate::sim::stats::Learnt`]); `None`: raw observations.
    pub learnt: Option<&'a Mutex<crate::sim::stats::Learnt>>,
}

/// A task the device loop runs: its fitness is computed on the device.
#[derive(Clone, Copy)]
pub enum DeviceTask<'a> {
    /// Symbolic regression.
    Regression(DeviceRegression<'a>),
    /// Classification.
    Classification(DeviceClassification<'a>),
    /// Control.
    Control(DeviceControl<'a>),
}

impl<'a> DeviceTask<'a> {
    /// The engine that runs the task (for rows split over GPUs, the one holding the first part).
    pub fn engine(&self) -> &'a CudaEngine {
        match self {
            DeviceTask::Regression(r) => r.engine,
            DeviceTask::Classification(c) => c.engine,
            DeviceTask::Control(c) => c.engine,
        }
    }

    /// Starts compiling, each on its own thread, the kernel modules a device run of this task
    /// loads ([`CudaEngine::module_ready`]): the generation's, selection's and variation's, the
    /// task's scoring (evaluation at one and at the default points a thread, classification, or
    /// the model's one-lane roll-out), the mapper for grammatical evolution (`ge`) and the fit
    /// when constants are fitted (`fit`). A machine without them in its disk cache then waits,
    /// in its first generation, for the slowest compile instead of their sum. Modules already
    /// loaded or on disk are loaded now; one that fails to compile fails where it is loaded.
    pub fn compile_ahead(&self, ge: bool, fit: bool) {
        use super::cuda::kernels::{CLASSIFY, EVAL, FIT, GENERATION, MAP, SELECT, VARY};
        let e = self.engine();
        let k = super::cuda::eval::DEFAULT_POINTS_PER_THREAD;
        let mut modules: Vec<(KernelSource<'_>, Vec<(&str, u32)>)> = vec![(GENERATION, vec![]), (SELECT, vec![]), (VARY, vec![])];
        if ge {
            modules.push((MAP, vec![]));
        }
        let sim;
        match self {
            DeviceTask::Regression(_) => {
                modules.extend([(EVAL, vec![("GROVE_K", 1)]), (EVAL, vec![("GROVE_K", k)])]);
                if fit {
                    modules.push((FIT, vec![]));
                }
            }
            DeviceTask::Classification(_) => {
                modules.extend([(CLASSIFY, vec![]), (EVAL, vec![("GROVE_K", 1)])]);
                if fit {
                    modules.push((FIT, vec![]));
                }
            }
            DeviceTask::Control(c) => {
                sim = super::cuda::sim::sim_text(c.model);
                modules.push((KernelSource { file: "sim.cu", text: &sim }, vec![]));
            }
        }
        for (src, defines) in modules {
            let _ = e.module_ready(&src, &defines);
        }
    }

    /// The regression task with its rows' other shards on `shards` (`--shard-rows`); `None`
    /// for a task of another kind.
    pub fn with_shards(self, shards: &'a [Shard<'a>]) -> Option<DeviceTask<'a>> {
        match self {
            DeviceTask::Regression(r) => Some(DeviceTask::Regression(DeviceRegression { shards, ..r })),
            _ => None,
        }
    }
}

impl Backend {
    /// Regression of `data` scored by `config` (or, with `joint`, by each program's fit with
    /// those linear terms) in the device loop: `None` unless the data is on this backend's GPU.
    pub fn regression_task<'a>(&'a self, data: &'a RegressionData<'_>, config: RegressionConfig, joint: Option<&'a crate::program::linear::Joint>) -> Option<DeviceTask<'a>> {
        let shard = self.shard(data)?;
        Some(DeviceTask::Regression(DeviceRegression { engine: shard.engine, data: shard.data, config, shards: &[], joint }))
    }

    /// `data` as one shard of a regression task's rows: `None` unless it is on this backend's
    /// GPU.
    pub fn shard<'a>(&'a self, data: &'a RegressionData<'_>) -> Option<Shard<'a>> {
        match (self, data) {
            (Backend::Cuda(engine), RegressionData::Device(data)) => Some(Shard { engine, data }),
            _ => None,
        }
    }

    /// Classification of `data` (`counts`: training points per class) by `fitness`, plus
    /// `parsimony` per node, in the device loop: `None` unless the data is on this backend's
    /// GPU.
    pub fn classification_task<'a>(&'a self, data: &'a ClassData<'_>, counts: &'a [u64], fitness: ClassFitness, parsimony: f64) -> Option<DeviceTask<'a>> {
        match (self, data) {
            (Backend::Cuda(engine), ClassData::Device(data)) => {
                Some(DeviceTask::Classification(DeviceClassification { engine, data, counts, fitness, parsimony }))
            }
            _ => None,
        }
    }

    /// Control of `model` playing `run`'s episodes (`fresh`: new starts every generation), plus
    /// `parsimony` per node, in the device loop, counting steps and seconds into `played` and
    /// observations through `learnt` when given ([`DeviceControl`]): `None` on the CPU.
    pub fn control_task<'a>(
        &'a self,
        model: &'a crate::sim::Model,
        run: ControlRun,
        fresh: bool,
        parsimony: f64,
        played: &'a Mutex<(u64, f64)>,
        learnt: Option<&'a Mutex<crate::sim::stats::Learnt>>,
    ) -> Option<DeviceTask<'a>> {
        match self {
            Backend::Cuda(engine) => Some(DeviceTask::Control(DeviceControl { engine, model, run, fresh, parsimony, played, learnt })),
            Backend::Cpu => None,
        }
    }
}
