// interp.cuh: the one interpreter of grove's programs on the GPU, shared by eval.cu (regression
// sums and predictions), classify.cu (classification fitness) and sim.cu (control policies).
//
// Its compilers: grove_compile_chunk (a block compiles the tree it evaluates, chunk by chunk,
// in shared memory), grove_compile_tree (one thread, one tree) and, where the includer defines
// GROVE_COMPILE_TREES (sim.cu), the kernel grove_compile_trees over it. Opcode arities come
// from grove_common.h, which the kernel file includes first.
//
// Twin of src/backend/cpu/interp.rs. A tree (prefix order, src/program/tree.rs) is compiled, by the
// block that evaluates it or once per roll-out launch, into a linear program (Chitty's linear form): one instruction per function node,
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
GROVE_CHECK_LAYOUT(GroveInstr);

// Operand sources (2 bits each). For a: TOP, VAR, CONST. For b: STACK, VAR, CONST, TOP.
#define GROVE_SRC_TOP 0u
#define GROVE_SRC_STACK 0u
#define GROVE_SRC_VAR 1u
#define GROVE_SRC_CONST 2u
#define GROVE_SRC_BTOP 3u
#define GROVE_I_PUSH 16u    // push top before reading the operands
#define GROVE_I_BINARY 32u  // two arguments: an output instruction passes b (else a)

// Nodes [lo, hi) of one tree staged in shared memory (coalesced, once per chunk), the rest read
// from the tree's row: what grove_compile_chunk reads. A node's children follow it, so a chunk
// reads before itself never; past itself only the first nodes of later subtrees.
struct GroveChunk {
    const unsigned char* __restrict__ op;  // the row: op, value, size, out of len nodes
    const float* __restrict__ value;
    const unsigned short* __restrict__ size;
    const unsigned char* __restrict__ out;
    unsigned char* sop;  // shared: nodes lo .. hi - 1
    float* svalue;
    unsigned short* ssize;
    unsigned char* sout;
    int lo, hi;  // hi = lo: every read from the row
    int len;     // the tree's nodes: a read past them (never, for sizes the host checked) reads the last
    __device__ __forceinline__ unsigned op_at(int c) const { return c < hi ? sop[c - lo] : op[c]; }
    __device__ __forceinline__ unsigned out_at(int c) const { return c < hi ? sout[c - lo] : out[c]; }
    __device__ __forceinline__ float value_at(int c) const { return c < hi ? svalue[c - lo] : value[c]; }
    __device__ __forceinline__ int size_at(int c) const { return c < hi ? ssize[c - lo] : size[c]; }
    // A leaf folded into its parent (grove_compile_tree's rule): not an output node, not the root.
    __device__ __forceinline__ bool foldable(int c) const { return op_at(c) <= GROVE_OP_CONST && out_at(c) == 0 && c != 0; }
    // A folded leaf's source and operand word.
    __device__ __forceinline__ unsigned src_of(int c) const { return op_at(c) == GROVE_OP_VAR ? GROVE_SRC_VAR : GROVE_SRC_CONST; }
    __device__ __forceinline__ unsigned word_of(int c) const {
        return op_at(c) == GROVE_OP_VAR ? (unsigned)value_at(c) : __float_as_uint(value_at(c));
    }
};

// Shared memory of grove_compile_chunk for CHUNK nodes and any block size (4-byte aligned).
#define GROVE_COMPILE_SHARED(CHUNK, T) ((CHUNK) * 8 + 32 * 8)

// The instruction of node j (in the chunk) whose push flag the caller sets. *used: computed
// values it consumes. Returns false for a folded leaf (no instruction).
__device__ __forceinline__ bool grove_node_instr(const GroveChunk& c, int j, GroveInstr& in, int& used) {
    if (c.foldable(j)) return false;
    const unsigned code = c.op_at(j);
    in.op = (unsigned char)code;
    in.out = (unsigned char)c.out_at(j);
    in.pad = 0;
    in.reserved = 0;
    in.b = 0;
    if (code <= GROVE_OP_CONST) {
        in.mode = (unsigned char)(c.src_of(j) | (GROVE_SRC_CONST << 2));
        in.a = c.word_of(j);
        used = 0;
        return true;
    }
    const int c1 = j + 1 < c.len ? j + 1 : c.len - 1;  // (j + 1 always, for a checked tree)
    const bool f1 = c.foldable(c1);
    unsigned mode = f1 ? c.src_of(c1) : GROVE_SRC_TOP;
    in.a = f1 ? c.word_of(c1) : 0u;
    used = f1 ? 0 : 1;
    if (grove_arity(code) == 2) {
        int c2 = c1 + c.size_at(c1);
        c2 = c2 < c.len ? c2 : c.len - 1;
        unsigned sb;
        if (c.foldable(c2)) {
            sb = c.src_of(c2);
            in.b = c.word_of(c2);
        } else {
            sb = f1 ? GROVE_SRC_BTOP : GROVE_SRC_STACK;
            used += 1;
        }
        mode |= (sb << 2) | GROVE_I_BINARY;
    } else {
        mode |= GROVE_SRC_CONST << 2;
    }
    in.mode = (unsigned char)mode;
    return true;
}

// grove_compile_tree's output for nodes [lo, hi) of one tree of `len` nodes, computed by the whole block in
// parallel from the subtree sizes (no walk): node j's instruction goes to position (emitting
// nodes after j in [lo, hi)) of code, and it pushes when it consumes no computed value while
// `live` + (what the nodes after j leave) is positive. Walking a tree chunk by chunk from its
// end, `live` (the same in every thread) carries the computed values waiting from one chunk
// to the next; it starts at 0. Returns the chunk's instruction count. `shared` holds
// GROVE_COMPILE_SHARED(hi - lo, blockDim.x) bytes, 4-byte aligned. Every thread must call it
// (it holds barriers); code is complete after the caller's next barrier.
__device__ __noinline__ int grove_compile_chunk(const unsigned char* __restrict__ op, const float* __restrict__ value,
                                                const unsigned short* __restrict__ size,
                                                const unsigned char* __restrict__ out, int len, int lo, int hi,
                                                int& live, GroveInstr* code, unsigned char* shared) {
    const int T = (int)blockDim.x, tid = (int)threadIdx.x, m = hi - lo;
    GroveChunk c;
    c.op = op;
    c.value = value;
    c.size = size;
    c.out = out;
    c.svalue = (float*)shared;                             // m floats
    int* we = (int*)(shared + 4 * m);                      // 32: the warps' emits, then scanned
    int* wl = we + 32;                                     // 32: their live changes (biased)
    c.ssize = (unsigned short*)(wl + 32);                  // m
    c.sop = (unsigned char*)(c.ssize + m);                 // m
    c.sout = c.sop + m;                                    // m
    c.lo = lo;
    c.hi = hi;
    c.len = len;
    for (int j = tid; j < m; j += T) {
        c.sop[j] = op[lo + j];
        c.svalue[j] = value[lo + j];
        c.ssize[j] = size[lo + j];
        c.sout[j] = out[lo + j];
    }
    __syncthreads();
    const int q = (m + T - 1) / T;  // nodes per thread, contiguous in execution order
    const int e0 = tid * q < m ? tid * q : m, e1 = e0 + q < m ? e0 + q : m;  // (no min: g++ builds this too)
    int n_emit = 0, n_live = 0;
    for (int e = e0; e < e1; ++e) {
        GroveInstr in;
        int used;
        if (grove_node_instr(c, hi - 1 - e, in, used)) {
            n_emit += 1;
            n_live += 1 - used;
        }
    }
    // Inclusive scan over the threads of (n_emit, n_live), packed into one 64-bit word (emits
    // high, live changes low with a bias that keeps every partial sum positive): shuffles
    // within each warp, then the warps' totals in order by one thread. blockDim.x is a
    // multiple of 32.
    const long long BIAS = 1 << 12;  // > any chunk's |n_live|; 1024 threads * 2 * BIAS < 2^32
    long long x = ((long long)n_emit << 32) + (n_live + BIAS);
    const int lane = tid & 31, warp = tid >> 5, n_warps = T >> 5;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    // The warps' totals as two ints each (shared memory here is only 4-byte aligned).
    if (lane == 31) {
        we[warp] = (int)(x >> 32);
        wl[warp] = (int)(x & 0xffffffffll);
    }
    __syncthreads();
    if (tid == 0)
        for (int w = 1; w < n_warps; ++w) {
            we[w] += we[w - 1];
            wl[w] += wl[w - 1];
        }
    __syncthreads();
    if (warp > 0) x += ((long long)we[warp - 1] << 32) + wl[warp - 1];
    const long long all = ((long long)we[n_warps - 1] << 32) + wl[n_warps - 1];
    // Threads 0..tid each added BIAS once.
    int idx = (int)(x >> 32) - n_emit, lv = live + (int)((x & 0xffffffffll) - (long long)(tid + 1) * BIAS) - n_live;
    const int total_e = (int)(all >> 32), total_l = (int)((all & 0xffffffffll) - (long long)T * BIAS);
    for (int e = e0; e < e1; ++e) {
        GroveInstr in;
        int used;
        if (grove_node_instr(c, hi - 1 - e, in, used)) {
            if (used == 0 && lv > 0) in.mode |= GROVE_I_PUSH;
            code[idx++] = in;
            lv += 1 - used;
        }
    }
    __syncthreads();  // every thread has read the totals and the staged nodes: shared is free again
    live += total_l;
    return total_e;
}

// Compiles one tree (`len` nodes of op/value/size/out, prefix order) into `dst` with one thread,
// walking it backwards, and returns the number of instructions (at most len; 0 for no tree):
// grove_compile_chunk's output for the whole tree, the same rule node by node. The tree must
// have passed the host's checks (opcodes, one tree, subtree sizes).
__device__ inline unsigned grove_compile_tree(const unsigned char* __restrict__ op, const float* __restrict__ value,
                                              const unsigned short* __restrict__ size,
                                              const unsigned char* __restrict__ out, int len, GroveInstr* __restrict__ dst) {
    GroveChunk c;
    c.op = op;
    c.value = value;
    c.size = size;
    c.out = out;
    c.sop = nullptr;
    c.svalue = nullptr;
    c.ssize = nullptr;
    c.sout = nullptr;
    c.lo = c.hi = 0;
    c.len = len;
    int live = 0;  // computed values waiting
    unsigned n = 0;
    for (int j = len - 1; j >= 0; --j) {
        GroveInstr in;
        int used;
        if (!grove_node_instr(c, j, in, used)) continue;
        if (used == 0 && live > 0) in.mode |= GROVE_I_PUSH;
        live += 1 - used;
        dst[n++] = in;
    }
    return n;
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

// Mirrors CompileParams in src/backend/cuda/kernels.rs.
struct GroveCompileParams {
    unsigned n_trees;  // entries of tree_ids
    unsigned max_len;  // L: row stride of the population and of the programs
};
GROVE_CHECK_LAYOUT(GroveCompileParams);

#ifdef GROVE_COMPILE_TREES
// Compiles trees tree_ids[0..n_trees) (rows 0..n_trees when tree_ids is null) of a population,
// one thread per tree: row t's program goes to prog[t][0..n_instr[t]) (twin of
// linear::compile_trees). Every tree must have passed the host's checks, or have length 0.
//   ops, values, sizes, outs [P x L], lens [P]: the population; prog [P x L] instructions; n_instr [P].
extern "C" __global__ void grove_compile_trees(const GroveCompileParams p, const unsigned* __restrict__ tree_ids,
                                               const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                               const unsigned short* __restrict__ sizes,
                                               const unsigned char* __restrict__ outs,
                                               const unsigned short* __restrict__ lens, GroveInstr* __restrict__ prog,
                                               unsigned short* __restrict__ n_instr) {
    const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.n_trees) return;
    const unsigned t = tree_ids ? tree_ids[g] : g;
    const size_t row = (size_t)t * p.max_len;
    n_instr[t] = (unsigned short)grove_compile_tree(ops + row, values + row, sizes + row, outs + row, (int)lens[t], prog + row);
}
#endif  // GROVE_COMPILE_TREES
