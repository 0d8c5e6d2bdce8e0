//! The CPU reference stepper: planar reduced-coordinate dynamics with MuJoCo's semantics
//! (control-envs.md §3.3). Kinematics, point Jacobians, the mass matrix M, bias forces c,
//! passive forces (damping, springs, inertia-box fluid), soft joint-limit and floor-contact
//! constraints solved exactly by block principal pivoting (projected Gauss–Seidel as its
//! fallback), and the Euler and RK4 integrators. Generic over the float type (`f64` matches
//! MuJoCo; `f32` is what the GPU twin computes).
//!
//! In f32 this is `kernels/sim.cu` bit for bit: every loop, sum and product is written out in
//! the kernel's order (no library linear algebra, whose blocked and fused kernels round
//! differently), nothing is fused (Rust never contracts; the kernels build with `--fmad=false`),
//! the only functions beyond IEEE `+ − × ÷ √` are grove's own `sin`/`cos` and `pow`
//! ([`Real::sim_sin_cos`], [`Real::sim_pow`]: `program::fastmath`, `grove_math.cuh` on the GPU),
//! and every constant combined from the model is combined once in f64 ([`Soft`],
//! [`fluid_coefficients`]) and rounded, on both sides. `tests/sim_kernel_host.rs` runs the
//! kernel's code and requires equal bits after whole episodes.
//!
//! Buffers: `q`, `v`: (nv,), MuJoCo's qpos and qvel order (metres, radians; m/s, rad/s);
//! `ctrl`: (nu,); `warm`: (model.n_slots(),) the constraint forces of the previous solve, by slot.

use nalgebra::{DMatrix, DVector};

use super::model::{Body, Model};
use super::spec::{Integrator, JointKind};
use crate::program::fastmath;

/// The float types the stepper runs in, with the two functions beyond IEEE arithmetic it needs.
pub trait Real: nalgebra::RealField + Copy + Send + Sync + std::fmt::Display {
    /// (sin x, cos x): libm's in f64 (as MuJoCo), grove's own in f32 (`fastmath::sin_cos`,
    /// `grove_sincos` in the kernels: the same bits on both devices).
    fn sim_sin_cos(self) -> (Self, Self);
    /// self^p: libm's `pow` in f64, grove's own in f32 (`fastmath::pow`, `grove_pow`).
    fn sim_pow(self, p: Self) -> Self;
    /// The value as f64, exactly (what an episode's return sums).
    fn exact_f64(self) -> f64;
}
impl Real for f32 {
    #[inline]
    fn sim_sin_cos(self) -> (f32, f32) {
        fastmath::sin_cos(self)
    }
    #[inline]
    fn sim_pow(self, p: f32) -> f32 {
        fastmath::pow(self, p)
    }
    #[inline]
    fn exact_f64(self) -> f64 {
        self as f64
    }
}
impl Real for f64 {
    #[inline]
    fn sim_sin_cos(self) -> (f64, f64) {
        self.sin_cos()
    }
    #[inline]
    fn sim_pow(self, p: f64) -> f64 {
        self.powf(p)
    }
    #[inline]
    fn exact_f64(self) -> f64 {
        self
    }
}

/// An f64 model constant in the stepper's float type.
#[inline]
pub fn r<T: Real>(x: f64) -> T {
    nalgebra::convert(x)
}

type V2<T> = [T; 2];

#[inline]
fn rot<T: Real>(a: T, p: V2<T>) -> V2<T> {
    rot_sc(a.sim_sin_cos(), p)
}

/// `p` rotated by the angle whose (sin, cos) is `sc` (the kernel's `grove_rot`).
#[inline]
fn rot_sc<T: Real>((s, c): (T, T), p: V2<T>) -> V2<T> {
    [c * p[0] - s * p[1], s * p[0] + c * p[1]]
}

#[inline]
fn perp<T: Real>(p: V2<T>) -> V2<T> {
    [-p[1], p[0]]
}

#[inline]
fn sub<T: Real>(a: V2<T>, b: V2<T>) -> V2<T> {
    [a[0] - b[0], a[1] - b[1]]
}

#[inline]
fn add<T: Real>(a: V2<T>, b: V2<T>) -> V2<T> {
    [a[0] + b[0], a[1] + b[1]]
}

#[inline]
fn v2<T: Real>(p: [f64; 2]) -> V2<T> {
    [r(p[0]), r(p[1])]
}

/// Body frames and joint anchors at one configuration.
#[derive(Clone, Debug)]
pub struct Kinematics<T> {
    /// Body frame origins (u, w) in the world, metres: (n_bodies,).
    pub pos: Vec<V2<T>>,
    /// Body frame angles about n, radians: (n_bodies,).
    pub ang: Vec<T>,
    /// (sin, cos) of each body's angle (`ang`), kept since most rotations use one: (n_bodies,).
    pub sc: Vec<(T, T)>,
    /// Per joint: the world anchor of a hinge, or the world axis of a slide: (nv,).
    pub anchor: Vec<V2<T>>,
}

/// Forward kinematics (MuJoCo's joint-in-body semantics, using q − qpos0).
pub fn kinematics<T: Real>(m: &Model, q: &[T]) -> Kinematics<T> {
    let nb = m.bodies.len();
    let mut k = Kinematics { pos: vec![[T::zero(); 2]; nb], ang: vec![T::zero(); nb], sc: vec![(T::zero(), T::one()); nb], anchor: vec![[T::zero(); 2]; m.nv()] };
    for (b, body) in m.bodies.iter().enumerate() {
        let (pp, pa, psc) = match body.parent {
            Some(p) => (k.pos[p], k.ang[p], k.sc[p]),
            None => ([T::zero(); 2], T::zero(), T::zero().sim_sin_cos()),
        };
        let mut pos = add(pp, rot_sc(psc, v2(body.pos)));
        let mut ang = pa + r(body.angle);
        for &j in body.path.iter().filter(|&&j| m.joints[j].body == b) {
            let jt = &m.joints[j];
            let dq = q[j] - r(jt.qpos0);
            match jt.kind {
                JointKind::Slide { axis } => {
                    let ax = rot(ang, v2([axis.0, axis.1]));
                    pos = [pos[0] + ax[0] * dq, pos[1] + ax[1] * dq];
                    k.anchor[j] = ax;
                }
                JointKind::Hinge { sign } => {
                    let a = add(pos, rot(ang, v2(jt.pos)));
                    let th = r::<T>(sign) * dq;
                    pos = add(a, rot(th, sub(pos, a)));
                    ang += th;
                    k.anchor[j] = a;
                }
            }
        }
        k.pos[b] = pos;
        k.ang[b] = ang;
        k.sc[b] = ang.sim_sin_cos();
    }
    k
}

/// World position of a point given in body `b`'s frame.
pub fn world_point<T: Real>(m: &Model, k: &Kinematics<T>, b: usize, p: [f64; 2]) -> V2<T> {
    let _ = m;
    add(k.pos[b], rot_sc(k.sc[b], v2(p)))
}

/// Jacobian of world point `p` moving with body `b`, using the first `upto` joints of its path:
/// one column [u̇, ẇ, φ̇] per DOF, (nv,).
fn jacobian<T: Real>(m: &Model, k: &Kinematics<T>, b: usize, p: V2<T>, upto: usize, out: &mut [[T; 3]]) {
    out.iter_mut().for_each(|c| *c = [T::zero(); 3]);
    for &j in &m.bodies[b].path[..upto] {
        match m.joints[j].kind {
            JointKind::Slide { .. } => {
                out[j][0] += k.anchor[j][0];
                out[j][1] += k.anchor[j][1];
            }
            JointKind::Hinge { sign } => {
                let s: T = r(sign);
                let d = perp(sub(p, k.anchor[j]));
                out[j][0] += s * d[0];
                out[j][1] += s * d[1];
                out[j][2] += s;
            }
        }
    }
}

/// J v over the columns of `dofs`, in their order: a body's path (or its first joints), the only
/// columns its `jacobian` can make nonzero. A path is increasing, so the sum runs in DOF order,
/// and the columns left out would add ±0 to sums that start at +0: for a finite J and v this is
/// the product over every column, bit for bit (`kernels/sim.cu` grove_jv_path).
fn jv_path<T: Real>(jac: &[[T; 3]], dofs: &[usize], v: &[T]) -> [T; 3] {
    let mut o = [T::zero(); 3];
    for &i in dofs {
        let (c, vi) = (jac[i], v[i]);
        o[0] += c[0] * vi;
        o[1] += c[1] * vi;
        o[2] += c[2] * vi;
    }
    o
}

/// (J̇ q̇) of a point on body `b` (translation only; the angular part is 0 in 2-D).
fn jdot_v<T: Real>(m: &Model, k: &Kinematics<T>, b: usize, p: V2<T>, v: &[T], scratch: &mut [[T; 3]]) -> V2<T> {
    let path = &m.bodies[b].path;
    jacobian(m, k, b, p, path.len(), scratch);
    let pdot = jv_path(scratch, path, v);
    let mut out = [T::zero(); 2];
    for (i, &j) in path.iter().enumerate() {
        if let JointKind::Hinge { sign } = m.joints[j].kind {
            jacobian(m, k, b, k.anchor[j], i, scratch);
            let adot = jv_path(scratch, &path[..i], v);
            let d = perp([pdot[0] - adot[0], pdot[1] - adot[1]]);
            let s: T = r(sign);
            out[0] += s * d[0] * v[j];
            out[1] += s * d[1] * v[j];
        }
    }
    out
}

/// The smooth dynamics at (q, v): mass matrix (with armature), and the generalized forces.
#[derive(Clone, Debug)]
pub struct Smooth<T: Real> {
    /// Joint-space inertia M (nv × nv), armature on the diagonal.
    pub mass: DMatrix<T>,
    /// Bias c = Coriolis/centrifugal + gravity (MuJoCo's `qfrc_bias`): (nv,).
    pub bias: DVector<T>,
    /// Passive: −D v − K (q − q_spring) + fluid (MuJoCo's `qfrc_passive`): (nv,).
    pub passive: DVector<T>,
    /// The fluid part of `passive` (MuJoCo's `qfrc_fluid`): (nv,).
    pub fluid: DVector<T>,
    /// Actuation gear · clip(ctrl) (MuJoCo's `qfrc_actuator`): (nv,).
    pub actuator: DVector<T>,
}

/// M, c, passive and actuator forces at (q, v, ctrl).
pub fn smooth<T: Real>(m: &Model, k: &Kinematics<T>, q: &[T], v: &[T], ctrl: &[T]) -> Smooth<T> {
    let nv = m.nv();
    let mut mass = DMatrix::<T>::zeros(nv, nv);
    let mut bias = DVector::<T>::zeros(nv);
    let mut fluid = DVector::<T>::zeros(nv);
    let mut passive = DVector::<T>::zeros(nv);
    let mut actuator = DVector::<T>::zeros(nv);
    let mut jac = vec![[T::zero(); 3]; nv];
    let mut scratch = vec![[T::zero(); 3]; nv];
    let g: V2<T> = v2(m.gravity);
    for (j, jt) in m.joints.iter().enumerate() {
        mass[(j, j)] = r(jt.armature);
        passive[j] = -r::<T>(jt.damping) * v[j] - r::<T>(jt.stiffness) * (q[j] - r(jt.spring_ref));
    }
    // A body moves the DOFs of its path only: it adds to M's entries between two of them and to
    // their forces, in body order as over every entry (the other columns are zero, and their
    // terms would add ±0 to sums that start at +0, which changes no bit of a finite sum).
    // `kernels/sim.cu` grove_smooth runs the same loops over the lower triangle (j <= i, a path
    // being increasing), all that the factorisation reads; the upper entry (j, i) keeps its own
    // product order, as over every DOF (dynamics/tests.rs compares the two bit for bit).
    for (b, body) in m.bodies.iter().enumerate() {
        let path = &body.path;
        let c = world_point(m, k, b, body.com);
        jacobian(m, k, b, c, path.len(), &mut jac);
        let (mb, ib): (T, T) = (r(body.mass), r(body.inertia[2]));
        let term = |i: usize, j: usize| mb * (jac[i][0] * jac[j][0] + jac[i][1] * jac[j][1]) + ib * jac[i][2] * jac[j][2];
        for (n, &i) in path.iter().enumerate() {
            for &j in &path[..n] {
                mass[(i, j)] += term(i, j);
                mass[(j, i)] += term(j, i);
            }
            mass[(i, i)] += term(i, i);
        }
        let a = jdot_v(m, k, b, c, v, &mut scratch);
        for &i in path {
            bias[i] += mb * (jac[i][0] * (a[0] - g[0]) + jac[i][1] * (a[1] - g[1]));
        }
        if let Some([rho, mu]) = m.fluid {
            let f = fluid_force(fluid_coefficients(body, rho, mu), k.ang[b] + r(body.inertia_angle), jv_path(&jac, path, v));
            for &i in path {
                fluid[i] += jac[i][0] * f[0] + jac[i][1] * f[1] + jac[i][2] * f[2];
            }
        }
    }
    passive += &fluid;
    for (a, act) in m.actuators.iter().enumerate() {
        // fmin(fmax(ctrl, lo), hi), as the kernel (ctrl is never NaN here: env.rs zeroes it).
        let u = ctrl[a].max(r(act.ctrl_range[0])).min(r(act.ctrl_range[1]));
        actuator[act.dof] += r::<T>(act.gear) * u;
    }
    Smooth { mass, bias, passive, fluid, actuator }
}

/// MuJoCo's inertia-box fluid coefficients of a body (control-envs.md §2.3), in f64:
/// [c1 = 3πdμ, c2 = πd³μ, cL, cT, cR] for fluid density `rho` (kg/m³) and viscosity `mu` (Pa·s).
/// The kernel's `grove_fluid` table is these, rounded once.
pub fn fluid_coefficients(body: &Body, rho: f64, mu: f64) -> [f64; 5] {
    let [il, it, inn] = body.inertia;
    let side = |a: f64, b: f64, c: f64| ((b + c - a).max(1e-15) / body.mass * 6.0).sqrt();
    let (bl, bt, bn) = (side(il, it, inn), side(it, il, inn), side(inn, il, it));
    let d = (bl + bt + bn) / 3.0;
    let pi = std::f64::consts::PI;
    [3.0 * pi * d * mu, pi * d * d * d * mu, 0.5 * rho * bt * bn, 0.5 * rho * bl * bn, rho * bn * (bl.powi(4) + bt.powi(4)) / 64.0]
}

/// MuJoCo's inertia-box fluid force at the COM, in 2-D (control-envs.md §2.3): coefficients `c`
/// ([`fluid_coefficients`]), e_l at world angle `axis_angle`, COM velocity `vel` = [u̇, ẇ, φ̇].
/// Returns [F_u, F_w, τ] (N, N, N·m).
fn fluid_force<T: Real>(c: [f64; 5], axis_angle: T, vel: [T; 3]) -> [T; 3] {
    let [c1, c2, cl, ct, cr]: [T; 5] = c.map(r);
    let el = rot(axis_angle, [T::one(), T::zero()]);
    let et = perp(el);
    let vl = vel[0] * el[0] + vel[1] * el[1];
    let vt = vel[0] * et[0] + vel[1] * et[1];
    let fl = -(c1 * vl + cl * vl.abs() * vl);
    let ft = -(c1 * vt + ct * vt.abs() * vt);
    let w = vel[2];
    [fl * el[0] + ft * et[0], fl * el[1] + ft * et[1], -(c2 * w + cr * w.abs() * w)]
}

/// A constraint's softness (MuJoCo's solref and solimp, `getimpedance`, `mj_makeImpedance`)
/// with everything that depends only on the model combined once, in f64: both steppers round
/// these and nothing else (the kernel's `grove_lim_soft`, `grove_cap_soft`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Soft {
    /// The impedance when it does not depend on the distance (dmin = dmax, or width ≤ 1e-15):
    /// ½(dmin + dmax).
    pub fixed: Option<f64>,
    /// solimp's dmin and dmax, clamped to [1e-4, 0.9999] as MuJoCo does.
    pub dmin: f64,
    /// See `dmin`.
    pub dmax: f64,
    /// dmax − dmin.
    pub span: f64,
    /// solimp's width (metres, or radians for a hinge limit), mid and power.
    pub width: f64,
    /// See `width`.
    pub mid: f64,
    /// See `width`.
    pub power: f64,
    /// power = 1: the impedance is linear in the distance.
    pub linear: bool,
    /// 1/mid^(power − 1) and 1/(1 − mid)^(power − 1), the two halves' scales.
    pub lo_scale: f64,
    /// See `lo_scale`.
    pub hi_scale: f64,
    /// The reference acceleration's stiffness K = 1/(dmax² tc² dr²) and damping B = 2/(dmax tc),
    /// tc = max(solref[0], 2h).
    pub k: f64,
    /// See `k`.
    pub b: f64,
}

impl Soft {
    /// The softness of `solref`, `solimp` at timestep `h` (seconds).
    pub fn new(solref: [f64; 2], solimp: [f64; 5], h: f64) -> Self {
        let [dmin, dmax, width, mid, power] = solimp;
        let dmin = dmin.clamp(1e-4, 0.9999);
        let dmax = dmax.clamp(1e-4, 0.9999);
        let tc = solref[0].max(2.0 * h);
        let dr = solref[1];
        Soft {
            fixed: (dmin == dmax || width <= 1e-15).then_some(0.5 * (dmin + dmax)),
            dmin,
            dmax,
            span: dmax - dmin,
            width,
            mid,
            power,
            linear: power == 1.0,
            lo_scale: 1.0 / mid.powf(power - 1.0),
            hi_scale: 1.0 / (1.0 - mid).powf(power - 1.0),
            k: 1.0 / (dmax * dmax * tc * tc * dr * dr),
            b: 2.0 / (dmax * tc),
        }
    }

    /// The impedance of a row at distance `pos` with `margin` (the kernel's `grove_imp`).
    pub fn impedance<T: Real>(&self, pos: T, margin: T) -> T {
        if let Some(imp) = self.fixed {
            return r(imp);
        }
        let x = ((pos - margin) / r(self.width)).abs();
        if x >= T::one() {
            r(self.dmax)
        } else if x <= T::zero() {
            r(self.dmin)
        } else {
            let y = if self.linear {
                x
            } else if x <= r(self.mid) {
                r::<T>(self.lo_scale) * x.sim_pow(r(self.power))
            } else {
                T::one() - r::<T>(self.hi_scale) * (T::one() - x).sim_pow(r(self.power))
            };
            r::<T>(self.dmin) + y * r(self.span)
        }
    }
}

/// Active constraint rows at one configuration.
#[derive(Clone, Debug, Default)]
pub struct Rows<T: Real> {
    /// Slot of each row (index into the warm-start buffer).
    pub slot: Vec<usize>,
    /// Jacobian rows, (n_rows, nv) row-major.
    pub jac: Vec<T>,
    /// Regulariser R per row.
    pub reg: Vec<T>,
    /// Reference acceleration per row.
    pub aref: Vec<T>,
}

/// Joint-limit and floor-contact rows active at (q, v), limits first (control-envs.md §3.3.6).
pub fn constraint_rows<T: Real>(m: &Model, k: &Kinematics<T>, q: &[T], v: &[T]) -> Rows<T> {
    let nv = m.nv();
    let h = m.timestep;
    let mut rows = Rows { slot: Vec::new(), jac: Vec::new(), reg: Vec::new(), aref: Vec::new() };
    let mut slot = 0;
    for (j, jt) in m.joints.iter().enumerate() {
        let Some([lo, hi]) = jt.range else { continue };
        for (side, pos) in [(T::one(), q[j] - r(lo)), (-T::one(), r::<T>(hi) - q[j])] {
            if pos < T::zero() {
                let soft = Soft::new(jt.solref, jt.solimp, h);
                let (kk, bb): (T, T) = (r(soft.k), r(soft.b));
                let imp = soft.impedance(pos, T::zero());
                let start = rows.jac.len();
                rows.jac.resize(start + nv, T::zero());
                rows.jac[start + j] = side;
                rows.slot.push(slot);
                rows.reg.push((T::one() - imp) / imp * r(m.dof_invweight0[j]));
                rows.aref.push(-bb * side * v[j] - kk * imp * pos);
            }
            slot += 1;
        }
    }
    let mut jac = vec![[T::zero(); 3]; nv];
    for c in &m.capsules {
        let floor: T = r(m.floor.unwrap_or(0.0));
        for end in c.ends {
            let e = world_point(m, k, c.body, end);
            let rad: T = r(c.radius);
            let margin: T = r(c.margin);
            let dist = e[1] - floor - rad;
            if dist < margin {
                let cp = [e[0], e[1] - rad - dist / r(2.0)];
                jacobian(m, k, c.body, cp, m.bodies[c.body].path.len(), &mut jac);
                let mu: T = r(c.friction);
                let soft = Soft::new(c.solref, c.solimp, h);
                let (kk, bb): (T, T) = (r(soft.k), r(soft.b));
                let imp = soft.impedance(dist, margin);
                let tran: T = r(m.body_invweight0[c.body]);
                let r0 = (T::one() - imp) / imp * (tran + mu * mu * tran);
                let rpy = r::<T>(2.0) * mu * mu * r0;
                for (edge, (t, reg)) in [(mu, rpy), (-mu, rpy), (T::zero(), rpy / r(2.0))].into_iter().enumerate() {
                    let mut jv_row = T::zero();
                    for i in 0..nv {
                        let x = jac[i][1] + t * jac[i][0];
                        rows.jac.push(x);
                        jv_row += x * v[i];
                    }
                    rows.slot.push(slot + edge);
                    rows.reg.push(reg);
                    rows.aref.push(-bb * jv_row - kk * imp * (dist - margin));
                }
            }
            slot += 3;
        }
    }
    rows
}

/// In-place Cholesky of the row-major n × n `l` (read from its lower triangle, which it
/// overwrites with L; the upper is left as it was): the kernel's `grove_cholesky`, loop for
/// loop. False when the matrix is not positive definite.
#[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(d > 0)` is the kernel's test: NaN fails too
fn cholesky<T: Real>(l: &mut [T], n: usize) -> bool {
    for j in 0..n {
        let mut d = l[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if !(d > T::zero()) {
            return false;
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = l[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    true
}

/// x = (L Lᵀ)⁻¹ b with the factor of [`cholesky`]: the kernel's `grove_solve`.
fn solve<T: Real>(l: &[T], n: usize, b: &[T], x: &mut [T]) {
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * n + k] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = x[i];
        for k in i + 1..n {
            s -= l[k * n + i] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
}

/// Most pivoting rounds [`pivot_solve`] takes before it gives up (the kernel's GROVE_PIVOTS).
pub const MAX_PIVOTS: usize = 24;

/// Rounds of whole-set exchanges [`pivot_solve`] allows without fewer infeasible rows before it
/// exchanges one row at a time (the kernel's GROVE_PIVOT_TRIES).
pub const PIVOT_TRIES: usize = 3;

/// The constraint forces, exactly: f ≥ 0 with w = (A + R) f + b ≥ 0 and f·w = 0, the dual of
/// control-envs.md §3.3.7 (a linear complementarity problem whose matrix is positive definite,
/// so the solution is unique and is MuJoCo's). Block principal pivoting (Júdice and Pires):
/// guess the rows whose force is free (those with a force in `f`, the warm start), solve the
/// free rows' equations with a Cholesky factor, and exchange every row that breaks a condition
/// (a free force below zero, or a pinned row whose w is below zero by more than rounding);
/// when three exchanges in a row do not reduce the count of broken rows, exchange only the last
/// one (Murty's rule, which cannot cycle). `a` is nr × nr row-major (read in its lower
/// triangle for the factor and by row for w), `reg` the regulariser R. On success `f` holds
/// the forces and the result is true; false leaves `f` as it was. The kernel's
/// `grove_pivot_solve`, statement for statement.
pub fn pivot_solve<T: Real>(nr: usize, a: &[T], reg: &[T], b: &[T], f: &mut [T]) -> bool {
    pivot_rounds(nr, a, reg, b, f, PIVOT_TRIES, MAX_PIVOTS)
}

/// [`pivot_solve`] with its two limits as arguments (the tests run the one-row rule alone).
fn pivot_rounds<T: Real>(nr: usize, a: &[T], reg: &[T], b: &[T], f: &mut [T], patience: usize, rounds: usize) -> bool {
    // A pinned row may read w a little below zero from rounding alone: tolerate that much,
    // relative to the terms w sums.
    let tol = r::<T>(16.0) * T::default_epsilon();
    let mut free: Vec<bool> = f[..nr].iter().map(|&x| x > T::zero()).collect();
    let mut broken = vec![false; nr];
    let mut idx = vec![0usize; nr];
    let (mut chol, mut rhs, mut x, mut g) = (vec![T::zero(); nr * nr], vec![T::zero(); nr], vec![T::zero(); nr], vec![T::zero(); nr]);
    let (mut fewest, mut tries) = (nr + 1, patience);
    for _ in 0..rounds {
        let mut n = 0;
        for (row, &fr) in free.iter().enumerate() {
            if fr {
                idx[n] = row;
                n += 1;
            }
        }
        for p in 0..n {
            for c in 0..=p {
                chol[p * n + c] = a[idx[p] * nr + idx[c]];
            }
            chol[p * n + p] += reg[idx[p]];
            rhs[p] = -b[idx[p]];
        }
        if !cholesky(&mut chol[..n * n], n) {
            return false;
        }
        solve(&chol[..n * n], n, &rhs[..n], &mut x[..n]);
        g.fill(T::zero());
        for p in 0..n {
            g[idx[p]] = x[p];
        }
        let (mut count, mut last) = (0, 0);
        for row in 0..nr {
            let bad = if free[row] {
                g[row] < T::zero()
            } else {
                let (mut w, mut size) = (b[row], b[row].abs());
                for p in 0..n {
                    let t = a[row * nr + idx[p]] * x[p];
                    w += t;
                    size += t.abs();
                }
                w < -tol * size
            };
            broken[row] = bad;
            if bad {
                count += 1;
                last = row;
            }
        }
        if count == 0 {
            f[..nr].copy_from_slice(&g);
            return true;
        }
        if count < fewest || tries > 0 {
            if count < fewest {
                fewest = count;
                tries = patience;
            } else {
                tries -= 1;
            }
            for (fr, &bad) in free.iter_mut().zip(&broken) {
                *fr ^= bad;
            }
        } else {
            free[last] = !free[last];
        }
    }
    false
}

/// Projected Gauss–Seidel on the same problem, from `f`: sweeps until no force moves by more
/// than machine epsilon relative to the largest, at most `sweeps`. The kernel's `grove_pgs`.
fn pgs<T: Real>(sweeps: usize, nr: usize, a: &[T], reg: &[T], b: &[T], diag: &[T], f: &mut [T]) {
    for _ in 0..sweeps {
        let (mut change, mut size) = (T::zero(), T::one());
        for i in 0..nr {
            let mut res = b[i] + reg[i] * f[i];
            for (&aij, &fj) in a[i * nr..(i + 1) * nr].iter().zip(&f[..nr]) {
                res += aij * fj;
            }
            let new = (f[i] - res / diag[i]).max(T::zero());
            change = change.max((new - f[i]).abs());
            size = size.max(new.abs());
            f[i] = new;
        }
        if change <= T::default_epsilon() * size {
            break;
        }
    }
}

/// Generalized acceleration at (q, v, ctrl) including constraint forces: (nv,). With
/// `implicit_damping`, returns (M + hD)⁻¹ (f_smooth + f_con) (MuJoCo's Euler); otherwise
/// M⁻¹ (f_smooth + f_con) (RK4 stages). Updates `warm` (constraint forces by slot). The
/// kernel's `grove_acceleration`, statement for statement.
pub fn acceleration<T: Real>(m: &Model, q: &[T], v: &[T], ctrl: &[T], warm: &mut [T], implicit_damping: bool) -> Vec<T> {
    let nv = m.nv();
    let k = kinematics(m, q);
    let s = smooth(m, &k, q, v, ctrl);
    // f_smooth, then f_smooth + Jᵀλ; M row-major, [i * nv + j] = M[i][j] (the factorisation
    // reads its lower triangle).
    let mut total: Vec<T> = (0..nv).map(|i| s.actuator[i] + s.passive[i] - s.bias[i]).collect();
    let mut l = vec![T::zero(); nv * nv];
    let copy_mass = |l: &mut [T]| (0..nv).for_each(|i| (0..nv).for_each(|j| l[i * nv + j] = s.mass[(i, j)]));
    copy_mass(&mut l);
    if !cholesky(&mut l, nv) {
        return vec![r(f64::NAN); nv];
    }
    let rows = constraint_rows(m, &k, q, v);
    let mut active = vec![false; warm.len()];
    rows.slot.iter().for_each(|&s| active[s] = true);
    for (w, a) in warm.iter_mut().zip(&active) {
        if !a {
            *w = T::zero();
        }
    }
    let nr = rows.slot.len();
    if nr > 0 {
        let jr = |r: usize| &rows.jac[r * nv..(r + 1) * nv];
        let mut au = vec![T::zero(); nv];
        solve(&l, nv, &total, &mut au); // total is still f_smooth
        // Y = M⁻¹ Jᵀ, by row of J.
        let mut y = vec![T::zero(); nr * nv];
        for (c, yc) in y.chunks_mut(nv).enumerate() {
            solve(&l, nv, jr(c), yc);
        }
        let dot = |a: &[T], b: &[T]| a.iter().zip(b).fold(T::zero(), |s, (&x, &y)| s + x * y);
        let mut a = vec![T::zero(); nr * nr];
        let (mut b, mut f, mut diag) = (vec![T::zero(); nr], vec![T::zero(); nr], vec![T::zero(); nr]);
        for i in 0..nr {
            for c in 0..nr {
                a[i * nr + c] = dot(jr(i), &y[c * nv..(c + 1) * nv]);
            }
            b[i] = dot(jr(i), &au) - rows.aref[i];
            f[i] = warm[rows.slot[i]];
            diag[i] = a[i * nr + i] + rows.reg[i];
        }
        // The exact solution by principal pivoting; projected Gauss–Seidel from the warm start
        // when pivoting does not settle (or meets a factor that is not positive definite).
        if !pivot_solve(nr, &a, &rows.reg, &b, &mut f) {
            pgs(m.solver_iterations, nr, &a, &rows.reg, &b, &diag, &mut f);
        }
        for (i, &sl) in rows.slot.iter().enumerate() {
            warm[sl] = f[i];
            for (t, &x) in total.iter_mut().zip(jr(i)) {
                *t += x * f[i];
            }
        }
    }
    if implicit_damping && m.joints.iter().any(|j| j.damping > 0.0) {
        copy_mass(&mut l);
        for (j, jt) in m.joints.iter().enumerate() {
            l[j * nv + j] += r::<T>(m.timestep * jt.damping);
        }
        if !cholesky(&mut l, nv) {
            return vec![r(f64::NAN); nv];
        }
    }
    let mut acc = vec![T::zero(); nv];
    solve(&l, nv, &total, &mut acc);
    acc
}

/// One physics substep of length `model.timestep` with `ctrl` held (control-envs.md §3.3.8).
pub fn substep<T: Real>(m: &Model, q: &mut [T], v: &mut [T], ctrl: &[T], warm: &mut [T]) {
    let h: T = r(m.timestep);
    match m.integrator {
        Integrator::Euler => {
            let a = acceleration(m, q, v, ctrl, warm, true);
            for i in 0..q.len() {
                v[i] += h * a[i];
                q[i] += h * v[i];
            }
        }
        Integrator::Rk4 => {
            let n = q.len();
            let (q0, v0) = (q.to_vec(), v.to_vec());
            let half: T = r(0.5);
            let k1v = v0.clone();
            let k1a = acceleration(m, &q0, &v0, ctrl, warm, false);
            let stage = |kv: &[T], ka: &[T], c: T| -> (Vec<T>, Vec<T>) {
                ((0..n).map(|i| q0[i] + h * c * kv[i]).collect(), (0..n).map(|i| v0[i] + h * c * ka[i]).collect())
            };
            let (q2, v2) = stage(&k1v, &k1a, half);
            let k2a = acceleration(m, &q2, &v2, ctrl, warm, false);
            let (q3, v3) = stage(&v2, &k2a, half);
            let k3a = acceleration(m, &q3, &v3, ctrl, warm, false);
            let (q4, v4) = stage(&v3, &k3a, T::one());
            let k4a = acceleration(m, &q4, &v4, ctrl, warm, false);
            let (b1, b2): (T, T) = (r(RK4_B[0]), r(RK4_B[1]));
            for i in 0..n {
                q[i] = q0[i] + h * (b1 * k1v[i] + b2 * v2[i] + b2 * v3[i] + b1 * v4[i]);
                v[i] = v0[i] + h * (b1 * k1a[i] + b2 * k2a[i] + b2 * k3a[i] + b1 * k4a[i]);
            }
        }
    }
}

/// RK4's weights 1/6 and 1/3, rounded once to the stepper's type (the kernel's GROVE_RK4_B1, _B2).
pub const RK4_B: [f64; 2] = [1.0 / 6.0, 1.0 / 3.0];

/// Fill `model.dof_invweight0` and `model.body_invweight0` from M at qpos0 (MuJoCo's
/// `mj_setConst`): diag(M⁻¹), and the translational COM Jacobian's trace of J M⁻¹ Jᵀ over 3.
pub fn set_invweight0(m: &mut Model) {
    let nv = m.nv();
    let q: Vec<f64> = m.joints.iter().map(|j| j.qpos0).collect();
    let v = vec![0.0; nv];
    let k = kinematics(m, &q);
    let ctrl = vec![0.0; m.nu()];
    let s = smooth(m, &k, &q, &v, &ctrl);
    let minv = s.mass.try_inverse().unwrap_or_else(|| DMatrix::from_element(nv, nv, f64::NAN));
    m.dof_invweight0 = (0..nv).map(|i| minv[(i, i)]).collect();
    let mut jac = vec![[0.0; 3]; nv];
    m.body_invweight0 = (0..m.bodies.len())
        .map(|b| {
            let c = world_point(m, &k, b, m.bodies[b].com);
            jacobian(m, &k, b, c, m.bodies[b].path.len(), &mut jac);
            let mut t = 0.0;
            for (i, ji) in jac.iter().enumerate() {
                for (j, jj) in jac.iter().enumerate() {
                    t += (ji[0] * jj[0] + ji[1] * jj[1]) * minv[(i, j)];
                }
            }
            t / 3.0
        })
        .collect();
}

#[cfg(test)]
mod tests;
