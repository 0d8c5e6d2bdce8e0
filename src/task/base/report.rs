//! The blocks every task's report shares: the result of a run, the hall of fame's rows, the
//! generations, the devices, the islands and the time split.

use serde::{Deserialize, Serialize};

use crate::evolve::{GenerationStats, IslandConfig, Outcome};

/// One row of the hall of fame as reports and CSV files hold it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FameRow {
    /// Size in nodes.
    pub complexity: usize,
    /// The error on the training rows (fitness without the parsimony penalty).
    pub loss: f64,
    /// The same error on the validation rows (`None` without them, or where not finite).
    #[serde(default)]
    pub validation_loss: Option<f64>,
    /// PySR's score: the drop of ln(loss) per node from the previous row (0 for the first).
    #[serde(default)]
    pub score: f64,
    /// Its description length on the training rows, in nats (`--select mdl`; `None` where the
    /// fitness is no likelihood).
    #[serde(default)]
    pub description_length: Option<f64>,
    /// The k-fold cross-validated mean squared error of its size on the training rows
    /// (`--select cv`; `None` where not computed).
    #[serde(default)]
    pub cv_loss: Option<f64>,
    /// The standard error of `cv_loss` where the front was cross-validated by `--select folds`
    /// (the default's choice below the large-data size), over the held-out rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_se: Option<f64>,
    /// Whether this is the program the run returned (`best`, `model`).
    #[serde(default)]
    pub selected: bool,
    /// Infix formula.
    pub equation: String,
    /// LaTeX.
    pub latex: String,
    /// Text sympy's `sympify` parses.
    pub sympy: String,
}

/// The result of a run, ready to print and to write as the JSON report.
pub struct EvolveResult {
    /// The JSON report (`settings`, `generations`, `best`, `train`, `test`, `model`, `timing`,
    /// `version`).
    pub report: serde_json::Value,
    /// Lines to print for a person.
    pub summary: String,
}

/// The summary's last line about a run that stayed on the GPU (empty otherwise).
pub fn device_loop_line(outcome: &Outcome) -> String {
    match &outcome.transfers {
        Some(t) => format!(
            "\ndevice loop   {} generations on the GPU; {} bytes of population copied to the host between them",
            t.generations, t.population_bytes_between_generations
        ),
        None => String::new(),
    }
}

/// The generations of a run as the report holds them (`median_sizes` by generation).
pub fn generations_json(history: &[GenerationStats], median_sizes: &[f64]) -> Vec<serde_json::Value> {
    history
        .iter()
        .map(|s| {
            serde_json::json!({"generation": s.generation, "best": crate::report::num(s.best),
                "mean": crate::report::num(s.mean), "mean_size": crate::report::num(s.mean_size),
                "median_size": median_sizes.get(s.generation).copied().map(crate::report::num),
                "invalid": s.invalid, "seconds": s.seconds})
        })
        .collect()
}

/// Generations in a row, ending with the last, whose median valid program is one node before
/// a run reports its population as collapsed ([`collapse`]).
pub const COLLAPSE_GENERATIONS: usize = 3;

/// Where a run's population collapsed: the first generation of the run of at least
/// [`COLLAPSE_GENERATIONS`] generations, ending with the last, in which at least half the valid
/// programs were one node (a constant or one input: median size at most 1, `median_sizes` by
/// generation, 0 where none was valid); `None` where it did not. Selection that keeps
/// specialists (`--selection lexicase`) is what the line [`collapse_line`] suggests.
pub fn collapse(median_sizes: &[f64]) -> Option<usize> {
    let tail = median_sizes.iter().rev().take_while(|&&m| m > 0.0 && m <= 1.0).count();
    (tail >= COLLAPSE_GENERATIONS).then(|| median_sizes.len() - tail)
}

/// The report's `collapse` block: `{"from_generation": g}`, or null ([`collapse`]).
pub fn collapse_json(median_sizes: &[f64]) -> serde_json::Value {
    collapse(median_sizes).map_or(serde_json::Value::Null, |g| serde_json::json!({"from_generation": g}))
}

/// The summary's line on a collapse ([`collapse`]), or nothing.
pub fn collapse_line(median_sizes: &[f64], selection: crate::select::Selection) -> String {
    let Some(g) = collapse(median_sizes) else { return String::new() };
    let hint = if selection.is_lexicase() { "" } else { ": --selection lexicase keeps programs that are best on some cases alive" };
    format!("collapse      from generation {g} on, most programs were one node{hint}\n")
}

/// The devices of a run: the backend's description, and how many more GPUs its islands used.
pub fn describe_devices(backend: &crate::backend::Backend, more: &[crate::backend::Backend]) -> String {
    match more.len() {
        0 => backend.describe(),
        n => format!("{} and {n} more GPU{}", backend.describe(), if n == 1 { "" } else { "s" }),
    }
}

/// Adds each island's statistics to the report's generations, when the run had several
/// islands: `islands`, one entry per island (`best`, `mean`, `mean_size`, `invalid`; with
/// `returns`, a control run's `best_return` and `mean_return` instead of the fitness).
pub fn add_island_stats(generations: &mut [serde_json::Value], island_history: &[Vec<GenerationStats>], returns: bool) {
    use crate::report::num;
    for (g, each) in generations.iter_mut().zip(island_history) {
        g["islands"] = each
            .iter()
            .map(|s| {
                if returns {
                    serde_json::json!({"best_return": num(-s.best), "mean_return": num(-s.mean), "mean_size": num(s.mean_size), "invalid": s.invalid})
                } else {
                    serde_json::json!({"best": num(s.best), "mean": num(s.mean), "mean_size": num(s.mean_size), "invalid": s.invalid})
                }
            })
            .collect();
    }
}

/// Islands whose best the summary's line shows; the rest are counted.
pub const SUMMARY_ISLANDS: usize = 8;

/// The summary's line about islands (none for one island): how many, of what size, how they
/// migrated, and the best in the last generation of the first [`SUMMARY_ISLANDS`] islands (a
/// return, with `returns`) and how many more there are (the report holds every island's).
pub fn islands_summary(islands: &IslandConfig, pop: usize, island_history: &[Vec<GenerationStats>], returns: bool) -> Option<String> {
    let last = island_history.last()?;
    let mut bests: Vec<String> =
        last.iter().take(SUMMARY_ISLANDS).map(|s| if returns { format!("{:.2}", -s.best) } else { format!("{:.4e}", s.best) }).collect();
    if last.len() > SUMMARY_ISLANDS {
        bests.push(format!("… ({} more in the report)", last.len() - SUMMARY_ISLANDS));
    }
    let migration = if islands.migrants == 0 {
        "no migration".to_string()
    } else {
        format!("{} migrants every {} generations", islands.migrants, islands.migrate_every)
    };
    let what = if returns { "best returns" } else { "best" };
    Some(format!("islands       {} × {pop}, {migration}; {what} {}\n", islands.count, bests.join(" ")))
}

/// Seconds as a summary shows them: milliseconds with one decimal below a second, else
/// seconds with two.
pub fn show_seconds(s: f64) -> String {
    if s < 1.0 { format!("{:.1} ms", s * 1e3) } else { format!("{s:.2} s") }
}

/// Where a run's wall time went (issue 30): setup before the search (data, checks, devices
/// opened), the search (every generation, constant fitting and the kernels compiled or read
/// on the way included), and the final scoring and choosing after it; beside the first
/// generation's seconds (which hold the kernels' compiles and the data's copies) and the median
/// of the others, so that a cost only some generations pay shows. The report's `timing` holds
/// it ([`Split::add_to`]) and the summary prints [`Split::line`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Split {
    /// Seconds before the search.
    pub setup: f64,
    /// Seconds of the search.
    pub search: f64,
    /// Seconds after it, to the report.
    pub finish: f64,
    /// The first generation's seconds (this process's first, for a resumed run; NaN for a
    /// search of none).
    pub first_generation: f64,
    /// The median of the other generations' seconds (NaN where there are none).
    pub median_generation: f64,
    /// Kernel modules the backend compiled or read from disk, and their seconds.
    pub kernels: crate::backend::KernelLoads,
}

impl Split {
    /// The split of a run whose generations took `generations` seconds each.
    pub fn of(setup: f64, search: f64, finish: f64, generations: &[f64], kernels: crate::backend::KernelLoads) -> Split {
        let mut rest: Vec<f64> = generations.iter().skip(1).copied().collect();
        rest.sort_by(f64::total_cmp);
        let median = if rest.is_empty() { f64::NAN } else { rest[rest.len() / 2] };
        Split { setup, search, finish, first_generation: generations.first().copied().unwrap_or(f64::NAN), median_generation: median, kernels }
    }

    /// Adds the split to `report["timing"]`: `setup_seconds`, `search_seconds`,
    /// `final_seconds`, `first_generation_seconds`, `median_generation_seconds`,
    /// `kernels_compiled`, `kernels_from_disk`, `kernel_seconds`.
    pub fn add_to(&self, report: &mut serde_json::Value) {
        use crate::report::num;
        let fields = [
            ("setup_seconds", serde_json::json!(self.setup)),
            ("search_seconds", serde_json::json!(self.search)),
            ("final_seconds", serde_json::json!(self.finish)),
            ("first_generation_seconds", num(self.first_generation)),
            ("median_generation_seconds", num(self.median_generation)),
            ("kernels_compiled", serde_json::json!(self.kernels.compiled)),
            ("kernels_from_disk", serde_json::json!(self.kernels.from_disk)),
            ("kernel_seconds", serde_json::json!(self.kernels.seconds)),
        ];
        if let Some(t) = report.get_mut("timing").and_then(serde_json::Value::as_object_mut) {
            for (k, v) in fields {
                t.insert(k.into(), v);
            }
        }
    }

    /// The summary's line: `split  setup …, search … (first generation …, then … median; kernels …),
    /// final …` (`what` names a generation: `generation` or `iteration`).
    pub fn line(&self, what: &str) -> String {
        let ms = show_seconds;
        let mut gens = format!("first {what} {}", ms(self.first_generation));
        if self.median_generation.is_finite() {
            gens += &format!(", then {} median", ms(self.median_generation));
        }
        let k = &self.kernels;
        if k.compiled + k.from_disk > 0 {
            gens += &format!("; kernels {} ({} compiled, {} from disk)", ms(k.seconds), k.compiled, k.from_disk);
        }
        format!("split         setup {}, search {} ({gens}), final scoring {}\n", ms(self.setup), ms(self.search), ms(self.finish))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_population_of_one_node_programs_to_the_end_is_a_collapse() {
        assert_eq!(collapse(&[7.0, 3.0, 1.0, 1.0, 1.0]), Some(2));
        assert_eq!(collapse(&[7.0, 1.0, 1.0, 0.5, 1.0, 1.0]), Some(1));
        // Too short a run of them, or one that ended before the last generation.
        assert_eq!(collapse(&[7.0, 3.0, 1.0, 1.0]), None);
        assert_eq!(collapse(&[1.0, 1.0, 1.0, 1.0, 3.0]), None);
        // Generations with no valid program (median 0) are not a collapse to one node.
        assert_eq!(collapse(&[5.0, 0.0, 0.0, 0.0]), None);
        assert_eq!(collapse(&[]), None);
        assert!(collapse_json(&[1.0; 4])["from_generation"] == 0);
        assert!(collapse_json(&[2.0; 4]).is_null());
        let line = collapse_line(&[9.0, 1.0, 1.0, 1.0], crate::select::Selection::Tournament);
        assert!(line.starts_with("collapse      from generation 1") && line.contains("--selection lexicase"), "{line}");
        assert!(!collapse_line(&[9.0, 1.0, 1.0, 1.0], crate::select::Selection::Lexicase).contains("--selection"));
        assert_eq!(collapse_line(&[9.0, 4.0, 1.0], crate::select::Selection::Tournament), "");
    }

    #[test]
    fn the_split_keeps_the_first_generation_apart_from_the_median_of_the_rest() {
        let k = crate::backend::KernelLoads { compiled: 2, from_disk: 1, seconds: 0.25 };
        let s = Split::of(0.01, 1.5, 0.02, &[0.9, 0.1, 0.3, 0.2], k);
        assert_eq!((s.first_generation, s.median_generation), (0.9, 0.2));
        assert_eq!(s.line("generation"), "split         setup 10.0 ms, search 1.50 s (first generation 900.0 ms, then 200.0 ms median; kernels 250.0 ms (2 compiled, 1 from disk)), final scoring 20.0 ms\n");
        let mut r = serde_json::json!({"timing": {"seconds": 1.53}});
        s.add_to(&mut r);
        assert_eq!(r["timing"]["median_generation_seconds"], 0.2);
        assert_eq!(r["timing"]["kernels_compiled"], 2);
        assert_eq!(r["timing"]["seconds"], 1.53, "the total stays");
        // One generation: no median; the CPU: no kernels.
        let one = Split::of(0.0, 0.5, 0.0, &[0.5], crate::backend::KernelLoads::default());
        assert!(one.median_generation.is_nan());
        assert!(!one.line("iteration").contains("median") && !one.line("iteration").contains("kernels"));
        assert!(one.line("iteration").contains("first iteration 500.0 ms"));
        let mut r = serde_json::json!({"timing": {}});
        one.add_to(&mut r);
        assert!(r["timing"]["median_generation_seconds"].is_null());
    }
}

/// Adds the genome and the phenotype text of `best` to a report's `best` block, where it has
/// one (grammatical evolution).
pub fn add_genome(best_json: &mut serde_json::Value, best: &crate::evolve::Best) {
    if let Some((genome, text)) = &best.genome {
        best_json["genome"] = serde_json::json!(genome);
        best_json["phenotype"] = serde_json::json!(text);
    }
    let slots = crate::program::tree::slot_values(&best.nodes);
    if !slots.is_empty() {
        let values: serde_json::Map<String, serde_json::Value> = slots.iter().map(|&(i, v)| (format!("c[{i}]"), serde_json::json!(v))).collect();
        best_json["constants"] = serde_json::Value::Object(values);
        if let Some((_, text)) = &best.genome {
            best_json["fitted_phenotype"] = serde_json::json!(fill_slots(text, &slots));
        }
    }
}

/// The summary's line of a program's constants `c[i]` and their fitted values (empty when it
/// has none).
pub fn constants_line(nodes: &[crate::program::tree::Node]) -> String {
    let slots = crate::program::tree::slot_values(nodes);
    if slots.is_empty() {
        return String::new();
    }
    let list: Vec<String> = slots.iter().map(|&(i, v)| format!("c[{i}] = {}", crate::program::render::number(v))).collect();
    format!("constants     {}\n", list.join(", "))
}

/// A phenotype with each constant `c[i]` (not part of a longer name) replaced by its value, as
/// PonyGE2 prints a fitted program (negative values in parentheses, so the text reads alike).
pub fn fill_slots(text: &str, slots: &[(usize, f32)]) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let named = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.');
        if !named && b[i] == b'c' && b.get(i + 1) == Some(&b'[') {
            let digits = b[i + 2..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && b.get(i + 2 + digits) == Some(&b']') {
                let k: Option<usize> = text[i + 2..i + 2 + digits].parse().ok();
                if let Some(&(_, v)) = slots.iter().find(|&&(j, _)| Some(j) == k) {
                    let n = crate::program::render::number(v);
                    out.push_str(&if v < 0.0 { format!("({n})") } else { n });
                    i += 3 + digits;
                    continue;
                }
            }
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Adds the user operators `nodes` use to a report (`operators`), with the Python that gives
/// them to sympy; nothing where it uses none.
pub fn add_operators(report: &mut serde_json::Value, nodes: &[crate::program::tree::Node]) {
    if let Some(o) = super::model::operators_json(nodes) {
        report["operators"] = o;
    }
}

/// Closes a report and its summary as every task does: the time split into the report's
/// `timing` and its summary line, then `time`, the summary's last line.
pub fn close(report: &mut serde_json::Value, summary: &mut String, split: &Split, time: &str) {
    split.add_to(report);
    *summary += &split.line("generation");
    *summary += time;
}
