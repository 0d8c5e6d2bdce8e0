//! `grove classify`: a classifier (one output per class, argmax) for a labelled data set.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, ChoiceArgs, EngineArgs, EngineHelp, FitArgs, GeArgs, IslandArgs, RunFlags};
use crate::task::classify::{ClassFitness, ClassifySettings, default_fit};
use crate::task::base::defaults;
use crate::task::runner::experiment::Experiment;
use crate::task::base::search::ClassTreeSettings;

/// The engine group's defaults and help in `grove classify`.
#[derive(Debug)]
pub struct Classify;

impl EngineHelp for Classify {
    const DEFAULTS: defaults::EngineDefaults = defaults::CLASSIFY;
    const SEED: &'static str = "Random seed (of evolution and of the train/test split)";
}

/// `grove classify`.
#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Data: `builtin:NAME` (iris, wine, breast_cancer, digits) or a CSV / tab-separated file
    /// with a header and a column of class labels (integers or names).
    #[arg(long, default_value = defaults::CLASSIFY_DATA)]
    pub data: String,
    /// The class label column (default: the last column).
    #[arg(long)]
    pub label: Option<String>,
    /// Grammar for grammatical evolution (with `out(K, EXPR)` output nodes, e.g.
    /// grammars/classify.bnf).
    #[arg(long, short, conflicts_with = "functions")]
    pub grammar: Option<PathBuf>,
    /// Function set for tree GP with random output nodes (the default without --grammar).
    #[arg(long, default_value = defaults::FUNCTIONS)]
    pub functions: String,
    /// An operator of your own, usable in --functions and grammars (repeatable), e.g.
    /// --define "softsign(x) = x / (1 + abs(x))": a body over the built-ins (+ - * /, calls such
    /// as abs, sin, np.exp), the parameters (one or two), numbers and the operators defined before.
    #[arg(long = "define", value_name = "DEFINITION")]
    pub define: Vec<String>,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten)]
    pub engine: EngineArgs<Classify>,
    /// Fraction of each class held out for testing (stratified split).
    #[arg(long, default_value_t = defaults::CLASSIFY_TEST_FRACTION)]
    pub test_fraction: f64,
    /// What evolution minimises.
    #[arg(long, value_enum, default_value_t = ClassFitness::default())]
    pub fitness: ClassFitness,
    /// Two classes only: one output, class 1 (the second in sorted order) where it is positive.
    #[arg(long)]
    pub binary: bool,
    /// Linear terms of the (standardised) inputs added to each output, fitted by multinomial
    /// logistic regression before the search, so evolution adds what a linear classifier cannot
    /// say: auto keeps them where their 5-fold cross-validated cross-entropy beats the class
    /// frequencies', without --optimise-constants.
    #[arg(long, value_enum, default_value_t = defaults::CLASSIFY_LINEAR_INPUTS)]
    pub linear_inputs: crate::task::base::model::LinearInputs,
    /// A head over K program outputs (1 to 8; 1 is the program's value): each class's logit is
    /// c + Σ a_k·f_k, fitted by least squares on one-hot targets during the search and by
    /// multinomial logistic regression for the returned model. 0 (default): one output per
    /// class, no head.
    #[arg(long, value_name = "K", default_value_t = defaults::CLASSIFY_OUTPUTS)]
    pub outputs: usize,
    /// Do not standardise the features (by default each is shifted and scaled by the training
    /// rows' mean and standard deviation, and the saved model repeats it).
    #[arg(long)]
    pub no_standardize: bool,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, default_value_t = defaults::CLASSIFY_P_OUT)]
    pub p_out: f32,
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

impl ClassifyArgs {
    /// The run's settings (as stored in the report).
    pub fn settings(&self) -> Result<ClassifySettings> {
        let ge = self.ge.configs();
        let e = &self.engine;
        let s = ClassifySettings {
            data: self.data.clone(),
            label: self.label.clone(),
            test_fraction: self.test_fraction,
            validation_fraction: self.choice.validation_fraction,
            select: self.choice.select,
            standardize: !self.no_standardize,
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: if self.grammar.is_some() { None } else { Some(self.functions.clone()) },
            operators: self.define.clone(),
            engine: e.config(&defaults::CLASSIFY, Some(&self.choice), self.fitting.config(e.device, default_fit)),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            fitness: self.fitness,
            binary: self.binary,
            linear_inputs: self.linear_inputs,
            outputs: self.outputs,
            parsimony: e.parsimony,
            trees: ClassTreeSettings { p_out: self.p_out, ..Default::default() },
            device: e.device,
            islands: self.islands.config(),
            budget: self.budget.config(),
        };
        s.check()?;
        Ok(s)
    }
}

/// Runs `grove classify`.
pub fn classify(args: &ClassifyArgs) -> Result<ExitCode> {
    super::run::run_experiment(Experiment::Classify(args.settings()?), &args.run, None)
}
