//! Two objectives ranked together, as NSGA-II ranks them (Deb et al., 2002): non-dominated
//! fronts, then crowding distance within a front. Both objectives are minimised (for grove:
//! error and program size). A NaN objective reads as `+inf` ([`super::key`]).
//!
//! The fronts are found in O(n log n) rather than NSGA-II's O(n²): with the points sorted by the
//! first objective (ties by the second, then by index), a point's front is the first whose most
//! recent member it does not rank behind, and that test is monotone over the fronts, so a binary
//! search finds it (Jensen, 2003).
//!
//! Duplicates: `a` dominates `b` when it is no worse in both objectives and better in one (the
//! definition), and of two equal points the one of higher index ranks one front behind the
//! other. Integer sizes and linear scaling make exact duplicates common (every constant program
//! has the same error); sharing a front, they filled it, and a population of 2000 on pagie1
//! shrank to a mean size of 1.2-1.5 within five generations, against 14-22 with duplicates
//! ranked behind (and a best error 3x lower).
//!
//! Determinism: every order is total (ties broken by index), so results do not depend on the
//! input's order beyond the indices themselves.

use super::key;

/// One point: its two objectives, both minimised.
pub type Point = [f64; 2];

/// True if `a` dominates `b`: no worse in both objectives and strictly better in one.
#[inline]
pub fn dominates(a: Point, b: Point) -> bool {
    let (a, b) = ([key(a[0]), key(a[1])], [key(b[0]), key(b[1])]);
    a[0] <= b[0] && a[1] <= b[1] && (a[0] < b[0] || a[1] < b[1])
}

/// True if `b` ranks behind `a`, `a` coming first among equal points: `a` dominates `b`, or
/// the two are equal.
#[inline]
fn behind(a: Point, b: Point) -> bool {
    let (a, b) = ([key(a[0]), key(a[1])], [key(b[0]), key(b[1])]);
    a[0] <= b[0] && a[1] <= b[1]
}

/// The non-dominated rank of every point: 0 for the points no other point dominates, 1 for
/// those dominated only by rank-0 points, and so on, an exact duplicate one front behind its
/// copy of lower index. `[n]`, in the input's order.
pub fn ranks(points: &[Point]) -> Vec<u32> {
    let n = points.len();
    let p: Vec<Point> = points.iter().map(|q| [key(q[0]), key(q[1])]).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| p[a][0].total_cmp(&p[b][0]).then(p[a][1].total_cmp(&p[b][1])).then(a.cmp(&b)));
    // last[k]: the point most recently placed on front k. Along a front, in this order, the
    // first objective never falls and the second never rises, so the last point has the front's
    // smallest second objective and dominates a newcomer if any member does.
    let mut last: Vec<usize> = Vec::new();
    let mut rank = vec![0u32; n];
    for &i in &order {
        // Fronts whose last point dominates `i` come first (the property is monotone); an equal
        // point placed before `i` has the lower index, and `i` goes behind it.
        let k = last.partition_point(|&l| behind(p[l], p[i]));
        if k == last.len() {
            last.push(i);
        } else {
            last[k] = i;
        }
        rank[i] = k as u32;
    }
    rank
}

/// The crowding distance of every point within its front (`ranks` as [`ranks`] gives): for each
/// objective, the front sorted by it (ties by index), its two ends infinite and every other
/// point adding the gap between its neighbours over the front's range of that objective. A
/// front of one or two points is all infinite; an objective with no range adds nothing. `[n]`.
pub fn crowding(points: &[Point], ranks: &[u32]) -> Vec<f64> {
    let n = points.len();
    assert_eq!(ranks.len(), n, "one rank per point");
    let p: Vec<Point> = points.iter().map(|q| [key(q[0]), key(q[1])]).collect();
    let mut distance = vec![0.0f64; n];
    let n_fronts = ranks.iter().map(|&r| r as usize + 1).max().unwrap_or(0);
    let mut fronts: Vec<Vec<usize>> = vec![Vec::new(); n_fronts];
    for (i, &r) in ranks.iter().enumerate() {
        fronts[r as usize].push(i);
    }
    for front in &mut fronts {
        for m in 0..2 {
            front.sort_by(|&a, &b| p[a][m].total_cmp(&p[b][m]).then(a.cmp(&b)));
            let (first, last) = (front[0], front[front.len() - 1]);
            distance[first] = f64::INFINITY;
            distance[last] = f64::INFINITY;
            let range = p[last][m] - p[first][m];
            if !(range > 0.0 && range.is_finite()) {
                continue;
            }
            for w in front.windows(3) {
                distance[w[1]] += (p[w[2]][m] - p[w[0]][m]) / range;
            }
        }
    }
    distance
}

/// True if `a` is better than `b` by NSGA-II's crowded comparison: a lower rank, or the same
/// rank and a larger crowding distance; ties go to the lower index.
#[inline]
pub fn crowded_better(rank: &[u32], distance: &[f64], a: usize, b: usize) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match (rank[a].cmp(&rank[b]), distance[a].total_cmp(&distance[b])) {
        (Less, _) | (Equal, Greater) => true,
        (Equal, Equal) => a < b,
        _ => false,
    }
}

/// NSGA-II's survivors: the `n` best of `points` by front, the last front that does not fit
/// whole cut by crowding distance (largest first, ties by index). Returns indices, best first.
pub fn survivors(points: &[Point], n: usize) -> Vec<usize> {
    let rank = ranks(points);
    let distance = crowding(points, &rank);
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| rank[a].cmp(&rank[b]).then(distance[b].total_cmp(&distance[a])).then(a.cmp(&b)));
    order.truncate(n);
    order
}

/// The two objectives of a population as grove ranks them: fitness (lower is better) and
/// program size in nodes. An invalid individual (fitness `+inf` or NaN) reads as `+inf` in both,
/// so a short invalid program never shares the front with a valid one. An error of -0 reads as
/// +0 (they are equal as objectives; the GPU's sorts order by bits).
pub fn points(fit: &[f64], sizes: &[u16]) -> Vec<Point> {
    fit.iter()
        .zip(sizes)
        .map(|(&f, &n)| {
            let f = key(f);
            if f.is_finite() { [f + 0.0, n as f64] } else { [f64::INFINITY, f64::INFINITY] }
        })
        .collect()
}

/// A population's ranks and crowding distances, as NSGA-II's parent tournaments read them.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    /// Non-dominated rank of each individual ([`ranks`]).
    pub rank: Vec<u32>,
    /// Crowding distance within its front ([`crowding`]).
    pub distance: Vec<f64>,
}

impl Ranking {
    /// The ranking of the population with fitness `fit` and program sizes `sizes`.
    pub fn of(fit: &[f64], sizes: &[u16]) -> Ranking {
        let p = points(fit, sizes);
        let rank = ranks(&p);
        let distance = crowding(&p, &rank);
        Ranking { rank, distance }
    }

    /// NSGA-II's parent tournament for `slot`: `k` contestants drawn from `pool` (all
    /// individuals if it is empty) as [`super::tournament`] draws them, from the stream
    /// `(seed, generation, slot, Select)`; the best by [`crowded_better`] wins.
    pub fn tournament(&self, pool: &[u32], k: usize, seed: u64, generation: u32, slot: usize) -> usize {
        let mut s = crate::rng::Stream::new(seed, generation, slot as u32, crate::rng::Purpose::Select);
        super::run_tournament(self.rank.len(), pool, k, &mut s, |a, b| crowded_better(&self.rank, &self.distance, a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, Stream};

    /// NSGA-II's fronts by definition: peel off the points no remaining point dominates or
    /// equals with a lower index.
    fn brute_ranks(p: &[Point]) -> Vec<u32> {
        let mut rank = vec![u32::MAX; p.len()];
        let mut r = 0;
        let same = |a: Point, b: Point| key(a[0]) == key(b[0]) && key(a[1]) == key(b[1]);
        while rank.contains(&u32::MAX) {
            let front: Vec<usize> = (0..p.len())
                .filter(|&i| {
                    rank[i] == u32::MAX && !(0..p.len()).any(|j| rank[j] == u32::MAX && (dominates(p[j], p[i]) || (j < i && same(p[j], p[i]))))
                })
                .collect();
            for i in front {
                rank[i] = r;
            }
            r += 1;
        }
        rank
    }

    fn random_points(seed: u64, n: usize, levels: u32) -> Vec<Point> {
        let mut s = Stream::new(seed, 0, 0, Purpose::Init);
        (0..n)
            .map(|_| {
                let mut v = [s.below(levels) as f64, s.below(levels) as f64];
                // Now and then an invalid program: NaN or infinite error.
                match s.below(40) {
                    0 => v[0] = f64::NAN,
                    1 => v[0] = f64::INFINITY,
                    _ => {}
                }
                v
            })
            .collect()
    }

    #[test]
    fn ranks_match_the_definition_on_random_fronts_with_ties() {
        for seed in 0..400 {
            // Few levels: many equal and tied points, as integer sizes give.
            let (n, levels) = (1 + (seed as usize * 7) % 60, [2, 3, 5, 20, 1000][seed as usize % 5]);
            let p = random_points(seed, n, levels);
            assert_eq!(ranks(&p), brute_ranks(&p), "seed {seed}: {p:?}");
        }
    }

    #[test]
    fn an_equal_point_ranks_behind_its_copy_and_dominance_is_strict() {
        let p = [[1.0, 5.0], [1.0, 5.0], [2.0, 5.0], [1.0, 6.0], [0.5, 9.0]];
        // The second (1, 5) goes behind the first; (2, 5) and (1, 6) are dominated by both.
        assert_eq!(ranks(&p), [0, 1, 2, 2, 0]);
        assert_eq!(ranks(&[[3.0, 1.0]; 4]), [0, 1, 2, 3]);
        assert!(!dominates(p[0], p[1]));
        assert!(dominates(p[0], p[2]) && dominates(p[0], p[3]));
        assert_eq!(ranks(&[]), Vec::<u32>::new());
    }

    #[test]
    fn crowding_is_infinite_at_the_ends_and_sums_normalised_gaps() {
        // One front: (0,4) (1,2) (3,1) (4,0).
        let p = [[1.0, 2.0], [4.0, 0.0], [0.0, 4.0], [3.0, 1.0]];
        let r = ranks(&p);
        assert_eq!(r, [0, 0, 0, 0]);
        let d = crowding(&p, &r);
        assert!(d[1].is_infinite() && d[2].is_infinite());
        // (1,2): neighbours (0,4) and (3,1): 3/4 + 3/4. (3,1): (1,2) and (4,0): 3/4 + 2/4.
        assert!((d[0] - 1.5).abs() < 1e-12 && (d[3] - 1.25).abs() < 1e-12, "{d:?}");
        // A front with no range in one objective adds only the other's gaps.
        let p = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]];
        let d = crowding(&p, &[0, 0, 0]);
        assert_eq!(d.iter().filter(|x| x.is_infinite()).count(), 2);
        assert_eq!(d.iter().filter(|&&x| x == 0.0).count(), 1);
    }

    #[test]
    fn survivors_fill_by_fronts_then_by_crowding() {
        let p = [[0.0, 4.0], [1.0, 2.0], [4.0, 0.0], [3.0, 1.0], [5.0, 5.0], [2.0, 1.5]];
        // Front 0: indices 0, 1, 5, 3, 2 (a line of five); 4 is dominated.
        let s = survivors(&p, 4);
        assert_eq!(s.len(), 4);
        assert!(!s.contains(&4));
        // The ends (0 and 2) are kept first, then the most crowded-apart interior points.
        assert_eq!(&s[..2], &[0, 2]);
        let d = crowding(&p, &ranks(&p));
        let dropped = *[1usize, 3, 5].iter().find(|i| !s.contains(i)).unwrap();
        assert!(s.iter().all(|&i| d[i] >= d[dropped]), "{s:?} {d:?}");
        // The comparison agrees with the survivors' order.
        let r = ranks(&p);
        for w in s.windows(2) {
            assert!(crowded_better(&r, &d, w[0], w[1]) || (r[w[0]] == r[w[1]] && d[w[0]] == d[w[1]]));
        }
    }

    #[test]
    fn invalid_programs_rank_behind_every_valid_one() {
        let fit = [f64::INFINITY, 3.0, f64::NAN, 1.0];
        let sizes = [1u16, 9, 0, 20];
        let r = Ranking::of(&fit, &sizes);
        // A one-node invalid program must not join the front; the second invalid one (equal to
        // the first) ranks behind it.
        assert_eq!(r.rank, [1, 0, 2, 0]);
        for slot in 0..200 {
            // Among the valid pool the winner is valid; its first contestant is the plain
            // one-contestant draw of the same stream.
            assert!(fit[r.tournament(&[1, 3], 3, 5, 2, slot)].is_finite());
            assert_eq!(r.tournament(&[], 1, 5, 2, slot), super::super::tournament(&[0.0; 4], &[], 1, 5, 2, slot));
        }
        // Many contestants: the winner is on the first front, at one of its ends.
        let fit: Vec<f64> = (0..30).map(|i| (30 - i) as f64).collect();
        let sizes: Vec<u16> = (0..30).map(|i| if i % 2 == 0 { i as u16 + 1 } else { 40 }).collect();
        let r = Ranking::of(&fit, &sizes);
        let w = r.tournament(&[], 200, 1, 1, 0);
        assert_eq!(r.rank[w], 0);
        assert!(r.distance[w].is_infinite(), "{w}");
    }

    #[test]
    fn ranks_scale_to_a_million_points() {
        let p = random_points(7, 1_000_000, 128);
        let start = std::time::Instant::now();
        let r = ranks(&p);
        assert!(start.elapsed().as_secs_f64() < 5.0, "took {:?}", start.elapsed());
        // Spot-check the definition on a sample: no point dominates one of a lower rank.
        for i in (0..p.len()).step_by(9973) {
            for j in (0..p.len()).step_by(7919) {
                if dominates(p[j], p[i]) {
                    assert!(r[j] < r[i], "{j} dominates {i} but ranks {} >= {}", r[j], r[i]);
                }
            }
        }
    }
}
