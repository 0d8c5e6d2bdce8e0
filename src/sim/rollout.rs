//! `grove rollout`: replay a fixed action sequence (or an evolved policy) in one environment and
//! write the state after every control step. Action files are CSV, one row per control step and
//! one column per actuator; an optional first row of names is skipped.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Result};

use super::dynamics::{r, Real};
use super::env::State;
use super::model::Model;

/// Something that chooses actions from observations, step by step: an evolved policy
/// (`backend::cpu::control::Policy` implements it) or any other controller.
pub trait Actor: std::fmt::Debug + Send {
    /// Writes one action per actuator into `actions` for the observation `obs` (f32); false
    /// when an action is not finite.
    fn act(&mut self, obs: &[f32], actions: &mut [f32]) -> bool;
    /// A fresh copy, so that each roll-out starts from the same actor.
    fn boxed_clone(&self) -> Box<dyn Actor>;
}

impl Clone for Box<dyn Actor> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}

/// Where actions come from.
#[derive(Clone, Debug)]
pub enum ActionSource {
    /// All-zero actions.
    Zero,
    /// (steps, nu) rows read from a file.
    Fixed(Vec<Vec<f64>>),
    /// An actor, such as an evolved policy: actions = what it writes at the current observation
    /// (f32); where it answers false, every action is NaN, which the step treats as 0.
    Policy(Box<dyn Actor>),
}

impl ActionSource {
    /// The action of control step `t` (0-based) at observation `obs` (f32).
    pub fn action(&mut self, t: usize, nu: usize, obs: &[f32]) -> Vec<f64> {
        match self {
            ActionSource::Zero => vec![0.0; nu],
            ActionSource::Fixed(rows) => rows[t].clone(),
            ActionSource::Policy(p) => {
                let mut a = vec![0.0f32; nu];
                if !p.act(obs, &mut a) {
                    a.fill(f32::NAN);
                }
                a.into_iter().map(|x| x as f64).collect()
            }
        }
    }
}

/// Read an action CSV with `nu` columns of finite numbers in f32 range; errors name the line
/// (and the column, in the data reader's words).
pub fn read_actions(text: &str, origin: &str, nu: usize) -> Result<Vec<Vec<f64>>> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let parsed: Result<Vec<f64>, _> = cells.iter().map(|c| c.parse::<f64>()).collect();
        let values = match parsed {
            // As the data reader: finite numbers in f32 range only.
            Ok(_) => cells
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    crate::data::read::parse_number(cell.as_bytes()).map_err(|m| anyhow::anyhow!("{origin}:{}: column {}: {m}", i + 1, c + 1))
                })
                .collect::<Result<Vec<f64>>>()?,
            Err(_) if rows.is_empty() && i == first_content_line(text) => continue, // a header row
            Err(_) => {
                let bad = cells.iter().find(|c| c.parse::<f64>().is_err()).unwrap_or(&"");
                bail!("{origin}:{}: `{bad}` is not a number", i + 1)
            }
        };
        if values.len() != nu {
            bail!("{origin}:{}: {} columns, but the environment has {nu} actuators", i + 1, values.len());
        }
        rows.push(values);
    }
    Ok(rows)
}

fn first_content_line(text: &str) -> usize {
    text.lines().position(|l| !l.trim().is_empty() && !l.trim().starts_with('#')).unwrap_or(0)
}

/// Read an action file.
pub fn read_actions_file(path: &Path, nu: usize) -> Result<Vec<Vec<f64>>> {
    let text = crate::input::read_text(path, "the action file", crate::input::ACTIONS_BYTES)?;
    read_actions(&text, &path.display().to_string(), nu)
}

/// Clips each action of `rows` to its actuator's `ctrl_range`, as the simulator applies it, so
/// that the control cost is that of the action played (an action of 1e30 costs what the
/// range's end costs, not 1e60); returns how many values were outside.
pub fn clip_to_ranges(rows: &mut [Vec<f64>], m: &Model) -> usize {
    let mut clipped = 0;
    for row in rows {
        for (x, a) in row.iter_mut().zip(&m.actuators) {
            let [lo, hi] = a.ctrl_range;
            if *x < lo || *x > hi {
                *x = x.clamp(lo, hi);
                clipped += 1;
            }
        }
    }
    clipped
}

/// What a roll-out did.
#[derive(Clone, Debug)]
pub struct RolloutSummary {
    /// Sum of rewards.
    pub total: f64,
    /// Control steps taken.
    pub steps: usize,
    /// The episode terminated (rather than running out of steps).
    pub terminated: bool,
}

/// Options of one roll-out.
#[derive(Clone, Debug)]
pub struct RolloutOptions {
    /// Control steps to run at most.
    pub steps: usize,
    /// Reset noise seed; none: start at the rest pose.
    pub seed: Option<u64>,
    /// Keep stepping after termination (for trajectory comparisons).
    pub ignore_termination: bool,
}

/// Run one episode in float type `T`, writing `step,<q names>,<v names>,reward,done` rows to
/// `out` (row 0 is the reset state).
pub fn rollout<T: Real>(m: &Model, actions: &ActionSource, opts: &RolloutOptions, mut out: Option<&mut dyn Write>) -> Result<RolloutSummary> {
    let mut actions = actions.clone();
    let mut obs_t: Vec<T> = Vec::with_capacity(m.obs_size);
    let mut s: State<T> = match opts.seed {
        Some(seed) => State::reset(m, seed, 0, 0),
        None => State::rest(m),
    };
    if let Some(w) = out.as_deref_mut() {
        let names: Vec<String> = m.joints.iter().map(|j| format!("q_{}", j.name)).chain(m.joints.iter().map(|j| format!("v_{}", j.name))).collect();
        writeln!(w, "step,{},reward,done", names.join(","))?;
        write_row(w, 0, &s, 0.0, false)?;
    }
    let mut summary = RolloutSummary { total: 0.0, steps: 0, terminated: false };
    for t in 0..opts.steps {
        s.observe(m, &mut obs_t);
        let obs: Vec<f32> = obs_t.iter().map(|&x| to_f64(x) as f32).collect();
        let a: Vec<T> = actions.action(t, m.nu(), &obs).into_iter().map(r).collect();
        let res = s.step(m, &a);
        if opts.ignore_termination {
            s.done = false;
        }
        // The reward's exact value, as training sums it (`policy::play`): the decimal that
        // `to_f64` reads back would differ in the last places.
        summary.total += res.reward.exact_f64();
        summary.steps += 1;
        if let Some(w) = out.as_deref_mut() {
            write_row(w, t + 1, &s, to_f64(res.reward), res.done)?;
        }
        if res.done && !opts.ignore_termination {
            summary.terminated = true;
            break;
        }
    }
    Ok(summary)
}

/// An f32 or f64 as f64 (exactly: both print their shortest round-trip decimal).
fn to_f64<T: Real>(x: T) -> f64 {
    format!("{x}").parse().unwrap_or(f64::NAN)
}

fn write_row<T: Real>(w: &mut dyn Write, step: usize, s: &State<T>, reward: f64, done: bool) -> Result<()> {
    write!(w, "{step}")?;
    for &x in s.q.iter().chain(&s.v) {
        write!(w, ",{x}")?;
    }
    writeln!(w, ",{reward:?},{}", done as u8)?;
    Ok(())
}

/// The compiled model's constants as JSON, for checking against MuJoCo's compiled model.
pub fn model_json(m: &Model) -> serde_json::Value {
    serde_json::json!({
        "name": m.name,
        "profile": m.profile,
        "timestep": m.timestep,
        "frame_skip": m.frame_skip,
        "integrator": format!("{:?}", m.integrator),
        "body_mass": m.bodies.iter().map(|b| b.mass).collect::<Vec<_>>(),
        "body_inertia": m.bodies.iter().map(|b| b.inertia.to_vec()).collect::<Vec<_>>(),
        "body_com": m.bodies.iter().map(|b| b.com.to_vec()).collect::<Vec<_>>(),
        "qpos0": m.joints.iter().map(|j| j.qpos0).collect::<Vec<_>>(),
        "armature": m.joints.iter().map(|j| j.armature).collect::<Vec<_>>(),
        "damping": m.joints.iter().map(|j| j.damping).collect::<Vec<_>>(),
        "joint_range": m.joints.iter().map(|j| j.range.map(|r| r.to_vec())).collect::<Vec<_>>(),
        "dof_invweight0": m.dof_invweight0,
        "body_invweight0": m.body_invweight0,
        "contacts": m.capsules.iter().map(|c| serde_json::json!({
            "name": c.name, "friction": c.friction, "margin": c.margin,
            "solref": c.solref.to_vec(), "solimp": c.solimp.to_vec(),
        })).collect::<Vec<_>>(),
        "gear": m.actuators.iter().map(|a| a.gear).collect::<Vec<_>>(),
    })
}
