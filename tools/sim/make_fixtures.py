"""Write the small MuJoCo reference fixtures that tests/sim.rs checks grove's stepper against.

usage: pip install mujoco numpy; python3 tools/sim/make_fixtures.py   (from the crate root)
Writes tests/fixtures/sim/{env}_{profile}.json (MuJoCo's solver run to convergence) with
  static:     random (q, v, ctrl) -> M (mj_fullM), qfrc_bias, qfrc_passive, qfrc_fluid, qfrc_actuator
  one_step:   states along a MuJoCo trajectory under random actions -> (q, v) after one mj_step
  trajectory: a noisy start and actions sin(3.4 t - 0.82 k) (t = step * dt, k the actuator);
              (q, v) after every `every`-th control step of 1 s
"""
import json, os
import numpy as np
import mujoco

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MJCF = os.path.join(ROOT, "..", "shared", "reference", "sim", "mjcf")
OUT = os.path.join(ROOT, "tests", "fixtures", "sim")
CASES = [("swimmer", "brax", "brax/swimmer.xml", 0.1), ("swimmer", "gymnasium", "gymnasium/swimmer.xml", 0.1),
         ("hopper", "brax", "brax/hopper.xml", 0.005), ("hopper", "gymnasium", "gymnasium/hopper.xml", 0.005),
         ("walker2d", "brax", "brax/walker2d.xml", 0.005), ("walker2d", "gymnasium", "gymnasium/walker2d_v5.xml", 0.005),
         ("half_cheetah", "brax", "brax/half_cheetah.xml", 0.1), ("half_cheetah", "gymnasium", "gymnasium/half_cheetah.xml", 0.1)]

def lst(a):
    return [float(x) for x in np.ravel(a)]

def main():
    os.makedirs(OUT, exist_ok=True)
    for env, profile, path, noise in CASES:
        m = mujoco.MjModel.from_xml_path(os.path.join(MJCF, path))
        # Solve MuJoCo's constraints to convergence (the XMLs stop early; see validate.py).
        m.opt.iterations, m.opt.tolerance, m.opt.ls_tolerance = 1000, 0.0, 1e-10
        d = mujoco.MjData(m)
        rng = np.random.default_rng(11)
        static = []
        for _ in range(5):
            d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
            d.qvel[:] = rng.uniform(-2, 2, m.nv)
            d.ctrl[:] = rng.uniform(-1.5, 1.5, m.nu)  # beyond ctrlrange: checks the clip
            mujoco.mj_forward(m, d)
            M = np.zeros((m.nv, m.nv)); mujoco.mj_fullM(m, d, M)
            static.append(dict(q=lst(d.qpos), v=lst(d.qvel), ctrl=lst(d.ctrl), mass=lst(M), bias=lst(d.qfrc_bias),
                               passive=lst(d.qfrc_passive), fluid=lst(d.qfrc_fluid), actuator=lst(d.qfrc_actuator)))
        one = []
        mujoco.mj_resetData(m, d)
        d.qpos[:] = m.qpos0 + rng.uniform(-noise, noise, m.nq); d.qvel[:] = rng.uniform(-noise, noise, m.nv)
        for t in range(400):
            d.ctrl[:] = rng.uniform(-1, 1, m.nu)
            q, v = d.qpos.copy(), d.qvel.copy()
            mujoco.mj_step(m, d)
            if t % 50 == 49:
                one.append(dict(q=lst(q), v=lst(v), ctrl=lst(d.ctrl), q_next=lst(d.qpos), v_next=lst(d.qvel), ncon=int(d.ncon), nefc=int(d.nefc)))
        mujoco.mj_resetData(m, d)
        q0 = m.qpos0 + rng.uniform(-noise, noise, m.nq); v0 = rng.uniform(-noise, noise, m.nv)
        d.qpos[:] = q0; d.qvel[:] = v0
        skip = 5 if env == "half_cheetah" else 4
        dt = m.opt.timestep * skip; steps = int(round(1.0 / dt)); every = 25 if steps > 100 else 5
        traj = []
        acts = []
        for t in range(steps):
            a = np.sin(3.4 * t * dt - 0.82 * np.arange(m.nu))
            acts.append(lst(a))
            d.ctrl[:] = a
            for _ in range(skip):
                mujoco.mj_step(m, d)
            if (t + 1) % every == 0:
                traj.append(dict(step=t + 1, q=lst(d.qpos), v=lst(d.qvel)))
        out = dict(env=env, profile=profile, mjcf=path, mujoco=mujoco.__version__, static=static, one_step=one,
                   trajectory=dict(q0=lst(q0), v0=lst(v0), dt=dt, steps=steps, every=every, states=traj))
        with open(os.path.join(OUT, f"{env}_{profile}.json"), "w") as f:
            json.dump(out, f, separators=(",", ":"))
        print(env, profile, os.path.getsize(os.path.join(OUT, f"{env}_{profile}.json")), "bytes")

if __name__ == "__main__":
    main()
