//! Selection (CPU reference of `kernels/select.cu`): tournament, truncation, epsilon-lexicase,
//! elitism, and tournaments with bloat control by size ([`Bloat`], [`Tournament`]: the host
//! loops only); two objectives ranked together as NSGA-II ranks them ([`pareto`]).
//! Fitness is minimised; an invalid individual has fitness `+inf` (or NaN, read as `+inf`) and
//! never wins a tournament or a place among the elite while a valid one exists.

use crate::rng::{Purpose, Stream};

pub mod pareto;

/// Fitness as selection reads it: NaN is `+inf`.
#[inline]
pub fn key(f: f64) -> f64 {
    if f.is_nan() { f64::INFINITY } else { f }
}

/// True if `a` beats `b` (strictly lower fitness; ties go to the lower index for determinism).
#[inline]
fn beats(fit: &[f64], a: usize, b: usize) -> bool {
    let (fa, fb) = (key(fit[a]), key(fit[b]));
    fa < fb || (fa == fb && a < b)
}

/// Indices of the valid individuals (finite fitness), in order.
pub fn valid_indices(fit: &[f64]) -> Vec<u32> {
    (0..fit.len() as u32).filter(|&i| key(fit[i as usize]).is_finite()).collect()
}

/// How a population keeps its diversity (`--diversity`, `engine.diversity`; the variants' doc
/// comments are its help).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Diversity {
    /// Every valid program enters parent selection.
    #[default]
    None,
    /// Programs of equal fitness enter parent selection once: only the smallest of them (the
    /// first among equal sizes) is a candidate parent, so that copies of one program, or of
    /// one constant, cannot fill the tournaments. Refused under NSGA-II, which ranks its
    /// duplicates behind by itself.
    Unique,
}

/// The candidate parents: the valid individuals ([`valid_indices`]), in order; with `unique`,
/// only the representative of each fitness value (bit for bit): the one of fewest nodes
/// (`sizes`), the lowest index among equal sizes ([`Diversity::Unique`]). The twin of
/// `grove_unique_insert` and `grove_valid_pool` with groups (`kernels/select.cu`).
pub fn parent_pool(fit: &[f64], sizes: &[u16], unique: bool) -> Vec<u32> {
    if !unique {
        return valid_indices(fit);
    }
    assert_eq!(sizes.len(), fit.len(), "one size per individual");
    let valid = valid_indices(fit);
    let mut first: std::collections::HashMap<u64, (u16, u32)> = std::collections::HashMap::with_capacity(valid.len());
    for &i in &valid {
        let k = (sizes[i as usize], i);
        first.entry(fit[i as usize].to_bits()).and_modify(|r| *r = (*r).min(k)).or_insert(k);
    }
    valid.into_iter().filter(|&i| first[&fit[i as usize].to_bits()].1 == i).collect()
}

/// `pool`, or every one of `n` individuals where it is empty (the selections' convention).
fn or_all(pool: &[u32], n: usize) -> std::borrow::Cow<'_, [u32]> {
    if pool.is_empty() { std::borrow::Cow::Owned((0..n as u32).collect()) } else { std::borrow::Cow::Borrowed(pool) }
}

/// Tournament selection of parent `slot`: `k` contestants drawn uniformly (with replacement)
/// from `pool` (normally the valid individuals; all of them if none is valid); the fittest
/// wins. Stream: `(seed, generation, slot, Select)`.
pub fn tournament(fit: &[f64], pool: &[u32], k: usize, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let n = if pool.is_empty() { fit.len() } else { pool.len() };
    let pick = |s: &mut Stream| {
        let r = s.below(n as u32) as usize;
        if pool.is_empty() { r } else { pool[r] as usize }
    };
    let mut best = pick(&mut s);
    for _ in 1..k.max(1) {
        let c = pick(&mut s);
        if beats(fit, c, best) {
            best = c;
        }
    }
    best
}

/// Bloat control by selection (`--bloat`): how parent tournaments read program size. The
/// linear penalty is the tasks' `parsimony` coefficient, added to the fitness instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Bloat {
    /// Plain tournaments on fitness.
    #[default]
    None,
    /// Luke & Panait's double tournament (fitness first): two fitness tournaments, then the
    /// smaller of their winners wins with probability `size_pressure / 2`.
    DoubleTournament,
    /// Lexicographic parsimony pressure (Luke & Panait): a fitness tournament whose ties in
    /// fitness go to the smaller program.
    Lexicographic,
    /// Two objectives, error and size, as NSGA-II ranks them (Deb et al., 2002): parents and
    /// children compete for the next population by non-dominated front, then crowding distance
    /// ([`pareto::survivors`]), and parent tournaments compare by the same order
    /// ([`pareto::tournament`]).
    Nsga2,
    /// [`Bloat::Nsga2`] for tree GP where constants are not fitted, else plain tournaments
    /// ([`Bloat::None`]): [`Bloat::resolved`], which the engine applies as a run starts
    /// (`EngineConfig::resolved`, as `host::run` and `device::run` start). Measured (`docs/quality.md`, 2026-11-28): on the statsmodels
    /// and Friedman sets without fitting, NSGA-II meets more targets in less time with shorter
    /// programs; with the GPU's fitted constants it loses three sets, and grammatical evolution
    /// on Pagie-1 ends worse under it (its populations shrink to a few nodes).
    Auto,
}

impl Bloat {
    /// The bloat control that runs: [`Bloat::Auto`] as `constants_fitted` and `grammar` (the
    /// representation is grammatical evolution) say, any other as is.
    pub fn resolved(self, constants_fitted: bool, grammar: bool) -> Bloat {
        match self {
            Bloat::Auto if constants_fitted || grammar => Bloat::None,
            Bloat::Auto => Bloat::Nsga2,
            b => b,
        }
    }
}

/// A parent tournament with its bloat control.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tournament {
    /// Contestants per fitness tournament (with replacement).
    pub size: usize,
    /// How size is read.
    pub bloat: Bloat,
    /// Double tournament's `D` in `[1, 2]`: the smaller winner wins with probability `D / 2`.
    pub size_pressure: f64,
    /// Contestants from [`parent_pool`]'s unique representatives ([`Diversity::Unique`]).
    pub unique: bool,
}

impl Tournament {
    /// The parent of `slot`, from the stream `(seed, generation, slot, Select)`; `sizes[i]` is
    /// individual `i`'s program size in nodes. With [`Bloat::None`] this is [`tournament`]
    /// exactly (what the device loop's kernel repeats). Lexicographic draws the same
    /// contestants and breaks ties on fitness by size, then by index. Double tournament draws
    /// two fitness tournaments of `size` from the one stream, one after the other, then one
    /// uniform number: below `size_pressure / 2` the smaller winner is the parent, else the
    /// larger (equal sizes: the first winner).
    ///
    /// [`Bloat::Nsga2`] tournaments read ranks and crowding distances, which only a whole
    /// population gives: [`pareto::Ranking`] picks them; here it falls back to the lexicographic
    /// pick, which is what they reduce to on a population of one front.
    pub fn pick(&self, fit: &[f64], sizes: &[u16], pool: &[u32], seed: u64, generation: u32, slot: usize) -> usize {
        match self.bloat {
            // `Auto` is resolved as a run starts (`EngineConfig::resolved`); a tournament built
            // by hand with it runs plain.
            Bloat::None | Bloat::Auto => tournament(fit, pool, self.size, seed, generation, slot),
            Bloat::Lexicographic | Bloat::Nsga2 => {
                let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                let lex = |a: usize, b: usize| {
                    let (fa, fb) = (key(fit[a]), key(fit[b]));
                    fa < fb || (fa == fb && (sizes[a], a) < (sizes[b], b))
                };
                run_tournament(fit.len(), pool, self.size, &mut s, lex)
            }
            Bloat::DoubleTournament => {
                let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                let a = run_tournament(fit.len(), pool, self.size, &mut s, |a, b| beats(fit, a, b));
                let b = run_tournament(fit.len(), pool, self.size, &mut s, |a, b| beats(fit, a, b));
                let smaller_wins = s.unit_f64() < self.size_pressure / 2.0;
                if sizes[a] == sizes[b] {
                    a
                } else if (sizes[a] < sizes[b]) == smaller_wins {
                    a
                } else {
                    b
                }
            }
        }
    }
}

/// `k` contestants drawn from `pool` (all `n` individuals if it is empty) with `s`; the one
/// that `beats` every later challenger wins.
pub(crate) fn run_tournament(n: usize, pool: &[u32], k: usize, s: &mut Stream, beats: impl Fn(usize, usize) -> bool) -> usize {
    let m = if pool.is_empty() { n } else { pool.len() };
    let mut pick = || {
        let r = s.below(m as u32) as usize;
        if pool.is_empty() { r } else { pool[r] as usize }
    };
    let mut best = pick();
    for _ in 1..k.max(1) {
        let c = pick();
        if beats(c, best) {
            best = c;
        }
    }
    best
}

/// Tournament without replacement: `k` distinct contestants (all of `pool` if it is smaller).
pub fn tournament_distinct(fit: &[f64], pool: &[u32], k: usize, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let pool = or_all(pool, fit.len());
    let pool = &pool[..];
    let k = k.clamp(1, pool.len());
    // Partial Fisher-Yates over a small index list of chosen positions.
    let mut chosen: Vec<u32> = Vec::with_capacity(k);
    while chosen.len() < k {
        let r = s.below(pool.len() as u32);
        if !chosen.contains(&r) {
            chosen.push(r);
        }
    }
    let mut best = pool[chosen[0] as usize] as usize;
    for &c in &chosen[1..] {
        let c = pool[c as usize] as usize;
        if beats(fit, c, best) {
            best = c;
        }
    }
    best
}

/// The `n` best individuals, best first (ties by index). Invalid ones come last.
pub fn elite(fit: &[f64], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..fit.len()).collect();
    let n = n.min(idx.len());
    if n == 0 {
        return Vec::new();
    }
    idx.select_nth_unstable_by(n - 1, |&a, &b| key(fit[a]).total_cmp(&key(fit[b])).then(a.cmp(&b)));
    idx.truncate(n);
    idx.sort_by(|&a, &b| key(fit[a]).total_cmp(&key(fit[b])).then(a.cmp(&b)));
    idx
}

/// How many of `n` ranked individuals truncation selection chooses among: `ceil(n · rate)`,
/// at least 1 and at most `n` (computed once on the host for the GPU twin too).
pub fn truncation_size(n: usize, rate: f64) -> usize {
    ((n as f64 * rate).ceil() as usize).clamp(1, n.max(1))
}

/// Truncation selection of parent `slot`: uniform among the best `rate` fraction.
pub fn truncation(ranked: &[usize], rate: f64, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let n = truncation_size(ranked.len(), rate);
    ranked[s.below(n as u32) as usize]
}

/// How parents are chosen (`--selection`, whose help the variants' doc comments are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// Tournaments on the aggregate fitness (with the bloat control of --bloat).
    #[default]
    Tournament,
    /// Epsilon-lexicase (La Cava et al., 2016) on every case: rows of the training data, or
    /// control's episodes; each parent survives a random order of cases, filtered to the best
    /// on each within its median absolute deviation.
    Lexicase,
    /// Epsilon-lexicase on a fresh random subset of the cases each generation (Hernandez et
    /// al., 2019): --down-sample of them.
    DownSampled,
}

impl Selection {
    /// Whether parents are chosen on per-case errors.
    pub fn is_lexicase(self) -> bool {
        !matches!(self, Selection::Tournament)
    }
}

/// Down-sampled lexicase's default share of the cases per generation (Hernandez et al. found
/// 0.1 to 0.25 best on program synthesis; the search benchmark's measurement is in
/// `docs/quality.md`).
pub const DEFAULT_DOWN_SAMPLE: f64 = 0.1;

/// Lexicase's default candidate pool (`--lexicase-pool`, `engine.lexicase_pool`). Where the pool
/// of valid individuals holds more than this many, the selections come in groups of this many
/// consecutive slots, and each group's selections share one pool of this many individuals drawn
/// from it at random, with replacement ([`lexicase_candidates`]): lexicase within demes dealt
/// afresh each generation, as classic lexicase's selections all share the whole population.
/// Smaller pools compete whole. A selection's work is then bounded by the pool, not the
/// population (a full-population selection of `P` parents reads about `P²` errors: minutes at
/// 10⁵), and a group's candidates can be read once for all its selections (on the GPU, into a
/// block's shared memory). The measurements that chose it are in `docs/quality.md` (issue 55).
pub const DEFAULT_LEXICASE_POOL: usize = 256;

/// The most individuals whose errors set lexicase's epsilons: larger pools are sampled (with
/// replacement) to this many ([`lexicase_epsilons`]).
pub const EPSILON_SAMPLE: usize = 1024;

/// How many of `n_cases` cases a generation reads under `selection`: all for
/// [`Selection::Lexicase`]; for [`Selection::DownSampled`], `down_sample` of them where it is
/// below 1 (`ceil`, at least 2), else `down_sample` cases; an error naming the option where
/// that leaves fewer than two cases or more than there are.
pub fn cases_per_generation(selection: Selection, down_sample: f64, n_cases: usize) -> Result<usize, String> {
    let k = match selection {
        Selection::Tournament => return Ok(0),
        Selection::Lexicase => n_cases,
        Selection::DownSampled if down_sample < 1.0 => ((n_cases as f64 * down_sample).ceil() as usize).max(2.min(n_cases)),
        Selection::DownSampled => down_sample as usize,
    };
    if n_cases < 2 {
        return Err(format!("lexicase selection needs at least 2 cases (training rows or episodes); this task has {n_cases}"));
    }
    if k > n_cases {
        return Err(format!("--down-sample (engine.down_sample) asks for {k} cases of {n_cases}: at most all of them"));
    }
    if k < 2 {
        return Err(format!("--down-sample (engine.down_sample) {down_sample} of {n_cases} cases leaves {k}: at least 2"));
    }
    Ok(k)
}

/// Checks `down_sample` alone: a share in (0, 1) or a whole count of at least 2.
pub fn check_down_sample(down_sample: f64) -> Result<(), String> {
    let ok = down_sample.is_finite() && ((down_sample > 0.0 && down_sample < 1.0) || (down_sample >= 2.0 && down_sample.fract() == 0.0));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--down-sample (engine.down_sample) must be a share of the cases in (0, 1) or a whole number of cases of at least 2, got {down_sample}"
        ))
    }
}

/// The cases generation `generation` reads: all `n_cases` in order when `k` is `n_cases`, else
/// `k` distinct cases drawn from the stream `(seed, generation, 0, Cases)` by a partial
/// Fisher–Yates shuffle, in ascending order.
pub fn generation_cases(n_cases: usize, k: usize, seed: u64, generation: u32) -> Vec<u32> {
    let mut all: Vec<u32> = (0..n_cases as u32).collect();
    if k >= n_cases {
        return all;
    }
    let mut s = Stream::new(seed, generation, 0, Purpose::Cases);
    for t in 0..k {
        let r = t + s.below((n_cases - t) as u32) as usize;
        all.swap(t, r);
    }
    all.truncate(k);
    all.sort_unstable();
    all
}

/// The starting candidates of lexicase selection `slot` from `pool` (never empty: [`or_all`]'s):
/// the whole pool in order when `k_pool` is 0 or the pool holds at most `k_pool`, else the
/// candidates of its group of `k_pool` consecutive slots, `slot / k_pool`: `k_pool` positions
/// drawn with `below(pool.len())` from the stream `(seed, generation, slot / k_pool,
/// LexicasePool)`, shared by the group's selections.
pub fn lexicase_candidates(pool: &[u32], k_pool: usize, slot: usize, seed: u64, generation: u32, out: &mut Vec<u32>) {
    out.clear();
    if k_pool == 0 || pool.len() <= k_pool {
        out.extend_from_slice(pool);
    } else {
        let mut s = Stream::new(seed, generation, (slot / k_pool) as u32, Purpose::LexicasePool);
        let n = pool.len() as u32;
        out.extend((0..k_pool).map(|_| pool[s.below(n) as usize]));
    }
}

/// [`epsilon_lexicase`] for slots `0..n_slots`: the same picks, bit for bit, at a fraction
/// of the work. A pool larger than `k_pool` (not 0) is drawn from for each selection, which
/// then filters its own candidates; else the whole pool competes and the grouping below
/// applies. Individuals with the same errors on every case (clones, and programs that
/// compute the same values) fall into one group, and the filters run over groups: a group
/// survives a case exactly when each of its members would. The first case a selection reads
/// filters the whole pool, so each case's surviving groups of that first filter are found
/// once. Once one individual is left the selection stops, as the reference does; while one
/// group of several is left the filters change nothing, and only the reference's draws of the
/// case order are made, to reach its final draw.
#[allow(clippy::too_many_arguments)]
pub fn epsilon_lexicase_slots(errors: &[f64], n_cases: usize, eps: &[f64], pool: &[u32], k_pool: usize, n_slots: usize, seed: u64, generation: u32) -> Vec<u32> {
    use rayon::prelude::*;
    let n = errors.len().checked_div(n_cases).unwrap_or(0);
    let pool = or_all(pool, n);
    let pool = &pool[..];
    if k_pool != 0 && pool.len() > k_pool {
        // A group's candidates drawn once, their errors copied side by side (`[k_pool × C]`),
        // and its selections filtered over candidate positions.
        let groups: Vec<Vec<u32>> = (0..n_slots.div_ceil(k_pool))
            .into_par_iter()
            .map(|q| {
                let mut drawn = Vec::new();
                lexicase_candidates(pool, k_pool, q * k_pool, seed, generation, &mut drawn);
                let keys: Vec<f64> = drawn.iter().flat_map(|&i| errors[i as usize * n_cases..][..n_cases].iter().map(|&e| key(e))).collect();
                let (mut cand, mut order) = (Vec::new(), Vec::new());
                (q * k_pool..((q + 1) * k_pool).min(n_slots))
                    .map(|slot| {
                        cand.clear();
                        cand.extend(0..k_pool as u32);
                        let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                        let pos = lexicase_filter(n_cases, eps, |j, c| keys[j as usize * n_cases + c], &mut s, &mut cand, &mut order);
                        drawn[pos as usize]
                    })
                    .collect()
            })
            .collect();
        return groups.concat();
    }
    let err = |i: u32, c: usize| key(errors[i as usize * n_cases + c]);
    // Groups of equal error rows, in order of their first member; members by pool position.
    let mut index: std::collections::HashMap<Vec<u64>, u32> = std::collections::HashMap::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    let mut rep: Vec<u32> = Vec::new();
    for (pos, &i) in pool.iter().enumerate() {
        let row: Vec<u64> = (0..n_cases).map(|c| err(i, c).to_bits()).collect();
        let g = *index.entry(row).or_insert_with(|| {
            members.push(Vec::new());
            rep.push(i);
            members.len() as u32 - 1
        });
        members[g as usize].push(pos as u32);
    }
    let size: Vec<usize> = members.iter().map(Vec::len).collect();
    // The groups' errors case-major, so that a filter reads one case's row (`[C × G]`).
    let n_groups = members.len();
    let mut by_case = vec![0.0; n_cases * n_groups];
    for (g, &i) in rep.iter().enumerate() {
        for c in 0..n_cases {
            by_case[c * n_groups + g] = err(i, c);
        }
    }
    let gerr = |g: u32, c: usize| by_case[c * n_groups + g as usize];
    let groups: Vec<u32> = (0..members.len() as u32).collect();
    // Each case's surviving groups of a first filter over the whole pool.
    let first: Vec<Vec<u32>> = (0..n_cases)
        .into_par_iter()
        .map(|c| {
            let best = groups.iter().map(|&g| gerr(g, c)).fold(f64::INFINITY, f64::min);
            let threshold = best + eps[c];
            groups.iter().copied().filter(|&g| gerr(g, c) <= threshold).collect()
        })
        .collect();
    (0..n_slots)
        .into_par_iter()
        .with_min_len(64)
        .map_init(
            || (Vec::new(), Vec::new(), Vec::new()),
            |(cand, order, picked): &mut (Vec<u32>, Vec<u32>, Vec<u32>), slot| {
                let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                order.clear();
                order.extend(0..n_cases as u32);
                cand.clear();
                let mut count = pool.len();
                if count > 1 && n_cases > 0 {
                    let r = s.below(n_cases as u32) as usize;
                    order.swap(0, r);
                    cand.extend_from_slice(&first[order[0] as usize]);
                    count = cand.iter().map(|&g| size[g as usize]).sum();
                    for t in 1..n_cases {
                        if count <= 1 {
                            break;
                        }
                        let r = t + s.below((n_cases - t) as u32) as usize;
                        order.swap(t, r);
                        if cand.len() > 1 {
                            let c = order[t] as usize;
                            let best = cand.iter().map(|&g| gerr(g, c)).fold(f64::INFINITY, f64::min);
                            let threshold = best + eps[c];
                            cand.retain(|&g| gerr(g, c) <= threshold);
                            count = cand.iter().map(|&g| size[g as usize]).sum();
                        }
                    }
                } else {
                    cand.extend_from_slice(&groups);
                }
                let pick = if count > 1 { s.below(count as u32) as usize } else { 0 };
                // The reference's candidates are the survivors in pool order.
                let pos = match cand.as_slice() {
                    [g] => members[*g as usize][pick],
                    gs => {
                        picked.clear();
                        gs.iter().for_each(|&g| picked.extend_from_slice(&members[g as usize]));
                        picked.sort_unstable();
                        picked[pick]
                    }
                };
                pool[pos as usize]
            },
        )
        .collect()
}

/// The individuals whose errors set the epsilons of generation `generation`'s selections:
/// `pool` (never empty) itself when it holds at most [`EPSILON_SAMPLE`], else that many drawn
/// with `below(pool.len())` from the stream `(seed, generation, 0, Epsilon)`.
pub fn epsilon_sample(pool: &[u32], seed: u64, generation: u32) -> Vec<u32> {
    if pool.len() <= EPSILON_SAMPLE {
        return pool.to_vec();
    }
    let mut s = Stream::new(seed, generation, 0, Purpose::Epsilon);
    let n = pool.len() as u32;
    (0..EPSILON_SAMPLE).map(|_| pool[s.below(n) as usize]).collect()
}

/// The per-case thresholds of epsilon-lexicase selection (La Cava, Spector and Danai, 2016):
/// for each case, the median absolute deviation of the finite errors on it of the individuals
/// of [`epsilon_sample`] (`pool`, all individuals if it is empty, or a sample of it), or 0 when
/// none is finite. `errors` is `[P × C]`, row `i` individual `i`'s error on each of the
/// `n_cases` cases. A median of an even count is the mean of the middle two. The GPU's twin is
/// `grove_lexicase_epsilons` (`kernels/select.cu`).
pub fn lexicase_epsilons(errors: &[f64], n_cases: usize, pool: &[u32], seed: u64, generation: u32) -> Vec<f64> {
    let n = errors.len().checked_div(n_cases).unwrap_or(0);
    let pool = or_all(pool, n);
    let sample = epsilon_sample(&pool, seed, generation);
    // The middle value(s) by selection, not a sort: the same numbers in O(n).
    let median = |v: &mut Vec<f64>| {
        let (m, odd) = (v.len() / 2, v.len() % 2 == 1);
        let (left, mid, _) = v.select_nth_unstable_by(m, f64::total_cmp);
        let mid = *mid;
        if odd { mid } else { (left.iter().copied().fold(f64::NEG_INFINITY, f64::max) + mid) / 2.0 }
    };
    use rayon::prelude::*;
    (0..n_cases)
        .into_par_iter()
        .map(|c| {
            let mut v: Vec<f64> = sample.iter().map(|&i| errors[i as usize * n_cases + c]).filter(|e| e.is_finite()).collect();
            if v.is_empty() {
                return 0.0;
            }
            let med = median(&mut v);
            let mut dev: Vec<f64> = v.iter().map(|e| (e - med).abs()).collect();
            median(&mut dev)
        })
        .collect()
}

/// Epsilon-lexicase selection of parent `slot` (stream `(seed, generation, slot, Select)`):
/// the candidates start as `pool` (all individuals if it is empty) in order, or, where the pool
/// holds more than `k_pool` (not 0), as the `k_pool` draws of the slot's group
/// ([`lexicase_candidates`]). Cases are taken in a random order drawn one at a time (step `t`
/// swaps case `t + below(C - t)` into place `t`: a lazy Fisher–Yates), and each keeps the
/// candidates whose error (NaN read as `+inf`) is at most the best candidate's plus `eps[case]`
/// (an f64 addition). It stops when one candidate is left or the cases run out; then one of the
/// candidates left is drawn with `below(count)` (no draw when there is one). `errors` is `[P ×
/// n_cases]`.
#[allow(clippy::too_many_arguments)]
pub fn epsilon_lexicase(errors: &[f64], n_cases: usize, eps: &[f64], pool: &[u32], k_pool: usize, seed: u64, generation: u32, slot: usize) -> usize {
    let n = errors.len().checked_div(n_cases).unwrap_or(0);
    let pool = or_all(pool, n);
    let mut cand = Vec::new();
    lexicase_candidates(&pool, k_pool, slot, seed, generation, &mut cand);
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let err = |i: u32, c: usize| key(errors[i as usize * n_cases + c]);
    lexicase_filter(n_cases, eps, err, &mut s, &mut cand, &mut Vec::new()) as usize
}

/// The filters of [`epsilon_lexicase`] over `cand` (not empty), `err(candidate, case)` its
/// key, drawing from `s`: the candidate chosen.
fn lexicase_filter(n_cases: usize, eps: &[f64], err: impl Fn(u32, usize) -> f64, s: &mut Stream, cand: &mut Vec<u32>, order: &mut Vec<u32>) -> u32 {
    order.clear();
    order.extend(0..n_cases as u32);
    for t in 0..n_cases {
        if cand.len() <= 1 {
            break;
        }
        let r = t + s.below((n_cases - t) as u32) as usize;
        order.swap(t, r);
        let c = order[t] as usize;
        let best = cand.iter().map(|&i| err(i, c)).fold(f64::INFINITY, f64::min);
        let threshold = best + eps[c];
        cand.retain(|&i| err(i, c) <= threshold);
    }
    let pick = if cand.len() > 1 { s.below(cand.len() as u32) as usize } else { 0 };
    cand[pick]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_never_wins_while_a_valid_one_exists() {
        let fit = [f64::INFINITY, 5.0, f64::NAN, f64::INFINITY];
        let pool = valid_indices(&fit);
        assert_eq!(pool, [1]);
        for slot in 0..100 {
            assert_eq!(tournament(&fit, &pool, 3, 1, 0, slot), 1);
            assert_eq!(tournament_distinct(&fit, &pool, 3, 1, 0, slot), 1);
        }
        assert_eq!(elite(&fit, 2), [1, 0]);
    }

    #[test]
    fn unique_parents_keep_one_representative_of_each_fitness_the_smallest() {
        // Two programs share fitness 1.0 (sizes 3 and 2), two more share 2.0 with equal sizes
        // (the lower index stays); the invalid one is out either way.
        let fit = [1.0, 1.0, 2.0, f64::NAN, 2.0, 0.5];
        let sizes = [3, 2, 4, 1, 4, 9];
        assert_eq!(parent_pool(&fit, &sizes, false), [0, 1, 2, 4, 5]);
        assert_eq!(parent_pool(&fit, &sizes, true), [1, 2, 5]);
        // -0.0 and 0.0 are distinct bits, so two representatives.
        assert_eq!(parent_pool(&[0.0, -0.0], &[1, 1], true), [0, 1]);
    }

    #[test]
    fn unique_parents_let_a_lone_distinct_program_into_the_tournaments() {
        // A population of 19 copies of the best program and one worse, distinct program: in
        // binary tournaments over every valid program the distinct one is a parent only when
        // drawn twice (1/400); over the unique representatives, when drawn twice of two
        // (1/4). What `--diversity unique` is for: a copied program cannot fill the tournaments.
        let mut fit = vec![1.0; 20];
        fit[7] = 3.0;
        let sizes = vec![5u16; 20];
        let share = |unique: bool| {
            let t = Tournament { size: 2, bloat: Bloat::None, size_pressure: 1.0, unique };
            let pool = parent_pool(&fit, &sizes, unique);
            let n = 20_000;
            (0..n).filter(|&slot| t.pick(&fit, &sizes, &pool, 3, 0, slot) == 7).count() as f64 / n as f64
        };
        let (all, unique) = (share(false), share(true));
        assert!(all < 0.01, "over every program: {all}");
        assert!((unique - 0.25).abs() < 0.02, "over the unique representatives: {unique}");
    }

    #[test]
    fn binary_tournament_picks_the_better_at_the_expected_rate() {
        // With replacement, the better of two distinct individuals of a population of two
        // wins with probability 3/4.
        let fit = [1.0, 2.0];
        let pool = valid_indices(&fit);
        let n = 40_000;
        let wins = (0..n).filter(|&s| tournament(&fit, &pool, 2, 7, 3, s) == 0).count();
        let rate = wins as f64 / n as f64;
        assert!((rate - 0.75).abs() < 0.01, "{rate}");
        // Among 10 ranked individuals, tournament size 2 picks rank r with prob (2(n-r)-1)/n².
        let fit: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let pool = valid_indices(&fit);
        let mut counts = [0usize; 10];
        for s in 0..n {
            counts[tournament(&fit, &pool, 2, 9, 0, s)] += 1;
        }
        for (r, &c) in counts.iter().enumerate() {
            let p = (2.0 * (10 - r) as f64 - 1.0) / 100.0;
            assert!((c as f64 / n as f64 - p).abs() < 0.01, "rank {r}: {c}");
        }
    }

    #[test]
    fn lexicase_picks_specialists_and_respects_epsilon() {
        // Individual 0 is best on case 0, individual 1 on case 1, 2 is mediocre on both and
        // 3 is invalid (NaN): with eps 0, only 0 and 1 ever win, each about half the time.
        let errors = [0.0, 5.0, 5.0, 0.0, 2.0, 2.0, f64::NAN, 0.0];
        let fit = [1.0, 1.0, 1.0, f64::NAN];
        let pool = valid_indices(&fit);
        let eps = [0.0, 0.0];
        let mut wins = [0usize; 4];
        for slot in 0..2000 {
            wins[epsilon_lexicase(&errors, 2, &eps, &pool, 0, 3, 1, slot)] += 1;
        }
        assert_eq!((wins[2], wins[3]), (0, 0), "{wins:?}");
        assert!((850..1150).contains(&wins[0]), "{wins:?}");
        // With a wide epsilon every case keeps everyone and the pick is uniform over the pool.
        let mut wins = [0usize; 4];
        for slot in 0..3000 {
            wins[epsilon_lexicase(&errors, 2, &[10.0, 10.0], &pool, 0, 3, 1, slot)] += 1;
        }
        assert!(wins[..3].iter().all(|&w| (850..1150).contains(&w)) && wins[3] == 0, "{wins:?}");
        // MAD: case 0 over the pool has errors 0, 5, 2: median 2, deviations 2, 3, 0: MAD 2.
        assert_eq!(lexicase_epsilons(&errors, 2, &pool, 1, 1), [2.0, 2.0]);
        assert_eq!(lexicase_epsilons(&[f64::NAN, 1.0], 1, &[], 1, 1), [0.0]);
    }

    #[test]
    fn lexicase_keeps_the_only_specialist_a_tournament_loses() {
        // Twenty generalists, each second-best on every case, and one specialist: best on
        // case 0 alone, worst in aggregate. A tournament of 3 on the aggregate never picks it
        // unless it meets only itself; lexicase picks it whenever case 0 comes first.
        let (p, c) = (21usize, 4usize);
        let mut errors = vec![1.0; p * c];
        errors[20 * c..].copy_from_slice(&[0.0, 9.0, 9.0, 9.0]);
        let fit: Vec<f64> = (0..p).map(|i| errors[i * c..(i + 1) * c].iter().sum::<f64>() / c as f64).collect();
        let pool = valid_indices(&fit);
        let eps = vec![0.0; c];
        let n = 4000;
        let lex = epsilon_lexicase_slots(&errors, c, &eps, &pool, 0, n, 11, 2);
        let chosen = lex.iter().filter(|&&i| i == 20).count() as f64 / n as f64;
        assert!((chosen - 0.25).abs() < 0.03, "specialist chosen {chosen}");
        let by_tournament = (0..n).filter(|&s| tournament(&fit, &pool, 3, 11, 2, s) == 20).count() as f64 / n as f64;
        assert!(by_tournament < 0.001, "{by_tournament}");
        // The batched picks are the reference's, slot by slot.
        for (slot, &w) in lex.iter().enumerate().take(500) {
            assert_eq!(w as usize, epsilon_lexicase(&errors, c, &eps, &pool, 0, 11, 2, slot));
        }
    }

    #[test]
    fn batched_lexicase_equals_the_reference_on_random_errors() {
        let (p, c) = (97usize, 13usize);
        let mut s = Stream::new(5, 0, 0, Purpose::Bench);
        let mut errors: Vec<f64> = (0..p * c).map(|_| (s.below(20) as f64).powi(2) / 7.0).collect();
        errors[3 * c + 4] = f64::NAN;
        errors[50 * c + 1] = f64::INFINITY;
        // Clones: rows 60..90 repeat three rows, interleaved, so groups hold members apart.
        for i in 60..90 {
            let from = [10, 20, 30][i % 3];
            let row: Vec<f64> = errors[from * c..(from + 1) * c].to_vec();
            errors[i * c..(i + 1) * c].copy_from_slice(&row);
        }
        // And a second row of infinities: NaN and +inf read alike.
        for v in &mut errors[91 * c..92 * c] {
            *v = f64::NAN;
        }
        for v in &mut errors[92 * c..93 * c] {
            *v = f64::INFINITY;
        }
        let mut fit: Vec<f64> = vec![1.0; p];
        fit[7] = f64::INFINITY;
        let pool = valid_indices(&fit);
        let eps = lexicase_epsilons(&errors, c, &pool, 3, 9);
        // The whole pool (k_pool 0, or larger than the pool), and pools of 16 drawn from it.
        for k_pool in [0, 97, 16] {
            let got = epsilon_lexicase_slots(&errors, c, &eps, &pool, k_pool, 1000, 3, 9);
            for (slot, &w) in got.iter().enumerate() {
                assert_eq!(w as usize, epsilon_lexicase(&errors, c, &eps, &pool, k_pool, 3, 9, slot), "pool {k_pool}, slot {slot}");
                assert_ne!(w, 7, "an invalid individual is not in the pool");
            }
            // One candidate, or none valid (every individual then competes).
            assert_eq!(epsilon_lexicase_slots(&errors, c, &eps, &[42], k_pool, 5, 3, 9), [42; 5]);
            let all = epsilon_lexicase_slots(&errors, c, &eps, &[], k_pool, 50, 3, 9);
            for (slot, &w) in all.iter().enumerate() {
                assert_eq!(w as usize, epsilon_lexicase(&errors, c, &eps, &[], k_pool, 3, 9, slot));
            }
        }
    }

    #[test]
    fn a_bounded_pool_draws_its_candidates_and_keeps_lexicase_pressure() {
        // 2000 individuals: 1990 generalists (error 1 everywhere) and ten specialists, each
        // exact on one of ten cases and bad on the rest. With pools of 64 a specialist is a
        // candidate in about 64 / 2000 of the selections and wins when its case comes first:
        // each is chosen at about 1 - (1 - 1/2000)^64 ≈ 3.2 % times 1/10 ≈ 0.3 % of the picks.
        let (p, c) = (2000usize, 10usize);
        let mut errors = vec![1.0; p * c];
        for k in 0..c {
            let row = &mut errors[(p - 1 - k) * c..(p - k) * c];
            row.fill(9.0);
            row[k] = 0.0;
        }
        let pool: Vec<u32> = (0..p as u32).collect();
        let eps = vec![0.0; c];
        let n = 40_000;
        let picks = epsilon_lexicase_slots(&errors, c, &eps, &pool, 64, n, 5, 1);
        let specialists = picks.iter().filter(|&&i| i as usize >= p - c).count() as f64 / n as f64;
        let want = c as f64 * (1.0 - (1.0 - 1.0 / p as f64).powi(64)) / c as f64;
        assert!((specialists - want).abs() < 0.25 * want, "specialists chosen {specialists}, expected about {want}");
        // The whole population: each specialist wins whenever its case comes first.
        let whole = epsilon_lexicase_slots(&errors, c, &eps, &pool, 0, 4000, 5, 1);
        let share = whole.iter().filter(|&&i| i as usize >= p - c).count() as f64 / 4000.0;
        assert!((share - 1.0).abs() < 1e-12, "{share}");
        // Epsilons come from a sample of EPSILON_SAMPLE individuals of a larger pool: seeded,
        // and within the population's spread.
        let mut s = Stream::new(2, 0, 0, Purpose::Bench);
        let spread: Vec<f64> = (0..p * c).map(|_| s.below(1000) as f64 / 100.0).collect();
        let a = lexicase_epsilons(&spread, c, &pool, 4, 2);
        assert_eq!(a, lexicase_epsilons(&spread, c, &pool, 4, 2));
        assert_ne!(a, lexicase_epsilons(&spread, c, &pool, 4, 3));
        assert!(a.iter().all(|&e| (2.2..2.8).contains(&e)), "MAD of uniform [0, 10) is 2.5: {a:?}");
        assert_eq!(epsilon_sample(&pool[..EPSILON_SAMPLE], 4, 2), &pool[..EPSILON_SAMPLE]);
        assert_eq!(epsilon_sample(&pool, 4, 2).len(), EPSILON_SAMPLE);
    }

    #[test]
    fn down_sampled_cases_and_their_bounds() {
        assert_eq!(cases_per_generation(Selection::Lexicase, 0.1, 50), Ok(50));
        assert_eq!(cases_per_generation(Selection::DownSampled, 0.1, 50), Ok(5));
        assert_eq!(cases_per_generation(Selection::DownSampled, 0.01, 50), Ok(2));
        assert_eq!(cases_per_generation(Selection::DownSampled, 8.0, 50), Ok(8));
        assert_eq!(cases_per_generation(Selection::Tournament, 0.1, 1), Ok(0));
        let one = cases_per_generation(Selection::Lexicase, 0.1, 1).unwrap_err();
        assert!(one.contains("at least 2 cases"), "{one}");
        let big = cases_per_generation(Selection::DownSampled, 80.0, 50).unwrap_err();
        assert!(big.contains("80 cases of 50"), "{big}");
        for bad in [0.0, 1.0, 1.5, -0.2, f64::NAN, 2.5] {
            assert!(check_down_sample(bad).is_err(), "{bad}");
        }
        for good in [0.05, 0.5, 2.0, 64.0] {
            assert!(check_down_sample(good).is_ok(), "{good}");
        }
        // Distinct, sorted, seeded, changing with the generation; all of them in order.
        let a = generation_cases(100, 10, 4, 1);
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a.iter().all(|&x| x < 100));
        assert_eq!(a, generation_cases(100, 10, 4, 1));
        assert_ne!(a, generation_cases(100, 10, 4, 2));
        assert_eq!(generation_cases(5, 5, 4, 1), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn size_tournaments_prefer_small_programs_as_specified() {
        // Plain: exactly `tournament`.
        let fit: Vec<f64> = (0..20).map(|i| (i % 5) as f64).collect();
        let sizes: Vec<u16> = (0..20).map(|i| 30 - i as u16).collect();
        let pool = valid_indices(&fit);
        let plain = Tournament { size: 3, bloat: Bloat::None, size_pressure: 1.4, unique: false };
        for slot in 0..200 {
            assert_eq!(plain.pick(&fit, &sizes, &pool, 5, 2, slot), tournament(&fit, &pool, 3, 5, 2, slot));
        }
        // Lexicographic: the same contestants; among fitness ties the smallest (here the
        // highest index) wins, where a plain tournament takes the lowest index.
        let lex = Tournament { bloat: Bloat::Lexicographic, ..plain };
        let flat = [1.0; 4];
        let sizes4 = [9, 3, 3, 7];
        let pool4 = valid_indices(&flat);
        for slot in 0..200 {
            let w = lex.pick(&flat, &sizes4, &pool4, 1, 1, slot);
            let p = tournament(&flat, &pool4, 3, 1, 1, slot);
            assert!(sizes4[w] <= sizes4[p], "slot {slot}: {w} vs plain {p}");
            assert_eq!(fit[lex.pick(&fit, &sizes, &pool, 5, 2, slot)], fit[tournament(&fit, &pool, 3, 5, 2, slot)]);
        }
        // Double tournament, tournament size 1 (uniform winners): with D = 2 the smaller of two
        // different sizes always wins, with D = 1 half the time, with D = 1.4 70 % of the time.
        let fit = [1.0, 1.0];
        let sizes = [10, 20];
        let pool = valid_indices(&fit);
        let n = 20_000;
        for (d, want) in [(2.0, 1.0), (1.0, 0.5), (1.4, 0.7)] {
            let t = Tournament { size: 1, bloat: Bloat::DoubleTournament, size_pressure: d, unique: false };
            let (mut small, mut differ) = (0, 0);
            for slot in 0..n {
                let mut s = Stream::new(3, 4, slot as u32, Purpose::Select);
                let (a, b) = (s.below(2), s.below(2));
                let w = t.pick(&fit, &sizes, &pool, 3, 4, slot);
                if a != b {
                    differ += 1;
                    small += (w == 0) as usize;
                } else {
                    assert_eq!(w, a as usize, "equal sizes: the first winner");
                }
            }
            let rate = small as f64 / differ as f64;
            assert!((rate - want).abs() < 0.02, "D = {d}: the smaller won {rate}");
        }
    }

    #[test]
    fn elite_and_truncation() {
        let fit = [3.0, 1.0, 2.0, 1.0];
        assert_eq!(elite(&fit, 3), [1, 3, 2]);
        let ranked = elite(&fit, 4);
        for slot in 0..50 {
            let i = truncation(&ranked, 0.5, 1, 1, slot);
            assert!(i == 1 || i == 3);
        }
    }
}
