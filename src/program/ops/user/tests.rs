//! Tests of user operators: values against their bodies computed by hand, derivatives, the
//! registry's interning, and every bad definition. Names are unique per test (the registry is
//! process-wide and tests run in parallel).

use super::*;
use crate::program::ops::apply_fast;

fn reg(defs: &[&str]) -> Result<Vec<Op>, String> {
    register(&defs.iter().map(|d| d.to_string()).collect::<Vec<_>>())
}

const XS: [f32; 9] = [-3.5, -1.0, -1e-3, -0.0, 0.0, 0.25, 1.0, 2.5, 1e6];

#[test]
fn softsign_is_its_body_bit_for_bit() {
    let [op] = reg(&["t_softsign(x) = x / (1 + abs(x))"]).unwrap()[..] else { panic!() };
    assert!(op.is_user());
    assert_eq!(op.arity(), 1);
    assert_eq!(op.name(), "t_softsign");
    assert_eq!(Op::by_name("t_softsign"), Some(op));
    assert_eq!(Op::from_code(op as u8), Some(op));
    for x in XS {
        let want = apply_fast(Op::Div, x, apply_fast(Op::Add, 1.0, apply_fast(Op::Abs, x, 0.0)));
        assert_eq!(apply_fast(op, x, 0.0).to_bits(), want.to_bits(), "t_softsign({x})");
        let exact = x as f64 / (1.0 + (x as f64).abs());
        assert!((op.apply(x as f64, 0.0) - exact).abs() < 1e-12);
    }
}

#[test]
fn two_arguments_precedence_unary_minus_and_composition() {
    let ops = reg(&["t_hyp(a, b) = sqrt(a*a + b*b)", "t_cube3(x) = x*x*x", "t_mix(p, q) = -t_cube3(p) - 2 * q + np.sin(q) / 0.5"]).unwrap();
    let (hyp, cube3, mix) = (ops[0], ops[1], ops[2]);
    assert_eq!((hyp.arity(), cube3.arity(), mix.arity()), (2, 1, 2));
    for a in XS {
        for b in XS {
            let h = apply_fast(Op::Sqrt, apply_fast(Op::Add, a * a, b * b), 0.0);
            assert_eq!(apply_fast(hyp, a, b).to_bits(), h.to_bits());
            let c = a * a * a;
            let m = apply_fast(Op::Add, apply_fast(Op::Sub, -c, 2.0 * b), apply_fast(Op::Div, apply_fast(Op::Sin, b, 0.0), 0.5));
            assert_eq!(apply_fast(mix, a, b).to_bits(), m.to_bits(), "t_mix({a}, {b})");
        }
    }
    // The composed operator's callee comes with it, callee first.
    assert_eq!(definitions_for([mix]), ["t_cube3(x) = x*x*x", "t_mix(p, q) = -t_cube3(p) - 2 * q + np.sin(q) / 0.5"]);
    assert_eq!(get(mix).unwrap().deps, [cube3]);
}

#[test]
fn the_same_definition_gets_the_same_opcode_and_a_new_meaning_a_new_one() {
    let a = reg(&["t_twice(x) = x + x"]).unwrap();
    let b = reg(&["  t_twice(x) =   x+x "]).unwrap();
    assert_eq!(a, b);
    let c = reg(&["t_twice(x) = 2 * x"]).unwrap();
    assert_ne!(a, c);
    assert_eq!(Op::by_name("t_twice"), Some(c[0]), "a name means its latest registration");
    assert_eq!(reg(&["t_twice(x) = x + x"]).unwrap(), a);
    assert_eq!(Op::by_name("t_twice"), Some(a[0]));
}

#[test]
fn forward_references_within_a_set_are_ordered() {
    let ops = reg(&["t_outer(x) = t_inner(x) + 1", "t_inner(x) = x * 3"]).unwrap();
    assert!(ops[1] < ops[0], "the callee is registered first");
    assert_eq!(apply_fast(ops[0], 2.0, 0.0), 7.0);
}

#[test]
fn partials_are_forward_mode_through_the_body() {
    let [op] = reg(&["t_dsoft(x) = x / (1 + abs(x))"]).unwrap()[..] else { panic!() };
    let [h] = reg(&["t_dhyp(a, b) = sqrt(a*a + b*b)"]).unwrap()[..] else { panic!() };
    let chain = |d: f32, t: f32| if d == 0.0 || t == 0.0 { 0.0 } else { d * t };
    let parts = |op: Op, a: f32, b: f32, r: f32| match op {
        Op::Add => (1.0, 1.0),
        Op::Mul => (b, a),
        Op::Div => (1.0 / b, -(r / b)),
        Op::Abs => (a.signum(), 0.0),
        Op::Sqrt => (a.signum() * (0.5 / r), 0.0),
        _ => unreachable!("{op}"),
    };
    for x in [-2.0f32, -0.5, 0.75, 3.0] {
        let (da, db) = get(op).unwrap().partials(x, 0.0, apply_fast, parts, chain);
        let want = 1.0 / ((1.0 + x.abs()) as f64).powi(2);
        assert!((da as f64 - want).abs() < 1e-6, "d t_dsoft/dx at {x}: {da} vs {want}");
        assert_eq!(db, 0.0);
        let (ha, hb) = get(h).unwrap().partials(x, 2.0, apply_fast, parts, chain);
        let r = ((x * x + 4.0) as f64).sqrt();
        assert!((ha as f64 - x as f64 / r).abs() < 1e-6 && (hb as f64 - 2.0 / r).abs() < 1e-6, "{ha} {hb}");
    }
}

#[test]
fn bad_definitions_are_one_line_naming_the_definition() {
    let cases: &[(&[&str], &str)] = &[
        (&["t_self(x) = t_self(x) + 1"], "`t_self` calls itself"),
        (&["t_ping(x) = t_pong(x)", "t_pong(x) = t_ping(x) * 2"], "calls itself through t_ping → t_pong → t_ping"),
        (&["t_unk(x) = frobnicate(x)"], "unknown operator `frobnicate`"),
        (&["t_var(x) = x + y"], "unknown variable `y` (the parameters are x)"),
        (&["sin(x) = x"], "`sin` shadows the built-in operator `sin`"),
        (&["sq(x) = x * x"], "`sq` shadows the built-in operator `square`"),
        (&["t_dup(x) = x", "t_dup(x) = x + 1"], "`t_dup` is defined twice"),
        (&["t_arity(x) = hyp2(x)", "hyp2(a, b) = a + b"], "`hyp2` takes 2 arguments, given 1"),
        (&["t_arity1(x) = sin(x, x)"], "`sin` takes 1 argument, given 2"),
        (&["t_three(a, b, c) = a"], "takes 3 parameters; an operator takes 1 or 2"),
        (&["t_noeq(x)"], "no `=`"),
        (&["t_empty(x) = "], "the body is empty"),
        (&["t_paren(x) = (x + 1"], "a `(` is not closed"),
        (&["t_junk(x) = x $ 2"], "unexpected `$`"),
        (&["2bad(x) = x"], "`2bad` is not a name"),
    ];
    for (defs, want) in cases {
        let e = reg(defs).unwrap_err();
        assert!(e.contains(want), "{defs:?}: {e}");
        assert!(e.starts_with("definition `"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
    let many: Vec<String> = (0..=MAX_DEFINITIONS).map(|i| format!("t_many{i}(x) = x")).collect();
    assert!(register(&many).unwrap_err().contains(&format!("at most {MAX_DEFINITIONS}")));
    let long = format!("t_long(x) = x{}", " + x".repeat(MAX_STEPS + 1));
    assert!(reg(&[&long]).unwrap_err().contains(&format!("more than {MAX_STEPS} operations")));
    // A failed set registers nothing of it.
    assert_eq!(Op::by_name("t_ping"), None);
}

#[test]
fn cuda_source_defines_each_user_operator_from_its_steps() {
    let [op] = reg(&["t_cudaop(x) = x / (1 + abs(x))"]).unwrap()[..] else { panic!() };
    let code = op as u8;
    let src = crate::program::ops::cuda_source();
    assert!(src.contains(&format!("__device__ __forceinline__ float grove_user_{code}(float a, float b) {{")));
    assert!(src.contains(&format!("    const float t0 = grove_apply_builtin({}u, a, __int_as_float(0x00000000));", Op::Abs as u8)));
    assert!(src.contains(&format!("    const float t1 = grove_apply_builtin({}u, __int_as_float(0x3f800000), t0);", Op::Add as u8)));
    assert!(src.contains(&format!("    case {code}: return grove_user_{code}(a, b);")));
    assert!(src.contains(&format!("X({code}, 1, (grove_user_{code}(a, b)))")));
    assert!(src.contains(&format!("case {code}u: grove_user_partials_{code}(a, b, da, db); return true;")));
}

/// Every user operator a generated header dispatches to (in `grove_apply`, the X-macro and the
/// partials' switch) is defined in it: the opcodes named by calls, and those defined.
fn header_is_consistent(src: &str) -> Result<(), String> {
    let codes_after = |pat: &str| -> std::collections::BTreeSet<u32> {
        src.match_indices(pat).filter_map(|(i, _)| src[i + pat.len()..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()).collect()
    };
    let defined = codes_after("__device__ __forceinline__ float grove_user_");
    let called = codes_after("return grove_user_");
    let partials_defined = codes_after("__device__ __noinline__ void grove_user_partials_");
    let partials_called = codes_after("u: grove_user_partials_");
    if called.is_subset(&defined) && partials_called.is_subset(&partials_defined) && called == partials_called {
        Ok(())
    } else {
        Err(format!("defined {defined:?}, called {called:?}; partials defined {partials_defined:?}, called {partials_called:?}"))
    }
}

#[test]
fn a_header_written_while_operators_are_registered_names_only_operators_it_defines() {
    // One thread registers operators one at a time while another writes headers: each header
    // must come from one state of the registry (three reads of it could see three states, and
    // NVRTC then failed on an undefined grove_user_N).
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut headers = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || headers < 20 {
                header_is_consistent(&crate::program::ops::cuda_source())?;
                headers += 1;
            }
            Ok::<_, String>(headers)
        });
        for i in 0..6 {
            reg(&[&format!("t_race{i}(x) = x * {i} + abs(x)")]).unwrap();
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap().unwrap();
    });
}
