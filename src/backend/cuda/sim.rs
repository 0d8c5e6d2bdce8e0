//! The GPU twin of the simulator (`kernels/sim.cu`): the generated environment header
//! (`grove_env.h`: sizes, model constants, observation and health checks of one compiled
//! [`Model`]), the `#[repr(C)]` launch parameters, and an open-loop roll-out of many
//! environments in one launch. The CPU reference is `src/sim/`; `tests/cuda_sim.rs` checks one
//! against the other.

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::KernelSource;
use super::CudaEngine;
use crate::sim::dynamics::{fluid_coefficients, Soft, MAX_PIVOTS, PIVOT_TRIES, RK4_B};
use crate::sim::model::{Check, Model, Obs};
use crate::sim::spec::{Integrator, JointKind, NoiseSpec};

/// `kernels/sim.cu`, without its generated header.
pub const SIM_TEXT: &str = include_str!("../../../kernels/sim.cu");
/// The roll-out kernel.
pub const SIM_KERNEL: &str = "grove_sim_rollout";
/// Name of the generated header in compile errors.
pub const ENV_HEADER: &str = "grove_env.h";

/// Launch parameters of `grove_sim_rollout` (`GroveSimParams` in sim.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimParams {
    /// `E`: environments, one thread each.
    pub n_envs: u32,
    /// `T`: control steps at most.
    pub steps: u32,
    /// Philox counter word 0 of the reset draws (the generation).
    pub generation: u32,
    /// 1: reset noise; 0: start at the rest pose.
    pub noise: u32,
    /// Philox key (the run's seed).
    pub seed: u64,
    /// 1: write every state to the trajectory buffer.
    pub record: u32,
    /// Philox counter word 1 of environment e is `first_env + e`.
    pub first_env: u32,
}
const _: () = assert!(size_of::<SimParams>() == 32);
const _: () = assert!(offset_of!(SimParams, n_envs) == 0);
const _: () = assert!(offset_of!(SimParams, steps) == 4);
const _: () = assert!(offset_of!(SimParams, generation) == 8);
const _: () = assert!(offset_of!(SimParams, noise) == 12);
const _: () = assert!(offset_of!(SimParams, seed) == 16);
const _: () = assert!(offset_of!(SimParams, record) == 24);
const _: () = assert!(offset_of!(SimParams, first_env) == 28);
// SAFETY: a plain `#[repr(C)]` struct of u32/u64 fields whose layout equals `GroveSimParams`
// (size and offsets asserted here and by static_assert in sim.cu).
unsafe impl DeviceRepr for SimParams {}

/// `(name, offset)` of every `SimParams` field, for the cross-check with sim.cu's asserts.
pub fn sim_params_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("n_envs", offset_of!(SimParams, n_envs)),
        ("steps", offset_of!(SimParams, steps)),
        ("generation", offset_of!(SimParams, generation)),
        ("noise", offset_of!(SimParams, noise)),
        ("seed", offset_of!(SimParams, seed)),
        ("record", offset_of!(SimParams, record)),
        ("first_env", offset_of!(SimParams, first_env)),
    ]
}

/// An f32 literal of exactly the bits of `x as f32` (what the CPU's `r(x)` gives): the shortest
/// decimal when it names those bits whether the compiler parses it straight to f32 or through
/// f64 (which can round twice), else a hexadecimal float, which is exact. Infinities and NaN are
/// spelled by their bits with `__builtin_bit_cast`, a constant expression: the tables are
/// `__device__ const`, which take no dynamic initialiser (`__int_as_float` was one; NVRTC knows
/// no `__builtin_inff`).
fn lit(x: f64) -> String {
    let f = x as f32;
    let bits = |b: u32| format!("__builtin_bit_cast(float, 0x{b:08x}u)");
    if f.is_nan() {
        return bits(0x7fc0_0000);
    }
    if f.is_infinite() {
        return bits(f.to_bits());
    }
    let dec = format!("{f:e}");
    if dec.parse::<f32>().ok().map(f32::to_bits) == Some(f.to_bits()) && dec.parse::<f64>().ok().map(|d| (d as f32).to_bits()) == Some(f.to_bits()) {
        return format!("{dec}f");
    }
    hex_f32(f)
}

/// A finite f32 as a C hexadecimal floating literal (`-0x1.8p-3f`), exact.
fn hex_f32(f: f32) -> String {
    let b = f.to_bits();
    let sign = if b >> 31 == 1 { "-" } else { "" };
    let (exp, man) = (((b >> 23) & 0xff) as i32, b & 0x7f_ffff);
    match exp {
        0 if man == 0 => format!("{sign}0.0f"),
        0 => format!("{sign}0x0.{:06x}p-126f", man << 1),
        _ => format!("{sign}0x1.{:06x}p{}f", man << 1, exp - 127),
    }
}

fn list<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> String) -> String {
    items.into_iter().map(f).collect::<Vec<_>>().join(", ")
}

/// Columns of a `grove_lim_soft` / `grove_cap_soft` row (`GROVE_SOFT_N` in sim.cu).
pub const SOFT_COLUMNS: usize = 11;

/// One row of the soft tables, in sim.cu's `GROVE_SOFT_*` order, and its `GROVE_IMP_*` mode:
/// the CPU's [`Soft`], whose f64 values both steppers round once.
fn soft_row(s: &Soft) -> ([f64; SOFT_COLUMNS], u8) {
    let mode = if s.fixed.is_some() { 0 } else if s.linear { 1 } else { 2 };
    let row = [s.fixed.unwrap_or(0.0), s.dmin, s.dmax, s.span, s.width, s.mid, s.power, s.lo_scale, s.hi_scale, s.k, s.b];
    (row, mode)
}

/// `grove_env.h` for `m`: everything sim.cu needs to know about the model, as compile-time
/// constants (one module per model and profile). The tables are `__device__ const`, not
/// `__constant__`: NVVM folds a `const` table read at a constant index into the code (a
/// `__constant__` one the host may rewrite, so it is read every time), and sim.cu's loops over
/// bodies, joints, paths and constraints are unrolled so that every such index is constant,
/// which keeps the per-thread arrays they index (kinematics, Jacobians, M) in registers.
pub fn env_header(m: &Model) -> String {
    let nv = m.nv();
    let nb = m.bodies.len();
    let limited: Vec<usize> = (0..nv).filter(|&j| m.joints[j].range.is_some()).collect();
    let mut h = String::new();
    let w = &mut h;
    let _ = writeln!(w, "// grove_env.h: generated by src/backend/cuda/sim.rs from env `{}`, profile `{}`.", m.name, m.profile);
    let defs: Vec<(&str, String)> = vec![
        ("GROVE_NV", nv.to_string()),
        ("GROVE_NB", nb.to_string()),
        ("GROVE_NU", m.nu().to_string()),
        ("GROVE_NLIM", limited.len().to_string()),
        ("GROVE_NCAP", m.capsules.len().to_string()),
        ("GROVE_NOBS", m.obs_size.to_string()),
        ("GROVE_NOBS_ALLOC", m.obs_size.max(1).to_string()),
        ("GROVE_FRAME_SKIP", m.frame_skip.to_string()),
        ("GROVE_RK4", ((m.integrator == Integrator::Rk4) as u8).to_string()),
        ("GROVE_PGS", m.solver_iterations.to_string()),
        ("GROVE_PIVOTS", MAX_PIVOTS.to_string()),
        ("GROVE_PIVOT_TRIES", PIVOT_TRIES.to_string()),
        ("GROVE_H", lit(m.timestep)),
        ("GROVE_RK4_B1", lit(RK4_B[0])),
        ("GROVE_RK4_B2", lit(RK4_B[1])),
        ("GROVE_DAMPED", (m.joints.iter().any(|j| j.damping > 0.0) as u8).to_string()),
        ("GROVE_SOFT_COLUMNS", SOFT_COLUMNS.to_string()),
        ("GROVE_DT", lit(m.dt())),
        ("GROVE_FLUID", (m.fluid.is_some() as u8).to_string()),
        ("GROVE_GU", lit(m.gravity[0])),
        ("GROVE_GW", lit(m.gravity[1])),
        ("GROVE_FLOOR", lit(m.floor.unwrap_or(0.0))),
        ("GROVE_FWD_BODY", m.forward.map_or(-1, |(b, _)| b as i64).to_string()),
        ("GROVE_FWD_W", lit(m.forward.map_or(0.0, |(_, w)| w))),
        ("GROVE_HEALTHY_W", lit(m.healthy_weight)),
        ("GROVE_CTRL_COST", lit(m.ctrl_cost)),
        ("GROVE_TERMINATE", (m.terminate_when_unhealthy as u8).to_string()),
        ("GROVE_BONUS_WHEN_TERMINAL", (m.healthy_reward_when_terminal as u8).to_string()),
    ];
    for (k, v) in defs {
        let _ = writeln!(w, "#define {k} {v}");
    }
    for (name, noise) in [("QNOISE", m.reset[0]), ("VNOISE", m.reset[1])] {
        let (kind, s) = match noise {
            NoiseSpec::Uniform(s) => (0, s),
            NoiseSpec::Normal(s) => (1, s),
        };
        let _ = writeln!(w, "#define GROVE_{name}_KIND {kind}\n#define GROVE_{name} {s:e}");
    }
    let b = &m.bodies;
    let _ = writeln!(w, "__device__ const int grove_parent[{nb}] = {{{}}};", list(b, |b| b.parent.map_or(-1, |p| p as i64).to_string()));
    let _ = writeln!(w, "__device__ const float grove_bpos[{nb}][2] = {{{}}};", list(b, |b| format!("{{{}, {}}}", lit(b.pos[0]), lit(b.pos[1]))));
    let _ = writeln!(w, "__device__ const float grove_bang[{nb}] = {{{}}};", list(b, |b| lit(b.angle)));
    let _ = writeln!(w, "__device__ const float grove_mass[{nb}] = {{{}}};", list(b, |b| lit(b.mass)));
    let _ = writeln!(w, "__device__ const float grove_com[{nb}][2] = {{{}}};", list(b, |b| format!("{{{}, {}}}", lit(b.com[0]), lit(b.com[1]))));
    let _ = writeln!(w, "__device__ const float grove_inertia_n[{nb}] = {{{}}};", list(b, |b| lit(b.inertia[2])));
    let _ = writeln!(w, "__device__ const float grove_iang[{nb}] = {{{}}};", list(b, |b| lit(b.inertia_angle)));
    let _ = writeln!(w, "__device__ const int grove_pathlen[{nb}] = {{{}}};", list(b, |b| b.path.len().to_string()));
    let _ = writeln!(
        w,
        "__device__ const int grove_path[{nb}][{nv}] = {{{}}};",
        list(b, |b| format!("{{{}}}", list((0..nv).map(|i| b.path.get(i).copied().unwrap_or(0)), |j| j.to_string())))
    );
    if let Some([rho, mu]) = m.fluid {
        // c1 = 3πdμ, c2 = πd³μ, cL, cT, cR of the inertia box, combined in f64 by the CPU's code.
        let coeffs = |body: &crate::sim::model::Body| fluid_coefficients(body, rho, mu);
        let _ = writeln!(w, "__device__ const float grove_fluid[{nb}][5] = {{{}}};", list(b, |b| format!("{{{}}}", list(coeffs(b), lit))));
    }
    let j = &m.joints;
    let _ = writeln!(w, "__device__ const int grove_jbody[{nv}] = {{{}}};", list(j, |j| j.body.to_string()));
    let _ = writeln!(w, "__device__ const int grove_jslide[{nv}] = {{{}}};", list(j, |j| (matches!(j.kind, JointKind::Slide { .. }) as u8).to_string()));
    let axis = |j: &crate::sim::model::Joint| match j.kind {
        JointKind::Slide { axis } => format!("{{{}, {}}}", lit(axis.0), lit(axis.1)),
        JointKind::Hinge { sign } => format!("{{{}, 0.0f}}", lit(sign)),
    };
    let _ = writeln!(w, "__device__ const float grove_jaxis[{nv}][2] = {{{}}};", list(j, axis));
    let _ = writeln!(w, "__device__ const float grove_jpos[{nv}][2] = {{{}}};", list(j, |j| format!("{{{}, {}}}", lit(j.pos[0]), lit(j.pos[1]))));
    let _ = writeln!(w, "__device__ const float grove_qpos0[{nv}] = {{{}}};", list(j, |j| lit(j.qpos0)));
    let _ = writeln!(w, "__device__ const float grove_armature[{nv}] = {{{}}};", list(j, |j| lit(j.armature)));
    let _ = writeln!(w, "__device__ const float grove_damping[{nv}] = {{{}}};", list(j, |j| lit(j.damping)));
    let _ = writeln!(w, "__device__ const float grove_stiffness[{nv}] = {{{}}};", list(j, |j| lit(j.stiffness)));
    let _ = writeln!(w, "__device__ const float grove_springref[{nv}] = {{{}}};", list(j, |j| lit(j.spring_ref)));
    // h·damping, the implicit Euler's diagonal term, multiplied in f64 as the CPU does.
    let _ = writeln!(w, "__device__ const float grove_hdamp[{nv}] = {{{}}};", list(j, |j| lit(m.timestep * j.damping)));
    if !limited.is_empty() {
        let n = limited.len();
        let soft_of = |&i: &usize| soft_row(&Soft::new(m.joints[i].solref, m.joints[i].solimp, m.timestep));
        let _ = writeln!(w, "__device__ const int grove_lim_joint[{n}] = {{{}}};", list(&limited, |i| i.to_string()));
        let rng = |&i: &usize| {
            let [lo, hi] = m.joints[i].range.unwrap_or([0.0, 0.0]);
            format!("{{{}, {}}}", lit(lo), lit(hi))
        };
        let _ = writeln!(w, "__device__ const float grove_lim_range[{n}][2] = {{{}}};", list(&limited, rng));
        let _ = writeln!(w, "__device__ const float grove_lim_soft[{n}][{SOFT_COLUMNS}] = {{{}}};", list(&limited, |i| format!("{{{}}}", list(soft_of(i).0, lit))));
        let _ = writeln!(w, "__device__ const int grove_lim_imode[{n}] = {{{}}};", list(&limited, |i| soft_of(i).1.to_string()));
        let _ = writeln!(w, "__device__ const float grove_lim_invweight[{n}] = {{{}}};", list(&limited, |&i| lit(m.dof_invweight0[i])));
    }
    if !m.capsules.is_empty() {
        let c = &m.capsules;
        let n = c.len();
        let _ = writeln!(w, "__device__ const int grove_cap_body[{n}] = {{{}}};", list(c, |c| c.body.to_string()));
        let ends = |c: &crate::sim::model::Capsule| {
            format!("{{{{{}, {}}}, {{{}, {}}}}}", lit(c.ends[0][0]), lit(c.ends[0][1]), lit(c.ends[1][0]), lit(c.ends[1][1]))
        };
        let _ = writeln!(w, "__device__ const float grove_cap_ends[{n}][2][2] = {{{}}};", list(c, ends));
        let _ = writeln!(w, "__device__ const float grove_cap_radius[{n}] = {{{}}};", list(c, |c| lit(c.radius)));
        let _ = writeln!(w, "__device__ const float grove_cap_margin[{n}] = {{{}}};", list(c, |c| lit(c.margin)));
        let _ = writeln!(w, "__device__ const float grove_cap_mu[{n}] = {{{}}};", list(c, |c| lit(c.friction)));
        let soft_of = |c: &crate::sim::model::Capsule| soft_row(&Soft::new(c.solref, c.solimp, m.timestep));
        let _ = writeln!(w, "__device__ const float grove_cap_soft[{n}][{SOFT_COLUMNS}] = {{{}}};", list(c, |c| format!("{{{}}}", list(soft_of(c).0, lit))));
        let _ = writeln!(w, "__device__ const int grove_cap_imode[{n}] = {{{}}};", list(c, |c| soft_of(c).1.to_string()));
        let _ = writeln!(w, "__device__ const float grove_cap_tran[{n}] = {{{}}};", list(c, |c| lit(m.body_invweight0[c.body])));
    }
    let a = &m.actuators;
    let nu = a.len();
    let _ = writeln!(w, "__device__ const int grove_act_dof[{nu}] = {{{}}};", list(a, |a| a.dof.to_string()));
    let _ = writeln!(w, "__device__ const float grove_gear[{nu}] = {{{}}};", list(a, |a| lit(a.gear)));
    let _ = writeln!(w, "__device__ const float grove_ctrl[{nu}][2] = {{{}}};", list(a, |a| format!("{{{}, {}}}", lit(a.ctrl_range[0]), lit(a.ctrl_range[1]))));
    // Observation (env.rs State::observe); pw: body frame heights.
    let _ = writeln!(w, "__device__ inline void grove_observe(const float* q, const float* v, const float* pw, float* o) {{");
    let mut i = 0;
    for o in &m.observation {
        match *o {
            Obs::Qpos(a, b) => (a..b).for_each(|k| {
                let _ = writeln!(w, "    o[{i}] = q[{k}];");
                i += 1;
            }),
            Obs::Qvel(a, b, clip) => (a..b).for_each(|k| {
                let _ = match clip {
                    Some(c) => writeln!(w, "    o[{i}] = fminf(fmaxf(v[{k}], {}), {});", lit(-c), lit(c)),
                    None => writeln!(w, "    o[{i}] = v[{k}];"),
                };
                i += 1;
            }),
            Obs::Height(b) => {
                let _ = writeln!(w, "    o[{i}] = pw[{b}];");
                i += 1;
            }
        }
    }
    let _ = writeln!(w, "    (void)q; (void)v; (void)pw; (void)o;\n}}");
    // Health (env.rs State::healthy): strict bounds.
    let _ = writeln!(w, "__device__ inline bool grove_healthy(const float* q, const float* v, const float* pw) {{\n    bool ok = true;");
    let bound = |x: String, lo: Option<f64>, hi: Option<f64>| {
        let mut s = String::new();
        if let Some(l) = lo {
            s += &format!("    ok = ok && {x} > {};\n", lit(l));
        }
        if let Some(h) = hi {
            s += &format!("    ok = ok && {x} < {};\n", lit(h));
        }
        s
    };
    for c in &m.checks {
        match *c {
            Check::Height(b, lo, hi) => w.push_str(&bound(format!("pw[{b}]"), lo, hi)),
            Check::Qpos(k, lo, hi) => w.push_str(&bound(format!("q[{k}]"), lo, hi)),
            Check::State(from, lo, hi) => {
                let _ = writeln!(w, "    for (int i = {from}; i < {nv}; ++i) ok = ok && q[i] > {} && q[i] < {};", lit(lo), lit(hi));
                let _ = writeln!(w, "    for (int i = 0; i < {nv}; ++i) ok = ok && v[i] > {} && v[i] < {};", lit(lo), lit(hi));
            }
        }
    }
    let _ = writeln!(w, "    (void)q; (void)v; (void)pw;\n    return ok;\n}}");
    h
}

/// sim.cu with `m`'s header in front, after an `#include "rng.cuh"` line (the reset draws'
/// Philox) that [`KernelSource::full_source`] replaces by the header; `#line` directives keep
/// NVRTC's line numbers per part. Compile `KernelSource { file: "sim.cu", text }.full_source()`.
pub fn sim_text(m: &Model) -> String {
    format!("#include \"rng.cuh\"\n#line 1 \"{ENV_HEADER}\"\n{}#line 1 \"sim.cu\"\n{SIM_TEXT}", env_header(m))
}

/// The full source NVRTC compiles for `m` (operator header, rng.cuh, grove_env.h, sim.cu); the
/// host emulation compiles the same text with g++.
pub fn sim_full_source(m: &Model) -> String {
    KernelSource { file: "sim.cu", text: &sim_text(m) }.full_source()
}

/// What a GPU roll-out returns, per environment.
#[derive(Clone, Debug, Default)]
pub struct SimRollout {
    /// Sum of rewards (accumulated in f64): (E,).
    pub returns: Vec<f64>,
    /// Control steps taken: (E,).
    pub lengths: Vec<u32>,
    /// Final qpos: (E, nv).
    pub q: Vec<f32>,
    /// Final qvel: (E, nv).
    pub v: Vec<f32>,
    /// With `record`: (T + 1, E, 2·nv) states, row 0 the reset state; rows after termination
    /// repeat the terminal state. Empty otherwise.
    pub trajectory: Vec<f32>,
}

/// Options of [`CudaEngine::sim_rollout`].
#[derive(Clone, Copy, Debug)]
pub struct SimRun {
    /// Environments.
    pub n_envs: usize,
    /// Control steps at most.
    pub steps: usize,
    /// Reset seed and generation; `None`: the rest pose.
    pub noise: Option<(u64, u32)>,
    /// Record the whole trajectory.
    pub record: bool,
    /// Threads per block.
    pub block: u32,
}

impl CudaEngine {
    /// Steps `run.n_envs` environments of `m` for `run.steps` control steps in one launch, each
    /// with its own open-loop actions: `actions` is (T, E, nu) f32. Environment e draws its reset
    /// noise from `Stream::new(seed, generation, e, Reset)`, as `State::reset` does.
    pub fn sim_rollout(&self, m: &Model, actions: &[f32], run: &SimRun) -> Result<SimRollout> {
        let (e, t, nu, nv) = (run.n_envs, run.steps, m.nu(), m.nv());
        if actions.len() != t * e * nu {
            return Err(GpuError::Input(format!("actions hold {} values, not steps × envs × nu = {}", actions.len(), t * e * nu)));
        }
        if e == 0 || e > u32::MAX as usize || t > u32::MAX as usize {
            return Err(GpuError::Input(format!("{e} environments × {t} steps is out of range")));
        }
        let text = sim_text(m);
        let src = KernelSource { file: "sim.cu", text: &text };
        // Not `self.function`: it caches by kernel name, and every model has its own module.
        let (module, _) = self.load(&src, &[])?;
        let f = module.load_function(SIM_KERNEL).during(|| format!("finding {SIM_KERNEL} in sim.cu"))?;
        let s = &self.stream;
        let d_actions = s.clone_htod(if actions.is_empty() { &[0.0f32][..] } else { actions }).during(|| "uploading actions".into())?;
        let mut d_returns = s.alloc_zeros::<f64>(e).during(|| "allocating returns".into())?;
        let mut d_lengths = s.alloc_zeros::<u32>(e).during(|| "allocating lengths".into())?;
        let mut d_q = s.alloc_zeros::<f32>(e * nv).during(|| "allocating states".into())?;
        let mut d_v = s.alloc_zeros::<f32>(e * nv).during(|| "allocating states".into())?;
        let traj_len = if run.record { (t + 1) * e * 2 * nv } else { 1 };
        let mut d_traj = s.alloc_zeros::<f32>(traj_len).during(|| "allocating the trajectory".into())?;
        let (seed, generation) = run.noise.unwrap_or((0, 0));
        let params = SimParams {
            n_envs: e as u32,
            steps: t as u32,
            generation,
            noise: run.noise.is_some() as u32,
            seed,
            record: run.record as u32,
            first_env: 0,
        };
        let block = run.block.clamp(32, 1024);
        let lc = LaunchConfig { grid_dim: ((e as u32).div_ceil(block), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
        let mut b = s.launch_builder(&f);
        b.arg(&params).arg(&d_actions).arg(&mut d_returns).arg(&mut d_lengths).arg(&mut d_q).arg(&mut d_v).arg(&mut d_traj);
        // SAFETY: matches `grove_sim_rollout(GroveSimParams, const float* actions, double*
        // returns, unsigned* lengths, float* q_out, float* v_out, float* traj)` with `SimParams`
        // laid out as `GroveSimParams`. actions holds T × E × nu values (checked above), so
        // thread e < E reads rows t < T; returns and lengths hold E entries, q_out and v_out
        // E × nv, and traj (T + 1) × E × 2·nv when record is 1 (it is not touched otherwise).
        unsafe { b.launch(lc) }.during(|| format!("launching {SIM_KERNEL}"))?;
        s.synchronize().during(|| format!("running {SIM_KERNEL}"))?;
        Ok(SimRollout {
            returns: s.clone_dtoh(&d_returns).during(|| "reading returns".into())?,
            lengths: s.clone_dtoh(&d_lengths).during(|| "reading lengths".into())?,
            q: s.clone_dtoh(&d_q).during(|| "reading states".into())?,
            v: s.clone_dtoh(&d_v).during(|| "reading states".into())?,
            trajectory: if run.record { s.clone_dtoh(&d_traj).during(|| "reading the trajectory".into())? } else { Vec::new() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a C compiler gives a hexadecimal literal of [`hex_f32`], computed exactly.
    fn read_hex(s: &str) -> f32 {
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        if s == "0.0f" {
            return if neg { -0.0 } else { 0.0 };
        }
        let (lead, rest) = s.strip_prefix("0x").unwrap().split_once('.').unwrap();
        let (frac, exp) = rest.trim_end_matches('f').split_once('p').unwrap();
        let m = lead.parse::<f64>().unwrap() + u32::from_str_radix(frac, 16).unwrap() as f64 / 16f64.powi(frac.len() as i32);
        let v = (m * 2f64.powi(exp.parse().unwrap())) as f32;
        if neg { -v } else { v }
    }

    // GROVE_KERNEL_DIR's sim.cu replaced the whole text, model header included, so an
    // overridden sim.cu did not compile (no GROVE_NV): the header must stay.
    #[test]
    fn an_overridden_sim_cu_keeps_the_model_header() {
        let m = Model::load("hopper", None).unwrap();
        let text = sim_text(&m);
        let got = super::super::kernels::with_override(&text, "sim.cu", Some("// staged sim.cu\n".into()));
        let header = &text[..text.find("#line 1 \"sim.cu\"\n").unwrap()];
        assert!(got.starts_with(header) && got.ends_with("#line 1 \"sim.cu\"\n// staged sim.cu\n"), "{}", &got[got.len() - 200..]);
        assert!(header.contains("#define GROVE_NV 6"));
        // A plain kernel file is replaced whole; without an override nothing changes.
        assert_eq!(super::super::kernels::with_override("a", "eval.cu", Some("b".into())), "b");
        assert_eq!(super::super::kernels::with_override(&text, "sim.cu", None), text);
    }

    #[test]
    fn literals_name_the_exact_f32() {
        let mut rng = crate::rng::Stream::new(1, 0, 0, crate::rng::Purpose::Bench);
        let mut xs: Vec<f64> = vec![0.0, -0.0, 1.0, 0.1, -2.5e-3, 1e-40, -3e-45, f32::MAX as f64, 1.0 / 6.0, 1.0 / 3.0];
        xs.extend((0..2000).map(|_| f64::from_bits(rng.next_u32() as u64 | (rng.next_u32() as u64) << 32)).filter(|x| (*x as f32).is_finite()));
        for x in xs {
            let f = x as f32;
            let l = lit(x);
            let back = if l.starts_with("0x") || l.starts_with("-0x") || l.ends_with("0.0f") && l.len() <= 5 { read_hex(&l) } else { l.trim_end_matches('f').parse::<f32>().unwrap() };
            assert_eq!(back.to_bits(), f.to_bits(), "{x:e} as {l}");
            let h = hex_f32(f);
            assert_eq!(read_hex(&h).to_bits(), f.to_bits(), "{x:e} as {h}");
        }
        assert_eq!(lit(f64::INFINITY), "__builtin_bit_cast(float, 0x7f800000u)");
        assert_eq!(lit(f64::NEG_INFINITY), "__builtin_bit_cast(float, 0xff800000u)");
    }
}
