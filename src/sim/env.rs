//! Control steps on top of the stepper: reset with counter-based noise, `frame_skip` substeps
//! with the action held, then observation, reward and termination exactly as control-envs.md §1
//! specifies; and a batch API that steps many environments in parallel (rayon, index order).

use rayon::prelude::*;

use super::dynamics::{kinematics, r, substep, Real};
use super::model::{Check, Model, Obs};
use super::spec::NoiseSpec;
use crate::program::fastmath;
use crate::rng::{Purpose, Stream};

/// The state of one environment.
#[derive(Clone, Debug, PartialEq)]
pub struct State<T> {
    /// qpos, MuJoCo's order: (nv,).
    pub q: Vec<T>,
    /// qvel: (nv,).
    pub v: Vec<T>,
    /// Constraint forces of the last solve, by slot (warm start): (model.n_slots(),).
    pub warm: Vec<T>,
    /// Control steps taken.
    pub steps: usize,
    /// The episode has ended (unhealthy with termination on, or a non-finite state).
    pub done: bool,
}

/// What one control step produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult<T> {
    /// Reward of this step.
    pub reward: T,
    /// The episode ended at this step.
    pub done: bool,
}

impl<T: Real> State<T> {
    /// The rest pose: q = qpos0, v = 0.
    pub fn rest(m: &Model) -> Self {
        Self {
            q: m.joints.iter().map(|j| r(j.qpos0)).collect(),
            v: vec![T::zero(); m.nv()],
            warm: vec![T::zero(); m.n_slots()],
            steps: 0,
            done: false,
        }
    }

    /// The reset state of environment `env` of episode batch `generation` under `seed`: qpos0
    /// plus noise, qvel noise. Draws come from `Stream::new(seed, generation, env, Reset)`, in
    /// f64, nv for qpos then nv for qvel (a normal draw uses two uniforms, Box–Muller with
    /// grove's own f64 `ln` and `cos`, `fastmath::ln64` and `cos_turns64`, so the GPU's resets
    /// are these bits).
    pub fn reset(m: &Model, seed: u64, generation: u32, env: u32) -> Self {
        let mut s = Self::rest(m);
        let mut rng = Stream::new(seed, generation, env, Purpose::Reset);
        let mut draw = |noise: NoiseSpec| -> f64 {
            match noise {
                NoiseSpec::Uniform(a) => a * (2.0 * rng.unit_f64() - 1.0),
                NoiseSpec::Normal(sd) => {
                    let u1 = 1.0 - rng.unit_f64();
                    let u2 = rng.unit_f64();
                    sd * (-2.0 * fastmath::ln64(u1)).sqrt() * fastmath::cos_turns64(u2)
                }
            }
        };
        let qn: Vec<f64> = (0..m.nv()).map(|_| draw(m.reset[0])).collect();
        let vn: Vec<f64> = (0..m.nv()).map(|_| draw(m.reset[1])).collect();
        for i in 0..m.nv() {
            s.q[i] += r(qn[i]);
            s.v[i] = r(vn[i]);
        }
        s
    }

    /// World position (u, w) of body `b`'s frame origin.
    pub fn body_pos(&self, m: &Model, b: usize) -> [T; 2] {
        kinematics(m, &self.q).pos[b]
    }

    /// The observation vector (model.obs_size).
    pub fn observe(&self, m: &Model, out: &mut Vec<T>) {
        out.clear();
        for o in &m.observation {
            match *o {
                Obs::Qpos(a, b) => out.extend_from_slice(&self.q[a..b]),
                Obs::Qvel(a, b, clip) => out.extend(self.v[a..b].iter().map(|&x| match clip {
                    Some(c) => x.clamp(r(-c), r(c)),
                    None => x,
                })),
                Obs::Height(b) => out.push(self.body_pos(m, b)[1]),
            }
        }
    }

    /// Whether every health check holds (strict bounds).
    pub fn healthy(&self, m: &Model) -> bool {
        let inside = |x: T, lo: Option<f64>, hi: Option<f64>| lo.is_none_or(|l| x > r(l)) && hi.is_none_or(|h| x < r(h));
        m.checks.iter().all(|c| match *c {
            Check::Height(b, lo, hi) => inside(self.body_pos(m, b)[1], lo, hi),
            Check::Qpos(i, lo, hi) => inside(self.q[i], lo, hi),
            Check::State(from, lo, hi) => self.q[from..].iter().chain(&self.v).all(|&x| inside(x, Some(lo), Some(hi))),
        })
    }

    /// One control step: ctrl = action (NaN components become 0), `frame_skip` substeps,
    /// then reward = forward + healthy − ctrl cost (control-envs.md §1.1). A state that is not
    /// finite ends the episode.
    pub fn step(&mut self, m: &Model, action: &[T]) -> StepResult<T> {
        assert_eq!(action.len(), m.nu(), "action length");
        let ctrl: Vec<T> = action.iter().map(|&a| if a.partial_cmp(&a).is_none() { T::zero() } else { a }).collect();
        let before = m.forward.map(|(b, _)| self.body_pos(m, b)[0]);
        for _ in 0..m.frame_skip {
            substep(m, &mut self.q, &mut self.v, &ctrl, &mut self.warm);
        }
        self.steps += 1;
        let mut reward = T::zero();
        if let (Some((b, w)), Some(x0)) = (m.forward, before) {
            reward += r::<T>(w) * (self.body_pos(m, b)[0] - x0) / r(m.dt());
        }
        let finite = self.q.iter().chain(&self.v).all(|x| x.is_finite());
        let healthy = finite && self.healthy(m);
        if healthy || (m.healthy_reward_when_terminal && m.terminate_when_unhealthy) {
            reward += r(m.healthy_weight);
        }
        let cost: T = ctrl.iter().fold(T::zero(), |s, &a| s + a * a);
        reward -= r::<T>(m.ctrl_cost) * cost;
        self.done = !finite || (m.terminate_when_unhealthy && !healthy);
        StepResult { reward, done: self.done }
    }
}

/// Step every environment of a batch once, in parallel: `actions` is (n_envs, nu) row-major;
/// environments already done are left as they are and report reward 0, done.
pub fn step_batch<T: Real>(m: &Model, states: &mut [State<T>], actions: &[T], out: &mut [StepResult<T>]) {
    let nu = m.nu();
    assert_eq!(actions.len(), states.len() * nu, "actions must be (n_envs, nu)");
    assert_eq!(out.len(), states.len(), "one result per environment");
    states.par_iter_mut().zip(actions.par_chunks(nu)).zip(out.par_iter_mut()).for_each(|((s, a), o)| {
        *o = if s.done { StepResult { reward: T::zero(), done: true } } else { s.step(m, a) };
    });
}
