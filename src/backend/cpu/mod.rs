//! The CPU backend: the reference every kernel is checked against, one file per kernel it is
//! the twin of. [`interp`] is the one interpreter (`kernels/interp.cuh`: the linear form, run
//! at one point or over blocks of points); [`eval`] evaluates a population for regression
//! fitness and prediction (`kernels/eval.cu`); [`classify`] folds the outputs into
//! classification sums (`kernels/classify.cu`); [`fit`] fits numeric constants by
//! Levenberg–Marquardt (`kernels/fit.cu`); [`control`] plays policies in the simulator (the
//! control kernel of `kernels/sim.cu`) and holds the policy a control report saves; [`breed`]
//! is the CPU side of the breeding contract ([`super::breed::Breeder`]: selection, variation,
//! mapping; `kernels/select.cu`, `vary.cu`, `map.cu`). Each gives the kernel's bits; rayon
//! spreads the work and results never depend on the thread count. [`error`] is the base the
//! interpreter and the evaluations share ([`error::EvalError`]), so the interpreter does not
//! import the evaluation that calls it.

pub mod breed;
pub mod classify;
pub mod control;
pub mod error;
pub mod eval;
pub mod fit;
pub mod interp;
