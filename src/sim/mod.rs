//! The embedded physics simulator for control tasks. `envs/*.ron` describes each environment
//! ([`spec`]); [`model`] compiles a description under a profile (`brax` or `gymnasium`);
//! [`dynamics`] is the CPU reference stepper (planar reduced coordinates, MuJoCo's soft
//! constraints, f64 or f32); [`env`] adds reset noise, rewards, termination and batch stepping;
//! [`rollout`] replays action files for `grove rollout`. control-envs.md (shared reference) holds
//! the equations; `tools/sim/validate.py` checks all of it against MuJoCo.

pub mod dynamics;
pub mod env;
pub mod model;
pub mod rollout;
pub mod spec;
pub mod stats;

pub use dynamics::Real;
pub use env::{step_batch, State, StepResult};
pub use model::Model;
pub use spec::EnvSpec;
