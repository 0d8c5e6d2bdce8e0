//! `grove evolve`: symbolic regression from a grammar or a function set.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, ChoiceArgs, EngineArgs, EngineHelp, FitArgs, GeArgs, IslandArgs, Overlay, RepresentationArgs, RepresentationHelp, RunFlags};
use crate::task::base::defaults;
use crate::task::runner::experiment::Experiment;
use crate::task::regression::{EvolveSettings, RegressionConfig};

/// The engine and representation groups' defaults and help in `grove evolve`.
#[derive(Debug)]
pub struct Evolve;

impl EngineHelp for Evolve {
    const DEFAULTS: defaults::EngineDefaults = defaults::EVOLVE;
    const SEED: &'static str = "Random seed: the same seed repeats the run exactly, whatever the thread count";
}

impl RepresentationHelp for Evolve {
    const GRAMMAR: &'static str = "Grammar for grammatical evolution";
    const FUNCTIONS: &'static str = "Function set for tree GP without a grammar, e.g. add,sub,mul,aq,sin";
    const DEFAULT_FUNCTIONS: Option<&'static str> = Some(defaults::EVOLVE_FUNCTIONS);
}

/// `grove evolve`.
#[derive(Debug, Args)]
pub struct EvolveArgs {
    /// Data: `builtin:NAME[:N]` (pagie1, sextic, quartic, koza1, nguyen7, keijzer6,
    /// vladislavleva4) or a CSV / tab-separated file with a header.
    #[arg(long, default_value = defaults::EVOLVE_DATA, help_heading = "Data")]
    pub data: String,
    /// Target column (default: the last column).
    #[arg(long, help_heading = "Data")]
    pub target: Option<String>,
    #[arg(long, help_heading = "Data", allow_negative_numbers = true, help = format!(
        "Fraction of rows held out as a test set, in [0, 1) (0: use the built-in's own test set, if any) [default: {}]",
        defaults::EVOLVE_TEST_FRACTION
    ))]
    pub(crate) test_fraction: Option<f64>,
    /// A test file with the training data's columns (by name, in any order): its rows are
    /// scored beside the training rows, and the training data is not split.
    #[arg(long, value_name = "FILE", help_heading = "Data")]
    pub test_data: Option<String>,
    /// Grammar or function set, operators of one's own.
    #[command(flatten, next_help_heading = "Representation")]
    pub representation: RepresentationArgs<Evolve>,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten, next_help_heading = "Search")]
    pub engine: EngineArgs<Evolve>,
    /// Error to minimise.
    #[arg(long, value_enum, default_value_t = RegressionConfig::default().metric, help_heading = "Model")]
    pub metric: crate::task::regression::Metric,
    /// Do not fit a·f(x)+b by least squares before scoring.
    #[arg(long, help_heading = "Model")]
    pub no_linear_scaling: bool,
    /// A per-row loss of your own to minimise instead of --metric: an expression of the
    /// prediction p and the target y, e.g. "abs(p - y)" or "log(cosh(p - y))" (grove's operators
    /// by any name, numbers, operators defined with --define, cosh and sinh), scored at the
    /// linearly scaled prediction a·f + b (a, b by least squares) unless --no-linear-scaling.
    #[arg(long, value_name = "EXPR", help_heading = "Model")]
    pub loss: Option<String>,
    /// How --loss's per-row values become the fitness: their mean or their sum.
    #[arg(long, value_enum, default_value_t = crate::task::regression::LossReduce::default(), help_heading = "Model")]
    pub loss_reduce: crate::task::regression::LossReduce,
    /// Program outputs under a fitted linear head b + Σ w_k·f_k (least squares): 1 is the
    /// program's value; 2 to 8 are output slots (tree GP's output nodes, a grammar's out(K, …)).
    #[arg(long, default_value_t = defaults::EVOLVE_OUTPUTS, help_heading = "Model")]
    pub outputs: usize,
    /// Linear terms of the inputs beside the program, c + Σ a_j·x_j, fitted together with each
    /// program's weight (inputs chosen by description length, ridge weights): auto keeps them
    /// where they predict unseen rows better than the mean (generalised cross-validation) and pay
    /// for their numbers, on the CPU and on a GPU (there the joint fit is scored on the device).
    #[arg(long, value_enum, default_value_t = defaults::EVOLVE_LINEAR_INPUTS, help_heading = "Model")]
    pub linear_inputs: crate::task::regression::LinearInputs,
    /// Limit the returned model's predictions to the training target's range widened by M times
    /// its width on each side (0: the range itself), so a formula cannot swing far outside
    /// what the data supports on unseen inputs [default: no limits]
    #[arg(long, value_name = "M", help_heading = "Model", allow_negative_numbers = true)]
    pub output_margin: Option<f64>,
    /// Constant fitting.
    #[command(flatten, next_help_heading = "Constants")]
    pub fitting: FitArgs,
    /// Choosing the returned program, bloat control.
    #[command(flatten, next_help_heading = "Model choice")]
    pub choice: ChoiceArgs,
    #[arg(long, value_name = "K", help_heading = "Model choice", help = format!(
        "Folds of --select cv (auto's rule below {} training rows: the whole fit repeated without each fold) and --select folds (each program on the front refitted without each fold) [default: {}, or one row a fold on fewer rows]",
        defaults::EVOLVE_VALIDATION_ROWS, defaults::FOLDS
    ))]
    pub(crate) folds: Option<usize>,
    /// Grammatical evolution settings.
    #[command(flatten, next_help_heading = "Grammatical evolution")]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten, next_help_heading = "Islands")]
    pub islands: IslandArgs,
    /// Split the training rows of one population over the GPUs --gpus chooses (data parallel,
    /// for data larger than one GPU; regression): each GPU sums its rows and the first adds the
    /// sums. Results depend on the number of GPUs; --device cpu computes the same.
    #[arg(long, help_heading = "Islands")]
    pub shard_rows: bool,
    /// The run's budget.
    #[command(flatten, next_help_heading = "Budget")]
    pub budget: BudgetArgs,
    /// Results and how to run.
    #[command(flatten, next_help_heading = "Output and run")]
    pub run: RunFlags,
}

impl EvolveArgs {
    /// The settings fields the flags give ([`Overlay`]).
    pub fn overlay(&self) -> Result<serde_json::Value> {
        let mut o = Overlay::default();
        o.set("data", &self.data);
        o.set("target", &self.target);
        o.number_some("--test-fraction", "test_fraction", self.test_fraction)?;
        o.set("test_data", &self.test_data);
        self.representation.overlay(&mut o);
        self.engine.overlay(&mut o, "regression.parsimony")?;
        o.set("regression.metric", self.metric);
        o.set("regression.linear_scaling", !self.no_linear_scaling);
        o.set_some("loss", self.loss.as_ref());
        o.set("loss_reduce", self.loss_reduce);
        o.set("outputs", self.outputs);
        o.set("linear_inputs", self.linear_inputs);
        o.number_some("--output-margin", "output_margin", self.output_margin)?;
        self.fitting.overlay(&mut o)?;
        self.choice.overlay(&mut o)?;
        o.set_some("folds", self.folds);
        self.ge.overlay(&mut o, self.representation.grammar.is_some())?;
        self.islands.overlay(&mut o);
        o.set("islands.shard_rows", self.shard_rows);
        self.budget.overlay(&mut o)?;
        Ok(o.into_value())
    }

    /// The run's settings (as stored in the report): the flags laid over the defaults as an
    /// experiment file's fields are, checked.
    pub fn settings(&self) -> Result<EvolveSettings> {
        match Experiment::from_flags("evolve", self.overlay()?, None)? {
            Experiment::Evolve(s) => Ok(s),
            other => anyhow::bail!("grove evolve made the settings of `{}`", other.command()),
        }
    }
}

/// Runs `grove evolve`.
pub fn evolve(args: &EvolveArgs) -> Result<ExitCode> {
    super::run::run_experiment(Experiment::Evolve(args.settings()?), &args.run, None, &[])
}
