//! The breeding contract ([`Breeder`]) on host populations: the CPU reference of the device
//! loop's selection, variation, mapping and elitism kernels (`kernels/select.cu`, `vary.cu`,
//! `map.cu`), rayon-parallel per row or slot with each random choice addressed by its row, so
//! results do not depend on the thread count. The host generation loop (`evolve::host`) breeds
//! through it.

use anyhow::{Result, anyhow};
use rayon::prelude::*;

use crate::backend::breed::{Breeder, Grammar};
use crate::genome::init::{Genomes, InitConfig, init_genomes};
use crate::genome::subtree::{SubtreeScratch, subtree_crossover, subtree_mutate};
use crate::genome::vary::{GeCrossover, GeMutation, GeVaryConfig, crossover, int_flip};
use crate::genome::build::build_tree;
use crate::program::tree::{Node, Population};
use crate::program::vary::Bred;
use crate::program::{BreedConfig, TreeSpec, VaryConfig};
use crate::rng::{Purpose, Stream};
use crate::select::{self, Tournament};

/// The CPU side of [`Breeder`]: host [`Population`]s and [`Genomes`], fitness as `[f64]`, rows
/// as `u32` indices, the mapping state as each genome's used codons.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBreeder;

/// Maps every genome to a tree in `pop` (rows of invalid ones emptied) with `grammar`'s mapper
/// ([`Grammar::mapper`]) and returns the codons each mapping used. The CPU reference of
/// `grove_map_trees` (`kernels/map.cu`).
pub fn map_population(grammar: &Grammar<'_>, genomes: &Genomes, pop: &mut Population) -> Vec<u32> {
    let results: Vec<(u32, Option<Vec<Node>>)> = (0..genomes.size())
        .into_par_iter()
        .with_min_len(64)
        .map_init(
            || (grammar.mapper(), Vec::new(), Vec::new()),
            |(mapper, nodes, scratch), i| {
                let m = mapper.map(genomes.get(i));
                if !m.valid() {
                    return (m.used_codons, None);
                }
                match build_tree(grammar.table, grammar.templates, mapper.derivation(), grammar.map.reading, pop.max_len, nodes, scratch) {
                    Ok(()) => (m.used_codons, Some(nodes.clone())),
                    Err(_) => (m.used_codons, None),
                }
            },
        )
        .collect();
    let mut used = Vec::with_capacity(results.len());
    for (i, (u, nodes)) in results.into_iter().enumerate() {
        used.push(u);
        // A row that cannot take its tree is left empty by `set_tree`: an invalid individual.
        match nodes {
            Some(n) => {
                let _ = pop.set_tree(i, &n);
            }
            None => pop.clear(i),
        }
    }
    used
}

impl Breeder for CpuBreeder {
    type Trees = Population;
    type Genomes = Genomes;
    type Fitness = [f64];
    type Rows = Vec<u32>;
    type Mapping = Vec<u32>;
    type Bred = Vec<Bred>;

    fn random_trees(&self, spec: &TreeSpec, p: usize, seed: u64) -> Result<Population> {
        crate::program::init_population(spec, p, seed).map_err(|e| anyhow!("{e}"))
    }

    fn random_genomes(&self, grammar: &Grammar<'_>, init: &InitConfig, p: usize, capacity: usize, seed: u64) -> Result<Genomes> {
        Ok(init_genomes(grammar.table, init, grammar.map.codons, p, capacity, seed))
    }

    fn mapping(&self, _grammar: &Grammar<'_>, p: usize) -> Result<Vec<u32>> {
        Ok(vec![0; p])
    }

    fn map(&self, grammar: &Grammar<'_>, used: &mut Vec<u32>, genomes: &Genomes, trees: Option<&mut Population>) -> Result<()> {
        *used = match trees {
            Some(pop) => map_population(grammar, genomes, pop),
            None => (0..genomes.size())
                .into_par_iter()
                .with_min_len(64)
                .map_init(|| grammar.mapper(), |mapper, i| mapper.map(genomes.get(i)).used_codons)
                .collect(),
        };
        Ok(())
    }

    fn select_parents(
        &self,
        fit: &[f64],
        trees: &Population,
        n_slots: usize,
        tournament: &Tournament,
        seed: u64,
        generation: u32,
    ) -> Result<Vec<u32>> {
        let lens = &trees.len;
        let pool = select::parent_pool(fit, lens, tournament.unique);
        if tournament.bloat == select::Bloat::Nsga2 {
            let ranking = select::pareto::Ranking::of(fit, lens);
            return Ok((0..n_slots)
                .into_par_iter()
                .with_min_len(512)
                .map(|s| ranking.tournament(&pool, tournament.size, seed, generation, s) as u32)
                .collect());
        }
        Ok((0..n_slots)
            .into_par_iter()
            .with_min_len(512)
            .map(|s| tournament.pick(fit, lens, &pool, seed, generation, s) as u32)
            .collect())
    }

    fn breed(
        &self,
        parents: &Population,
        pairs: &Vec<u32>,
        children: &mut Population,
        seed: u64,
        generation: u32,
        vary: &VaryConfig,
        mix: &BreedConfig,
    ) -> Result<Vec<Bred>> {
        let pairs: Vec<[u32; 2]> = pairs.chunks_exact(2).map(|p| [p[0], p[1]]).collect();
        crate::program::breed(parents, &pairs, children, seed, generation, vary, mix).map_err(|e| anyhow!("{e}"))
    }

    fn copy_trees(&self, src: &Population, rows: &Vec<u32>, n: usize, dst: &mut Population) -> Result<()> {
        anyhow::ensure!(n <= rows.len() && n <= dst.size(), "copying {n} rows by {} indices into {}", rows.len(), dst.size());
        for (k, &r) in rows[..n].iter().enumerate() {
            dst.copy_row(k, src, r as usize);
        }
        Ok(())
    }

    fn crossover(
        &self,
        grammar: &Grammar<'_>,
        parents: &Genomes,
        used: &Vec<u32>,
        pairs: &Vec<u32>,
        children: &mut Genomes,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        anyhow::ensure!(used.len() >= parents.size(), "{} used counts for {} genomes", used.len(), parents.size());
        let capacity = children.capacity;
        let bred: Vec<(Vec<u32>, Vec<u32>)> = pairs
            .par_chunks_exact(2)
            .with_min_len(32)
            .enumerate()
            .map_init(
                || (grammar.mapper(), SubtreeScratch::default()),
                |(mapper, scratch), (j, ab)| {
                    let (a, b) = (ab[0] as usize, ab[1] as usize);
                    let (mut c0, mut c1) = (Vec::new(), Vec::new());
                    let mut s = Stream::new(seed, generation, j as u32, Purpose::Crossover);
                    match cfg.crossover_op {
                        GeCrossover::Onepoint => crossover(parents.get(a), parents.get(b), used[a], used[b], cfg, capacity, &mut s, &mut c0, &mut c1),
                        GeCrossover::Subtree => {
                            subtree_crossover(mapper, parents.get(a), parents.get(b), cfg, capacity, &mut s, scratch, &mut c0, &mut c1)
                        }
                    }
                    (c0, c1)
                },
            )
            .collect();
        let n = children.size();
        for (j, (c0, c1)) in bred.into_iter().enumerate() {
            for (k, c) in [(first_row + 2 * j, c0), (first_row + 2 * j + 1, c1)] {
                if k < n {
                    children.set(k, &c);
                }
            }
        }
        Ok(())
    }

    fn mutate(
        &self,
        grammar: &Grammar<'_>,
        genomes: &mut Genomes,
        used: &Vec<u32>,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        let n = genomes.size();
        anyhow::ensure!(used.len() >= n && first_row <= n, "{} used counts for {n} genomes from row {first_row}", used.len());
        if genomes.capacity == 0 {
            return Ok(());
        }
        let Genomes { capacity, codons, len } = genomes;
        let capacity = *capacity;
        let rows = codons.par_chunks_mut(capacity).zip(len.par_iter_mut()).enumerate().skip(first_row).with_min_len(32);
        match cfg.mutation_op {
            GeMutation::IntFlip => rows.for_each(|(k, (row, l))| {
                // As PonyGE2 does, within the child's own used codons (its mapping's).
                let g = &mut row[..*l as usize];
                let u = used[k].min(g.len() as u32);
                int_flip(g, u, cfg, &mut Stream::new(seed, generation, k as u32, Purpose::Mutate));
            }),
            GeMutation::Subtree => rows.for_each_init(
                || (grammar.mapper(), SubtreeScratch::default(), Vec::new()),
                |(mapper, scratch, g), (k, (row, l))| {
                    g.clear();
                    g.extend_from_slice(&row[..*l as usize]);
                    subtree_mutate(mapper, g, cfg, capacity, &mut Stream::new(seed, generation, k as u32, Purpose::Mutate), scratch);
                    // As Genomes::set: the new length, zero after it.
                    row[..g.len()].copy_from_slice(g);
                    row[g.len()..].fill(0);
                    *l = g.len() as u32;
                },
            ),
        }
        Ok(())
    }

    fn copy_genomes(&self, src: &Genomes, rows: &Vec<u32>, n: usize, dst: &mut Genomes) -> Result<()> {
        anyhow::ensure!(n <= rows.len() && n <= dst.size(), "copying {n} genomes by {} indices into {}", rows.len(), dst.size());
        for (k, &r) in rows[..n].iter().enumerate() {
            dst.set(k, src.get(r as usize));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genome::MapConfig;
    use crate::grammar::template::{Vars, compile};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};

    /// The GE steps (every pair crossed, the children mapped once, every child mutated) make
    /// what crossing, mapping and mutating one pair at a time makes (the host loop's earlier
    /// order, the one PonyGE2 follows).
    #[test]
    fn ge_steps_equal_breeding_one_pair_at_a_time() {
        let g = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap();
        let grammar = Grammar { table: &l.table, templates: &tpl, map: MapConfig::default(), max_derivation: 512 };
        let (p, cap, n_elite, seed, gen) = (41, 64, 2, 7, 3);
        let parents = CpuBreeder.random_genomes(&grammar, &InitConfig::default(), p, cap, seed).unwrap();
        let mut used = CpuBreeder.mapping(&grammar, p).unwrap();
        let mut pop = Population::new(p, 64, 0);
        CpuBreeder.map(&grammar, &mut used, &parents, Some(&mut pop)).unwrap();
        let pairs: Vec<u32> = (0..2 * (p - n_elite).div_ceil(2) as u32).map(|s| (s * 7 + 3) % p as u32).collect();
        let cfg = GeVaryConfig { crossover: 0.9, mutation: 0.1, ..GeVaryConfig::default() };
        let mut steps = Genomes::new(p, cap);
        CpuBreeder.crossover(&grammar, &parents, &used, &pairs, &mut steps, n_elite, &cfg, seed, gen).unwrap();
        let mut child_used = Vec::new();
        CpuBreeder.map(&grammar, &mut child_used, &steps, None).unwrap();
        CpuBreeder.mutate(&grammar, &mut steps, &child_used, n_elite, &cfg, seed, gen).unwrap();
        let mut mapper = grammar.mapper();
        for (j, ab) in pairs.chunks_exact(2).enumerate() {
            let (a, b) = (ab[0] as usize, ab[1] as usize);
            let (mut c0, mut c1) = (Vec::new(), Vec::new());
            let mut s = Stream::new(seed, gen, j as u32, Purpose::Crossover);
            crossover(parents.get(a), parents.get(b), used[a], used[b], &cfg, cap, &mut s, &mut c0, &mut c1);
            for (k, mut c) in [(n_elite + 2 * j, c0), (n_elite + 2 * j + 1, c1)] {
                let u = mapper.map(&c).used_codons.min(c.len() as u32);
                int_flip(&mut c, u, &cfg, &mut Stream::new(seed, gen, k as u32, Purpose::Mutate));
                if k < p {
                    assert_eq!(steps.get(k), &c[..], "child {k}");
                }
            }
        }
        assert!((0..n_elite).all(|k| steps.get(k).is_empty()), "the elite's rows are left to copy_genomes");
    }

    /// The breeder's subtree operators are the per-pair and per-child functions on their
    /// streams, with the loops' mapper, and the children map validly.
    #[test]
    fn subtree_steps_equal_the_operators_one_row_at_a_time() {
        let g = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap();
        let grammar = Grammar { table: &l.table, templates: &tpl, map: MapConfig { max_depth: 8, ..MapConfig::default() }, max_derivation: 512 };
        let (p, cap, n_elite, seed, gen) = (31, 256, 1, 4, 2);
        let init = InitConfig { method: crate::genome::InitMethod::PiGrow, min_depth: 3, max_depth: 6, ..InitConfig::default() };
        let parents = CpuBreeder.random_genomes(&grammar, &init, p, cap, seed).unwrap();
        let mut used = CpuBreeder.mapping(&grammar, p).unwrap();
        CpuBreeder.map(&grammar, &mut used, &parents, None).unwrap();
        let pairs: Vec<u32> = (0..2 * (p - n_elite).div_ceil(2) as u32).map(|s| (s * 5 + 1) % p as u32).collect();
        let cfg = GeVaryConfig { crossover: 0.9, mutation: 0.5, crossover_op: GeCrossover::Subtree, mutation_op: GeMutation::Subtree, ..GeVaryConfig::default() };
        let mut steps = Genomes::new(p, cap);
        CpuBreeder.crossover(&grammar, &parents, &used, &pairs, &mut steps, n_elite, &cfg, seed, gen).unwrap();
        let crossed = steps.clone();
        CpuBreeder.mutate(&grammar, &mut steps, &used, n_elite, &cfg, seed, gen).unwrap();
        let mut mapper = grammar.mapper();
        let mut scratch = SubtreeScratch::default();
        let mut n_changed = 0;
        for (j, ab) in pairs.chunks_exact(2).enumerate() {
            let (mut c0, mut c1) = (Vec::new(), Vec::new());
            let mut s = Stream::new(seed, gen, j as u32, Purpose::Crossover);
            subtree_crossover(&mut mapper, parents.get(ab[0] as usize), parents.get(ab[1] as usize), &cfg, cap, &mut s, &mut scratch, &mut c0, &mut c1);
            for (k, mut c) in [(n_elite + 2 * j, c0), (n_elite + 2 * j + 1, c1)] {
                if k >= p {
                    continue;
                }
                assert_eq!(crossed.get(k), &c[..], "crossed child {k}");
                subtree_mutate(&mut mapper, &mut c, &cfg, cap, &mut Stream::new(seed, gen, k as u32, Purpose::Mutate), &mut scratch);
                assert_eq!(steps.get(k), &c[..], "mutated child {k}");
                assert!(mapper.map(&c).valid(), "child {k}");
                n_changed += (steps.get(k) != crossed.get(k)) as usize;
            }
        }
        assert!(n_changed > 5, "{n_changed} children mutated");
    }
}
