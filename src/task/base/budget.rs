//! Budgets: when a run ends before its last generation. A wall-clock limit on the search
//! (`--time-limit`, `budget.time_limit`) and a target (`--stop-at`, `budget.stop_at`: a training
//! loss for regression, a training accuracy for classification, a return for control). The run
//! ends at the end of a generation, with the complete report, hall of fame and checkpoint of a
//! finished run ([`crate::evolve::Observer::finish`]), and the report says why it ended
//! ([`Ending`]).

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::evolve::Best;

/// Longest time limit, seconds (a year: a larger one is a typing slip, not a budget).
pub const MAX_TIME_LIMIT: f64 = 365.0 * 24.0 * 3600.0;

/// A run's budget: both parts optional; the run ends after the first generation that meets
/// either.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Seconds of search, from its start (setup and kernels included, the final scoring not):
    /// the run ends after the generation past which one more generation would cross it, so it
    /// ends within about one generation of the limit (the first generation, which holds the
    /// setup, ends it only once the limit is crossed).
    #[serde(default)]
    pub time_limit: Option<f64>,
    /// The target: the run ends after the first generation whose best program reaches it (what
    /// the [`Goal`] of the task measures).
    #[serde(default)]
    pub stop_at: Option<f64>,
}

impl Budget {
    /// Checks both parts; `goal` tells what `stop_at` measures (its range).
    pub fn check(&self, goal: Measure) -> Result<()> {
        if let Some(t) = self.time_limit {
            anyhow::ensure!(
                t.is_finite() && t > 0.0 && t <= MAX_TIME_LIMIT,
                "--time-limit (budget.time_limit) must be a positive number of seconds, at most {MAX_TIME_LIMIT} (a year), got {t}"
            );
        }
        if let Some(v) = self.stop_at {
            anyhow::ensure!(v.is_finite(), "--stop-at (budget.stop_at) must be a finite number, got {v}");
            if goal == Measure::Accuracy {
                anyhow::ensure!((0.0..=1.0).contains(&v), "--stop-at (budget.stop_at) is a training accuracy, in [0, 1], got {v}");
            }
        }
        Ok(())
    }

    /// True when neither part is set.
    pub fn is_empty(&self) -> bool {
        self.time_limit.is_none() && self.stop_at.is_none()
    }
}

/// What a task's `stop_at` is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// The training loss the progress line shows (the fitness): the run ends at or below it.
    Loss,
    /// The training accuracy of the best program: the run ends at or above it.
    Accuracy,
    /// The best program's training return: the run ends at or above it.
    Return,
}

impl Measure {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Loss => "loss",
            Measure::Accuracy => "accuracy",
            Measure::Return => "return",
        }
    }

    fn reached(self, value: f64, target: f64) -> bool {
        match self {
            Measure::Loss => value <= target,
            Measure::Accuracy | Measure::Return => value >= target,
        }
    }
}

/// How a task measures its best program against `stop_at`: the measure and a function of the
/// best program (called only when the best changes).
pub struct Goal<'a> {
    /// What the value is.
    pub measure: Measure,
    /// The best program's value.
    pub value: Box<dyn Fn(&Best) -> f64 + 'a>,
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Ending {
    /// Every generation ran.
    Generations,
    /// The time limit: the search had run `seconds` when generation `generation` ended it.
    TimeLimit {
        /// The limit, seconds.
        time_limit: f64,
        /// Seconds of search at the end of the last generation.
        seconds: f64,
        /// The last generation.
        generation: usize,
        /// Whether the limit was shorter than the run's first generation (with its setup): it
        /// ran one generation, which alone crossed the limit.
        shorter_than_one: bool,
    },
    /// The target: generation `generation`'s best program measured `value`.
    StopAt {
        /// The target.
        stop_at: f64,
        /// What was measured.
        measure: &'static str,
        /// The best program's value.
        value: f64,
        /// The last generation.
        generation: usize,
    },
}

impl Ending {
    /// The summary's line, for a run that ended early (`None` for one that ran every one of
    /// its `generations`).
    pub fn line(&self, generations: usize) -> Option<String> {
        match self {
            Ending::Generations => None,
            Ending::TimeLimit { time_limit, seconds, generation, shorter_than_one: false } => Some(format!(
                "ended         after generation {generation} of {generations}: time limit {time_limit} s ({seconds:.2} s of search)\n"
            )),
            Ending::TimeLimit { time_limit, seconds, generation, shorter_than_one: true } => {
                let took = super::report::show_seconds(*seconds);
                Some(format!(
                    "ended         after generation {generation} of {generations}: time limit {time_limit} s is shorter than one generation, which took {took} with the setup; raise --time-limit (budget.time_limit) for more than one\n"
                ))
            }
            Ending::StopAt { stop_at, measure, value, generation } => {
                Some(format!("ended         after generation {generation} of {generations}: --stop-at {stop_at} reached ({measure} {value:.6})\n"))
            }
        }
    }
}

/// The clock and the target of one run: [`Watch::finish`] answers the engine's
/// [`crate::evolve::Observer::finish`].
pub struct Watch<'a> {
    budget: Budget,
    goal: Goal<'a>,
    started: Instant,
    /// The search time when the previous generation was asked about.
    last: Duration,
    /// Whether a generation was asked about before.
    asked: bool,
    /// The best program last measured (its fitness bits and generation) and its value.
    measured: Option<(u64, usize, f64)>,
}

impl<'a> Watch<'a> {
    /// A watch of `budget`, started now.
    pub fn new(budget: Budget, goal: Goal<'a>) -> Self {
        Watch { budget, goal, started: Instant::now(), last: Duration::ZERO, asked: false, measured: None }
    }

    /// Whether generation `generation`, with `best` the best so far, ends the run, and why.
    pub fn finish(&mut self, generation: usize, best: &Best) -> Option<Ending> {
        if let Some(target) = self.budget.stop_at {
            let key = (best.fitness.to_bits(), best.generation);
            let value = match self.measured {
                Some((bits, gen, v)) if (bits, gen) == key => v,
                _ if best.nodes.is_empty() => f64::NAN,
                _ => {
                    let v = (self.goal.value)(best);
                    self.measured = Some((key.0, key.1, v));
                    v
                }
            };
            if self.goal.measure.reached(value, target) {
                return Some(Ending::StopAt { stop_at: target, measure: self.goal.measure.name(), value, generation });
            }
        }
        // The next generation is expected to take as long as the last one; the first one's
        // time holds the setup (kernels compiled, data copied), so after it the run ends only
        // if the limit is already crossed.
        let now = self.started.elapsed();
        let first = !self.asked;
        let one = if first { Duration::ZERO } else { now.saturating_sub(self.last) };
        self.last = now;
        self.asked = true;
        match self.budget.time_limit {
            Some(limit) if (now + one).as_secs_f64() >= limit => Some(Ending::TimeLimit {
                time_limit: limit,
                seconds: now.as_secs_f64(),
                generation,
                shorter_than_one: first && now.as_secs_f64() >= limit,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn best(fitness: f64, generation: usize) -> Best {
        Best { fitness, nodes: vec![crate::program::tree::Node::var(0)], generation, genome: None }
    }

    #[test]
    fn targets_end_at_the_first_generation_that_reaches_them() {
        let loss = Goal { measure: Measure::Loss, value: Box::new(|b: &Best| b.fitness) };
        let mut w = Watch::new(Budget { time_limit: None, stop_at: Some(0.5) }, loss);
        assert_eq!(w.finish(0, &best(0.9, 0)), None);
        assert_eq!(w.finish(1, &best(0.5, 1)), Some(Ending::StopAt { stop_at: 0.5, measure: "loss", value: 0.5, generation: 1 }));
        let ret = Goal { measure: Measure::Return, value: Box::new(|b: &Best| -b.fitness) };
        let mut w = Watch::new(Budget { time_limit: None, stop_at: Some(100.0) }, ret);
        assert_eq!(w.finish(0, &best(-99.0, 0)), None);
        assert!(matches!(w.finish(3, &best(-101.0, 3)), Some(Ending::StopAt { generation: 3, .. })));
        // A best not found yet (no program) never reaches a target.
        let mut w = Watch::new(Budget { time_limit: None, stop_at: Some(1.0) }, Goal { measure: Measure::Loss, value: Box::new(|_: &Best| 0.0) });
        assert_eq!(w.finish(0, &Best { fitness: f64::INFINITY, nodes: vec![], generation: 0, genome: None }), None);
    }

    #[test]
    fn the_best_is_measured_only_when_it_changes() {
        let calls = std::cell::Cell::new(0);
        let goal = Goal {
            measure: Measure::Accuracy,
            value: Box::new(|_: &Best| {
                calls.set(calls.get() + 1);
                0.5
            }),
        };
        let mut w = Watch::new(Budget { time_limit: None, stop_at: Some(0.9) }, goal);
        for g in 0..5 {
            assert_eq!(w.finish(g, &best(0.3, 0)), None);
        }
        assert_eq!(calls.get(), 1);
        w.finish(5, &best(0.2, 5));
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_time_limit_ends_the_generation_past_which_another_would_cross_it() {
        let goal = || Goal { measure: Measure::Loss, value: Box::new(|b: &Best| b.fitness) };
        let mut w = Watch::new(Budget { time_limit: Some(0.2), stop_at: None }, goal());
        let mut ended = None;
        for g in 0..1000 {
            std::thread::sleep(Duration::from_millis(30));
            if let Some(e) = w.finish(g, &best(1.0, 0)) {
                ended = Some((g, e));
                break;
            }
        }
        let (g, e) = ended.expect("the limit ends the run");
        let Ending::TimeLimit { seconds, generation, shorter_than_one, .. } = e else { panic!("{e:?}") };
        assert_eq!(generation, g);
        assert!(!shorter_than_one, "30 ms generations fit a 0.2 s limit");
        // Ends once a generation more would cross 0.2 s: after about 0.18 s (later only on a
        // machine too busy to keep its sleeps).
        assert!((0.1..1.0).contains(&seconds), "{seconds}");
        // A slow first generation (kernels compiled) does not end the run by itself.
        let mut w = Watch::new(Budget { time_limit: Some(0.3), stop_at: None }, goal());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(w.finish(0, &best(1.0, 0)), None);
        let mut never = Watch::new(Budget::default(), goal());
        assert_eq!(never.finish(0, &best(0.0, 0)), None);
    }

    #[test]
    fn a_limit_shorter_than_the_first_generation_says_so() {
        let goal = Goal { measure: Measure::Loss, value: Box::new(|b: &Best| b.fitness) };
        let mut w = Watch::new(Budget { time_limit: Some(0.05), stop_at: None }, goal);
        std::thread::sleep(Duration::from_millis(80));
        // A resumed run's first generation in this process is not generation 0.
        let e = w.finish(7, &best(1.0, 7)).expect("the first generation crossed the limit");
        let Ending::TimeLimit { generation: 7, shorter_than_one: true, .. } = e else { panic!("{e:?}") };
        let line = e.line(100).unwrap();
        assert!(line.contains("time limit 0.05 s is shorter than one generation") && line.contains("raise --time-limit"), "{line}");
        assert!(!line.contains('\n') || line.ends_with('\n') && line.matches('\n').count() == 1, "one line: {line}");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["shorter_than_one"], true);
        assert_eq!(json["reason"], "time-limit");
    }

    #[test]
    fn bad_budgets_are_refused_with_their_flag() {
        for t in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e12] {
            let e = Budget { time_limit: Some(t), stop_at: None }.check(Measure::Loss).unwrap_err().to_string();
            assert!(e.contains("--time-limit (budget.time_limit)"), "{e}");
        }
        let e = Budget { time_limit: None, stop_at: Some(f64::NAN) }.check(Measure::Return).unwrap_err().to_string();
        assert!(e.contains("--stop-at"), "{e}");
        let e = Budget { time_limit: None, stop_at: Some(1.5) }.check(Measure::Accuracy).unwrap_err().to_string();
        assert!(e.contains("accuracy, in [0, 1], got 1.5"), "{e}");
        assert!(Budget { time_limit: Some(2.0), stop_at: Some(-3.0) }.check(Measure::Return).is_ok());
    }
}
