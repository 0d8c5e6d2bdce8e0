//! A control run's result: the reported policy's actions, scores and saved program, the linear
//! policy or normaliser under it, written as the report and the summary.

use super::*;
use super::search::{Evolved, Reads};

/// The reported policy: the chosen program, what it plays (composed with a residual's linear
/// policy or a normaliser), its training and test scores, and the validation episodes' choice.
pub(super) struct Played<'a> {
    /// The chosen program.
    pub best: &'a crate::evolve::Best,
    /// The tree the policy plays.
    pub nodes: &'a [Node],
    /// Its scores on the training episodes.
    pub train: &'a PolicyScores,
    /// Its scores on fresh episodes.
    pub test: &'a PolicyScores,
    /// How the validation episodes chose it, where there were some.
    pub validation: Option<&'a Validation>,
}

/// The report and summary of [`programs`] (begun at `start`).
#[allow(clippy::too_many_arguments)]
pub(super) fn programs_report(
    settings: &ControlSettings,
    backend: &Backend,
    arena: &Arena,
    stage: Option<&self::residual::LinearStage>,
    reads: &Reads<'_>,
    evolved: &Evolved,
    policy: &Played<'_>,
    start: std::time::Instant,
) -> Result<EvolveResult> {
    let mut report = report_json(settings, arena, reads, evolved, policy)?;
    let mut summary = format!("{} ({}), {} actuators, {} observations\n", arena.m.name, arena.m.profile, arena.m.nu(), arena.m.obs_size);
    summary += &policy_lines(&mut report, settings, arena, stage, reads);
    summary += &score_lines(settings, arena, reads, evolved, policy);
    let outcome = &evolved.outcome;
    let generations: Vec<f64> = outcome.history.iter().map(|s| s.seconds).collect();
    let finish = start.elapsed().as_secs_f64() - evolved.setup_seconds - evolved.search_seconds;
    let split = crate::task::base::report::Split::of(evolved.setup_seconds, evolved.search_seconds, finish, &generations, backend.kernel_loads());
    let (played, rollout_seconds) = evolved.played;
    let time = format!(
        "time          {:.2} s on {}; {played} env steps in {rollout_seconds:.2} s of roll-outs ({:.3e} steps/s with the policy)",
        evolved.seconds,
        evolved.device,
        played as f64 / rollout_seconds.max(1e-9)
    );
    crate::task::base::report::close(&mut report, &mut summary, &split, &time);
    Ok(EvolveResult { report, summary })
}

/// The names the programs read: the observations, normalised where a residual's linear policy
/// or a normaliser stands between them.
fn program_names(arena: &Arena, reads: &Reads<'_>) -> Vec<String> {
    if reads.residual.is_some() || reads.learnt.is_some() { self::residual::normalised_names(&arena.names) } else { arena.names.clone() }
}

/// Actuator `a`'s action with program output `p`: `tanh(p)`, or a residual's
/// `tanh(lin_a + p)`.
fn action(reads: &Reads<'_>, a: &str, p: &str) -> String {
    if reads.residual.is_some() { format!("tanh(lin_{a} + {p})") } else { format!("tanh({p})") }
}

/// The report of a control run of programs but for the linear policy or normaliser under them
/// ([`policy_lines`]) and the time split.
fn report_json(settings: &ControlSettings, arena: &Arena, reads: &Reads<'_>, evolved: &Evolved, policy: &Played<'_>) -> Result<serde_json::Value> {
    use crate::program::render::{Style, outputs};
    let Arena { m, run, healthy, names, acts, .. } = arena;
    let (nu, outcome, best) = (m.nu(), &evolved.outcome, policy.best);
    let program_names = program_names(arena, reads);
    let programs = outputs(&best.nodes, nu, &program_names, Style::Infix);
    let mut generations: Vec<serde_json::Value> = outcome
        .history
        .iter()
        .map(|s| {
            serde_json::json!({"generation": s.generation, "best_return": crate::report::num(-s.best),
                "mean_return": crate::report::num(-s.mean), "mean_size": crate::report::num(s.mean_size),
                "median_size": evolved.median_sizes.get(s.generation).copied().map(crate::report::num),
                "invalid": s.invalid, "seconds": s.seconds})
        })
        .collect();
    add_island_stats(&mut generations, &outcome.island_history, true);
    // The hall of fame's loss is minus the training return (the fitness less the parsimony
    // penalty); each row shows every actuator's action.
    let fame = fame_rows(&evolved.hof, settings.parsimony, |nodes| {
        let show = |style: Style| {
            let wrap = |(a, p): (&String, String)| match (style, reads.residual.is_some()) {
                (Style::Latex, false) => format!("\\tanh\\left({p}\\right)"),
                (Style::Latex, true) => format!("\\tanh\\left(\\mathrm{{lin}}_{{{}}} + {p}\\right)", a.replace('_', "\\_")),
                (Style::Infix | Style::Sympy, _) => action(reads, a, &p),
            };
            acts.iter().zip(outputs(nodes, nu, &program_names, style)).map(wrap).collect::<Vec<_>>().join("; ")
        };
        Ok((show(Style::Infix), show(Style::Latex), show(Style::Sympy)))
    })?;
    let mut best_json = serde_json::json!({
        "programs": programs.iter().zip(acts).map(|(p, a)| serde_json::json!({"actuator": a, "action": action(reads, a, p)})).collect::<Vec<_>>(),
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation,
    });
    crate::task::base::report::add_genome(&mut best_json, best);
    let saved = SavedPolicy {
        env: settings.env.clone(),
        profile: m.profile.clone(),
        observations: names.clone(),
        actuators: acts.clone(),
        nodes: crate::task::base::model::Model::encode(policy.nodes),
        operators: crate::task::base::model::Model::operators_of(policy.nodes),
    };
    let (played, rollout_seconds) = evolved.played;
    let mut report = serde_json::json!({
        "command": "control",
        "settings": settings,
        "env": {"name": m.name, "profile": m.profile, "observations": names, "actuators": acts, "episode_steps": run.steps},
        "generations": generations,
        "collapse": crate::task::base::report::collapse_json(&evolved.median_sizes),
        "ended": evolved.ended,
        "best": best_json,
        "train": policy.train.json(),
        "test": policy.test.json(),
        "policy": saved,
        "training_healthy_reward": healthy.unwrap_or(m.healthy_weight),
        "hall_of_fame": fame,
        "validation": policy.validation.map(Validation::json),
        "timing": {"seconds": evolved.seconds, "env_steps": played, "rollout_seconds": rollout_seconds,
                   "env_steps_per_second": played as f64 / rollout_seconds.max(1e-9),
                   "threads": rayon::current_num_threads(), "device": evolved.device},
        "transfers": outcome.transfers,
        "version": env!("CARGO_PKG_VERSION"),
    });
    crate::task::base::report::add_operators(&mut report, &best.nodes);
    Ok(report)
}

/// What stands between the observations and the programs, in the report (`linear_policy`,
/// `linear_search`, `normaliser`) and as the summary's lines.
fn policy_lines(report: &mut serde_json::Value, settings: &ControlSettings, arena: &Arena, stage: Option<&self::residual::LinearStage>, reads: &Reads<'_>) -> String {
    let (names, acts) = (&arena.names, &arena.acts);
    let mut summary = String::new();
    if let (Some(s), Some(h)) = (stage, reads.residual) {
        let returns = h.returns();
        report["linear_policy"] = h.residual().linear.json(names, acts);
        report["linear_search"] = serde_json::json!({"iterations": returns.len(), "returns": returns.iter().map(|&r| crate::report::num(r)).collect::<Vec<_>>(),
            "before_programs": settings.linear_iterations, "head_every": settings.head_every, "head_iterations": settings.head_iterations});
        report["timing"]["linear_seconds"] = serde_json::json!(s.seconds);
        let tuned = returns.len().saturating_sub(settings.linear_iterations);
        let again = if tuned > 0 { format!(", then {tuned} more under the programs, {} every {} generations", settings.head_iterations, settings.head_every) } else { String::new() };
        summary += &format!(
            "policy        residual: tanh(lin + f(n)), n = (o - mean) / std; lin = W n tuned by random search ({} iterations{again}, return {:.2}), f evolved on top\n",
            settings.linear_iterations,
            returns.last().copied().unwrap_or(f64::NAN)
        );
        summary += "weights       W, mean and std in the report's `linear_policy`; `policy` holds the whole policy as a program\n";
    }
    if let Some(l) = reads.learnt {
        let l = l.lock().unwrap_or_else(|e| e.into_inner());
        report["normaliser"] = serde_json::json!({
            "observations": names, "mean": l.played.mean.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(),
            "std": l.played.std.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(), "states": l.played_from,
        });
        summary += &format!(
            "inputs        n = (o - mean) / std, learnt from the {} states the population's policies visited before its last generation (--normalise); `policy` has them written in\n",
            l.played_from
        );
    }
    summary
}

/// The summary's actions, size, ending, choice, training reward and returns, and islands.
fn score_lines(settings: &ControlSettings, arena: &Arena, reads: &Reads<'_>, evolved: &Evolved, policy: &Played<'_>) -> String {
    use crate::program::render::{Style, outputs};
    let (m, acts, healthy, best) = (&arena.m, &arena.acts, arena.healthy, policy.best);
    let programs = outputs(&best.nodes, m.nu(), &program_names(arena, reads), Style::Infix);
    let w = acts.iter().map(|a| a.len()).max().unwrap_or(1).max(6);
    let mut summary = String::new();
    for (a, p) in acts.iter().zip(&programs) {
        summary += &format!("{a:<w$}  {}\n", action(reads, a, p));
    }
    summary += &format!("size          {} nodes\n", best.nodes.len());
    summary += &evolved.ended.line(settings.engine.generations).unwrap_or_default();
    summary += &crate::task::base::report::collapse_line(&evolved.median_sizes, settings.engine.selection);
    if let Some(v) = policy.validation {
        summary += &v.line();
    }
    if let Some(w) = healthy.filter(|&w| w != m.healthy_weight) {
        summary += &format!("training      healthy reward {w} per step instead of {} (--healthy-reward); returns below use the env's\n", m.healthy_weight);
    }
    let (train, test) = (policy.train, policy.test);
    summary += &format!(
        "train return  {:.2}  (mean of {} episode{}, {:.0} steps on average)\n",
        train.mean(),
        train.episodes.len(),
        if train.episodes.len() == 1 { "" } else { "s" },
        train.mean_steps()
    );
    summary += &format!(
        "test return   {:.2} ± {:.2}  (mean of {} fresh episodes, {:.0} steps on average)\n",
        test.mean(),
        test.std(),
        test.episodes.len(),
        test.mean_steps()
    );
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &evolved.outcome.island_history, true) {
        summary += &line;
    }
    summary
}
