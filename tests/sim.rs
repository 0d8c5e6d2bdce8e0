//! The simulator against MuJoCo fixtures (tests/fixtures/sim/*.json, written by
//! tools/sim/make_fixtures.py from MuJoCo 4.0.0): static dynamics, one substep from a synced
//! state, and 1 s trajectories; f32 against f64; reward, termination and reset semantics; the
//! batch API; and bad environment descriptions and action files.

use grove::sim::dynamics::{acceleration, kinematics, smooth, substep};
use grove::sim::env::{step_batch, State, StepResult};
use grove::sim::rollout::read_actions;
use grove::sim::spec::{EnvSpec, Integrator, SHIPPED};
use grove::sim::Model;
use serde_json::Value;

const CASES: &[(&str, &str)] = &[
    ("swimmer", "brax"),
    ("swimmer", "gymnasium"),
    ("hopper", "brax"),
    ("hopper", "gymnasium"),
    ("walker2d", "brax"),
    ("walker2d", "gymnasium"),
    ("half_cheetah", "brax"),
    ("half_cheetah", "gymnasium"),
];

fn fixture(env: &str, profile: &str) -> Value {
    let path = format!("{}/tests/fixtures/sim/{env}_{profile}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture exists")).expect("fixture parses")
}

fn vec(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// Largest |a - b| and where it is.
fn worst(a: &[f64], b: &[f64]) -> (f64, usize) {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).enumerate().map(|(i, (x, y))| ((x - y).abs(), i)).fold((0.0, 0), |m, e| if e.0 > m.0 { e } else { m })
}

#[test]
fn every_shipped_env_loads_under_every_profile_and_from_its_file() {
    for (name, _) in SHIPPED {
        let spec = EnvSpec::load(name).unwrap();
        assert!(spec.profiles.contains_key("brax") && spec.profiles.contains_key("gymnasium"), "{name}");
        for p in spec.profiles.keys() {
            let m = Model::new(&spec, Some(p)).unwrap_or_else(|e| panic!("{name} {p}: {e:#}"));
            let obs = [("swimmer", 8), ("hopper", 11), ("walker2d", 17), ("half_cheetah", 17)];
            assert_eq!(Some(m.obs_size), obs.iter().find(|o| o.0 == *name).map(|o| o.1), "{name}");
        }
        let path = format!("{}/envs/{name}.ron", env!("CARGO_MANIFEST_DIR"));
        let from_file = Model::load(&path, None).unwrap();
        assert_eq!(from_file.profile, "brax");
        assert_eq!(from_file.nv(), Model::load(name, None).unwrap().nv());
    }
    let files = std::fs::read_dir(format!("{}/envs", env!("CARGO_MANIFEST_DIR"))).unwrap().count();
    assert_eq!(files, SHIPPED.len(), "every file in envs/ is embedded");
}

#[test]
fn profiles_differ_where_brax_and_gymnasium_differ() {
    let hb = Model::load("hopper", Some("brax")).unwrap();
    let hg = Model::load("hopper", Some("gymnasium")).unwrap();
    assert_eq!((hb.integrator, hg.integrator), (Integrator::Euler, Integrator::Rk4));
    assert_eq!((hb.capsules.len(), hg.capsules.len()), (1, 4));
    assert_eq!((hb.joints[1].qpos0, hg.joints[1].qpos0), (0.0, 1.25));
    assert!(hb.healthy_reward_when_terminal && !hg.healthy_reward_when_terminal);
    assert_eq!(Model::load("swimmer", None).unwrap().integrator, Integrator::Euler);
    assert_eq!(Model::load("swimmer", Some("gymnasium")).unwrap().integrator, Integrator::Rk4);
}

// control-envs.md §2.4 quotes MuJoCo's invweight0 to 5 digits.
#[test]
fn invweight0_matches_mujoco() {
    let s = Model::load("swimmer", None).unwrap();
    for (a, b) in s.dof_invweight0.iter().zip([0.00935, 0.13621, 0.15282, 0.38529, 0.39333]) {
        assert!((a - b).abs() < 1e-5, "swimmer dof {a} vs {b}");
    }
    let h = Model::load("hopper", None).unwrap();
    for (a, b) in h.dof_invweight0.iter().zip([0.19093, 0.06384, 1.05851, 0.91736, 0.84231, 0.90004]) {
        assert!((a - b).abs() < 1e-5, "hopper dof {a} vs {b}");
    }
    for (a, b) in h.body_invweight0.iter().zip([0.08492, 0.05192, 0.04960, 0.06690]) {
        assert!((a - b).abs() < 1e-5, "hopper body {a} vs {b}");
    }
}

#[test]
fn static_dynamics_match_mujoco() {
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        for (i, s) in fixture(env, profile)["static"].as_array().unwrap().iter().enumerate() {
            let (q, v, ctrl) = (vec(&s["q"]), vec(&s["v"]), vec(&s["ctrl"]));
            let k = kinematics(&m, &q);
            let d = smooth(&m, &k, &q, &v, &ctrl);
            for (what, ours, theirs) in [
                ("M", d.mass.transpose().as_slice().to_vec(), vec(&s["mass"])),
                ("bias", d.bias.as_slice().to_vec(), vec(&s["bias"])),
                ("passive", d.passive.as_slice().to_vec(), vec(&s["passive"])),
                ("fluid", d.fluid.as_slice().to_vec(), vec(&s["fluid"])),
                ("actuator", d.actuator.as_slice().to_vec(), vec(&s["actuator"])),
            ] {
                let (e, at) = worst(&ours, &theirs);
                assert!(e < 1e-10, "{env} {profile} state {i}: {what}[{at}] grove={} mujoco={}", ours[at], theirs[at]);
            }
            // f32: relative 1e-4 of the largest entry.
            let q32: Vec<f32> = q.iter().map(|&x| x as f32).collect();
            let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            let c32: Vec<f32> = ctrl.iter().map(|&x| x as f32).collect();
            let d32 = smooth(&m, &kinematics(&m, &q32), &q32, &v32, &c32);
            let f64s = |x: &[f32]| x.iter().map(|&y| y as f64).collect::<Vec<_>>();
            for (what, ours, theirs) in
                [("M", f64s(d32.mass.as_slice()), d.mass.as_slice().to_vec()), ("bias", f64s(d32.bias.as_slice()), d.bias.as_slice().to_vec())]
            {
                let scale = theirs.iter().fold(1.0f64, |a, b| a.max(b.abs()));
                let (e, at) = worst(&ours, &theirs);
                assert!(e < 1e-4 * scale, "{env} {profile} state {i}: f32 {what}[{at}] {} vs f64 {}", ours[at], theirs[at]);
            }
        }
    }
}

#[test]
fn one_substep_from_a_synced_state_matches_mujoco() {
    let mut contacts_seen = 0;
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        for (i, s) in fixture(env, profile)["one_step"].as_array().unwrap().iter().enumerate() {
            let (mut q, mut v, ctrl) = (vec(&s["q"]), vec(&s["v"]), vec(&s["ctrl"]));
            contacts_seen += s["ncon"].as_u64().unwrap();
            let mut warm = vec![0.0; m.n_slots()];
            substep(&m, &mut q, &mut v, &ctrl, &mut warm);
            let (eq, aq) = worst(&q, &vec(&s["q_next"]));
            let (ev, av) = worst(&v, &vec(&s["v_next"]));
            assert!(eq < 1e-10 && ev < 1e-8, "{env} {profile} sample {i}: q[{aq}] off by {eq:.1e}, v[{av}] off by {ev:.1e}");
        }
    }
    assert!(contacts_seen > 0, "the fixtures exercise contacts");
}

fn trajectory<T: grove::sim::Real>(m: &Model, fx: &Value) -> Vec<(usize, Vec<f64>)> {
    let t = &fx["trajectory"];
    let mut s: State<T> = State::rest(m);
    s.q = vec(&t["q0"]).iter().map(|&x| grove::sim::dynamics::r(x)).collect();
    s.v = vec(&t["v0"]).iter().map(|&x| grove::sim::dynamics::r(x)).collect();
    let every = t["every"].as_u64().unwrap() as usize;
    let mut out = Vec::new();
    let (dt, steps) = (t["dt"].as_f64().unwrap(), t["steps"].as_u64().unwrap() as usize);
    for i in 0..steps {
        let a: Vec<T> = (0..m.nu()).map(|k| grove::sim::dynamics::r((3.4 * i as f64 * dt - 0.82 * k as f64).sin())).collect();
        s.step(m, &a);
        if (i + 1) % every == 0 {
            let to64 = |x: &T| format!("{x}").parse::<f64>().unwrap();
            out.push((i + 1, s.q.iter().chain(&s.v).map(to64).collect()));
        }
    }
    out
}

#[test]
fn one_second_trajectories_match_mujoco_and_f32_stays_close() {
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        let fx = fixture(env, profile);
        let ours = trajectory::<f64>(&m, &fx);
        let ours32 = trajectory::<f32>(&m, &fx);
        let mut drift32: f64 = 0.0;
        for (((step, x), (_, x32)), r) in ours.iter().zip(&ours32).zip(fx["trajectory"]["states"].as_array().unwrap()) {
            let theirs: Vec<f64> = vec(&r["q"]).into_iter().chain(vec(&r["v"])).collect();
            let (e, at) = worst(x, &theirs);
            assert!(e < 1e-8, "{env} {profile} step {step}: state[{at}] grove={} mujoco={}", x[at], theirs[at]);
            drift32 = drift32.max(worst(x32, x).0);
        }
        // f32 drift over 1 s, measured (docs/benchmarks.md): bounded, not bit-equal.
        assert!(drift32 < 0.05, "{env} {profile}: f32 drifts {drift32:.2e} from f64 in 1 s");
    }
}

#[test]
fn forward_reward_telescopes_and_ctrl_cost_uses_the_raw_action() {
    let m = Model::load("swimmer", None).unwrap();
    let mut s: State<f64> = State::rest(&m);
    let x0 = s.q[0];
    let mut total = 0.0;
    let a = [3.0, -2.0]; // beyond ctrlrange: clipped for the torque, raw for the cost
    for _ in 0..20 {
        total += s.step(&m, &a).reward;
    }
    let expected = (s.q[0] - x0) / m.dt() - 20.0 * 1e-4 * (9.0 + 4.0);
    assert!((total - expected).abs() < 1e-9, "{total} vs {expected}");
    let mut clipped: State<f64> = State::rest(&m);
    for _ in 0..20 {
        clipped.step(&m, &[1.0, -1.0]);
    }
    assert_eq!(clipped.q, s.q, "torques use clip(ctrl)");
}

// Regression: a NaN action (a program dividing by zero) must not poison the state.
#[test]
fn nan_actions_act_as_zero() {
    let m = Model::load("hopper", None).unwrap();
    let (mut a, mut b): (State<f64>, State<f64>) = (State::rest(&m), State::rest(&m));
    let ra = a.step(&m, &[f64::NAN, 0.5, f64::NAN]);
    let rb = b.step(&m, &[0.0, 0.5, 0.0]);
    assert_eq!(a, b);
    assert_eq!(ra, rb);
    assert!(ra.reward.is_finite());
}

#[test]
fn hopper_terminal_bonus_differs_by_profile() {
    for (profile, bonus) in [("brax", 1.0), ("gymnasium", 0.0)] {
        let m = Model::load("hopper", Some(profile)).unwrap();
        let mut s: State<f64> = State::rest(&m);
        s.q[2] = 0.3; // torso tilted beyond 0.2 rad: unhealthy at once
        let x0 = s.body_pos(&m, 0)[0];
        let r = s.step(&m, &[0.0; 3]);
        assert!(r.done, "{profile}");
        let forward = (s.body_pos(&m, 0)[0] - x0) / m.dt();
        assert!((r.reward - forward - bonus).abs() < 1e-12, "{profile}: reward {} forward {forward}", r.reward);
    }
    // Healthy: +1 in both.
    let m = Model::load("hopper", Some("gymnasium")).unwrap();
    let mut s: State<f64> = State::rest(&m);
    let r = s.step(&m, &[0.0; 3]);
    assert!(!r.done && r.reward > 0.5);
}

#[test]
fn hopper_observation_reports_world_height_in_both_profiles() {
    for profile in ["brax", "gymnasium"] {
        let m = Model::load("hopper", Some(profile)).unwrap();
        let s: State<f64> = State::rest(&m);
        let mut obs = Vec::new();
        s.observe(&m, &mut obs);
        assert_eq!(obs.len(), 11);
        assert!((obs[0] - 1.25).abs() < 1e-15, "{profile}: z {}", obs[0]);
        let mut fast = s.clone();
        fast.v[3] = 50.0;
        fast.observe(&m, &mut obs);
        assert_eq!(obs[5 + 3], 10.0, "qvel clipped to ±10");
    }
}

#[test]
fn reset_noise_is_addressed_and_bounded() {
    let m = Model::load("hopper", Some("gymnasium")).unwrap();
    let a: State<f64> = State::reset(&m, 5, 0, 3);
    assert_eq!(a, State::reset(&m, 5, 0, 3));
    assert_ne!(a, State::reset(&m, 5, 0, 4));
    assert_ne!(a, State::reset(&m, 6, 0, 3));
    for (j, (q, jt)) in a.q.iter().zip(&m.joints).enumerate() {
        assert!((q - jt.qpos0).abs() <= 0.005 && a.v[j].abs() <= 0.005);
    }
    assert!((a.q[1] - 1.25).abs() <= 0.005, "noise is relative to qpos0");
    let f: State<f32> = State::reset(&m, 5, 0, 3);
    assert!((f.q[2] as f64 - a.q[2]).abs() < 1e-7, "f32 draws the same noise");
}

#[test]
fn batch_stepping_equals_one_by_one() {
    let m = Model::load("hopper", None).unwrap();
    let n = 6;
    let mut batch: Vec<State<f64>> = (0..n).map(|e| State::reset(&m, 9, 0, e as u32)).collect();
    let mut single = batch.clone();
    let mut out = vec![StepResult { reward: 0.0, done: false }; n];
    for t in 0..30 {
        let actions: Vec<f64> = (0..n * 3).map(|i| ((i + t) as f64 * 0.7).sin()).collect();
        step_batch(&m, &mut batch, &actions, &mut out);
        for (e, s) in single.iter_mut().enumerate() {
            let r = if s.done { StepResult { reward: 0.0, done: true } } else { s.step(&m, &actions[e * 3..e * 3 + 3]) };
            assert_eq!(r, out[e], "env {e} step {t}");
        }
    }
    assert_eq!(batch, single);
}

#[test]
fn constraint_forces_are_unilateral() {
    // The hopper at rest on the ground: the contact pushes up, never pulls.
    let m = Model::load("hopper", None).unwrap();
    let mut s: State<f64> = State::rest(&m);
    for _ in 0..100 {
        s.step(&m, &[0.0; 3]);
    }
    assert!(s.warm.iter().all(|&f| f >= 0.0));
    assert!(s.warm.iter().any(|&f| f > 0.0), "the foot is in contact");
    let a = acceleration(&m, &s.q, &s.v, &[0.0; 3], &mut s.warm.clone(), true);
    assert!(a.iter().all(|x| x.is_finite()));
}

fn spec_error(text: &str) -> String {
    format!("{:#}", EnvSpec::parse(text, "bad.ron").unwrap_err())
}

#[test]
fn malformed_env_files_name_the_position_and_field() {
    let good = SHIPPED.iter().find(|(n, _)| *n == "swimmer").unwrap().1;
    let e = spec_error(&good.replace("frame_skip: 4,", "frame_skip: 4,\n    colour: 3,"));
    assert!(e.starts_with("bad.ron:") && e.contains("colour"), "{e}");
    let e = spec_error(&good.replace("timestep: 0.01,", "timestep: fast,"));
    assert!(e.contains("bad.ron:7:15:") && e.contains("float"), "{e}");
    let e = spec_error(&good.replace("(name: \"rot2\", kind", "(nme: \"rot2\", kind"));
    assert!(e.contains("nme"), "{e}");
    let e = spec_error(&good.replace("Hinge(sign: 1.0), armature: 0.1),", "Pivot(sign: 1.0), armature: 0.1),"));
    assert!(e.contains("Pivot"), "{e}");
    let e = spec_error("(name: \"x\"");
    assert!(e.starts_with("bad.ron:1:"), "{e}");
}

#[test]
fn inconsistent_env_descriptions_are_errors() {
    let good = SHIPPED.iter().find(|(n, _)| *n == "hopper").unwrap().1;
    let compile = |text: &str, profile: Option<&str>| Model::new(&EnvSpec::parse(text, "t.ron")?, profile).map(|_| ());
    let err = |text: &str, profile: Option<&str>| format!("{:#}", compile(text, profile).unwrap_err());
    assert!(err(good, Some("mujoco")).contains("no profile `mujoco`"));
    assert!(err(&good.replace("(joint: \"leg_joint\", gear", "(joint: \"knee\", gear"), None).contains("unknown joint `knee`"));
    assert!(err(&good.replace("parent: Some(\"leg\")", "parent: Some(\"toe\")"), None).contains("unknown parent `toe`"));
    assert!(err(&good.replace("contacts: Some([\"foot_geom\"])", "contacts: Some([\"heel\"])"), Some("brax")).contains("unknown capsule `heel`"));
    assert!(err(&good.replace("\"thigh_joint\": (-2.61799, 0.0)", "\"hip\": (-2.61799, 0.0)"), None).contains("no joint `hip`"));
    assert!(err(&good.replace("Hinge(sign: -1.0)", "Hinge(sign: 2.0)"), None).contains("sign must be"));
    assert!(err(&good.replace("Qvel(from: 0, to: 6", "Qvel(from: 0, to: 9"), None).contains("outside 0..6"));
    assert!(err(&good.replace("mass: 2.7813566959781637", "mass: 0.0"), None).contains("mass is 0: it must be more than 0"));
    assert!(format!("{:#}", EnvSpec::load("walrus").unwrap_err()).contains("unknown environment `walrus`"));
}

#[test]
fn action_files_are_checked() {
    let rows = read_actions("a,b\n0.5,-1\n\n# note\n1e-3,2\n", "a.csv", 2).unwrap();
    assert_eq!(rows, vec![vec![0.5, -1.0], vec![1e-3, 2.0]]);
    let e = format!("{:#}", read_actions("0.5,-1\n0.1,0.2,0.3\n", "a.csv", 2).unwrap_err());
    assert!(e.contains("a.csv:2:") && e.contains("3 columns") && e.contains("2 actuators"), "{e}");
    let e = format!("{:#}", read_actions("0.5,-1\n0.1,x\n", "a.csv", 2).unwrap_err());
    assert!(e.contains("a.csv:2:") && e.contains("`x`"), "{e}");
    assert!(read_actions("", "a.csv", 3).unwrap().is_empty());
}

#[test]
fn half_cheetah_resets_velocities_with_normal_noise() {
    let m = Model::load("half_cheetah", None).unwrap();
    let v: Vec<f64> = (0..300).flat_map(|e| State::<f64>::reset(&m, 2, 0, e).v).collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let sd = (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64).sqrt();
    assert!(mean.abs() < 0.01 && (sd - 0.1).abs() < 0.01, "mean {mean} sd {sd}");
    assert!(v.iter().any(|x| x.abs() > 0.2), "a normal, not a uniform on ±0.1");
}

fn point_segment(p: [f64; 2], a: [f64; 2], b: [f64; 2]) -> f64 {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let t = (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
    ((p[0] - a[0] - t * dx).powi(2) + (p[1] - a[1] - t * dy).powi(2)).sqrt()
}

fn segments_cross(a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]) -> bool {
    let side = |p: [f64; 2], q: [f64; 2], r: [f64; 2]| (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]);
    side(a, b, c) * side(a, b, d) < 0.0 && side(c, d, a) * side(c, d, b) < 0.0
}

// grove models no capsule-capsule contacts. In Gymnasium's hopper every capsule could touch a
// non-adjacent one; within episodes (up to termination) none comes within reach.
#[test]
fn gymnasium_hopper_capsules_never_touch_each_other_within_episodes() {
    let m = Model::load("hopper", Some("gymnasium")).unwrap();
    let caps = &m.capsules;
    let mut closest = f64::INFINITY;
    for seed in 0..8u32 {
        let mut s: State<f64> = State::reset(&m, 3, 0, seed);
        for t in 0..300 {
            let a: Vec<f64> = (0..3).map(|k| (0.3 * t as f64 + seed as f64 + 2.0 * k as f64).sin()).collect();
            let done = s.step(&m, &a).done;
            let k = kinematics(&m, &s.q);
            let seg = |c: &grove::sim::model::Capsule| c.ends.map(|e| grove::sim::dynamics::world_point(&m, &k, c.body, e));
            for (i, ci) in caps.iter().enumerate() {
                for cj in caps.iter().skip(i + 2) {
                    // Non-adjacent bodies only (MuJoCo filters parent-child pairs).
                    let ([a, b], [c, d]) = (seg(ci), seg(cj));
                    let gap = if segments_cross(a, b, c, d) {
                        0.0
                    } else {
                        point_segment(a, c, d).min(point_segment(b, c, d)).min(point_segment(c, a, b)).min(point_segment(d, a, b))
                    };
                    closest = closest.min(gap - ci.radius - cj.radius - ci.margin);
                }
            }
            if done {
                break;
            }
        }
    }
    assert!(closest > 0.0, "two hopper capsules came within contact reach ({closest:.4} m)");
}
