//! How a policy is scored: where it plays ([`Arena`]), the fitness the engine minimises
//! ([`Control`]: minus the mean return over the episodes, on any backend), and the scores of one
//! policy over episodes on the CPU reference.

use super::*;

/// Opens the device for a `grove control` run in `env` (loading the environment first, so
/// that a bad one fails before a GPU is opened); says on standard error, unless quiet, when
/// `auto` falls back to the CPU.
pub fn open_for(env: &str, profile: Option<&str>, device: crate::backend::DeviceChoice, quiet: bool) -> Result<Backend> {
    open_on(env, profile, device, &crate::backend::Gpus::All, quiet)
}

/// [`open_for`] on the first of the GPUs `gpus` chooses (for islands spread over several).
pub fn open_on(env: &str, profile: Option<&str>, device: crate::backend::DeviceChoice, gpus: &crate::backend::Gpus, quiet: bool) -> Result<Backend> {
    Model::load(env, profile)?;
    Ok(Backend::open(device, gpus)?.print_notes(quiet))
}

/// Plays a saved policy for one episode in f32, as `grove rollout --policy` does: `steps`
/// control steps at most (default: the environment's episode length), from the reset noise of
/// `seed` (`None`: the rest pose).
pub fn replay(saved: &SavedPolicy, steps: Option<usize>, seed: Option<u64>) -> Result<crate::sim::rollout::RolloutSummary> {
    use crate::sim::rollout::{ActionSource, RolloutOptions, rollout};
    let m = Model::load(&saved.env, Some(&saved.profile))?;
    let actions = ActionSource::Policy(Box::new(Policy::for_model(&saved.tree(&m)?, &m)?));
    let opts = RolloutOptions { steps: steps.unwrap_or(m.episode_steps), seed, ignore_termination: false };
    rollout::<f32>(&m, &actions, &opts, None)
}

/// Plays the policy of a `grove control` report (`report`, read from `origin`) on that run's
/// own test episodes (its environment and profile, seed, episode length and count, and the
/// test episodes' reset noise, [`super::TEST_GENERATION`]), on the CPU in f32 as the run scored
/// them: their returns, whose mean is the report's test return to the bit. Returns them and the
/// report's own test return.
pub fn replay_test(report: &serde_json::Value, origin: &str) -> Result<(PolicyScores, Option<f64>)> {
    let saved = SavedPolicy::from_report(report, origin)?;
    let settings: ControlSettings = report
        .get("settings")
        .cloned()
        .with_context(|| format!("{origin} has no `settings`: replay the test episodes of a grove control --report"))
        .and_then(|s| serde_json::from_value(s).map_err(|e| anyhow::anyhow!("{origin}: the `settings` are not a control run's: {}", crate::program::clip(&e.to_string(), 200))))?;
    let arena = Arena::load(&settings)?;
    let nodes = saved.tree(&arena.m).with_context(|| format!("replaying {origin}"))?;
    let run = ControlRun { episodes: settings.test_episodes, generation: super::TEST_GENERATION, ..arena.run };
    let reported = report.get("test").and_then(|t| t.get("mean")).and_then(serde_json::Value::as_f64);
    Ok((score_policy(&nodes, &arena.m, &run)?, reported))
}

/// Where a search plays: the environment as tested (`m`) and as trained (its healthy reward
/// possibly replaced), the training episodes, and the names of its observations and actuators.
pub struct Arena {
    /// The environment, as tested.
    pub m: Model,
    /// The environment as trained (its healthy reward possibly replaced).
    pub trained: Model,
    /// The training episodes.
    pub run: ControlRun,
    /// The training healthy reward, when it replaces the env's.
    pub healthy: Option<f64>,
    /// Observation names.
    pub names: Vec<String>,
    /// Actuator names.
    pub acts: Vec<String>,
}

impl Arena {
    /// Loads the environment of `settings` (one line when it has no actuator or observation).
    pub fn load(settings: &ControlSettings) -> Result<Self> {
        let m = Model::load(&settings.env, settings.profile.as_deref())?;
        let (nu, n_obs) = (m.nu(), m.obs_size);
        if nu == 0 || n_obs == 0 {
            bail!("{} has {nu} actuators and {n_obs} observations; a policy needs at least one of each", m.name);
        }
        let steps = settings.episode_steps.unwrap_or(m.episode_steps);
        let run = ControlRun { episodes: settings.episodes, steps, seed: settings.engine.seed, generation: 0, noise: true, ignore_termination: false };
        let mut trained = m.clone();
        let healthy = training_healthy_reward(settings.healthy_reward, &m);
        if let Some(w) = healthy {
            trained.healthy_weight = w;
        }
        let (names, acts) = (observation_names(&m), actuator_names(&m));
        Ok(Arena { m, trained, run, healthy, names, acts })
    }
}

/// Mean returns of a population, wherever the backend runs them.
pub struct Control<'m> {
    /// Where roll-outs run.
    pub backend: &'m Backend,
    /// The environment.
    pub model: &'m Model,
    /// Episodes, steps and reset noise.
    pub run: ControlRun,
    /// Every generation plays fresh starts ([`ControlRun::at_generation`]); false: every
    /// generation plays `run`'s.
    pub fresh: bool,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Control steps played and seconds spent in roll-outs so far.
    pub played: std::sync::Mutex<(u64, f64)>,
    /// The linear policy the programs are the residual of (`--policy residual`): each program is
    /// played composed with its current one ([`self::residual::Residual::compose`]), by the
    /// host loop, and it may be tuned again between generations ([`self::residual::Head`]).
    pub residual: Option<&'m self::residual::Head<'m>>,
    /// `--normalise`: the normaliser the programs read their observations through, learnt from
    /// what each generation's policies see ([`Learnt`]).
    pub learnt: Option<&'m Mutex<Learnt>>,
    /// Every episode's return of the population evaluated last (`[P × episodes]`, NaN where
    /// invalid): the cases lexicase selection reads ([`crate::evolve::Fitness::case_errors`]).
    pub episodes: Mutex<(u64, Vec<f64>)>,
}

/// A hash of a population's programs: which population [`Control::episodes`] belongs to.
fn fingerprint(pop: &Population) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (pop.max_len, pop.n_outputs, &pop.len, &pop.op, &pop.size, &pop.out).hash(&mut h);
    pop.value.iter().for_each(|v| v.to_bits().hash(&mut h));
    h.finish()
}

impl Control<'_> {
    /// Fitness of `pop` over `run`'s episodes: minus the mean return plus parsimony, `+inf` for
    /// rows with no program or a non-finite return; counts the env steps and seconds played.
    fn returns(&self, pop: &Population, run: &ControlRun) -> Result<Vec<f64>> {
        let t0 = std::time::Instant::now();
        let composed = self.residual.map(|h| h.residual().compose_population(pop));
        let (means, steps, episodes) = match self.learnt {
            Some(l) => {
                let mut l = l.lock().unwrap_or_else(|e| e.into_inner());
                let (means, steps, seen, episodes) = self.backend.control_returns_observed(pop, self.model, run, Some(&l.next()))?;
                l.learn(&seen);
                (means, steps, episodes)
            }
            None => {
                let (means, episodes, steps) = self.backend.control_episodes(composed.as_ref().unwrap_or(pop), self.model, run)?;
                (means, steps, episodes)
            }
        };
        if let Ok(mut p) = self.played.lock() {
            p.0 += steps;
            p.1 += t0.elapsed().as_secs_f64();
        }
        if let Ok(mut last) = self.episodes.lock() {
            *last = (fingerprint(pop), episodes);
        }
        Ok(means
            .iter()
            .enumerate()
            .map(|(i, &r)| if pop.len[i] == 0 || !r.is_finite() { f64::INFINITY } else { -r + self.parsimony * pop.len[i] as f64 })
            .collect())
    }
}

impl crate::evolve::Fitness for Control<'_> {
    fn evaluate(&self, pop: &Population) -> Result<Vec<f64>> {
        self.returns(pop, &self.run)
    }

    fn evaluate_at(&self, pop: &Population, generation: usize) -> Result<Vec<f64>> {
        let run = if self.fresh { self.run.at_generation(generation) } else { self.run };
        let fit = self.returns(pop, &run)?;
        if let Some(h) = self.residual {
            h.after_generation(generation, self.backend, pop, &fit, &self.played)?;
        }
        Ok(fit)
    }

    fn n_cases(&self) -> usize {
        self.run.episodes
    }

    /// Minus each episode's return at generation `generation` (the episodes are the cases,
    /// each played from its own start): read from the last evaluation where it was of `pop`,
    /// else played again (the same starts give the same returns; islands, and migrants, need
    /// it). `+inf` for an invalid episode or individual.
    fn case_errors(&self, pop: &Population, generation: usize, cases: &[u32]) -> Result<Vec<f64>> {
        let k = self.run.episodes;
        let seen = {
            let last = self.episodes.lock().unwrap_or_else(|e| e.into_inner());
            (last.0 == fingerprint(pop) && last.1.len() == pop.size() * k).then(|| last.1.clone())
        };
        let last = match seen {
            Some(l) => l,
            None => {
                let run = if self.fresh { self.run.at_generation(generation) } else { self.run };
                self.returns(pop, &run)?;
                self.episodes.lock().unwrap_or_else(|e| e.into_inner()).1.clone()
            }
        };
        let mut errors = Vec::with_capacity(pop.size() * cases.len());
        for i in 0..pop.size() {
            for &c in cases {
                let r = last[i * k + c as usize];
                errors.push(if pop.len[i] == 0 || !r.is_finite() { f64::INFINITY } else { -r });
            }
        }
        Ok(errors)
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        // The device loop plays the programs as they are; a residual's are composed first.
        if self.residual.is_some() {
            return None;
        }
        self.backend.control_task(self.model, self.run, self.fresh, self.parsimony, &self.played, self.learnt)
    }
}

/// Scores of a policy over several episodes.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyScores {
    /// Each episode.
    pub episodes: Vec<Episode>,
}

impl PolicyScores {
    /// Mean return (NaN when an episode was invalid).
    pub fn mean(&self) -> f64 {
        if self.episodes.iter().any(|e| !e.valid) || self.episodes.is_empty() {
            return f64::NAN;
        }
        self.episodes.iter().map(|e| e.ret).sum::<f64>() / self.episodes.len() as f64
    }
    /// Population standard deviation of the returns.
    pub fn std(&self) -> f64 {
        let m = self.mean();
        (self.episodes.iter().map(|e| (e.ret - m).powi(2)).sum::<f64>() / self.episodes.len().max(1) as f64).sqrt()
    }
    /// Mean episode length, control steps.
    pub fn mean_steps(&self) -> f64 {
        self.episodes.iter().map(|e| e.steps as f64).sum::<f64>() / self.episodes.len().max(1) as f64
    }
    /// The scores as the report shows them.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "mean": crate::report::num(self.mean()), "std": crate::report::num(self.std()),
            "mean_steps": self.mean_steps(), "episodes": self.episodes.len(),
            "returns": self.episodes.iter().map(|e| crate::report::num(e.ret)).collect::<Vec<_>>(),
            "steps": self.episodes.iter().map(|e| e.steps).collect::<Vec<_>>(),
        })
    }
}

/// Plays `nodes` on the CPU (the reference) for the episodes of `run`.
pub fn score_policy(nodes: &[Node], m: &Model, run: &ControlRun) -> Result<PolicyScores> {
    let mut pop = Population::new(1, nodes.len().max(1), m.nu());
    pop.set_tree(0, nodes).map_err(|e| anyhow::anyhow!("the policy's tree is malformed: {e}"))?;
    let policy = Policy::new(pop.tree(0), m.nu(), m.obs_size)
        .with_context(|| format!("the policy does not fit {} (it reads past its {} observations)", m.name, m.obs_size))?;
    use rayon::prelude::*;
    let episodes = (0..run.episodes as u32).into_par_iter().map(|k| play(m, &mut policy.clone(), run, k)).collect();
    Ok(PolicyScores { episodes })
}
