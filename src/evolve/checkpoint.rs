//! A run's state between generations in a form that serialises exactly: floats as their bit
//! patterns (so ±inf, NaN and every last bit survive JSON), trees as opcode bytes. A
//! [`Saved`] made from a [`Snapshot`] turns back into the [`Resume`] that continues the run
//! exactly where it stopped; the task layer wraps it with the settings and writes the file.

use anyhow::{Context, Result, anyhow, ensure};
use serde::{Deserialize, Serialize};

use super::{Archive, Best, GenerationStats, Resume, Snapshot};
use crate::genome::init::Genomes;
use crate::program::Op;
use crate::program::tree::{Node, Population};

/// One node: opcode, the value's f32 bits, output slot + 1 (0: not an output node).
pub type SavedNode = (u8, u32, u8);

/// Encodes nodes.
pub fn encode_nodes(nodes: &[Node]) -> Vec<SavedNode> {
    nodes.iter().map(|n| (n.op as u8, n.value.to_bits(), n.out)).collect()
}

/// Decodes nodes; an unknown opcode is an error.
pub fn decode_nodes(nodes: &[SavedNode]) -> Result<Vec<Node>> {
    nodes
        .iter()
        .map(|&(op, value, out)| {
            let op = Op::from_code(op).ok_or_else(|| anyhow!("unknown opcode {op} in a saved tree"))?;
            Ok(Node { op, value: f32::from_bits(value), out })
        })
        .collect()
}

/// A population of trees: its shape and each row's nodes (empty: no program).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedTrees {
    /// Row width `L`.
    pub max_len: usize,
    /// Output slots (0: single output).
    pub n_outputs: usize,
    /// `[P]` trees.
    pub rows: Vec<Vec<SavedNode>>,
}

/// [`Best`], exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedBest {
    /// Fitness, f64 bits.
    pub fitness: u64,
    /// Tree.
    pub nodes: Vec<SavedNode>,
    /// Generation found.
    pub generation: usize,
    /// GE: genome and phenotype.
    pub genome: Option<(Vec<u32>, String)>,
}

/// [`GenerationStats`], exactly (floats as f64 bits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedStats {
    /// Generation.
    pub generation: usize,
    /// Best, mean fitness and mean size: f64 bits.
    pub best: u64,
    /// Mean fitness, f64 bits.
    pub mean: u64,
    /// Mean size, f64 bits.
    pub mean_size: u64,
    /// Invalid individuals.
    pub invalid: usize,
    /// Seconds (timing only).
    pub seconds: f64,
}

/// The engine's part of a checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    /// The next generation to evaluate.
    pub generation: usize,
    /// GE: genome capacity and the genomes.
    pub genomes: Option<(usize, Vec<Vec<u32>>)>,
    /// Tree GP: the trees.
    pub trees: Option<SavedTrees>,
    /// Best so far.
    pub best: SavedBest,
    /// Statistics of the generations before `generation`.
    pub history: Vec<SavedStats>,
    /// Islands (`genomes` or `trees` holds each island's rows end to end); 1 in checkpoints
    /// written before islands existed.
    #[serde(default = "one")]
    pub islands: usize,
    /// With several islands, each island's statistics of the generations before `generation`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub island_history: Vec<Vec<SavedStats>>,
    /// Two objectives: the survivors of the generation before ([`Snapshot::archive`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<SavedArchive>,
}

/// [`Archive`], exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedArchive {
    /// Their trees.
    pub trees: SavedTrees,
    /// GE: genome capacity and the genomes.
    pub genomes: Option<(usize, Vec<Vec<u32>>)>,
    /// Their fitness, f64 bits.
    pub fitness: Vec<u64>,
}

fn save_trees(p: &Population) -> SavedTrees {
    SavedTrees { max_len: p.max_len, n_outputs: p.n_outputs, rows: (0..p.size()).map(|i| encode_nodes(&p.tree(i).nodes())).collect() }
}

fn load_trees(t: &SavedTrees) -> Result<Population> {
    let mut p = Population::new(t.rows.len(), t.max_len, t.n_outputs);
    for (i, r) in t.rows.iter().enumerate() {
        if !r.is_empty() {
            p.set_tree(i, &decode_nodes(r)?).map_err(|e| anyhow!("saved tree {i}: {e}"))?;
        }
    }
    p.validate().map_err(|e| anyhow!("saved trees: {e}"))?;
    Ok(p)
}

fn save_genomes(g: &Genomes) -> (usize, Vec<Vec<u32>>) {
    (g.capacity, (0..g.size()).map(|i| g.get(i).to_vec()).collect())
}

fn load_genomes((capacity, rows): &(usize, Vec<Vec<u32>>)) -> Result<Genomes> {
    let mut g = Genomes::new(rows.len(), *capacity);
    for (i, r) in rows.iter().enumerate() {
        ensure!(r.len() <= *capacity, "saved genome {i} has {} codons, more than the capacity {capacity}", r.len());
        g.set(i, r);
    }
    Ok(g)
}

fn one() -> usize {
    1
}

fn save_stats(h: &GenerationStats) -> SavedStats {
    SavedStats {
        generation: h.generation,
        best: h.best.to_bits(),
        mean: h.mean.to_bits(),
        mean_size: h.mean_size.to_bits(),
        invalid: h.invalid,
        seconds: h.seconds,
    }
}

fn load_stats(h: &SavedStats) -> GenerationStats {
    GenerationStats {
        generation: h.generation,
        best: f64::from_bits(h.best),
        mean: f64::from_bits(h.mean),
        mean_size: f64::from_bits(h.mean_size),
        invalid: h.invalid,
        seconds: h.seconds,
    }
}

impl Saved {
    /// Copies a snapshot.
    pub fn of(s: &Snapshot<'_>) -> Saved {
        Saved {
            generation: s.generation,
            genomes: s.genomes.map(save_genomes),
            trees: s.population.map(save_trees),
            best: SavedBest {
                fitness: s.best.fitness.to_bits(),
                nodes: encode_nodes(&s.best.nodes),
                generation: s.best.generation,
                genome: s.best.genome.clone(),
            },
            history: s.history.iter().map(save_stats).collect(),
            islands: s.islands,
            island_history: s.island_history.iter().map(|g| g.iter().map(save_stats).collect()).collect(),
            archive: s.archive.map(|a| SavedArchive {
                trees: save_trees(a.trees),
                genomes: a.genomes.map(save_genomes),
                fitness: a.fitness.iter().map(|f| f.to_bits()).collect(),
            }),
        }
    }

    /// The state to resume from.
    pub fn resume(&self) -> Result<Resume> {
        let genomes = self.genomes.as_ref().map(load_genomes).transpose()?;
        let population = self.trees.as_ref().map(load_trees).transpose()?;
        ensure!(genomes.is_some() != population.is_some(), "a checkpoint holds either genomes or trees");
        ensure!(self.islands >= 1, "a checkpoint of 0 islands");
        Ok(Resume {
            generation: self.generation,
            genomes,
            population,
            best: Best {
                fitness: f64::from_bits(self.best.fitness),
                nodes: decode_nodes(&self.best.nodes).context("the best program")?,
                generation: self.best.generation,
                genome: self.best.genome.clone(),
            },
            history: self.history.iter().map(load_stats).collect(),
            islands: self.islands,
            island_history: self.island_history.iter().map(|g| g.iter().map(load_stats).collect()).collect(),
            archive: match &self.archive {
                None => None,
                Some(a) => {
                    let trees = load_trees(&a.trees).context("the saved survivors")?;
                    let genomes = a.genomes.as_ref().map(load_genomes).transpose().context("the saved survivors")?;
                    ensure!(
                        a.fitness.len() == trees.size() && genomes.as_ref().is_none_or(|g| g.size() == trees.size()),
                        "the saved survivors hold {} trees, {} fitness values and {} genomes",
                        trees.size(),
                        a.fitness.len(),
                        genomes.as_ref().map_or(0, |g| g.size())
                    );
                    Some(Archive { trees, genomes, fitness: a.fitness.iter().map(|&b| f64::from_bits(b)).collect() })
                }
            },
        })
    }
}
