//! Control (`grove control`): evolve a policy for a simulated robot. A policy is a program with
//! one output slot per actuator (EvoGP's output nodes, or `out(K, …)` in a grammar); the action
//! is tanh of each output; fitness is minus the mean return over `episodes` roll-outs from
//! different reset noise (the same starts for every individual; `backend::cpu::control`). The best
//! policy is then played on `test_episodes` fresh starts and reported with its program, so
//! `grove rollout --policy REPORT` can replay it. A policy may also be linear ([`linear`]: random
//! search) or programs on top of a linear policy ([`residual`]).
//!
//! [`settings`] holds what a run is given, [`fitness`] how policies are scored, [`search`] the
//! programs' run ([`run`], [`fit`]), [`report`] its report. Every public item is re-exported
//! here. The submodules share this module's imports (`use super::*`).

pub mod fitness;
pub mod linear;
pub mod report;
pub mod residual;
pub mod search;
pub mod settings;

use std::sync::Mutex;

use anyhow::{Context, Result, bail};

use crate::backend::Backend;
use crate::backend::cpu::control::{ControlRun, Episode, Policy, actuator_names, observation_names, play};
use crate::program::tree::{Node, Population};
use crate::sim::Model;
use crate::sim::stats::Learnt;
use crate::task::base::report::{EvolveResult, add_island_stats, describe_devices, islands_summary};
use crate::task::base::search::{ClassTreeSettings, check_count, check_ge, check_search};
use crate::task::base::validation::fame_rows;

/// The policy a report saves: defined in [`crate::backend::cpu::control`], below the report layer,
/// which reads it too (`grove render --policy`).
pub use crate::backend::cpu::control::SavedPolicy;

pub use fitness::*;
pub use search::*;
pub use settings::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hopper_and_walker_train_without_the_alive_bonus_unless_asked() {
        for (env, zeroed) in [("hopper", true), ("walker2d", true), ("swimmer", false), ("half_cheetah", false)] {
            let m = Model::load(env, None).unwrap();
            assert_eq!(training_healthy_reward(None, &m), zeroed.then_some(0.0), "{env}");
            assert_eq!(training_healthy_reward(Some(1.0), &m), Some(1.0), "{env}");
        }
    }

    /// Hopper and `n` random tree policies of up to 32 nodes (seed `seed`).
    fn random_hopper_policies(n: usize, seed: u64) -> (Model, Population) {
        let m = Model::load("hopper", None).unwrap();
        let rep = ClassTreeSettings { constants: vec![-1.0, 0.5], p_out: 0.2, ..Default::default() }
            .rep("add,sub,mul", m.obs_size, m.nu(), 32)
            .unwrap();
        let pop = crate::program::init_population(&rep.vary.spec, n, seed).unwrap();
        (m, pop)
    }

    #[test]
    fn fresh_starts_play_each_generations_own_episodes() {
        use crate::evolve::Fitness;
        let (m, pop) = random_hopper_policies(4, 5);
        let run = ControlRun { episodes: 3, steps: 60, seed: 9, generation: 0, noise: true, ignore_termination: false };
        let task = |fresh| Control { backend: &Backend::Cpu, model: &m, run, fresh, parsimony: 0.0, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: None };
        let score = |r: &ControlRun| -> Vec<u64> { (0..4).map(|i| (-score_policy(&pop.tree(i).nodes(), &m, r).unwrap().mean()).to_bits()).collect() };
        let bits = |f: Vec<f64>| -> Vec<u64> { f.iter().map(|x| x.to_bits()).collect() };
        let (fixed, fresh) = (task(false), task(true));
        for g in [0, 1, 7] {
            // Without fresh starts every generation plays generation word 0's episodes.
            assert_eq!(bits(fixed.evaluate_at(&pop, g).unwrap()), score(&run), "generation {g}");
            let word = ControlRun::FRESH_WORD + g as u32;
            assert_eq!(bits(fresh.evaluate_at(&pop, g).unwrap()), score(&ControlRun { generation: word, ..run }), "generation {g}");
        }
        // Fresh words never meet the fixed training starts (0) or the test episodes'.
        assert!(ControlRun::FRESH_WORD > TEST_GENERATION.max(VALIDATION_GENERATION) && run.at_generation(0).generation == ControlRun::FRESH_WORD);
        assert_ne!(fresh.evaluate_at(&pop, 0).unwrap(), fresh.evaluate_at(&pop, 1).unwrap(), "new starts, new returns");
        assert_eq!(run.at_generation(usize::MAX).generation, u32::MAX, "saturates");
    }

    #[test]
    fn a_steady_candidate_beats_a_higher_mean_that_falls_on_some_starts() {
        // 3000 on every start against 3600 on four of five and 600 on the fifth (mean 3000, std 1200).
        let falls = [3600.0, 3600.0, 3600.0, 3600.0, 600.0];
        let scores = PolicyScores { episodes: falls.iter().map(|&ret| Episode { ret, steps: 1000, valid: true }).collect() };
        let (mean, std) = (scores.mean(), scores.std());
        assert_eq!((mean, std), (3000.0, 1200.0));
        let steady = steady_score(2900.0, 10.0);
        assert_eq!(crate::program::fitness::argmax(&[steady_score(3100.0, 1200.0), steady]), 1, "the steadier, though lower on average");
        assert_eq!(crate::program::fitness::argmax(&[steady_score(3100.0, 5.0), steady]), 0, "the higher, as steady");
        // Ties go to the earlier (the run's best first); NaN never wins; nothing finite: the first.
        assert_eq!(crate::program::fitness::argmax(&[1.0, 2.0, 2.0]), 1);
        assert_eq!(crate::program::fitness::argmax(&[f64::NAN, -5.0, f64::NAN]), 1);
        assert_eq!(crate::program::fitness::argmax(&[f64::NAN, f64::NAN]), 0);
        assert!(steady_score(f64::NAN, 0.0).is_nan());
    }

    #[test]
    fn validation_episodes_choose_the_candidate_with_the_highest_return_less_its_spread() {
        let (m, mut pop) = random_hopper_policies(8, 11);
        // Row 5 repeats row 2: a program is a candidate once. Row 7 is invalid.
        let copy = pop.tree(2).nodes();
        pop.set_tree(5, &copy).unwrap();
        let fitness = vec![-3.0, -1.0, -7.0, -2.0, -5.0, -7.0, -4.0, f64::INFINITY];
        let best = crate::evolve::Best { fitness: -9.0, nodes: pop.tree(6).nodes(), generation: 3, genome: None };
        let outcome = crate::evolve::Outcome { best: best.clone(), history: Vec::new(), population: pop.clone(), fitness, transfers: None, island_history: Vec::new(), fitness_cache: None };
        let run = ControlRun { episodes: 3, steps: 40, seed: 2, generation: VALIDATION_GENERATION, noise: true, ignore_termination: false };
        let (chosen, v) = choose_on_validation(&outcome, &m, &run, &<[Node]>::to_vec).unwrap();
        let v = v.expect("validation episodes were asked for");
        // The run's best first, then the population by fitness: rows 2, 4, 0, 3, 1 (row 6 is the
        // run's best again, 5 a copy of 2, 7 invalid).
        let order = [6usize, 2, 4, 0, 3, 1];
        assert_eq!(v.candidates.len(), order.len());
        let played: Vec<PolicyScores> = order.iter().map(|&i| score_policy(&pop.tree(i).nodes(), &m, &run).unwrap()).collect();
        let scores: Vec<f64> = played.iter().map(|p| p.mean() - p.std()).collect();
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(v.candidates[k].size, pop.tree(i).nodes().len(), "candidate {k}");
            assert_eq!(v.candidates[k].mean.to_bits(), played[k].mean().to_bits(), "candidate {k}");
            assert_eq!(v.candidates[k].std.to_bits(), played[k].std().to_bits(), "candidate {k}");
        }
        let top = (0..scores.len()).fold(0, |b, k| if scores[k] > scores[b] { k } else { b });
        assert_eq!(v.chosen, top);
        assert_eq!(chosen.nodes, pop.tree(order[top]).nodes());
        assert_eq!(chosen.fitness, if top == 0 { -9.0 } else { outcome.fitness[order[top]] });
        // No validation episodes: the run's best, as before.
        let (plain, none) = choose_on_validation(&outcome, &m, &ControlRun { episodes: 0, ..run }, &<[Node]>::to_vec).unwrap();
        assert!(none.is_none() && plain == best);
    }

    #[test]
    fn grammars_must_cover_every_actuator() {
        use crate::grammar::template::{Vars, compile};
        use crate::grammar::{DatasetShape, load_parsed, parse_str};
        let shape = DatasetShape { n_vars: Some(3), n_is: Some(3), n_os: Some(3) };
        let vars = Vars { names: vec!["a".into(), "b".into(), "c".into()], n_outputs: 3 };
        let tpl = |text: &str| {
            let l = load_parsed(parse_str(text, "g.bnf", false).unwrap(), &shape).unwrap();
            compile(&l.grammar, &l.table, &vars).unwrap()
        };
        let two = tpl("<p> ::= out(0, <e>) + out(1, <e>)\n<e> ::= a | b | <e>*<e>");
        let err = check_grammar_outputs(&two, 3, "g.bnf").unwrap_err().to_string();
        assert!(err.contains("out(2, …) is missing"), "{err}");
        let none = tpl("<e> ::= a | b | <e>*<e>");
        assert!(check_grammar_outputs(&none, 3, "g.bnf").unwrap_err().to_string().contains("no out(K, …)"));
        let all = tpl("<p> ::= out(0, <e>) + out(1, <e>) + out(2, <e>)\n<e> ::= a | b | <e>*<e>");
        check_grammar_outputs(&all, 3, "g.bnf").unwrap();
        let spelled = tpl("<p> ::= out(<k>, <e>)\n<k> ::= GE_RANGE:dataset_n_os\n<e> ::= a | b");
        check_grammar_outputs(&spelled, 3, "g.bnf").unwrap();
    }
}
