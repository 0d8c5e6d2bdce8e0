// dense_switch.cu: does NVRTC compile a dense switch to a jump table (BRX)? Sixteen cases 0..15,
// an unreachable default, one per loop iteration on a value read from memory. Read with
// `tools/sass/sass.py tools/sass/dense_switch.cu` (docs/benchmarks.md, issue 30): 0 BRX, a compare tree.
extern "C" __global__ void k(const unsigned char* ops, int n, float* out, const float* x) {
    float a = x[threadIdx.x], b = x[threadIdx.x + 32];
    float r = 0;
    for (int i = 0; i < n; ++i) {
        unsigned op = ops[i];
        switch (op) {
            case 0: r = a + b; break;
            case 1: r = a - b; break;
            case 2: r = a * b; break;
            case 3: r = a / b; break;
            case 4: r = sinf(a); break;
            case 5: r = cosf(a); break;
            case 6: r = expf(a); break;
            case 7: r = logf(a); break;
            case 8: r = fabsf(a); break;
            case 9: r = sqrtf(a); break;
            case 10: r = tanhf(a); break;
            case 11: r = a * a; break;
            case 12: r = fmaxf(a, b); break;
            case 13: r = fminf(a, b); break;
            case 14: r = -a; break;
            case 15: r = a + 1; break;
            default: __builtin_unreachable();
        }
        a = r; b = r * 0.5f;
    }
    out[threadIdx.x] = r;
}
