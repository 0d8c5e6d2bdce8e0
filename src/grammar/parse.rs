//! Parser for BNF grammars in PonyGE2's dialect (with libGE/GEVA's `<GECodonValue…>` symbols).
//!
//! The reading follows PonyGE2's `grammar.py` token for token, so that a grammar that runs there
//! reads the same here: a rule runs until the next `<name> ::=`; productions split on unquoted
//! `|` and on `#` comments; a production is stripped of surrounding whitespace and then read as
//! a sequence of parts (newlines with the spaces around them, plain text, quoted text,
//! `<non-terminal>`, runs of lone `<`). Consecutive terminal parts join into one terminal, and
//! every terminal part goes through Python's `unicode-escape` decoding. Where PonyGE2 silently
//! drops text (an unterminated quote, text before the first rule) we report it instead.

use std::path::Path;

use super::{Diagnostic, GrammarError, Span};

/// The shape of the data set, for `GE_RANGE:dataset_n_vars`, `…_n_is` and `…_n_os`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatasetShape {
    /// Number of input variables (columns of `x`).
    pub n_vars: Option<u32>,
    /// Number of inputs (PonyGE2's `n_is`, for problems whose inputs differ from variables).
    pub n_is: Option<u32>,
    /// Number of outputs (classes, actuators).
    pub n_os: Option<u32>,
}

/// Which data-set dimension a `GE_RANGE:dataset_*` production takes its size from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeSource {
    /// `GE_RANGE:dataset_n_vars`.
    Vars,
    /// `GE_RANGE:dataset_n_is`.
    Inputs,
    /// `GE_RANGE:dataset_n_os`.
    Outputs,
}

impl RangeSource {
    /// The name as written after `GE_RANGE:`.
    pub fn name(self) -> &'static str {
        match self {
            RangeSource::Vars => "dataset_n_vars",
            RangeSource::Inputs => "dataset_n_is",
            RangeSource::Outputs => "dataset_n_os",
        }
    }
}

/// One symbol of a production.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Symbol {
    /// Literal text, escapes already decoded. May be empty (`""`).
    Terminal {
        /// The text emitted into the phenotype.
        text: String,
        /// Where the terminal starts.
        span: Span,
    },
    /// A reference to a rule, by name (without the angle brackets).
    NonTerminal {
        /// The rule's name, e.g. `e` for `<e>`.
        name: String,
        /// Where the `<` is.
        span: Span,
    },
    /// libGE's `<GECodonValue[lo,hi]>`: consumes one codon, emits `lo + codon % (hi - lo + 1)`.
    CodonRange {
        /// Smallest value.
        lo: i64,
        /// Largest value (inclusive).
        hi: i64,
        /// Where the `<` is.
        span: Span,
    },
    /// libGE's `<GECodonValue{x,y,z}>`: consumes one codon, emits `values[codon % len]`.
    CodonSet {
        /// The choices, as text.
        values: Vec<String>,
        /// Where the `<` is.
        span: Span,
    },
}

impl Symbol {
    /// Where the symbol starts in the file.
    pub fn span(&self) -> Span {
        match self {
            Symbol::Terminal { span, .. }
            | Symbol::NonTerminal { span, .. }
            | Symbol::CodonRange { span, .. }
            | Symbol::CodonSet { span, .. } => *span,
        }
    }
}

/// One alternative of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Production {
    /// Where the production's first character is.
    pub span: Span,
    /// The symbols, in order. Empty only for an unresolved `dataset_range`.
    pub symbols: Vec<Symbol>,
    /// `Some` for a `GE_RANGE:dataset_*` production that [`Grammar::resolve`] has not expanded
    /// yet; it stands for the productions `0 | 1 | … | n-1`.
    pub dataset_range: Option<RangeSource>,
}

impl Production {
    /// The non-terminal names this production refers to, with their positions.
    pub fn non_terminals(&self) -> impl Iterator<Item = (&str, Span)> {
        self.symbols.iter().filter_map(|s| match s {
            Symbol::NonTerminal { name, span } => Some((name.as_str(), *span)),
            _ => None,
        })
    }
}

/// A rule `<name> ::= p1 | p2 | …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The non-terminal's name, without angle brackets.
    pub name: String,
    /// Where the `<` of the rule's left-hand side is.
    pub span: Span,
    /// The alternatives, in file order (`GE_RANGE:n` already expanded).
    pub productions: Vec<Production>,
}

/// A parsed grammar: rules in file order, the first being the start symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    /// The file name as given (used in messages).
    pub file: String,
    /// The rules in file order; `rules[0]` is the start rule.
    pub rules: Vec<Rule>,
    /// True for `.pybnf` files: the phenotype is rendered through the `{: :} {::}` filter.
    pub python_mode: bool,
    /// Warnings found while reading (text outside rules, and the like).
    pub warnings: Vec<Diagnostic>,
    /// Operators of the grammar's own, one per [`DEFINE_DIRECTIVE`] line, e.g.
    /// `#grove:define softsign(x) = x / (1 + abs(x))` (PonyGE2 reads the line as a comment).
    pub definitions: Vec<String>,
}

/// The start of a line that defines an operator for the grammar's phenotypes.
pub const DEFINE_DIRECTIVE: &str = "#grove:define";

impl Grammar {
    /// Index of the rule named `name`, if defined (the first definition if defined twice).
    pub fn rule_index(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|r| r.name == name)
    }

    /// Every rule name and the index of its first definition, for look-ups in a loop over the
    /// grammar ([`Self::rule_index`] is a linear search).
    pub fn rule_indices(&self) -> std::collections::HashMap<&str, usize> {
        let mut index = std::collections::HashMap::with_capacity(self.rules.len());
        for (i, r) in self.rules.iter().enumerate() {
            index.entry(r.name.as_str()).or_insert(i);
        }
        index
    }

    /// True if some production is a `GE_RANGE:dataset_*` still waiting for the data set's shape.
    pub fn needs_dataset(&self) -> bool {
        self.rules.iter().flat_map(|r| &r.productions).any(|p| p.dataset_range.is_some())
    }

    /// Expands every `GE_RANGE:dataset_*` production with the data set's dimensions.
    /// A dimension the grammar uses but `shape` lacks is an error at the production.
    pub fn resolve(&self, shape: &DatasetShape) -> Result<Grammar, GrammarError> {
        let mut out = self.clone();
        let mut errors = Vec::new();
        for rule in &mut out.rules {
            let mut productions = Vec::with_capacity(rule.productions.len());
            for p in rule.productions.drain(..) {
                let Some(source) = p.dataset_range else {
                    productions.push(p);
                    continue;
                };
                let n = match source {
                    RangeSource::Vars => shape.n_vars,
                    RangeSource::Inputs => shape.n_is,
                    RangeSource::Outputs => shape.n_os,
                };
                match n {
                    Some(n) if n as usize > MAX_RANGE => errors.push(Diagnostic::error(
                        p.span,
                        format!("GE_RANGE:{} would make {n} choices, more than the {MAX_RANGE} a rule may have", source.name()),
                    )),
                    Some(n) => productions.extend(range_productions(n as u64, p.span)),
                    None => errors.push(Diagnostic::error(
                        p.span,
                        format!(
                            "GE_RANGE:{} takes its size from the data set, and none was given",
                            source.name()
                        ),
                    )),
                }
            }
            rule.productions = productions;
        }
        if errors.is_empty() { Ok(out) } else { Err(GrammarError::new(&self.file, errors)) }
    }
}

/// The most choices a `GE_RANGE` may make (a literal count or a data set's dimension).
pub const MAX_RANGE: usize = 1 << 16;

/// Reads and parses a grammar file. `.pybnf` files render with the Python indentation filter.
pub fn parse_file(path: &Path) -> anyhow::Result<Grammar> {
    let text = crate::input::read_text(path, "grammar", crate::input::GRAMMAR_BYTES)?;
    let name = path.display().to_string();
    let python_mode = path.to_string_lossy().ends_with("pybnf");
    Ok(parse_str(&text, &name, python_mode)?)
}

/// Parses grammar text. `file` names it in messages.
pub fn parse_str(text: &str, file: &str, python_mode: bool) -> Result<Grammar, GrammarError> {
    // Python's universal newlines, as PonyGE2 reads files: `\r\n` and a lone `\r` are `\n`.
    if text.contains('\r') {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        return Parser::new(&text, file).run(python_mode);
    }
    Parser::new(text, file).run(python_mode)
}

/// Python's `str.isspace()` for one character (what `str.strip()` removes).
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

fn range_productions(n: u64, span: Span) -> impl Iterator<Item = Production> {
    (0..n).map(move |i| Production {
        span,
        symbols: vec![Symbol::Terminal { text: i.to_string(), span }],
        dataset_range: None,
    })
}

struct Parser<'a> {
    file: &'a str,
    chars: Vec<char>,
    spans: Vec<Span>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

/// A `<name> ::=` found in the text.
struct RuleStart {
    /// Index of the `<`.
    at: usize,
    /// Index just past `::=`.
    body: usize,
    name: String,
}

impl<'a> Parser<'a> {
    fn new(text: &str, file: &'a str) -> Self {
        let mut chars = Vec::with_capacity(text.len());
        let mut spans = Vec::with_capacity(text.len() + 1);
        let (mut line, mut col) = (1u32, 1u32);
        for c in text.chars() {
            chars.push(c);
            spans.push(Span { line, col });
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        spans.push(Span { line, col }); // end of file
        Self { file, chars, spans, errors: Vec::new(), warnings: Vec::new() }
    }

    fn run(mut self, python_mode: bool) -> Result<Grammar, GrammarError> {
        let starts = self.rule_starts();
        if starts.is_empty() {
            return Err(GrammarError::single(
                self.file,
                Span { line: 1, col: 1 },
                "no rules found: a rule looks like `<name> ::= production | production`",
            ));
        }
        self.warn_stray_text(0, starts[0].at);
        let mut rules = Vec::with_capacity(starts.len());
        for (k, start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).map_or(self.chars.len(), |s| s.at);
            let errors_before = self.errors.len();
            let productions = self.productions(start.body, end);
            if productions.is_empty() && self.errors.len() == errors_before {
                self.errors.push(Diagnostic::error(
                    self.spans[start.at],
                    format!("rule <{}> has no productions", start.name),
                ));
            }
            rules.push(Rule { name: start.name.clone(), span: self.spans[start.at], productions });
        }
        if !self.errors.is_empty() {
            return Err(GrammarError::new(self.file, self.errors));
        }
        let definitions = self
            .chars
            .iter()
            .collect::<String>()
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix(DEFINE_DIRECTIVE))
            .map(|d| d.trim().to_string())
            .collect();
        Ok(Grammar { file: self.file.to_string(), rules, python_mode, warnings: self.warnings, definitions })
    }

    /// If a non-terminal name `<…>` starts at `i`, returns (name, index past `>`).
    /// Names are PonyGE2's `<[^>|\s]+>`.
    fn name_at(&self, i: usize) -> Option<(String, usize)> {
        if self.chars.get(i) != Some(&'<') {
            return None;
        }
        let mut j = i + 1;
        while let Some(&c) = self.chars.get(j) {
            if c == '>' {
                return (j > i + 1).then(|| (self.chars[i + 1..j].iter().collect(), j + 1));
            }
            if c == '|' || c.is_whitespace() {
                return None;
            }
            j += 1;
        }
        None
    }

    /// Finds every `<name> ::=` outside comments and quotes.
    fn rule_starts(&self) -> Vec<RuleStart> {
        let mut out = Vec::new();
        let n = self.chars.len();
        let mut i = 0;
        while i < n {
            match self.chars[i] {
                '#' => {
                    while i < n && self.chars[i] != '\n' {
                        i += 1;
                    }
                }
                q @ ('\'' | '"') => {
                    i += 1;
                    while i < n && self.chars[i] != q && self.chars[i] != '\n' {
                        i += 1;
                    }
                    if i < n && self.chars[i] == q {
                        i += 1;
                    }
                }
                '<' => {
                    if let Some((name, past)) = self.name_at(i) {
                        let mut k = past;
                        while k < n && is_py_space(self.chars[k]) {
                            k += 1;
                        }
                        if self.chars[k..].starts_with(&[':', ':', '=']) {
                            out.push(RuleStart { at: i, body: k + 3, name });
                            i = k + 3;
                            continue;
                        }
                    }
                    i += 1;
                }
                _ => i += 1,
            }
        }
        out
    }

    fn warn_stray_text(&mut self, from: usize, to: usize) {
        let mut i = from;
        while i < to {
            let c = self.chars[i];
            if c == '#' {
                while i < to && self.chars[i] != '\n' {
                    i += 1;
                }
            } else if is_py_space(c) {
                i += 1;
            } else {
                self.warnings.push(Diagnostic::warning(
                    self.spans[i],
                    "text before the first rule is ignored (comments start with `#`)",
                ));
                return;
            }
        }
    }

    /// Splits a rule body `[from, to)` into productions on unquoted `|` and `#` comments.
    fn productions(&mut self, from: usize, to: usize) -> Vec<Production> {
        let mut out = Vec::new();
        let mut start = from;
        let mut i = from;
        while i < to {
            match self.chars[i] {
                '|' => {
                    self.production(start, i, &mut out);
                    i += 1;
                    start = i;
                }
                '#' => {
                    self.production(start, i, &mut out);
                    while i < to && self.chars[i] != '\n' {
                        i += 1;
                    }
                    start = i;
                }
                q @ ('\'' | '"') => {
                    let open = i;
                    i += 1;
                    while i < to && self.chars[i] != q && self.chars[i] != '\n' {
                        i += 1;
                    }
                    if i < to && self.chars[i] == q {
                        i += 1;
                    } else {
                        self.errors.push(Diagnostic::error(
                            self.spans[open],
                            format!("unterminated quote: {q} has no closing {q} on this line"),
                        ));
                        // Skip the rest of the line so one mistake gives one message.
                        while i < to && self.chars[i] != '\n' {
                            i += 1;
                        }
                    }
                }
                _ => i += 1,
            }
        }
        self.production(start, to, &mut out);
        out
    }

    /// Reads the production in `[from, to)`, if it is not blank, into `out`.
    fn production(&mut self, mut from: usize, mut to: usize, out: &mut Vec<Production>) {
        while from < to && is_py_space(self.chars[from]) {
            from += 1;
        }
        while to > from && is_py_space(self.chars[to - 1]) {
            to -= 1;
        }
        if from == to {
            return;
        }
        let span = self.spans[from];
        const GE_RANGE: [char; 9] = ['G', 'E', '_', 'R', 'A', 'N', 'G', 'E', ':'];
        if self.chars[from..to].starts_with(&GE_RANGE) {
            self.ge_range(from + GE_RANGE.len(), to, span, out);
            return;
        }
        let mut symbols = Vec::new();
        let mut term: Option<(String, Span)> = None;
        let mut i = from;
        while i < to {
            let c = self.chars[i];
            // 1. ` *[\r\n]+ *`: newlines are kept, the spaces around them dropped.
            if c == ' ' || c == '\r' || c == '\n' {
                let mut j = i;
                while j < to && self.chars[j] == ' ' {
                    j += 1;
                }
                let nl = j;
                while j < to && (self.chars[j] == '\r' || self.chars[j] == '\n') {
                    j += 1;
                }
                if j > nl {
                    let text: String = self.chars[nl..j].iter().collect();
                    while j < to && self.chars[j] == ' ' {
                        j += 1;
                    }
                    push_term(&mut term, &text, self.spans[nl]);
                    i = j;
                    continue;
                }
            }
            match c {
                // 3. Quoted text (the splitter already checked it is closed on its line).
                '\'' | '"' => {
                    let mut j = i + 1;
                    while j < to && self.chars[j] != c {
                        j += 1;
                    }
                    let raw: String = self.chars[i + 1..j].iter().collect();
                    self.push_decoded(&mut term, &raw, i);
                    i = (j + 1).min(to);
                }
                '<' => {
                    if let Some((sym, past)) = self.codon_value_at(i, to) {
                        flush_term(&mut term, &mut symbols);
                        if let Some(sym) = sym {
                            symbols.push(sym);
                        }
                        i = past;
                    } else if let Some((name, past)) = self.name_at(i).filter(|&(_, p)| p <= to) {
                        // 4. `<name>`.
                        flush_term(&mut term, &mut symbols);
                        symbols.push(Symbol::NonTerminal { name, span: self.spans[i] });
                        i = past;
                    } else {
                        // 5. A run of lone `<`.
                        let mut j = i;
                        while j < to && self.chars[j] == '<' {
                            j += 1;
                        }
                        let raw: String = self.chars[i..j].iter().collect();
                        push_term(&mut term, &raw, self.spans[i]);
                        i = j;
                    }
                }
                // 2. Plain text: `[^'"<\r\n]+`.
                _ => {
                    let mut j = i;
                    while j < to && !matches!(self.chars[j], '\'' | '"' | '<' | '\r' | '\n') {
                        j += 1;
                    }
                    let raw: String = self.chars[i..j].iter().collect();
                    self.push_decoded(&mut term, &raw, i);
                    i = j;
                }
            }
        }
        flush_term(&mut term, &mut symbols);
        out.push(Production { span, symbols, dataset_range: None });
    }

    /// Decodes escapes in `raw` (which starts at char index `at`) and appends it to the terminal.
    fn push_decoded(&mut self, term: &mut Option<(String, Span)>, raw: &str, at: usize) {
        match unescape(raw) {
            Ok(text) => push_term(term, &text, self.spans[at]),
            Err((offset, msg)) => {
                self.errors.push(Diagnostic::error(self.spans[at + offset], msg));
            }
        }
    }

    /// `GE_RANGE:` followed by the rest of the production `[from, to)`. As in PonyGE2, the
    /// argument is the rest of the first line; later lines of the production are dropped (we
    /// warn). Counts are read as Python's `int()` reads them; zero or less adds nothing.
    fn ge_range(&mut self, from: usize, to: usize, span: Span, out: &mut Vec<Production>) {
        let eol = (from..to).find(|&i| self.chars[i] == '\n').unwrap_or(to);
        if (eol..to).any(|i| !is_py_space(self.chars[i])) {
            let at = (eol..to).find(|&i| !is_py_space(self.chars[i])).unwrap_or(eol);
            self.warnings.push(Diagnostic::warning(
                self.spans[at],
                "text on the lines after GE_RANGE is ignored (as PonyGE2 does); start a new \
                 production with `|`",
            ));
        }
        let arg: String = self.chars[from..eol].iter().collect();
        let source = match arg.as_str() {
            "dataset_n_vars" => Some(RangeSource::Vars),
            "dataset_n_is" => Some(RangeSource::Inputs),
            "dataset_n_os" => Some(RangeSource::Outputs),
            _ => None,
        };
        if let Some(source) = source {
            out.push(Production { span, symbols: Vec::new(), dataset_range: Some(source) });
            return;
        }
        match python_int(&arg) {
            Some(n) if n <= 0 => self.warnings.push(Diagnostic::warning(
                span,
                format!("GE_RANGE:{} adds no productions", arg.trim()),
            )),
            Some(n) if n as usize <= MAX_RANGE => out.extend(range_productions(n as u64, span)),
            Some(n) => self.errors.push(Diagnostic::error(
                span,
                format!("GE_RANGE:{n} is too large (at most {MAX_RANGE} choices)"),
            )),
            None => self.errors.push(Diagnostic::error(
                self.spans[from.min(self.spans.len() - 1)],
                format!(
                    "bad use of GE_RANGE: expected a count or dataset_n_vars, dataset_n_is, \
                     dataset_n_os, found `GE_RANGE:{arg}`"
                ),
            )),
        }
    }

    /// libGE's `<GECodonValue[lo,hi]>` or `<GECodonValue{a,b,c}>` at `i`. Returns the symbol
    /// (None after reporting an error) and the index past the closing `>`.
    fn codon_value_at(&mut self, i: usize, to: usize) -> Option<(Option<Symbol>, usize)> {
        const HEAD: &str = "<GECodonValue";
        let head: Vec<char> = HEAD.chars().collect();
        if !self.chars[i..to].starts_with(&head) {
            return None;
        }
        let open = i + head.len();
        let (close_char, kind_range) = match self.chars.get(open) {
            Some('[') => (']', true),
            Some('{') => ('}', false),
            _ => return None,
        };
        let mut j = open + 1;
        while j < to && self.chars[j] != close_char {
            j += 1;
        }
        let span = self.spans[i];
        if j + 1 >= to || self.chars[j + 1] != '>' {
            self.errors.push(Diagnostic::error(
                span,
                format!("unterminated <GECodonValue…>: expected `{close_char}>`"),
            ));
            return Some((None, to));
        }
        let inner: String = self.chars[open + 1..j].iter().collect();
        let past = j + 2;
        if kind_range {
            let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
            let bounds = match parts.as_slice() {
                [a, b] => a.parse::<i64>().ok().zip(b.parse::<i64>().ok()),
                _ => None,
            };
            match bounds {
                Some((lo, hi)) if lo <= hi => {
                    Some((Some(Symbol::CodonRange { lo, hi, span }), past))
                }
                Some((lo, hi)) => {
                    self.errors.push(Diagnostic::error(
                        span,
                        format!("<GECodonValue[{lo},{hi}]> is empty: the lower bound is above the upper"),
                    ));
                    Some((None, past))
                }
                None => {
                    self.errors.push(Diagnostic::error(
                        span,
                        format!("<GECodonValue[{inner}]> needs two integers, as in <GECodonValue[0,9]>"),
                    ));
                    Some((None, past))
                }
            }
        } else {
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().any(String::is_empty) {
                self.errors.push(Diagnostic::error(
                    span,
                    format!("<GECodonValue{{{inner}}}> has an empty choice"),
                ));
                return Some((None, past));
            }
            Some((Some(Symbol::CodonSet { values, span }), past))
        }
    }
}

/// Python's `int()` on a string: surrounding whitespace, an optional sign, digits with single
/// underscores between them. `None` if it is not such a number or does not fit in `i64`.
fn python_int(text: &str) -> Option<i64> {
    let t = text.trim_matches(is_py_space);
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if !clean.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = clean.parse().ok()?;
    Some(if neg { -v } else { v })
}

fn push_term(term: &mut Option<(String, Span)>, text: &str, span: Span) {
    match term {
        Some((t, _)) => t.push_str(text),
        None => *term = Some((text.to_string(), span)),
    }
}

fn flush_term(term: &mut Option<(String, Span)>, symbols: &mut Vec<Symbol>) {
    if let Some((text, span)) = term.take() {
        symbols.push(Symbol::Terminal { text, span });
    }
}

/// Python's `unicode-escape` decoding of one part: `\n \t \r \\ \' \" \a \b \f \v`, octal
/// `\ooo`, `\xhh`, `\uhhhh`, `\Uhhhhhhhh`, and a backslash-newline that vanishes; any other
/// `\c` stays as it is. Non-ASCII text is kept as written (Python would re-read it as
/// Latin-1; we do not copy that accident). Errors give (char offset, message).
pub(crate) fn unescape(raw: &str) -> Result<String, (usize, String)> {
    if !raw.contains('\\') {
        return Ok(raw.to_string());
    }
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = chars.get(i + 1) else {
            return Err((i, "a terminal ends with a lone backslash `\\`; write `\\\\` for one".into()));
        };
        let simple = match e {
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            i += 2;
            continue;
        }
        match e {
            '\n' => i += 2,
            '0'..='7' => {
                let mut j = i + 1;
                let mut v = 0u32;
                while j < chars.len() && j < i + 4 && chars[j].is_digit(8) {
                    v = v * 8 + chars[j].to_digit(8).unwrap_or(0);
                    j += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                i = j;
            }
            'x' | 'u' | 'U' => {
                let width = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let digits: String = chars.iter().skip(i + 2).take(width).collect();
                let value = (digits.chars().count() == width)
                    .then(|| u32::from_str_radix(&digits, 16).ok())
                    .flatten()
                    .and_then(char::from_u32);
                match value {
                    Some(ch) => out.push(ch),
                    None => {
                        return Err((i, format!("bad escape `\\{e}`: expected {width} hex digits")));
                    }
                }
                i += 2 + width;
            }
            _ => {
                out.push('\\');
                out.push(e);
                i += 2;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
