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
    ("walker2d", "brax", "brax/walker2d.xml"),
    ("walker2d", "gymnasium", "gymnasium/walker2d_v5.xml"),
    ("half_cheetah", "brax", "brax/half_cheetah.xml"),
    ("half_cheetah", "gymnasium", "gymnasium/half_cheetah.xml"),
]
FRAME_SKIP = 4  # set per model by model()
SELF_CONTACTS = 0  # capsule-capsule contacts MuJoCo made within episodes (grove has none)

TIGHT = True  # solve MuJoCo's constraints to convergence (section 2b uses the XML's settings)

def model(path):
    """The MJCF model; with TIGHT, MuJoCo's Newton solver runs to convergence. The XMLs stop it
    early (tolerance 1e-8; Brax's files set 4 iterations), which leaves errors up to 1e-3 in
    Walker2d states with four simultaneous contacts: that is MuJoCo's inexact solve, not a model
    difference."""
    global FRAME_SKIP
    FRAME_SKIP = 5 if "cheetah" in path else 4
    m = mujoco.MjModel.from_xml_path(os.path.join(MJCF, path))
    if TIGHT:
        m.opt.iterations, m.opt.tolerance, m.opt.ls_tolerance = 1000, 0.0, 1e-10
    return m

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
    return data[:, 1:-2], data[:, -1]

def until_done(done):
    """Rows 1..=first terminal step: after termination an env is reset, and grove does not model
    the capsule-capsule self-contacts a fallen Gymnasium hopper can make (torso on foot)."""
    hits = np.nonzero(done[1:])[0]
    return int(hits[0]) + 1 if len(hits) else len(done) - 1

def horizons(env, profile, m, seconds=1.0, through=False):
    dt = m.opt.timestep * FRAME_SKIP
    steps = int(round(seconds / dt))
    rng = np.random.default_rng(7)
    out = {}
    for kind in ("zero", "sine", "bang", "random"):
        acts = actions(kind, m.nu, steps, dt, rng)
        states, done = grove_rollout(env, profile, acts, noise_seed=3)
        ref = mujoco_rollout(m, states[0, :m.nq], states[0, m.nq:], acts)
        n = len(done) - 1 if through else until_done(done)
        out[f"{kind}[{n}]"] = float(np.abs(states[1:n + 1] - ref[:n]).max())
    return steps, out

def mujoco_episode(m, env, profile, acts, rng):
    """One episode with MuJoCo physics and the env's reward and termination (control-envs.md §1)."""
    noise = 0.1 if env in ("swimmer", "half_cheetah") else 0.005
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + rng.uniform(-noise, noise, m.nq)
    d.qvel[:] = noise * rng.standard_normal(m.nv) if env == "half_cheetah" else rng.uniform(-noise, noise, m.nv)
    mujoco.mj_forward(m, d)
    dt = m.opt.timestep * FRAME_SKIP; total = 0.0
    global SELF_CONTACTS
    for t, a in enumerate(acts):
        x0 = d.xpos[1][0]
        d.ctrl[:] = a
        for _ in range(FRAME_SKIP):
            mujoco.mj_step(m, d)
        fwd = (d.xpos[1][0] - x0) / dt
        if env in ("swimmer", "half_cheetah"):
            total += fwd - (1e-4 if env == "swimmer" else 0.1) * np.sum(np.square(a))
            continue
        SELF_CONTACTS += sum(1 for c in d.contact[:d.ncon] if c.geom1 != 0 and c.geom2 != 0)
        z, ang = d.xpos[1][2], d.qpos[2]
        state = np.concatenate([d.qpos[2:], d.qvel])
        if env == "hopper":
            healthy = bool(np.all(np.abs(state) < 100) and z > 0.7 and abs(ang) < 0.2)
        else:
            healthy = bool(0.8 < z < 2.0 and abs(ang) < 1.0)
        total += fwd + (1.0 if (healthy or profile == "brax") else 0.0) - 1e-3 * np.sum(np.square(a))
        if not healthy:
            return total, t + 1
    return total, len(acts)

def grove_episode(env, profile, acts, seed):
    with tempfile.TemporaryDirectory() as tmp:
        a = os.path.join(tmp, "a.csv")
        np.savetxt(a, acts, delimiter=",", fmt="%.17g")
        line = grove("rollout", "--env", env, "--profile", profile, "--actions", a, "--seed", str(seed))
    words = line.split()
    return float(words[words.index("return") + 1]), int(words[words.index("over") + 1])

def returns(env, profile, m, policy, seeds):
    dt = m.opt.timestep * FRAME_SKIP
    g, r, gl, rl = [], [], [], []
    for seed in range(seeds):
        acts = actions(policy, m.nu, 1000, dt, np.random.default_rng(100 + seed))
        ret, n = grove_episode(env, profile, acts, seed); g.append(ret); gl.append(n)
        ret, n = mujoco_episode(m, env, profile, acts, np.random.default_rng(1000 + seed)); r.append(ret); rl.append(n)
    g, r = np.array(g), np.array(r)
    se = np.sqrt(g.var(ddof=1) / seeds + r.var(ddof=1) / seeds)
    return g.mean(), g.std(ddof=1), np.mean(gl), r.mean(), r.std(ddof=1), np.mean(rl), abs(g.mean() - r.mean()) / se

def sweep(env, profile, m, seconds=1.0):
    """Error of 1 s of random actions against MuJoCo, by PGS sweeps, and of f32 against f64."""
    dt = m.opt.timestep * FRAME_SKIP; steps = int(round(seconds / dt))
    acts = actions("random", m.nu, steps, dt, np.random.default_rng(5))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        a = os.path.join(tmp, "a.csv"); np.savetxt(a, acts, delimiter=",", fmt="%.17g")
        def run(*extra):
            s = os.path.join(tmp, "s.csv")
            grove("rollout", "--env", env, "--profile", profile, "--actions", a, "--states", s, "--seed", "3", "--ignore-termination", *extra)
            return np.genfromtxt(s, delimiter=",", skip_header=1)
        data = run(); base = data[:, 1:-2]; n = until_done(data[:, -1]); out["steps"] = n
        ref = mujoco_rollout(m, base[0, :m.nq], base[0, m.nq:], acts)
        for it in (4, 10, 20, 50, 100, 1000):
            out[f"pgs{it}"] = float(np.abs(run("--solver-iterations", str(it))[1:n + 1, 1:-2] - ref[:n]).max())
        out["f32-vs-f64"] = float(np.abs(run("--f32")[1:n + 1, 1:-2] - base[1:n + 1]).max())
    return out

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
    for profile, path in (("brax", "brax/swimmer.xml"), ("gymnasium", "gymnasium/swimmer.xml")):
        steps, w = horizons("swimmer", profile, model(path), seconds=10.0)
        print(f"  swimmer  {profile:9s} ({steps} steps) " + " ".join(f"{k} {v:.1e}" for k, v in w.items()))
    steps, w = horizons("hopper", "brax", model("brax/hopper.xml"), through=True)
    print(f"  hopper   brax      ({steps} steps, through termination: only the foot collides) " + " ".join(f"{k} {v:.1e}" for k, v in w.items()))
    global TIGHT
    TIGHT = False
    print("2b. as 2, against MuJoCo with the XML's own solver settings (iterations, tolerance 1e-8)")
    for env, profile, path in CASES:
        steps, w = horizons(env, profile, model(path))
        print(f"  {env:8s} {profile:9s} ({steps} steps) " + " ".join(f"{k} {v:.1e}" for k, v in w.items()))
    TIGHT = True
    print("3. 1 s of random actions: max |state - MuJoCo| by PGS sweeps; f32 against f64")
    for env, profile, path in CASES:
        w = sweep(env, profile, model(path))
        print(f"  {env:8s} {profile:9s} " + " ".join(f"{k} {v:.1e}" if k != "steps" else f"({v} steps)" for k, v in w.items()))
    seeds = 10 if quick else 30
    print(f"4. returns over {seeds} seeds (1000-step episodes; same actions, own reset noise): grove | MuJoCo | |diff|/SE")
    for env, profile, path in CASES:
        for policy in (("zero", "random", "sine") if env == "swimmer" else ("zero", "random")):
            if quick and env in ("walker2d", "half_cheetah"):
                continue
            gm, gs, gl, rm, rs, rl, z = returns(env, profile, model(path), policy, seeds)
            print(f"  {env:8s} {profile:9s} {policy:6s} {gm:8.2f} ± {gs:6.2f} ({gl:5.0f} steps) | {rm:8.2f} ± {rs:6.2f} ({rl:5.0f} steps) | {z:.2f}")
    print(f"  self-contacts MuJoCo made within these episodes: {SELF_CONTACTS}")

if __name__ == "__main__":
    main()
