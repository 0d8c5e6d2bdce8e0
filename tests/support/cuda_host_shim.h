// cuda_host_shim.h: just enough of CUDA for kernels/sim.cu to compile as host C++ (g++), so that
// tests/sim_kernel_host.rs can run the kernel's own code on a machine without a GPU and compare
// it with src/sim/. Threads run one after another; blockIdx, blockDim, threadIdx are globals.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __device__
#define __constant__
#define __global__
#define __noinline__
#define __restrict__
#define static_assert(...)
#define __INTADDR__(x) 0
struct GroveDim3 { unsigned x, y, z; };
static GroveDim3 blockIdx, blockDim, threadIdx;
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
using std::isnan;
using std::isfinite;
