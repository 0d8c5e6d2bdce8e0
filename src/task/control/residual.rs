//! `grove control --policy residual`: programs evolved on top of a linear policy.
//!
//! The run has two stages. First a linear policy `a = tanh(W n)` over the normalised
//! observations `n = (o − μ) / σ` is tuned by augmented random search, as `--policy linear` does
//! ([`super::linear`]), for `linear_iterations` iterations. Then `W`, `μ` and `σ` are
//! frozen and programs are evolved as its residual: a program `f` reads the normalised
//! observations and the policy is
//!
//! ```text
//! a = tanh(W n + f(n))
//! ```
//!
//! so a program that adds nothing (every output 0) plays the linear policy: the programs search
//! for corrections to it, over inputs on one scale that a random program's constants can match.
//! The first generation is random programs (no zero program is planted), so its best plays
//! below the linear policy (HalfCheetah on an H200: 4509 against about 5740) and the search
//! climbs past it within some 15 generations (`docs/benchmarks.md`).
//!
//! The policy is written as one grove program ([`Residual::compose`]): the linear policy's tree
//! beside the program with each observation `x_i` read as `(x_i − μ_i) · (1/σ_i)`. The roll-out
//! kernels, `grove rollout` and `grove render`, Python's `act` and the exports play it unchanged,
//! and both backends give the same bits because they play the same tree. The programs' stage runs
//! the engine's host loop, which composes each generation's programs before playing them.

use std::sync::{Mutex, RwLock};

use anyhow::{Result, bail};

use super::{Arena, ControlSettings};
use super::linear::{LinearPolicy, LinearState, Search, iterate};
use crate::task::base::report::EvolveResult;
use crate::backend::Backend;
use crate::program::Op;
use crate::program::tree::{Node, Population};
use crate::sim::stats::InputScale;

/// A frozen linear policy under the programs: what a program's tree is composed with.
#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    /// `W`, `μ`, `σ`.
    pub linear: LinearPolicy,
    /// The linear policy's tree ([`LinearPolicy::tree`]).
    tree: Vec<Node>,
}

impl Residual {
    /// The residual of `linear`.
    pub fn new(linear: LinearPolicy) -> Self {
        let tree = linear.tree();
        Residual { linear, tree }
    }

    /// The whole policy of `program` (a tree over the normalised observations with one output
    /// slot per actuator): `[add, linear tree…, program…]` with each variable leaf `x_i` of the
    /// program replaced by `(x_i − μ_i) · s_i` (`s_i` = [`super::linear::Normaliser::scale`];
    /// a constant 0 where `s_i` is 0). Output slots sum over their nodes, so the policy's output
    /// `j` is the linear policy's plus the program's. An empty program (no program) stays empty.
    pub fn compose(&self, program: &[Node]) -> Vec<Node> {
        if program.is_empty() {
            return Vec::new();
        }
        let mut nodes = Vec::with_capacity(1 + self.tree.len() + InputScale::MAX_GROWTH * program.len());
        nodes.push(Node::func(Op::Add));
        nodes.extend_from_slice(&self.tree);
        InputScale::of(&self.linear.norm).compose_into(program, &mut nodes);
        nodes
    }

    /// The longest composed tree of a program of at most `max_len` nodes (at most 65535).
    pub fn max_nodes(&self, max_len: usize) -> usize {
        (1 + self.tree.len() + InputScale::MAX_GROWTH * max_len).min(u16::MAX as usize)
    }

    /// Every row of `pop` composed ([`Self::compose`]); a row whose composed tree is longer than
    /// 65535 nodes is left empty (no program).
    pub fn compose_population(&self, pop: &Population) -> Population {
        let mut out = Population::new(pop.size(), self.max_nodes(pop.max_len), pop.n_outputs);
        for i in 0..pop.size() {
            if pop.len[i] > 0 {
                // A failure empties the row, which plays as no program.
                let _ = out.set_tree(i, &self.compose(&pop.tree(i).nodes()));
            }
        }
        out
    }
}

/// The names the programs' variables are shown by: `n_NAME` for the normalised `NAME`.
pub fn normalised_names(names: &[String]) -> Vec<String> {
    names.iter().map(|n| format!("n_{n}")).collect()
}

/// What the linear stage leaves for the programs' stage.
pub struct LinearStage {
    /// The frozen policy.
    pub residual: Residual,
    /// Its search's state (checkpoints of the programs' stage keep it).
    pub state: LinearState,
    /// Env steps and seconds of roll-outs the stage played.
    pub played: (u64, f64),
    /// Seconds this process spent before the programs' stage: the linear search, unless a
    /// checkpoint of the programs' stage skipped it.
    pub seconds: f64,
}

/// The linear policy under the programs while they evolve (`--policy residual`): frozen after
/// the linear stage, or, with `--head-every G`, tuned again after every `G`-th generation by
/// `--head-iterations` more iterations of its random search with that generation's best program
/// on top ([`Search::iteration`]): the perturbed policies are `tanh((W ± ν δ) n + f(n))`, played
/// in one roll-out call on the backend with the unperturbed one, whose observations update the
/// normaliser. The next generation is played over the new `W`, `μ` and `σ`, and the policy
/// reported is the chosen program over the last ones. Each tuning continues the search's
/// iterations (their directions and fresh starts), and checkpoints keep the search, so a
/// resumed run tunes as the uninterrupted one.
pub struct Head<'a> {
    residual: RwLock<Residual>,
    search: Mutex<Search>,
    settings: &'a ControlSettings,
    arena: &'a Arena,
}

impl<'a> Head<'a> {
    /// The head of `stage`, in `arena` with `settings`' tuning.
    pub fn new(stage: &LinearStage, settings: &'a ControlSettings, arena: &'a Arena) -> Result<Self> {
        let (nu, n_obs) = (arena.m.nu(), arena.m.obs_size);
        let search = Search::resumed(&stage.state, nu, n_obs, &arena.m.name, None)?;
        Ok(Head { residual: RwLock::new(stage.residual.clone()), search: Mutex::new(search), settings, arena })
    }

    /// The linear policy the programs are played on now.
    pub fn residual(&self) -> Residual {
        self.residual.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The linear search's state, which checkpoints keep ([`crate::task::runner::checkpoint::Checkpoint::residual`]).
    pub fn state(&self) -> LinearState {
        self.search.lock().unwrap_or_else(|e| e.into_inner()).state()
    }

    /// The unperturbed policy's training return at every iteration of the search: the linear
    /// stage's, then each tuning's.
    pub fn returns(&self) -> Vec<f64> {
        self.search.lock().unwrap_or_else(|e| e.into_inner()).returns().collect()
    }

    /// Whether the head is tuned after generation `generation`: after every `head_every`-th,
    /// the last one's too, so that a run continued from its checkpoint plays on as a longer run
    /// would (the policy reported is then the chosen program over a head tuned under the last
    /// generation's best).
    fn due(&self, generation: usize) -> bool {
        let every = self.settings.head_every;
        every > 0 && (generation + 1) % every == 0
    }

    /// After `pop` of generation `generation` was played (its fitness `fit`): when due, tunes
    /// the head with the population's fittest program on top (the lowest index among equals),
    /// on `backend`, adding the env steps and seconds played to `played`.
    pub fn after_generation(&self, generation: usize, backend: &Backend, pop: &Population, fit: &[f64], played: &Mutex<(u64, f64)>) -> Result<()> {
        if !self.due(generation) {
            return Ok(());
        }
        let Some(best) = (0..fit.len()).filter(|&i| fit[i].is_finite() && pop.len[i] > 0).min_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b))) else {
            return Ok(()); // no valid program: nothing to tune under
        };
        let program = pop.tree(best).nodes();
        let mut search = self.search.lock().unwrap_or_else(|e| e.into_inner());
        // A perturbed W has every weight nonzero: its composed tree is the longest it can be,
        // which must still be a tree (at most 65535 nodes); otherwise the head stays as it is.
        if 1 + search.policy(self.arena.m.nu()).max_nodes() + InputScale::MAX_GROWTH * program.len() > u16::MAX as usize {
            return Ok(());
        }
        let before = search.played;
        for _ in 0..self.settings.head_iterations {
            search.iteration(self.settings, backend, self.arena, Some(&program))?;
        }
        if let Ok(mut p) = played.lock() {
            p.0 += search.played.0 - before.0;
            p.1 += search.played.1 - before.1;
        }
        *self.residual.write().unwrap_or_else(|e| e.into_inner()) = Residual::new(search.policy(self.arena.m.nu()));
        Ok(())
    }
}

/// Runs `grove control --policy residual` (settings already checked by the caller): the linear
/// stage (resumed from a checkpoint of it, or skipped when the checkpoint is of the programs'
/// stage), then the programs' stage ([`super::control_programs`]).
pub fn search(settings: &ControlSettings, backend: &Backend, opts: &crate::task::base::options::RunOptions) -> Result<EvolveResult> {
    let start = std::time::Instant::now();
    let arena = Arena::load(settings)?;
    // The head's tunings play the linear policy composed with a program of up to --max-len.
    super::linear::check_memory(settings, &arena, backend, opts, settings.engine.max_len)?;
    let (nu, n_obs, name) = (arena.m.nu(), arena.m.obs_size, arena.m.name.clone());
    let iterations = settings.linear_iterations;
    let linear = |mut search: Search| -> Result<LinearStage> {
        iterate(settings, backend, opts, &arena, std::slice::from_mut(&mut search), iterations, None)?;
        stage_of(&search, nu, iterations, false)
    };
    // A checkpoint of the programs' stage holds the linear search's end beside them; one of the
    // linear stage holds the search alone.
    let (stage, resume) = match opts.resume.as_ref().map(|c| (c, &c.residual, &c.linear)) {
        Some((_, Some(state), _)) => (stage_of(&Search::resumed(state, nu, n_obs, &name, None)?, nu, iterations, true)?, opts.resume.clone()),
        Some((c, None, Some(state))) => (linear(Search::resumed(state, nu, n_obs, &name, c.env_steps)?)?, None),
        Some((_, None, None)) => bail!("the checkpoint holds an evolved population without a linear policy under it: resume it with --set policy=program"),
        None => (linear(Search::fresh(nu, n_obs))?, None),
    };
    let stage = LinearStage { seconds: start.elapsed().as_secs_f64(), ..stage };
    let opts = crate::task::base::options::RunOptions { resume, ..opts.clone() };
    super::programs(settings, backend, &opts, &arena, Some(&stage))
}

/// The linear stage of `search`, which has run its `iterations` (and, when `tuned` (a checkpoint of
/// the programs' stage), maybe more, the head's tunings).
fn stage_of(search: &Search, nu: usize, iterations: usize, tuned: bool) -> Result<LinearStage> {
    if search.next() < iterations || search.next() > iterations && !tuned {
        bail!("the checkpoint's linear search is at iteration {} of --linear-iterations {iterations}: resume it with its own settings", search.next());
    }
    Ok(LinearStage {
        residual: Residual::new(search.policy(nu)),
        state: search.state(),
        played: search.played,
        seconds: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::control::Policy;
    use crate::task::control::linear::Normaliser;

    fn marked(mut n: Node, k: u8) -> Node {
        n.out = k + 1;
        n
    }

    #[test]
    fn the_composed_tree_adds_the_program_over_normalised_observations_to_the_linear_policy() {
        let (nu, n) = (2, 3);
        let norm = Normaliser { mean: vec![0.5, -1.0, 2.0], std: vec![2.0, 0.5, 0.0] };
        let linear = LinearPolicy { weights: vec![0.25, -0.5, 1.0, 0.75, 0.0, -2.0], norm: norm.clone(), nu };
        let r = Residual::new(linear.clone());
        // out0(x0 · x1) + out1(x2): output 0 is n0·n1, output 1 reads the constant observation (0),
        // and a marked leaf x1 as output 1's second term.
        let program = [
            Node::func(Op::Add),
            marked(Node::func(Op::Mul), 0),
            Node::var(0),
            marked(Node::var(1), 1),
            marked(Node::var(2), 1),
        ];
        let nodes = r.compose(&program);
        assert!(nodes.len() <= r.max_nodes(program.len()));
        let mut whole = Policy::for_sizes(&nodes, nu, n).unwrap();
        let mut lin = Policy::for_sizes(&linear.tree(), nu, n).unwrap();
        for obs in [[1.0f32, -2.0, 7.0], [0.0, 0.5, 2.0], [-3.0, 4.0, 1.0]] {
            let got = whole.outputs(&obs).unwrap().to_vec();
            let base = lin.outputs(&obs).unwrap().to_vec();
            let nx = |i: usize| (obs[i] - norm.mean[i] as f32) * norm.scale(i) as f32;
            let want = [base[0] + nx(0) * nx(1), base[1] + nx(1)];
            for j in 0..nu {
                assert!((got[j] - want[j]).abs() <= 1e-5 * (1.0 + want[j].abs()), "output {j} at {obs:?}: {} against {}", got[j], want[j]);
            }
        }
        // A program of zeros plays the linear policy exactly.
        let zero = [Node::func(Op::Add), marked(Node::constant(0.0), 0), marked(Node::constant(0.0), 1)];
        let mut z = Policy::for_sizes(&r.compose(&zero), nu, n).unwrap();
        let obs = [0.3f32, -0.7, 2.0];
        assert_eq!(z.outputs(&obs).unwrap(), lin.outputs(&obs).unwrap());
        // No program stays no program.
        assert!(r.compose(&[]).is_empty());
    }

    #[test]
    fn a_composed_population_keeps_empty_rows_empty() {
        let norm = Normaliser { mean: vec![0.0; 2], std: vec![1.0; 2] };
        let r = Residual::new(LinearPolicy { weights: vec![1.0, -1.0], norm, nu: 1 });
        let mut pop = Population::new(3, 4, 1);
        pop.set_tree(0, &[marked(Node::var(1), 0)]).unwrap();
        pop.set_tree(2, &[marked(Node::func(Op::Sub), 0), Node::var(0), Node::constant(1.0)]).unwrap();
        let c = r.compose_population(&pop);
        assert_eq!(c.size(), 3);
        assert_eq!(c.len[1], 0);
        assert_eq!(c.tree(0).nodes(), r.compose(&pop.tree(0).nodes()));
        assert_eq!(c.tree(2).nodes(), r.compose(&pop.tree(2).nodes()));
        c.validate().unwrap();
    }
}
