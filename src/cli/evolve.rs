//! `grove evolve`: symbolic regression from a grammar or a function set.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, ChoiceArgs, EngineArgs, EngineHelp, FitArgs, GeArgs, IslandArgs, RunFlags};
use crate::task::base::defaults;
use crate::task::runner::experiment::Experiment;
use crate::task::regression::{EvolveSettings, RegressionConfig, TreeSettings, default_fit};

/// The engine group's defaults and help in `grove evolve`.
#[derive(Debug)]
pub struct Evolve;

impl EngineHelp for Evolve {
    const DEFAULTS: defaults::EngineDefaults = defaults::EVOLVE;
    const SEED: &'static str = "Random seed: the same seed repeats the run exactly, whatever the thread count";
}

/// `grove evolve`.
#[derive(Debug, Args)]
pub struct EvolveArgs {
    /// Data: `builtin:NAME[:N]` (pagie1, sextic, quartic, koza1, nguyen7, keijzer6,
    /// vladislavleva4) or a CSV / tab-separated file with a header.
    #[arg(long, default_value = defaults::EVOLVE_DATA)]
    pub data: String,
    /// Target column (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// Grammar for grammatical evolution.
    #[arg(long, short, conflicts_with = "functions")]
    pub grammar: Option<PathBuf>,
    /// Function set for tree GP without a grammar, e.g. add,sub,mul,div,sin.
    #[arg(long)]
    pub functions: Option<String>,
    /// An operator of your own, usable in --functions and grammars (repeatable), e.g.
    /// --define "softsign(x) = x / (1 + abs(x))": a body over the built-ins (+ - * /, calls such
    /// as abs, sin, np.exp), the parameters (one or two), numbers and the operators defined before.
    #[arg(long = "define", value_name = "DEFINITION")]
    pub define: Vec<String>,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten)]
    pub engine: EngineArgs<Evolve>,
    /// Fraction of rows held out as a test set (0: use the built-in's own test set, if any).
    #[arg(long, default_value_t = defaults::EVOLVE_TEST_FRACTION)]
    pub test_fraction: f64,
    /// Error to minimise.
    #[arg(long, value_enum, default_value_t = RegressionConfig::default().metric)]
    pub metric: crate::task::regression::Metric,
    /// Do not fit a·f(x)+b by least squares before scoring.
    #[arg(long)]
    pub no_linear_scaling: bool,
    /// Program outputs under a fitted linear head b + Σ w_k·f_k (least squares): 1 is the
    /// program's value; 2 to 8 are output slots (tree GP's output nodes, a grammar's out(K, …)).
    #[arg(long, default_value_t = defaults::EVOLVE_OUTPUTS)]
    pub outputs: usize,
    /// Linear terms of the inputs beside the program, c + Σ a_j·x_j, fitted together with each
    /// program's weight (inputs chosen by description length, ridge weights): auto keeps them
    /// where they predict unseen rows better than the mean (generalised cross-validation) and pay
    /// for their numbers, on the CPU (on a GPU, `on` evaluates on the CPU).
    #[arg(long, value_enum, default_value_t = defaults::EVOLVE_LINEAR_INPUTS)]
    pub linear_inputs: crate::task::regression::LinearInputs,
    /// Constant fitting.
    #[command(flatten)]
    pub fitting: FitArgs,
    /// Choosing the returned program, bloat control.
    #[command(flatten)]
    pub choice: ChoiceArgs,
    /// Grammatical evolution settings.
    #[command(flatten)]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten)]
    pub islands: IslandArgs,
    /// The run's budget.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Results and how to run.
    #[command(flatten)]
    pub run: RunFlags,
}

impl EvolveArgs {
    /// The run's settings (as stored in the report), checked.
    pub fn settings(&self) -> Result<EvolveSettings> {
        let ge = self.ge.configs();
        let e = &self.engine;
        let s = EvolveSettings {
            data: self.data.clone(),
            target: self.target.clone(),
            test_fraction: self.test_fraction,
            validation_fraction: self.choice.validation_fraction,
            select: self.choice.select,
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: self.functions.clone(),
            operators: self.define.clone(),
            engine: e.config(&defaults::EVOLVE, Some(&self.choice), self.fitting.config(e.device, default_fit)),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            regression: RegressionConfig { metric: self.metric, linear_scaling: !self.no_linear_scaling, parsimony: e.parsimony },
            outputs: self.outputs,
            linear_inputs: self.linear_inputs,
            trees: TreeSettings::default(),
            device: e.device,
            islands: self.islands.config(),
            budget: self.budget.config(),
        };
        s.check()?;
        Ok(s)
    }
}

/// Runs `grove evolve`.
pub fn evolve(args: &EvolveArgs) -> Result<ExitCode> {
    super::run::run_experiment(Experiment::Evolve(args.settings()?), &args.run, None)
}
