//! Property tests of the tree variation operators (`src/program/vary.rs`): on random
//! populations (single- and multi-output, roomy and tiny `L`, with empty and one-node parents)
//! every operator gives valid, deterministic children that are what it says they are.

use grove::program::init::{TreeSpec, init_population};
use grove::program::vary::{self, BreedConfig, Crossover, Mutation, Outcome, VaryConfig, breed, crossover_stream, mutation_stream};
use grove::program::{Node, Op, Population, TreeRef};

const P: usize = 300;
const SEEDS: [u64; 3] = [1, 2, 3];

/// The specs every operator is tried on: (name, spec).
fn specs() -> Vec<(&'static str, TreeSpec)> {
    let base = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos], 3, 64)
        .with_constants(&[-1.0, 0.0, 1.0])
        .with_const_range(-5.0, 5.0)
        .with_depth(1, 5);
    vec![
        ("single", base.clone()),
        ("multi", base.clone().with_outputs(3, 0.05)),
        ("tight", TreeSpec { max_len: 16, ..base.clone().with_depth(2, 4) }),
        ("tiny", TreeSpec { max_len: 3, ..base.clone() }),
        ("tiny-multi", TreeSpec { max_len: 5, ..base.clone().with_outputs(2, 0.0) }),
        ("one-node", TreeSpec { max_len: 1, ..base }),
    ]
}

/// A random population with an empty row 0 and one-node rows 1 (a variable) and 2 (a constant).
fn parents(spec: &TreeSpec, seed: u64) -> Population {
    let mut pop = init_population(spec, P, seed).unwrap();
    pop.clear(0);
    let mut x = Node::var(1);
    x.out = (spec.n_outputs > 0) as u8;
    pop.set_tree(1, &[x]).unwrap();
    pop.set_tree(2, &[Node::constant(0.5)]).unwrap();
    pop.validate().unwrap();
    pop
}

/// The donor of child `r`.
fn donor(r: usize) -> usize {
    (r * 7 + 3) % P
}

#[derive(Clone, Copy, Debug)]
enum AnyOp {
    X(Crossover),
    M(Mutation),
}

fn all_ops() -> Vec<AnyOp> {
    Crossover::ALL.iter().map(|&x| AnyOp::X(x)).chain(Mutation::ALL.iter().map(|&m| AnyOp::M(m))).collect()
}

/// Applies `op` to every row: child `r` from parent `r` (and donor `donor(r)`).
fn run(op: AnyOp, pop: &Population, seed: u64, cfg: &VaryConfig) -> (Population, Vec<Outcome>) {
    let mut out = Population::new(P, pop.max_len, pop.n_outputs);
    let outcomes = (0..P)
        .map(|r| {
            let mut row = out.row_mut(r);
            match op {
                AnyOp::X(x) => x.apply(pop.tree(r), pop.tree(donor(r)), &mut row, &mut crossover_stream(seed, 1, r), cfg),
                AnyOp::M(m) => m.apply(pop.tree(r), &mut row, &mut mutation_stream(seed, 1, r), cfg),
            }
        })
        .collect();
    (out, outcomes)
}

fn bitwise_eq(a: TreeRef<'_>, b: TreeRef<'_>) -> bool {
    a.op == b.op && a.size == b.size && a.out == b.out && a.value.iter().zip(b.value).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn pops_bitwise_eq(a: &Population, b: &Population) -> bool {
    a.len == b.len && a.op == b.op && a.size == b.size && a.out == b.out && a.value.iter().zip(&b.value).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Opcode and value bits of each node (what a node computes, ignoring its output slot, which
/// slot repair may move).
fn sym(t: TreeRef<'_>) -> Vec<(u8, u32)> {
    t.op.iter().zip(t.value).map(|(o, v)| (*o, v.to_bits())).collect()
}

fn arity(code: u8) -> usize {
    Op::from_code(code).unwrap().arity()
}

/// Every way to read `child` as `parent` with its subtree at `i` replaced by some `middle`:
/// `(i, middle)` with matching prefix and suffix symbols.
fn splices(parent: TreeRef<'_>, child: TreeRef<'_>) -> Vec<(usize, Vec<(u8, u32)>)> {
    let (p, c) = (sym(parent), sym(child));
    (0..p.len())
        .filter_map(|i| {
            let s = parent.size[i] as usize;
            let suffix = p.len() - i - s;
            let mid = (c.len() + s).checked_sub(p.len()).filter(|&m| m >= 1)?;
            (c[..i] == p[..i] && c[i + mid..] == p[i + s..] && c.len() - i - mid == suffix).then(|| (i, c[i..i + mid].to_vec()))
        })
        .collect()
}

/// The symbols of every subtree of `t`, with its root position.
fn subtrees(t: TreeRef<'_>) -> Vec<(usize, Vec<(u8, u32)>)> {
    let s = sym(t);
    (0..t.len()).map(|j| (j, s[j..j + t.size[j] as usize].to_vec())).collect()
}

fn slot_set(t: TreeRef<'_>) -> Vec<u8> {
    let mut s: Vec<u8> = t.out.iter().copied().filter(|&o| o > 0).collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn is_subset(a: &[u8], b: &[u8]) -> bool {
    a.iter().all(|x| b.contains(x))
}

/// Checks what holds for every operator, then the operator's own promise on each changed child.
fn check_operator(op: AnyOp) {
    for (name, spec) in specs() {
        let cfg = VaryConfig::new(spec.clone());
        for seed in SEEDS {
            let pop = parents(&spec, seed);
            let (out, outcomes) = run(op, &pop, seed, &cfg);
            let ctx = format!("{op:?} on {name}, seed {seed}");
            out.validate().unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let (again, outcomes2) = run(op, &pop, seed, &cfg);
            assert!(pops_bitwise_eq(&out, &again) && outcomes == outcomes2, "{ctx}: not deterministic");
            let (other, _) = run(op, &pop, seed + 100, &cfg);
            if name == "single" {
                assert!(!pops_bitwise_eq(&out, &other), "{ctx}: the seed is ignored");
            }
            for (r, &outcome) in outcomes.iter().enumerate() {
                let (parent, child) = (pop.tree(r), out.tree(r));
                let c = format!("{ctx}, row {r}: {outcome:?}");
                assert!(child.len() <= spec.max_len, "{c}");
                assert_eq!(outcome == Outcome::Changed, !bitwise_eq(parent, child), "{c}");
                assert!(is_subset(&slot_set(parent), &slot_set(child)), "{c}: output slot lost");
                if parent.is_empty() || (matches!(op, AnyOp::X(_)) && pop.tree(donor(r)).is_empty()) {
                    assert_eq!(outcome, Outcome::Unchanged, "{c}: empty parent");
                }
                if outcome == Outcome::Changed {
                    check_changed(op, &cfg, parent, pop.tree(donor(r)), child).unwrap_or_else(|e| panic!("{c}: {e}"));
                }
            }
            let changed = outcomes.iter().filter(|o| **o == Outcome::Changed).count();
            if name == "single" || name == "multi" {
                assert!(changed > P / 3, "{ctx}: only {changed} of {P} changed");
            }
        }
    }
}

/// The operator's own promise for a child that differs from its parent.
fn check_changed(op: AnyOp, cfg: &VaryConfig, parent: TreeRef<'_>, donor: TreeRef<'_>, child: TreeRef<'_>) -> Result<(), String> {
    let same_shape = || parent.len() == child.len() && parent.size == child.size && parent.out == child.out;
    let splice = splices(parent, child);
    match op {
        AnyOp::X(_) => {
            // Recipient outside the swapped region, a donor subtree inside.
            let subs = subtrees(donor);
            splice.iter().any(|(_, m)| subs.iter().any(|(_, s)| s == m)).then_some(()).ok_or("not recipient + donor subtree")?
        }
        AnyOp::M(Mutation::Subtree) => {
            let fresh_ok = |m: &[(u8, u32)]| {
                let mut tmp = Population::new(1, m.len(), 0);
                let nodes: Vec<Node> = m.iter().map(|&(o, v)| Node { op: Op::from_code(o).unwrap(), value: f32::from_bits(v), out: 0 }).collect();
                tmp.set_tree(0, &nodes).is_ok() && tmp.tree(0).depth() <= cfg.subtree_depth.1 as usize
            };
            splice.iter().any(|(_, m)| fresh_ok(m)).then_some(()).ok_or("not parent + fresh shallow subtree")?
        }
        AnyOp::M(m @ (Mutation::Hoist | Mutation::Delete)) => {
            if child.len() >= parent.len() {
                return Err("not shorter".into());
            }
            // A function node's subtree replaced by a proper descendant's (a direct child's, for delete).
            let ok = splice.iter().any(|(i, mid)| {
                let (i, s) = (*i, parent.size[*i] as usize);
                let mut direct = vec![];
                let mut j = i + 1;
                while j < i + s {
                    direct.push(j);
                    j += parent.size[j] as usize;
                }
                arity(parent.op[i]) > 0
                    && subtrees(parent).iter().any(|(j, sub)| {
                        sub == mid && *j > i && *j < i + s && (m == Mutation::Hoist || direct.contains(j))
                    })
            });
            ok.then_some(()).ok_or("not a subtree replaced by its own descendant")?
        }
        AnyOp::M(Mutation::Insert) => {
            let a = child.len() - parent.len();
            // A new function of arity `a` above node i: one child is the old subtree, the others leaves.
            let ok = splice.iter().any(|(i, mid)| {
                let old = sym(parent.subtree(*i));
                arity(mid[0].0) == a && (0..a).any(|pos| {
                    let mut k = 1;
                    (0..a).all(|c| {
                        let ok = if c == pos { mid[k..].starts_with(&old) } else { arity(mid[k].0) == 0 };
                        k += if c == pos { old.len() } else { 1 };
                        ok
                    })
                })
            });
            ((a == 1 || a == 2) && ok).then_some(()).ok_or("not a function inserted above a subtree")?
        }
        AnyOp::M(Mutation::Point | Mutation::MultiPoint) => {
            if !same_shape() {
                return Err("shape or outputs changed".into());
            }
            let diff: Vec<usize> = (0..parent.len()).filter(|&i| sym(parent)[i] != sym(child)[i]).collect();
            for &i in &diff {
                if arity(parent.op[i]) != arity(child.op[i]) {
                    return Err(format!("node {i} changed arity"));
                }
                let new = Op::from_code(child.op[i]).unwrap();
                if !new.is_leaf() && !cfg.spec.functions.contains(&new) {
                    return Err(format!("node {i} became {new}, not in the function set"));
                }
            }
            if matches!(op, AnyOp::M(Mutation::Point)) && diff.len() != 1 {
                return Err(format!("{} nodes changed", diff.len()));
            }
        }
        AnyOp::M(Mutation::Constant | Mutation::MultiConstant) => {
            if !same_shape() || parent.op != child.op {
                return Err("not only constant values changed".into());
            }
            let diff: Vec<usize> = (0..parent.len()).filter(|&i| parent.value[i].to_bits() != child.value[i].to_bits()).collect();
            if diff.iter().any(|&i| parent.op[i] != Op::Const as u8) {
                return Err("a non-constant value changed".into());
            }
            if matches!(op, AnyOp::M(Mutation::Constant)) && diff.len() != 1 {
                return Err(format!("{} constants changed", diff.len()));
            }
        }
    }
    Ok(())
}

#[test]
fn one_point_crossover_properties() {
    check_operator(AnyOp::X(Crossover::OnePoint));
}

#[test]
fn leaf_biased_crossover_properties() {
    check_operator(AnyOp::X(Crossover::LeafBiased));
}

#[test]
fn subtree_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Subtree));
}

#[test]
fn hoist_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Hoist));
}

#[test]
fn point_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Point));
}

#[test]
fn multi_point_mutation_properties() {
    check_operator(AnyOp::M(Mutation::MultiPoint));
}

#[test]
fn insert_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Insert));
}

#[test]
fn delete_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Delete));
}

#[test]
fn constant_mutation_properties() {
    check_operator(AnyOp::M(Mutation::Constant));
}

#[test]
fn multi_constant_mutation_properties() {
    check_operator(AnyOp::M(Mutation::MultiConstant));
}

#[test]
fn point_mutation_gives_another_leaf_even_with_few_leaves() {
    // Two variables and no constants: a single redraw would repeat the leaf half the time.
    let spec = TreeSpec::new(vec![Op::Add], 2, 1);
    let pop = init_population(&spec, P, 3).unwrap();
    let (out, outcomes) = run(AnyOp::M(Mutation::Point), &pop, 3, &VaryConfig::new(spec));
    let changed = outcomes.iter().filter(|o| **o == Outcome::Changed).count();
    assert!(changed > P * 88 / 100, "{changed} of {P} leaves changed");
    assert!((0..P).all(|r| out.value[r] < 2.0 && out.op[r] == Op::Var as u8));
}

fn spec_named(name: &str) -> TreeSpec {
    specs().into_iter().find(|s| s.0 == name).unwrap().1
}

#[test]
fn leaf_biased_crossover_cuts_where_asked() {
    let spec = spec_named("single");
    let pop = parents(&spec, 4);
    // p_leaf = 1: a leaf for a leaf, so the length stays and one symbol changes.
    let cfg = VaryConfig { p_leaf: 1.0, ..VaryConfig::new(spec.clone()) };
    let (out, outcomes) = run(AnyOp::X(Crossover::LeafBiased), &pop, 4, &cfg);
    for r in (0..P).filter(|&r| outcomes[r] == Outcome::Changed) {
        let (p, c) = (sym(pop.tree(r)), sym(out.tree(r)));
        assert_eq!(p.len(), c.len(), "row {r}");
        assert_eq!(p.iter().zip(&c).filter(|(a, b)| a != b).count(), 1, "row {r}");
    }
    // p_leaf = 0: a function node is cut (the recipient has some) and a function subtree comes in.
    let cfg = VaryConfig { p_leaf: 0.0, ..cfg };
    let (out, outcomes) = run(AnyOp::X(Crossover::LeafBiased), &pop, 4, &cfg);
    for r in (0..P).filter(|&r| outcomes[r] == Outcome::Changed) {
        let (rec, don) = (pop.tree(r), pop.tree(donor(r)));
        let want = |t: TreeRef<'_>, op: u8| arity(op) > 0 || t.op.iter().all(|&o| arity(o) == 0);
        let subs = subtrees(don);
        let ok = splices(rec, out.tree(r)).iter().any(|(i, m)| {
            want(rec, rec.op[*i]) && subs.iter().any(|(j, s)| s == m && want(don, don.op[*j]))
        });
        assert!(ok, "row {r}: no function-to-function cut explains the child");
    }
}

#[test]
fn multi_point_mutation_changes_nodes_independently_not_all_or_none() {
    // EvoGP's multi-point mutation changes every node or none; ours decides per node.
    let spec = spec_named("single");
    let cfg = VaryConfig { p_point: 0.2, ..VaryConfig::new(spec.clone()) };
    let (mut nodes, mut changed, mut partial, mut big) = (0, 0, 0, 0);
    for seed in SEEDS {
        let pop = parents(&spec, seed);
        let (out, _) = run(AnyOp::M(Mutation::MultiPoint), &pop, seed, &cfg);
        for r in 0..P {
            let (p, c) = (sym(pop.tree(r)), sym(out.tree(r)));
            let d = p.iter().zip(&c).filter(|(a, b)| a != b).count();
            nodes += p.len();
            changed += d;
            if p.len() >= 10 {
                big += 1;
                partial += (d > 0 && d < p.len()) as usize;
            }
        }
    }
    let rate = changed as f64 / nodes as f64;
    assert!((0.17..0.23).contains(&rate), "changed {changed} of {nodes} nodes at p = 0.2");
    assert!(partial * 10 > big * 8, "only {partial} of {big} trees partly changed");
}

#[test]
fn multi_constant_mutation_changes_about_p_of_the_constants() {
    let spec = spec_named("single");
    let cfg = VaryConfig { p_constant: 0.3, ..VaryConfig::new(spec.clone()) };
    let (mut consts, mut changed) = (0, 0);
    for seed in SEEDS {
        let pop = parents(&spec, seed);
        let (out, _) = run(AnyOp::M(Mutation::MultiConstant), &pop, seed, &cfg);
        for r in 0..P {
            let (p, c) = (pop.tree(r), out.tree(r));
            for i in (0..p.len()).filter(|&i| p.op[i] == Op::Const as u8) {
                consts += 1;
                changed += (p.value[i] != c.value[i]) as usize;
            }
        }
    }
    let rate = changed as f64 / consts as f64;
    assert!((0.25..0.35).contains(&rate), "changed {changed} of {consts} constants at p = 0.3");
}

#[test]
fn constant_perturbations_have_the_configured_spread() {
    let spec = TreeSpec::new(vec![], 0, 1).with_constants(&[0.0]);
    let cfg = VaryConfig { sigma: 2.0, ..VaryConfig::new(spec.clone()) };
    let pop = init_population(&spec, P, 1).unwrap();
    let (out, _) = run(AnyOp::M(Mutation::Constant), &pop, 1, &cfg);
    let var = out.value.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / P as f64;
    assert!((2.5..5.5).contains(&var), "variance {var}, expected 4");
}

#[test]
fn oversized_children_keep_their_parent_and_are_counted() {
    let tight = spec_named("tight");
    let pop = parents(&tight, 1);
    let (out, outcomes) = run(AnyOp::X(Crossover::OnePoint), &pop, 1, &VaryConfig::new(tight));
    let over: Vec<usize> = (0..P).filter(|&r| outcomes[r] == Outcome::Oversized).collect();
    assert!(!over.is_empty(), "no crossover ran over L = 16");
    assert!(over.iter().all(|&r| bitwise_eq(pop.tree(r), out.tree(r))));
    // Insertion into a full row of L = 3 never fits.
    let tiny = spec_named("tiny");
    let pop = parents(&tiny, 1);
    let (out, outcomes) = run(AnyOp::M(Mutation::Insert), &pop, 1, &VaryConfig::new(tiny));
    for r in (0..P).filter(|&r| pop.tree(r).len() == 3) {
        assert_eq!(outcomes[r], Outcome::Oversized, "row {r}");
        assert!(bitwise_eq(pop.tree(r), out.tree(r)));
    }
}

#[test]
fn lost_output_slots_are_put_back_or_the_parent_kept() {
    // Tiny multi-output trees: hoist and delete cut output nodes away; every slot the parent
    // had must survive, on a new node, or the child must be the parent.
    let spec = spec_named("tiny-multi");
    let cfg = VaryConfig::new(spec.clone());
    let mut kinds = std::collections::HashSet::new();
    for op in [Mutation::Hoist, Mutation::Delete, Mutation::Subtree] {
        let pop = parents(&spec, 7);
        let (out, outcomes) = run(AnyOp::M(op), &pop, 7, &cfg);
        for (r, &outcome) in outcomes.iter().enumerate() {
            kinds.insert(outcome);
            assert!(is_subset(&slot_set(pop.tree(r)), &slot_set(out.tree(r))), "{op:?} row {r}");
            if outcome == Outcome::NoRoomForOutputs {
                assert!(bitwise_eq(pop.tree(r), out.tree(r)));
            }
        }
    }
    assert!(kinds.contains(&Outcome::NoRoomForOutputs) && kinds.contains(&Outcome::Changed), "{kinds:?}");
}

#[test]
fn delete_mutation_on_a_lone_leaf_or_empty_tree_does_not_crash() {
    // EvoGP's delete mutation hits a device-side assert on a tree without function nodes.
    let spec = spec_named("one-node");
    let cfg = VaryConfig::new(spec.clone());
    for op in all_ops() {
        let pop = parents(&spec, 2);
        let (out, outcomes) = run(op, &pop, 2, &cfg);
        out.validate().unwrap();
        assert!((0..P).all(|r| out.tree(r).len() == pop.tree(r).len()), "{op:?}");
        if matches!(op, AnyOp::M(Mutation::Delete | Mutation::Hoist | Mutation::Insert)) {
            assert!(outcomes.iter().all(|o| *o != Outcome::Changed), "{op:?}");
        }
    }
}

#[test]
fn operators_overwrite_a_dirty_row_completely() {
    // A reused child buffer holds an old, longer tree: the child must still be zero-padded.
    let spec = spec_named("single");
    let pop = parents(&spec, 5);
    let cfg = VaryConfig::new(spec);
    for op in all_ops() {
        let mut out = pop.clone();
        for r in 0..P {
            let mut row = out.row_mut(r);
            let src = (r + 1) % P;
            match op {
                AnyOp::X(x) => x.apply(pop.tree(src), pop.tree(donor(src)), &mut row, &mut crossover_stream(5, 1, r), &cfg),
                AnyOp::M(m) => m.apply(pop.tree(src), &mut row, &mut mutation_stream(5, 1, r), &cfg),
            };
        }
        out.validate().unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
}

fn mix() -> BreedConfig {
    BreedConfig {
        p_crossover: 0.8,
        crossovers: vec![(Crossover::OnePoint, 3.0), (Crossover::LeafBiased, 1.0)],
        p_mutation: 0.5,
        mutations: Mutation::ALL.iter().map(|&m| (m, 1.0)).collect(),
    }
}

fn pairs(n: usize, parents: usize) -> Vec<[u32; 2]> {
    (0..n).map(|k| [(k * 13 % parents) as u32, (k * 29 + 5) as u32 % parents as u32]).collect()
}

#[test]
fn breed_is_valid_and_the_same_for_any_thread_count() {
    for name in ["single", "multi", "tiny"] {
        let spec = spec_named(name);
        let cfg = VaryConfig::new(spec.clone());
        let pop = parents(&spec, 8);
        let pairs = pairs(500, P);
        let mut a = Population::new(500, spec.max_len, spec.n_outputs);
        let bred_a = breed(&pop, &pairs, &mut a, 8, 3, &cfg, &mix()).unwrap();
        a.validate().unwrap();
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut b = Population::new(500, spec.max_len, spec.n_outputs);
        let bred_b = one.install(|| breed(&pop, &pairs, &mut b, 8, 3, &cfg, &mix()).unwrap());
        assert!(pops_bitwise_eq(&a, &b) && bred_a == bred_b, "{name}");
        let crossed = bred_a.iter().filter(|b| b.crossover.is_some()).count();
        let mutated = bred_a.iter().filter(|b| b.mutation.is_some()).count();
        assert!((350..450).contains(&crossed) && (200..300).contains(&mutated), "{crossed} crossed, {mutated} mutated");
        for (k, b) in bred_a.iter().enumerate() {
            if b.crossover.is_none() && b.mutation.is_none() {
                assert!(bitwise_eq(a.tree(k), pop.tree(pairs[k][0] as usize)), "child {k}");
            }
        }
    }
}

#[test]
fn breed_draws_the_choice_then_runs_the_operator_on_the_same_stream() {
    // The draw order is the contract a CUDA twin follows: chance(p), unit for the pick, then
    // the operator's own draws.
    let spec = spec_named("single");
    let cfg = VaryConfig::new(spec.clone());
    let pop = parents(&spec, 9);
    let pairs = pairs(P, P);
    let mix = BreedConfig { p_crossover: 0.0, crossovers: vec![], p_mutation: 1.0, mutations: vec![(Mutation::Subtree, 0.0), (Mutation::Hoist, 1.0)] };
    let mut out = Population::new(P, spec.max_len, 0);
    let bred = breed(&pop, &pairs, &mut out, 9, 4, &cfg, &mix).unwrap();
    let mut expect = Population::new(P, spec.max_len, 0);
    for k in 0..P {
        let mut ms = mutation_stream(9, 4, k);
        assert!(ms.chance(1.0));
        ms.unit_f32();
        let o = vary::hoist_mutation(pop.tree(pairs[k][0] as usize), &mut expect.row_mut(k), &mut ms);
        assert_eq!(bred[k].mutation, Some((Mutation::Hoist, o)), "child {k}");
    }
    assert!(pops_bitwise_eq(&out, &expect));
}

#[test]
fn breed_rejects_bad_input_with_a_reason() {
    let spec = spec_named("single");
    let cfg = VaryConfig::new(spec.clone());
    let pop = parents(&spec, 1);
    let mut out = Population::new(2, spec.max_len, 0);
    let e = breed(&pop, &[[0, 1], [2, P as u32]], &mut out, 1, 1, &cfg, &mix()).unwrap_err();
    assert!(e.contains("parent 300"), "{e}");
    let e = breed(&pop, &[[0, 1]], &mut out, 1, 1, &cfg, &mix()).unwrap_err();
    assert!(e.contains("1 pairs"), "{e}");
    let mut wrong = Population::new(2, 10, 0);
    assert!(breed(&pop, &[[0, 1], [1, 2]], &mut wrong, 1, 1, &cfg, &mix()).unwrap_err().contains("L = 64"));
    let bad = BreedConfig { mutations: vec![(Mutation::Point, 0.0)], ..mix() };
    assert!(breed(&pop, &[[0, 1], [1, 2]], &mut out, 1, 1, &cfg, &bad).unwrap_err().contains("positive weight"));
    let bad = VaryConfig { subtree_depth: (3, 2), ..cfg.clone() };
    assert!(breed(&pop, &[[0, 1], [1, 2]], &mut out, 1, 1, &bad, &mix()).unwrap_err().contains("subtree depths"));
    let bad = VaryConfig { p_point: 2.0, ..cfg.clone() };
    assert!(breed(&pop, &[[0, 1], [1, 2]], &mut out, 1, 1, &bad, &mix()).unwrap_err().contains("p_point"));
}
