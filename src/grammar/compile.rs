//! Compiles a checked grammar into a [`RuleTable`]: flat `#[repr(C)]` arrays that the CPU
//! mapper walks and that the GPU mapper copies, as one blob, into constant memory.
//!
//! Device layout (all little-endian, every section 4-byte aligned, offsets in bytes from the
//! start of the blob, see [`TableHeader`]):
//!
//! | section | element | count |
//! |---|---|---|
//! | header | [`TableHeader`], 32 bytes | 1 |
//! | rules | [`RuleEntry`], 8 bytes | `n_rules` |
//! | productions | [`ProductionEntry`], 12 bytes | `n_productions` |
//! | children | `u16` symbol, non-terminals and codon values only, in order | `n_children` |
//! | symbols | `u16` symbol, every symbol in order (for rendering and tree building) | `n_symbols` |
//! | codon parameters | `[i32; 2]`: `(lo, count)` for a range, `(first value, count)` for a set | `n_codon` |
//!
//! A symbol is a `u16`: the top two bits are its [`SymbolKind`], the low 14 bits an index
//! (terminal, rule, or codon parameter). Terminal text stays on the host: the device never
//! renders. Rule 0 is the start rule. A table larger than [`TABLE_LIMIT_BYTES`] is an error.

use super::check::Analysis;
use super::{Diagnostic, Grammar, GrammarError, Span, Symbol};

/// GPU constant memory: the compiled table must fit in it.
pub const TABLE_LIMIT_BYTES: usize = 64 * 1024;

/// Largest index a symbol can carry (14 bits).
const MAX_INDEX: usize = (1 << 14) - 1;

/// What a `u16` symbol refers to (its top two bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum SymbolKind {
    /// Index into the terminal texts.
    Terminal = 0,
    /// Index of a rule.
    NonTerminal = 1,
    /// Index of a codon-parameter pair `(lo, count)`: emits `lo + codon % count`.
    CodonRange = 2,
    /// Index of a codon-parameter pair `(first, count)`: emits set value `first + codon % count`.
    CodonSet = 3,
}

/// Bytes of a rule table of these counts in the device layout (header, sections, alignment),
/// for [`RuleTable::device_size_bytes`] and for refusing a grammar before it is analysed.
pub(crate) fn table_bytes(rules: usize, productions: usize, children: usize, symbols: usize, codon: usize) -> usize {
    let align4 = |x: usize| x.div_ceil(4) * 4;
    let off_children = size_of::<TableHeader>() + rules * size_of::<RuleEntry>() + productions * size_of::<ProductionEntry>();
    let off_symbols = align4(off_children + children * 2);
    align4(off_symbols + symbols * 2) + codon * 8
}

/// Packs a kind and an index into a symbol.
#[inline]
pub const fn symbol(kind: SymbolKind, index: u16) -> u16 {
    ((kind as u16) << 14) | index
}

/// Splits a symbol into its kind and index.
#[inline]
pub fn unpack(sym: u16) -> (SymbolKind, usize) {
    let kind = match sym >> 14 {
        0 => SymbolKind::Terminal,
        1 => SymbolKind::NonTerminal,
        2 => SymbolKind::CodonRange,
        _ => SymbolKind::CodonSet,
    };
    (kind, (sym & MAX_INDEX as u16) as usize)
}

/// Counts and byte offsets of the blob's sections.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableHeader {
    /// Number of rules; rule 0 is the start rule.
    pub n_rules: u32,
    /// Number of productions over all rules.
    pub n_productions: u32,
    /// Number of child symbols (non-terminals and codon values).
    pub n_children: u32,
    /// Number of symbols.
    pub n_symbols: u32,
    /// Number of codon-parameter pairs.
    pub n_codon: u32,
    /// Byte offset of the productions section (rules start right after the header).
    pub off_productions: u32,
    /// Byte offset of the children section.
    pub off_children: u32,
    /// Byte offset of the symbols section; codon parameters follow it, 4-byte aligned.
    pub off_symbols: u32,
}
const _: () = assert!(size_of::<TableHeader>() == 32);

/// One rule: its productions are `first_production .. first_production + n_productions`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleEntry {
    /// Index of the rule's first production.
    pub first_production: u16,
    /// Number of productions (at least 1).
    pub n_productions: u16,
    /// Smallest derivation depth from this rule (see `check`).
    pub min_depth: u16,
    /// Bit 0: recursive. Bit 1: a single production (unit rule).
    pub flags: u16,
}
const _: () = assert!(size_of::<RuleEntry>() == 8);

/// [`RuleEntry::flags`] bit: the rule can derive itself.
pub const RULE_RECURSIVE: u16 = 1;
/// [`RuleEntry::flags`] bit: the rule has one production.
pub const RULE_UNIT: u16 = 2;

/// One production: symbols `first_symbol .. +n_symbols`, children `first_child .. +n_children`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProductionEntry {
    /// Index of the first symbol.
    pub first_symbol: u16,
    /// Number of symbols.
    pub n_symbols: u16,
    /// Index of the first child symbol.
    pub first_child: u16,
    /// Number of child symbols (non-terminals and codon values); 0 makes a leaf row.
    pub n_children: u16,
    /// Smallest derivation depth starting with this production.
    pub min_depth: u16,
    /// Bit 0: recursive (one of its non-terminals lies on a cycle). Bit 1: leaf row.
    pub flags: u16,
}
const _: () = assert!(size_of::<ProductionEntry>() == 12);

/// [`ProductionEntry::flags`] bit: a non-terminal of the production is recursive.
pub const PRODUCTION_RECURSIVE: u16 = 1;
/// [`ProductionEntry::flags`] bit: expanding this production adds a leaf row to the depth and
/// node counts. Set when it has no children, unless (PonyGE2 compares text here) one of its
/// terminals spells a defined non-terminal, as `'<e>'` does in a grammar defining `<e>`.
pub const PRODUCTION_LEAF_ROW: u16 = 2;

/// A compiled grammar: flat tables for the mappers plus host-side names and texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleTable {
    /// `[n_rules]`; rule 0 is the start rule.
    pub rules: Vec<RuleEntry>,
    /// `[n_productions]`, grouped by rule.
    pub productions: Vec<ProductionEntry>,
    /// `[n_children]` child symbols of all productions.
    pub children: Vec<u16>,
    /// `[n_symbols]` all symbols of all productions.
    pub symbols: Vec<u16>,
    /// `[n_codon][2]` codon parameters.
    pub codon: Vec<[i32; 2]>,
    /// Host only: terminal texts, interned (each distinct text once).
    pub terminals: Vec<String>,
    /// Host only: the values of `<GECodonValue{…}>` sets, indexed by codon parameters.
    pub set_values: Vec<String>,
    /// Host only: rule names, for messages.
    pub rule_names: Vec<String>,
    /// Host only: render the phenotype through PonyGE2's `.pybnf` indentation filter.
    pub python_mode: bool,
}

impl RuleTable {
    /// Compiles a checked, resolved grammar (no `GE_RANGE:dataset_*` left).
    pub fn compile(g: &Grammar, a: &Analysis) -> Result<RuleTable, GrammarError> {
        let mut errors = Vec::new();
        if let Some(p) = g.rules.iter().flat_map(|r| &r.productions).find(|p| p.dataset_range.is_some()) {
            errors.push(Diagnostic::error(
                p.span,
                "GE_RANGE:dataset_* must be resolved with the data set's shape before compiling",
            ));
            return Err(GrammarError::new(&g.file, errors));
        }
        let mut t = RuleTable {
            rules: Vec::with_capacity(g.rules.len()),
            productions: Vec::new(),
            children: Vec::new(),
            symbols: Vec::new(),
            codon: Vec::new(),
            terminals: Vec::new(),
            set_values: Vec::new(),
            rule_names: g.rules.iter().map(|r| r.name.clone()).collect(),
            python_mode: g.python_mode,
        };
        let mut term_index = std::collections::HashMap::<&str, usize>::new();
        let rule_index = g.rule_indices();
        let limit = |what: &str, n: usize, span: Span, errors: &mut Vec<Diagnostic>| {
            if n > MAX_INDEX {
                errors.push(Diagnostic::error(
                    span,
                    format!("too many {what} for the rule table: at most {MAX_INDEX}"),
                ));
                false
            } else {
                true
            }
        };
        if !limit("rules", g.rules.len(), g.rules[0].span, &mut errors) {
            return Err(GrammarError::new(&g.file, errors));
        }
        for (r, rule) in g.rules.iter().enumerate() {
            let recursive = if a.recursive[r] { RULE_RECURSIVE } else { 0 };
            let unit = if rule.productions.len() == 1 { RULE_UNIT } else { 0 };
            t.rules.push(RuleEntry {
                first_production: t.productions.len() as u16,
                n_productions: rule.productions.len() as u16,
                min_depth: a.min_depth[r].min(u16::MAX as u32) as u16,
                flags: recursive | unit,
            });
            for (k, p) in rule.productions.iter().enumerate() {
                let entry = ProductionEntry {
                    first_symbol: t.symbols.len() as u16,
                    n_symbols: p.symbols.len() as u16,
                    first_child: t.children.len() as u16,
                    n_children: 0,
                    min_depth: a.production_min_depth[r][k].min(u16::MAX as u32) as u16,
                    flags: if a.production_recursive[r][k] { PRODUCTION_RECURSIVE } else { 0 },
                };
                let mut n_children = 0u16;
                for s in &p.symbols {
                    let sym = match s {
                        Symbol::Terminal { text, span } => {
                            let next = t.terminals.len();
                            let i = *term_index.entry(text.as_str()).or_insert(next);
                            if i == next {
                                if !limit("distinct terminals", next + 1, *span, &mut errors) {
                                    // Once is enough: every later terminal would repeat it.
                                    return Err(GrammarError::new(&g.file, errors));
                                }
                                t.terminals.push(text.clone());
                            }
                            symbol(SymbolKind::Terminal, i as u16)
                        }
                        Symbol::NonTerminal { name, .. } => {
                            let i = rule_index[name.as_str()];
                            symbol(SymbolKind::NonTerminal, i as u16)
                        }
                        Symbol::CodonRange { lo, hi, span } => {
                            let count = hi - lo + 1;
                            if i32::try_from(*lo).is_err() || i32::try_from(count).is_err() {
                                errors.push(Diagnostic::error(
                                    *span,
                                    "<GECodonValue[lo,hi]> bounds must fit in 32-bit integers",
                                ));
                                continue;
                            }
                            t.codon.push([*lo as i32, count as i32]);
                            symbol(SymbolKind::CodonRange, (t.codon.len() - 1) as u16)
                        }
                        Symbol::CodonSet { values, .. } => {
                            t.codon.push([t.set_values.len() as i32, values.len() as i32]);
                            t.set_values.extend(values.iter().cloned());
                            symbol(SymbolKind::CodonSet, (t.codon.len() - 1) as u16)
                        }
                    };
                    if unpack(sym).0 != SymbolKind::Terminal {
                        t.children.push(sym);
                        n_children += 1;
                    }
                    t.symbols.push(sym);
                }
                let lookalike = p.symbols.iter().any(|s| match s {
                    Symbol::Terminal { text, .. } => text
                        .strip_prefix('<')
                        .and_then(|t| t.strip_suffix('>'))
                        .is_some_and(|name| rule_index.contains_key(name)),
                    _ => false,
                });
                let leaf_row = if n_children == 0 && !lookalike { PRODUCTION_LEAF_ROW } else { 0 };
                t.productions.push(ProductionEntry { n_children, flags: entry.flags | leaf_row, ..entry });
            }
        }
        let span0 = g.rules[0].span;
        limit("codon values", t.codon.len(), span0, &mut errors);
        if t.productions.len() > u16::MAX as usize || t.symbols.len() > u16::MAX as usize {
            errors.push(Diagnostic::error(span0, "grammar too large: over 65535 productions or symbols"));
        }
        if errors.is_empty() {
            let size = t.device_size_bytes();
            if size > TABLE_LIMIT_BYTES {
                errors.push(Diagnostic::error(
                    span0,
                    format!(
                        "the compiled rule table is {size} bytes ({} rules, {} productions, {} \
                         symbols); GPU constant memory holds {TABLE_LIMIT_BYTES}",
                        t.rules.len(),
                        t.productions.len(),
                        t.symbols.len()
                    ),
                ));
            }
        }
        if errors.is_empty() { Ok(t) } else { Err(GrammarError::new(&g.file, errors)) }
    }

    /// The header describing the device blob's sections.
    pub fn header(&self) -> TableHeader {
        let align4 = |x: usize| x.div_ceil(4) * 4;
        let off_rules = size_of::<TableHeader>();
        let off_productions = off_rules + self.rules.len() * size_of::<RuleEntry>();
        let off_children = off_productions + self.productions.len() * size_of::<ProductionEntry>();
        let off_symbols = align4(off_children + self.children.len() * 2);
        TableHeader {
            n_rules: self.rules.len() as u32,
            n_productions: self.productions.len() as u32,
            n_children: self.children.len() as u32,
            n_symbols: self.symbols.len() as u32,
            n_codon: self.codon.len() as u32,
            off_productions: off_productions as u32,
            off_children: off_children as u32,
            off_symbols: off_symbols as u32,
        }
    }

    /// Bytes the table takes in GPU constant memory (the size of [`Self::to_device_blob`]).
    pub fn device_size_bytes(&self) -> usize {
        table_bytes(self.rules.len(), self.productions.len(), self.children.len(), self.symbols.len(), self.codon.len())
    }

    /// The table as one byte blob in the layout documented at the top of this file.
    pub fn to_device_blob(&self) -> Vec<u8> {
        let h = self.header();
        let mut out = Vec::with_capacity(self.device_size_bytes());
        for v in [h.n_rules, h.n_productions, h.n_children, h.n_symbols, h.n_codon, h.off_productions, h.off_children, h.off_symbols] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for r in &self.rules {
            for v in [r.first_production, r.n_productions, r.min_depth, r.flags] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        for p in &self.productions {
            for v in [p.first_symbol, p.n_symbols, p.first_child, p.n_children, p.min_depth, p.flags] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        for c in &self.children {
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.resize(h.off_symbols as usize, 0);
        for s in &self.symbols {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.resize(out.len().div_ceil(4) * 4, 0);
        for [a, b] in &self.codon {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
        out
    }

    /// Productions of rule `r`.
    #[inline]
    pub fn productions_of(&self, r: usize) -> &[ProductionEntry] {
        let e = self.rules[r];
        &self.productions[e.first_production as usize..][..e.n_productions as usize]
    }

    /// The symbols of production `p` (global index).
    #[inline]
    pub fn symbols_of(&self, p: usize) -> &[u16] {
        let e = self.productions[p];
        &self.symbols[e.first_symbol as usize..][..e.n_symbols as usize]
    }

    /// Appends the text that `symbol` derives, its expansions read from `derivation` starting
    /// at entry `from` (the mapper's record: a production per expanded non-terminal, an offset
    /// per codon value, prefix order). Returns the entry after the last one used.
    pub fn render_derivation(&self, derivation: &[u32], from: usize, symbol: u16, out: &mut String) -> usize {
        let mut stack: Vec<u16> = vec![symbol];
        let mut next = from;
        while let Some(sym) = stack.pop() {
            let (kind, index) = unpack(sym);
            match kind {
                SymbolKind::Terminal => out.push_str(&self.terminals[index]),
                SymbolKind::NonTerminal => {
                    stack.extend(self.symbols_of(derivation[next] as usize).iter().rev());
                    next += 1;
                }
                SymbolKind::CodonRange => {
                    out.push_str(&(self.codon[index][0] as i64 + derivation[next] as i64).to_string());
                    next += 1;
                }
                SymbolKind::CodonSet => {
                    out.push_str(&self.set_values[self.codon[index][0] as usize + derivation[next] as usize]);
                    next += 1;
                }
            }
        }
        next
    }

    /// The child symbols (non-terminals and codon values) of production `p`.
    #[inline]
    pub fn children_of(&self, p: usize) -> &[u16] {
        let e = self.productions[p];
        &self.children[e.first_child as usize..][..e.n_children as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{check, parse_str};

    fn table(text: &str) -> Result<RuleTable, GrammarError> {
        let g = parse_str(text, "g.bnf", false).unwrap();
        let a = check(&g)?;
        RuleTable::compile(&g, &a)
    }

    #[test]
    fn layout_of_a_small_grammar() {
        let t = table("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0").unwrap();
        assert_eq!(t.rules.len(), 3);
        assert_eq!(t.productions.len(), 7);
        assert_eq!(t.productions_of(1).len(), 3);
        assert_eq!(t.children_of(0), [symbol(SymbolKind::NonTerminal, 1), symbol(SymbolKind::NonTerminal, 0), symbol(SymbolKind::NonTerminal, 0)]);
        // "(", " " twice, ")" interned: the space is stored once.
        assert_eq!(t.terminals[..3], ["(", " ", ")"]);
        assert_eq!(t.symbols_of(0).len(), 7);
        let blob = t.to_device_blob();
        assert_eq!(blob.len(), t.device_size_bytes());
        assert_eq!(u32::from_le_bytes(blob[0..4].try_into().unwrap()), 3);
        let h = t.header();
        let p0 = h.off_productions as usize;
        assert_eq!(u16::from_le_bytes(blob[p0 + 6..p0 + 8].try_into().unwrap()), 3); // n_children
    }

    #[test]
    fn oversized_table_is_a_clear_error() {
        let mut text = String::from("<s> ::= <a>");
        for i in 0..6000 {
            text.push_str(&format!(" | t{i} <a>"));
        }
        text.push_str("\n<a> ::= x");
        // The check refuses it by its counts, before analysing it.
        let e = table(&text).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("bytes") && msg.contains("65536"), "{msg}");
        assert!(msg.contains("2 rules, 6002 productions and 12002 symbols"), "{msg}");
    }

    #[test]
    fn the_size_bound_before_analysis_is_the_compiled_size() {
        // Rules, productions, non-terminals, codon values and text: the bound the check uses is
        // the table's exact size once the grammar is resolved.
        let text = "<e> ::= <e> + <e> | <v> | <GECodonValue[0,9]> | <GECodonValue{1,2.5}>\n<v> ::= x | y | z\n";
        let t = table(text).unwrap();
        let g = parse_str(text, "g.bnf", false).unwrap();
        let symbols: usize = g.rules.iter().flat_map(|r| &r.productions).map(|p| p.symbols.len()).sum();
        assert_eq!(table_bytes(2, 7, 5, symbols, 2), t.device_size_bytes());
    }

    // A rule with 120,000 alternatives printed the same error 103,617 times (10 MB).
    #[test]
    fn too_many_terminals_is_one_error() {
        let g = crate::grammar::Grammar {
            definitions: Vec::new(),
            file: "g.bnf".into(),
            rules: vec![crate::grammar::parse_str(
                &format!("<s> ::= {}", (0..17_000).map(|i| format!("t{i}")).collect::<Vec<_>>().join(" | ")),
                "g.bnf",
                false,
            )
            .unwrap()
            .rules
            .remove(0)],
            python_mode: false,
            warnings: Vec::new(),
        };
        // The check would refuse it by its size; compile alone must still say it once.
        let a = super::super::check::Analysis {
            min_depth: vec![2],
            production_min_depth: vec![vec![2; 17_000]],
            recursive: vec![false],
            production_recursive: vec![vec![false; 17_000]],
            reachable: vec![true],
            children: vec![vec![Vec::new(); 17_000]],
            diagnostics: Vec::new(),
        };
        let e = RuleTable::compile(&g, &a).unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert!(e.errors[0].message.contains("too many distinct terminals"), "{e}");
    }
}
