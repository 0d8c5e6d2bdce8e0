//! The genotype-to-phenotype mapper (CPU reference of `kernels/map.cu`).
//!
//! A genome is a vector of `u32` codons. Expansion is leftmost non-terminal first; the choice at
//! a rule with `n` productions is `codon % n`. Single-production rules consume a codon in
//! [`Codons::Eager`] mode (PonyGE2, GRAPE-eager) and none in [`Codons::Lazy`] mode (GEVA, libGE).
//! With `max_wraps = w` the mapper may read `len * (w + 1)` codons in all, going round the genome
//! again each time it passes the end. It counts depth and nodes as PonyGE2's tree mapper does:
//! the root has depth 1, a node whose children are all terminals adds a leaf row (one more
//! level and one more node). When mapping fails, the counts are those reached at the failure,
//! as PonyGE2's `map_tree_from_genome` returns them (see `tests/fixtures/PONYGE2_SEMANTICS.md`).
//!
//! The mapper records the derivation (the chosen production of each expanded non-terminal, in
//! prefix order) so the phenotype can be rendered, or a program tree built, afterwards.

use crate::grammar::compile::{PRODUCTION_LEAF_ROW, RuleTable, SymbolKind, unpack};
use crate::grammar::template::Reading;


/// How single-production rules use codons (`--codons`, whose help the variants' doc comments
/// are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Codons {
    /// One codon at every non-terminal (PonyGE2).
    #[default]
    Eager,
    /// No codon at a rule with one production (GEVA, libGE).
    Lazy,
}

/// Mapping limits and options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapConfig {
    /// Extra passes over the genome allowed after the first (PonyGE2's `MAX_WRAPS`).
    pub max_wraps: u32,
    /// Codon use at single-production rules.
    pub codons: Codons,
    /// Largest tree depth (PonyGE2's `MAX_TREE_DEPTH`); deeper is invalid. `u32::MAX`: no limit.
    pub max_depth: u32,
    /// Largest node count (PonyGE2's `MAX_TREE_NODES`); more is invalid. `u32::MAX`: no limit.
    pub max_nodes: u32,
    /// How a derivation becomes a program: its phenotype text's meaning (the default) or its
    /// nesting. Settings written before this field existed meant the nesting.
    #[serde(default = "Reading::before_text")]
    pub reading: Reading,
}

impl Default for MapConfig {
    fn default() -> Self {
        Self { max_wraps: 0, codons: Codons::Eager, max_depth: u32::MAX, max_nodes: u32::MAX, reading: Reading::Text }
    }
}

/// Why a genome failed to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invalid {
    /// Codons (and wraps) ran out with non-terminals left.
    OutOfCodons,
    /// The tree grew past `max_depth`.
    TooDeep,
    /// The tree grew past `max_nodes`.
    TooManyNodes,
    /// The derivation grew past the cap set by [`Mapper::with_max_derivation`] (the GPU
    /// mapper's derivation buffer row); never happens without a cap.
    DerivationTooLong,
    /// More symbols were pending at once than the cap set by [`Mapper::with_max_stack`] (the
    /// GPU mapper's stack in the evolution loops); never happens without a cap.
    StackTooDeep,
}

/// The outcome of mapping one genome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// `None` when valid, else why not.
    pub invalid: Option<Invalid>,
    /// Codons read (may exceed the genome's length when wrapping).
    pub used_codons: u32,
    /// Tree depth, PonyGE2's count (root 1, leaf rows count).
    pub depth: u32,
    /// Tree nodes, PonyGE2's count (non-terminal nodes plus one per all-terminal leaf row).
    pub nodes: u32,
}

impl Mapped {
    /// True if the genome mapped to a complete program within the limits.
    pub fn valid(&self) -> bool {
        self.invalid.is_none()
    }
}

/// A reusable mapper: holds its scratch stack and the last derivation.
#[derive(Clone, Debug)]
pub struct Mapper<'t> {
    table: &'t RuleTable,
    config: MapConfig,
    /// Pending child symbols with their depth, top = next to expand.
    stack: Vec<(u16, u32)>,
    /// The last derivation: per expansion in prefix order, the global production index
    /// (non-terminals) or the chosen offset `codon % count` (codon values).
    derivation: Vec<u32>,
    /// Longest derivation allowed (`usize::MAX`: no cap).
    max_derivation: usize,
    /// Most symbols pending at once (`usize::MAX`: no cap).
    max_stack: usize,
}

impl<'t> Mapper<'t> {
    /// A mapper over `table` with `config`.
    pub fn new(table: &'t RuleTable, config: MapConfig) -> Self {
        Self {
            table,
            config,
            stack: Vec::with_capacity(64),
            derivation: Vec::with_capacity(256),
            max_derivation: usize::MAX,
            max_stack: usize::MAX,
        }
    }

    /// Caps the derivation at `n` entries: a genome whose derivation would grow longer stops
    /// with [`Invalid::DerivationTooLong`], with the counts reached then, exactly as the GPU
    /// mapper does with a derivation row of `n` entries.
    pub fn with_max_derivation(mut self, n: usize) -> Self {
        self.max_derivation = n;
        self
    }

    /// Caps the pending symbols at `n`: an expansion whose children would make the stack
    /// hold more stops with [`Invalid::StackTooDeep`], the counts reached then (the expansion
    /// itself counted), exactly as the GPU mapper of the evolution loops does with a stack of
    /// `n` entries ([`crate::genome::MAP_STACK`]).
    pub fn with_max_stack(mut self, n: usize) -> Self {
        self.max_stack = n;
        self
    }

    /// The table this mapper reads.
    pub fn table(&self) -> &'t RuleTable {
        self.table
    }

    /// The mapping settings.
    pub fn config(&self) -> MapConfig {
        self.config
    }

    /// The derivation of the last [`Self::map`] call (complete only if it was valid).
    pub fn derivation(&self) -> &[u32] {
        &self.derivation
    }

    /// Maps one genome. The derivation is kept for [`Self::render`].
    pub fn map(&mut self, genome: &[u32]) -> Mapped {
        let t = self.table;
        let cfg = self.config;
        self.stack.clear();
        self.derivation.clear();
        let budget = (genome.len() as u64) * (cfg.max_wraps as u64 + 1);
        let budget = budget.min(u32::MAX as u64) as u32;
        let (mut used, mut nodes, mut depth) = (0u32, 0u32, 0u32);
        let (mut pos, len) = (0usize, genome.len());
        let lazy = cfg.codons == Codons::Lazy;
        let mut invalid = None;
        self.stack.push((crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0), 1));
        while let Some((sym, d)) = self.stack.pop() {
            let (kind, index) = unpack(sym);
            if kind == SymbolKind::NonTerminal {
                let rule = t.rules[index];
                let n = rule.n_productions as u32;
                let choice = if lazy && n == 1 {
                    0
                } else {
                    if used >= budget {
                        invalid = Some(Invalid::OutOfCodons);
                        break;
                    }
                    let c = genome[pos];
                    used += 1;
                    pos += 1;
                    if pos == len {
                        pos = 0;
                    }
                    c % n
                };
                let p = rule.first_production as usize + choice as usize;
                if self.derivation.len() >= self.max_derivation {
                    invalid = Some(Invalid::DerivationTooLong);
                    break;
                }
                self.derivation.push(p as u32);
                nodes += 1;
                let kids = t.children_of(p);
                // PonyGE2 raises the depth when a subtree finishes; a node with children is
                // always shallower than its children's leaf rows, so only childless
                // expansions (which finish at once) can raise it.
                if kids.is_empty() {
                    let leaf_row = t.productions[p].flags & PRODUCTION_LEAF_ROW != 0;
                    nodes += leaf_row as u32;
                    depth = depth.max(d + leaf_row as u32);
                } else if self.stack.len() + kids.len() > self.max_stack {
                    invalid = Some(Invalid::StackTooDeep);
                    break;
                }
                for &k in kids.iter().rev() {
                    self.stack.push((k, d + 1));
                }
            } else {
                // A codon value: a node with one terminal leaf.
                if used >= budget {
                    invalid = Some(Invalid::OutOfCodons);
                    break;
                }
                let c = genome[pos];
                used += 1;
                pos += 1;
                if pos == len {
                    pos = 0;
                }
                let count = t.codon[index][1] as u32;
                if self.derivation.len() >= self.max_derivation {
                    invalid = Some(Invalid::DerivationTooLong);
                    break;
                }
                self.derivation.push(c % count);
                nodes += 2;
                depth = depth.max(d + 1);
            }
            if depth > cfg.max_depth {
                invalid = Some(Invalid::TooDeep);
                break;
            }
            if nodes > cfg.max_nodes {
                invalid = Some(Invalid::TooManyNodes);
                break;
            }
        }
        Mapped { invalid, used_codons: used, depth, nodes }
    }

    /// Maps `genome` as [`Self::map`] does and, when it is valid, writes into `nodes` (cleared
    /// first) one [`DerivationNode`] per derivation entry, in the derivation's prefix order:
    /// the subtree operators' view of the tree. A second walk over the derivation, so that
    /// [`Self::map`] itself stays as it is; `nodes` is left empty for an invalid genome.
    pub fn map_nodes(&mut self, genome: &[u32], nodes: &mut Vec<DerivationNode>) -> Mapped {
        nodes.clear();
        let m = self.map(genome);
        if m.valid() {
            derivation_nodes(self.table, self.config.codons, &self.derivation, nodes);
        }
        m
    }

    /// Renders the last derivation as the phenotype text, as PonyGE2 prints it.
    pub fn render(&self, out: &mut String) {
        render(self.table, &self.derivation, out);
    }
}

/// One node of a complete derivation, as [`Mapper::map_nodes`] gives it. Invariant (prefix
/// order): node `i`'s subtree is nodes `i..i + size`, and it read codons `start..end`, the
/// codons of its children's subtrees following each other from `start` (or from `start + 1`
/// where the node reads a codon itself) to `end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DerivationNode {
    /// The node's symbol: a non-terminal (its rule) or a codon value (its parameters).
    pub symbol: u16,
    /// PonyGE2 depth of the node: the root is 1.
    pub depth: u32,
    /// Codons read before the node.
    pub start: u32,
    /// Codons read once its subtree was complete.
    pub end: u32,
    /// Derivation entries of its subtree, itself included.
    pub size: u32,
}

/// The nodes of the complete derivation `derivation` of `table` read with `codons`
/// ([`Mapper::map_nodes`]) into `nodes`, which must be empty.
pub fn derivation_nodes(table: &RuleTable, codons: Codons, derivation: &[u32], nodes: &mut Vec<DerivationNode>) {
    let lazy = codons == Codons::Lazy;
    let mut stack: Vec<(u16, u32)> = vec![(crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0), 1)];
    let mut kids: Vec<u32> = Vec::with_capacity(derivation.len());
    let mut used = 0u32;
    for &entry in derivation {
        let Some((sym, depth)) = stack.pop() else { break };
        nodes.push(DerivationNode { symbol: sym, depth, start: used, end: 0, size: 1 });
        match unpack(sym) {
            (SymbolKind::NonTerminal, r) => {
                used += !(lazy && table.rules[r].n_productions == 1) as u32;
                let children = table.children_of(entry as usize);
                kids.push(children.len() as u32);
                stack.extend(children.iter().rev().map(|&k| (k, depth + 1)));
            }
            _ => {
                used += 1;
                kids.push(0);
            }
        }
    }
    // Sizes from the last node back: a node's children are the sizes on top of the stack.
    let mut sizes: Vec<u32> = Vec::new();
    for i in (0..nodes.len()).rev() {
        let mut size = 1;
        for _ in 0..kids[i] {
            size += sizes.pop().unwrap_or(0);
        }
        sizes.push(size);
        nodes[i].size = size;
        let next = i + size as usize;
        nodes[i].end = if next < nodes.len() { nodes[next].start } else { used };
    }
}

/// Renders a complete derivation of `table` into `out` (appending), through the `.pybnf`
/// filter when the grammar asks for it.
pub fn render(table: &RuleTable, derivation: &[u32], out: &mut String) {
    let start = out.len();
    table.render_derivation(derivation, 0, crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0), out);
    if table.python_mode {
        let filtered = python_filter(&out[start..]);
        out.truncate(start);
        out.push_str(&filtered);
    }
}

/// PonyGE2's `.pybnf` filter: `{:` opens an indented block, `:}` closes it (each becomes a
/// newline and two spaces per open level), so `{::}` is a newline at the current level; blank
/// lines are then dropped.
pub fn python_filter(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut level: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let (open, close) = (rest.starts_with("{:"), rest.starts_with(":}"));
        if open || close {
            level += if open { 1 } else { -1 };
            out.push('\n');
            for _ in 0..level.max(0) {
                out.push_str("  ");
            }
            rest = &rest[2..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.split('\n').filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("\n")
}
