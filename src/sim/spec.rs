//! Environment descriptions as written in `envs/*.ron`: bodies, joints, capsules, actuators,
//! options, observation, reward, health checks and reset noise, plus named profiles that
//! override a few fields where Brax and Gymnasium differ. Everything is in plane coordinates
//! (u, w) with angles about the plane normal n (control-envs.md §3.3): `XY` is (x, y, +z),
//! `XZ` is (x, z, −y). Constants are MuJoCo's compiled values (`tools/sim/export_constants.py`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use serde::Deserialize;

/// The environments shipped in `envs/`, embedded so `--env NAME` works from any directory.
pub const SHIPPED: &[(&str, &str)] = &[
    ("swimmer", include_str!("../../envs/swimmer.ron")),
    ("hopper", include_str!("../../envs/hopper.ron")),
    ("walker2d", include_str!("../../envs/walker2d.ron")),
    ("half_cheetah", include_str!("../../envs/half_cheetah.ron")),
];

/// Which world plane the model moves in; fixes how (u, w, n) map to MuJoCo's (x, y, z).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum Plane {
    /// u = x, w = y, n = +z (Swimmer).
    XY,
    /// u = x, w = z, n = −y (Hopper, Walker2d, HalfCheetah).
    XZ,
}

/// Time integrator, MuJoCo semantics (control-envs.md §2.2).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum Integrator {
    /// Semi-implicit Euler with implicit joint damping: v += h (M + hD)⁻¹ f, then q += h v.
    Euler,
    /// Classic fourth-order Runge–Kutta; constraints solved at every stage, damping explicit.
    Rk4,
}

/// A joint's kind; every joint has one degree of freedom, so qpos and qvel share its index.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub enum JointKind {
    /// Translation along `axis` (unit, body frame, plane coordinates), metres.
    Slide {
        /// Direction (u, w) in the body frame.
        axis: (f64, f64),
    },
    /// Rotation about the plane normal; `sign` is axis·n (±1), radians.
    Hinge {
        /// +1 when MuJoCo's axis is the plane normal n, −1 when it is −n.
        sign: f64,
    },
}

fn default_solref() -> (f64, f64) {
    (0.02, 1.0)
}
fn default_solimp() -> (f64, f64, f64, f64, f64) {
    (0.9, 0.95, 0.001, 0.5, 2.0)
}

/// One joint of a body (applied in the order listed, MuJoCo's joint-in-body semantics).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JointSpec {
    /// Name (MuJoCo's joint name).
    pub name: String,
    /// Slide or hinge.
    pub kind: JointKind,
    /// Anchor (u, w) in the body frame, metres (hinges only; a slide's position is irrelevant).
    #[serde(default)]
    pub pos: (f64, f64),
    /// qpos0 (MuJoCo's `ref`): the coordinate at which the body sits at its rest pose.
    #[serde(default, rename = "ref")]
    pub reference: f64,
    /// Limits (lo, hi) in the joint's units, enforced as soft constraints; none when absent.
    #[serde(default)]
    pub range: Option<(f64, f64)>,
    /// Armature added to the mass matrix diagonal, kg·m² or kg.
    #[serde(default)]
    pub armature: f64,
    /// Viscous damping, N·m·s/rad or N·s/m.
    #[serde(default)]
    pub damping: f64,
    /// Spring stiffness towards `spring_ref`.
    #[serde(default)]
    pub stiffness: f64,
    /// Spring rest position (MuJoCo's `springref`).
    #[serde(default)]
    pub spring_ref: f64,
    /// Limit solref (timeconst s, damping ratio).
    #[serde(default = "default_solref")]
    pub solref: (f64, f64),
    /// Limit solimp (dmin, dmax, width, midpoint, power).
    #[serde(default = "default_solimp")]
    pub solimp: (f64, f64, f64, f64, f64),
}

/// A capsule that may touch the floor; contact parameters are already mixed with the floor's.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapsuleSpec {
    /// Name (MuJoCo's geom name).
    pub name: String,
    /// End-sphere centres (u, w) in the body frame, metres.
    pub from: (f64, f64),
    /// Second end-sphere centre.
    pub to: (f64, f64),
    /// Radius, metres.
    pub radius: f64,
    /// Sliding friction μ (max of the geom's and the floor's).
    pub friction: f64,
    /// includemargin (sum of both margins), metres.
    #[serde(default)]
    pub margin: f64,
    /// Contact solref (mean of both geoms').
    #[serde(default = "default_solref")]
    pub solref: (f64, f64),
    /// Contact solimp (mean of both geoms').
    #[serde(default = "default_solimp")]
    pub solimp: (f64, f64, f64, f64, f64),
}

/// One rigid body; bodies are listed parents first.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodySpec {
    /// Name.
    pub name: String,
    /// Parent body's name; none for a child of the world.
    #[serde(default)]
    pub parent: Option<String>,
    /// Frame origin (u, w) in the parent's frame, metres.
    #[serde(default)]
    pub pos: (f64, f64),
    /// Frame angle relative to the parent, radians.
    #[serde(default)]
    pub angle: f64,
    /// Mass, kg.
    pub mass: f64,
    /// Centre of mass (u, w) in the body frame, metres.
    pub com: (f64, f64),
    /// Principal inertias about the COM (I_l, I_t, I_n), kg·m²: along e_l (in-plane, at
    /// `inertia_angle` in the body frame), e_t = perp(e_l), and the plane normal.
    pub inertia: (f64, f64, f64),
    /// Angle of e_l in the body frame, radians.
    #[serde(default)]
    pub inertia_angle: f64,
    /// Joints connecting the body to its parent, in MuJoCo's order.
    #[serde(default)]
    pub joints: Vec<JointSpec>,
    /// Capsules attached to the body.
    #[serde(default)]
    pub capsules: Vec<CapsuleSpec>,
}

/// A motor: torque (or force) = gear · clip(ctrl, ctrl_range).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActuatorSpec {
    /// Joint driven.
    pub joint: String,
    /// Gear ratio.
    pub gear: f64,
    /// Control range (lo, hi).
    #[serde(default = "default_ctrl_range")]
    pub ctrl_range: (f64, f64),
}
fn default_ctrl_range() -> (f64, f64) {
    (-1.0, 1.0)
}

/// MuJoCo's inertia-box fluid model parameters (control-envs.md §2.3).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FluidSpec {
    /// Fluid density ρ, kg/m³.
    pub density: f64,
    /// Dynamic viscosity μ, Pa·s.
    pub viscosity: f64,
}

/// One block of the observation vector, concatenated in order.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ObsSpec {
    /// qpos[from..to].
    Qpos {
        /// First index.
        from: usize,
        /// One past the last index.
        to: usize,
    },
    /// qvel[from..to], clipped to ±clip when given.
    Qvel {
        /// First index.
        from: usize,
        /// One past the last index.
        to: usize,
        /// Symmetric clip bound.
        #[serde(default)]
        clip: Option<f64>,
    },
    /// World w (height) of a body's frame origin, metres.
    Height(String),
}

/// One reward term, summed each control step.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum RewardSpec {
    /// weight · (u_after − u_before)/dt of a body's frame origin (not its COM, not qvel).
    Forward {
        /// Body whose frame origin is tracked.
        body: String,
        /// Weight.
        weight: f64,
    },
    /// weight when healthy (and on the terminal step if `healthy_reward_when_terminal`).
    Healthy {
        /// Weight.
        weight: f64,
    },
    /// −weight · Σ action², on the raw (unclipped) action.
    CtrlCost {
        /// Weight.
        weight: f64,
    },
}

/// A health condition; all must hold (strict inequalities; a `None` bound is open).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum CheckSpec {
    /// lo < world height of a body's frame origin < hi.
    Height(String, Option<f64>, Option<f64>),
    /// lo < qpos[index] < hi.
    Qpos(usize, Option<f64>, Option<f64>),
    /// lo < every element of qpos[from..] and of qvel < hi.
    State(usize, f64, f64),
}

/// Reset noise on one of qpos or qvel.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub enum NoiseSpec {
    /// U(−s, s) added to every coordinate.
    Uniform(f64),
    /// s · N(0, 1) added to every coordinate.
    Normal(f64),
}

/// Reset: qpos = qpos0 + noise, qvel = noise.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetSpec {
    /// Noise on qpos.
    pub qpos: NoiseSpec,
    /// Noise on qvel.
    pub qvel: NoiseSpec,
}

/// What a profile changes; every field is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Integrator.
    #[serde(default)]
    pub integrator: Option<Integrator>,
    /// Names of the capsules that collide with the floor.
    #[serde(default)]
    pub contacts: Option<Vec<String>>,
    /// Joint `ref` by joint name.
    #[serde(default)]
    pub joint_ref: BTreeMap<String, f64>,
    /// Joint range by joint name.
    #[serde(default)]
    pub joint_range: BTreeMap<String, (f64, f64)>,
    /// Capsule friction by capsule name.
    #[serde(default)]
    pub friction: BTreeMap<String, f64>,
    /// Whether the healthy reward is paid on the terminal (unhealthy) step.
    #[serde(default)]
    pub healthy_reward_when_terminal: Option<bool>,
}

/// A whole environment as read from a `.ron` file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    /// Environment name.
    pub name: String,
    /// The world plane.
    pub plane: Plane,
    /// Physics substep h, seconds.
    pub timestep: f64,
    /// Substeps per control step; the control step is dt = timestep · frame_skip.
    pub frame_skip: usize,
    /// Integrator of the base description (before a profile).
    pub integrator: Integrator,
    /// Sweeps of the projected Gauss–Seidel fallback per constraint solve (used only when the
    /// exact pivoting solve does not settle).
    pub solver_iterations: usize,
    /// Gravity (u, w), m/s².
    #[serde(default)]
    pub gravity: (f64, f64),
    /// Fluid drag; none when absent.
    #[serde(default)]
    pub fluid: Option<FluidSpec>,
    /// Floor height w, metres; none: no floor.
    #[serde(default)]
    pub floor: Option<f64>,
    /// Bodies, parents first.
    pub bodies: Vec<BodySpec>,
    /// Motors, one per action component.
    pub actuators: Vec<ActuatorSpec>,
    /// Capsules that collide with the floor (base description).
    #[serde(default)]
    pub contacts: Vec<String>,
    /// Observation blocks.
    pub observation: Vec<ObsSpec>,
    /// Reward terms.
    pub reward: Vec<RewardSpec>,
    /// Health conditions (empty: always healthy).
    #[serde(default)]
    pub healthy: Vec<CheckSpec>,
    /// End the episode at the first unhealthy step.
    #[serde(default)]
    pub terminate_when_unhealthy: bool,
    /// Pay the healthy reward on the terminal step too (Brax, Gymnasium v4).
    #[serde(default)]
    pub healthy_reward_when_terminal: bool,
    /// Control steps per episode.
    pub episode_steps: usize,
    /// Reset noise.
    pub reset: ResetSpec,
    /// Profile used when none is asked for.
    pub default_profile: String,
    /// Named profiles.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileSpec>,
}

impl EnvSpec {
    /// Parse RON text; errors read `ORIGIN:line:col: message`.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        ron::de::from_str::<EnvSpec>(text).map_err(|e| {
            anyhow::anyhow!("{origin}:{}:{}: {}", e.position.line, e.position.col, e.code)
        })
    }

    /// A shipped environment by name, or a `.ron` file by path.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if let Some((_, text)) = SHIPPED.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text, &format!("envs/{name_or_path}.ron"));
        }
        let path = Path::new(name_or_path);
        if !name_or_path.ends_with(".ron") && !path.exists() {
            let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
            bail!("unknown environment `{name_or_path}`: shipped ones are {}, or give a path to a .ron file", names.join(", "));
        }
        let text = crate::input::read_text(path, "the environment file", crate::input::ENV_BYTES)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The description with `profile`'s overrides applied (`None`: the default profile).
    pub fn with_profile(&self, profile: Option<&str>) -> Result<Self> {
        let name = profile.unwrap_or(&self.default_profile);
        let Some(p) = self.profiles.get(name) else {
            let names: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            bail!("{}: no profile `{name}` (it has {})", self.name, names.join(", "));
        };
        let mut out = self.clone();
        if let Some(i) = p.integrator {
            out.integrator = i;
        }
        if let Some(c) = &p.contacts {
            out.contacts = c.clone();
        }
        if let Some(h) = p.healthy_reward_when_terminal {
            out.healthy_reward_when_terminal = h;
        }
        let env = &self.name;
        let mut joint = |jn: &str, f: &mut dyn FnMut(&mut JointSpec)| -> Result<()> {
            match out.bodies.iter_mut().flat_map(|b| b.joints.iter_mut()).find(|j| j.name == jn) {
                Some(j) => {
                    f(j);
                    Ok(())
                }
                None => bail!("{env}: profile `{name}` names no joint `{jn}`"),
            }
        };
        for (j, &r) in &p.joint_ref {
            joint(j, &mut |s| s.reference = r)?;
        }
        for (j, &r) in &p.joint_range {
            joint(j, &mut |s| s.range = Some(r))?;
        }
        for (c, &mu) in &p.friction {
            match out.bodies.iter_mut().flat_map(|b| b.capsules.iter_mut()).find(|g| &g.name == c) {
                Some(g) => g.friction = mu,
                None => bail!("{}: profile `{name}` names no capsule `{c}`", self.name),
            }
        }
        Ok(out)
    }
}
