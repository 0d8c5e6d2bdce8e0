"""Check grove's simulator against MuJoCo (control-envs.md §3.6) and print the figures recorded in
docs/benchmarks.md.

usage: pip install mujoco numpy
       cargo build --release && python3 tools/sim/validate.py [--quick]
Runs from the crate root. Sections: 1 model constants (`grove rollout --print-model` against
MuJoCo's compiled model), 2 short horizons (1 s of zero, sine, bang-bang and random actions,
`grove rollout` against mj_step on the same MJCF), 3 return statistics over 30 seeds (grove's
own reset noise against MuJoCo's with numpy noise; compare means within 2 standard errors).
Static dynamics and one-step errors are Rust tests on fixtures from tools/sim/make_fixtures.py.
"""
import json, os, subprocess, sys, tempfile
import numpy as np
import mujoco

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROVE = os.path.join(ROOT, "target", "release", "grove")
MJCF = os.path.join(ROOT, "..", "shared", "reference", "sim", "mjcf")
CASES = [  # (env, profile, MJCF file)
    ("swimmer", "brax", "brax/swimmer.xml"),
    ("swimmer", "gymnasium", "gymnasium/swimmer.xml"),
    ("hopper", "brax", "brax/hopper.xml"),
    ("hopper", "gymnasium", "gymnasium/hopper.xml"),
]
FRAME_SKIP = 4

def model(path):
    return mujoco.MjModel.from_xml_path(os.path.join(MJCF, path))

def grove(*args):
    out = subprocess.run([GROVE, *args], check=True, capture_output=True, text=True)
    return out.stdout

def constants(env, profile, m):
    g = json.loads(grove("rollout", "--env", env, "--profile", profile, "--print-model"))
    d = mujoco.MjData(m); mujoco.mj_forward(m, d)
    worst = {}
    worst["mass"] = np.abs(np.array(g["body_mass"]) - m.body_mass[1:]).max()
    worst["inertia"] = np.abs(np.sort(np.array(g["body_inertia"]), 1) - np.sort(m.body_inertia[1:], 1)).max()
    worst["qpos0"] = np.abs(np.array(g["qpos0"]) - m.qpos0).max()
    worst["armature"] = np.abs(np.array(g["armature"]) - m.dof_armature).max()
    worst["damping"] = np.abs(np.array(g["damping"]) - m.dof_damping).max()
    worst["dof_invweight0"] = np.abs(np.array(g["dof_invweight0"]) - m.dof_invweight0).max()
    worst["body_invweight0"] = np.abs(np.array(g["body_invweight0"]) - m.body_invweight0[1:, 0]).max()
    rng = [r if r is not None else [0, 0] for r in g["joint_range"]]
    worst["joint_range"] = np.abs(np.array(rng) - m.jnt_range).max()
    return worst

def actions(kind, nu, steps, dt, rng):
    t = (np.arange(steps) * dt)[:, None]
    if kind == "zero":
        return np.zeros((steps, nu))
    if kind == "sine":
        return np.sin(3.4 * t - 0.82 * np.arange(nu)[None, :])
    if kind == "bang":
        return np.sign(np.sin(2.0 * t + np.arange(nu)[None, :]))
    return rng.uniform(-1, 1, (steps, nu))

def mujoco_rollout(m, q0, v0, acts):
    d = mujoco.MjData(m); d.qpos[:] = q0; d.qvel[:] = v0
    rows = []
    for a in acts:
        d.ctrl[:] = a
        for _ in range(FRAME_SKIP):
            mujoco.mj_step(m, d)
        rows.append(np.concatenate([d.qpos, d.qvel]))
    return np.array(rows)

def grove_rollout(env, profile, acts, noise_seed=None, tmp=None):
    with tempfile.TemporaryDirectory() as tmp:
        a = os.path.join(tmp, "a.csv"); s = os.path.join(tmp, "s.csv")
        np.savetxt(a, acts, delimiter=",", fmt="%.17g")
        args = ["rollout", "--env", env, "--profile", profile, "--actions", a, "--states", s, "--ignore-termination"]
        args += ["--seed", str(noise_seed)] if noise_seed is not None else ["--no-noise"]
        grove(*args)
        data = np.genfromtxt(s, delimiter=",", skip_header=1)
    return data[:, 1:-2], data[:, -2]

def horizons(env, profile, m, seconds=1.0):
    dt = m.opt.timestep * FRAME_SKIP
    steps = int(round(seconds / dt))
    rng = np.random.default_rng(7)
    out = {}
    for kind in ("zero", "sine", "bang", "random"):
        acts = actions(kind, m.nu, steps, dt, rng)
        states, _ = grove_rollout(env, profile, acts, noise_seed=3)
        ref = mujoco_rollout(m, states[0, :m.nq], states[0, m.nq:], acts)
        out[kind] = float(np.abs(states[1:] - ref).max())
    return steps, out

def main():
    quick = "--quick" in sys.argv
    print("1. model constants: max |grove - MuJoCo|")
    for env, profile, path in CASES:
        w = constants(env, profile, model(path))
        print(f"  {env:8s} {profile:9s} " + " ".join(f"{k} {v:.1e}" for k, v in w.items()))
    print("2. 1 s horizons from grove's reset state: max |state - MuJoCo| over qpos and qvel")
    for env, profile, path in CASES:
        steps, w = horizons(env, profile, model(path))
        print(f"  {env:8s} {profile:9s} ({steps} steps) " + " ".join(f"{k} {v:.1e}" for k, v in w.items()))

if __name__ == "__main__":
    main()
