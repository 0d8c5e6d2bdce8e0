// control_host_main.cpp: runs grove_compile_trees (kernels/interp.cuh), then
// grove_control_rollout and grove_control_reduce (kernels/sim.cu, compiled as host C++ after
// cuda_host_shim.h and a generated grove_env.h), and prints per episode `valid steps return`
// and its observations' statistics (`observed`: count, sums, sums of squares), then per
// individual its mean (%.17g), then the work queue's final count.
#include <functional>
//
// The roll-out is launched as the GPU launches it, GRID blocks of BLOCK threads over a queue of
// P·K episodes, usually fewer threads than episodes, so threads refill from the queue. Blocks run
// one after another (as the shim's other launches); a block's threads run one after another
// (MODE seq: the first thread plays its item, then everything left in the queue) or at once as
// real threads taking from the queue's true atomic (MODE par: which thread plays which episode
// depends on the timing). Episodes no thread played keep sentinel results, which the test sees.
// MODE lanes: a kernel built with GROVE_CTRL_LANES = BLOCK, a block's threads one group of lanes
// that meet at every __syncwarp as the group's lanes do on the device (cuda_host_shim.h's
// grove_emu_run_block), taking items from the queue together.
//
// usage: control_host P K T L SEED FLAGS GRID BLOCK MODE(seq|par|lanes) [scale] < population (P rows: skip len,
// then len × `op value size out`), then with `scale` the normaliser the policies read through
// (2·GROVE_NOBS values: every mean, then every scale)
int main(int argc, char** argv) {
    if (argc != 10 && argc != 11) return 2;
    GroveControlParams p;
    p.n_trees = (unsigned)atoi(argv[1]);
    p.episodes = (unsigned)atoi(argv[2]);
    p.steps = (unsigned)atoi(argv[3]);
    p.max_len = (unsigned)atoi(argv[4]);
    p.seed = strtoull(argv[5], 0, 10);
    p.flags = (unsigned)atoi(argv[6]);  // GROVE_CTRL_NOISE, GROVE_CTRL_NO_TERMINATION
    p.generation = 0;
    const unsigned grid = (unsigned)atoi(argv[7]), block = (unsigned)atoi(argv[8]);
    const bool par = strcmp(argv[9], "par") == 0, lanes = strcmp(argv[9], "lanes") == 0;
    if (lanes && block != GROVE_CTRL_LANES) return 2;
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
    float* scale = nullptr;
    if (argc == 11) {
        if (strcmp(argv[10], "scale") != 0) return 2;
        scale = (float*)calloc(2 * GROVE_NOBS, sizeof(float));
        for (int i = 0; i < 2 * GROVE_NOBS; ++i)
            if (scanf("%a", &scale[i]) != 1) return 3;
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
    const size_t row = 1 + 2 * GROVE_NOBS;
    double* observed = (double*)malloc(P * K * row * sizeof(double));
    for (size_t i = 0; i < P * K * row; ++i) observed[i] = -77.0;  // sentinel: the kernel zeroes each row it takes
    for (size_t g = 0; g < P * K; ++g) {
        returns[g] = -1234.5;  // sentinels: an episode no thread played shows as `7 4294967295 -1234.5`
        lengths[g] = 0xffffffffu;
        valid[g] = 7;
    }
    unsigned queue = 0;  // zeroed per launch, as the host does
    for (unsigned b = 0; b < grid; ++b) {
        auto thread = [&, b](unsigned t) {
            gridDim.x = grid;
            blockIdx.x = b;
            blockDim.x = block;
            threadIdx.x = t;
            grove_control_rollout(p, prog, n_instr, skip, returns, lengths, valid, &queue, observed, scale);
        };
        if (lanes) {
            std::function<void()> body = [&, b] {
                gridDim.x = grid;
                grove_control_rollout(p, prog, n_instr, skip, returns, lengths, valid, &queue, observed, scale);
            };
            grove_emu_set_block(b);
            grove_emu_run_block(block, [](void* f) { (*(std::function<void()>*)f)(); }, &body);
        } else if (par) {
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < block; ++t) ts.emplace_back(thread, t);
            for (auto& th : ts) th.join();
        } else {
            for (unsigned t = 0; t < block; ++t) thread(t);
        }
    }
    gridDim.x = 0;
    blockDim.x = 1;
    threadIdx.x = 0;
    for (unsigned i = 0; i < P; ++i) {
        blockIdx.x = i;
        grove_control_reduce(p, returns, valid, means);
    }
    for (size_t g = 0; g < P * K; ++g) {
        printf("%u %u %.17g", valid[g], lengths[g], returns[g]);
        for (size_t i = 0; i < row; ++i) printf(" %.17g", observed[g * row + i]);
        printf("\n");
    }
    for (size_t i = 0; i < P; ++i) printf("%.17g\n", means[i]);
    printf("%u\n", queue);
    return 0;
}
