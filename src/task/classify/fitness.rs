//! How a classifier is scored: the fitness the engine minimises ([`Classification`]: cross-entropy,
//! accuracy, balanced accuracy or weighted F1 from the class sums, or a head's), and the scores of one
//! program on labelled rows (its confusion matrix), with linear terms of the inputs or a head.

use super::*;

/// The classification task over a training set, evaluated by a backend.
pub struct Classification<'d> {
    /// Where populations are evaluated.
    pub backend: &'d crate::backend::Backend,
    /// The training data, where the backend reads it.
    pub data: crate::backend::ClassData<'d>,
    /// Training points per class.
    pub counts: Vec<u64>,
    /// What is minimised.
    pub fitness: ClassFitness,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// A head over the programs' outputs (`--outputs K`): the training data with the rows'
    /// class indices (as f32, `counts` of each) as the target, where the backend reads them;
    /// the fitness is then the Brier score of each class's least-squares head
    /// ([`crate::program::head::ClassHeadSums`]), and `data` is not read.
    pub head: Option<crate::backend::RegressionData<'d>>,
    /// The training rows in host memory and the linear terms' offsets at them
    /// (`[max(1, n_outputs)][n_rows]`, as `data` adds them), which lexicase selection's cases
    /// are read from ([`crate::evolve::Fitness::case_errors`]); `None`: no cases.
    pub rows: Option<(&'d Labeled, Option<&'d [f32]>)>,
}

impl crate::evolve::Fitness for Classification<'_> {
    fn evaluate(&self, pop: &Population) -> Result<Vec<f64>> {
        if let Some(h) = &self.head {
            let sums = self.backend.class_head_sums(pop, h, &self.counts)?;
            return Ok(sums
                .iter()
                .enumerate()
                .map(|(i, s)| if pop.len[i] == 0 { f64::INFINITY } else { s.brier() + self.parsimony * pop.len[i] as f64 })
                .collect());
        }
        let sums = self.backend.classification_sums(pop, &self.data)?;
        Ok(sums
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if pop.len[i] == 0 {
                    return f64::INFINITY;
                }
                fitness_of(s, &self.counts, self.fitness) + self.parsimony * pop.len[i] as f64
            })
            .collect())
    }

    fn fit_constants(&self, pop: &mut Population, rows: &[usize], steps: u32) -> Result<Option<Vec<f64>>> {
        if self.head.is_some() {
            bail!("--optimise-constants fits a classifier's own outputs, not a head's features (ClassifySettings::check refuses it)");
        }
        self.backend.fit_class_constants(pop, rows, &self.data, steps)?;
        self.evaluate(&pop.gather(rows)).map(Some)
    }

    fn n_cases(&self) -> usize {
        self.rows.map_or(0, |(l, _)| l.data.n_rows)
    }

    /// Each program's error at each case row, as the fitness reads it: its softmax
    /// cross-entropy (with `--fitness cross-entropy`), with `balanced-ce` 1 where it predicts
    /// the wrong class plus that cross-entropy `c` as `c / (1 + c)`, else 1 where it predicts
    /// the wrong class and 0 where the right one; with a head, the row's Brier score under the class heads
    /// fitted on all the rows.
    fn case_errors(&self, pop: &Population, _generation: usize, cases: &[u32]) -> Result<Vec<f64>> {
        use crate::program::fitness::{argmax, softmax_ce};
        let (rows, offset) = self.rows.ok_or_else(|| anyhow::anyhow!("this classification task keeps no rows for lexicase selection"))?;
        let (d, n_classes) = (&rows.data, self.counts.len());
        let k = cases.len();
        let (x, _) = d.gather(cases)?;
        let pred = self.backend.predictions(pop, &x, k, d.n_features)?;
        let n_out = pop.n_outputs.max(1);
        anyhow::ensure!(pred.len() == pop.size() * n_out * k, "{} predictions for {} programs at {k} rows", pred.len(), pop.size());
        let heads: Option<Vec<Option<Vec<crate::program::head::Head>>>> = match &self.head {
            Some(h) => Some(self.backend.class_head_sums(pop, h, &self.counts)?.iter().map(|s| s.fit()).collect()),
            None => None,
        };
        let mut errors = vec![f64::INFINITY; pop.size() * k];
        let (mut f, mut z) = (vec![0.0; n_out], vec![0.0; n_classes]);
        for i in 0..pop.size() {
            if pop.len[i] == 0 {
                continue;
            }
            let out = &pred[i * n_out * k..(i + 1) * n_out * k];
            let head = match &heads {
                Some(h) => match &h[i] {
                    Some(h) => Some(h),
                    None => continue,
                },
                None => None,
            };
            for (c, &row) in cases.iter().enumerate() {
                let label = rows.labels[row as usize] as usize;
                f.iter_mut().enumerate().for_each(|(m, v)| *v = out[m * k + c] as f64);
                let e = match head {
                    Some(h) => h.iter().enumerate().map(|(m, h)| (h.apply(&f) - (m == label) as u8 as f64).powi(2)).sum(),
                    None => {
                        let off = |m: usize| offset.map_or(0.0, |o| o[m * d.n_rows + row as usize] as f64);
                        if pop.n_outputs == 0 {
                            z[0] = 0.0;
                            z[1] = f[0] + off(0);
                        } else {
                            z.iter_mut().enumerate().for_each(|(m, v)| *v = f[m] + off(m));
                        }
                        let wrong = || (argmax(&z) != label || z.iter().any(|v| !v.is_finite())) as u8 as f64;
                        match self.fitness {
                            ClassFitness::CrossEntropy => softmax_ce(&z, label),
                            ClassFitness::BalancedCe => wrong() + crate::program::fitness::ce_share(softmax_ce(&z, label)),
                            _ => wrong(),
                        }
                    }
                };
                errors[i * k + c] = if e.is_finite() { e } else { f64::INFINITY };
            }
        }
        Ok(errors)
    }

    /// On the CPU each program is scored on its own, in fixed chunks of rows.
    fn cacheable(&self) -> bool {
        matches!(self.data, crate::backend::ClassData::Host { .. })
            && self.head.as_ref().is_none_or(|h| matches!(h, crate::backend::RegressionData::Host { .. }))
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        if self.head.is_some() {
            // The head's sums are summed on the GPU; selection and variation run on the host.
            return None;
        }
        self.backend.classification_task(&self.data, &self.counts, self.fitness, self.parsimony)
    }
}

/// A confusion matrix: `counts[true class][predicted class]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confusion {
    /// `[K][K]` row counts, true class by predicted class.
    pub counts: Vec<Vec<u64>>,
}

impl Confusion {
    /// Counts `(labels[i], predicted[i])` pairs over `n_classes` classes.
    pub fn new(labels: &[u32], predicted: &[u32], n_classes: usize) -> Confusion {
        let mut counts = vec![vec![0; n_classes]; n_classes];
        for (&t, &p) in labels.iter().zip(predicted) {
            counts[t as usize][p as usize] += 1;
        }
        Confusion { counts }
    }
    /// Correct over all rows (0 for no rows).
    pub fn accuracy(&self) -> f64 {
        let total: u64 = self.counts.iter().flatten().sum();
        let diag: u64 = (0..self.counts.len()).map(|k| self.counts[k][k]).sum();
        if total == 0 { 0.0 } else { diag as f64 / total as f64 }
    }
    /// Mean recall over the classes that have rows.
    pub fn balanced_accuracy(&self) -> f64 {
        let recalls: Vec<f64> = (0..self.counts.len())
            .filter_map(|k| {
                let n: u64 = self.counts[k].iter().sum();
                (n > 0).then(|| self.counts[k][k] as f64 / n as f64)
            })
            .collect();
        if recalls.is_empty() { 0.0 } else { recalls.iter().sum::<f64>() / recalls.len() as f64 }
    }
    /// Weighted F1: each class's F1 (`2·TP / (rows + predicted)`) weighted by its share of the
    /// rows, as [`crate::program::fitness::weighted_f1_of`] computes it from the fitness sums
    /// (scikit-learn's `f1_score(average="weighted")`).
    pub fn weighted_f1(&self) -> f64 {
        let k = self.counts.len();
        let sums = crate::program::fitness::ClassSums {
            correct: (0..k).map(|c| self.counts[c][c]).collect(),
            predicted: (0..k).map(|c| self.counts.iter().map(|row| row[c]).sum()).collect(),
            ..Default::default()
        };
        let rows: Vec<u64> = self.counts.iter().map(|row| row.iter().sum()).collect();
        crate::program::fitness::weighted_f1_of(&sums, &rows)
    }
    /// A table for people: rows are true classes, columns predicted ones.
    pub fn render(&self, classes: &[String]) -> String {
        let w = classes.iter().map(|c| c.len()).max().unwrap_or(1).max("true\\pred".len());
        let cw = self.counts.iter().flatten().map(|n| n.to_string().len()).max().unwrap_or(1).max(classes.iter().map(|c| c.len().min(10)).max().unwrap_or(1));
        let mut s = format!("{:>w$}  ", "true\\pred");
        for c in classes {
            s += &format!(" {:>cw$}", &c[..c.len().min(10)]);
        }
        for (k, row) in self.counts.iter().enumerate() {
            s += &format!("\n{:>w$}  ", classes[k]);
            for n in row {
                s += &format!(" {n:>cw$}");
            }
        }
        s
    }
}

/// Scores of one program on one data set.
pub struct ClassScores {
    /// Confusion matrix.
    pub confusion: Confusion,
    /// Mean cross-entropy (NaN where an output is not finite).
    pub cross_entropy: f64,
}

impl ClassScores {
    /// Rows scored.
    pub fn rows(&self) -> u64 {
        self.confusion.counts.iter().flatten().sum()
    }

    /// The loss the validation choice compares for `fitness`, from a program's scores on
    /// held-out rows (`+inf` where not finite): the measure the fitness minimises, except
    /// `balanced-ce`, whose held-out loss is 1 − balanced accuracy with the cross-entropy's
    /// term `c / (1 + c)` only as a tie-break, scaled below half of the smallest step one row
    /// makes in the balanced accuracy (`1 / (classes · rows)`).
    ///
    /// On rows a program never saw, a few rows it gets confidently wrong make its mean
    /// cross-entropy as large as they like, so `c / (1 + c)` is near 1 for every program that
    /// fitted its training rows sharply, and at full weight it outweighs the accuracy: on xor at
    /// 20 000 × 100 (seed 2) the choice returned `x / y`, validation accuracy 0.91 with
    /// cross-entropy 9.4, over 20-node programs that classify better, and the test accuracy
    /// was 0.82 (0.99 with this loss). Over the generated sets of
    /// `tools/search/class_fitness.sh` (seeds 1–10, CPU defaults) it raised 14 runs and lowered
    /// 5, and lowered no median (`docs/quality.md`, issue 55, 2026-12-06).
    pub fn loss(&self, fitness: ClassFitness) -> f64 {
        let l = match fitness {
            ClassFitness::Accuracy => 1.0 - self.confusion.accuracy(),
            ClassFitness::BalancedAccuracy => 1.0 - self.confusion.balanced_accuracy(),
            ClassFitness::CrossEntropy => self.cross_entropy,
            ClassFitness::WeightedF1 => 1.0 - self.confusion.weighted_f1(),
            ClassFitness::BalancedCe => {
                let step = (self.confusion.counts.len().max(1) as f64 * self.rows().max(1) as f64).recip();
                (1.0 - self.confusion.balanced_accuracy()) + 0.5 * step * crate::program::fitness::ce_share(self.cross_entropy)
            }
        };
        if l.is_finite() { l } else { f64::INFINITY }
    }

    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "accuracy": self.confusion.accuracy(),
            "balanced_accuracy": self.confusion.balanced_accuracy(),
            "weighted_f1": self.confusion.weighted_f1(),
            "cross_entropy": crate::report::num(self.cross_entropy),
            "confusion": self.confusion.counts,
            "rows": self.rows(),
        })
    }
}

/// Scores of a tree with `n_outputs` outputs (0: binary) on `data`, with `offset` (the linear
/// terms of the inputs at `data`'s rows, [`crate::program::logistic::offsets`]) added to its
/// outputs where given.
pub fn scores(nodes: &[Node], n_outputs: usize, data: &Labeled, offset: Option<&[f32]>) -> Result<ClassScores> {
    let k = data.n_classes();
    let n = data.data.n_rows;
    let mut pop = Population::new(1, nodes.len().max(1), n_outputs);
    let _ = pop.set_tree(0, nodes);
    let mut out = crate::backend::cpu::eval::predict(&pop, 0, &data.data.x, n)?;
    if let Some(o) = offset {
        out.iter_mut().zip(o).for_each(|(v, o)| *v += o);
    }
    let predicted = classify_outputs(&out, n, n_outputs, k);
    let sums = crate::backend::cpu::classify::evaluate_classification_with(&pop, &data.data.x, &data.labels, n, k, offset)?;
    let ce = if sums[0].bad > 0 { f64::NAN } else { sums[0].ce / sums[0].n.max(1) as f64 };
    Ok(ClassScores { confusion: Confusion::new(&data.labels, &predicted, k), cross_entropy: ce })
}

/// A program's outputs on `data`: `[max(1, n_outputs)][n_rows]`.
fn program_outputs(nodes: &[Node], n_outputs: usize, data: &Labeled) -> Result<Vec<f32>> {
    let mut pop = Population::new(1, nodes.len().max(1), n_outputs);
    let _ = pop.set_tree(0, nodes);
    Ok(crate::backend::cpu::eval::predict(&pop, 0, &data.data.x, data.data.n_rows)?)
}

/// The head of a classifier over a program's `max(1, n_outputs)` outputs, fitted on `data`: a
/// multinomial logistic regression of the classes on the outputs
/// ([`crate::program::logistic::fit`], its L2 penalty chosen by 5-fold cross-validated
/// cross-entropy), so the probabilities are calibrated; where it cannot be fitted (fewer than
/// 10 rows, or no output with a spread) each class's least-squares head on its one-hot target,
/// as the search scored the program ([`crate::program::head::ClassHeadSums`]). An error if an
/// output is not finite at some row.
pub fn fit_class_head(nodes: &[Node], n_outputs: usize, data: &Labeled) -> Result<Vec<crate::program::linear::Linear>> {
    use crate::program::linear::Linear;
    let out = program_outputs(nodes, n_outputs, data)?;
    let (k, n, c) = (n_outputs.max(1), data.data.n_rows, data.n_classes());
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        bail!("the program's output {} is {} at row {}: a head cannot be fitted", i / n.max(1), out[i], i % n.max(1));
    }
    if let Some(fit) = crate::program::logistic::fit(&out, &data.labels, n, k, c, false).map_err(|e| anyhow::anyhow!("the head: {e}"))? {
        return Ok(fit.terms);
    }
    let mut sums = crate::program::head::ClassHeadSums::new(k, c);
    let mut f = vec![0.0; k];
    for r in 0..n {
        f.iter_mut().enumerate().for_each(|(m, v)| *v = out[m * n + r] as f64);
        sums.add_row(&f, data.labels[r] as usize);
    }
    let heads = sums.fit().context("the head's least-squares fit")?;
    Ok(heads.into_iter().map(|h| Linear { c: h.b, a: h.w }).collect())
}

/// Scores of a program with a classifier head (`head`, one per class, over its
/// `max(1, n_outputs)` outputs) on `data`: the logits as the model computes them
/// ([`crate::task::base::model::head_logits`]).
pub fn head_scores(nodes: &[Node], n_outputs: usize, head: &[crate::program::linear::Linear], data: &Labeled) -> Result<ClassScores> {
    let (n, c) = (data.data.n_rows, data.n_classes());
    let out = program_outputs(nodes, n_outputs, data)?;
    let z = crate::task::base::model::head_logits(head, &out, n);
    let predicted = classify_outputs(&z, n, c, c);
    let mut ce = 0.0;
    for (r, &l) in data.labels.iter().enumerate() {
        let top = (0..c).map(|k| z[k * n + r] as f64).fold(f64::NEG_INFINITY, f64::max);
        let lse = top + (0..c).map(|k| (z[k * n + r] as f64 - top).exp()).sum::<f64>().ln();
        ce += lse - z[l as usize * n + r] as f64;
    }
    let ce = if n == 0 { f64::NAN } else { ce / n as f64 };
    Ok(ClassScores { confusion: Confusion::new(&data.labels, &predicted, c), cross_entropy: if ce.is_finite() { ce } else { f64::NAN } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(counts: Vec<Vec<u64>>, cross_entropy: f64) -> ClassScores {
        ClassScores { confusion: Confusion { counts }, cross_entropy }
    }

    /// Held out, `balanced-ce` compares balanced accuracy first: a program right on one more
    /// row wins however confidently its few misses are wrong, and the cross-entropy decides
    /// only between programs right on the same rows.
    #[test]
    fn held_out_balanced_ce_compares_accuracy_first_and_the_cross_entropy_only_on_ties() {
        let f = ClassFitness::BalancedCe;
        // 3 classes of 4, 5 and 6 rows; `sharp` misses one row of the last class with a huge
        // cross-entropy, `hedged` two rows with a small one.
        let sharp = scored(vec![vec![4, 0, 0], vec![0, 5, 0], vec![0, 1, 5]], 40.0);
        let hedged = scored(vec![vec![4, 0, 0], vec![0, 5, 0], vec![0, 2, 4]], 0.3);
        assert!(sharp.loss(f) < hedged.loss(f), "{} against {}", sharp.loss(f), hedged.loss(f));
        // The training fitness of the same sums ranks them the other way: its cross-entropy
        // term weighs as much as the accuracy.
        let full = |s: &ClassScores| crate::program::fitness::balanced_ce_of(s.confusion.balanced_accuracy(), s.cross_entropy);
        assert!(full(&sharp) > full(&hedged));
        // On the same rows right, the lower cross-entropy wins.
        let calm = scored(sharp.confusion.counts.clone(), 0.2);
        assert!(calm.loss(f) < sharp.loss(f));
        // The tie-break stays below half of one row's step in the balanced accuracy, 1 / (3 · 6)
        // here, however large the cross-entropy.
        let step = 1.0 / 3.0 / 6.0;
        let exact = 1.0 - sharp.confusion.balanced_accuracy();
        assert!(sharp.loss(f) - exact > 0.0 && sharp.loss(f) - exact < 0.5 * step);
        let huge = scored(sharp.confusion.counts.clone(), 1e30);
        assert!(huge.loss(f) - exact < 0.5 * step);
        // A non-finite output (NaN cross-entropy) is never chosen.
        assert_eq!(scored(sharp.confusion.counts.clone(), f64::NAN).loss(f), f64::INFINITY);
        // The other fitnesses compare what they minimise.
        assert_eq!(hedged.loss(ClassFitness::CrossEntropy), 0.3);
        assert!((sharp.loss(ClassFitness::Accuracy) - 1.0 / 15.0).abs() < 1e-15);
    }
}
