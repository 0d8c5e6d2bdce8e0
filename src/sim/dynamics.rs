//! The CPU reference stepper: planar reduced-coordinate dynamics with MuJoCo's semantics
//! (control-envs.md §3.3). Kinematics, point Jacobians, the mass matrix M, bias forces c,
//! passive forces (damping, springs, inertia-box fluid), soft joint-limit and floor-contact
//! constraints solved by projected Gauss–Seidel, and the Euler and RK4 integrators. Generic over
//! the float type (`f64` matches MuJoCo; `f32` is what the GPU twin computes).
//!
//! Buffers: `q`, `v`: (nv,), MuJoCo's qpos and qvel order (metres, radians; m/s, rad/s);
//! `ctrl`: (nu,); `warm`: (model.n_slots(),) the constraint forces of the previous solve, by slot.

use nalgebra::{DMatrix, DVector};

use super::model::Model;
use super::spec::{Integrator, JointKind};

/// The float types the stepper runs in.
pub trait Real: nalgebra::RealField + Copy + Send + Sync + std::fmt::Display {}
impl Real for f32 {}
impl Real for f64 {}

/// An f64 model constant in the stepper's float type.
#[inline]
pub fn r<T: Real>(x: f64) -> T {
    nalgebra::convert(x)
}

type V2<T> = [T; 2];

#[inline]
fn rot<T: Real>(a: T, p: V2<T>) -> V2<T> {
    let (s, c) = a.sin_cos();
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
    /// Per joint: the world anchor of a hinge, or the world axis of a slide: (nv,).
    pub anchor: Vec<V2<T>>,
}

/// Forward kinematics (MuJoCo's joint-in-body semantics, using q − qpos0).
pub fn kinematics<T: Real>(m: &Model, q: &[T]) -> Kinematics<T> {
    let nb = m.bodies.len();
    let mut k = Kinematics { pos: vec![[T::zero(); 2]; nb], ang: vec![T::zero(); nb], anchor: vec![[T::zero(); 2]; m.nv()] };
    for (b, body) in m.bodies.iter().enumerate() {
        let (pp, pa) = match body.parent {
            Some(p) => (k.pos[p], k.ang[p]),
            None => ([T::zero(); 2], T::zero()),
        };
        let mut pos = add(pp, rot(pa, v2(body.pos)));
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
    }
    k
}

/// World position of a point given in body `b`'s frame.
pub fn world_point<T: Real>(m: &Model, k: &Kinematics<T>, b: usize, p: [f64; 2]) -> V2<T> {
    let _ = m;
    add(k.pos[b], rot(k.ang[b], v2(p)))
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

fn jv<T: Real>(jac: &[[T; 3]], v: &[T]) -> [T; 3] {
    let mut o = [T::zero(); 3];
    for (c, &vi) in jac.iter().zip(v) {
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
    let pdot = jv(scratch, v);
    let mut out = [T::zero(); 2];
    for (i, &j) in path.iter().enumerate() {
        if let JointKind::Hinge { sign } = m.joints[j].kind {
            jacobian(m, k, b, k.anchor[j], i, scratch);
            let adot = jv(scratch, v);
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
    for (b, body) in m.bodies.iter().enumerate() {
        let c = world_point(m, k, b, body.com);
        jacobian(m, k, b, c, body.path.len(), &mut jac);
        let (mb, ib): (T, T) = (r(body.mass), r(body.inertia[2]));
        for i in 0..nv {
            for j in 0..nv {
                mass[(i, j)] += mb * (jac[i][0] * jac[j][0] + jac[i][1] * jac[j][1]) + ib * jac[i][2] * jac[j][2];
            }
        }
        let a = jdot_v(m, k, b, c, v, &mut scratch);
        for i in 0..nv {
            bias[i] += mb * (jac[i][0] * (a[0] - g[0]) + jac[i][1] * (a[1] - g[1]));
        }
        if let Some([rho, mu]) = m.fluid {
            let f = fluid_force(body.mass, body.inertia, k.ang[b] + r(body.inertia_angle), jv(&jac, v), rho, mu);
            for i in 0..nv {
                fluid[i] += jac[i][0] * f[0] + jac[i][1] * f[1] + jac[i][2] * f[2];
            }
        }
    }
    passive += &fluid;
    for (a, act) in m.actuators.iter().enumerate() {
        let u = ctrl[a].clamp(r(act.ctrl_range[0]), r(act.ctrl_range[1]));
        actuator[act.dof] += r::<T>(act.gear) * u;
    }
    Smooth { mass, bias, passive, fluid, actuator }
}

/// MuJoCo's inertia-box fluid force at the COM, in 2-D (control-envs.md §2.3): body of `mass`
/// and principal inertias (I_l, I_t, I_n), e_l at world angle `axis_angle`, COM velocity
/// `vel` = [u̇, ẇ, φ̇]. Returns [F_u, F_w, τ] (N, N, N·m).
fn fluid_force<T: Real>(mass: f64, inertia: [f64; 3], axis_angle: T, vel: [T; 3], rho: f64, mu: f64) -> [T; 3] {
    let [il, it, inn] = inertia;
    let side = |a: f64, b: f64, c: f64| ((b + c - a).max(1e-15) / mass * 6.0).sqrt();
    let (bl, bt, bn) = (side(il, it, inn), side(it, il, inn), side(inn, il, it));
    let d = (bl + bt + bn) / 3.0;
    let pi = std::f64::consts::PI;
    let c1: T = r(3.0 * pi * d * mu);
    let c2: T = r(pi * d * d * d * mu);
    let (cl, ct): (T, T) = (r(0.5 * rho * bt * bn), r(0.5 * rho * bl * bn));
    let cr: T = r(rho * bn * (bl.powi(4) + bt.powi(4)) / 64.0);
    let el = rot(axis_angle, [T::one(), T::zero()]);
    let et = perp(el);
    let vl = vel[0] * el[0] + vel[1] * el[1];
    let vt = vel[0] * et[0] + vel[1] * et[1];
    let fl = -(c1 * vl + cl * vl.abs() * vl);
    let ft = -(c1 * vt + ct * vt.abs() * vt);
    let w = vel[2];
    [fl * el[0] + ft * et[0], fl * el[1] + ft * et[1], -(c2 * w + cr * w.abs() * w)]
}

/// MuJoCo's impedance and reference-acceleration gains (`getimpedance`, `mj_makeImpedance`):
/// returns (imp, K, B) for a row at distance `pos` with `margin`.
fn impedance<T: Real>(solref: [f64; 2], solimp: [f64; 5], pos: T, margin: T, h: f64) -> (T, T, T) {
    let [dmin, dmax, width, mid, power] = solimp;
    let dmin = dmin.clamp(1e-4, 0.9999);
    let dmax = dmax.clamp(1e-4, 0.9999);
    let tc = solref[0].max(2.0 * h);
    let dr = solref[1];
    let imp: T = if dmin == dmax || width <= 1e-15 {
        r(0.5 * (dmin + dmax))
    } else {
        let x = ((pos - margin) / r(width)).abs();
        if x >= T::one() {
            r(dmax)
        } else if x <= T::zero() {
            r(dmin)
        } else {
            let y = if power == 1.0 {
                x
            } else if x <= r(mid) {
                r::<T>(1.0 / mid.powf(power - 1.0)) * x.powf(r(power))
            } else {
                T::one() - r::<T>(1.0 / (1.0 - mid).powf(power - 1.0)) * (T::one() - x).powf(r(power))
            };
            r::<T>(dmin) + y * r(dmax - dmin)
        }
    };
    let k = r(1.0 / (dmax * dmax * tc * tc * dr * dr));
    let b = r(2.0 / (dmax * tc));
    (imp, k, b)
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
                let (imp, kk, bb) = impedance(jt.solref, jt.solimp, pos, T::zero(), h);
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
                let (imp, kk, bb) = impedance(c.solref, c.solimp, dist, margin, h);
                let tran: T = r(m.body_invweight0[c.body]);
                let r0 = (T::one() - imp) / imp * (tran + mu * mu * tran);
                let rpy = r::<T>(2.0) * mu * mu * r0;
                for (edge, (t, reg)) in [(mu, rpy), (-mu, rpy), (T::zero(), rpy / r(2.0))].into_iter().enumerate() {
                    let start = rows.jac.len();
                    let mut jv_row = T::zero();
                    for i in 0..nv {
                        let x = jac[i][1] + t * jac[i][0];
                        rows.jac.push(x);
                        jv_row += x * v[i];
                    }
                    let _ = start;
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

/// Generalized acceleration at (q, v, ctrl) including constraint forces. With
/// `implicit_damping`, returns (M + hD)⁻¹ (f_smooth + f_con) (MuJoCo's Euler); otherwise
/// M⁻¹ (f_smooth + f_con) (RK4 stages). Updates `warm` (constraint forces by slot).
pub fn acceleration<T: Real>(m: &Model, q: &[T], v: &[T], ctrl: &[T], warm: &mut [T], implicit_damping: bool) -> DVector<T> {
    let nv = m.nv();
    let k = kinematics(m, q);
    let s = smooth(m, &k, q, v, ctrl);
    let fsm = &s.actuator + &s.passive - &s.bias;
    let Some(chol) = s.mass.clone().cholesky() else {
        return DVector::from_element(nv, r::<T>(f64::NAN));
    };
    let rows = constraint_rows(m, &k, q, v);
    let mut total = fsm.clone();
    let active: Vec<bool> = {
        let mut a = vec![false; warm.len()];
        rows.slot.iter().for_each(|&s| a[s] = true);
        a
    };
    for (w, a) in warm.iter_mut().zip(&active) {
        if !a {
            *w = T::zero();
        }
    }
    let nr = rows.slot.len();
    if nr > 0 {
        let jmat = DMatrix::from_row_slice(nr, nv, &rows.jac);
        let au = chol.solve(&fsm);
        let minv_jt = chol.solve(&jmat.transpose());
        let a = &jmat * minv_jt;
        let b = &jmat * au - DVector::from_column_slice(&rows.aref);
        let mut f: Vec<T> = rows.slot.iter().map(|&s| warm[s]).collect();
        let diag: Vec<T> = (0..nr).map(|i| a[(i, i)] + rows.reg[i]).collect();
        // Sweeps until no force moves by more than machine epsilon (relative), at most
        // `solver_iterations`; the solution is unique (A + R is positive definite).
        for _ in 0..m.solver_iterations {
            let (mut change, mut size) = (T::zero(), T::one());
            for i in 0..nr {
                let mut res = b[i] + rows.reg[i] * f[i];
                for (jj, fj) in f.iter().enumerate() {
                    res += a[(i, jj)] * *fj;
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
        for (i, &sl) in rows.slot.iter().enumerate() {
            warm[sl] = f[i];
        }
        total += jmat.transpose() * DVector::from_vec(f);
    }
    if implicit_damping && m.joints.iter().any(|j| j.damping > 0.0) {
        let mut mh = s.mass;
        for (j, jt) in m.joints.iter().enumerate() {
            mh[(j, j)] += r::<T>(m.timestep * jt.damping);
        }
        match mh.cholesky() {
            Some(c) => c.solve(&total),
            None => DVector::from_element(nv, r::<T>(f64::NAN)),
        }
    } else {
        chol.solve(&total)
    }
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
            let stage = |kv: &[T], ka: &DVector<T>, c: T| -> (Vec<T>, Vec<T>) {
                ((0..n).map(|i| q0[i] + h * c * kv[i]).collect(), (0..n).map(|i| v0[i] + h * c * ka[i]).collect())
            };
            let (q2, v2) = stage(&k1v, &k1a, half);
            let k2a = acceleration(m, &q2, &v2, ctrl, warm, false);
            let (q3, v3) = stage(&v2, &k2a, half);
            let k3a = acceleration(m, &q3, &v3, ctrl, warm, false);
            let (q4, v4) = stage(&v3, &k3a, T::one());
            let k4a = acceleration(m, &q4, &v4, ctrl, warm, false);
            let (b1, b2): (T, T) = (r(1.0 / 6.0), r(1.0 / 3.0));
            for i in 0..n {
                q[i] = q0[i] + h * (b1 * k1v[i] + b2 * v2[i] + b2 * v3[i] + b1 * v4[i]);
                v[i] = v0[i] + h * (b1 * k1a[i] + b2 * k2a[i] + b2 * k3a[i] + b1 * k4a[i]);
            }
        }
    }
}

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
