//! The operator table: the single source of truth for every function a program may use.
//!
//! Each entry gives the operator's names (the first is canonical; the rest are aliases, PonyGE2's
//! `pdiv`, `np.sin`, … among them), its arity, how it renders, and its semantics, written once
//! as a Rust function generic over `f32`/`f64` and once as a C expression for the CUDA kernels
//! (generated from this table, never hand-copied).
//!
//! # Protected semantics
//!
//! Protected operators never produce NaN from a valid input; the strict ones follow IEEE and
//! numpy. Overflow is never clamped: a result of ±inf or NaN anywhere in a program's outputs
//! makes the individual invalid (worst fitness), on every backend.
//!
//! | operator | value |
//! |---|---|
//! | `div(a, b)` (`/`, `pdiv`) | `1` if `b == 0`, else `a / b` (Koza's, as PonyGE2's `pdiv`) |
//! | `aq(a, b)` | `a / sqrt(1 + b²)` (analytic quotient; never divides by zero) |
//! | `log(x)` | `0` if `x == 0`, else `ln |x|` |
//! | `rlog(x)` | `1` if `x == 0`, else `ln |x|` (PonyGE2's) |
//! | `plog(x)` | `ln(1 + |x|)` (PonyGE2's) |
//! | `sqrt(x)` (`psqrt`) | `sqrt |x|` |
//! | `pow(a, b)` (`ppow`) | `|a| ^ b` (0 to a negative power is +inf: invalid) |
//! | `sdiv`, `slog`, `ssqrt`, `spow` | strict IEEE versions (`np.divide`, `np.log`, …) |
//! | `exp`, `tan`, `square`, `cube` | plain; overflow gives ±inf (invalid) |
//! | `sigmoid(x)` | `1 / (1 + exp(-x))` |

use std::fmt;

pub mod user;

/// Numbers a program computes with: `f32` on both backends, `f64` for reference checks.
pub trait Real:
    Copy
    + PartialOrd
    + fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Conversion from f64 (rounding).
    fn from_f64(x: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// e^x.
    fn exp(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// x^y.
    fn powf(self, y: Self) -> Self;
    /// IEEE maximum (NaN-ignoring, as C's fmax).
    fn max(self, y: Self) -> Self;
    /// IEEE minimum (NaN-ignoring, as C's fmin).
    fn min(self, y: Self) -> Self;
    /// Neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn powf(self, y: Self) -> Self {
                <$t>::powf(self, y)
            }
            #[inline(always)]
            fn max(self, y: Self) -> Self {
                <$t>::max(self, y)
            }
            #[inline(always)]
            fn min(self, y: Self) -> Self {
                <$t>::min(self, y)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// How an operator is written in infix output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Render {
    /// `a SYM b`, with the given binding strength (higher binds tighter).
    Infix(&'static str, u8),
    /// `SYM a` (unary minus).
    Prefix(&'static str),
    /// `name(a, b)`.
    Call(&'static str),
}

/// Everything about one operator.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    /// Canonical name first, then aliases (matched exactly, as written in grammars and
    /// `--functions`).
    pub names: &'static [&'static str],
    /// Number of arguments (1 or 2).
    pub arity: u8,
    /// Infix rendering.
    pub render: Render,
    /// The function for sympy (`sympy` rendering uses it as a call, or the infix symbol).
    pub sympy: &'static str,
    /// The C expression of the CUDA kernels, over `float a` (and `float b`).
    pub cuda: &'static str,
    /// True for the protected variants (never NaN from finite input).
    pub protected: bool,
}

macro_rules! ops {
    ($( $variant:ident = $code:literal : [$($name:literal),+], $arity:literal, $render:expr, $sympy:literal, $prot:literal, $cuda:literal ;)+
     @hidden $( $hvariant:ident = $hcode:literal : [$($hname:literal),+], $harity:literal, $hrender:expr, $hsympy:literal, $hprot:literal, $hcuda:literal ;)+
     @user $( $user:ident = $ucode:literal ),+ $(,)?) => {
        /// An opcode: what a tree node does. `Var` and `Const` are leaves; the rest are functions.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Op {
            /// A data-set variable; the node's value is its index.
            Var = 0,
            /// A constant; the node's value is the constant.
            Const = 1,
            $(
                #[doc = concat!("`", $($name, " ",)+ "`")]
                $variant = $code,
            )+
            $(
                #[doc = concat!("`", $($hname, " ",)+ "` (made by grammars, never in a function set: see [`HIDDEN`])")]
                $hvariant = $hcode,
            )+
            $(
                /// A slot of the user block: its meaning is the definition registered there
                /// ([`user`]).
                $user = $ucode,
            )+
        }

        /// Every built-in function operator, in opcode order ([`functions`] adds the user's).
        pub const FUNCTIONS: &[Op] = &[$(Op::$variant),+];

        /// Built-in operators no function set or grammar names: [`Op::Slot`], the tie of a
        /// grammar's constant `c[i]` ([`FUNCTIONS`] and these are every built-in, [`BUILTINS`]).
        pub const HIDDEN: &[Op] = &[$(Op::$hvariant),+];

        /// Every built-in function operator, in opcode order: [`FUNCTIONS`], then [`HIDDEN`].
        pub const BUILTINS: &[Op] = &[$(Op::$variant,)+ $(Op::$hvariant),+];

        impl Op {
            /// The operator for an opcode byte, if any.
            pub fn from_code(code: u8) -> Option<Op> {
                match code {
                    0 => Some(Op::Var),
                    1 => Some(Op::Const),
                    $($code => Some(Op::$variant),)+
                    $($hcode => Some(Op::$hvariant),)+
                    _ => user::from_code(code),
                }
            }

            /// The user-block slot of opcode `code`, registered or not.
            pub(crate) fn from_user_code(code: u8) -> Option<Op> {
                match code {
                    $($ucode => Some(Op::$user),)+
                    _ => None,
                }
            }

            /// The table entry (leaves have arity 0 and no formula).
            pub fn info(self) -> &'static OpInfo {
                match self {
                    Op::Var => &OpInfo { names: &["var"], arity: 0, render: Render::Call("x"), sympy: "", cuda: "", protected: true },
                    Op::Const => &OpInfo { names: &["const"], arity: 0, render: Render::Call(""), sympy: "", cuda: "", protected: true },
                    $(Op::$variant => &OpInfo { names: &[$($name),+], arity: $arity, render: $render, sympy: $sympy, cuda: $cuda, protected: $prot },)+
                    $(Op::$hvariant => &OpInfo { names: &[$($hname),+], arity: $harity, render: $hrender, sympy: $hsympy, cuda: $hcuda, protected: $hprot },)+
                    $(Op::$user)|+ => match user::get(self) {
                        Some(u) => &u.info,
                        None => &OpInfo { names: &["unregistered"], arity: 0, render: Render::Call("unregistered"), sympy: "", cuda: "0.0f", protected: true },
                    },
                }
            }
        }
    };
}

ops! {
    Add = 2: ["add", "+", "np.add"], 2, Render::Infix("+", 1), "+", true, "a + b";
    Sub = 3: ["sub", "-", "np.subtract"], 2, Render::Infix("-", 1), "-", true, "a - b";
    Mul = 4: ["mul", "*", "×", "np.multiply"], 2, Render::Infix("*", 2), "*", true, "a * b";
    Div = 5: ["div", "/", "÷", "pdiv", "protected_div"], 2, Render::Infix("/", 2), "/", true, "(b == 0.0f ? 1.0f : a / b)";
    Aq = 6: ["aq", "analytic_quotient"], 2, Render::Call("aq"), "aq", true, "a / sqrtf(1.0f + b * b)";
    Pow = 7: ["pow", "ppow", "^", "**"], 2, Render::Call("pow"), "pow", true, "grove_pow_abs(a, b)";
    Max = 8: ["max", "np.maximum", "np.fmax"], 2, Render::Call("max"), "Max", true, "fmaxf(a, b)";
    Min = 9: ["min", "np.minimum", "np.fmin"], 2, Render::Call("min"), "Min", true, "fminf(a, b)";
    Sin = 10: ["sin", "np.sin", "psin"], 1, Render::Call("sin"), "sin", true, "grove_sin(a)";
    Cos = 11: ["cos", "np.cos", "pcos"], 1, Render::Call("cos"), "cos", true, "grove_cos(a)";
    Tan = 12: ["tan", "np.tan"], 1, Render::Call("tan"), "tan", true, "grove_tan(a)";
    Exp = 13: ["exp", "np.exp", "pexp"], 1, Render::Call("exp"), "exp", true, "grove_exp(a)";
    Log = 14: ["log", "ln"], 1, Render::Call("log"), "log", true, "(a == 0.0f ? 0.0f : grove_ln(fabsf(a)))";
    Rlog = 15: ["rlog"], 1, Render::Call("rlog"), "rlog", true, "(a == 0.0f ? 1.0f : grove_ln(fabsf(a)))";
    Plog = 16: ["plog"], 1, Render::Call("plog"), "plog", true, "grove_ln(1.0f + fabsf(a))";
    Sqrt = 17: ["sqrt", "psqrt"], 1, Render::Call("sqrt"), "sqrt", true, "sqrtf(fabsf(a))";
    Abs = 18: ["abs", "np.abs", "np.absolute", "fabs"], 1, Render::Call("abs"), "Abs", true, "fabsf(a)";
    Neg = 19: ["neg", "np.negative"], 1, Render::Prefix("-"), "-", true, "-a";
    Square = 20: ["square", "sq", "np.square"], 1, Render::Call("square"), "square", true, "a * a";
    Cube = 21: ["cube"], 1, Render::Call("cube"), "cube", true, "a * a * a";
    Tanh = 22: ["tanh", "np.tanh"], 1, Render::Call("tanh"), "tanh", true, "grove_tanh(a)";
    Sigmoid = 23: ["sigmoid", "sig", "logistic"], 1, Render::Call("sigmoid"), "sigmoid", true, "1.0f / (1.0f + grove_exp(-a))";
    Sdiv = 24: ["sdiv", "strict_div", "np.divide", "np.true_divide"], 2, Render::Infix("/", 2), "/", false, "a / b";
    Slog = 25: ["slog", "strict_log", "np.log"], 1, Render::Call("log"), "log", false, "(a > 0.0f ? grove_ln(a) : (a == 0.0f ? -GROVE_F32_INF : GROVE_F32_NAN))";
    Ssqrt = 26: ["ssqrt", "strict_sqrt", "np.sqrt"], 1, Render::Call("sqrt"), "sqrt", false, "sqrtf(a)";
    Spow = 27: ["spow", "strict_pow", "np.power"], 2, Render::Call("pow"), "pow", false, "grove_pow(a, b)";
    // A grammar's constant `c[i]`: `Slot(Const v)` with the node's value `i` is `v`; every
    // `c[i]` of a tree shares one fitted value (backend::cpu::fit). Renderings show the value.
    @hidden
    Slot = 28: ["slot"], 1, Render::Call("slot"), "", true, "a";
    @user User0 = 32, User1 = 33, User2 = 34, User3 = 35, User4 = 36, User5 = 37, User6 = 38, User7 = 39,
        User8 = 40, User9 = 41, User10 = 42, User11 = 43, User12 = 44, User13 = 45, User14 = 46, User15 = 47,
        User16 = 48, User17 = 49, User18 = 50, User19 = 51, User20 = 52, User21 = 53, User22 = 54,
        User23 = 55, User24 = 56, User25 = 57, User26 = 58, User27 = 59, User28 = 60, User29 = 61,
        User30 = 62, User31 = 63,
}

/// Matches every opcode of the user block, in patterns (a guard would leave a `match`
/// non-exhaustive): `user_ops!() => …`.
macro_rules! user_ops {
    () => {
        $crate::program::ops::Op::User0 | $crate::program::ops::Op::User1 | $crate::program::ops::Op::User2 |
            $crate::program::ops::Op::User3 | $crate::program::ops::Op::User4 | $crate::program::ops::Op::User5 |
            $crate::program::ops::Op::User6 | $crate::program::ops::Op::User7 | $crate::program::ops::Op::User8 |
            $crate::program::ops::Op::User9 | $crate::program::ops::Op::User10 | $crate::program::ops::Op::User11 |
            $crate::program::ops::Op::User12 | $crate::program::ops::Op::User13 | $crate::program::ops::Op::User14 |
            $crate::program::ops::Op::User15 | $crate::program::ops::Op::User16 | $crate::program::ops::Op::User17 |
            $crate::program::ops::Op::User18 | $crate::program::ops::Op::User19 | $crate::program::ops::Op::User20 |
            $crate::program::ops::Op::User21 | $crate::program::ops::Op::User22 | $crate::program::ops::Op::User23 |
            $crate::program::ops::Op::User24 | $crate::program::ops::Op::User25 | $crate::program::ops::Op::User26 |
            $crate::program::ops::Op::User27 | $crate::program::ops::Op::User28 | $crate::program::ops::Op::User29 |
            $crate::program::ops::Op::User30 | $crate::program::ops::Op::User31
    };
}
pub(crate) use user_ops;

impl Op {
    /// The canonical name.
    pub fn name(self) -> &'static str {
        self.info().names[0]
    }

    /// Number of children a node with this operator has.
    #[inline]
    pub fn arity(self) -> usize {
        self.info().arity as usize
    }

    /// True for `Var` and `Const`.
    #[inline]
    pub fn is_leaf(self) -> bool {
        matches!(self, Op::Var | Op::Const)
    }

    /// Looks an operator up by any of its names (`+`, `pdiv`, `np.sin`, …).
    pub fn by_name(name: &str) -> Option<Op> {
        FUNCTIONS.iter().copied().find(|op| op.info().names.contains(&name)).or_else(|| user::by_name(name))
    }

    /// True for an opcode of the user block ([`user`]).
    #[inline]
    pub fn is_user(self) -> bool {
        self as u8 >= user::USER_BASE
    }

    /// Applies a function operator to its arguments (`b` is ignored for unary ones).
    /// This is the reference semantics (exact in f64); what both backends compute in f32 is
/// [`apply_fast`], which the CUDA formula in [`OpInfo::cuda`] matches
/// bit for bit.
    #[inline(always)]
    pub fn apply<T: Real>(self, a: T, b: T) -> T {
        match self {
            Op::Var | Op::Const => T::ZERO,
            Op::Add => a + b,
            Op::Sub => a - b,
            Op::Mul => a * b,
            Op::Div => {
                if b == T::ZERO {
                    T::ONE
                } else {
                    a / b
                }
            }
            Op::Aq => a / (T::ONE + b * b).sqrt(),
            Op::Pow => a.abs().powf(b),
            Op::Max => a.max(b),
            Op::Min => a.min(b),
            Op::Sin => a.sin(),
            Op::Cos => a.cos(),
            Op::Tan => a.tan(),
            Op::Exp => a.exp(),
            Op::Log => {
                if a == T::ZERO {
                    T::ZERO
                } else {
                    a.abs().ln()
                }
            }
            Op::Rlog => {
                if a == T::ZERO {
                    T::ONE
                } else {
                    a.abs().ln()
                }
            }
            Op::Plog => (T::ONE + a.abs()).ln(),
            Op::Sqrt => a.abs().sqrt(),
            Op::Abs => a.abs(),
            Op::Neg => -a,
            Op::Square => a * a,
            Op::Cube => a * a * a,
            Op::Tanh => a.tanh(),
            Op::Sigmoid => T::ONE / (T::ONE + (-a).exp()),
            Op::Sdiv => a / b,
            Op::Slog => a.ln(),
            Op::Ssqrt => a.sqrt(),
            Op::Spow => a.powf(b),
            Op::Slot => a,
            user_ops!() => user::get(self).map_or(T::ZERO, |u| u.eval(a, b, |op, x, y| op.apply(x, y))),
        }
    }
}

/// Every function operator: the built-ins ([`FUNCTIONS`]), then the registered user operators.
pub fn functions() -> Vec<Op> {
    FUNCTIONS.iter().copied().chain(user::registered().into_iter().map(|u| u.op)).collect()
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a comma-separated function set (`add,sub,mul,div,sin`), naming a bad entry.
pub fn parse_function_set(list: &str) -> Result<Vec<Op>, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let op = Op::by_name(name).ok_or_else(|| {
            let known: Vec<&str> = functions().into_iter().map(|o| o.name()).collect();
            format!("unknown function `{}`; known: {}", crate::input::clip(name, crate::input::ECHO), known.join(", "))
        })?;
        if !out.contains(&op) {
            out.push(op);
        }
    }
    if out.is_empty() {
        return Err("the function set is empty: name at least one function, e.g. add,mul".into());
    }
    Ok(out)
}

/// `kernels/grove_math.cuh`: the math functions the operators' CUDA formulas call.
pub const GROVE_MATH_CUH: &str = include_str!("../../kernels/grove_math.cuh");

/// C source defining `grove_apply(op, a, b)` from this table and the registered user operators
/// (their `grove_user_<code>` functions and `GROVE_USER_PARTIALS`), for the CUDA kernels, after
/// the math functions its formulas call ([`GROVE_MATH_CUH`] and its generated constants). The
/// text changes when a user operator is registered, and with it every kernel's cache key.
pub fn cuda_source() -> String {
    cuda_source_with(GROVE_MATH_CUH)
}

/// [`cuda_source`] with `math` in place of [`GROVE_MATH_CUH`] (the backend passes an edited
/// copy when `GROVE_KERNEL_DIR` holds one).
pub fn cuda_source_with(math: &str) -> String {
    let mut s = String::from("// Generated from src/program/ops.rs and src/program/fastmath.rs: do not edit.\n");
    s.push_str(&super::fastmath::cuda_constants());
    s.push_str(math);
    s.push_str("#define GROVE_OP_VAR 0\n#define GROVE_OP_CONST 1\n");
    for op in BUILTINS {
        s.push_str(&format!("#define GROVE_OP_{} {}\n", op.name().to_uppercase(), *op as u8));
    }
    // The built-ins alone, which the user operators' functions call step by step, then those
    // functions, then every operator.
    s.push_str("__device__ __forceinline__ float grove_apply_builtin(unsigned op, float a, float b) {\n  switch (op) {\n");
    for op in BUILTINS {
        s.push_str(&format!("    case {}: return {};\n", *op as u8, op.info().cuda));
    }
    s.push_str("    default: return 0.0f;\n  }\n}\n");
    // One snapshot of the user operators for every part of the text: another thread may
    // register more while it is written, and a header whose switch names an operator its
    // functions lack does not compile.
    let users = user::registered();
    s.push_str(&user::cuda_functions(&users));
    s.push_str(&user::cuda_partials(&users));
    let all: Vec<Op> = BUILTINS.iter().copied().chain(users.iter().map(|u| u.op)).collect();
    s.push_str("__device__ __forceinline__ float grove_apply(unsigned op, float a, float b) {\n  switch (op) {\n");
    for op in &all {
        s.push_str(&format!("    case {}: return {};\n", *op as u8, op.info().cuda));
    }
    s.push_str("    default: return 0.0f;\n  }\n}\n");
    // An X-macro over the function table, `X(code, arity, (expr over a and b))`, so a kernel can
    // dispatch once per node and apply the formula to several points.
    s.push_str("#define GROVE_FOR_EACH_OP(X)");
    for op in &all {
        s.push_str(&format!(" \\\n  X({}, {}, ({}))", *op as u8, op.arity(), op.info().cuda));
    }
    s.push('\n');
    s
}

/// What every interpreter computes for one point, on both backends: [`Op::apply::<f32>`](Op::apply)
/// with grove's own transcendental functions ([`fastmath`](super::fastmath): Cephes' algorithms,
/// 1–4 ulp from the exact value, special values those of libm), which the CUDA kernels compute
/// bit for bit. No fused multiply-add is used, so the bits depend neither on the vector width
/// nor on the backend.
#[inline(always)]
pub fn apply_fast(op: Op, a: f32, b: f32) -> f32 {
    match op {
        Op::Exp => super::fastmath::exp(a),
        Op::Sigmoid => 1.0 / (1.0 + super::fastmath::exp(-a)),
        Op::Log => {
            if a == 0.0 {
                0.0
            } else {
                super::fastmath::ln(a.abs())
            }
        }
        Op::Rlog => {
            if a == 0.0 {
                1.0
            } else {
                super::fastmath::ln(a.abs())
            }
        }
        Op::Plog => super::fastmath::ln(1.0 + a.abs()),
        Op::Slog => {
            if a > 0.0 {
                super::fastmath::ln(a)
            } else if a == 0.0 {
                f32::NEG_INFINITY
            } else {
                f32::NAN // negative, or NaN
            }
        }
        Op::Sin => super::fastmath::sin_any(a),
        Op::Cos => super::fastmath::cos_any(a),
        Op::Tan => super::fastmath::tan_any(a),
        Op::Tanh => super::fastmath::tanh(a),
        Op::Pow => super::fastmath::pow_abs(a, b),
        Op::Spow => super::fastmath::pow(a, b),
        user_ops!() => user::get(op).map_or(0.0, |u| u.eval(a, b, apply_fast)),
        _ => op.apply(a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &op in FUNCTIONS {
            assert_eq!(Op::from_code(op as u8), Some(op));
            assert!(op.arity() == 1 || op.arity() == 2);
            for n in op.info().names {
                assert!(seen.insert(*n), "name {n} used twice");
                assert_eq!(Op::by_name(n), Some(op));
            }
        }
        assert_eq!(Op::from_code(200), None);
    }

    #[test]
    fn protected_operators_never_give_nan_on_finite_input() {
        let xs = [-3.5f64, -1.0, -1e-30, 0.0, 1e-30, 0.5, 2.0, 1e10];
        for &op in FUNCTIONS.iter().filter(|o| o.info().protected) {
            for &a in &xs {
                for &b in &xs {
                    let v = op.apply(a, b);
                    assert!(!v.is_nan(), "{op}({a}, {b}) is NaN");
                }
            }
        }
    }

    #[test]
    fn documented_values() {
        assert_eq!(Op::Div.apply(3.0f32, 0.0), 1.0);
        assert_eq!(Op::Div.apply(3.0f32, 2.0), 1.5);
        assert_eq!(Op::Log.apply(0.0f64, 0.0), 0.0);
        assert_eq!(Op::Rlog.apply(0.0f64, 0.0), 1.0);
        assert!((Op::Plog.apply(-1.0f64, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(Op::Sqrt.apply(-4.0f32, 0.0), 2.0);
        assert_eq!(Op::Aq.apply(3.0f64, 0.0), 3.0);
        assert!(Op::Sdiv.apply(1.0f32, 0.0).is_infinite());
        assert!(Op::Slog.apply(-1.0f32, 0.0).is_nan());
    }

    #[test]
    fn function_set_parsing() {
        assert_eq!(parse_function_set("add, mul,np.sin,add").unwrap(), [Op::Add, Op::Mul, Op::Sin]);
        assert!(parse_function_set("add,foo").unwrap_err().contains("foo"));
        assert!(parse_function_set(" , ").is_err());
    }

    #[test]
    fn cuda_source_has_every_function() {
        let src = cuda_source();
        for &op in FUNCTIONS {
            assert!(src.contains(&format!("case {}: return {};", op as u8, op.info().cuda)));
            assert!(src.contains(&format!("X({}, {}, ({}))", op as u8, op.arity(), op.info().cuda)));
        }
    }
}
