// sim_host_main.cpp: runs grove_sim_rollout (kernels/sim.cu, compiled as host C++ after
// cuda_host_shim.h and a generated grove_env.h) for E environments and prints, per environment,
// the length, the return and the final q and v, one line each, every value as the hexadecimal
// bits of its f64 (the return) or f32 (q, v); then, with RECORD = 1, the trajectory: (T + 1) × E
// lines of 2·NV f32 bits (step-major, row 0 the reset state).
// usage: sim_host E STEPS SEED NOISE RECORD < actions (T*E*NU floats as %a, whitespace separated)
int main(int argc, char** argv) {
    if (argc != 6) return 2;
    const unsigned E = (unsigned)atoi(argv[1]), T = (unsigned)atoi(argv[2]);
    GroveSimParams p;
    p.n_envs = E; p.steps = T; p.generation = 0; p.noise = (unsigned)atoi(argv[4]);
    p.seed = strtoull(argv[3], 0, 10); p.record = (unsigned)atoi(argv[5]); p.first_env = 0;
    const size_t na = (size_t)T * E * GROVE_NU;
    float* actions = (float*)malloc((na + 1) * sizeof(float));
    for (size_t i = 0; i < na; ++i)
        if (scanf("%a", &actions[i]) != 1) return 3;
    double* returns = (double*)calloc(E, sizeof(double));
    unsigned* lengths = (unsigned*)calloc(E, sizeof(unsigned));
    float* q = (float*)calloc((size_t)E * GROVE_NV, sizeof(float));
    float* v = (float*)calloc((size_t)E * GROVE_NV, sizeof(float));
    const size_t nt = p.record ? (size_t)(T + 1) * E * 2 * GROVE_NV : 1;
    float* traj = (float*)calloc(nt, sizeof(float));
    blockDim.x = 1;
    for (unsigned e = 0; e < E; ++e) {
        blockIdx.x = e;
        threadIdx.x = 0;
        grove_sim_rollout(p, actions, returns, lengths, q, v, traj);
    }
    for (unsigned e = 0; e < E; ++e) {
        printf("%u %llx", lengths[e], (unsigned long long)__double_as_longlong(returns[e]));
        for (int i = 0; i < GROVE_NV; ++i) printf(" %x", __float_as_uint(q[e * GROVE_NV + i]));
        for (int i = 0; i < GROVE_NV; ++i) printf(" %x", __float_as_uint(v[e * GROVE_NV + i]));
        printf("\n");
    }
    if (p.record)
        for (size_t row = 0; row < (size_t)(T + 1) * E; ++row) {
            for (int i = 0; i < 2 * GROVE_NV; ++i) printf(i ? " %x" : "%x", __float_as_uint(traj[row * 2 * GROVE_NV + i]));
            printf("\n");
        }
    return 0;
}
