// interp.cuh: the one interpreter of grove's programs on the GPU, shared by eval.cu (regression
// sums and predictions), classify.cu (classification fitness) and sim.cu (control policies).
//
// Twin of src/program/linear.rs. A tree (prefix order, src/program/tree.rs) is compiled once per
// evaluation into a linear program (Chitty's linear form): one instruction per function node,
// with the operand kinds resolved per program instead of per node. A leaf that is not an output
// node and not the root is folded into its parent as an operand (a variable or a constant read
// where it is used), so it costs no dispatch and no stack traffic; only the rest (function
// nodes, output leaves, a lone root leaf) become instructions, in the order the tree is walked
// backwards (postfix).
//
// Evaluation semantics are the tree's, operation for operation (the CPU's bits): node i's
// children follow it in prefix order; an output node (out = k+1) adds its value to slot k and
// passes its last child's value up (a leaf passes its own); without output nodes the root's
// value is the result. The value of the last instruction executed is in `top`.
//
// Machine: `top` (a register per point) holds the newest value; `stack[0..h)` the older ones
// still waiting for their parent. An instruction
//   1. pushes top first when it consumes no computed value but one is waiting (GROVE_I_PUSH);
//   2. reads a: top, a variable or a constant; and b: the stack (pop), a variable, a constant
//      or top (when a is a folded leaf, the one computed child is b and it is in top);
//   3. computes r = op(a, b) (a lone leaf: r = a), then top = r; an output instruction adds r
//      to its slot and leaves its pass value in top instead (b for two arguments, else a).
// Stack use never exceeds the tree walk's (src/backend/cuda/pack.rs stack_need) less one.

// One instruction, 16 bytes (a shared-memory broadcast of one 16-byte load).
struct GroveInstr {
    unsigned a;           // operand a: variable index (GROVE_SRC_VAR) or constant bits (GROVE_SRC_CONST)
    unsigned b;           // operand b, likewise
    unsigned char op;     // opcode; GROVE_OP_VAR or GROVE_OP_CONST for a lone leaf (r = a)
    unsigned char mode;   // a's source | b's source << 2 | GROVE_I_PUSH | GROVE_I_BINARY
    unsigned char out;    // output slot + 1, or 0
    unsigned char pad;    // 0
    unsigned reserved;    // 0
};
static_assert(sizeof(GroveInstr) == 16, "GroveInstr must match linear::Instr");

// Operand sources (2 bits each). For a: TOP, VAR, CONST. For b: STACK, VAR, CONST, TOP.
#define GROVE_SRC_TOP 0u
#define GROVE_SRC_STACK 0u
#define GROVE_SRC_VAR 1u
#define GROVE_SRC_CONST 2u
#define GROVE_SRC_BTOP 3u
#define GROVE_I_PUSH 16u    // push top before reading the operands
#define GROVE_I_BINARY 32u  // two arguments: an output instruction passes b (else a)

#define GROVE_COMPILE_STACK 512      // pending values the compiler tracks (the deep kernels' stack)
#define GROVE_NOT_COMPILED 0xffffu  // instruction count of a tree the compiler refused

// Arguments of a function opcode; 0 for leaves and unknown codes.
__device__ __forceinline__ int grove_arity(unsigned code) {
    switch (code) {
#define GROVE_ARITY_CASE(CODE, ARITY, EXPR) \
    case CODE:                              \
        return ARITY;
        GROVE_FOR_EACH_OP(GROVE_ARITY_CASE)
#undef GROVE_ARITY_CASE
        default:
            return 0;
    }
}

// Compiles one tree (`len` nodes of op/value/out, prefix order) into `dst` and returns the
// number of instructions (at most len; 0 for no tree), or GROVE_NOT_COMPILED for a tree that is not one well-formed
// tree or holds more than GROVE_COMPILE_STACK pending values at once (never evaluated then).
// `pos` is scratch for GROVE_COMPILE_STACK positions.
__device__ inline unsigned grove_compile_tree(const unsigned char* __restrict__ op, const float* __restrict__ value,
                                              const unsigned char* __restrict__ out, int len,
                                              GroveInstr* __restrict__ dst, unsigned short* pos) {
    if (len == 0) return 0;  // no program
    int np = 0;        // pending values (positions of nodes whose parent has not run yet)
    int live = 0;      // of those, the computed ones (held in top and on the stack)
    unsigned n = 0;    // instructions written
    for (int i = len - 1; i >= 0; --i) {
        const unsigned code = op[i];
        const bool leaf = code <= GROVE_OP_CONST;
        if (np == GROVE_COMPILE_STACK) return GROVE_NOT_COMPILED;
        if (leaf && out[i] == 0 && i != 0) {  // folded into its parent
            pos[np++] = (unsigned short)i;
            continue;
        }
        GroveInstr in;
        in.op = (unsigned char)code;
        in.out = out[i];
        in.pad = 0;
        in.reserved = 0;
        unsigned mode;
        int used;  // computed values this instruction consumes
        if (leaf) {
            mode = (code == GROVE_OP_VAR ? GROVE_SRC_VAR : GROVE_SRC_CONST) | (GROVE_SRC_CONST << 2);
            in.a = code == GROVE_OP_VAR ? (unsigned)value[i] : __float_as_uint(value[i]);
            in.b = 0;
            used = 0;
        } else {
            const int arity = grove_arity(code);
            if (arity == 0 || np < arity) return GROVE_NOT_COMPILED;
            const int c1 = pos[--np];  // child 1 (= i + 1): its value is the newest
            const bool f1 = op[c1] <= GROVE_OP_CONST && out[c1] == 0;
            mode = f1 ? (op[c1] == GROVE_OP_VAR ? GROVE_SRC_VAR : GROVE_SRC_CONST) : GROVE_SRC_TOP;
            in.a = !f1 ? 0u : (op[c1] == GROVE_OP_VAR ? (unsigned)value[c1] : __float_as_uint(value[c1]));
            used = f1 ? 0 : 1;
            in.b = 0;
            if (arity == 2) {
                const int c2 = pos[--np];
                const bool f2 = op[c2] <= GROVE_OP_CONST && out[c2] == 0;
                unsigned sb;
                if (f2) {
                    sb = op[c2] == GROVE_OP_VAR ? GROVE_SRC_VAR : GROVE_SRC_CONST;
                    in.b = op[c2] == GROVE_OP_VAR ? (unsigned)value[c2] : __float_as_uint(value[c2]);
                } else {
                    sb = f1 ? GROVE_SRC_BTOP : GROVE_SRC_STACK;
                    used += 1;
                }
                mode |= (sb << 2) | GROVE_I_BINARY;
            } else {
                mode |= GROVE_SRC_CONST << 2;  // b = 0.0f, unused
            }
        }
        if (used == 0 && live > 0) mode |= GROVE_I_PUSH;
        live += 1 - used;
        in.mode = (unsigned char)mode;
        dst[n++] = in;
        pos[np++] = (unsigned short)i;
    }
    return np == 1 ? n : GROVE_NOT_COMPILED;
}

// Runs one instruction for K points. `env` supplies the operands and the output slots:
//   env.load(arg, v)  v[k] = variable `arg` at point k
//   env.slot(s, r)    adds r[k] to output slot s of point k
template <int K, int DEPTH, class Env>
__device__ __forceinline__ void grove_exec(const GroveInstr& in, float (&top)[K], float (&stack)[DEPTH][K], int& h,
                                           Env& env) {
    const unsigned m = in.mode;
    if (m & GROVE_I_PUSH) {
#pragma unroll
        for (int k = 0; k < K; ++k) stack[h][k] = top[k];
        ++h;
    }
    float va[K], vb[K];
    const unsigned sa = m & 3u, sb = (m >> 2) & 3u;
    if (sa == GROVE_SRC_VAR) {
        env.load(in.a, va);
    } else {
        const float c = __uint_as_float(in.a);
#pragma unroll
        for (int k = 0; k < K; ++k) va[k] = sa == GROVE_SRC_CONST ? c : top[k];
    }
    if (sb == GROVE_SRC_VAR) {
        env.load(in.b, vb);
    } else if (sb == GROVE_SRC_STACK) {
        --h;
#pragma unroll
        for (int k = 0; k < K; ++k) vb[k] = stack[h][k];
    } else {
        const float c = __uint_as_float(in.b);
#pragma unroll
        for (int k = 0; k < K; ++k) vb[k] = sb == GROVE_SRC_CONST ? c : top[k];
    }
    float r[K];
    switch (in.op) {
#define GROVE_CASE(CODE, ARITY, EXPR)                  \
    case CODE:                                         \
        _Pragma("unroll") for (int k = 0; k < K; ++k) { \
            const float a = va[k], b = vb[k];          \
            (void)b;                                   \
            r[k] = EXPR;                               \
        }                                              \
        break;
        GROVE_FOR_EACH_OP(GROVE_CASE)
#undef GROVE_CASE
        default:  // a lone leaf (GROVE_OP_VAR, GROVE_OP_CONST): its value
#pragma unroll
            for (int k = 0; k < K; ++k) r[k] = va[k];
    }
    if (in.out) {
        env.slot(in.out - 1u, r);
#pragma unroll
        for (int k = 0; k < K; ++k) top[k] = (m & GROVE_I_BINARY) ? vb[k] : va[k];
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k) top[k] = r[k];
    }
}

// Copies instructions [lo, hi) of one program into shared memory (coalesced over the block).
__device__ __forceinline__ void grove_stage(GroveInstr* dst, const GroveInstr* __restrict__ src, int lo, int hi) {
    for (int j = lo + (int)threadIdx.x; j < hi; j += (int)blockDim.x) dst[j - lo] = src[j];
}

// Mirrors CompileParams in src/backend/cuda/kernels.rs.
struct GroveCompileParams {
    unsigned n_trees;  // entries of tree_ids
    unsigned max_len;  // L: row stride of the population and of the programs
};
static_assert(sizeof(GroveCompileParams) == 8, "GroveCompileParams must match CompileParams");

// Compiles trees tree_ids[0..n_trees) (rows 0..n_trees when tree_ids is null) of a population,
// one thread per tree: row t's program goes
// to prog[t][0..n_instr[t]) (twin of linear::compile_trees); a tree the compiler refuses gets
// GROVE_NOT_COMPILED, and the host never evaluates it here.
//   ops, values, outs [P x L], lens [P]: the population; prog [P x L] instructions; n_instr [P].
extern "C" __global__ void grove_compile_trees(const GroveCompileParams p, const unsigned* __restrict__ tree_ids,
                                               const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                               const unsigned char* __restrict__ outs,
                                               const unsigned short* __restrict__ lens, GroveInstr* __restrict__ prog,
                                               unsigned short* __restrict__ n_instr) {
    const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.n_trees) return;
    const unsigned t = tree_ids ? tree_ids[g] : g;
    const size_t row = (size_t)t * p.max_len;
    unsigned short pos[GROVE_COMPILE_STACK];
    n_instr[t] = (unsigned short)grove_compile_tree(ops + row, values + row, outs + row, (int)lens[t], prog + row, pos);
}
