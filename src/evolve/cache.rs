//! The fitness cache (PonyGE2's `CACHE` and `LOOKUP_FITNESS`): each program the host loop
//! evaluates is looked up by its tree, so a duplicate (grammatical evolution maps many genomes to
//! one phenotype; elites and unchanged children come back every generation) is scored once.
//!
//! It is used only where the task says a program's fitness is a function of its tree alone and
//! the same bits whatever population it is scored in ([`Fitness::cacheable`]: the CPU backends'
//! folds, which score each program on its own, in fixed chunks of rows). The run is then the
//! run without the cache, bit for bit, only faster; a resumed run starts with an empty cache and
//! still computes the same. Keys are the trees' bytes (opcode, output slot and value bits of
//! every node), exact; when their bytes pass [`MAX_BYTES`] the cache is emptied and refills.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Fitness;
use crate::program::tree::{Population, TreeRef};

/// The most bytes of keys the cache holds before it is emptied (its entries' overhead about
/// doubles it).
pub const MAX_BYTES: usize = 64 << 20;

/// How many programs the cache answered and how many were scored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Programs whose fitness came from the cache (an earlier generation's, or a duplicate in
    /// the same population).
    pub hits: u64,
    /// Programs the task scored.
    pub evaluated: u64,
}

/// The cache of one run (shared by its islands).
#[derive(Debug, Default)]
pub struct FitnessCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Box<[u8]>, f64>,
    bytes: usize,
    stats: CacheStats,
}

/// The bytes a tree is known by: opcode, output slot and the value's bits of every node.
fn key(t: TreeRef<'_>) -> Box<[u8]> {
    let mut k = Vec::with_capacity(t.len() * 6);
    for i in 0..t.len() {
        k.push(t.op[i]);
        k.push(t.out[i]);
        k.extend_from_slice(&t.value[i].to_bits().to_le_bytes());
    }
    k.into_boxed_slice()
}

impl FitnessCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the cache has answered so far.
    pub fn stats(&self) -> CacheStats {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).stats
    }

    /// `task`'s fitness of every individual of `pop` at `generation`: the known ones from the
    /// cache, the others (each distinct tree once) scored by the task together, then kept.
    /// Rows without a program are left to the task (the loop marks them invalid).
    pub fn evaluate(&self, task: &dyn Fitness, pop: &Population, generation: usize) -> anyhow::Result<Vec<f64>> {
        let keys: Vec<Option<Box<[u8]>>> = (0..pop.size()).map(|i| (pop.len[i] > 0).then(|| key(pop.tree(i)))).collect();
        let mut fit = vec![f64::INFINITY; pop.size()];
        // The rows to score: the first row of each tree not in the cache; `from[i]` the row
        // whose score row `i` takes.
        let mut todo: Vec<usize> = Vec::new();
        let mut from: Vec<Option<usize>> = vec![None; pop.size()];
        {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let mut first: HashMap<&[u8], usize> = HashMap::new();
            for (i, k) in keys.iter().enumerate() {
                let Some(k) = k else { continue };
                if let Some(&f) = inner.map.get(k) {
                    fit[i] = f;
                } else if let Some(&j) = first.get(&k[..]) {
                    from[i] = Some(j);
                } else {
                    first.insert(k, todo.len());
                    from[i] = Some(todo.len());
                    todo.push(i);
                }
            }
        }
        let scored = if todo.is_empty() { Vec::new() } else { task.evaluate_at(&pop.gather(&todo), generation)? };
        anyhow::ensure!(scored.len() == todo.len(), "the task scored {} of {} individuals", scored.len(), todo.len());
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut hits = 0u64;
        for (i, f) in from.iter().enumerate() {
            match f {
                Some(j) => fit[i] = scored[*j],
                None if keys[i].is_some() => hits += 1,
                None => {}
            }
        }
        let duplicates = from.iter().filter(|f| f.is_some()).count() - todo.len();
        inner.stats.hits += hits + duplicates as u64;
        inner.stats.evaluated += todo.len() as u64;
        for (j, &i) in todo.iter().enumerate() {
            let k = keys[i].clone().expect("scored rows have programs");
            if inner.bytes + k.len() > MAX_BYTES {
                inner.map.clear();
                inner.bytes = 0;
            }
            inner.bytes += k.len();
            inner.map.insert(k, scored[j]);
        }
        Ok(fit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Node, Op};

    /// Fitness: the sum of the tree's constants, counting the programs it scored.
    struct Count(std::sync::atomic::AtomicUsize);

    impl Fitness for Count {
        fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
            self.0.fetch_add(pop.size(), std::sync::atomic::Ordering::Relaxed);
            Ok((0..pop.size()).map(|i| pop.tree(i).nodes().iter().filter(|n| n.op == Op::Const).map(|n| n.value as f64).sum()).collect())
        }
    }

    #[test]
    fn duplicates_and_known_programs_are_scored_once() {
        let mut pop = Population::new(5, 3, 0);
        let a = [Node::func(Op::Add), Node::constant(1.0), Node::constant(2.0)];
        let b = [Node::func(Op::Add), Node::constant(1.0), Node::constant(2.5)];
        pop.set_tree(0, &a).unwrap();
        pop.set_tree(1, &b).unwrap();
        pop.set_tree(2, &a).unwrap();
        pop.set_tree(4, &[Node::constant(-0.0)]).unwrap();
        let task = Count(0.into());
        let cache = FitnessCache::new();
        let f = cache.evaluate(&task, &pop, 0).unwrap();
        assert_eq!(&f[..3], &[3.0, 3.5, 3.0]);
        assert_eq!(f[3], f64::INFINITY, "no program: left to the loop");
        assert_eq!(task.0.load(std::sync::atomic::Ordering::Relaxed), 3, "a, b and -0 once each");
        assert_eq!(cache.stats(), CacheStats { hits: 1, evaluated: 3 });
        // The next generation: a known, and 0.0 is not -0.0 (keys are bits).
        pop.set_tree(1, &a).unwrap();
        pop.set_tree(4, &[Node::constant(0.0)]).unwrap();
        let g = cache.evaluate(&task, &pop, 1).unwrap();
        assert_eq!(&g[..3], &[3.0, 3.0, 3.0]);
        assert_eq!(task.0.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert_eq!(cache.stats(), CacheStats { hits: 4, evaluated: 4 });
    }
}
