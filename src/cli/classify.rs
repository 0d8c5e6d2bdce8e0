//! `grove classify`: a classifier (one output per class, argmax) for a labelled data set.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, ChoiceArgs, EngineArgs, EngineHelp, FitArgs, GeArgs, IslandArgs, Overlay, RepresentationArgs, RepresentationHelp, RunFlags};
use crate::task::classify::{ClassFitness, ClassifySettings};
use crate::task::base::defaults;
use crate::task::runner::experiment::Experiment;

/// The engine and representation groups' defaults and help in `grove classify`.
#[derive(Debug)]
pub struct Classify;

impl EngineHelp for Classify {
    const DEFAULTS: defaults::EngineDefaults = defaults::CLASSIFY;
    const GPU_DEFAULTS: Option<defaults::EngineDefaults> = Some(defaults::CLASSIFY_GPU);
    const SEED: &'static str = "Random seed (of evolution and of the train/test split)";
}

impl RepresentationHelp for Classify {
    const GRAMMAR: &'static str = "Grammar for grammatical evolution (with `out(K, EXPR)` output nodes, e.g. grammars/classify.bnf)";
    const FUNCTIONS: &'static str = "Function set for tree GP with random output nodes (the default without --grammar)";
    const DEFAULT_FUNCTIONS: Option<&'static str> = Some(defaults::FUNCTIONS);
}

/// `grove classify`.
#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Data: `builtin:NAME` (iris, wine, breast_cancer, digits) or a CSV / tab-separated file
    /// with a header and a column of class labels (integers or names).
    #[arg(long, default_value = defaults::CLASSIFY_DATA, help_heading = "Data")]
    pub data: String,
    /// The class label column (default: the last column).
    #[arg(long, help_heading = "Data")]
    pub label: Option<String>,
    #[arg(long, help_heading = "Data", allow_negative_numbers = true, help = format!(
        "Fraction of each class held out for testing (stratified split; 0: no test rows), in [0, 1) [default: {}, or 0 with --test-data]",
        defaults::CLASSIFY_TEST_FRACTION
    ))]
    pub(crate) test_fraction: Option<f64>,
    /// A test file with the training data's columns (by name, in any order) and labels among its
    /// classes: its rows are scored beside the training rows, and the training data is not split.
    #[arg(long, value_name = "FILE", help_heading = "Data")]
    pub test_data: Option<String>,
    /// Do not standardise the features (by default each is shifted and scaled by the training
    /// rows' mean and standard deviation, and the saved model repeats it).
    #[arg(long, help_heading = "Data")]
    pub no_standardize: bool,
    /// Grammar or function set, operators of one's own.
    #[command(flatten, next_help_heading = "Representation")]
    pub representation: RepresentationArgs<Classify>,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, allow_negative_numbers = true, default_value_t = defaults::CLASSIFY_P_OUT, help_heading = "Representation")]
    pub p_out: f32,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten, next_help_heading = "Search")]
    pub engine: EngineArgs<Classify>,
    /// What evolution minimises.
    #[arg(long, value_enum, default_value_t = ClassFitness::default(), help_heading = "Model")]
    pub fitness: ClassFitness,
    /// Two classes only: one output, class 1 (the second in sorted order) where it is positive.
    #[arg(long, help_heading = "Model")]
    pub binary: bool,
    /// Linear terms of the (standardised) inputs added to each output, fitted by multinomial
    /// logistic regression before the search, so evolution adds what a linear classifier cannot
    /// say: auto keeps them where their 5-fold cross-validated cross-entropy beats the class
    /// frequencies', without --optimise-constants.
    #[arg(long, value_enum, default_value_t = defaults::CLASSIFY_LINEAR_INPUTS, help_heading = "Model")]
    pub linear_inputs: crate::task::base::model::LinearInputs,
    /// A head over K program outputs (1 to 8; 1 is the program's value): each class's logit is
    /// c + Σ a_k·f_k, fitted by least squares on one-hot targets during the search and by
    /// multinomial logistic regression for the returned model; 0: one output per class, no head.
    #[arg(long, value_name = "K", default_value_t = defaults::CLASSIFY_OUTPUTS, help_heading = "Model")]
    pub outputs: usize,
    /// Constant fitting.
    #[command(flatten, next_help_heading = "Constants")]
    pub fitting: FitArgs,
    /// Choosing the returned program, bloat control.
    #[command(flatten, next_help_heading = "Model choice")]
    pub choice: ChoiceArgs,
    /// Grammatical evolution settings.
    #[command(flatten, next_help_heading = "Grammatical evolution")]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten, next_help_heading = "Islands")]
    pub islands: IslandArgs,
    /// The run's budget.
    #[command(flatten, next_help_heading = "Budget")]
    pub budget: BudgetArgs,
    /// Results and how to run.
    #[command(flatten, next_help_heading = "Output and run")]
    pub run: RunFlags,
}

impl ClassifyArgs {
    /// The settings fields the flags give ([`Overlay`]).
    pub fn overlay(&self) -> Result<serde_json::Value> {
        let mut o = Overlay::default();
        o.set("data", &self.data);
        o.set("label", &self.label);
        o.number_some("--test-fraction", "test_fraction", self.test_fraction)?;
        o.set("test_data", &self.test_data);
        o.set("standardize", !self.no_standardize);
        self.representation.overlay(&mut o);
        o.number("--p-out", "trees.p_out", self.p_out.into())?;
        self.engine.overlay(&mut o, "parsimony")?;
        o.set("fitness", self.fitness);
        o.set("binary", self.binary);
        o.set("linear_inputs", self.linear_inputs);
        o.set("outputs", self.outputs);
        self.fitting.overlay(&mut o)?;
        self.choice.overlay(&mut o)?;
        self.ge.overlay(&mut o, self.representation.grammar.is_some())?;
        self.islands.overlay(&mut o);
        self.budget.overlay(&mut o)?;
        Ok(o.into_value())
    }

    /// The run's settings (as stored in the report): the flags laid over the defaults as an
    /// experiment file's fields are, checked.
    pub fn settings(&self) -> Result<ClassifySettings> {
        match Experiment::from_flags("classify", self.overlay()?, None)? {
            Experiment::Classify(s) => Ok(s),
            other => anyhow::bail!("grove classify made the settings of `{}`", other.command()),
        }
    }
}

/// Runs `grove classify`.
pub fn classify(args: &ClassifyArgs) -> Result<ExitCode> {
    super::run::run_experiment(Experiment::Classify(args.settings()?), &args.run, None, &[])
}
