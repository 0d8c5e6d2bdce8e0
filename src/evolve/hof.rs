//! The hall of fame: the best program of each size seen during a run (PySR's idea), kept
//! across generations, and its Pareto front of error against size. It reads every evaluated
//! population through [`Observer::evaluated`](super::Observer::evaluated).

use crate::program::tree::{Node, Population};
use crate::select;

/// The best program of one size.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Its fitness (lower is better; includes any parsimony penalty).
    pub fitness: f64,
    /// Its tree, prefix order.
    pub nodes: Vec<Node>,
    /// The generation it was first seen.
    pub generation: usize,
}

/// The best program at each size (`by_size[n]`: size `n` nodes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HallOfFame {
    /// Index: program size in nodes.
    pub by_size: Vec<Option<Entry>>,
}

impl HallOfFame {
    /// Takes in one evaluated population: a program replaces the entry of its size only when
    /// strictly better, and individuals are visited in index order, so the result does not
    /// depend on threads.
    pub fn update(&mut self, generation: usize, pop: &Population, fitness: &[f64]) {
        for (i, &f) in fitness.iter().enumerate() {
            if let Some(slot) = self.improved_slot(pop.len[i] as usize, f) {
                *slot = Some(Entry { fitness: select::key(f), nodes: pop.tree(i).nodes(), generation });
            }
        }
    }

    /// Offers one program of `generation` (a device loop's per-size winner): it replaces the
    /// entry of its size only when strictly better, as in [`Self::update`].
    pub fn offer(&mut self, generation: usize, fitness: f64, nodes: &[Node]) {
        if let Some(slot) = self.improved_slot(nodes.len(), fitness) {
            *slot = Some(Entry { fitness: select::key(fitness), nodes: nodes.to_vec(), generation });
        }
    }

    /// The entry of size `n` when a valid program of fitness `f` beats it (or it is empty).
    fn improved_slot(&mut self, n: usize, f: f64) -> Option<&mut Option<Entry>> {
        let f = select::key(f);
        if n == 0 || !f.is_finite() {
            return None;
        }
        if self.by_size.len() <= n {
            self.by_size.resize(n + 1, None);
        }
        let slot = &mut self.by_size[n];
        slot.as_ref().is_none_or(|e| f < e.fitness).then_some(slot)
    }

    /// The Pareto front: by increasing size, each entry with a loss strictly below every
    /// smaller one's. `loss` maps an entry to the error shown (e.g. the fitness less parsimony).
    pub fn front(&self, loss: impl Fn(&Entry) -> f64) -> Vec<(usize, &Entry, f64)> {
        let mut out = Vec::new();
        let mut best = f64::INFINITY;
        for (n, e) in self.by_size.iter().enumerate() {
            if let Some(e) = e {
                let l = loss(e);
                if l < best {
                    best = l;
                    out.push((n, e, l));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Op;

    #[test]
    fn offering_each_sizes_first_best_equals_updating_with_the_population() {
        // What a device loop offers (per size: the first of the lowest fitness, only when it
        // beats earlier generations) leaves the hall of fame a whole-population update leaves.
        let x = [Node::var(0)];
        let add = [Node::func(Op::Add), Node::var(0), Node::constant(1.0)];
        let mul = [Node::func(Op::Mul), Node::var(0), Node::var(0)];
        let sub = [Node::func(Op::Sub), Node::var(0), Node::constant(2.0)];
        let gens: [(&[&[Node]], &[f64]); 3] = [
            (&[&x, &add, &mul, &sub], &[3.0, 2.0, 2.0, f64::NAN]),
            (&[&sub, &add, &x, &mul], &[1.5, 1.5, 3.0, 0.5]),
            (&[&x, &x, &add, &sub], &[2.5, f64::INFINITY, 9.0, 0.5]),
        ];
        let (mut whole, mut offered) = (HallOfFame::default(), HallOfFame::default());
        let mut size_best = vec![f64::INFINITY; 4];
        for (g, (trees, fit)) in gens.iter().enumerate() {
            let mut pop = Population::new(trees.len(), 4, 0);
            for (i, t) in trees.iter().enumerate() {
                pop.set_tree(i, t).unwrap();
            }
            whole.update(g, &pop, fit);
            for n in 1..4 {
                let first_best = (0..trees.len())
                    .filter(|&i| pop.len[i] as usize == n && select::key(fit[i]).is_finite())
                    .min_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b)));
                if let Some(i) = first_best {
                    if fit[i] < size_best[n] {
                        size_best[n] = fit[i];
                        offered.offer(g, fit[i], trees[i]);
                    }
                }
            }
        }
        assert_eq!(offered, whole);
        assert_eq!(whole.by_size[3].as_ref().unwrap().nodes, mul, "mul at 0.5 in generation 1 beats sub's later 0.5");
    }

    #[test]
    fn keeps_the_best_of_each_size_and_a_strict_front() {
        let mut pop = Population::new(4, 8, 0);
        let x = [Node::var(0)];
        let add = [Node::func(Op::Add), Node::var(0), Node::constant(1.0)];
        let mul = [Node::func(Op::Mul), Node::var(0), Node::var(0)];
        pop.set_tree(0, &x).unwrap();
        pop.set_tree(1, &add).unwrap();
        pop.set_tree(2, &mul).unwrap();
        let mut h = HallOfFame::default();
        h.update(0, &pop, &[3.0, 2.0, 1.0, f64::INFINITY]);
        assert_eq!(h.by_size[3].as_ref().unwrap().nodes, mul, "the better of two size-3 programs");
        // A tie does not replace; a worse one does not either.
        h.update(1, &pop, &[3.0, 1.0, 5.0, 0.0]);
        assert_eq!(h.by_size[3].as_ref().unwrap().generation, 0);
        let front = h.front(|e| e.fitness);
        assert_eq!(front.iter().map(|(n, _, l)| (*n, *l)).collect::<Vec<_>>(), [(1, 3.0), (3, 1.0)]);
        // A larger program that is not better is off the front.
        pop.set_tree(3, &[Node::func(Op::Sin), Node::func(Op::Add), Node::var(0), Node::var(0)]).unwrap();
        h.update(2, &pop, &[9.0, 9.0, 9.0, 2.0]);
        assert_eq!(h.front(|e| e.fitness).len(), 2);
    }
}
