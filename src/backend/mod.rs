//! Where populations are evaluated. `cuda` is the GPU backend (cudarc: context, module cache,
//! kernel launches); it is always compiled, and at run time it probes for the driver and NVRTC
//! before touching cudarc, so a machine without a GPU gets a [`cuda::NoGpu`] error, never a panic.
//!
//! The backend trait that the CPU and CUDA backends will both implement (DESIGN.md, contract 3)
//! arrives when the CPU evaluator lands; until then the CUDA engine is used directly.

pub mod cuda;
