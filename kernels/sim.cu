// sim.cu: steps many environments of one model on the GPU, each environment on one thread, whole
// episodes in one launch.
//
// Twin of the CPU reference stepper (src/sim/dynamics.rs, src/sim/env.rs) in f32, bit for bit:
// the same equations (control-envs.md §3.3), constraint slots, row order, warm-started pivoting
// solve with its projected Gauss-Seidel fallback, and Philox reset draws, with every sum,
// product and loop in the CPU's order. Nothing is fused (--fmad=false; no fmaf here), + - * /
// and sqrtf are IEEE (NVRTC's default -prec-div, -prec-sqrt, no -ftz), the only other
// functions are grove_math.cuh's (grove_sincos, grove_pow, grove_ln64, grove_cos_turns64, twins
// of src/program/fastmath.rs; never CUDA's sinf, powf, log, cos), and every constant combined
// from the model comes from the host, combined once in f64 (the Rust side's Soft,
// fluid_coefficients, RK4_B) and rounded.
// The host side is src/backend/cuda/sim.rs. NVRTC compiles this file after `grove_env.h`, which
// `env_header` generates from a compiled Model: the sizes (GROVE_NV, GROVE_NB, GROVE_NU,
// GROVE_NLIM, GROVE_NCAP, ...), the model constants as `__device__ const` tables, and the
// observation and health checks as straight-line functions. One module per (env, profile).
//
// State lives in registers and local memory: q, v (GROVE_NV), the warm-start forces
// (GROVE_SLOTS), the return and the step count. Two kernels play episodes: grove_sim_rollout
// with open-loop actions from a buffer, one environment per thread, and grove_control_rollout
// (with grove_control_reduce) where actions come from each individual's program reading the
// observation, persistent threads taking (individual, episode) pairs from a queue as their
// episodes end (the control task; CPU reference src/backend/cpu/control.rs, host side
// src/backend/cuda/control.rs), one thread an episode or, built with GROVE_CTRL_LANES, a group
// of lanes an episode sharing out its constraint rows through shared memory (GroveLanes).

typedef float real;  // also spelled `float` in grove_env.h

#include "grove_common.h"

// Mirrors SimParams in src/backend/cuda/sim.rs.
struct GroveSimParams {
    unsigned n_envs;           // E: environments (threads)
    unsigned steps;            // T: control steps at most
    unsigned generation;       // Philox counter word 0 of the reset draws
    unsigned noise;            // 1: reset noise; 0: the rest pose
    unsigned long long seed;   // Philox key
    unsigned record;           // 1: write the state after every step to `traj`
    unsigned first_env;        // Philox counter word 1 of env e is first_env + e
};
GROVE_CHECK_LAYOUT(GroveSimParams);

#define GROVE_SLOTS (2 * GROVE_NLIM + 6 * GROVE_NCAP)
#define GROVE_SLOTS_ALLOC (GROVE_SLOTS > 0 ? GROVE_SLOTS : 1)

// The lanes that play one episode (grove_control_rollout built with GROVE_CTRL_LANES = G > 1).
// Every lane of the group keeps the whole state and runs the rest of the step itself
// (kinematics, the smooth dynamics, M's factor, the pivoting solve, the policy), the same
// operations on the same values, so the lanes never disagree; the constraint rows are shared out
// through the group's words of shared memory (GROVE_LANE_WORDS), where every lane reads the
// results (grove_forces: rows l, l + G, ... of Y = M⁻¹ Jᵀ, A = J Y, b and A's diagonal plus R).
// Each value is computed with the one-lane operations, every sum in the one-lane order, so the
// bits are the CPU's whichever lane computes it. The smooth dynamics were shared out too, by
// body and by M's entry, until 2026-12-07: with the path-sparse loops each lane's own copy was
// 3-8 % faster at 4 to 32 lanes (docs/benchmarks.md, session 12). G = 1: one lane per episode,
// everything in its registers and local memory (grove_sim_rollout, and the roll-out's default).
template <int G> struct GroveLanes {
    unsigned lane;  // 0 .. G-1 within the group
    unsigned mask;  // the group's lanes within its warp
    real* mem;      // the group's GROVE_LANE_WORDS words of shared memory
    __device__ void sync() const { __syncwarp(mask); }
};
template <> struct GroveLanes<1> {
    static constexpr unsigned lane = 0;
    __device__ void sync() const {}
};
// Shared words per group: the constraint rows' (GROVE_ROW_WORDS: A S·S, Y S·NV, b S, diag S,
// for S = GROVE_SLOTS_ALLOC; grove_forces). src/backend/cuda/control.rs lane_words mirrors this.
#define GROVE_ROW_WORDS (GROVE_SLOTS_ALLOC * GROVE_SLOTS_ALLOC + GROVE_SLOTS_ALLOC * GROVE_NV + 2 * GROVE_SLOTS_ALLOC)
#define GROVE_LANE_WORDS GROVE_ROW_WORDS

// A constraint's softness, one row of grove_lim_soft / grove_cap_soft (sim.rs soft_row, from
// dynamics.rs Soft): the fixed impedance, dmin, dmax, dmax - dmin, width, mid, power, the two
// halves' scales 1/mid^(power-1) and 1/(1-mid)^(power-1), and the reference gains K and B.
#define GROVE_SOFT_FIXED 0
#define GROVE_SOFT_DMIN 1
#define GROVE_SOFT_DMAX 2
#define GROVE_SOFT_SPAN 3
#define GROVE_SOFT_WIDTH 4
#define GROVE_SOFT_MID 5
#define GROVE_SOFT_POWER 6
#define GROVE_SOFT_LO 7
#define GROVE_SOFT_HI 8
#define GROVE_SOFT_K 9
#define GROVE_SOFT_B 10
#define GROVE_SOFT_N 11
static_assert(GROVE_SOFT_N == GROVE_SOFT_COLUMNS, "grove_env.h's soft tables have GROVE_SOFT_N columns");
// grove_lim_imode / grove_cap_imode: how the impedance depends on the distance.
#define GROVE_IMP_FIXED 0
#define GROVE_IMP_LINEAR 1
#define GROVE_IMP_POW 2

// ---- reset draws: Philox from rng.cuh (pasted in front of grove_env.h by sim_text) --------

// One reset draw (State::reset): kind 0 uniform on ±scale, 1 scale·N(0, 1) by Box-Muller.
// The stream is rng.cuh's, the twin of src/rng.rs, and ln and cos are grove's (env.rs), so the
// draws are the CPU's bits.
__device__ inline double grove_noise(GroveStream& s, int kind, double scale) {
    if (kind == 0) return scale * (2.0 * grove_unit_f64(s) - 1.0);
    const double u1 = 1.0 - grove_unit_f64(s), u2 = grove_unit_f64(s);
    return scale * sqrt(-2.0 * grove_ln64(u1)) * grove_cos_turns64(u2);
}

// ---- kinematics and Jacobians (dynamics.rs: kinematics, jacobian, jdot_v) ------------------
//
// Every loop over bodies, joints, path entries, limits and capsules is unrolled (`#pragma
// unroll`) and the model's tables are `__device__ const` (grove_env.h), so each index into a
// per-thread array here (GroveKin, a body's Jacobian, M, the Cholesky factor) is a constant and
// the arrays live in registers; with a loop variable or a `__constant__` table entry as the
// index they lived in local memory, every update a load and a store. smooth and jdot_v are
// inlined into grove_acceleration for the same reason (arrays passed to a call are in memory);
// grove_acceleration stays out of line (RK4 calls it four times a substep). The loops over the
// active constraint rows (their count known only at run time) stay loops, `#pragma unroll 1`:
// unrolled to the rows' compile-time maximum they made Walker2d's code half as large again.
// None of this changes an operation or its order: the bits are the CPU's.

struct GroveKin {
    real pu[GROVE_NB], pw[GROVE_NB], ang[GROVE_NB];  // body frame origins and angles
    real au[GROVE_NV], aw[GROVE_NV];                 // hinge anchors, or slide axes, in the world
    real sn[GROVE_NB], cs[GROVE_NB];                 // sin and cos of ang (dynamics.rs Kinematics::sc)
};

__device__ inline void grove_rot(real a, real x, real y, real& ox, real& oy) {
    real s, c;
    grove_sincos(a, &s, &c);
    ox = c * x - s * y;
    oy = s * x + c * y;
}

__device__ void grove_kinematics(const real* q, GroveKin& k) {
#pragma unroll
    for (int b = 0; b < GROVE_NB; ++b) {
        const int p = grove_parent[b];
        const real ppu = p >= 0 ? k.pu[p] : 0.0f, ppw = p >= 0 ? k.pw[p] : 0.0f, pa = p >= 0 ? k.ang[p] : 0.0f;
        real ox, oy;
        if (p >= 0) {  // the parent's angle, rotated by its kept sine and cosine
            ox = k.cs[p] * grove_bpos[b][0] - k.sn[p] * grove_bpos[b][1];
            oy = k.sn[p] * grove_bpos[b][0] + k.cs[p] * grove_bpos[b][1];
        } else {
            grove_rot(pa, grove_bpos[b][0], grove_bpos[b][1], ox, oy);
        }
        real pu = ppu + ox, pw = ppw + oy, ang = pa + grove_bang[b];
#pragma unroll
        for (int j = 0; j < GROVE_NV; ++j) {
            if (grove_jbody[j] != b) continue;
            const real dq = q[j] - grove_qpos0[j];
            if (grove_jslide[j]) {
                real ax, ay;
                grove_rot(ang, grove_jaxis[j][0], grove_jaxis[j][1], ax, ay);
                pu += ax * dq;
                pw += ay * dq;
                k.au[j] = ax;
                k.aw[j] = ay;
            } else {
                real ax, ay;
                grove_rot(ang, grove_jpos[j][0], grove_jpos[j][1], ax, ay);
                const real a0 = pu + ax, a1 = pw + ay, th = grove_jaxis[j][0] * dq;
                real rx, ry;
                grove_rot(th, pu - a0, pw - a1, rx, ry);
                pu = a0 + rx;
                pw = a1 + ry;
                ang += th;
                k.au[j] = a0;
                k.aw[j] = a1;
            }
        }
        k.pu[b] = pu;
        k.pw[b] = pw;
        k.ang[b] = ang;
        grove_sincos(ang, &k.sn[b], &k.cs[b]);
    }
}

__device__ inline void grove_world_point(const GroveKin& k, int b, real x, real y, real& u, real& w) {
    real ox, oy;
    ox = k.cs[b] * x - k.sn[b] * y;  // grove_rot by the body's kept sine and cosine
    oy = k.sn[b] * x + k.cs[b] * y;
    u = k.pu[b] + ox;
    w = k.pw[b] + oy;
}

// Columns [u̇, ẇ, φ̇] of the point (pu, pw) moving with body b, from the first `upto` joints of
// its path.
__device__ void grove_jacobian(const GroveKin& k, int b, real pu, real pw, int upto, real J[GROVE_NV][3]) {
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) J[i][0] = J[i][1] = J[i][2] = 0.0f;
#pragma unroll
    for (int n = 0; n < upto; ++n) {
        const int j = grove_path[b][n];
        if (grove_jslide[j]) {
            J[j][0] += k.au[j];
            J[j][1] += k.aw[j];
        } else {
            const real s = grove_jaxis[j][0];
            J[j][0] += s * -(pw - k.aw[j]);
            J[j][1] += s * (pu - k.au[j]);
            J[j][2] += s;
        }
    }
}

// J v over the columns of the first `upto` joints of body b's path, in path order (increasing
// DOF index), the only columns grove_jacobian(k, b, ., ., upto, J) can make nonzero
// (dynamics.rs jv_path). The other columns are never read, here or by the callers below.
__device__ inline void grove_jv_path(const real J[GROVE_NV][3], int b, int upto, const real* v, real out[3]) {
    out[0] = out[1] = out[2] = 0.0f;
#pragma unroll
    for (int n = 0; n < upto; ++n) {
        const int i = grove_path[b][n];
        out[0] += J[i][0] * v[i];
        out[1] += J[i][1] * v[i];
        out[2] += J[i][2] * v[i];
    }
}

__device__ inline void grove_jdot_v(const GroveKin& k, int b, real pu, real pw, const real* v, real out[2]) {
    real J[GROVE_NV][3], pdot[3], adot[3];
    const int len = grove_pathlen[b];
    grove_jacobian(k, b, pu, pw, len, J);
    grove_jv_path(J, b, len, v, pdot);
    out[0] = out[1] = 0.0f;
#pragma unroll
    for (int n = 0; n < len; ++n) {
        const int j = grove_path[b][n];
        if (grove_jslide[j]) continue;
        grove_jacobian(k, b, k.au[j], k.aw[j], n, J);
        grove_jv_path(J, b, n, v, adot);
        const real s = grove_jaxis[j][0];
        out[0] += s * -(pdot[1] - adot[1]) * v[j];
        out[1] += s * (pdot[0] - adot[0]) * v[j];
    }
}

// ---- smooth dynamics (dynamics.rs: smooth, fluid_force) -----------------------------------

// M (armature on the diagonal; its lower triangle, which is all that is read, the upper 0) and
// f = (actuator + passive) - bias, each part summed on its own as dynamics.rs `smooth` does
// (passive = springs and damping + fluid). A body moves only the DOFs of its path, so it adds to
// the entries and forces of those alone: the columns of the others are zero, and their terms
// would add ±0 to sums that start at +0 (never −0 after that), which changes no bit of a finite
// sum. The same loops as the CPU's, so non-finite states match too.
__device__ inline void grove_smooth(const GroveKin& k, const real* q, const real* v, const real* ctrl, real M[GROVE_NV][GROVE_NV],
                             real f[GROVE_NV]) {
    real J[GROVE_NV][3], bias[GROVE_NV], fluid[GROVE_NV], act[GROVE_NV];
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) {
#pragma unroll
        for (int j = 0; j < GROVE_NV; ++j) M[i][j] = 0.0f;
        M[i][i] = grove_armature[i];
        f[i] = -grove_damping[i] * v[i] - grove_stiffness[i] * (q[i] - grove_springref[i]);  // passive
        bias[i] = fluid[i] = act[i] = 0.0f;
    }
#pragma unroll
    for (int b = 0; b < GROVE_NB; ++b) {
        real cu, cw;
        const int len = grove_pathlen[b];
        grove_world_point(k, b, grove_com[b][0], grove_com[b][1], cu, cw);
        grove_jacobian(k, b, cu, cw, len, J);
        const real mb = grove_mass[b], ib = grove_inertia_n[b];
#pragma unroll
        for (int n = 0; n < len; ++n)
#pragma unroll
            for (int m = 0; m <= n; ++m) {
                const int i = grove_path[b][n], j = grove_path[b][m];  // j <= i: a path is increasing
                M[i][j] += mb * (J[i][0] * J[j][0] + J[i][1] * J[j][1]) + ib * J[i][2] * J[j][2];
            }
        real a[2];
        grove_jdot_v(k, b, cu, cw, v, a);
#pragma unroll
        for (int n = 0; n < len; ++n) {
            const int i = grove_path[b][n];
            bias[i] += mb * (J[i][0] * (a[0] - GROVE_GU) + J[i][1] * (a[1] - GROVE_GW));
        }
#if GROVE_FLUID
        real vel[3];
        grove_jv_path(J, b, len, v, vel);
        real elu, elw;
        grove_rot(k.ang[b] + grove_iang[b], 1.0f, 0.0f, elu, elw);
        const real etu = -elw, etw = elu;
        const real vl = vel[0] * elu + vel[1] * elw, vt = vel[0] * etu + vel[1] * etw, om = vel[2];
        const real* c = grove_fluid[b];  // c1, c2, cL, cT, cR
        const real fl = -(c[0] * vl + c[2] * fabsf(vl) * vl), ft = -(c[0] * vt + c[3] * fabsf(vt) * vt);
        const real fu = fl * elu + ft * etu, fw = fl * elw + ft * etw, tau = -(c[1] * om + c[4] * fabsf(om) * om);
#pragma unroll
        for (int n = 0; n < len; ++n) {
            const int i = grove_path[b][n];
            fluid[i] += J[i][0] * fu + J[i][1] * fw + J[i][2] * tau;
        }
#endif
    }
#pragma unroll
    for (int a = 0; a < GROVE_NU; ++a) act[grove_act_dof[a]] += grove_gear[a] * fminf(fmaxf(ctrl[a], grove_ctrl[a][0]), grove_ctrl[a][1]);
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) f[i] = (act[i] + (f[i] + fluid[i])) - bias[i];
}

// In-place Cholesky, lower triangle; false when M is not positive definite.
__device__ bool grove_cholesky(real L[GROVE_NV][GROVE_NV]) {
#pragma unroll
    for (int j = 0; j < GROVE_NV; ++j) {
        real d = L[j][j];
#pragma unroll
        for (int k = 0; k < j; ++k) d -= L[j][k] * L[j][k];
        if (!(d > 0.0f)) return false;
        d = sqrtf(d);
        L[j][j] = d;
#pragma unroll
        for (int i = j + 1; i < GROVE_NV; ++i) {
            real s = L[i][j];
#pragma unroll
            for (int k = 0; k < j; ++k) s -= L[i][k] * L[j][k];
            L[i][j] = s / d;
        }
    }
    return true;
}

__device__ void grove_solve(const real L[GROVE_NV][GROVE_NV], const real* b, real* x) {
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) {
        real s = b[i];
#pragma unroll
        for (int k = 0; k < i; ++k) s -= L[i][k] * x[k];
        x[i] = s / L[i][i];
    }
#pragma unroll
    for (int i = GROVE_NV - 1; i >= 0; --i) {
        real s = x[i];
#pragma unroll
        for (int k = i + 1; k < GROVE_NV; ++k) s -= L[k][i] * x[k];
        x[i] = s / L[i][i];
    }
}

// ---- constraints (dynamics.rs: impedance, constraint_rows, acceleration) ------------------

// The impedance of a row at `pos` with `margin` (dynamics.rs Soft::impedance). s: a row of
// grove_lim_soft or grove_cap_soft (GROVE_SOFT_* below, combined on the host in f64); mode:
// GROVE_IMP_FIXED, _LINEAR or _POW.
__device__ inline real grove_imp(const real s[GROVE_SOFT_N], int mode, real pos, real margin) {
    if (mode == GROVE_IMP_FIXED) return s[GROVE_SOFT_FIXED];
    const real x = fabsf((pos - margin) / s[GROVE_SOFT_WIDTH]);
    if (x >= 1.0f) return s[GROVE_SOFT_DMAX];
    if (x <= 0.0f) return s[GROVE_SOFT_DMIN];
    real y;
    if (mode == GROVE_IMP_LINEAR) y = x;
    else if (x <= s[GROVE_SOFT_MID]) y = s[GROVE_SOFT_LO] * grove_pow(x, s[GROVE_SOFT_POWER]);
    else y = 1.0f - s[GROVE_SOFT_HI] * grove_pow(1.0f - x, s[GROVE_SOFT_POWER]);
    return s[GROVE_SOFT_DMIN] + y * s[GROVE_SOFT_SPAN];
}

#if GROVE_SLOTS > 0
// Dynamic-size twins of grove_cholesky and grove_solve (dynamics.rs cholesky, solve) over an
// n × n row-major array, for the pivoting solve's free rows.
__device__ inline bool grove_cholesky_n(real* l, int n) {
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
        real d = l[j * n + j];
#pragma unroll 1
        for (int k = 0; k < j; ++k) d -= l[j * n + k] * l[j * n + k];
        if (!(d > 0.0f)) return false;
        d = sqrtf(d);
        l[j * n + j] = d;
#pragma unroll 1
        for (int i = j + 1; i < n; ++i) {
            real s = l[i * n + j];
#pragma unroll 1
            for (int k = 0; k < j; ++k) s -= l[i * n + k] * l[j * n + k];
            l[i * n + j] = s / d;
        }
    }
    return true;
}

__device__ inline void grove_solve_n(const real* l, int n, const real* b, real* x) {
#pragma unroll 1
    for (int i = 0; i < n; ++i) {
        real s = b[i];
#pragma unroll 1
        for (int k = 0; k < i; ++k) s -= l[i * n + k] * x[k];
        x[i] = s / l[i * n + i];
    }
#pragma unroll 1
    for (int i = n - 1; i >= 0; --i) {
        real s = x[i];
#pragma unroll 1
        for (int k = i + 1; k < n; ++k) s -= l[k * n + i] * x[k];
        x[i] = s / l[i * n + i];
    }
}

// The constraint forces exactly, by block principal pivoting (dynamics.rs pivot_solve, statement
// for statement): f >= 0 with w = (A + R) f + b >= 0 and f.w = 0. Free rows start as those with
// a warm-start force; each round factors the free rows, solves them, and exchanges every row
// that breaks a condition, or only the last one after GROVE_PIVOT_TRIES rounds without fewer.
// False (lam untouched) when it does not settle within GROVE_PIVOTS rounds or a factor fails.
__device__ __noinline__ bool grove_pivot_solve(int nr, const real (*A)[GROVE_SLOTS_ALLOC], const real* R, const real* b, real* lam) {
    const real tol = 16.0f * 1.1920929e-7f;
    bool freed[GROVE_SLOTS_ALLOC], broken[GROVE_SLOTS_ALLOC];
    int idx[GROVE_SLOTS_ALLOC];
    real chol[GROVE_SLOTS_ALLOC * GROVE_SLOTS_ALLOC], rhs[GROVE_SLOTS_ALLOC], x[GROVE_SLOTS_ALLOC], g[GROVE_SLOTS_ALLOC];
#pragma unroll 1
    for (int r = 0; r < nr; ++r) freed[r] = lam[r] > 0.0f;
    int fewest = nr + 1, tries = GROVE_PIVOT_TRIES;
#pragma unroll 1
    for (int round = 0; round < GROVE_PIVOTS; ++round) {
        int n = 0;
#pragma unroll 1
        for (int r = 0; r < nr; ++r)
            if (freed[r]) idx[n++] = r;
#pragma unroll 1
        for (int p = 0; p < n; ++p) {
#pragma unroll 1
            for (int c = 0; c <= p; ++c) chol[p * n + c] = A[idx[p]][idx[c]];
            chol[p * n + p] += R[idx[p]];
            rhs[p] = -b[idx[p]];
        }
        if (!grove_cholesky_n(chol, n)) return false;
        grove_solve_n(chol, n, rhs, x);
#pragma unroll 1
        for (int r = 0; r < nr; ++r) g[r] = 0.0f;
#pragma unroll 1
        for (int p = 0; p < n; ++p) g[idx[p]] = x[p];
        int count = 0, last = 0;
#pragma unroll 1
        for (int r = 0; r < nr; ++r) {
            bool bad;
            if (freed[r]) {
                bad = g[r] < 0.0f;
            } else {
                real w = b[r], size = fabsf(b[r]);
#pragma unroll 1
                for (int p = 0; p < n; ++p) {
                    const real t = A[r][idx[p]] * x[p];
                    w += t;
                    size += fabsf(t);
                }
                bad = w < -tol * size;
            }
            broken[r] = bad;
            if (bad) {
                ++count;
                last = r;
            }
        }
        if (count == 0) {
#pragma unroll 1
            for (int r = 0; r < nr; ++r) lam[r] = g[r];
            return true;
        }
        if (count < fewest || tries > 0) {
            if (count < fewest) {
                fewest = count;
                tries = GROVE_PIVOT_TRIES;
            } else {
                --tries;
            }
#pragma unroll 1
            for (int r = 0; r < nr; ++r) freed[r] = freed[r] != broken[r];
        } else {
            freed[last] = !freed[last];
        }
    }
    return false;
}
#endif

#if GROVE_SLOTS > 0
// The constraint forces of the `nr` active rows (J, R, aref, slot_of) given M's factor L and the
// unconstrained acceleration au: Y = M⁻¹ Jᵀ by row of J, A = J Y, b = J au − aref and A's
// diagonal plus R (rows shared out among the lanes: GroveLanes), then λ by principal pivoting
// from the warm start, projected Gauss-Seidel when pivoting does not settle, as on the CPU;
// stores λ in `warm` and adds Jᵀλ to `total`. Y, A, b and diag are the lane's local arrays
// (G = 1) or the group's shared words.
template <int G>
__device__ __forceinline__ void grove_forces(const GroveLanes<G>& lanes, int nr, const real L[GROVE_NV][GROVE_NV], const real (*J)[GROVE_NV],
                                             const real* R, const real* aref, const real* au, const int* slot_of, real* warm,
                                             real (*Y)[GROVE_NV], real (*A)[GROVE_SLOTS_ALLOC], real* b, real* diag, real* lam,
                                             real* total) {
    lanes.sync();  // every lane has read the rows of its previous call
#pragma unroll 1
    for (int r = lanes.lane; r < nr; r += G) grove_solve(L, J[r], Y[r]);  // Y = M⁻¹ Jᵀ, by row of J
    lanes.sync();
#pragma unroll 1
    for (int r = lanes.lane; r < nr; r += G) {
#pragma unroll 1
        for (int c = 0; c < nr; ++c) {
            real s = 0.0f;
#pragma unroll
            for (int i = 0; i < GROVE_NV; ++i) s += J[r][i] * Y[c][i];
            A[r][c] = s;
        }
        real s = 0.0f;
#pragma unroll
        for (int i = 0; i < GROVE_NV; ++i) s += J[r][i] * au[i];
        b[r] = s - aref[r];
        diag[r] = A[r][r] + R[r];
    }
    lanes.sync();
#pragma unroll 1
    for (int r = 0; r < nr; ++r) lam[r] = warm[slot_of[r]];
    // The exact solution by principal pivoting; projected Gauss-Seidel from the warm start
    // when pivoting does not settle, as on the CPU.
    if (!grove_pivot_solve(nr, A, R, b, lam)) {
        for (int it = 0; it < GROVE_PGS; ++it) {
            real change = 0.0f, size = 1.0f;
#pragma unroll 1
            for (int r = 0; r < nr; ++r) {
                real res = b[r] + R[r] * lam[r];
#pragma unroll 4
                for (int c = 0; c < nr; ++c) res += A[r][c] * lam[c];
                const real nw = fmaxf(lam[r] - res / diag[r], 0.0f);
                change = fmaxf(change, fabsf(nw - lam[r]));
                size = fmaxf(size, fabsf(nw));
                lam[r] = nw;
            }
            if (change <= 1.1920929e-7f * size) break;
        }
    }
#pragma unroll 1
    for (int r = 0; r < nr; ++r) {
        warm[slot_of[r]] = lam[r];
#pragma unroll
        for (int i = 0; i < GROVE_NV; ++i) total[i] += J[r][i] * lam[r];
    }
}
#endif

// Generalized acceleration including constraint forces; updates `warm`. With `implicit`,
// (M + hD)⁻¹ (f + Jᵀλ) (Euler), else M⁻¹ (f + Jᵀλ) (RK4 stages). Out of line: the kernel and
// its RK4 stages share one copy. The state and controls are copied into registers first: read
// through the pointers, every use was a load again (a store to a constraint row might alias).
// With G > 1 lanes the group's lanes call it together with equal arguments (GroveLanes).
template <int G>
__device__ __noinline__ void grove_acceleration(GroveLanes<G> lanes, const real* q_in, const real* v_in, const real* ctrl_in, real* warm, bool implicit, real* acc) {
    real q[GROVE_NV], v[GROVE_NV], ctrl[GROVE_NU];
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) {
        q[i] = q_in[i];
        v[i] = v_in[i];
    }
#pragma unroll
    for (int i = 0; i < GROVE_NU; ++i) ctrl[i] = ctrl_in[i];
    GroveKin k;
    grove_kinematics(q, k);
    real M[GROVE_NV][GROVE_NV], L[GROVE_NV][GROVE_NV], f[GROVE_NV];
    grove_smooth(k, q, v, ctrl, M, f);
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i)
#pragma unroll
        for (int j = 0; j < GROVE_NV; ++j) L[i][j] = M[i][j];
    if (!grove_cholesky(L)) {
#pragma unroll
        for (int i = 0; i < GROVE_NV; ++i) acc[i] = __int_as_float(0x7fffffff);
        return;
    }
    real total[GROVE_NV];
#pragma unroll
    for (int i = 0; i < GROVE_NV; ++i) total[i] = f[i];
#if GROVE_SLOTS > 0
    // Active rows, compacted in slot order (limits, then capsule ends × 3 edges).
    real J[GROVE_SLOTS_ALLOC][GROVE_NV], R[GROVE_SLOTS_ALLOC], aref[GROVE_SLOTS_ALLOC];
    int slot_of[GROVE_SLOTS_ALLOC];
    bool active[GROVE_SLOTS_ALLOC];
    for (int s = 0; s < GROVE_SLOTS; ++s) active[s] = false;
    int nr = 0;
#if GROVE_NLIM > 0
#pragma unroll
    for (int l = 0; l < GROVE_NLIM; ++l) {
        const int j = grove_lim_joint[l];
        for (int side = 0; side < 2; ++side) {
            const real sign = side == 0 ? 1.0f : -1.0f;
            const real pos = side == 0 ? q[j] - grove_lim_range[l][0] : grove_lim_range[l][1] - q[j];
            if (pos < 0.0f) {
                const real imp = grove_imp(grove_lim_soft[l], grove_lim_imode[l], pos, 0.0f);
#pragma unroll
                for (int i = 0; i < GROVE_NV; ++i) J[nr][i] = 0.0f;
                J[nr][j] = sign;
                R[nr] = (1.0f - imp) / imp * grove_lim_invweight[l];
                aref[nr] = -grove_lim_soft[l][GROVE_SOFT_B] * sign * v[j] - grove_lim_soft[l][GROVE_SOFT_K] * imp * pos;
                slot_of[nr] = 2 * l + side;
                active[2 * l + side] = true;
                ++nr;
            }
        }
    }
#endif
#if GROVE_NCAP > 0
#pragma unroll
    for (int c = 0; c < GROVE_NCAP; ++c) {
        const int b = grove_cap_body[c];
        for (int e = 0; e < 2; ++e) {
            real eu, ew;
            grove_world_point(k, b, grove_cap_ends[c][e][0], grove_cap_ends[c][e][1], eu, ew);
            const real rad = grove_cap_radius[c], margin = grove_cap_margin[c];
            const real dist = ew - GROVE_FLOOR - rad;
            if (dist < margin) {
                real Jp[GROVE_NV][3];
                grove_jacobian(k, b, eu, ew - rad - dist / 2.0f, grove_pathlen[b], Jp);
                const real mu = grove_cap_mu[c];
                const real imp = grove_imp(grove_cap_soft[c], grove_cap_imode[c], dist, margin);
                const real tran = grove_cap_tran[c];
                const real r0 = (1.0f - imp) / imp * (tran + mu * mu * tran);
                const real rpy = 2.0f * mu * mu * r0;
                for (int edge = 0; edge < 3; ++edge) {
                    const real t = edge == 0 ? mu : (edge == 1 ? -mu : 0.0f);
                    real jv = 0.0f;
#pragma unroll
                    for (int i = 0; i < GROVE_NV; ++i) {
                        J[nr][i] = Jp[i][1] + t * Jp[i][0];
                        jv += J[nr][i] * v[i];
                    }
                    const int slot = 2 * GROVE_NLIM + 6 * c + 3 * e + edge;
                    R[nr] = edge == 2 ? rpy / 2.0f : rpy;
                    aref[nr] = -grove_cap_soft[c][GROVE_SOFT_B] * jv - grove_cap_soft[c][GROVE_SOFT_K] * imp * (dist - margin);
                    slot_of[nr] = slot;
                    active[slot] = true;
                    ++nr;
                }
            }
        }
    }
#endif
    for (int s = 0; s < GROVE_SLOTS; ++s)
        if (!active[s]) warm[s] = 0.0f;
    if (nr > 0) {
        real au[GROVE_NV], lam[GROVE_SLOTS_ALLOC];
        grove_solve(L, f, au);
        if constexpr (G == 1) {
            real Y[GROVE_SLOTS_ALLOC][GROVE_NV], A[GROVE_SLOTS_ALLOC][GROVE_SLOTS_ALLOC], b[GROVE_SLOTS_ALLOC], diag[GROVE_SLOTS_ALLOC];
            grove_forces(lanes, nr, L, J, R, aref, au, slot_of, warm, Y, A, b, diag, lam, total);
        } else {
            real* w = lanes.mem;
            real(*A)[GROVE_SLOTS_ALLOC] = (real(*)[GROVE_SLOTS_ALLOC])w;
            real(*Y)[GROVE_NV] = (real(*)[GROVE_NV])(w + GROVE_SLOTS_ALLOC * GROVE_SLOTS_ALLOC);
            real* b = w + GROVE_SLOTS_ALLOC * GROVE_SLOTS_ALLOC + GROVE_SLOTS_ALLOC * GROVE_NV;
            grove_forces(lanes, nr, L, J, R, aref, au, slot_of, warm, Y, A, b, b + GROVE_SLOTS_ALLOC, lam, total);
        }
    }
#endif
    if (implicit && GROVE_DAMPED) {
#pragma unroll
        for (int i = 0; i < GROVE_NV; ++i)
#pragma unroll
            for (int j = 0; j < GROVE_NV; ++j) L[i][j] = M[i][j];
#pragma unroll
        for (int i = 0; i < GROVE_NV; ++i) L[i][i] += grove_hdamp[i];
        if (!grove_cholesky(L)) {
#pragma unroll
            for (int i = 0; i < GROVE_NV; ++i) acc[i] = __int_as_float(0x7fffffff);
            return;
        }
    }
    grove_solve(L, total, acc);
}

// One physics substep (dynamics.rs: substep).
template <int G>
__device__ void grove_substep(GroveLanes<G> lanes, real* q, real* v, const real* ctrl, real* warm) {
    const real h = GROVE_H;
#if GROVE_RK4
    real q0[GROVE_NV], v0[GROVE_NV], qs[GROVE_NV], v2[GROVE_NV], v3[GROVE_NV], v4[GROVE_NV];
    real a1[GROVE_NV], a2[GROVE_NV], a3[GROVE_NV], a4[GROVE_NV];
    for (int i = 0; i < GROVE_NV; ++i) { q0[i] = q[i]; v0[i] = v[i]; }
    grove_acceleration(lanes, q0, v0, ctrl, warm, false, a1);
    for (int i = 0; i < GROVE_NV; ++i) { qs[i] = q0[i] + h * 0.5f * v0[i]; v2[i] = v0[i] + h * 0.5f * a1[i]; }
    grove_acceleration(lanes, qs, v2, ctrl, warm, false, a2);
    for (int i = 0; i < GROVE_NV; ++i) { qs[i] = q0[i] + h * 0.5f * v2[i]; v3[i] = v0[i] + h * 0.5f * a2[i]; }
    grove_acceleration(lanes, qs, v3, ctrl, warm, false, a3);
    for (int i = 0; i < GROVE_NV; ++i) { qs[i] = q0[i] + h * v3[i]; v4[i] = v0[i] + h * a3[i]; }
    grove_acceleration(lanes, qs, v4, ctrl, warm, false, a4);
    const real b1 = GROVE_RK4_B1, b2 = GROVE_RK4_B2;
    for (int i = 0; i < GROVE_NV; ++i) {
        q[i] = q0[i] + h * (b1 * v0[i] + b2 * v2[i] + b2 * v3[i] + b1 * v4[i]);
        v[i] = v0[i] + h * (b1 * a1[i] + b2 * a2[i] + b2 * a3[i] + b1 * a4[i]);
    }
#else
    real a[GROVE_NV];
    grove_acceleration(lanes, q, v, ctrl, warm, true, a);
    for (int i = 0; i < GROVE_NV; ++i) {
        v[i] += h * a[i];
        q[i] += h * v[i];
    }
#endif
}

// ---- the episode (env.rs: State::reset, State::step) --------------------------------------

// State::reset(seed, generation, id) with `noise`, else State::rest: q = qpos0 + noise, v = noise.
__device__ inline void grove_reset(unsigned long long seed, unsigned generation, unsigned id, bool noise, real* q, real* v) {
    GroveStream rng = grove_stream((unsigned)seed, (unsigned)(seed >> 32), generation, id, GROVE_PURPOSE_RESET);
    double qn[GROVE_NV], vn[GROVE_NV];
    for (int i = 0; i < GROVE_NV; ++i) qn[i] = noise ? grove_noise(rng, GROVE_QNOISE_KIND, GROVE_QNOISE) : 0.0;
    for (int i = 0; i < GROVE_NV; ++i) vn[i] = noise ? grove_noise(rng, GROVE_VNOISE_KIND, GROVE_VNOISE) : 0.0;
    for (int i = 0; i < GROVE_NV; ++i) {
        q[i] = grove_qpos0[i] + (real)qn[i];
        v[i] = (real)vn[i];
    }
}

// One control step (State::step): ctrl = a (NaN components set to 0 in place), frame-skip
// substeps, then the reward. `k` holds the kinematics of q on entry and of the new q on exit
// (the next step's observation reads it). Sets `done` when the episode ends here.
template <int G>
__device__ inline real grove_env_step(GroveLanes<G> lanes, real* q, real* v, real* warm, real* a, GroveKin& k, bool& done) {
    real cost = 0.0f;
    for (int i = 0; i < GROVE_NU; ++i) {
        if (isnan(a[i])) a[i] = 0.0f;  // a NaN action acts as 0 (env.rs)
        cost += a[i] * a[i];
    }
    const real x0 = GROVE_FWD_BODY >= 0 ? k.pu[GROVE_FWD_BODY >= 0 ? GROVE_FWD_BODY : 0] : 0.0f;
    for (int s = 0; s < GROVE_FRAME_SKIP; ++s) grove_substep(lanes, q, v, a, warm);
    grove_kinematics(q, k);
    real reward = 0.0f;
    if (GROVE_FWD_BODY >= 0) reward += GROVE_FWD_W * (k.pu[GROVE_FWD_BODY >= 0 ? GROVE_FWD_BODY : 0] - x0) / GROVE_DT;
    bool finite = true;
    for (int i = 0; i < GROVE_NV; ++i) finite = finite && isfinite(q[i]) && isfinite(v[i]);
    const bool healthy = finite && grove_healthy(q, v, k.pw);
    if (healthy || (GROVE_BONUS_WHEN_TERMINAL && GROVE_TERMINATE)) reward += GROVE_HEALTHY_W;
    reward -= GROVE_CTRL_COST * cost;
    done = !finite || (GROVE_TERMINATE && !healthy);
    return reward;
}

// The action of env e at step t, open loop: actions[(t * E + e) * NU + a].
__device__ inline void grove_action(const GroveSimParams& p, const float* __restrict__ actions, unsigned e, unsigned t, real* a) {
    const float* row = actions + ((size_t)t * p.n_envs + e) * GROVE_NU;
    for (int i = 0; i < GROVE_NU; ++i) a[i] = row[i];
}

// One thread per environment. actions: (T, E, NU); returns: (E,) f64 sums of rewards; lengths: (E,) control steps taken; q_out, v_out: (E, NV) final states;
// traj: (T + 1, E, 2·NV) when p.record (row 0 the reset state; rows after termination repeat
// the terminal state).
extern "C" __global__ void grove_sim_rollout(GroveSimParams p, const float* __restrict__ actions, double* __restrict__ returns,
                                             unsigned* __restrict__ lengths, float* __restrict__ q_out, float* __restrict__ v_out,
                                             float* __restrict__ traj) {
    const unsigned e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= p.n_envs) return;
    real q[GROVE_NV], v[GROVE_NV], warm[GROVE_SLOTS_ALLOC];
    for (int s = 0; s < GROVE_SLOTS_ALLOC; ++s) warm[s] = 0.0f;
    grove_reset(p.seed, p.generation, p.first_env + e, p.noise != 0, q, v);
    const size_t stride = (size_t)p.n_envs * 2 * GROVE_NV;
    if (p.record)
        for (int i = 0; i < GROVE_NV; ++i) {
            traj[e * 2 * GROVE_NV + i] = q[i];
            traj[e * 2 * GROVE_NV + GROVE_NV + i] = v[i];
        }
    double ret = 0.0;
    unsigned t = 0;
    bool done = false;
    real a[GROVE_NU];
    GroveKin k;
    grove_kinematics(q, k);
    for (; t < p.steps && !done; ++t) {
        grove_action(p, actions, e, t, a);
        ret += (double)grove_env_step(GroveLanes<1>{}, q, v, warm, a, k, done);
        if (p.record)
            for (int i = 0; i < GROVE_NV; ++i) {
                traj[(t + 1) * stride + e * 2 * GROVE_NV + i] = q[i];
                traj[(t + 1) * stride + e * 2 * GROVE_NV + GROVE_NV + i] = v[i];
            }
    }
    if (p.record)
        for (unsigned r = t + 1; r <= p.steps; ++r)
            for (int i = 0; i < GROVE_NV; ++i) {
                traj[r * stride + e * 2 * GROVE_NV + i] = q[i];
                traj[r * stride + e * 2 * GROVE_NV + GROVE_NV + i] = v[i];
            }
    returns[e] = ret;
    lengths[e] = t;
    for (int i = 0; i < GROVE_NV; ++i) {
        q_out[e * GROVE_NV + i] = q[i];
        v_out[e * GROVE_NV + i] = v[i];
    }
}

// ---- control: policies evolved by grove (backend/cpu/control.rs) --------------------------------

// With GROVE_COMPILE_TREES, interp.cuh brings its tree compiler kernel grove_compile_trees,
// which compiles the population once per roll-out launch (eval.cu and classify.cu compile in
// each block instead).
#define GROVE_COMPILE_TREES
#include "interp.cuh"

#define GROVE_CTRL_STACK 64  // stack slots of the policy interpreter (the host checks each tree)

// Mirrors ControlParams in src/backend/cuda/control.rs.
struct GroveControlParams {
    unsigned n_trees;          // P: individuals
    unsigned episodes;         // K: episodes per individual (queue item g is episode g % K of g / K)
    unsigned steps;            // T: control steps per episode at most
    unsigned generation;       // Philox counter word 0 of the reset draws (word 1: the episode)
    unsigned long long seed;   // Philox key
    unsigned max_len;          // L: row stride of the population arrays
    unsigned flags;            // GROVE_CTRL_NOISE | GROVE_CTRL_NO_TERMINATION
};
#define GROVE_CTRL_NOISE 1u           // reset noise (else the rest pose)
#define GROVE_CTRL_NO_TERMINATION 2u  // play all T steps whatever the health (benchmarks)
GROVE_CHECK_LAYOUT(GroveControlParams);

// The operands and output slots of a policy (interp.cuh's Env): observation `arg`; slot s
// accumulates output s.
struct GrovePolicyEnv {
    const real* obs;  // (obs_size,)
    float* o;         // (nu,) outputs
    __device__ __forceinline__ void load(unsigned arg, float (&v)[1]) const { v[0] = (float)obs[arg]; }
    __device__ __forceinline__ void slot(unsigned s, const float (&r)[1]) { o[s] += r[0]; }
};

// The policy's actions at `obs`: the tree's compiled program (`n` instructions, interp.cuh:
// eval.cu's semantics, every operator from the generated table, the CPU's bits), then
// act = grove_tanh(output). False when an output is not finite (the individual is invalid).
__device__ inline bool grove_policy(const GroveInstr* __restrict__ prog, int n, const real* obs, real* act) {
    float stack[GROVE_CTRL_STACK][1];
    float o[GROVE_NU];
    for (int i = 0; i < GROVE_NU; ++i) o[i] = 0.0f;
    float top[1] = {0.0f};
    int h = 0;
    GrovePolicyEnv env = {obs, o};
    for (int j = 0; j < n; ++j) grove_exec<1, GROVE_CTRL_STACK>(prog[j], top, stack, h, env);
    bool ok = true;
    for (int i = 0; i < GROVE_NU; ++i) {
        ok = ok && isfinite(o[i]);
        act[i] = grove_tanh(o[i]);
    }
    return ok;
}

// Threads per block of grove_control_rollout (the host launches this many) and its launch
// bound, a macro so that the kernel's name still follows `void` for the launch check
// (tests/cuda_kernels.rs) and a variant can be staged by defining it first (a copy of this file
// in GROVE_KERNEL_DIR starting with `#define GROVE_CTRL_BOUNDS __launch_bounds__(64, 6)`). At
// least one block per SM: with the block size alone ptxas capped Walker2d's registers at 168
// and spilled (420 bytes; sass.py, docs/benchmarks.md); a higher minimum trades spills for
// occupancy.
#define GROVE_CTRL_BLOCK 64
#ifndef GROVE_CTRL_BOUNDS
#define GROVE_CTRL_BOUNDS __launch_bounds__(GROVE_CTRL_BLOCK, 1)
#endif

// The queue's next item for the calling lane, past the `threads` first items (thread g's first
// is item g), or n when the queue is empty. The lanes of a warp that take together share one
// atomicAdd and get consecutive items, so lanes that refill together tend to run one policy.
__device__ inline unsigned grove_ctrl_take(unsigned* queue, unsigned threads, unsigned n) {
    const unsigned mask = __activemask();
    const unsigned lane = threadIdx.x & 31u;
    const int leader = __ffs(mask) - 1;
    unsigned base = 0;
    if ((int)lane == leader) base = atomicAdd(queue, (unsigned)__popc(mask));
    base = __shfl_sync(mask, base, leader);
    const unsigned long long g = (unsigned long long)threads + base + (unsigned)__popc(mask & ((1u << lane) - 1u));
    return g < n ? (unsigned)g : n;
}

// The lanes that play one episode (GroveLanes): GROVE_CTRL_LANES, 1 unless the host builds the
// module with another power of two up to 32 (src/backend/cuda/control.rs episode_lanes).
#ifndef GROVE_CTRL_LANES
#define GROVE_CTRL_LANES 1
#endif
static_assert(GROVE_CTRL_LANES >= 1 && GROVE_CTRL_LANES <= 32 && (GROVE_CTRL_LANES & (GROVE_CTRL_LANES - 1)) == 0,
              "GROVE_CTRL_LANES is a power of two up to 32");

// grove_ctrl_take for a group of lanes: the group's first lane takes the next item for all of
// them (`groups` items past the first ones, as `threads` there).
template <int G>
__device__ inline unsigned grove_ctrl_take(const GroveLanes<G>& lanes, unsigned* queue, unsigned groups, unsigned n) {
    unsigned base = 0;
    if (lanes.lane == 0) base = atomicAdd(queue, 1u);
    base = __shfl_sync(lanes.mask, base, (int)((threadIdx.x & 31u) - lanes.lane));
    const unsigned long long g = (unsigned long long)groups + base;
    return g < n ? (unsigned)g : n;
}
__device__ inline unsigned grove_ctrl_take(const GroveLanes<1>&, unsigned* queue, unsigned threads, unsigned n) {
    return grove_ctrl_take(queue, threads, n);
}

// Plays every (individual, episode) of the population with the individual's program as the
// policy: item g of the queue is episode g % K of individual g / K (an individual's episodes
// adjacent). Persistent threads: thread g starts with item g, and a thread whose episode ends
// takes the next waiting item (grove_ctrl_take on `queue`, which the host zeroes before each
// launch), so a lane never idles while items wait; the host launches as many threads as stay
// resident. One loop iteration is one control step of the lane's episode, ending and refilling
// within the iteration, so the lanes of a warp reconverge at every step instead of waiting for
// the warp's longest episode. Each episode's arithmetic is the one-episode-per-thread kernel's
// (the same reset, steps and sums), so which thread plays it changes no bit; launched with one
// thread per item it is that kernel. prog: (P, L) compiled programs (grove_compile_trees);
// n_instr: (P,) their lengths; skip: (P,) nonzero for trees the host found unfit for this kernel
// (invalid, or deeper than GROVE_CTRL_STACK). returns: (P·K,) f64 sums of rewards; lengths:
// (P·K,) control steps taken; valid: (P·K,) 1 when the outputs stayed finite; queue: one
// counter, zero at launch. observed: null, or (P·K, 1 + 2·GROVE_NOBS) f64 statistics of the
// observations each episode's policy read, [count, sums, sums of squares], each summed in step
// order as the CPU's ObsStats::add (an observation counts when the policy reads it, so an
// invalid episode's last one too); an episode no step of which ran holds zeros. scale: null, or
// the normaliser every policy reads its observations through (GrovePolicyEnv; the statistics
// are of the observations before it): each step's observation is normalised in place once,
// (x − m) · s in f32, 0 where s is 0 (the CPU's InputScale::read), before the policy reads it.
// Built with GROVE_CTRL_LANES = G > 1, a group of G adjacent lanes plays each item (GroveLanes:
// the group takes items as one thread does above, its constraint rows are shared out, its
// first lane writes the results), launched with GROVE_LANE_WORDS floats of dynamic shared memory per
// group (blockDim.x / G groups a block); which lanes play an episode changes no bit either.
extern "C" __global__ void GROVE_CTRL_BOUNDS grove_control_rollout(GroveControlParams p, const GroveInstr* __restrict__ prog,
                                                 const unsigned short* __restrict__ n_instr, const unsigned char* __restrict__ skip,
                                                 double* __restrict__ returns, unsigned* __restrict__ lengths,
                                                 unsigned* __restrict__ valid, unsigned* __restrict__ queue,
                                                 double* __restrict__ observed, const float* __restrict__ scale) {
    const unsigned n = p.n_trees * p.episodes;
    const bool terminate = (p.flags & GROVE_CTRL_NO_TERMINATION) == 0;
#if GROVE_CTRL_LANES > 1
    // A group of G lanes per episode: `threads` counts groups, g is the group's item, and only
    // the group's first lane writes what the episode gives (every lane holds the same values).
    constexpr int G = GROVE_CTRL_LANES;
    extern __shared__ float grove_ctrl_shared[];
    GroveLanes<G> lanes;
    lanes.lane = threadIdx.x % G;
    lanes.mask = (G == 32 ? 0xffffffffu : (1u << (G % 32)) - 1u) << ((threadIdx.x & 31u) - lanes.lane);
    lanes.mem = grove_ctrl_shared + (size_t)(threadIdx.x / G) * GROVE_LANE_WORDS;
    const unsigned threads = gridDim.x * blockDim.x / G;
    unsigned g = (blockIdx.x * blockDim.x + threadIdx.x) / G;
    const bool writer = lanes.lane == 0;
#else
    const GroveLanes<1> lanes{};
    const unsigned threads = gridDim.x * blockDim.x;
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    const bool writer = true;
#endif
    real q[GROVE_NV], v[GROVE_NV], warm[GROVE_SLOTS_ALLOC], obs[GROVE_NOBS_ALLOC], a[GROVE_NU];
    GroveKin k;
    const GroveInstr* code = prog;
    int len = 0;
    double ret = 0.0;
    unsigned t = 0;
    bool running = false;
    double* seen = nullptr;  // this episode's row of `observed`
    for (;;) {
        if (!running) {
            // The next item that needs a step; those that need none are recorded on the way.
            for (; g < n; g = grove_ctrl_take(lanes, queue, threads, n)) {
                const unsigned ind = g / p.episodes;
                if (observed && writer) {
                    seen = observed + (size_t)g * (1 + 2 * GROVE_NOBS);
                    for (int i = 0; i < 1 + 2 * GROVE_NOBS; ++i) seen[i] = 0.0;
                }
                if (skip[ind] || n_instr[ind] == 0) {
                    if (writer) {
                        returns[g] = 0.0;
                        lengths[g] = 0;
                        valid[g] = 0;
                    }
                } else if (p.steps == 0) {
                    if (writer) {
                        returns[g] = 0.0;
                        lengths[g] = 0;
                        valid[g] = 1;
                    }
                } else {
                    break;
                }
            }
            if (g >= n) break;
            const unsigned ind = g / p.episodes, ep = g % p.episodes;
            code = prog + (size_t)ind * p.max_len;
            len = (int)n_instr[ind];
            for (int s = 0; s < GROVE_SLOTS_ALLOC; ++s) warm[s] = 0.0f;
            grove_reset(p.seed, p.generation, ep, (p.flags & GROVE_CTRL_NOISE) != 0, q, v);
            grove_kinematics(q, k);
            ret = 0.0;
            t = 0;
            running = true;
        }
        grove_observe(q, v, k.pw, obs);
        if (seen) {
            seen[0] += 1.0;
            for (int i = 0; i < GROVE_NOBS; ++i) {
                const double x = (double)obs[i];
                seen[1 + i] += x;
                seen[1 + GROVE_NOBS + i] += x * x;  // not fused: sim.cu compiles with --fmad=false
            }
        }
        if (scale) {
            for (int i = 0; i < GROVE_NOBS; ++i) {
                const float s = scale[GROVE_NOBS + i];
                obs[i] = (real)(s != 0.0f ? ((float)obs[i] - scale[i]) * s : 0.0f);
            }
        }
        const bool ok = grove_policy(code, len, obs, a);
        if (ok) {
            bool done = false;
            ret += (double)grove_env_step(lanes, q, v, warm, a, k, done);
            ++t;
            running = !(done && terminate) && t < p.steps;
        } else {
            running = false;  // a non-finite output: the individual is invalid
        }
        if (!running) {
            if (writer) {
                returns[g] = ret;
                lengths[g] = t;
                valid[g] = ok ? 1u : 0u;
            }
            g = grove_ctrl_take(lanes, queue, threads, n);
        }
    }
}

// One thread per individual: the mean of its K returns, summed in episode order (f64), or NaN
// when an episode was invalid (policy.rs mean_returns). means: (P,).
extern "C" __global__ void grove_control_reduce(GroveControlParams p, const double* __restrict__ returns,
                                                const unsigned* __restrict__ valid, double* __restrict__ means) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_trees) return;
    double s = 0.0;
    bool ok = true;
    for (unsigned k = 0; k < p.episodes; ++k) {
        s += returns[(size_t)i * p.episodes + k];
        ok = ok && valid[(size_t)i * p.episodes + k] != 0;
    }
    means[i] = ok ? s / (double)p.episodes : __longlong_as_double(0x7ff8000000000000ll);
}
