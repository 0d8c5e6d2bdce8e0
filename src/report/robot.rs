//! Pictures of a robot over an episode: the bodies' capsules (from the environment's
//! description; the compiled model keeps only those that touch the floor) placed by forward
//! kinematics at each control step, drawn as a strip of frames (SVG or PNG) or an animation
//! (GIF). Actions come from a closure of the observation, so a fixed action file, zeros and an
//! evolved policy are all one hook ([`Policy`]).

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::sim::dynamics::{Real, kinematics, r};
use crate::sim::{EnvSpec, Model, State};

/// A policy: the action (nu,) for control step `t` given the observation (model.obs_size,).
pub type Policy<'a> = Box<dyn FnMut(usize, &[f64]) -> Vec<f64> + 'a>;

/// One capsule in the world: end centres (u, w), metres; radius, metres; its body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Body index.
    pub body: usize,
    /// First end centre.
    pub a: [f64; 2],
    /// Second end centre.
    pub b: [f64; 2],
    /// Radius.
    pub radius: f64,
}

/// The robot at one control step.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Control step (0: the reset state).
    pub step: usize,
    /// Its capsules.
    pub segments: Vec<Segment>,
    /// Return so far.
    pub total: f64,
}

/// Every capsule of every body, in body frames: (body, from, to, radius). Bodies are matched
/// to the model's by name.
fn capsules(model: &Model, spec: &EnvSpec) -> Vec<(usize, [f64; 2], [f64; 2], f64)> {
    let mut out = Vec::new();
    for body in &spec.bodies {
        let Some(b) = model.bodies.iter().position(|m| m.name == body.name) else { continue };
        for c in &body.capsules {
            out.push((b, [c.from.0, c.from.1], [c.to.0, c.to.1], c.radius));
        }
    }
    // A body the description gives no capsule (the swimmer's: its geoms only set the inertia)
    // is drawn as the rod its inertia implies: centred on the COM, along the in-plane axis of
    // least inertia, length √(12·I_max/m), radius √(2·I_min/m).
    for (b, body) in model.bodies.iter().enumerate() {
        if out.iter().any(|c| c.0 == b) || body.mass <= 0.0 {
            continue;
        }
        let [il, it, _] = body.inertia;
        let (axis, big, small) = if il <= it { (body.inertia_angle, it, il) } else { (body.inertia_angle + std::f64::consts::FRAC_PI_2, il, it) };
        let half = 0.5 * (12.0 * big / body.mass).sqrt();
        let radius = (2.0 * small / body.mass).sqrt().max(0.01);
        let d = [axis.cos() * half, axis.sin() * half];
        out.push((b, [body.com[0] - d[0], body.com[1] - d[1]], [body.com[0] + d[0], body.com[1] + d[1]], radius));
    }
    out.sort_by_key(|c| c.0);
    out
}

/// Steps an episode of `steps` control steps (fewer if it terminates) in `T` and records a
/// frame at each step. `seed` adds reset noise (`None`: the rest pose). An evolved policy plays
/// in f32, as it was trained and as `grove rollout --policy` replays it; the observation and
/// the actions pass through f64 exactly.
pub fn episode<T: Real>(env: &str, profile: Option<&str>, policy: &mut Policy<'_>, steps: usize, seed: Option<u64>) -> Result<(Model, Vec<Frame>)> {
    let model = Model::load(env, profile)?;
    let spec = EnvSpec::load(env)?.with_profile(profile)?;
    let caps = capsules(&model, &spec);
    if caps.is_empty() {
        bail!("{}: the environment describes no capsules to draw", model.name);
    }
    let mut state: State<T> = match seed {
        Some(s) => State::reset(&model, s, 0, 0),
        None => State::rest(&model),
    };
    let point = |p: [T; 2]| [p[0].exact_f64(), p[1].exact_f64()];
    let shot = |state: &State<T>, step: usize, total: f64| {
        let k = kinematics(&model, &state.q);
        let segments = caps
            .iter()
            .map(|&(b, from, to, radius)| Segment {
                body: b,
                a: point(crate::sim::dynamics::world_point(&model, &k, b, from)),
                b: point(crate::sim::dynamics::world_point(&model, &k, b, to)),
                radius,
            })
            .collect();
        Frame { step, segments, total }
    };
    let mut frames = vec![shot(&state, 0, 0.0)];
    let mut obs: Vec<T> = Vec::new();
    let mut total = 0.0;
    for t in 0..steps {
        state.observe(&model, &mut obs);
        let seen: Vec<f64> = obs.iter().map(|x| x.exact_f64()).collect();
        let action = policy(t, &seen);
        if action.len() != model.nu() {
            bail!("the policy gave {} actions at step {t}; {} has {} actuators", action.len(), model.name, model.nu());
        }
        let action: Vec<T> = action.into_iter().map(r).collect();
        let res = state.step(&model, &action);
        total += res.reward.exact_f64();
        frames.push(shot(&state, t + 1, total));
        if res.done {
            break;
        }
    }
    Ok((model, frames))
}

/// The world window that holds every frame around its own root body: (half width of a panel,
/// lowest w, highest w), metres.
fn window(frames: &[Frame], floor: Option<f64>) -> (f64, f64, f64) {
    let (mut half, mut lo, mut hi) = (0.3f64, f64::INFINITY, f64::NEG_INFINITY);
    for f in frames {
        let cx = centre(f);
        for s in &f.segments {
            for p in [s.a, s.b] {
                half = half.max((p[0] - cx).abs() + s.radius);
                lo = lo.min(p[1] - s.radius);
                hi = hi.max(p[1] + s.radius);
            }
        }
    }
    if let Some(fl) = floor {
        lo = lo.min(fl);
    }
    let pad = 0.1 * (hi - lo).max(2.0 * half);
    (half * 1.15, lo - pad, hi + pad)
}

/// The u the view follows: the first body's capsules' mean.
fn centre(f: &Frame) -> f64 {
    let first: Vec<&Segment> = f.segments.iter().filter(|s| s.body == f.segments[0].body).collect();
    first.iter().map(|s| (s.a[0] + s.b[0]) / 2.0).sum::<f64>() / first.len().max(1) as f64
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e:?}")
}

/// Draws one frame into `area`, `(half, lo, hi)` the world window around the frame's centre.
fn draw_frame<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, f: &Frame, floor: Option<f64>, (half, lo, hi): (f64, f64, f64), label: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (w, h) = area.dim_in_pixel();
    let s = (w as f64 / (2.0 * half)).min(h as f64 / (hi - lo));
    let cx = centre(f);
    let px = |p: [f64; 2]| (((p[0] - cx) * s + w as f64 / 2.0) as i32, (h as f64 - (p[1] - lo) * s) as i32);
    if let Some(fl) = floor {
        let y = px([cx, fl]).1;
        area.draw(&Rectangle::new([(0, y), (w as i32, h as i32)], RGBColor(235, 232, 225).filled())).map_err(err)?;
        // Ticks every 0.5 m show the motion while the view follows the robot.
        let mut u = ((cx - half) / 0.5).floor() * 0.5;
        while u <= cx + half {
            let x = px([u, fl]).0;
            area.draw(&PathElement::new(vec![(x, y), (x, y + 6)], RGBColor(150, 140, 120).stroke_width(1))).map_err(err)?;
            u += 0.5;
        }
        area.draw(&PathElement::new(vec![(0, y), (w as i32, y)], RGBColor(120, 110, 90).stroke_width(2))).map_err(err)?;
    }
    for seg in &f.segments {
        let col = crate::report::plot::PALETTE[seg.body % crate::report::plot::PALETTE.len()];
        let r = ((seg.radius * s) as i32).max(1);
        let (a, b) = (px(seg.a), px(seg.b));
        area.draw(&PathElement::new(vec![a, b], col.stroke_width(2 * r as u32))).map_err(err)?;
        for p in [a, b] {
            area.draw(&Circle::new(p, r, col.filled())).map_err(err)?;
        }
    }
    if label {
        let text = format!("step {} · return {:.1}", f.step, f.total);
        area.draw(&Text::new(text, (6, 6), ("sans-serif", 14).into_font().color(&BLACK))).map_err(err)?;
    }
    Ok(())
}

/// Writes frames to `out`: `.svg` or `.png` a strip of `panels` frames evenly spread over the
/// episode; `.gif` an animation of every `every`-th frame (the control step's real time, at
/// most 50 frames per second).
pub fn write(out: &Path, model: &Model, frames: &[Frame], panels: usize, every: usize) -> Result<()> {
    crate::report::plot::register_font();
    let ext = out.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let win = window(frames, model.floor);
    let pick: Vec<&Frame> = {
        let n = panels.clamp(1, frames.len());
        (0..n).map(|i| &frames[if n == 1 { 0 } else { i * (frames.len() - 1) / (n - 1) }]).collect()
    };
    let panel = (240u32, (240.0 * (win.2 - win.1) / (2.0 * win.0)).clamp(120.0, 480.0) as u32);
    match ext.as_str() {
        "svg" | "png" => {
            let size = (panel.0 * pick.len() as u32, panel.1 + 24);
            let draw = |root: DrawingArea<_, Shift>| -> Result<()> { strip(&root, &pick, model.floor, win) };
            if ext == "svg" {
                let root = SVGBackend::new(out, size).into_drawing_area();
                draw(root.clone())?;
                root.present().map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
            } else {
                let root = BitMapBackend::new(out, size).into_drawing_area();
                strip(&root, &pick, model.floor, win)?;
                root.present().map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
            }
        }
        "gif" => {
            let every = every.max(1);
            let delay = ((model.dt() * every as f64 * 1000.0) as u32).max(20);
            let size = (480, (480.0 * (win.2 - win.1) / (2.0 * win.0)).clamp(240.0, 720.0) as u32);
            let root = BitMapBackend::gif(out, size, delay).map_err(|e| anyhow!("cannot write {}: {e:?}", out.display()))?.into_drawing_area();
            for f in frames.iter().step_by(every) {
                root.fill(&WHITE).map_err(err)?;
                draw_frame(&root, f, model.floor, win, true)?;
                root.present().map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
            }
        }
        _ => bail!("--out {}: give a file ending in .svg, .png (a strip of frames) or .gif (an animation)", out.display()),
    }
    Ok(())
}

fn strip<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, pick: &[&Frame], floor: Option<f64>, win: (f64, f64, f64)) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(24);
    let _ = top;
    for (area, f) in body.split_evenly((1, pick.len())).iter().zip(pick) {
        draw_frame(area, f, floor, win, false)?;
        let text = format!("step {}", f.step);
        root.draw(&Text::new(text, (area.get_base_pixel().0 + 6, 4), ("sans-serif", 14).into_font().color(&BLACK))).map_err(err)?;
    }
    Ok(())
}

/// The saved policy of a `grove control` report, for `grove render --policy`; a report of
/// another command is an error that says what to use instead.
pub fn read_policy(path: &Path) -> Result<crate::backend::cpu::control::SavedPolicy> {
    let text = crate::input::read_text(path, "the report", crate::input::REPORT_BYTES)?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not a JSON report", path.display()))?;
    if v.get("policy").is_none() {
        let cmd = v.get("command").and_then(|c| c.as_str()).unwrap_or("?");
        bail!("{}: --policy needs a report of `grove control`, not of `grove {cmd}`: use --actions FILE.csv for fixed actions", path.display());
    }
    crate::backend::cpu::control::SavedPolicy::read(path)
}

/// A saved policy as a [`Policy`]: the program, checked against `model`, acting on each
/// observation as `grove rollout --policy` does (f32, actions = tanh of the outputs). Played by
/// [`episode`] in f32, the episode is the roll-out's, bit for bit.
pub fn saved_policy(saved: &crate::backend::cpu::control::SavedPolicy, model: &crate::sim::Model) -> Result<Policy<'static>> {
    let nodes = saved.tree(model)?;
    let mut source = crate::sim::rollout::ActionSource::Policy(Box::new(crate::backend::cpu::control::Policy::for_model(&nodes, model)?));
    let nu = model.nu();
    Ok(Box::new(move |t: usize, obs: &[f64]| {
        let o: Vec<f32> = obs.iter().map(|&x| x as f32).collect();
        source.action(t, nu, &o)
    }))
}
