// control_host_main.cpp: runs grove_compile_trees (kernels/interp.cuh), then
// grove_control_rollout and grove_control_reduce (kernels/sim.cu, compiled as host C++ after
// cuda_host_shim.h and a generated grove_env.h), one thread at a time, and prints per episode `valid steps return`, then per individual its mean (%.17g).
// usage: control_host P K T L SEED FLAGS < population (P rows: skip len, then len × `op value size out`)
int main(int argc, char** argv) {
    if (argc != 7) return 2;
    GroveControlParams p;
    p.n_trees = (unsigned)atoi(argv[1]);
    p.episodes = (unsigned)atoi(argv[2]);
    p.steps = (unsigned)atoi(argv[3]);
    p.max_len = (unsigned)atoi(argv[4]);
    p.seed = strtoull(argv[5], 0, 10);
    p.flags = (unsigned)atoi(argv[6]);  // GROVE_CTRL_NOISE, GROVE_CTRL_NO_TERMINATION
    p.generation = 0;
    const size_t P = p.n_trees, K = p.episodes, L = p.max_len;
    unsigned char* ops = (unsigned char*)calloc(P * L, 1);
    float* values = (float*)calloc(P * L, sizeof(float));
    unsigned char* outs = (unsigned char*)calloc(P * L, 1);
    unsigned short* sizes = (unsigned short*)calloc(P * L, sizeof(unsigned short));
    unsigned short* lens = (unsigned short*)calloc(P, sizeof(unsigned short));
    unsigned char* skip = (unsigned char*)calloc(P, 1);
    for (size_t i = 0; i < P; ++i) {
        unsigned len, s;
        if (scanf("%u %u", &s, &len) != 2) return 3;
        skip[i] = (unsigned char)s;
        lens[i] = (unsigned short)len;
        for (unsigned j = 0; j < len; ++j) {
            unsigned op, size, out;
            float v;
            if (scanf("%u %a %u %u", &op, &v, &size, &out) != 4) return 3;
            ops[i * L + j] = (unsigned char)op;
            values[i * L + j] = v;
            sizes[i * L + j] = (unsigned short)size;
            outs[i * L + j] = (unsigned char)out;
        }
    }
    GroveInstr* prog = (GroveInstr*)calloc(P * L, sizeof(GroveInstr));
    unsigned short* n_instr = (unsigned short*)calloc(P, sizeof(unsigned short));
    GroveCompileParams cp = {p.n_trees, p.max_len};
    blockDim.x = 1;
    threadIdx.x = 0;
    for (unsigned g = 0; g < P; ++g) {
        blockIdx.x = g;
        grove_compile_trees(cp, nullptr, ops, values, sizes, outs, lens, prog, n_instr);
    }
    double* returns = (double*)calloc(P * K, sizeof(double));
    unsigned* lengths = (unsigned*)calloc(P * K, sizeof(unsigned));
    unsigned* valid = (unsigned*)calloc(P * K, sizeof(unsigned));
    double* means = (double*)calloc(P, sizeof(double));
    blockDim.x = 1;
    threadIdx.x = 0;
    for (unsigned g = 0; g < P * K; ++g) {
        blockIdx.x = g;
        grove_control_rollout(p, prog, n_instr, skip, returns, lengths, valid);
    }
    for (unsigned i = 0; i < P; ++i) {
        blockIdx.x = i;
        grove_control_reduce(p, returns, valid, means);
    }
    for (size_t g = 0; g < P * K; ++g) printf("%u %u %.17g\n", valid[g], lengths[g], returns[g]);
    for (size_t i = 0; i < P; ++i) printf("%.17g\n", means[i]);
    return 0;
}
