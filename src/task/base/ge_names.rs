//! Grammatical evolution's settings as a user names them, on the command line (`--init
//! pi-grow`, `--mutation int-flip:1/used`) and from Python (`init="pi-grow"`,
//! `mutation="int-flip:1/used"`): each setting given or not ([`GeChoices`]), read into GE's
//! configs where the run has a grammar, and, where it has none (tree GP), a crossover or
//! mutation probability read as the trees' rate and every other setting refused, since tree GP
//! has no genome. Both front ends share it, so they accept and refuse the same values with the
//! same words; `prefix` is how a front end writes a setting's name (`--` on the command line,
//! nothing in Python).

use anyhow::Result;

use super::defaults::{self, GeConfigs};
use crate::genome::vary::{GeCrossover, GeMutation, IntFlipRate};

/// The settings of GE a user gave; `None`: [`defaults::GE`]'s.
#[derive(Clone, Debug, Default)]
pub struct GeChoices {
    /// Extra passes over the genome.
    pub wraps: Option<u32>,
    /// Codon use at single-production rules.
    pub codons: Option<crate::genome::Codons>,
    /// Largest derivation depth.
    pub max_depth: Option<u32>,
    /// Initialisation.
    pub init: Option<crate::genome::InitMethod>,
    /// Smallest and largest depth of the initial ramp.
    pub init_depth: Option<(u32, u32)>,
    /// Genome length of random initialisation.
    pub genome_length: Option<usize>,
    /// Longest genome crossover may make.
    pub genome_capacity: Option<usize>,
    /// A probability, or `onepoint[:P]` or `subtree[:P]`.
    pub crossover: Option<String>,
    /// A probability, or `int-flip[:P|:1/used|:max(P,1/used)]` or `subtree[:P]`.
    pub mutation: Option<String>,
    /// How a derivation becomes a program.
    pub reading: Option<crate::grammar::template::Reading>,
}

/// Tree GP's two rates where given (`--crossover P`, `--mutation P` without a grammar).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeRates {
    /// `trees.p_crossover`.
    pub crossover: Option<f32>,
    /// `trees.p_mutation`.
    pub mutation: Option<f32>,
}

impl GeChoices {
    /// GE's configs: each setting given, else the default; an error line for a crossover or
    /// mutation that does not parse (the ranges are the settings' check, `search::check_ge`).
    pub fn configs(&self, prefix: &str) -> Result<GeConfigs> {
        let d = &defaults::GE;
        let (crossover_op, crossover) = match &self.crossover {
            Some(s) => parse_crossover(&format!("{prefix}crossover"), s)?,
            None => (d.crossover_op, d.crossover),
        };
        let (mutation_op, mutation, int_flip_rate) = match &self.mutation {
            Some(s) => parse_mutation(&format!("{prefix}mutation"), s)?,
            None => (d.mutation_op, d.mutation, d.int_flip_rate),
        };
        let genome_length = self.genome_length.unwrap_or(d.genome_length);
        Ok(defaults::Ge {
            wraps: self.wraps.unwrap_or(d.wraps),
            codons: self.codons.unwrap_or(d.codons),
            max_depth: self.max_depth.unwrap_or(d.max_depth),
            init: self.init.unwrap_or(d.init),
            init_depth: self.init_depth.unwrap_or(d.init_depth),
            genome_length,
            // Given, it is checked against the length; not given, it makes room for it.
            genome_capacity: self.genome_capacity.unwrap_or(d.genome_capacity.max(genome_length)),
            crossover,
            mutation,
            crossover_op,
            mutation_op,
            int_flip_rate,
            reading: self.reading.unwrap_or(d.reading),
        }
        .configs())
    }

    /// The settings of GE's genome given (every one but the two rates), as `prefix` names
    /// them (`--init`, or `init` from Python).
    pub fn genome_settings(&self, prefix: &str) -> Vec<String> {
        let given = [
            ("wraps", self.wraps.is_some()),
            ("codons", self.codons.is_some()),
            ("max-depth", self.max_depth.is_some()),
            ("init", self.init.is_some()),
            ("init-depth", self.init_depth.is_some()),
            ("genome-length", self.genome_length.is_some()),
            ("genome-capacity", self.genome_capacity.is_some()),
            ("reading", self.reading.is_some()),
        ];
        let spell = |name: &str| if prefix.is_empty() { name.replace('-', "_") } else { format!("{prefix}{name}") };
        given.into_iter().filter(|g| g.1).map(|g| spell(g.0)).collect()
    }

    /// For a run without a grammar (tree GP): the crossover and mutation probabilities given,
    /// which are the trees' rates; an error line for an operator's name there, or for any other
    /// setting of GE, which tree GP has no genome to use. `what` names the setting (`flag` or
    /// `setting`, as the front end calls them).
    pub fn tree_rates(&self, prefix: &str, what: &str) -> Result<TreeRates> {
        let given = self.genome_settings(prefix);
        let grammar = format!("{prefix}grammar");
        let functions = if prefix.is_empty() { "function_set" } else { "--functions" };
        anyhow::ensure!(
            given.is_empty(),
            "{} {} of grammatical evolution, and this run has no {grammar}: tree GP ({functions}) has no genome to map, initialise or wrap (its trees are set by {})",
            given.join(", "),
            if given.len() == 1 { format!("is a {what}") } else { format!("are {what}s") },
            if prefix.is_empty() { "max_length" } else { "--max-len and the experiment's trees block" }
        );
        let rate = |name: &str, field: &str, value: &Option<String>| -> Result<Option<f32>> {
            let Some(value) = value else { return Ok(None) };
            let Ok(p) = value.trim().parse::<f32>() else {
                anyhow::bail!(
                    "{prefix}{name} `{value}` names an operator of grammatical evolution, and this run has no {grammar} (tree GP takes a probability here, its trees.{field})"
                );
            };
            // Checked here: a JSON field would carry a NaN as null. The range is the settings'
            // check (`search::check_tree_rates`), as for an experiment file.
            anyhow::ensure!(p.is_finite(), "{prefix}{name} (trees.{field}) must be a finite number, got {value}");
            Ok(Some(p))
        };
        Ok(TreeRates { crossover: rate("crossover", "p_crossover", &self.crossover)?, mutation: rate("mutation", "p_mutation", &self.mutation)? })
    }
}

/// A crossover's value: a probability, or `onepoint`/`subtree` with an optional `:P`.
pub fn parse_crossover(flag: &str, s: &str) -> Result<(GeCrossover, f32)> {
    if let Ok(p) = s.trim().parse::<f32>() {
        return Ok((defaults::GE.crossover_op, p));
    }
    let (name, rate) = split_rate(s);
    let op = match name {
        "onepoint" => GeCrossover::Onepoint,
        "subtree" => GeCrossover::Subtree,
        _ => anyhow::bail!("{flag} `{s}`: expected a probability or onepoint[:P] or subtree[:P]"),
    };
    Ok((op, rate.map(|r| rate_number(flag, s, r)).transpose()?.unwrap_or(defaults::GE.crossover)))
}

/// The default mutation, as a user writes it (`int-flip:max(0.02,1/used)`).
pub fn default_mutation() -> String {
    let p = defaults::GE.mutation;
    match (defaults::GE.mutation_op, defaults::GE.int_flip_rate) {
        (GeMutation::Subtree, _) => format!("subtree:{p}"),
        (GeMutation::IntFlip, IntFlipRate::Fixed) => format!("int-flip:{p}"),
        (GeMutation::IntFlip, IntFlipRate::PerUsed) => "int-flip:1/used".into(),
        (GeMutation::IntFlip, IntFlipRate::AtLeastPerUsed) => format!("int-flip:max({p},1/used)"),
    }
}

/// A mutation's value: a probability (int-flip's), or `int-flip` with an optional `:P`,
/// `:1/used` or `:max(P,1/used)`, or `subtree` with an optional `:P`. Returns the operator, the
/// rate and how int-flip's rate follows the used codons.
pub fn parse_mutation(flag: &str, s: &str) -> Result<(GeMutation, f32, IntFlipRate)> {
    if let Ok(p) = s.trim().parse::<f32>() {
        return Ok((GeMutation::IntFlip, p, IntFlipRate::Fixed));
    }
    let (name, rate) = split_rate(s);
    let at_least = rate.and_then(|r| r.strip_prefix("max(")).and_then(|r| r.strip_suffix(')'));
    match (name, rate) {
        ("int-flip", Some("1/used")) => Ok((GeMutation::IntFlip, defaults::GE.mutation, IntFlipRate::PerUsed)),
        ("int-flip", Some(_)) if at_least.is_some() => {
            let parts: Vec<&str> = at_least.unwrap_or_default().split(',').map(str::trim).collect();
            let p = match parts[..] {
                [p, "1/used"] | ["1/used", p] => rate_number(flag, s, p)?,
                _ => anyhow::bail!("{flag} `{s}`: expected max(P,1/used), the larger of a probability P and one over the used codons"),
            };
            Ok((GeMutation::IntFlip, p, IntFlipRate::AtLeastPerUsed))
        }
        ("int-flip", r) => Ok((GeMutation::IntFlip, r.map(|r| rate_number(flag, s, r)).transpose()?.unwrap_or(defaults::GE.mutation), IntFlipRate::Fixed)),
        ("subtree", Some("1/used")) => anyhow::bail!("{flag} `{s}`: 1/used is a rate of int-flip; subtree takes a probability per child"),
        ("subtree", Some(_)) if at_least.is_some() => anyhow::bail!("{flag} `{s}`: max(P,1/used) is a rate of int-flip; subtree takes a probability per child"),
        ("subtree", r) => Ok((GeMutation::Subtree, r.map(|r| rate_number(flag, s, r)).transpose()?.unwrap_or(defaults::GE_SUBTREE_MUTATION), IntFlipRate::Fixed)),
        _ => anyhow::bail!("{flag} `{s}`: expected a probability or int-flip[:P|:1/used|:max(P,1/used)] or subtree[:P]"),
    }
}

/// `NAME[:RATE]` split at the first colon, both trimmed.
fn split_rate(s: &str) -> (&str, Option<&str>) {
    match s.split_once(':') {
        Some((n, r)) => (n.trim(), Some(r.trim())),
        None => (s.trim(), None),
    }
}

/// The rate after an operator's colon, a number (its range is checked with the settings).
fn rate_number(flag: &str, whole: &str, rate: &str) -> Result<f32> {
    rate.parse::<f32>().map_err(|_| anyhow::anyhow!("{flag} `{whole}`: `{rate}` is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_ends_spell_the_same_refusals_their_own_way() {
        let c = GeChoices { init: Some(crate::genome::InitMethod::PiGrow), max_depth: Some(9), ..Default::default() };
        let cli = format!("{:#}", c.tree_rates("--", "flag").unwrap_err());
        assert!(cli.starts_with("--max-depth, --init are flags of grammatical evolution, and this run has no --grammar: tree GP (--functions)"), "{cli}");
        let py = format!("{:#}", c.tree_rates("", "setting").unwrap_err());
        assert!(py.starts_with("max_depth, init are settings of grammatical evolution, and this run has no grammar: tree GP (function_set)"), "{py}");
        let rates = GeChoices { crossover: Some("0.4".into()), mutation: Some(" 0.2 ".into()), ..Default::default() };
        assert_eq!(rates.tree_rates("", "setting").unwrap(), TreeRates { crossover: Some(0.4), mutation: Some(0.2) });
        let op = GeChoices { mutation: Some("subtree".into()), ..Default::default() };
        assert!(format!("{:#}", op.tree_rates("", "setting").unwrap_err()).starts_with("mutation `subtree` names an operator of grammatical evolution"));
        assert!(format!("{:#}", parse_mutation("mutation", "flip").unwrap_err()).starts_with("mutation `flip`: expected"));
    }

    #[test]
    fn nothing_given_is_the_default_and_each_choice_reaches_its_config() {
        assert_eq!(GeChoices::default().configs("--").unwrap(), defaults::GE.configs());
        let c = GeChoices {
            init: Some(crate::genome::InitMethod::PiGrow),
            init_depth: Some((2, 5)),
            mutation: Some("int-flip:1/used".into()),
            crossover: Some("onepoint:0.7".into()),
            genome_length: Some(600),
            ..Default::default()
        };
        let g = c.configs("").unwrap();
        assert_eq!((g.init.method, g.init.min_depth, g.init.max_depth, g.init.length), (crate::genome::InitMethod::PiGrow, 2, 5, 600));
        assert_eq!((g.vary.crossover_op, g.vary.crossover, g.vary.mutation_per_used), (GeCrossover::Onepoint, 0.7, true));
        assert_eq!(g.genome_capacity, 600, "the capacity makes room for a longer genome");
    }
}
