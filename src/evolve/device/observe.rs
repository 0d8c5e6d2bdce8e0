//! What the host reads of each generation of the device loop: every island's mailbox and
//! per-size summary, and in one copy per island the trees that improve the best program or a
//! size's best (for the hall of fame), counted in [`Transfers`].

use anyhow::Result;

use super::{Island, Transfers, bytes};
use crate::evolve::{Best, Observer, Representation};

/// What the host reads of one generation of every island.
pub(super) struct Seen {
    /// Each island's mailbox.
    pub(super) reads: Vec<crate::backend::cuda::MailboxRead>,
}

/// The loop's view of the run as a whole: the best so far, each size's best fitness so far
/// (only programs that beat it are copied back for the hall of fame), and the copies counted.
pub(super) struct Books {
    pub(super) best: Best,
    pub(super) size_best: Vec<f64>,
    pub(super) tr: Transfers,
}

/// Reads every island's generation (waiting for it), and copies back in one copy per island
/// the trees the host needs: each size's new winner over all islands (the first island's among
/// equals, as a hall of fame reading the islands end to end keeps) and the best program when
/// it improves (GE: with its genome, from `genomes_bred` when the next generation has already
/// been bred and swapped in). Tells the observer.
pub(super) fn observe(
    isl: &[Island<'_, '_, '_>],
    rep: Representation<'_, '_>,
    gen: usize,
    genomes_bred: bool,
    books: &mut Books,
    observer: &mut dyn Observer,
) -> Result<Seen> {
    let max_len = isl[0].pop.max_len();
    let mut reads = Vec::with_capacity(isl.len());
    let mut counts = vec![0u32; max_len + 1];
    // Per size: (fitness, island, index) of the winner over the islands.
    let mut winner: Vec<Option<(f64, usize, u32)>> = vec![None; max_len + 1];
    for (k, i) in isl.iter().enumerate() {
        let (r, summary) = i.engine().read_generation(&i.mail, &i.sizes)?;
        let tr = &mut books.tr;
        tr.mailbox_reads += 1;
        tr.mailbox_bytes += bytes::MAILBOX;
        tr.size_summaries += 1;
        tr.size_summary_bytes += bytes::size_summary(max_len);
        for (size, b) in summary.best.iter().enumerate() {
            if let Some((f, idx)) = *b {
                if winner[size].is_none_or(|(wf, _, _)| f < wf) {
                    winner[size] = Some((f, k, idx));
                }
            }
        }
        for (c, &n) in counts.iter_mut().zip(&summary.counts) {
            *c += n;
        }
        reads.push(r);
    }
    let mut improved = Vec::new();
    for (size, w) in winner.iter().enumerate() {
        if let Some((f, k, idx)) = *w {
            if f < books.size_best[size] {
                books.size_best[size] = f;
                improved.push((f, k, idx));
            }
        }
    }
    let mut best_at: Option<(f64, usize)> = None;
    for (k, r) in reads.iter().enumerate() {
        let b = r.stats.best;
        if b.is_finite() && b < books.best.fitness && best_at.is_none_or(|(f, _)| b < f) {
            best_at = Some((b, k));
        }
    }
    let row_bytes = bytes::row(max_len);
    let mut winners: Vec<Option<(f64, Vec<crate::program::tree::Node>)>> = vec![None; improved.len()];
    for (k, i) in isl.iter().enumerate() {
        let e = i.engine();
        let mine: Vec<usize> = (0..improved.len()).filter(|&w| improved[w].1 == k).collect();
        let mut idx: Vec<u32> = mine.iter().map(|&w| improved[w].2).collect();
        let best_here = best_at.is_some_and(|(_, b)| b == k);
        if best_here {
            idx.push(reads[k].stats.best_idx);
        }
        if idx.is_empty() {
            continue;
        }
        let mut trees = e.download_trees(&i.pop, &idx)?;
        let tr = &mut books.tr;
        if best_here {
            let nodes = trees.pop().expect("one tree per index");
            tr.best_trees += 1;
            tr.best_tree_bytes += row_bytes;
            let s = &reads[k].stats;
            let genome = match (&i.ge, genomes_bred) {
                (Some(g), true) => Some(e.download_genome(&g.next, s.best_idx as usize)?),
                (Some(g), false) => Some(e.download_genome(&g.genomes, s.best_idx as usize)?),
                (None, _) => None,
            };
            if let Some(g) = &genome {
                tr.best_genome_bytes += bytes::of::<u32>(g.len());
            }
            let genome = match (rep, genome) {
                (Representation::Grammar(rep), Some(g)) => {
                    let text = crate::evolve::phenotype(rep, &g);
                    Some((g, text))
                }
                _ => None,
            };
            books.best = Best { fitness: s.best, nodes, generation: gen, genome };
        }
        tr.hall_of_fame_trees += trees.len();
        tr.hall_of_fame_bytes += trees.len() * row_bytes;
        for (w, nodes) in mine.into_iter().zip(trees) {
            winners[w] = Some((improved[w].0, nodes));
        }
    }
    let winners: Vec<(f64, Vec<crate::program::tree::Node>)> = winners.into_iter().flatten().collect();
    observer.evaluated_sizes(gen, &winners, &counts);
    Ok(Seen { reads })
}
