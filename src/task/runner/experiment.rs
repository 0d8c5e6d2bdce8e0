//! Experiment files: one command's settings in a RON file (`grove run FILE.ron`), or the
//! `command` and `settings` of a run report (`grove run --from REPORT.json`).
//!
//! A file names the command and gives the settings it changes, e.g.
//!
//! ```ron
//! Evolve(
//!     data: "builtin:pagie1",
//!     functions: "add,sub,mul,div,sin,cos,tan",
//!     engine: (pop_size: 5000, generations: 100),
//! )
//! ```
//!
//! Fields are those of the settings a report stores ([`EvolveSettings`], [`ClassifySettings`],
//! [`ControlSettings`]); enum values are written as strings, spelled as on the command line
//! (`metric: "mae"`, `fitness: "cross-entropy"`). What a file leaves out takes the command
//! line's default, also inside a nested block (`engine: (pop_size: 5000)` keeps the command's
//! own `max_len`); control's population, generations and episodes default to `grove control`'s
//! on a GPU when the file says `device: "cuda"`, else to its CPU defaults (a file gives the
//! same settings on every machine). An unknown field is an error that names it with its path.
//! The command line takes the same road: `grove evolve`, `classify` and `control` turn their
//! flags into such fields and call [`Experiment::from_flags`], so every default is decided
//! here and in the settings' own defaults, once.
//! A new command is one more variant of [`Experiment`] plus its arm in each `match` here (the
//! compiler lists them), in [`COMMANDS`], and in `task::run::run_experiment`.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::task::classify::ClassifySettings;
use crate::task::control::ControlSettings;
use crate::task::regression::EvolveSettings;

/// One command's complete settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Experiment {
    /// `grove evolve`: symbolic regression.
    Evolve(EvolveSettings),
    /// `grove classify`: classification.
    Classify(ClassifySettings),
    /// `grove control`: a control policy for a simulated robot.
    Control(ControlSettings),
}

/// The commands an experiment can run, by the name a file or report uses.
pub const COMMANDS: &[(&str, &str)] = &[("Evolve", "evolve"), ("Classify", "classify"), ("Control", "control")];

impl Experiment {
    /// The command's name as a report stores it (`evolve`, `classify`, `control`).
    pub fn command(&self) -> &'static str {
        match self {
            Experiment::Evolve(_) => "evolve",
            Experiment::Classify(_) => "classify",
            Experiment::Control(_) => "control",
        }
    }

    /// The settings as JSON (the report's `settings`).
    pub fn settings_json(&self) -> Value {
        match self {
            Experiment::Evolve(s) => serde_json::to_value(s),
            Experiment::Classify(s) => serde_json::to_value(s),
            Experiment::Control(s) => serde_json::to_value(s),
        }
        .unwrap_or(Value::Null)
    }

    /// The command line's defaults for `command`, as JSON (the CPU's: control's and classify's
    /// budgets, the constant fitting of evolve and classify).
    pub fn defaults(command: &str) -> Result<Value> {
        Self::defaults_on(command, false)
    }

    /// The command line's defaults for `command` on a GPU (`on_gpu`) or the CPU, as JSON:
    /// control's population, generations, episodes, random search and a residual's linear
    /// iterations ([`ControlSettings::cli_default`]), classify's population and generations
    /// ([`ClassifySettings::cli_default`]), and the constant fitting of evolve and classify
    /// (`regression::default_fit`, `classify::default_fit`).
    pub fn defaults_on(command: &str, on_gpu: bool) -> Result<Value> {
        let mut v = match command {
            "evolve" => serde_json::to_value(EvolveSettings::cli_default())?,
            "classify" => serde_json::to_value(ClassifySettings::cli_default(on_gpu))?,
            "control" => serde_json::to_value(ControlSettings::cli_default(on_gpu))?,
            other => bail!(
                "unknown command `{other}`: an experiment is one of {}",
                COMMANDS.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
            ),
        };
        let fit = match command {
            "evolve" => Some(crate::task::regression::default_fit(on_gpu)),
            "classify" => Some(crate::task::classify::default_fit(on_gpu)),
            _ => None,
        };
        if let Some(fit) = fit {
            v["engine"]["constants"] = serde_json::to_value(fit)?;
        }
        Ok(v)
    }

    /// Whether the fields `given` for `command` are laid over a GPU's defaults when the
    /// source does not say ([`Self::from_parts`]): for control, where they name `device:
    /// "cuda"` (so a file gives the same settings on every machine); for evolve and classify,
    /// whose constant fitting differs (and classify's population and generations), where the
    /// run will have a GPU
    /// ([`crate::backend::DeviceChoice::has_gpu`]: `auto` asks the driver).
    pub fn gpu_defaults(command: &str, given: &Value) -> bool {
        let device: Option<crate::backend::DeviceChoice> = given.get("device").and_then(|d| serde_json::from_value(d.clone()).ok());
        match command {
            "control" => device == Some(crate::backend::DeviceChoice::Cuda),
            _ => device.unwrap_or_default().has_gpu(),
        }
    }

    /// Builds the settings of `command` from `given` laid over the command's defaults (a GPU's
    /// as [`Self::gpu_defaults`] says), then checks them. `origin` names the source in errors.
    pub fn from_parts(command: &str, given: Value, origin: &str) -> Result<Experiment> {
        let on_gpu = Self::gpu_defaults(command, &given);
        Self::laid_over(command, given, on_gpu, Some(origin))
    }

    /// The settings of a command line: `given`, the fields its flags set, laid over the
    /// command's defaults as an experiment file's are ([`Self::from_parts`]), those of a GPU
    /// where `on_gpu` says (`None`: as [`Self::gpu_defaults`] says; `grove control` passes
    /// whether the device it opened is a GPU), then checked. The errors are the checks' own,
    /// which name the flags.
    pub fn from_flags(command: &str, given: Value, on_gpu: Option<bool>) -> Result<Experiment> {
        let on_gpu = on_gpu.unwrap_or_else(|| Self::gpu_defaults(command, &given));
        Self::laid_over(command, given, on_gpu, None)
    }

    /// `given` laid over the defaults of `command` on a GPU (`on_gpu`) or the CPU, checked;
    /// errors name `origin` (`None`: the command line, whose checks name the flags).
    fn laid_over(command: &str, given: Value, on_gpu: bool, origin: Option<&str>) -> Result<Experiment> {
        let name = origin.unwrap_or("the command line");
        let bad = |e: anyhow::Error| match origin {
            Some(o) => e.context(format!("{o}: bad settings")),
            None => e,
        };
        let mut merged = Self::defaults_on(command, on_gpu)?;
        anyhow::ensure!(given.is_object(), "{name}: the settings must be a block of `name: value` fields");
        // As on the command line, a run given a grammar has no default function set.
        if matches!(command, "evolve" | "classify" | "control") && given.get("grammar").is_some_and(|g| !g.is_null()) && given.get("functions").is_none() {
            merged["functions"] = Value::Null;
        }
        // A test file of its own replaces the split a test fraction makes: where the fraction
        // is not given, it is 0 (classify's default holds a quarter out).
        if matches!(command, "evolve" | "classify") && given.get("test_data").is_some_and(|t| !t.is_null()) && given.get("test_fraction").is_none() {
            merged["test_fraction"] = serde_json::json!(0.0);
        }
        if command == "control" {
            // `grove control` requires --env; a file names it too.
            anyhow::ensure!(
                given.get("env").is_some_and(Value::is_string),
                "{name}: a control experiment names its environment, e.g. `Control(env: \"hopper\", ...)` (swimmer, hopper, walker2d, half_cheetah or a .ron path)"
            );
            crate::task::control::top_by_share(&mut merged, &given);
            if on_gpu {
                crate::task::control::searches_by_default(&mut merged, &given);
            }
        }
        let normalise = given.get("normalise").cloned();
        crate::task::base::search::merge(&mut merged, given);
        if command == "control" {
            crate::task::control::resolve_normalise(&mut merged, normalise.as_ref()).map_err(bad)?;
        }
        let exp = match command {
            "evolve" => Experiment::Evolve(strict(merged, name)?),
            "classify" => Experiment::Classify(strict(merged, name)?),
            _ => Experiment::Control(strict(merged, name)?),
        };
        exp.check().map_err(bad)?;
        Ok(exp)
    }

    /// The files the run reads, each by the flag that names it: `--data` (a file, not a
    /// `builtin:` problem), `--grammar` (a file, not grammar text) and `--env` (a `.ron` file,
    /// not a shipped environment).
    pub fn input_files(&self) -> Vec<crate::report::files::Named> {
        let mut out = Vec::new();
        for (role, spec) in self.input_specs() {
            if let Some(path) = input_path(role, spec) {
                out.push(crate::report::files::Named::new(format!("{role} file"), path));
            }
        }
        out
    }

    /// The settings that name an input, each with its flag, whatever they hold.
    fn input_specs(&self) -> Vec<(&'static str, &String)> {
        let mut out = Vec::new();
        match self {
            Experiment::Evolve(s) => out.push(("--data", &s.data)),
            Experiment::Classify(s) => out.push(("--data", &s.data)),
            Experiment::Control(s) => out.push(("--env", &s.env)),
        }
        let grammar = match self {
            Experiment::Evolve(s) => &s.grammar,
            Experiment::Classify(s) => &s.grammar,
            Experiment::Control(s) => &s.grammar,
        };
        if let Some(g) = grammar {
            out.push(("--grammar", g));
        }
        out
    }

    /// The settings that name an input, to change (as [`Self::input_specs`]).
    fn input_specs_mut(&mut self) -> Vec<(&'static str, &mut String)> {
        let (first, grammar) = match self {
            Experiment::Evolve(s) => (("--data", &mut s.data), &mut s.grammar),
            Experiment::Classify(s) => (("--data", &mut s.data), &mut s.grammar),
            Experiment::Control(s) => (("--env", &mut s.env), &mut s.grammar),
        };
        let mut out = vec![first];
        if let Some(g) = grammar.as_mut() {
            out.push(("--grammar", g));
        }
        out
    }

    /// Names each input by the path given for its flag (`("--data", "/abs/d.csv")`), as a
    /// checkpoint's record of its inputs gives them.
    pub fn set_input_paths<'p>(&mut self, paths: impl Iterator<Item = (&'p str, &'p std::path::Path)>) {
        let paths: Vec<(&str, &std::path::Path)> = paths.collect();
        for (role, spec) in self.input_specs_mut() {
            if let Some((_, p)) = paths.iter().find(|(r, _)| *r == role) {
                *spec = p.display().to_string();
            }
        }
    }

    /// These settings with every input file named by its absolute path (as a checkpoint keeps
    /// them, so that a run resumed from another directory reads the same files).
    pub fn with_absolute_inputs(mut self) -> Experiment {
        for (role, spec) in self.input_specs_mut() {
            if let Some(path) = input_path(role, spec) {
                if let Ok(abs) = std::path::absolute(&path) {
                    *spec = abs.display().to_string();
                }
            }
        }
        self
    }

    /// Checks the settings' values (what clap cannot: ranges, combinations).
    pub fn check(&self) -> Result<()> {
        match self {
            Experiment::Evolve(s) => s.check(),
            Experiment::Classify(s) => s.check(),
            Experiment::Control(s) => s.check(),
        }
    }

    /// The run's own operators (`--define`, `operators`).
    pub fn operators(&self) -> &[String] {
        match self {
            Experiment::Evolve(s) => &s.operators,
            Experiment::Classify(s) => &s.operators,
            Experiment::Control(s) => &s.operators,
        }
    }

    /// Where the run evaluates.
    pub fn device_mut(&mut self) -> &mut crate::backend::DeviceChoice {
        match self {
            Experiment::Evolve(s) => &mut s.device,
            Experiment::Classify(s) => &mut s.device,
            Experiment::Control(s) => &mut s.device,
        }
    }

    /// The evolution settings every command has.
    pub fn engine(&self) -> &crate::evolve::EngineConfig {
        match self {
            Experiment::Evolve(s) => &s.engine,
            Experiment::Classify(s) => &s.engine,
            Experiment::Control(s) => &s.engine,
        }
    }

    /// The island settings every command has.
    pub fn islands(&self) -> &crate::evolve::IslandConfig {
        match self {
            Experiment::Evolve(s) => &s.islands,
            Experiment::Classify(s) => &s.islands,
            Experiment::Control(s) => &s.islands,
        }
    }

    /// Grammatical evolution's genome capacity (codons a genome holds), which every command has.
    pub fn genome_capacity(&self) -> usize {
        match self {
            Experiment::Evolve(s) => s.genome_capacity,
            Experiment::Classify(s) => s.genome_capacity,
            Experiment::Control(s) => s.genome_capacity,
        }
    }

    /// The island settings every command has, to change.
    pub fn islands_mut(&mut self) -> &mut crate::evolve::IslandConfig {
        match self {
            Experiment::Evolve(s) => &mut s.islands,
            Experiment::Classify(s) => &mut s.islands,
            Experiment::Control(s) => &mut s.islands,
        }
    }

    /// The budget every command has, to change.
    pub fn budget_mut(&mut self) -> &mut crate::task::base::budget::Budget {
        match self {
            Experiment::Evolve(s) => &mut s.budget,
            Experiment::Classify(s) => &mut s.budget,
            Experiment::Control(s) => &mut s.budget,
        }
    }

    /// The evolution settings every command has, to change.
    pub fn engine_mut(&mut self) -> &mut crate::evolve::EngineConfig {
        match self {
            Experiment::Evolve(s) => &mut s.engine,
            Experiment::Classify(s) => &mut s.engine,
            Experiment::Control(s) => &mut s.engine,
        }
    }
}

/// The file an input setting `spec` names, if it names one: `--data` unless `builtin:…`,
/// `--grammar` unless it is grammar text (holding `::=`), `--env` unless a shipped name.
fn input_path(role: &str, spec: &str) -> Option<std::path::PathBuf> {
    let file = match role {
        "--data" => !spec.starts_with("builtin:") && !spec.is_empty(),
        "--grammar" => !spec.contains("::="),
        _ => !crate::sim::spec::SHIPPED.iter().any(|(n, _)| *n == spec),
    };
    file.then(|| std::path::PathBuf::from(spec))
}

/// Deserialises settings, naming the path of a bad or unknown field.
fn strict<T: serde::de::DeserializeOwned>(v: Value, origin: &str) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // RON's NaN and infinities reach the settings as JSON's null.
        let number = ["expected f64", "expected f32", "expected a number"].iter().any(|t| inner.contains(t));
        let hint = if inner.contains("invalid type: null") && number {
            " (NaN or an infinity: give a finite number)"
        } else if inner.contains("invalid type: null") || inner.contains("invalid type: unit") {
            " (write enum values as strings, e.g. metric: \"mae\")"
        } else {
            ""
        };
        anyhow::anyhow!("{origin}: field `{path}`: {inner}{hint}")
    })
}

/// Sets `path` (`engine.pop_size`) in `v` to `value`, creating blocks on the way.
pub fn set_path(v: &mut Value, path: &str, value: Value) -> Result<()> {
    let mut at = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        anyhow::ensure!(!p.is_empty(), "`{path}` is not a field path (write e.g. engine.pop_size)");
        let obj = at.as_object_mut().with_context(|| format!("`{}` is not a block of fields", parts[..i].join(".")))?;
        if i + 1 == parts.len() {
            obj.insert(p.to_string(), value);
            return Ok(());
        }
        at = obj.entry(p.to_string()).or_insert_with(|| Value::Object(Default::default()));
    }
    Ok(())
}

/// Skips whitespace, comments and `#![...]` attributes at the start of RON text.
fn skip_preamble(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix("//") {
            s = r.split_once('\n').map_or("", |x| x.1);
        } else if let Some(r) = s.strip_prefix("/*") {
            s = r.split_once("*/").map_or("", |x| x.1);
        } else if let Some(r) = s.strip_prefix("#![") {
            s = r.split_once(']').map_or("", |x| x.1);
        } else {
            return s;
        }
    }
}

/// Reads an experiment from RON text: `Command(field: value, ...)`.
pub fn parse_ron(text: &str, origin: &str) -> Result<(String, Value)> {
    let body = skip_preamble(text);
    let name: String = body.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let Some(&(_, command)) = COMMANDS.iter().find(|c| c.0 == name) else {
        bail!(
            "{origin}: an experiment file starts with the command, one of {} (e.g. `Evolve(data: \"builtin:pagie1\", ...)`), not `{}`",
            COMMANDS.iter().map(|c| c.0).collect::<Vec<_>>().join(", "),
            body.chars().take(20).collect::<String>().lines().next().unwrap_or("")
        );
    };
    let opts = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
    let value: Value = opts.from_str(text).map_err(|e| anyhow::anyhow!("{origin}:{e}"))?;
    // `Evolve()` reads as unit or an empty tuple.
    let empty = value.is_null() || value.as_array().is_some_and(|a| a.is_empty());
    let value = if empty { Value::Object(Default::default()) } else { value };
    Ok((command.to_string(), value))
}

/// Loads an experiment file.
pub fn load_ron(path: &std::path::Path) -> Result<(String, Value)> {
    let text = crate::input::read_text(path, "the experiment file", crate::input::EXPERIMENT_BYTES)?;
    parse_ron(&text, &path.display().to_string())
}

/// Reads the `command` and `settings` of a run report.
pub fn load_report(path: &std::path::Path) -> Result<(String, Value)> {
    let text = crate::input::read_text(path, "the report", crate::input::REPORT_BYTES)?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not a JSON report", path.display()))?;
    anyhow::ensure!(
        v.get("grove_checkpoint").is_none(),
        "{} is a checkpoint, not a report: continue it with `grove run --resume {}`",
        path.display(),
        path.display()
    );
    let command = v.get("command").and_then(Value::as_str).with_context(|| {
        format!(
            "{} has no `command`: give a report written by `grove evolve`, `classify`, `control` or `run` with --report",
            path.display()
        )
    })?;
    let settings = v.get("settings").cloned().with_context(|| format!("{} has no `settings`", path.display()))?;
    Ok((command.to_string(), settings))
}

/// What `grove run` changes in the settings it reads: `--pop`, `--gens`, `--seed`, `--data`,
/// `--device` and each `--set FIELD=VALUE`.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `engine.pop_size`.
    pub pop: Option<usize>,
    /// `engine.generations` (a resumed run may run longer or shorter).
    pub gens: Option<usize>,
    /// `engine.seed`.
    pub seed: Option<u64>,
    /// `data`.
    pub data: Option<String>,
    /// `device` (a resumed run may change it).
    pub device: Option<crate::backend::DeviceChoice>,
    /// `islands.count` (a resumed run must keep its own).
    pub islands: Option<usize>,
    /// `islands.gpus` (a resumed run may change it).
    pub gpus: Option<crate::evolve::islands::Gpus>,
    /// `islands.link` (a resumed run may change it).
    pub link: Option<crate::evolve::islands::GpuLink>,
    /// `FIELD=VALUE` settings, the value read as JSON, else as text.
    pub set: Vec<String>,
    /// Input files a resumed run may find changed (`--accept-changed`: a path or a flag such
    /// as `--data`).
    pub accept_changed: Vec<std::path::PathBuf>,
}

/// The experiment of a checkpoint, with the overrides a resumed run allows (`gens`,
/// `device`, the GPUs), checked, its input files checked against the checkpoint's record
/// ([`crate::task::runner::checkpoint::Checkpoint::check_inputs`]; `o.accept_changed` lets a
/// changed one through); the checkpoint; and the notes to show.
pub fn resume(path: &std::path::Path, o: &Overrides) -> Result<(Experiment, crate::task::runner::checkpoint::Checkpoint, Vec<String>)> {
    let c = crate::task::runner::checkpoint::Checkpoint::load(path)?;
    anyhow::ensure!(
        o.pop.is_none() && o.seed.is_none() && o.data.is_none() && o.set.is_empty(),
        "--resume continues a run with its own settings: drop --pop, --seed, --data and --set (--gens and --device may change)"
    );
    let (mut exp, notes) = c.check_inputs(&path.display().to_string(), &o.accept_changed)?;
    if let Some(g) = o.gens {
        exp.engine_mut().generations = g;
    }
    if let Some(d) = o.device {
        *exp.device_mut() = d;
    }
    if let Some(n) = o.islands {
        crate::evolve::islands::check_resume(&crate::evolve::IslandConfig { count: n, ..exp.islands().clone() }, c.run.state.islands)?;
    }
    if let Some(g) = &o.gpus {
        exp.islands_mut().gpus = g.clone();
    }
    if let Some(l) = o.link {
        exp.islands_mut().link = l;
    }
    exp.check()?;
    Ok((exp, c, notes))
}

/// An error line for an experiment file's block that its representation has no use for, as
/// the command line refuses GE's flags without a grammar: GE's genome blocks (`map`, `init`,
/// `vary`, `genome_capacity`) where the file names no grammar (tree GP, whose rates are
/// `trees.p_crossover` and `trees.p_mutation`), and tree GP's `trees` where it names one. A
/// report's settings (`--from`) hold every block whatever ran, so only files are checked.
pub fn blocks_of_the_representation(command: &str, given: &Value, origin: &str) -> Result<()> {
    if !matches!(command, "evolve" | "classify" | "control") {
        return Ok(());
    }
    let given_block = |name: &str| given.get(name).is_some_and(|v| !v.is_null());
    let listed = |names: Vec<&str>| names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if given.get("grammar").is_some_and(|g| !g.is_null()) {
        anyhow::ensure!(
            !given_block("trees"),
            "{origin}: `trees` holds tree GP's settings, and this experiment has a grammar: grammatical evolution's crossover and mutation are `vary`, its initialisation `init`, its mapping limits `map`"
        );
    } else {
        let ge: Vec<&str> = ["map", "init", "vary", "genome_capacity"].into_iter().filter(|n| given_block(n)).collect();
        anyhow::ensure!(
            ge.is_empty(),
            "{origin}: {} {} grammatical evolution's genome, and this experiment has no grammar: tree GP (`functions`) has no genome to map, initialise or vary (its rates are `trees.p_crossover` and `trees.p_mutation`, its depths `trees.init_depth`)",
            listed(ge.clone()),
            if ge.len() == 1 { "is a setting of" } else { "are settings of" }
        );
    }
    Ok(())
}

/// The experiment of an experiment file (`file`) or of a report's settings (`from`), with
/// the overrides laid over it, checked.
pub fn from_source(file: Option<&std::path::Path>, from: Option<&std::path::Path>, o: &Overrides) -> Result<Experiment> {
    use serde_json::json;
    let (command, mut given, origin) = match (file, from) {
        (Some(f), _) => {
            let (c, v) = load_ron(f)?;
            (c, v, f.display().to_string())
        }
        (None, Some(r)) => {
            let (c, v) = load_report(r)?;
            (c, v, r.display().to_string())
        }
        (None, None) => bail!("give an experiment file (e.g. grove run examples/w1-pagie1.ron), --from REPORT.json or --resume CHECKPOINT"),
    };
    if file.is_some() {
        blocks_of_the_representation(&command, &given, &origin)?;
    }
    anyhow::ensure!(
        !(command == "control" && o.data.is_some()),
        "--data does not apply to a control experiment: its environment is `env` (e.g. --set env=hopper)"
    );
    let overrides: [(&str, Option<Value>); 8] = [
        ("engine.pop_size", o.pop.map(|v| json!(v))),
        ("engine.generations", o.gens.map(|v| json!(v))),
        ("engine.seed", o.seed.map(|v| json!(v))),
        ("data", o.data.as_ref().map(|v| json!(v))),
        ("device", o.device.map(|v| json!(v))),
        ("islands.count", o.islands.map(|v| json!(v))),
        ("islands.gpus", o.gpus.as_ref().map(|v| json!(v.to_string()))),
        ("islands.link", o.link.map(|v| json!(v))),
    ];
    for (path, v) in overrides {
        if let Some(v) = v {
            set_path(&mut given, path, v)?;
        }
    }
    for s in &o.set {
        let (k, v) = s.split_once('=').with_context(|| format!("--set {s}: write FIELD=VALUE, e.g. --set engine.tournament=7"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        set_path(&mut given, k.trim(), value).with_context(|| format!("--set {s}"))?;
    }
    Experiment::from_parts(&command, given, &origin)
}
