//! The CUDA backend's errors: typed where a caller branches ([`NoGpu`] for the CPU fallback,
//! [`GpuError::TreeTooDeep`] for trees the kernels cannot hold), with the kernel or operation
//! named in every message.

use std::fmt;

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;

pub use super::probe::NoGpu;

/// Anything the CUDA backend can fail with.
#[derive(Debug)]
pub enum GpuError {
    /// No usable GPU, driver or NVRTC; the caller falls back to the CPU.
    NoGpu(NoGpu),
    /// A driver call failed; `during` names the operation or kernel.
    Driver {
        /// What was being done ("launching grove_eval_regression_k4", "uploading the data set").
        during: String,
        /// The driver's error code.
        error: DriverError,
    },
    /// An NVRTC call other than the compilation itself failed.
    Nvrtc {
        /// What was being done.
        during: String,
        /// NVRTC's error code.
        error: NvrtcError,
    },
    /// NVRTC rejected a kernel source.
    Compile(CompileFailure),
    /// A tree needs more evaluation stack than the deepest kernel has.
    TreeTooDeep {
        /// Row of the population.
        tree: usize,
        /// Stack slots the tree needs.
        need: usize,
        /// Stack slots the deepest kernel has.
        max: usize,
    },
    /// Bad input: a malformed tree, a data set of the wrong shape, a variable out of range.
    Input(String),
    /// A launch configuration the kernels do not support.
    Config(String),
    /// NCCL is missing, too old, or one of its calls failed (`--gpu-link nccl`): the line to
    /// print.
    Nccl(String),
}

/// Shorthand for results of this backend.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// An NVRTC compile error: the log, and the source lines it points at.
#[derive(Clone, Debug)]
pub struct CompileFailure {
    /// The kernel file (`eval.cu`).
    pub file: String,
    /// The target (`sm_90`).
    pub arch: String,
    /// NVRTC's log, unchanged.
    pub log: String,
    /// Each error's location with the lines around it, numbered as in the `.cu` file.
    pub excerpt: String,
}

impl fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NVRTC could not compile {} for {}", self.file, self.arch)?;
        if !self.excerpt.is_empty() {
            write!(f, "\n{}", self.excerpt.trim_end())?;
        }
        write!(f, "\nNVRTC log:\n{}", self.log.trim_end())
    }
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoGpu(e) => e.fmt(f),
            GpuError::Driver { during, error } => {
                let name = error.error_name().map(|s| s.to_string_lossy().into_owned());
                let text = error.error_string().map(|s| s.to_string_lossy().into_owned());
                match (name, text) {
                    (Ok(n), Ok(t)) => write!(f, "CUDA error while {during}: {n}: {t}"),
                    _ => write!(f, "CUDA error while {during}: {:?}", error.0),
                }
            }
            GpuError::Nvrtc { during, error } => write!(f, "NVRTC error while {during}: {:?}", error.0),
            GpuError::Compile(c) => c.fmt(f),
            GpuError::TreeTooDeep { tree, need, max } => write!(
                f,
                "tree {tree} needs {need} evaluation stack slots; the GPU kernels hold at most {max} \
                 (trees of up to {} nodes always fit)",
                2 * max
            ),
            GpuError::Input(s) => write!(f, "bad input for the GPU: {s}"),
            GpuError::Config(s) => write!(f, "bad GPU launch configuration: {s}"),
            GpuError::Nccl(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for GpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GpuError::NoGpu(e) => Some(e),
            _ => None,
        }
    }
}

impl From<NoGpu> for GpuError {
    fn from(e: NoGpu) -> Self {
        GpuError::NoGpu(e)
    }
}

/// Adds "while ..." context to driver results: `ctx.alloc(..).during("allocating outputs")?`.
pub(crate) trait During<T> {
    /// Wraps the error with what was being done.
    fn during(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> During<T> for std::result::Result<T, DriverError> {
    fn during(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| GpuError::Driver { during: what(), error })
    }
}

impl<T> During<T> for std::result::Result<T, NvrtcError> {
    fn during(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| GpuError::Nvrtc { during: what(), error })
    }
}
