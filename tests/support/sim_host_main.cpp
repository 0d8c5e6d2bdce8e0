// sim_host_main.cpp: runs grove_sim_rollout (kernels/sim.cu, compiled as host C++ after
// cuda_host_shim.h and a generated grove_env.h) for E environments and prints, per environment,
// the length, the return and the final q and v, one line each (%.9g).
// usage: sim_host E STEPS SEED NOISE < actions (T*E*NU floats, whitespace separated)
int main(int argc, char** argv) {
    if (argc != 5) return 2;
    const unsigned E = (unsigned)atoi(argv[1]), T = (unsigned)atoi(argv[2]);
    GroveSimParams p;
    p.n_envs = E; p.steps = T; p.generation = 0; p.noise = (unsigned)atoi(argv[4]);
    p.seed = strtoull(argv[3], 0, 10); p.record = 0; p.first_env = 0;
    const size_t na = (size_t)T * E * GROVE_NU;
    float* actions = (float*)malloc((na + 1) * sizeof(float));
    for (size_t i = 0; i < na; ++i)
        if (scanf("%f", &actions[i]) != 1) return 3;
    double* returns = (double*)calloc(E, sizeof(double));
    unsigned* lengths = (unsigned*)calloc(E, sizeof(unsigned));
    float* q = (float*)calloc((size_t)E * GROVE_NV, sizeof(float));
    float* v = (float*)calloc((size_t)E * GROVE_NV, sizeof(float));
    float traj[1];
    blockDim.x = 1;
    for (unsigned e = 0; e < E; ++e) {
        blockIdx.x = e;
        threadIdx.x = 0;
        grove_sim_rollout(p, actions, returns, lengths, q, v, traj);
    }
    for (unsigned e = 0; e < E; ++e) {
        printf("%u %.17g", lengths[e], returns[e]);
        for (int i = 0; i < GROVE_NV; ++i) printf(" %.9g", q[e * GROVE_NV + i]);
        for (int i = 0; i < GROVE_NV; ++i) printf(" %.9g", v[e * GROVE_NV + i]);
        printf("\n");
    }
    return 0;
}
