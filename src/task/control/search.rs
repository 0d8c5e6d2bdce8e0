//! A control run's search of programs: the policy kind's dispatch, the evolution (alone, over
//! a normaliser, or on a linear policy's residual), and the choice of the reported policy on
//! validation episodes.

use super::*;

/// Reset-noise generation word of the test episodes (training uses 0).
pub const TEST_GENERATION: u32 = 1;

/// Reset-noise generation word of the validation episodes that choose the reported policy.
pub const VALIDATION_GENERATION: u32 = 2;

/// Policies the validation episodes choose among: the run's best and the last population's
/// best distinct programs.
pub const VALIDATION_CANDIDATES: usize = 16;

/// What a control run's checkpoints keep beside the engine's state, read at each save: the
/// linear search under a residual's programs (tuned between generations by its head) and a
/// normalising run's normaliser.
struct PolicyState<'a> {
    residual: Option<&'a self::residual::Head<'a>>,
    inputs: Option<&'a Mutex<Learnt>>,
}

impl crate::task::base::state::TaskState for PolicyState<'_> {
    fn save_into(&self, state: &mut crate::task::base::state::RunState) {
        state.residual = self.residual.map(|r| r.state());
        state.inputs = self.inputs.map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).state());
    }
}

/// Checks that a grammar's output nodes can write every actuator's slot: each `out(K, …)` with a
/// literal K is collected, and when all are literal they must cover `0 .. nu`.
pub fn check_grammar_outputs(templates: &crate::grammar::template::Templates, nu: usize, path: &str) -> Result<()> {
    use crate::grammar::template::{Item, Part};
    let (mut literal, mut spelled) = (std::collections::BTreeSet::new(), false);
    for item in templates.expr.iter().flatten().flatten() {
        if let Item::Output(parts) = item {
            match parts.as_slice() {
                [Part::Text(t)] => {
                    literal.insert(t.parse::<usize>().unwrap_or(usize::MAX));
                }
                _ => spelled = true,
            }
        }
    }
    if literal.is_empty() && !spelled {
        bail!("{path} has no out(K, …) output nodes; a policy needs one output per actuator ({nu} here)");
    }
    if !spelled {
        let missing: Vec<String> = (0..nu).filter(|k| !literal.contains(k)).map(|k| k.to_string()).collect();
        if !missing.is_empty() {
            bail!(
                "{path} writes outputs {} but the environment has {nu} actuators: out({}, …) is missing",
                literal.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "),
                missing.join(", …), out(")
            );
        }
    }
    Ok(())
}

/// Standard deviations of its validation returns taken off a candidate's mean validation return
/// to give the score the validation episodes choose by ([`steady_score`]).
pub const VALIDATION_SPREADS: f64 = 1.0;

/// The score a candidate policy is chosen by: its mean validation return less
/// [`VALIDATION_SPREADS`] standard deviations of those returns. A program that walks on most
/// starts and falls on a few has a high mean and a wide spread; the mean alone chose such
/// programs (issue 57: test spreads of 11–90 % of the mean on three of four robots), where a
/// steadier one a little lower on average holds on every start. NaN (an invalid episode) stays
/// NaN and never wins.
pub fn steady_score(mean: f64, std: f64) -> f64 {
    mean - VALIDATION_SPREADS * std
}

/// One candidate of the validation episodes' choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Training fitness.
    pub fitness: f64,
    /// Program size, nodes.
    pub size: usize,
    /// Mean validation return (NaN where an episode was invalid).
    pub mean: f64,
    /// Standard deviation of the validation returns.
    pub std: f64,
}

impl Candidate {
    /// What the choice ranks it by ([`steady_score`]).
    pub fn score(&self) -> f64 {
        steady_score(self.mean, self.std)
    }
}

/// The validation episodes' choice: each candidate's training fitness, size, and the mean and
/// spread of its validation returns, and which one was chosen.
pub struct Validation {
    /// Episodes each candidate played.
    pub episodes: usize,
    /// Every candidate; the run's best first.
    pub candidates: Vec<Candidate>,
    /// The chosen candidate's index.
    pub chosen: usize,
}

impl Validation {
    pub(super) fn json(&self) -> serde_json::Value {
        use crate::report::num;
        let c: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .map(|c| {
                serde_json::json!({"fitness": num(c.fitness), "size": c.size, "validation_return": num(c.mean),
                    "validation_std": num(c.std), "score": num(c.score())})
            })
            .collect();
        serde_json::json!({"episodes": self.episodes, "generation_word": VALIDATION_GENERATION, "spreads": VALIDATION_SPREADS,
            "candidates": c, "chosen": self.chosen})
    }

    pub(super) fn line(&self) -> String {
        let (best, chosen) = (&self.candidates[0], &self.candidates[self.chosen]);
        let which = if self.chosen == 0 {
            "the run's best".to_string()
        } else {
            format!("candidate {} (the run's best: {:.2} ± {:.2})", self.chosen + 1, best.mean, best.std)
        };
        format!(
            "chosen        {which} of {}, validation return {:.2} ± {:.2} over {} episodes (chosen by the mean less {VALIDATION_SPREADS} standard deviation)\n",
            self.candidates.len(),
            chosen.mean,
            chosen.std,
            self.episodes
        )
    }
}

/// The policy to report: with validation episodes, the candidate (the run's best, then the last
/// population's fittest distinct programs, [`VALIDATION_CANDIDATES`] in all) with the highest
/// [`steady_score`] over `run`'s episodes, the earlier on a tie (NaN, from an invalid episode,
/// never wins); with none, the run's best.
/// `policy_of` gives the policy a program plays (the program itself, or a residual's composed
/// tree).
pub fn choose_on_validation(
    outcome: &crate::evolve::Outcome,
    m: &Model,
    run: &ControlRun,
    policy_of: &dyn Fn(&[Node]) -> Vec<Node>,
) -> Result<(crate::evolve::Best, Option<Validation>)> {
    if run.episodes == 0 {
        return Ok((outcome.best.clone(), None));
    }
    let (pop, fit) = (&outcome.population, &outcome.fitness);
    let mut order: Vec<usize> = (0..fit.len()).filter(|&i| fit[i].is_finite() && pop.len[i] > 0).collect();
    order.sort_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b)));
    let mut picked: Vec<(f64, Vec<Node>, Option<usize>)> = vec![(outcome.best.fitness, outcome.best.nodes.clone(), None)];
    for i in order {
        if picked.len() == VALIDATION_CANDIDATES {
            break;
        }
        let nodes = pop.tree(i).nodes();
        if !picked.iter().any(|p| p.1 == nodes) {
            picked.push((fit[i], nodes, Some(i)));
        }
    }
    let mut candidates = Vec::with_capacity(picked.len());
    for (f, nodes, _) in &picked {
        let played = score_policy(&policy_of(nodes), m, run)?;
        candidates.push(Candidate { fitness: *f, size: nodes.len(), mean: played.mean(), std: played.std() });
    }
    // The highest score, the earlier on a tie (the run's best first); NaN never wins.
    let chosen = crate::program::fitness::argmax(&candidates.iter().map(Candidate::score).collect::<Vec<_>>());
    let (f, nodes, _) = &picked[chosen];
    let best = if chosen == 0 {
        outcome.best.clone()
    } else {
        // A program of the last population: found by the last generation, no genome kept.
        crate::evolve::Best { fitness: *f, nodes: nodes.clone(), generation: outcome.history.last().map_or(0, |s| s.generation), genome: None }
    };
    Ok((best, Some(Validation { episodes: run.episodes, candidates, chosen })))
}

/// A control run of `settings` as `opts` says: opens the device `settings.device` names (after
/// loading the environment, so that a bad one fails first; saying on standard error, unless
/// quiet, when `auto` falls back to the CPU) and runs [`fit`].
pub fn run(settings: &ControlSettings, opts: &crate::task::base::options::RunOptions) -> Result<EvolveResult> {
    let backend = open_on(&settings.env, settings.profile.as_deref(), settings.device, &settings.islands.gpus, opts.quiet)?;
    fit(settings, &backend, opts)
}

/// Trains the policy `settings.policy` names on `backend`, with checkpoints, resume, a stop
/// flag and verbosity from `opts` (as every task's run takes them; a stop fails with
/// [`crate::task::base::options::Stopped`]): the library's control run, under both the command
/// line (`grove control`, `grove run`) and the Python package (`grove.control`).
/// `settings.device` is what `backend` was opened from.
pub fn fit(settings: &ControlSettings, backend: &Backend, opts: &crate::task::base::options::RunOptions) -> Result<EvolveResult> {
    settings.check()?;
    match settings.policy {
        PolicyKind::Linear => return self::linear::search(settings, backend, opts),
        PolicyKind::Residual => return self::residual::search(settings, backend, opts),
        PolicyKind::Program => {}
    }
    if opts.resume.as_ref().is_some_and(|c| c.linear.is_some()) {
        bail!("the checkpoint holds a --policy linear search, not an evolved population: resume it with its own settings");
    }
    if opts.resume.as_ref().is_some_and(|c| c.residual.is_some()) {
        bail!("the checkpoint holds programs evolved on a linear policy: resume it with --set policy=residual");
    }
    programs(settings, backend, opts, &Arena::load(settings)?, None)
}

/// The programs' search of [`fit`] (settings checked) in `arena`, on their own or,
/// with `stage`, as the residual of its linear policy (`--policy residual`,
/// [`self::residual`]): `opts.resume` is then a checkpoint of the programs' search or none.
pub fn programs(
    settings: &ControlSettings,
    backend: &Backend,
    opts: &crate::task::base::options::RunOptions,
    arena: &Arena,
    stage: Option<&self::residual::LinearStage>,
) -> Result<EvolveResult> {
    let start = std::time::Instant::now();
    let head = stage.map(|s| self::residual::Head::new(s, settings, arena)).transpose()?;
    let learnt = learnt_of(settings, opts, arena.m.obs_size)?.map(Mutex::new);
    let reads = Reads { residual: head.as_ref(), learnt: learnt.as_ref() };
    let evolved = evolve_programs(settings, backend, opts, arena, stage, &reads, start)?;
    let run = arena.run;
    let validation_run = ControlRun { episodes: settings.validation_episodes, generation: VALIDATION_GENERATION, ..run };
    let policy_of = |nodes: &[Node]| reads.policy_of(nodes);
    let (chosen, validation) = choose_on_validation(&evolved.outcome, &arena.m, &validation_run, &policy_of)?;
    // What the policy plays: the program, or a residual's composed tree.
    let played_nodes = reads.policy_of(&chosen.nodes);
    let train = score_policy(&played_nodes, &arena.m, &run)?;
    let test_run = ControlRun { episodes: settings.test_episodes, generation: TEST_GENERATION, ..run };
    let test = score_policy(&played_nodes, &arena.m, &test_run)?;
    let policy = super::report::Played { best: &chosen, nodes: &played_nodes, train: &train, test: &test, validation: validation.as_ref() };
    super::report::programs_report(settings, backend, arena, stage, &reads, &evolved, &policy, start)
}

/// What the programs read beside the observations: a residual's linear policy (its head) or
/// a normalising run's normaliser.
pub(super) struct Reads<'a> {
    /// The linear policy the programs are the residual of (`--policy residual`).
    pub residual: Option<&'a self::residual::Head<'a>>,
    /// `--normalise`: the normaliser the programs read through.
    pub learnt: Option<&'a Mutex<Learnt>>,
}

impl Reads<'_> {
    /// The policy a program plays: the program itself, a residual's composed tree, or the
    /// program with the normaliser written in.
    pub fn policy_of(&self, nodes: &[Node]) -> Vec<Node> {
        match (self.residual, self.learnt) {
            (Some(h), _) => h.residual().compose(nodes),
            (None, Some(l)) => l.lock().unwrap_or_else(|e| e.into_inner()).compose(nodes),
            (None, None) => nodes.to_vec(),
        }
    }
}

/// What the programs' evolution leaves for the choice and the report.
pub(super) struct Evolved {
    /// The engine's outcome.
    pub outcome: crate::evolve::Outcome,
    /// The hall of fame over the whole run.
    pub hof: crate::evolve::hof::HallOfFame,
    /// Median valid program size of each generation.
    pub median_sizes: Vec<f64>,
    /// Why the search ended.
    pub ended: crate::task::base::budget::Ending,
    /// The devices the search ran on.
    pub device: String,
    /// Env steps played and seconds of roll-outs, the whole run's.
    pub played: (u64, f64),
    /// Seconds before the generations.
    pub setup_seconds: f64,
    /// Seconds of the generations.
    pub search_seconds: f64,
    /// The run's seconds to the end of the search (a residual's linear search included).
    pub seconds: f64,
}

/// The evolution of [`programs`] (begun at `start`) on every GPU its islands use.
fn evolve_programs(
    settings: &ControlSettings,
    backend: &Backend,
    opts: &crate::task::base::options::RunOptions,
    arena: &Arena,
    stage: Option<&self::residual::LinearStage>,
    reads: &Reads<'_>,
    start: std::time::Instant,
) -> Result<Evolved> {
    let Arena { m, trained, run, names, .. } = arena;
    let (nu, n_obs, run) = (m.nu(), m.obs_size, *run);
    // Per individual: each episode's return, length and validity (and its state on a GPU).
    // A normalising run also keeps each episode's observation sums on both sides.
    let episodes = settings.episodes as u64;
    let sums = if reads.learnt.is_some() { 8 * (1 + 2 * n_obs as u64) * episodes } else { 0 };
    let need = crate::task::base::plan::TaskNeed { per_individual: 16 * episodes + 16 + sums, device_per_individual: 64 * episodes + 16 + sums, cases: episodes, ..Default::default() };
    crate::task::base::plan::check_search(&settings.search_settings(), &need, backend, opts.max_memory, ", --episodes")?;
    // A resumed run goes on counting from the checkpoint's env steps and roll-out seconds; a
    // residual's programs from its linear search's.
    let played = opts.resume.as_ref().and_then(|c| c.env_steps).or(stage.map(|s| s.played)).unwrap_or((0, 0.0));
    // Islands spread over every GPU `islands.gpus` chooses; the first task counts every
    // island's env steps.
    let more = backend.more_gpus(&settings.islands.gpus, settings.islands.count)?;
    let tasks: Vec<Control> = std::iter::once(backend)
        .chain(&more)
        .enumerate()
        .map(|(i, b)| Control {
            backend: b,
            model: trained,
            run,
            fresh: settings.fresh_starts,
            parsimony: settings.parsimony,
            played: std::sync::Mutex::new(if i == 0 { played } else { (0, 0.0) }),
            episodes: Default::default(),
            residual: reads.residual,
            learnt: reads.learnt,
        })
        .collect();
    let task = crate::evolve::OnGpus(&tasks);
    let device = describe_devices(backend, &more);
    // --stop-at is the best policy's training return (its fitness less the parsimony penalty,
    // negated).
    let parsimony = settings.parsimony;
    let goal = crate::task::base::budget::Goal {
        measure: crate::task::base::budget::Measure::Return,
        value: Box::new(move |b: &crate::evolve::Best| -(b.fitness - parsimony * b.nodes.len() as f64)),
    };
    let kept = PolicyState { residual: reads.residual, inputs: reads.learnt };
    let mut observer = crate::task::base::observer::RunObserver::for_control(&settings.engine, &settings.islands, opts, &tasks[0].played)?
        .with_budget(settings.budget, goal)
        .with_task_state(&kept);
    let trees = |functions: &str| settings.trees.rep(functions, n_obs, nu, settings.engine.max_len);
    let check = |templates: &crate::grammar::template::Templates, name: &str| check_grammar_outputs(templates, nu, name);
    let programs = crate::task::base::search::Programs {
        names,
        n_outputs: nu,
        purpose: format!("as a policy for {} ({nu} actuators, {n_obs} observations)", m.name),
        check: &check,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let outcome = crate::task::base::search::evolve(&settings.search_settings(), &programs, &task, &mut observer)?;
    let (setup_seconds, search_seconds) = (searching.duration_since(start).as_secs_f64(), searching.elapsed().as_secs_f64());
    // A residual's whole run includes its linear search.
    let seconds = start.elapsed().as_secs_f64() + stage.map_or(0.0, |s| s.seconds);
    let played = tasks[0].played.lock().map_or((0, 0.0), |p| *p);
    if outcome.best.nodes.is_empty() {
        bail!("no valid policy was found: every individual failed to map or had a non-finite output");
    }
    Ok(Evolved {
        outcome,
        hof: std::mem::take(&mut observer.hof),
        median_sizes: std::mem::take(&mut observer.median_sizes),
        ended: std::mem::replace(&mut observer.ended, crate::task::base::budget::Ending::Generations),
        device,
        played,
        setup_seconds,
        search_seconds,
        seconds,
    })
}

/// The normaliser a `--normalise` run starts from: a resumed run's, else one that has seen
/// nothing; `None` without `--normalise`. An error line when a checkpoint's does not fit.
fn learnt_of(settings: &ControlSettings, opts: &crate::task::base::options::RunOptions, n_obs: usize) -> Result<Option<Learnt>> {
    let saved = opts.resume.as_ref().and_then(|c| c.inputs.as_ref());
    // A residual's programs read the observations its linear policy normalises.
    match (settings.normalise && settings.policy == PolicyKind::Program, saved) {
        (false, None) => Ok(None),
        (false, Some(_)) => bail!("the checkpoint holds a normaliser but its settings do not normalise: it is not this run's"),
        (true, None) if opts.resume.is_some() => bail!("the checkpoint holds no normaliser but its settings normalise: it is not this run's"),
        (true, None) => Ok(Some(Learnt::new(n_obs))),
        (true, Some(state)) => Learnt::restore(state, n_obs).map(Some).map_err(|e| anyhow::anyhow!("the checkpoint: {e}")),
    }
}
