//! `grove control --policy linear`: a linear policy over normalised observations, tuned by
//! augmented random search ([`crate::evolve::ars`]), the baseline of Mania, Guy and Recht (2018)
//! on grove's own simulator.
//!
//! The policy is `a = tanh(W · (o − μ) / σ)`, one row of `W` per actuator: `μ` and `σ` are the
//! mean and standard deviation of every observation the search has seen so far (a component
//! whose deviation is below 10⁻⁷ is read as 0), frozen into the policy each iteration, as ARS
//! V2 does. Each iteration plays `2N` perturbed policies and the unperturbed one for `episodes`
//! episodes each, all from the iteration's fresh starts, in one call of the backend (the GPU's
//! roll-out kernel or the CPU); the roll-outs also sum what the unperturbed policy observes
//! ([`crate::sim::stats`]), on the device where they run, and those sums update the statistics,
//! merged in episode order, so both backends give the same run.
//!
//! A linear policy is written as a grove program, so the roll-out kernels, `grove rollout` and
//! `grove render --policy`, Python's `act` and the exports play it unchanged: output `j` is
//! `c_j + Σ_i a_ji x_i` with `a_ji = W_ji / σ_i` and `c_j = −Σ_i a_ji μ_i` (terms with
//! `a_ji = 0` left out), a sum nested to the right so that the interpreter's stack stays three
//! deep whatever the number of observations.

use anyhow::{Result, bail, ensure};

use super::{Arena, ControlSettings, PolicyScores, TEST_GENERATION, score_policy};
use crate::task::base::report::EvolveResult;
use crate::task::base::report::describe_devices;
use crate::backend::Backend;
use crate::backend::cpu::control::ControlRun;
use crate::evolve::ars::{self, ArsConfig, Iteration};
pub use crate::evolve::ars::LinearState;
use crate::program::Op;
use crate::program::tree::{Node, Population};
use crate::sim::Model;
pub use crate::sim::stats::{MIN_STD, Normaliser, ObsStats};

/// Most `directions × episodes` per iteration (each direction plays two policies).
pub const MAX_EPISODES_PER_ITERATION: usize = 1 << 22;

/// A linear policy: `W` (`nu × n_obs`, row-major, one row per actuator) over the observations
/// normalised by `norm`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearPolicy {
    /// `W`.
    pub weights: Vec<f64>,
    /// `μ`, `σ`.
    pub norm: Normaliser,
    /// Actuators.
    pub nu: usize,
}

impl LinearPolicy {
    /// Observation components.
    pub fn n_obs(&self) -> usize {
        self.norm.mean.len()
    }

    /// Output `j`'s coefficients on the raw observations and its constant: `a_ji = W_ji / σ_i`
    /// and `c_j = −Σ_i a_ji μ_i`, in f64.
    pub fn affine(&self, j: usize) -> (Vec<f64>, f64) {
        let n = self.n_obs();
        let a: Vec<f64> = (0..n).map(|i| self.weights[j * n + i] * self.norm.scale(i)).collect();
        let c = -a.iter().zip(&self.norm.mean).map(|(a, m)| a * m).sum::<f64>();
        (a, c)
    }

    /// The policy as a grove program (prefix order, output node `j` for actuator `j`; see the
    /// module's docs), its constants rounded to f32.
    pub fn tree(&self) -> Vec<Node> {
        let mut nodes = Vec::with_capacity(self.max_nodes());
        for j in 0..self.nu {
            if j + 1 < self.nu {
                nodes.push(Node::func(Op::Add));
            }
            let (a, c) = self.affine(j);
            let terms: Vec<(usize, f32)> = a.iter().enumerate().map(|(i, &w)| (i, w as f32)).filter(|&(_, w)| w != 0.0).collect();
            let first = nodes.len();
            for &(i, w) in &terms {
                nodes.extend([Node::func(Op::Add), Node::func(Op::Mul), Node::constant(w), Node::var(i as u32)]);
            }
            nodes.push(Node::constant(c as f32));
            nodes[first].out = j as u8 + 1;
        }
        nodes
    }

    /// The longest [`Self::tree`] for these sizes.
    pub fn max_nodes(&self) -> usize {
        self.nu * (4 * self.n_obs() + 1) + self.nu.saturating_sub(1)
    }

    /// The weights by actuator and observation, for the report.
    pub fn json(&self, observations: &[String], actuators: &[String]) -> serde_json::Value {
        let n = self.n_obs();
        serde_json::json!({
            "observations": observations,
            "mean": self.norm.mean.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(),
            "std": self.norm.std.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(),
            "weights": actuators.iter().enumerate().map(|(j, a)| serde_json::json!({
                "actuator": a,
                "weights": self.weights[j * n..(j + 1) * n].iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// A search between iterations: `W`, the statistics of the states seen, every iteration so far,
/// and the env steps and seconds of roll-outs played.
pub(super) struct Search {
    /// Which of the searches side by side this is: it draws directions `index N ..` of each
    /// iteration ([`ars::directions_from`]); 0 for a run of one.
    index: usize,
    theta: Vec<f64>,
    stats: ObsStats,
    history: Vec<Iteration>,
    /// The iteration a run of this process started at (a resumed run's earlier ones are in
    /// the history).
    started: usize,
    /// Env steps and roll-out seconds played. Searches side by side play in one call, which
    /// the first one counts whole: its `played` is the run's.
    pub played: (u64, f64),
}

impl Search {
    /// `W = 0` and nothing seen, for `nu` actuators over `n_obs` observations.
    pub fn fresh(nu: usize, n_obs: usize) -> Self {
        Search { index: 0, theta: vec![0.0; nu * n_obs], stats: ObsStats::new(n_obs), history: Vec::new(), started: 0, played: (0, 0.0) }
    }

    /// `searches` fresh searches side by side (the first as [`Self::fresh`]).
    pub fn fresh_side_by_side(nu: usize, n_obs: usize, searches: usize) -> Vec<Self> {
        (0..searches.max(1)).map(|index| Search { index, ..Self::fresh(nu, n_obs) }).collect()
    }

    /// The searches side by side a checkpoint saved (`state` and its [`LinearState::side`]),
    /// which must be `searches` of them.
    pub fn resumed_side_by_side(state: &LinearState, nu: usize, n_obs: usize, env: &str, played: Option<(u64, f64)>, searches: usize) -> Result<Vec<Self>> {
        ensure!(
            state.side.len() + 1 == searches,
            "the checkpoint holds {} random search{} side by side; --searches (searches) is {searches}: resume it with its own",
            state.side.len() + 1,
            if state.side.is_empty() { "" } else { "es" }
        );
        let mut out = vec![Self::resumed(state, nu, n_obs, env, played)?];
        for (k, side) in state.side.iter().enumerate() {
            out.push(Search { index: k + 1, ..Self::resumed(side, nu, n_obs, env, None)? });
        }
        Ok(out)
    }

    /// The search a checkpoint saved (`state`, checked to be `nu × n_obs` for `env`), with the
    /// env steps and roll-out seconds played before it.
    pub fn resumed(state: &LinearState, nu: usize, n_obs: usize, env: &str, played: Option<(u64, f64)>) -> Result<Self> {
        ensure!(
            state.weights.len() == nu * n_obs && state.sum.len() == n_obs,
            "the checkpoint's linear search has {} weights over {} observations; {env} has {nu} × {n_obs}",
            state.weights.len(),
            state.sum.len(),
        );
        let (theta, stats, history) = state.restore();
        Ok(Search { index: 0, theta, stats, started: history.len(), history, played: played.unwrap_or((0, 0.0)) })
    }

    /// The next iteration.
    pub fn next(&self) -> usize {
        self.history.len()
    }

    /// The current policy: `W` over the statistics seen so far.
    pub fn policy(&self, nu: usize) -> LinearPolicy {
        LinearPolicy { weights: self.theta.clone(), norm: self.stats.normaliser(), nu }
    }

    /// What a checkpoint keeps.
    pub fn state(&self) -> LinearState {
        LinearState::of(self.next(), &self.theta, &self.stats, &self.history)
    }

    /// The unperturbed policy's training return at each iteration.
    pub fn returns(&self) -> impl Iterator<Item = f64> + '_ {
        self.history.iter().map(|h| h.central)
    }

    /// Runs iteration [`Self::next`] of `settings.linear`'s search from `settings.engine.seed`
    /// in `arena`, on `backend`: plays the `2N` perturbed policies and, last, the unperturbed
    /// one in one call, on the iteration's fresh starts; steps `W`; adds what the unperturbed
    /// policy observed (summed where the roll-outs ran) to the statistics. With `program`, each policy
    /// is that program on top of the linear one ([`super::residual::Residual::compose`]), so
    /// the search tunes the linear policy under it. Returns the iteration's row (also pushed to
    /// the history) and the unperturbed policy it played.
    pub(super) fn iteration(&mut self, settings: &ControlSettings, backend: &Backend, arena: &Arena, program: Option<&[Node]>) -> Result<(Iteration, Vec<Node>)> {
        let mut rows = iteration_side_by_side(std::slice::from_mut(self), settings, backend, arena, program)?;
        Ok(rows.pop().expect("one search, one row"))
    }

    /// Seconds of the iterations this process ran.
    fn ran_seconds(&self) -> Vec<f64> {
        self.history[self.started.min(self.history.len())..].iter().map(|h| h.seconds).collect()
    }
}

/// Runs the next iteration of every search of `searches` (side by side, at the same iteration)
/// as [`Search::iteration`] runs one: their `2N + 1` policies each, search by search, are played
/// in one roll-out call on the iteration's fresh starts, and each search steps its own `W` and
/// statistics by its own returns and observations, so each search is the run it would be alone
/// with its directions. The first search's `played` counts the call. One row and unperturbed
/// policy per search.
pub(super) fn iteration_side_by_side(
    searches: &mut [Search],
    settings: &ControlSettings,
    backend: &Backend,
    arena: &Arena,
    program: Option<&[Node]>,
) -> Result<Vec<(Iteration, Vec<Node>)>> {
    let (cfg, seed, nu) = (&settings.linear, settings.engine.seed, arena.m.nu());
    let t0 = std::time::Instant::now();
    let Some(it) = searches.first().map(Search::next) else { return Ok(Vec::new()) };
    ensure!(searches.iter().all(|s| s.next() == it), "searches side by side must be at the same iteration");
    let run_it = arena.run.at_generation(it);
    let per = 2 * cfg.directions + 1;
    let mut all_deltas = Vec::with_capacity(searches.len());
    let mut trees: Vec<Vec<Node>> = Vec::with_capacity(per * searches.len());
    for s in searches.iter() {
        let norm = s.stats.normaliser();
        let deltas = ars::directions_from(seed, it, s.index * cfg.directions, cfg.directions, s.theta.len());
        let thetas = ars::perturbed(&s.theta, &deltas, cfg.noise);
        trees.extend(thetas.iter().chain([&s.theta]).map(|w| {
            let linear = LinearPolicy { weights: w.clone(), norm: norm.clone(), nu };
            match program {
                None => linear.tree(),
                Some(p) => super::residual::Residual::new(linear).compose(p),
            }
        }));
        all_deltas.push(deltas);
    }
    let mut pop = Population::new(trees.len(), trees.iter().map(Vec::len).max().unwrap_or(1).max(1), nu);
    for (r, t) in trees.iter().enumerate() {
        pop.set_tree(r, t).map_err(|e| anyhow::anyhow!("a linear policy's tree: {e}"))?;
    }
    let t = std::time::Instant::now();
    let (means, steps, seen, _) = backend.control_returns_observed(&pop, &arena.trained, &run_it, None)?;
    searches[0].played.0 += steps;
    searches[0].played.1 += t.elapsed().as_secs_f64();
    let seconds = t0.elapsed().as_secs_f64();
    let mut out = Vec::with_capacity(searches.len());
    let mut trees = trees.into_iter();
    for (k, (s, deltas)) in searches.iter_mut().zip(&all_deltas).enumerate() {
        let mine = &means[k * per..(k + 1) * per];
        let (perturbed, central) = (&mine[..per - 1], mine[per - 1]);
        let step = ars::step(&mut s.theta, deltas, perturbed, cfg);
        // The unperturbed policy's observations update the statistics: over the perturbed
        // policies' (ARS's workers' way) Walker2d ended a third lower on every seed tried
        // (docs/benchmarks.md, issue 29, 2026-11-29).
        s.stats.merge(&seen[k * per + per - 1]);
        let finite: Vec<f64> = perturbed.iter().copied().filter(|r| r.is_finite()).collect();
        let row = Iteration {
            best: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean: finite.iter().sum::<f64>() / finite.len().max(1) as f64,
            central,
            step,
            seconds,
        };
        s.history.push(row);
        let central_tree = trees.by_ref().nth(per - 1).unwrap_or_default();
        out.push((row, central_tree));
    }
    Ok(out)
}

/// Runs the iterations of `searches` (side by side, [`iteration_side_by_side`]; one for a run
/// of one) up to `iterations` (fewer when `watch` ends the run or a stop is asked for, which
/// fails with [`crate::task::base::options::Stopped`]), saving checkpoints as `opts` asks
/// ([`save_checkpoint`]), with `settings.linear`'s search from `settings.engine.seed`. The
/// progress line and `watch` read the highest unperturbed return among the searches.
pub(super) fn iterate(
    settings: &ControlSettings,
    backend: &Backend,
    opts: &crate::task::base::options::RunOptions,
    arena: &Arena,
    searches: &mut [Search],
    iterations: usize,
    mut watch: Option<&mut crate::task::base::budget::Watch<'_>>,
) -> Result<crate::task::base::budget::Ending> {
    let cfg = &settings.linear;
    let every = (iterations / 10).max(1);
    let Some(first) = searches.first().map(Search::next) else { return Ok(crate::task::base::budget::Ending::Generations) };
    for it in first..iterations {
        let rows = iteration_side_by_side(searches, settings, backend, arena, None)?;
        for (k, (row, _)) in rows.iter().enumerate() {
            if row.step.overflow && !opts.quiet {
                let which = if rows.len() > 1 { format!(" (search {})", k + 1) } else { String::new() };
                opts.say(&format!("note: iteration {it}'s step{which} would have made W non-finite and was not taken: lower --step-size ({})", cfg.step_size));
            }
        }
        if settings.exploit_every > 0 && (it + 1) % settings.exploit_every == 0 {
            for (to, from) in exploit(searches) {
                if opts.verbose {
                    opts.say(&format!("iteration {it:>5}  search {} takes search {}'s W and statistics", to + 1, from + 1));
                }
            }
        }
        // The leading search: the highest unperturbed return (NaN never leads), the first on a tie.
        let lead = crate::program::fitness::argmax(&rows.iter().map(|r| r.0.central).collect::<Vec<_>>());
        let (row, central) = &rows[lead];
        if !opts.quiet && (opts.verbose || it % every == 0 || it + 1 == iterations) {
            let which = if rows.len() > 1 { format!("  (search {} of {})", lead + 1, rows.len()) } else { String::new() };
            opts.say(&format!(
                "iteration {it:>5}  return {:>10.2}  best perturbed {:>10.2}  step {:.4}  {:.2} s{which}",
                row.central, row.best, row.step.length, row.seconds
            ));
        }
        let best = crate::evolve::Best { fitness: -row.central, nodes: central.clone(), generation: it, genome: None };
        let end = watch.as_mut().and_then(|w| w.finish(it, &best));
        let stop = opts.stop_requested();
        if opts.checkpoint_due(it + 1, iterations) || end.is_some() || stop {
            save_checkpoint(opts, side_by_side_state(searches), &searches[lead].policy(arena.m.nu()).tree(), searches[0].played)?;
        }
        if stop {
            return Err(crate::task::base::options::Stopped { generation: it + 1, checkpoint: opts.checkpoint_path() }.into());
        }
        if let Some(e) = end {
            return Ok(e);
        }
    }
    Ok(crate::task::base::budget::Ending::Generations)
}

/// The iterations whose unperturbed returns rank searches for [`exploit`] (the last ones; a
/// single iteration's return, of a few episodes, is noisy).
pub const EXPLOIT_WINDOW: usize = 3;

/// Population-based exploitation among searches side by side (`--exploit-every`): ranks the
/// searches by the mean unperturbed return of their last [`EXPLOIT_WINDOW`] iterations (a NaN
/// lowest; ties by position), and each of the worse half takes `W` and the statistics of its
/// rank's twin in the better half (the worst the best's, and so on) where that one ranks
/// strictly higher. Each keeps its own directions and history, so the copies part again. At 60
/// s the searches of one run end thousands apart (Walker2d 3314 to 5447 on validation
/// episodes, docs/benchmarks.md issue 57, 2026-12-06). Returns the copies as (to, from).
pub(super) fn exploit(searches: &mut [Search]) -> Vec<(usize, usize)> {
    let score = |s: &Search| {
        let last: Vec<f64> = s.history.iter().rev().take(EXPLOIT_WINDOW).map(|h| h.central).collect();
        let m = last.iter().sum::<f64>() / last.len().max(1) as f64;
        if m.is_nan() || last.is_empty() { f64::NEG_INFINITY } else { m }
    };
    let scores: Vec<f64> = searches.iter().map(score).collect();
    let mut order: Vec<usize> = (0..searches.len()).collect();
    // Best first; a stable sort keeps the earlier search first on a tie.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let half = searches.len() / 2;
    let mut copies = Vec::new();
    for k in 0..half {
        let (from, to) = (order[k], order[order.len() - 1 - k]);
        if scores[from] > scores[to] {
            let (theta, stats) = (searches[from].theta.clone(), searches[from].stats.clone());
            searches[to].theta = theta;
            searches[to].stats = stats;
            copies.push((to, from));
        }
    }
    copies
}

/// What a checkpoint keeps of searches side by side: the first one's state, holding the
/// others' as its [`LinearState::side`].
pub(super) fn side_by_side_state(searches: &[Search]) -> LinearState {
    let mut state = searches[0].state();
    state.side = searches[1..].iter().map(Search::state).collect();
    state
}

/// Runs `grove control --policy linear` (settings already checked by the caller).
pub fn search(settings: &ControlSettings, backend: &Backend, opts: &crate::task::base::options::RunOptions) -> Result<EvolveResult> {
    let start = std::time::Instant::now();
    ensure!(
        settings.islands.count <= 1,
        "--policy linear (policy) runs one search: leave out --islands (islands.count is {})",
        settings.islands.count
    );
    let arena = Arena::load(settings)?;
    check_memory(settings, &arena, backend, opts, 0)?;
    let (nu, n_obs) = (arena.m.nu(), arena.m.obs_size);
    let mut searches = match &opts.resume {
        None => Search::fresh_side_by_side(nu, n_obs, settings.searches),
        Some(c) => {
            let Some(state) = &c.linear else {
                bail!("the checkpoint holds an evolved population, not a --policy linear search: resume it without --set policy=linear");
            };
            Search::resumed_side_by_side(state, nu, n_obs, &arena.m.name, c.env_steps, settings.searches)?
        }
    };
    // The unperturbed policy's training return (its `Best`'s fitness is minus it).
    let goal = crate::task::base::budget::Goal { measure: crate::task::base::budget::Measure::Return, value: Box::new(|b: &crate::evolve::Best| -b.fitness) };
    let mut watch = crate::task::base::budget::Watch::new(settings.budget, goal);
    let searching = std::time::Instant::now();
    let ended = iterate(settings, backend, opts, &arena, &mut searches, settings.engine.generations, Some(&mut watch))?;
    let (setup, search_seconds) = (searching.duration_since(start).as_secs_f64(), searching.elapsed().as_secs_f64());
    let seconds = start.elapsed().as_secs_f64();
    // Its validation episodes count in the split's final scoring.
    let choice = choose_search(&searches, settings, &arena)?;
    let chosen = &searches[choice.as_ref().map_or(0, |c| c.chosen)];
    let last = chosen.policy(nu);
    let nodes = last.tree();
    let train = score_policy(&nodes, &arena.m, &arena.run)?;
    let test = score_policy(&nodes, &arena.m, &ControlRun { episodes: settings.test_episodes, generation: TEST_GENERATION, ..arena.run })?;
    let split = crate::task::base::report::Split::of(setup, search_seconds, start.elapsed().as_secs_f64() - seconds, &searches[0].ran_seconds(), backend.kernel_loads());
    let (played, rollout_seconds) = searches[0].played;
    let ran = Ran {
        policy: &last,
        nodes: &nodes,
        history: &chosen.history,
        ended: &ended,
        train: &train,
        test: &test,
        healthy: arena.healthy,
        seconds,
        played,
        rollout_seconds,
        split,
        choice: choice.as_ref(),
    };
    report(settings, &arena.m, ran, &arena.names, &arena.acts, &describe_devices(backend, &[]))
}

/// How the reported search was chosen among searches side by side.
pub(super) struct Choice {
    /// Each search's last unperturbed training return and, with validation episodes, its last
    /// policy's mean return over them (the env's own reward).
    pub candidates: Vec<(f64, Option<f64>)>,
    /// Validation episodes each search's policy played (0: chosen by training return).
    pub episodes: usize,
    /// The chosen search's index.
    pub chosen: usize,
}

impl Choice {
    fn json(&self) -> serde_json::Value {
        use crate::report::num;
        let c: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .enumerate()
            .map(|(k, &(t, v))| serde_json::json!({"search": k + 1, "train_return": num(t), "validation_return": v.map(num)}))
            .collect();
        serde_json::json!({"count": self.candidates.len(), "validation_episodes": self.episodes, "generation_word": super::VALIDATION_GENERATION, "candidates": c, "chosen": self.chosen + 1})
    }

    fn line(&self) -> String {
        let (t, v) = self.candidates[self.chosen];
        let by = match v {
            Some(v) => format!("validation return {v:.2} over {} episodes", self.episodes),
            None => format!("training return {t:.2} (no validation episodes)"),
        };
        let all: Vec<String> = self.candidates.iter().map(|&(t, v)| format!("{:.1}", v.unwrap_or(t))).collect();
        format!("chosen        search {} of {} side by side, by its {by}; all: {}\n", self.chosen + 1, self.candidates.len(), all.join(" "))
    }
}

/// With more than one search side by side, the one to report: the highest mean return of its
/// last policy over `settings.validation_episodes` fresh episodes (reset noise of
/// [`super::VALIDATION_GENERATION`], the env's own reward), or with none the highest last
/// training return; the first on a tie, NaN never chosen. `None` for one search.
pub(super) fn choose_search(searches: &[Search], settings: &ControlSettings, arena: &Arena) -> Result<Option<Choice>> {
    if searches.len() < 2 {
        return Ok(None);
    }
    let nu = arena.m.nu();
    let episodes = settings.validation_episodes;
    let run = ControlRun { episodes, generation: super::VALIDATION_GENERATION, ..arena.run };
    let mut candidates = Vec::with_capacity(searches.len());
    for s in searches {
        let train = s.history.last().map_or(f64::NAN, |h| h.central);
        let validation = if episodes > 0 { Some(score_policy(&s.policy(nu).tree(), &arena.m, &run)?.mean()) } else { None };
        candidates.push((train, validation));
    }
    let chosen = crate::program::fitness::argmax(&candidates.iter().map(|&(t, v)| v.unwrap_or(t)).collect::<Vec<_>>());
    Ok(Some(Choice { candidates, episodes, chosen }))
}

/// Saves `state` through `opts.checkpoint` (nothing without one), with the env steps and
/// seconds of roll-outs so far, and the current policy `nodes` as the engine state's best
/// program.
fn save_checkpoint(opts: &crate::task::base::options::RunOptions, state: LinearState, nodes: &[Node], played: (u64, f64)) -> Result<()> {
    use crate::evolve::checkpoint::{Saved, SavedBest, encode_nodes};
    let Some(checkpoints) = &opts.checkpoint else { return Ok(()) };
    let iteration = state.iteration;
    checkpoints.save(crate::task::base::state::RunState {
        operators: Vec::new(),
        state: Saved {
            generation: iteration,
            genomes: None,
            trees: None,
            best: SavedBest { fitness: f64::NAN.to_bits(), nodes: encode_nodes(nodes), generation: iteration.saturating_sub(1), genome: None },
            history: Vec::new(),
            islands: 1,
            island_history: Vec::new(),
            archive: None,
        },
        hall_of_fame: Vec::new(),
        node_evaluations: 0.0,
        median_sizes: Vec::new(),
        env_steps: Some(played),
        linear: Some(state),
        residual: None,
        inputs: None,
    })?;
    if opts.verbose {
        opts.say(&format!("checkpoint before iteration {iteration} saved to {}", checkpoints.path().display()));
    }
    Ok(())
}

/// A finished search, for [`report`].
struct Ran<'a> {
    policy: &'a LinearPolicy,
    nodes: &'a [Node],
    history: &'a [Iteration],
    ended: &'a crate::task::base::budget::Ending,
    train: &'a PolicyScores,
    test: &'a PolicyScores,
    healthy: Option<f64>,
    seconds: f64,
    played: u64,
    rollout_seconds: f64,
    split: crate::task::base::report::Split,
    /// Among searches side by side, the choice (`None` for one search).
    choice: Option<&'a Choice>,
}

fn report(settings: &ControlSettings, m: &Model, r: Ran<'_>, names: &[String], acts: &[String], device: &str) -> Result<EvolveResult> {
    use crate::program::render::{Style, outputs};
    use crate::report::num;
    let nu = m.nu();
    let programs = outputs(r.nodes, nu, names, Style::Infix);
    let generations: Vec<serde_json::Value> = r
        .history
        .iter()
        .enumerate()
        .map(|(g, h)| {
            serde_json::json!({"generation": g, "return": num(h.central), "best_return": num(h.best), "mean_return": num(h.mean),
                "directions_used": h.step.used, "step": num(h.step.length), "step_overflowed": h.step.overflow, "seconds": h.seconds})
        })
        .collect();
    let policy = super::SavedPolicy {
        env: settings.env.clone(),
        profile: m.profile.clone(),
        observations: names.to_vec(),
        actuators: acts.to_vec(),
        nodes: crate::task::base::model::Model::encode(r.nodes),
        operators: Vec::new(),
    };
    let ended = if matches!(r.ended, crate::task::base::budget::Ending::Generations) { None } else { Some(r.ended) };
    let mut report = serde_json::json!({
        "command": "control",
        "settings": settings,
        "env": {"name": m.name, "profile": m.profile, "observations": names, "actuators": acts, "episode_steps": settings.episode_steps.unwrap_or(m.episode_steps)},
        "generations": generations,
        "ended": r.ended,
        "best": {
            "programs": programs.iter().zip(acts).map(|(p, a)| serde_json::json!({"actuator": a, "action": format!("tanh({p})")})).collect::<Vec<_>>(),
            "size": r.nodes.len(), "generation": r.history.len().saturating_sub(1),
        },
        "linear_policy": r.policy.json(names, acts),
        "train": r.train.json(),
        "test": r.test.json(),
        "policy": policy,
        "training_healthy_reward": r.healthy.unwrap_or(m.healthy_weight),
        "hall_of_fame": [fame_row(r.nodes, nu, names, r.train.mean())],
        "timing": {"seconds": r.seconds, "env_steps": r.played, "rollout_seconds": r.rollout_seconds,
                   "env_steps_per_second": r.played as f64 / r.rollout_seconds.max(1e-9),
                   "threads": rayon::current_num_threads(), "device": device},
        "version": env!("CARGO_PKG_VERSION"),
    });
    if let Some(choice) = r.choice {
        report["searches"] = choice.json();
    }
    let c = &settings.linear;
    let mut summary = format!("{} ({}), {} actuators, {} observations\n", m.name, m.profile, nu, names.len());
    summary += &format!(
        "policy        linear: tanh(W (o - mean) / std), W {nu} × {}, tuned by random search ({} directions, the best {}, step {}, noise {})\n",
        names.len(),
        c.directions,
        c.top,
        c.step_size,
        c.noise
    );
    summary += "weights       in the report's `linear_policy`; `policy` holds it as a program\n";
    if let Some(choice) = r.choice {
        summary += &choice.line();
    }
    summary += &format!("size          {} nodes\n", r.nodes.len());
    if let Some(e) = ended {
        summary += &e.line(settings.engine.generations).unwrap_or_default().replace("generation", "iteration");
    }
    if let Some(w) = r.healthy.filter(|&w| w != m.healthy_weight) {
        summary += &format!("training      healthy reward {w} per step instead of {} (--healthy-reward); returns below use the env's\n", m.healthy_weight);
    }
    summary += &format!(
        "train return  {:.2}  (mean of {} episode{}, {:.0} steps on average)\n",
        r.train.mean(),
        r.train.episodes.len(),
        if r.train.episodes.len() == 1 { "" } else { "s" },
        r.train.mean_steps()
    );
    summary += &format!(
        "test return   {:.2} ± {:.2}  (mean of {} fresh episodes, {:.0} steps on average)\n",
        r.test.mean(),
        r.test.std(),
        r.test.episodes.len(),
        r.test.mean_steps()
    );
    r.split.add_to(&mut report);
    summary += &r.split.line("iteration");
    summary += &format!(
        "time          {:.2} s on {device}; {} iterations, {} env steps in {:.2} s of roll-outs ({:.3e} steps/s with the policy)",
        r.seconds,
        r.history.len(),
        r.played,
        r.rollout_seconds,
        r.played as f64 / r.rollout_seconds.max(1e-9)
    );
    Ok(EvolveResult { report, summary })
}

/// The hall of fame of a linear run: its one policy, whose loss is minus its training return
/// (as a program's in `grove control`), each actuator's action joined by `; `.
fn fame_row(nodes: &[Node], nu: usize, names: &[String], train: f64) -> serde_json::Value {
    use crate::program::render::{Style, outputs};
    let show = |style: Style, wrap: fn(String) -> String| outputs(nodes, nu, names, style).into_iter().map(wrap).collect::<Vec<_>>().join("; ");
    serde_json::to_value(crate::task::base::report::FameRow {
        complexity: nodes.len(),
        loss: -train,
        validation_loss: None,
        score: 0.0,
        description_length: None,
        cv_loss: None,
        cv_se: None,
        selected: true,
        equation: show(Style::Infix, |p| format!("tanh({p})")),
        latex: show(Style::Latex, |p| format!("\\tanh\\left({p}\\right)")),
        sympy: show(Style::Sympy, |p| format!("tanh({p})")),
    })
    .unwrap_or(serde_json::Value::Null)
}

/// Memory of one iteration of the random search over `nu × n_obs` weights, bytes: for each
/// of its `2N + 1` policies (`N` = `--directions`), its weights and direction (f64), its tree
/// (`program_nodes` more under a residual policy) held twice (the trees, the population), its
/// observation sums and each episode's return; on a GPU the population and the episodes'
/// states again. (host, device).
pub fn iteration_need(cfg: &ArsConfig, episodes: usize, nu: usize, n_obs: usize, program_nodes: usize) -> (u64, u64) {
    let policies = (2 * cfg.directions as u64).saturating_add(1);
    let theta = (nu * n_obs) as u64;
    // As [`LinearPolicy::max_nodes`].
    let nodes = (nu * (4 * n_obs + 1) + nu.saturating_sub(1) + program_nodes) as u64;
    let node = std::mem::size_of::<Node>() as u64;
    let host = 16 * theta + 2 * node * nodes + 24 * n_obs as u64 + 16 * episodes as u64;
    let device = node * nodes + 64 * episodes as u64 + 24 * n_obs as u64;
    (policies.saturating_mul(host), policies.saturating_mul(device))
}

/// Env steps of one iteration above which the search says, before its first roll-out, what an
/// iteration plays (issue 59: `--directions 1048576` ran for minutes without a line).
pub const LARGE_ITERATION_STEPS: u64 = 100_000_000;

/// Refuses a linear or residual search whose iteration ([`iteration_need`]) does not fit the
/// host's or the GPU's memory or `--max-memory`, before its first roll-out; where it fits but
/// plays more than [`LARGE_ITERATION_STEPS`] env steps, says so (unless quiet) with its
/// memory, so that a long first iteration is expected.
pub fn check_memory(settings: &ControlSettings, arena: &Arena, backend: &Backend, opts: &crate::task::base::options::RunOptions, program_nodes: usize) -> Result<()> {
    let k = settings.searches.max(1) as u64;
    let (host, device) = iteration_need(&settings.linear, settings.episodes, arena.m.nu(), arena.m.obs_size, program_nodes);
    let (host, device) = (host.saturating_mul(k), device.saturating_mul(k));
    let need = crate::task::base::plan::Need { host, device: if backend.is_gpu() { device } else { 0 } };
    let n = settings.linear.directions;
    let (what, lower) = if k > 1 {
        (
            format!("an iteration of --searches {k} side by side of --directions {n} ({k} × (2 × {n} + 1) policies, {} episodes each)", settings.episodes),
            "lower --searches, --directions or --episodes, or give --max-memory a larger size",
        )
    } else {
        (format!("an iteration of --directions {n} (2 × {n} + 1 policies, {} episodes each)", settings.episodes), "lower --directions or --episodes, or give --max-memory a larger size")
    };
    crate::task::base::plan::check(&need, &what, lower, opts.max_memory, backend.free_memory()?)?;
    let steps = iteration_steps(&settings.linear, settings.episodes, arena.run.steps).saturating_mul(k);
    if steps > LARGE_ITERATION_STEPS && !opts.quiet {
        let show = crate::task::base::plan::show_size;
        let memory = if backend.is_gpu() { format!("{} of host and {} of GPU memory", show(host), show(device)) } else { format!("{} of memory", show(host)) };
        opts.say(&format!(
            "note: {what} plays up to {steps:.2e} env steps (episodes of up to {} steps) and holds about {memory}; the first progress line comes after it (Ctrl-C stops the run)",
            arena.run.steps
        ));
    }
    Ok(())
}

/// Env steps one iteration plays at most: `2N + 1` policies × `episodes` × `steps`.
pub fn iteration_steps(cfg: &ArsConfig, episodes: usize, steps: usize) -> u64 {
    (2 * cfg.directions as u64 + 1).saturating_mul(episodes as u64).saturating_mul(steps as u64)
}

/// Checks `--policy linear`'s settings (`searches` side by side) against the budget of one
/// iteration.
pub fn check(cfg: &ArsConfig, episodes: usize, searches: usize) -> Result<()> {
    cfg.check().map_err(|e| anyhow::anyhow!(e))?;
    let max = super::settings::MAX_SEARCHES;
    ensure!((1..=max).contains(&searches), "--searches (searches) must be 1 to {max}, got {searches}");
    ensure!(
        cfg.directions.saturating_mul(episodes).saturating_mul(searches) <= MAX_EPISODES_PER_ITERATION,
        "--directions ({}) × --episodes ({episodes}){} is more than {MAX_EPISODES_PER_ITERATION} episode pairs per iteration",
        cfg.directions,
        if searches > 1 { format!(" × --searches ({searches})") } else { String::new() }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::control::Policy;

    /// One iteration plays the perturbed policies and the unperturbed one together, and only
    /// the unperturbed one's observations (its episodes in order) update the statistics.
    #[test]
    fn an_iteration_learns_the_normaliser_from_the_unperturbed_policy() {
        use crate::backend::cpu::control::play_observed;
        let mut settings = ControlSettings { env: "hopper".into(), episodes: 2, episode_steps: Some(60), ..ControlSettings::default() };
        settings.linear = ArsConfig { directions: 3, top: 2, step_size: 0.02, noise: 0.5 };
        let arena = Arena::load(&settings).unwrap();
        let (nu, n) = (arena.m.nu(), arena.m.obs_size);
        let mut search = Search::fresh(nu, n);
        search.theta = (0..nu * n).map(|k| ((k * 5 % 7) as f64 - 3.0) / 10.0).collect();
        let unperturbed = search.policy(nu).tree();
        let unperturbed_weights = search.theta.clone();
        let (row, played) = search.iteration(&settings, &Backend::Cpu, &arena, None).unwrap();
        assert_eq!(played, unperturbed);
        let run = arena.run.at_generation(0);
        let mut want = ObsStats::new(n);
        let mut first = ObsStats::new(n);
        let mut total = 0.0;
        for k in 0..2 {
            let mut seen = ObsStats::new(n);
            let e = play_observed(&arena.trained, &mut Policy::for_model(&unperturbed, &arena.trained).unwrap(), &run, k, |o| seen.add(o));
            total += e.ret;
            want.merge(&seen);
            if k == 0 {
                first = seen;
            }
        }
        assert_eq!(search.stats, want);
        assert_eq!(row.central, total / 2.0);
        assert_eq!((search.next(), row.step.used), (1, 2));
        // A perturbed policy sees other states on the same start: its sums would differ.
        let perturbed = LinearPolicy { weights: unperturbed_weights.iter().map(|w| w + 0.5).collect(), norm: Normaliser { mean: vec![0.0; n], std: vec![1.0; n] }, nu }.tree();
        let mut other = ObsStats::new(n);
        play_observed(&arena.trained, &mut Policy::for_model(&perturbed, &arena.trained).unwrap(), &run, 0, |o| other.add(o));
        assert_ne!(other.sums(), first.sums());
    }

    /// Searches side by side play in one call, yet each is the run it would be alone: the
    /// first equals a run of one bit for bit, the others draw other directions, and a
    /// checkpoint's state restores every one of them.
    #[test]
    fn searches_side_by_side_are_each_the_run_they_would_be_alone() {
        let mut settings = ControlSettings { env: "hopper".into(), episodes: 2, episode_steps: Some(40), ..ControlSettings::default() };
        settings.linear = ArsConfig { directions: 3, top: 2, step_size: 0.05, noise: 0.3 };
        let arena = Arena::load(&settings).unwrap();
        let (nu, n) = (arena.m.nu(), arena.m.obs_size);
        let mut alone = Search::fresh_side_by_side(nu, n, 1);
        let mut three = Search::fresh_side_by_side(nu, n, 3);
        for _ in 0..3 {
            let a = iteration_side_by_side(&mut alone, &settings, &Backend::Cpu, &arena, None).unwrap();
            let b = iteration_side_by_side(&mut three, &settings, &Backend::Cpu, &arena, None).unwrap();
            assert_eq!((a.len(), b.len()), (1, 3));
            assert_eq!(a[0].0.central.to_bits(), b[0].0.central.to_bits());
            assert_eq!(a[0].1, b[0].1);
        }
        assert_eq!(alone[0].theta, three[0].theta);
        assert_eq!(alone[0].stats, three[0].stats);
        assert_ne!(three[0].theta, three[1].theta);
        assert_ne!(three[1].theta, three[2].theta);
        // Search 2 alone, from its own directions, is search 2 side by side.
        let mut second = vec![Search { index: 1, ..Search::fresh(nu, n) }];
        for _ in 0..3 {
            iteration_side_by_side(&mut second, &settings, &Backend::Cpu, &arena, None).unwrap();
        }
        assert_eq!(second[0].theta, three[1].theta);
        assert_eq!(second[0].stats, three[1].stats);
        // The first search counts every policy's steps: three searches play about three times one.
        assert!(three[0].played.0 > 2 * alone[0].played.0, "{} against {}", three[0].played.0, alone[0].played.0);
        assert_eq!(three[1].played.0, 0);
        // A checkpoint's state holds all three and restores them.
        let state = side_by_side_state(&three);
        assert_eq!(state.side.len(), 2);
        state.check().unwrap();
        let back = Search::resumed_side_by_side(&state, nu, n, "hopper", Some(three[0].played), 3).unwrap();
        for (r, s) in back.iter().zip(&three) {
            assert_eq!((r.index, &r.theta, &r.stats, r.next()), (s.index, &s.theta, &s.stats, s.next()));
        }
        let e = Search::resumed_side_by_side(&state, nu, n, "hopper", None, 2).err().unwrap().to_string();
        assert!(e.contains("holds 3 random searches side by side; --searches (searches) is 2"), "{e}");
        let e = Search::resumed_side_by_side(&alone[0].state(), nu, n, "hopper", None, 3).err().unwrap().to_string();
        assert!(e.contains("holds 1 random search side by side"), "{e}");
        // A side state out of step with the first is refused.
        let mut bad = state.clone();
        bad.side[1].iteration += 1;
        assert!(bad.check().unwrap_err().to_string().contains("side-by-side search 3 is at iteration 4"));
    }

    /// Exploitation ranks by the last iterations' unperturbed returns: the worst takes the
    /// best's W and statistics, the second worst the second best's; the middle of an odd count,
    /// a tie and a search that is not worse are left alone, and a NaN ranks lowest.
    #[test]
    fn exploitation_copies_the_better_half_over_the_worse() {
        let row = |central: f64| Iteration { best: central, mean: central, central, step: Default::default(), seconds: 0.0 };
        let make = |k: usize, returns: &[f64]| {
            let mut s = Search { index: k, ..Search::fresh(1, 2) };
            s.theta = vec![k as f64, -(k as f64)];
            s.stats.add(&[k as f32, 1.0]);
            s.history = returns.iter().map(|&r| row(r)).collect();
            s
        };
        // Means of the last three: 10, 30, 20, NaN, 40 (the first return of search 0 is too old).
        let mut five = vec![make(0, &[1000.0, 10.0, 10.0, 10.0]), make(1, &[30.0]), make(2, &[0.0, 20.0, 40.0]), make(3, &[f64::NAN, 5.0]), make(4, &[40.0, 40.0])];
        let before: Vec<(Vec<f64>, ObsStats)> = five.iter().map(|s| (s.theta.clone(), s.stats.clone())).collect();
        let copies = exploit(&mut five);
        // Ranked 4, 1, 2, 0, 3: search 3 (NaN) takes search 4's, search 0 takes search 1's; 2 stays.
        assert_eq!(copies, vec![(3, 4), (0, 1)]);
        assert_eq!((&five[3].theta, &five[3].stats), (&before[4].0, &before[4].1));
        assert_eq!((&five[0].theta, &five[0].stats), (&before[1].0, &before[1].1));
        for k in [1, 2, 4] {
            assert_eq!((&five[k].theta, &five[k].stats), (&before[k].0, &before[k].1), "search {k} is unchanged");
        }
        // Each keeps its own directions and history.
        assert_eq!((five[3].index, five[3].history.len(), five[0].history.len()), (3, 2, 4));
        // Equal returns: nothing is copied.
        let mut level = vec![make(0, &[5.0]), make(1, &[5.0])];
        assert!(exploit(&mut level).is_empty());
        assert_eq!(level[0].theta, vec![0.0, 0.0]);
        // One search, or none, has no one to copy from.
        assert!(exploit(&mut [make(0, &[1.0])]).is_empty() && exploit(&mut []).is_empty());
    }

    /// The reported search is the one whose last policy returns most on the validation
    /// episodes, each candidate's return that of its policy played there.
    #[test]
    fn the_search_chosen_returns_most_on_validation_episodes() {
        let mut settings = ControlSettings { env: "swimmer".into(), episodes: 1, episode_steps: Some(50), validation_episodes: 3, ..ControlSettings::default() };
        settings.linear = ArsConfig { directions: 2, top: 1, step_size: 0.5, noise: 0.5 };
        let arena = Arena::load(&settings).unwrap();
        let (nu, n) = (arena.m.nu(), arena.m.obs_size);
        let mut searches = Search::fresh_side_by_side(nu, n, 4);
        for _ in 0..2 {
            iteration_side_by_side(&mut searches, &settings, &Backend::Cpu, &arena, None).unwrap();
        }
        let choice = choose_search(&searches, &settings, &arena).unwrap().unwrap();
        let run = ControlRun { episodes: 3, generation: crate::task::control::VALIDATION_GENERATION, ..arena.run };
        let want: Vec<f64> = searches.iter().map(|s| score_policy(&s.policy(nu).tree(), &arena.m, &run).unwrap().mean()).collect();
        assert_eq!(choice.candidates.iter().map(|c| c.1.unwrap()).collect::<Vec<_>>(), want);
        let top = want.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(want[choice.chosen], top);
        assert!(want.iter().any(|&w| w != top), "the searches should differ: {want:?}");
        assert!(choice.line().contains(&format!("search {} of 4 side by side", choice.chosen + 1)));
        // Without validation episodes, by the last training return.
        settings.validation_episodes = 0;
        let choice = choose_search(&searches, &settings, &arena).unwrap().unwrap();
        let last: Vec<f64> = searches.iter().map(|s| s.history.last().unwrap().central).collect();
        assert_eq!(last[choice.chosen], last.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        assert!(choice.candidates.iter().all(|c| c.1.is_none()));
        // One search: no choice.
        assert!(choose_search(&searches[..1], &settings, &arena).unwrap().is_none());
    }

    #[test]
    fn the_tree_computes_the_linear_policy() {
        let (nu, n) = (3, 5);
        let weights: Vec<f64> = (0..nu * n).map(|k| ((k * 7 % 11) as f64 - 5.0) / 4.0).collect();
        let norm = Normaliser { mean: vec![0.5, -1.0, 2.0, 0.0, 3.0], std: vec![2.0, 0.5, 1e-9, 4.0, 1.0] };
        let p = LinearPolicy { weights, norm: norm.clone(), nu };
        let nodes = p.tree();
        assert!(nodes.len() <= p.max_nodes());
        let mut policy = Policy::for_sizes(&nodes, nu, n).unwrap();
        let obs = [1.0f32, -2.0, 7.0, 0.25, 2.5];
        let out = policy.outputs(&obs).unwrap().to_vec();
        for j in 0..nu {
            let want: f64 = (0..n).map(|i| p.weights[j * n + i] * norm.scale(i) * (obs[i] as f64 - norm.mean[i])).sum();
            assert!((out[j] as f64 - want).abs() < 1e-5 * (1.0 + want.abs()), "output {j}: {} against {want}", out[j]);
        }
        // Component 2 (deviation below MIN_STD) is not read.
        assert!(!nodes.iter().any(|x| x.op == Op::Var && x.value == 2.0));
        // The stack stays shallow however many observations there are.
        let wide = LinearPolicy { weights: vec![0.5; 2 * 200], norm: Normaliser { mean: vec![0.0; 200], std: vec![1.0; 200] }, nu: 2 };
        let t = wide.tree();
        let mut pop = Population::new(1, t.len(), 2);
        pop.set_tree(0, &t).unwrap();
        let need = crate::backend::cuda::pack::stack_need(pop.tree(0), 200, 2).unwrap();
        assert!(need <= 4, "stack {need}");
        // All-zero weights leave constants only.
        let zero = LinearPolicy { weights: vec![0.0; nu * n], norm, nu };
        assert_eq!(zero.tree().len(), 2 * nu - 1);
    }
}
