//! BNF grammars: parse (text → rules with source positions), check (analyses and defects) and
//! compile (→ a flat [`RuleTable`] that fits GPU constant memory).
//!
//! The accepted dialect is PonyGE2's, plus libGE/GEVA's `<GECodonValue…>` symbols; the page
//! `shared/reference/grammar-dialect.md` states it, `docs/ARCHITECTURE.md` records our choices.

pub mod check;
pub mod compile;
pub mod parse;
pub mod template;

use std::fmt;

pub use check::{Analysis, check};
pub use compile::{RuleTable, SymbolKind, TABLE_LIMIT_BYTES};
pub use parse::{DEFINE_DIRECTIVE, DatasetShape, Grammar, MAX_RANGE, Production, RangeSource, Rule, Symbol, parse_file, parse_str};

/// A position in a grammar file: 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// Line, from 1.
    pub line: u32,
    /// Column in characters, from 1.
    pub col: u32,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Informational: the grammar is fine, but this is worth knowing (unit productions).
    Note,
    /// The grammar works, but probably not as intended (unreachable rules).
    Warning,
    /// The grammar cannot be used.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One message about a grammar, tied to a place in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error, warning or note.
    pub severity: Severity,
    /// Where the problem is.
    pub span: Span,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(span: Span, message: impl Into<String>) -> Self {
        Self { severity: Severity::Error, span, message: message.into() }
    }
    /// A warning at `span`.
    pub fn warning(span: Span, message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, span, message: message.into() }
    }
    /// A note at `span`.
    pub fn note(span: Span, message: impl Into<String>) -> Self {
        Self { severity: Severity::Note, span, message: message.into() }
    }
}

/// A grammar that could not be loaded: every error found, each with file, line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarError {
    /// The file name as given by the user (or `<string>`).
    pub file: String,
    /// The errors (never empty), in file order.
    pub errors: Vec<Diagnostic>,
}

impl GrammarError {
    pub(crate) fn new(file: &str, mut errors: Vec<Diagnostic>) -> Self {
        errors.sort_by_key(|d| d.span);
        Self { file: file.to_string(), errors }
    }
    pub(crate) fn single(file: &str, span: Span, message: impl Into<String>) -> Self {
        Self::new(file, vec![Diagnostic::error(span, message)])
    }
}

impl GrammarError {
    /// Errors shown in full; past these, one line counts the rest (a grammar with thousands of
    /// broken rules would otherwise print thousands of lines).
    pub const SHOWN: usize = 20;
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.errors.iter().take(Self::SHOWN).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}: {}: {}", self.file, d.span, d.severity, d.message)?;
        }
        if self.errors.len() > Self::SHOWN {
            write!(f, "\n{}: and {} more errors", self.file, self.errors.len() - Self::SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for GrammarError {}

/// A grammar read, checked and compiled: what every command that uses a grammar needs.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The parsed grammar, with `GE_RANGE:dataset_*` resolved.
    pub grammar: Grammar,
    /// Analyses and the warnings and notes found.
    pub analysis: Analysis,
    /// The compiled table.
    pub table: RuleTable,
}

/// Reads, resolves, checks and compiles the grammar at `path`.
pub fn load(path: &std::path::Path, shape: &DatasetShape) -> anyhow::Result<Loaded> {
    let parsed = parse_file(path)?;
    load_parsed(parsed, shape)
}

/// Loads a grammar given as a path or as its text: text is anything holding `::=` (a file
/// name never does), read as `<grammar text>` in error messages.
pub fn load_spec(spec: &str, shape: &DatasetShape) -> anyhow::Result<Loaded> {
    if spec.contains("::=") {
        load_parsed(parse_str(spec, "<grammar text>", false)?, shape)
    } else {
        load(std::path::Path::new(spec), shape)
    }
}

/// How messages name a grammar given to [`load_spec`]: its path, or `the grammar text`.
pub fn spec_name(spec: &str) -> &str {
    if spec.contains("::=") { "the grammar text" } else { spec }
}

/// Registers the grammar's own operators ([`parse::DEFINE_DIRECTIVE`] lines), then resolves,
/// checks and compiles it.
pub fn load_parsed(parsed: Grammar, shape: &DatasetShape) -> anyhow::Result<Loaded> {
    // The grammar's own operators, before its phenotypes are read.
    crate::program::ops::user::register(&parsed.definitions).map_err(|e| anyhow::anyhow!("{}: {DEFINE_DIRECTIVE}: {e}", parsed.file))?;
    let grammar = parsed.resolve(shape)?;
    let analysis = check(&grammar)?;
    let table = RuleTable::compile(&grammar, &analysis)?;
    Ok(Loaded { grammar, analysis, table })
}
