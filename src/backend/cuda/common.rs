//! The rules every kernel file shares, generated once from Rust as the header `grove_common.h`
//! (each `.cu` file's first `#include`): the arity of each opcode, from the operator table of
//! `program::ops`; the offset macro; and the layout checks of the `#[repr(C)]` structs the
//! kernels read, from the layout table here, so that a struct's size and field offsets are
//! written in Rust only and a kernel cannot disagree with them without failing to compile.

use std::mem::{offset_of, size_of};

use super::params::{
    Argmin, ClassPartial, ClassReduceParams, ClassifyParams, CompileParams, ControlClassParams, ControlParams, EvalParams, FitParams,
    GeParams, GenParams, GenStats, InitParams, MapOut, MapParams, MapTreesParams, ReduceParams, RegSums, SelectParams, SimParams,
    SubtreeMutateParams, SubtreeParams, VaryParams,
};
use crate::grammar::compile::{ProductionEntry, RuleEntry, TableHeader};
use crate::program::Op;
use crate::backend::cpu::fit::FitResult;
use crate::backend::cpu::interp::Instr;
use crate::program::ops::{BUILTINS, HIDDEN, functions, user};

/// Name of the generated header in `#include` lines and compile errors.
pub const COMMON_HEADER: &str = "grove_common.h";

/// The layout table: `CudaName = RustStruct { fields in declaration order }` for every struct a
/// kernel shares with Rust.
macro_rules! layout {
    ($($c:ident = $s:ident { $($f:ident),+ }),+ $(,)?) => {
        /// `(struct in the .cu, Rust struct, size)` of every struct a kernel shares with Rust.
        pub const SIZES: &[(&str, &str, usize)] = &[$((stringify!($c), stringify!($s), size_of::<$s>())),+];
        /// `(struct in the .cu, field, offset)` of every field, in declaration order.
        pub const OFFSETS: &[(&str, &str, usize)] = &[$($((stringify!($c), stringify!($f), offset_of!($s, $f))),+),+];
    };
}

layout! {
    GroveEvalParams = EvalParams { n_rows, n_features, max_len, n_outputs, n_trees, tile_points, n_tiles, reserved },
    GroveRegSums = RegSums { sse, sae, sum_f, sum_ff, sum_fy, sum_y, sum_yy, n, bad },
    GroveReduceParams = ReduceParams { n_trees, n_tiles },
    GroveCompileParams = CompileParams { n_trees, max_len },
    GroveMapParams = MapParams { n_genomes, capacity, max_wraps, lazy, max_depth, max_nodes, max_derivation, table_words },
    GroveMapOut = MapOut { status, used_codons, depth, nodes, n_derivation },
    GroveMapTreesParams = MapTreesParams { map, templates_at, max_len, build, reading },
    GroveSubtreeParams = SubtreeParams { map, n_pairs, first_row, n_rows, seed_lo, seed_hi, generation, p_crossover, scratch_stride },
    GroveSubtreeMutateParams = SubtreeMutateParams { map, first_row, n_rows, seed_lo, seed_hi, generation, p_mutation, codon_size, scratch_stride },
    GroveControlClassParams = ControlClassParams { n, max_len, n_vars, n_slots, stack, pad },
    GroveInitParams = InitParams { n, capacity, seed_lo, seed_hi, sensible, length, codon_size, min_depth, max_depth, tail_fraction, lazy, table_words },
    GroveClassifyParams = ClassifyParams { n_rows, n_features, max_len, n_outputs, n_classes, n_trees, tile_points, n_tiles, has_offset, reserved },
    GroveClassPartial = ClassPartial { ce, n, bad },
    GroveClassReduceParams = ClassReduceParams { n_trees, n_tiles, n_classes, reserved },
    GroveVaryParams = VaryParams {
        n_children, max_len, n_outputs, seed_lo, seed_hi, generation, n_functions, n_vars, n_constants, has_range,
        range_lo, range_hi, p_const, p_leaf_grow, p_out, p_leaf, subtree_lo, subtree_hi, p_point, sigma, p_constant,
        p_crossover, p_mutation, n_crossovers, n_mutations, op, cum_x, kind_x, cum_m, kind_m, init_method, min_depth,
        max_depth
    },
    GroveGeParams = GeParams {
        n_pairs, capacity, first_row, n_rows, seed_lo, seed_hi, generation, within_used, p_crossover, p_mutation,
        codon_size, used_stride, per_used
    },
    GroveSelectParams = SelectParams { n, n_slots, slot_offset, k, distinct, n_top, seed_lo, seed_hi, generation, n_cases, stride },
    GroveGenParams = GenParams { n, max_len, metric, scaled, parsimony, n_blocks, n_chosen },
    GroveGenStats = GenStats { best, sum, sum_len, best_idx, n_valid },
    GroveArgmin = Argmin { key, idx, n_valid, sum, sum_len },
    GroveFitParams = FitParams { n_trees, max_len, n_rows, n_features, steps, scaling, n_classes, n_outputs },
    GroveFitResult = FitResult { sse_before, sse_after, a, b, constants, accepted },
    GroveSimParams = SimParams { n_envs, steps, generation, noise, seed, record, first_env },
    GroveControlParams = ControlParams { n_trees, episodes, steps, generation, seed, max_len, flags },
    GroveInstr = Instr { a, b, op, mode, out, pad, reserved },
    GroveTableHeader = TableHeader { n_rules, n_productions, n_children, n_symbols, n_codon, off_productions, off_children, off_symbols },
    GroveRule = RuleEntry { first_production, n_productions, min_depth, flags },
    GroveProduction = ProductionEntry { first_symbol, n_symbols, first_child, n_children, min_depth, flags },
}

/// The text of `grove_common.h`. Needs the operator header (`GROVE_OP_VAR`, `GROVE_OP_CONST`),
/// which every kernel file is compiled after.
pub fn common_header() -> String {
    let mut s = String::from("// Generated from src/backend/cuda/common.rs: do not edit.\n");
    s.push_str(
        "// Compile-time field offsets (NVRTC has no <cstddef>; __INTADDR__ is its front end's builtin).\n\
         #define GROVE_OFFSETOF(S, f) ((unsigned long long)__INTADDR__(&(((S*)0)->f)))\n",
    );
    s.push_str(&arity_source());
    s.push_str(&layout_source());
    s
}

/// `grove_arity` and `grove_is_op`, from the operator table.
fn arity_source() -> String {
    let mut s = String::from(
        "// Arguments of a node with opcode `code`: 1 or 2 for a function, 0 for a leaf (GROVE_OP_VAR,\n\
         // GROVE_OP_CONST) and for a code that names no operator, which every kernel reads as a leaf\n\
         // (vary.cu as a constant, as Op::from_code(c).unwrap_or(Op::Const) does on the CPU). Where\n\
         // such a code makes a tree invalid, grove_is_op tells it apart.\n\
         __device__ __forceinline__ unsigned grove_arity(unsigned code) {\n    switch (code) {\n",
    );
    for op in functions().into_iter().chain(HIDDEN.iter().copied()) {
        s.push_str(&format!("        case {}: return {}u;\n", op as u8, op.arity()));
    }
    s.push_str("        default: return 0u;\n    }\n}\n");
    let n_user = user::registered().len();
    s.push_str(&format!(
        "// Whether `code` names a leaf or a function (Op::from_code answers Some): codes 0 to {}, and\n\
         // the {n_user} registered user operators from {}.\n\
         __device__ __forceinline__ bool grove_is_op(unsigned code) {{ return code <= {}u || (code >= {}u && code < {}u); }}\n",
        max_code(),
        user::USER_BASE,
        max_code(),
        user::USER_BASE,
        user::USER_BASE as usize + n_user
    ));
    s
}

/// The largest built-in opcode: the codes of the leaves and the built-ins run from 0 to it
/// without a gap (`program::ops` numbers them so; the tests check it), below the user block.
fn max_code() -> u8 {
    BUILTINS.iter().map(|op| *op as u8).max().unwrap_or(Op::Const as u8)
}

/// One `GROVE_LAYOUT_<struct>` macro per struct of the layout table: its size and every field
/// offset as `static_assert`s, written after the struct's definition by
/// `GROVE_CHECK_LAYOUT(<struct>);`.
fn layout_source() -> String {
    let mut s = String::from(
        "// GROVE_CHECK_LAYOUT(S); after struct S: its size and field offsets are those of its #[repr(C)]\n\
         // twin in Rust (the layout table of src/backend/cuda/common.rs).\n\
         #define GROVE_CHECK_LAYOUT(S) GROVE_LAYOUT_##S\n",
    );
    for (name, rust, size) in SIZES {
        let mut checks = vec![format!("static_assert(sizeof({name}) == {size}, \"{name} must match {rust}\")")];
        for (_, field, offset) in OFFSETS.iter().filter(|(s, _, _)| s == name) {
            checks.push(format!("static_assert(GROVE_OFFSETOF({name}, {field}) == {offset}, \"{name}.{field} must match {rust}.{field}\")"));
        }
        s.push_str(&format!("#define GROVE_LAYOUT_{name} \\\n    {}\n", checks.join("; \\\n    ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_have_no_gap_so_grove_is_op_is_a_bound() {
        let max = max_code();
        assert!((0..=max).all(|c| Op::from_code(c).is_some()), "the opcodes 0..={max} have a gap");
        assert!((max as u16 + 1..user::USER_BASE as u16).all(|c| Op::from_code(c as u8).is_none()));
        assert!(max < user::USER_BASE);
        let end = user::USER_BASE as usize + user::MAX_USER_OPS;
        assert!((end..256).all(|c| Op::from_code(c as u8).is_none()));
        // The registered user operators are the block's first codes, without a gap.
        let n = user::registered().len();
        assert!((0..n).all(|i| Op::from_code(user::USER_BASE + i as u8).is_some()));
    }

    #[test]
    fn every_struct_has_a_layout_macro_with_each_field() {
        let h = common_header();
        for (name, _, size) in SIZES {
            assert!(h.contains(&format!("#define GROVE_LAYOUT_{name} \\\n    static_assert(sizeof({name}) == {size},")), "{name}");
        }
        for (name, field, offset) in OFFSETS {
            assert!(h.contains(&format!("static_assert(GROVE_OFFSETOF({name}, {field}) == {offset},")), "{name}.{field}");
        }
        user::register(&["t_common_op(a, b) = a * b + 1".to_string()]).unwrap();
        let h = common_header();
        for op in functions().into_iter().chain(HIDDEN.iter().copied()) {
            assert!(h.contains(&format!("case {}: return {}u;", op as u8, op.arity())), "{op}");
        }
    }
}
