// cuda_host_shim.h: just enough of CUDA to compile kernels/vary.cu, select.cu, sim.cu and
// control.cu as host C++ (g++ -std=c++20 -ffp-contract=off), so tests/cuda_vary.rs can run the
// kernels' own code on a machine without a GPU and compare it with the CPU reference. A launch
// runs blocks one after another, each either as one thread (kernels whose threads share
// nothing), as real threads meeting at a barrier (grove_emu_run_block: __syncthreads and
// __shared__ as on the device; a block of at most 32 threads is also a warp for vary.cu's lane
// groups), or as free real threads that share only atomics (grove_control_rollout's work queue,
// tests/support/control_host_main.cpp). The intrinsics are the IEEE operations they name:
// __fmul_rn is a rounded multiply, and with contraction off nothing is fused, as on the device.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <barrier>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time: a static is its shared memory
#define static_assert(...)
#define __constant__
#define __grid_constant__
#define __INTADDR__(x) 0

struct GroveDim3 { unsigned x, y, z; };
static thread_local GroveDim3 blockIdx, blockDim, threadIdx, gridDim;
static std::barrier<>* grove_emu_barrier = nullptr;
inline void __syncthreads() {
    if (grove_emu_barrier) grove_emu_barrier->arrive_and_wait();
}

// __shfl_up_sync as a block whose threads all call it together (interp.cuh's scan does): each
// thread publishes its value, the block meets, each reads the value `d` lanes below its own
// within its warp of 32 (its own below lane d), the block meets again. Without a block of real
// threads (one-thread launches) a thread is lane 0 and keeps its value.
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d);

// The block index grove_emu_run_block's threads take.
static unsigned grove_emu_block = 0;
extern "C" void grove_emu_set_block(unsigned b) { grove_emu_block = b; }

// Runs body(ctx) as block grove_emu_block of `threads` threads that meet at every __syncthreads.
extern "C" void grove_emu_run_block(unsigned threads, void (*body)(void*), void* ctx) {
    std::barrier<> bar(threads);
    grove_emu_barrier = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
        ts.emplace_back([=] {
            blockIdx.x = grove_emu_block;
            blockDim.x = threads;
            threadIdx.x = t;
            body(ctx);
        });
    for (auto& th : ts) th.join();
    grove_emu_barrier = nullptr;
}

template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    if (!grove_emu_barrier) return v;
    static T buf[1024];
    buf[threadIdx.x] = v;
    grove_emu_barrier->arrive_and_wait();
    const T r = threadIdx.x % 32 >= d ? buf[threadIdx.x - d] : v;
    grove_emu_barrier->arrive_and_wait();
    return r;
}

// The warp intrinsics of vary.cu's groups, for a block that is one group (one warp of
// blockDim.x <= 32 lanes, every lane calling each intrinsic together, as the kernels do): the
// block meets, each lane reads what it needs, the block meets again. Without a block of real
// threads a thread is a warp of one lane.
inline void __syncwarp(unsigned = 0xffffffffu) {
    if (grove_emu_barrier) grove_emu_barrier->arrive_and_wait();
}
inline unsigned __ballot_sync(unsigned, int p) {
    if (!grove_emu_barrier) return p ? 1u : 0u;
    static unsigned buf[32];
    buf[threadIdx.x] = p != 0;
    grove_emu_barrier->arrive_and_wait();
    unsigned r = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) r |= buf[t] << t;
    grove_emu_barrier->arrive_and_wait();
    return r;
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
    if (!grove_emu_barrier) return v;
    static T buf[32];
    buf[threadIdx.x] = v;
    grove_emu_barrier->arrive_and_wait();
    const unsigned from = threadIdx.x ^ (unsigned)lane_mask;
    const T r = from < blockDim.x && from / width == threadIdx.x / width ? buf[from] : v;
    grove_emu_barrier->arrive_and_wait();
    return r;
}
template <class T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    if (!grove_emu_barrier) return v;
    static T buf[32];
    buf[threadIdx.x] = v;
    grove_emu_barrier->arrive_and_wait();
    const unsigned from = threadIdx.x / width * width + (unsigned)src % width;
    const T r = from < blockDim.x ? buf[from] : v;
    grove_emu_barrier->arrive_and_wait();
    return r;
}
// The lanes running together: the lane's own bit. Kernels that call it (grove_control_rollout's
// queue) run as free threads, never as a block meeting at barriers, so a thread is alone in its
// warp and the warp intrinsics above hand back its own value.
inline unsigned __activemask() { return 1u << (threadIdx.x % 32); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }

inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline float __uint2float_rn(unsigned u) { return (float)u; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline long long __double_as_longlong(double d) { long long u; std::memcpy(&u, &d, 8); return u; }
inline double __longlong_as_double(long long u) { double d; std::memcpy(&d, &u, 8); return d; }
// True atomics: the control kernel's work queue is shared by real threads (control_host_main).
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline double __dmul_rn(double a, double b) { return a * b; }
// Real threads share a block's static memory here: a true atomic.
template <typename T> inline T atomicMin(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long v) {
    __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
// fmaf, fminf, fmodf and truncf come from <math.h> (through <cmath>); fmaf is the exact fused
// multiply-add there too, as grove_math.cuh needs.
using std::signbit;
using std::isfinite;
using std::isnan;
