//! Bytes of what the device loop copies between a GPU and the host, for [`super::Transfers`]:
//! each count is the copied buffers' shapes (elements) times their element sizes, through
//! [`of`], rather than a number written per buffer.

use std::mem::size_of;

use crate::backend::cuda::generation::MAILBOX_WORDS;
use crate::evolve::Archive;
use crate::genome::init::Genomes;
use crate::program::tree::Population;

/// Bytes of `n` elements of `T`.
pub(super) const fn of<T>(n: usize) -> usize {
    n * size_of::<T>()
}

/// Bytes of one node of a tree row: opcode `u8`, value `f32`, subtree size `u16`, output slot
/// `u8` ([`Population`]'s `[P × L]` columns).
const NODE: usize = of::<u8>(1) + of::<f32>(1) + of::<u16>(1) + of::<u8>(1);

/// Bytes of the mailbox: `[MAILBOX_WORDS]` `u32`.
pub(super) const MAILBOX: usize = of::<u32>(MAILBOX_WORDS);

/// Bytes of one whole tree row of `max_len` nodes and its `u16` length.
pub(super) const fn row(max_len: usize) -> usize {
    max_len * NODE + of::<u16>(1)
}

/// Bytes of a per-size summary of rows of up to `max_len` nodes: per size `0..=max_len`, the
/// best's key `u64`, its index `u32` and the size's count `u32`.
pub(super) const fn size_summary(max_len: usize) -> usize {
    (max_len + 1) * (of::<u64>(1) + of::<u32>(1) + of::<u32>(1))
}

/// Bytes of a population: `[P × L]` nodes and `[P]` `u16` lengths.
pub(super) fn population(p: &Population) -> usize {
    p.op.len() * NODE + of::<u16>(p.len.len())
}

/// Bytes of `n` fitness values (`f64`).
pub(super) const fn fitness(n: usize) -> usize {
    of::<f64>(n)
}

/// Bytes of genomes: `[P × capacity]` `u32` codons and `[P]` `u32` lengths.
pub(super) fn genomes(g: &Genomes) -> usize {
    of::<u32>(g.codons.len()) + of::<u32>(g.len.len())
}

/// Bytes of NSGA-II's survivors: their trees, fitness and (GE) genomes.
pub(super) fn archive(a: &Archive) -> usize {
    population(&a.trees) + fitness(a.fitness.len()) + a.genomes.as_ref().map_or(0, genomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts the loop reports, computed from shapes: 8 bytes a node, 2 a row's length, 16 a
    /// size, 128 the mailbox (96 before it held NSGA-II's survivors' statistics).
    #[test]
    fn counts_match_the_reported_layouts() {
        assert_eq!(NODE, 8);
        assert_eq!(MAILBOX, 128);
        assert_eq!(row(20), 20 * 8 + 2);
        assert_eq!(size_summary(20), 21 * 16);
        let p = Population::new(5, 20, 0);
        assert_eq!(population(&p), p.op.len() * 8 + p.len.len() * 2);
        let g = Genomes::new(5, 7);
        assert_eq!(genomes(&g), (g.codons.len() + g.len.len()) * 4);
    }
}
