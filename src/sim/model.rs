//! A compiled environment: the `.ron` description with a profile applied, names resolved to
//! indices, invariants checked, and MuJoCo's `invweight0` computed at qpos0. All constants are
//! f64; the stepper converts them to its float type. nq = nv = joints.len() (every joint has one
//! degree of freedom) and qpos, qvel use MuJoCo's joint order.

use anyhow::{bail, ensure, Result};

use super::spec::{CheckSpec, EnvSpec, Integrator, JointKind, NoiseSpec, ObsSpec, Plane, RewardSpec};

/// A rigid body, parents before children.
#[derive(Clone, Debug)]
pub struct Body {
    /// Name.
    pub name: String,
    /// Parent body index; none for a child of the world.
    pub parent: Option<usize>,
    /// Frame origin (u, w) in the parent's frame, metres.
    pub pos: [f64; 2],
    /// Frame angle relative to the parent, radians.
    pub angle: f64,
    /// Mass, kg.
    pub mass: f64,
    /// COM (u, w) in the body frame, metres.
    pub com: [f64; 2],
    /// Principal inertias (I_l, I_t, I_n) about the COM, kg·m².
    pub inertia: [f64; 3],
    /// Angle of the principal axis e_l in the body frame, radians.
    pub inertia_angle: f64,
    /// Joints from the root to this body inclusive, in application order (the kinematic path):
    /// increasing joint indices, since a body's joints are numbered after its parent's.
    pub path: Vec<usize>,
}

/// One single-DOF joint; its index is its qpos and qvel index.
#[derive(Clone, Debug)]
pub struct Joint {
    /// Name.
    pub name: String,
    /// Body it moves.
    pub body: usize,
    /// Slide axis (body frame) or hinge sign.
    pub kind: JointKind,
    /// Hinge anchor (u, w) in the body frame, metres.
    pub pos: [f64; 2],
    /// qpos0.
    pub qpos0: f64,
    /// Limits.
    pub range: Option<[f64; 2]>,
    /// Armature.
    pub armature: f64,
    /// Damping.
    pub damping: f64,
    /// Stiffness.
    pub stiffness: f64,
    /// Spring rest position.
    pub spring_ref: f64,
    /// Limit solref.
    pub solref: [f64; 2],
    /// Limit solimp.
    pub solimp: [f64; 5],
}

/// A capsule that collides with the floor (only colliding capsules are kept).
#[derive(Clone, Debug)]
pub struct Capsule {
    /// Name.
    pub name: String,
    /// Body.
    pub body: usize,
    /// End-sphere centres in the body frame, metres.
    pub ends: [[f64; 2]; 2],
    /// Radius, metres.
    pub radius: f64,
    /// Friction μ.
    pub friction: f64,
    /// includemargin, metres.
    pub margin: f64,
    /// Contact solref.
    pub solref: [f64; 2],
    /// Contact solimp.
    pub solimp: [f64; 5],
}

/// A motor on one joint.
#[derive(Clone, Debug)]
pub struct Actuator {
    /// Joint (= DOF) index.
    pub dof: usize,
    /// Gear.
    pub gear: f64,
    /// Control range.
    pub ctrl_range: [f64; 2],
}

/// An observation block with indices resolved.
#[derive(Clone, Debug)]
pub enum Obs {
    /// qpos[from..to].
    Qpos(usize, usize),
    /// qvel[from..to], clipped to ±clip.
    Qvel(usize, usize, Option<f64>),
    /// World height of a body's frame origin.
    Height(usize),
}

/// A health check with indices resolved; bounds are strict, `None` is open.
#[derive(Clone, Debug)]
pub enum Check {
    /// Body frame origin height.
    Height(usize, Option<f64>, Option<f64>),
    /// One qpos.
    Qpos(usize, Option<f64>, Option<f64>),
    /// qpos[from..] and all of qvel.
    State(usize, f64, f64),
}

/// The compiled model.
#[derive(Clone, Debug)]
pub struct Model {
    /// Environment name.
    pub name: String,
    /// Profile applied.
    pub profile: String,
    /// World plane.
    pub plane: Plane,
    /// Physics substep h, seconds.
    pub timestep: f64,
    /// Substeps per control step.
    pub frame_skip: usize,
    /// Integrator.
    pub integrator: Integrator,
    /// Sweeps of the projected Gauss–Seidel fallback per constraint solve (used only when
    /// pivoting does not settle: `dynamics::pivot_solve`).
    pub solver_iterations: usize,
    /// Gravity (u, w), m/s².
    pub gravity: [f64; 2],
    /// Fluid (density kg/m³, viscosity Pa·s).
    pub fluid: Option<[f64; 2]>,
    /// Floor height, metres.
    pub floor: Option<f64>,
    /// Bodies.
    pub bodies: Vec<Body>,
    /// Joints = DOFs.
    pub joints: Vec<Joint>,
    /// Colliding capsules.
    pub capsules: Vec<Capsule>,
    /// Motors (one per action component).
    pub actuators: Vec<Actuator>,
    /// Observation blocks.
    pub observation: Vec<Obs>,
    /// Observation length.
    pub obs_size: usize,
    /// Forward-reward body and weight.
    pub forward: Option<(usize, f64)>,
    /// Healthy reward weight.
    pub healthy_weight: f64,
    /// Control cost weight.
    pub ctrl_cost: f64,
    /// Health checks.
    pub checks: Vec<Check>,
    /// End at the first unhealthy step.
    pub terminate_when_unhealthy: bool,
    /// Pay the healthy reward on the terminal step.
    pub healthy_reward_when_terminal: bool,
    /// Control steps per episode.
    pub episode_steps: usize,
    /// Reset noise on qpos and qvel.
    pub reset: [NoiseSpec; 2],
    /// diag(M⁻¹) at qpos0, per DOF (MuJoCo's `dof_invweight0`).
    pub dof_invweight0: Vec<f64>,
    /// Translational `body_invweight0`: trace of J_com M⁻¹ J_comᵀ over 3 rows, divided by 3.
    pub body_invweight0: Vec<f64>,
}

/// The most bodies an environment may have (each adds a row and a column to the mass matrix
/// every substep solves, and the GPU's simulator holds them per thread).
pub const MAX_BODIES: usize = 32;
/// The most joints (degrees of freedom) an environment may have.
pub const MAX_JOINTS: usize = 32;
/// The most capsules an environment may have.
pub const MAX_CAPSULES: usize = 64;
/// The longest physics substep, seconds: explicit integration of a robot's joints is unstable
/// long before (MuJoCo's models use 0.001 to 0.01).
pub const MAX_TIMESTEP: f64 = 0.1;
/// The most substeps per control step.
pub const MAX_FRAME_SKIP: usize = 1000;
/// The longest control step (timestep · frame_skip), seconds.
pub const MAX_CONTROL_STEP: f64 = 1.0;
/// The most constraint-solver sweeps per solve.
pub const MAX_SOLVER_ITERATIONS: usize = 10_000;
/// The most control steps of an episode.
pub const MAX_EPISODE_STEPS: usize = 1_000_000;
/// The largest magnitude of a physical quantity an environment file may give (masses, lengths,
/// gears, stiffnesses, weights): far past any robot's, short of overflowing products of them.
pub const MAX_QUANTITY: f64 = 1e9;

/// Checks every number of `s` against what it means, before anything is computed from it:
/// finite and within [`MAX_QUANTITY`]; a timestep in (0, [`MAX_TIMESTEP`]], frame_skip 1 to
/// [`MAX_FRAME_SKIP`] with a control step of at most [`MAX_CONTROL_STEP`]; masses, inertias
/// and radii positive; damping, armature, stiffness, friction, margins, fluid density and
/// viscosity, reset noise and clip bounds not negative; at most [`MAX_BODIES`] bodies,
/// [`MAX_JOINTS`] joints and [`MAX_CAPSULES`] capsules. One error line naming the field.
pub fn check_bounds(s: &EnvSpec) -> Result<()> {
    let env = &s.name;
    // A number as a message shows it: 1e300, not three hundred digits.
    let show = |v: f64| if v != 0.0 && v.is_finite() && !(1e-4..1e6).contains(&v.abs()) { format!("{v:e}") } else { format!("{v}") };
    let finite = |what: &str, v: f64| -> Result<()> {
        ensure!(v.is_finite() && v.abs() <= MAX_QUANTITY, "{env}: {what} is {}: give a finite number of magnitude at most {MAX_QUANTITY:e}", show(v));
        Ok(())
    };
    let at_least = |what: &str, v: f64, lo: f64, strict: bool| -> Result<()> {
        finite(what, v)?;
        let ok = if strict { v > lo } else { v >= lo };
        ensure!(ok, "{env}: {what} is {}: it must be {} {lo}", show(v), if strict { "more than" } else { "at least" });
        Ok(())
    };
    at_least("timestep", s.timestep, 0.0, true)?;
    ensure!(s.timestep <= MAX_TIMESTEP, "{env}: timestep is {} s: at most {MAX_TIMESTEP} s (a longer substep is unstable)", s.timestep);
    ensure!(
        (1..=MAX_FRAME_SKIP).contains(&s.frame_skip),
        "{env}: frame_skip is {}: 1 to {MAX_FRAME_SKIP} substeps per control step",
        s.frame_skip
    );
    let dt = s.timestep * s.frame_skip as f64;
    ensure!(dt <= MAX_CONTROL_STEP, "{env}: the control step timestep × frame_skip is {dt} s: at most {MAX_CONTROL_STEP} s");
    ensure!(
        (1..=MAX_SOLVER_ITERATIONS).contains(&s.solver_iterations),
        "{env}: solver_iterations is {}: 1 to {MAX_SOLVER_ITERATIONS}",
        s.solver_iterations
    );
    ensure!((1..=MAX_EPISODE_STEPS).contains(&s.episode_steps), "{env}: episode_steps is {}: 1 to {MAX_EPISODE_STEPS}", s.episode_steps);
    ensure!(s.bodies.len() <= MAX_BODIES, "{env}: {} bodies: at most {MAX_BODIES}", s.bodies.len());
    let n_joints: usize = s.bodies.iter().map(|b| b.joints.len()).sum();
    ensure!(n_joints <= MAX_JOINTS, "{env}: {n_joints} joints: at most {MAX_JOINTS}");
    let n_capsules: usize = s.bodies.iter().map(|b| b.capsules.len()).sum();
    ensure!(n_capsules <= MAX_CAPSULES, "{env}: {n_capsules} capsules: at most {MAX_CAPSULES}");
    ensure!(s.actuators.len() <= MAX_JOINTS, "{env}: {} actuators: at most {MAX_JOINTS}", s.actuators.len());
    finite("gravity", s.gravity.0)?;
    finite("gravity", s.gravity.1)?;
    if let Some(f) = s.fluid {
        at_least("fluid density", f.density, 0.0, false)?;
        at_least("fluid viscosity", f.viscosity, 0.0, false)?;
    }
    if let Some(f) = s.floor {
        finite("floor", f)?;
    }
    for b in &s.bodies {
        let n = &b.name;
        for (what, v) in [("pos", b.pos.0), ("pos", b.pos.1), ("angle", b.angle), ("com", b.com.0), ("com", b.com.1), ("inertia_angle", b.inertia_angle)] {
            finite(&format!("body `{n}`: {what}"), v)?;
        }
        at_least(&format!("body `{n}`: mass"), b.mass, 0.0, true)?;
        for v in [b.inertia.0, b.inertia.1, b.inertia.2] {
            at_least(&format!("body `{n}`: inertia"), v, 0.0, true)?;
        }
        for j in &b.joints {
            let n = format!("joint `{}`", j.name);
            for (what, v) in [("pos", j.pos.0), ("pos", j.pos.1), ("ref", j.reference), ("spring_ref", j.spring_ref)] {
                finite(&format!("{n}: {what}"), v)?;
            }
            for (what, v) in [("armature", j.armature), ("damping", j.damping), ("stiffness", j.stiffness)] {
                at_least(&format!("{n}: {what}"), v, 0.0, false)?;
            }
            if let Some((lo, hi)) = j.range {
                finite(&format!("{n}: range"), lo)?;
                finite(&format!("{n}: range"), hi)?;
            }
            if let JointKind::Slide { axis } = j.kind {
                finite(&format!("{n}: axis"), axis.0)?;
                finite(&format!("{n}: axis"), axis.1)?;
            }
            check_solver(&format!("{n}"), j.solref, j.solimp, &finite)?;
        }
        for c in &b.capsules {
            let n = format!("capsule `{}`", c.name);
            for v in [c.from.0, c.from.1, c.to.0, c.to.1] {
                finite(&format!("{n}: from/to"), v)?;
            }
            at_least(&format!("{n}: radius"), c.radius, 0.0, true)?;
            at_least(&format!("{n}: friction"), c.friction, 0.0, false)?;
            at_least(&format!("{n}: margin"), c.margin, 0.0, false)?;
            check_solver(&n, c.solref, c.solimp, &finite)?;
        }
    }
    for a in &s.actuators {
        let n = format!("actuator on `{}`", a.joint);
        finite(&format!("{n}: gear"), a.gear)?;
        finite(&format!("{n}: ctrl_range"), a.ctrl_range.0)?;
        finite(&format!("{n}: ctrl_range"), a.ctrl_range.1)?;
    }
    for o in &s.observation {
        if let ObsSpec::Qvel { clip: Some(c), .. } = o {
            at_least("observation clip", *c, 0.0, true)?;
        }
    }
    for r in &s.reward {
        let (what, w) = match r {
            RewardSpec::Forward { weight, .. } => ("forward reward weight", *weight),
            RewardSpec::Healthy { weight } => ("healthy reward weight", *weight),
            RewardSpec::CtrlCost { weight } => ("control cost weight", *weight),
        };
        finite(what, w)?;
    }
    for c in &s.healthy {
        let (lo, hi) = match c {
            CheckSpec::Height(_, lo, hi) | CheckSpec::Qpos(_, lo, hi) => (*lo, *hi),
            CheckSpec::State(_, lo, hi) => (Some(*lo), Some(*hi)),
        };
        for v in [lo, hi].into_iter().flatten() {
            finite("a health bound", v)?;
        }
    }
    for (what, n) in [("reset qpos noise", s.reset.qpos), ("reset qvel noise", s.reset.qvel)] {
        let (NoiseSpec::Uniform(v) | NoiseSpec::Normal(v)) = n;
        at_least(what, v, 0.0, false)?;
    }
    Ok(())
}

/// A constraint's solref (time constant, damping ratio) and solimp (dmin, dmax, width,
/// midpoint, power): finite, and solimp's impedances within [0, 1].
fn check_solver(what: &str, solref: (f64, f64), solimp: (f64, f64, f64, f64, f64), finite: &dyn Fn(&str, f64) -> Result<()>) -> Result<()> {
    for v in [solref.0, solref.1, solimp.2, solimp.3, solimp.4] {
        finite(&format!("{what}: solref/solimp"), v)?;
    }
    for v in [solimp.0, solimp.1] {
        ensure!((0.0..=1.0).contains(&v), "{what}: solimp's dmin and dmax must be in [0, 1], got {v}");
    }
    Ok(())
}

impl Model {
    /// Compile `spec` under `profile` (`None`: its default profile).
    pub fn new(spec: &EnvSpec, profile: Option<&str>) -> Result<Self> {
        let s = spec.with_profile(profile)?;
        check_bounds(&s)?;
        let env = &s.name;
        ensure!(!s.bodies.is_empty(), "{env}: no bodies");
        let body_index = |name: &str| s.bodies.iter().position(|b| b.name == name);
        let mut bodies: Vec<Body> = Vec::new();
        let mut joints: Vec<Joint> = Vec::new();
        let mut all_capsules = Vec::new();
        for (bi, b) in s.bodies.iter().enumerate() {
            let parent = match &b.parent {
                None => None,
                Some(p) => match body_index(p) {
                    Some(i) if i < bi => Some(i),
                    Some(_) => bail!("{env}: body `{}` is listed before its parent `{p}`", b.name),
                    None => bail!("{env}: body `{}` has unknown parent `{p}`", b.name),
                },
            };
            ensure!(body_index(&b.name) == Some(bi), "{env}: two bodies are named `{}`", b.name);
            ensure!(b.mass > 0.0, "{env}: body `{}` needs a positive mass", b.name);
            let (il, it, inn) = b.inertia;
            ensure!(il > 0.0 && it > 0.0 && inn > 0.0, "{env}: body `{}` needs positive inertias", b.name);
            let mut path = parent.map(|p| bodies[p].path.clone()).unwrap_or_default();
            let has_hinge_before = |path: &[usize], joints: &[Joint]| path.iter().any(|&j| matches!(joints[j].kind, JointKind::Hinge { .. }));
            for js in &b.joints {
                ensure!(!joints.iter().any(|j| j.name == js.name), "{env}: two joints are named `{}`", js.name);
                match js.kind {
                    JointKind::Slide { axis } => {
                        // Slide axes must be world-fixed: their Jacobian derivative is then 0.
                        ensure!(
                            parent.is_none() && b.angle == 0.0 && !has_hinge_before(&path, &joints),
                            "{env}: slide `{}` must be a root joint listed before any hinge",
                            js.name
                        );
                        ensure!(((axis.0 * axis.0 + axis.1 * axis.1).sqrt() - 1.0).abs() < 1e-12, "{env}: slide `{}` needs a unit axis", js.name);
                    }
                    JointKind::Hinge { sign } => {
                        ensure!(sign == 1.0 || sign == -1.0, "{env}: hinge `{}`: sign must be 1.0 or -1.0, not {sign}", js.name)
                    }
                }
                if let Some((lo, hi)) = js.range {
                    ensure!(lo < hi, "{env}: joint `{}`: range needs lo < hi", js.name);
                }
                path.push(joints.len());
                joints.push(Joint {
                    name: js.name.clone(),
                    body: bi,
                    kind: js.kind,
                    pos: [js.pos.0, js.pos.1],
                    qpos0: js.reference,
                    range: js.range.map(|(a, b)| [a, b]),
                    armature: js.armature,
                    damping: js.damping,
                    stiffness: js.stiffness,
                    spring_ref: js.spring_ref,
                    solref: [js.solref.0, js.solref.1],
                    solimp: [js.solimp.0, js.solimp.1, js.solimp.2, js.solimp.3, js.solimp.4],
                });
            }
            for c in &b.capsules {
                ensure!(c.radius > 0.0 && c.friction >= 0.0, "{env}: capsule `{}` needs radius > 0 and friction >= 0", c.name);
                all_capsules.push(Capsule {
                    name: c.name.clone(),
                    body: bi,
                    ends: [[c.from.0, c.from.1], [c.to.0, c.to.1]],
                    radius: c.radius,
                    friction: c.friction,
                    margin: c.margin,
                    solref: [c.solref.0, c.solref.1],
                    solimp: [c.solimp.0, c.solimp.1, c.solimp.2, c.solimp.3, c.solimp.4],
                });
            }
            bodies.push(Body {
                name: b.name.clone(),
                parent,
                pos: [b.pos.0, b.pos.1],
                angle: b.angle,
                mass: b.mass,
                com: [b.com.0, b.com.1],
                inertia: [il, it, inn],
                inertia_angle: b.inertia_angle,
                path,
            });
        }
        let nv = joints.len();
        ensure!(nv > 0, "{env}: no joints");
        let mut capsules = Vec::new();
        for name in &s.contacts {
            let Some(c) = all_capsules.iter().find(|c| &c.name == name) else {
                bail!("{env}: contacts names unknown capsule `{name}`");
            };
            ensure!(s.floor.is_some(), "{env}: capsule `{name}` collides but there is no floor");
            capsules.push(c.clone());
        }
        let joint_index = |name: &str| joints.iter().position(|j| j.name == name);
        let mut actuators = Vec::new();
        for a in &s.actuators {
            let Some(dof) = joint_index(&a.joint) else { bail!("{env}: actuator on unknown joint `{}`", a.joint) };
            ensure!(a.ctrl_range.0 < a.ctrl_range.1, "{env}: actuator on `{}`: ctrl_range needs lo < hi", a.joint);
            actuators.push(Actuator { dof, gear: a.gear, ctrl_range: [a.ctrl_range.0, a.ctrl_range.1] });
        }
        ensure!(!actuators.is_empty(), "{env}: no actuators");
        let body = |name: &str| body_index(name).ok_or_else(|| anyhow::anyhow!("{env}: unknown body `{name}`"));
        let mut observation = Vec::new();
        let mut obs_size = 0;
        for o in &s.observation {
            observation.push(match o {
                ObsSpec::Qpos { from, to } | ObsSpec::Qvel { from, to, .. } if !(from < to && *to <= nv) => {
                    bail!("{env}: observation range {from}..{to} is empty or outside 0..{nv}")
                }
                ObsSpec::Qpos { from, to } => {
                    obs_size += to - from;
                    Obs::Qpos(*from, *to)
                }
                ObsSpec::Qvel { from, to, clip } => {
                    obs_size += to - from;
                    Obs::Qvel(*from, *to, *clip)
                }
                ObsSpec::Height(b) => {
                    obs_size += 1;
                    Obs::Height(body(b)?)
                }
            });
        }
        let (mut forward, mut healthy_weight, mut ctrl_cost) = (None, 0.0, 0.0);
        for r in &s.reward {
            match r {
                RewardSpec::Forward { body: b, weight } => forward = Some((body(b)?, *weight)),
                RewardSpec::Healthy { weight } => healthy_weight = *weight,
                RewardSpec::CtrlCost { weight } => ctrl_cost = *weight,
            }
        }
        let mut checks = Vec::new();
        for c in &s.healthy {
            checks.push(match c {
                CheckSpec::Height(b, lo, hi) => Check::Height(body(b)?, *lo, *hi),
                CheckSpec::Qpos(i, lo, hi) if *i < nv => Check::Qpos(*i, *lo, *hi),
                CheckSpec::State(i, lo, hi) if *i <= nv => Check::State(*i, *lo, *hi),
                CheckSpec::Qpos(i, ..) | CheckSpec::State(i, ..) => bail!("{env}: health check index {i} is outside 0..{nv}"),
            });
        }
        let mut m = Model {
            name: s.name.clone(),
            profile: profile.unwrap_or(&s.default_profile).to_string(),
            plane: s.plane,
            timestep: s.timestep,
            frame_skip: s.frame_skip,
            integrator: s.integrator,
            solver_iterations: s.solver_iterations,
            gravity: [s.gravity.0, s.gravity.1],
            fluid: s.fluid.map(|f| [f.density, f.viscosity]),
            floor: s.floor,
            bodies,
            joints,
            capsules,
            actuators,
            observation,
            obs_size,
            forward,
            healthy_weight,
            ctrl_cost,
            checks,
            terminate_when_unhealthy: s.terminate_when_unhealthy,
            healthy_reward_when_terminal: s.healthy_reward_when_terminal,
            episode_steps: s.episode_steps,
            reset: [s.reset.qpos, s.reset.qvel],
            dof_invweight0: Vec::new(),
            body_invweight0: Vec::new(),
        };
        super::dynamics::set_invweight0(&mut m);
        Ok(m)
    }

    /// Load a shipped environment or a `.ron` path and compile it under `profile`.
    pub fn load(env: &str, profile: Option<&str>) -> Result<Self> {
        Self::new(&EnvSpec::load(env)?, profile)
    }

    /// Number of DOFs (= nq = nv).
    pub fn nv(&self) -> usize {
        self.joints.len()
    }

    /// Number of actuators (= action size).
    pub fn nu(&self) -> usize {
        self.actuators.len()
    }

    /// Control step dt = timestep · frame_skip, seconds.
    pub fn dt(&self) -> f64 {
        self.timestep * self.frame_skip as f64
    }

    /// Constraint slots: 2 per limited joint (lower, upper), then 3 per capsule end (two
    /// friction-pyramid edges and the merged normal row, control-envs.md §3.3.6).
    pub fn n_slots(&self) -> usize {
        2 * self.joints.iter().filter(|j| j.range.is_some()).count() + 6 * self.capsules.len()
    }
}
