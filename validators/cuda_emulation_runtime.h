// The host runtime that lets a generated CUDA kernel (.cu text, unchanged) compile with the system C++
// compiler and run on the CPU: CPU EMULATION of the CUDA programming model, NOT a GPU run. It checks a
// kernel's logic (indexing, shared memory, barriers, launch configuration), not timing, warp-level
// behaviour or memory-model races.
//
// Execution model:
//   - a launch runs its blocks one at a time (blockIdx order, or reversed), on the calling thread;
//   - the threads of a block are cooperative fibers (64 KiB stacks with a guard page; switched by
//     6-register save/restore on x86-64, makecontext/swapcontext elsewhere); a thread runs until its
//     next __syncthreads() or its end, then the next thread runs. __syncthreads() is a real barrier:
//     a round ends when every live thread has reached it; threads arriving at different barriers
//     (count or source line) or some threads exiting while others wait is a "divergent barrier"
//     launch failure (UB on a GPU: a hang or garbage), never hidden;
//   - __shared__ variables are static storage (one block at a time): a read before any write sees the
//     previous block's values (undefined on a GPU), which reversed block order changes; dynamic shared
//     memory (ONBOARD_DYNAMIC_SMEM) is a per-launch buffer filled with 0xFF bytes (NaN) before every block;
//   - launch limits are checked as on sm_80/sm_90: <= 1024 threads per block, grid y/z <= 65535,
//     dynamic shared memory <= 48 KiB unless cudaFuncSetAttribute raised it, <= the arch's maximum;
//   - reverse scheduling (onboard_cuda_emulation_configure(1)) runs threads and blocks in the opposite
//     order: a kernel whose result depends on the order of threads between barriers (a shared-memory
//     race) or of blocks changes its output bits, which a check compares.
// One launch at a time per process (the runtime's state is global). Extra C entry points of an
// emulated library: onboard_cuda_emulation_message() (last failure, "" when none),
// onboard_cuda_emulation_configure(reverse), onboard_cuda_emulation_stats(int64_t[4]: launches,
// blocks, thread starts, barrier rounds).
//
// This header is the runtime's one source. The emulation build prefixes it, as text, to the kernel's
// .cu (validators/cuda_emulation_loader.cpp; embedded at build time: cmake/embed_files.cmake), and
// the build compiles it with a small kernel (validators/cuda_emulation_runtime_check.cpp). It
// redefines CUDA's keywords (__global__, __shared__, threadIdx, ...): include it only where
// ONBOARD_CUDA_EMULATION is defined, never from the library's own sources.
#ifndef ONBOARD_CUDA_EMULATION
#error "validators/cuda_emulation_runtime.h is the CPU emulation runtime: define ONBOARD_CUDA_EMULATION"
#endif
#ifndef ONBOARD_VALIDATORS_CUDA_EMULATION_RUNTIME_H_
#define ONBOARD_VALIDATORS_CUDA_EMULATION_RUNTIME_H_
// ---- onboard CUDA emulation runtime (CPU emulation of the CUDA programming model, not a GPU) ----
#include <sys/mman.h>
#include <ucontext.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#if defined(__x86_64__) && !defined(ONBOARD_EMU_UCONTEXT)
#define ONBOARD_EMU_FAST_SWITCH 1
#else
#define ONBOARD_EMU_FAST_SWITCH 0
#endif
#ifndef ONBOARD_EMU_ARCH
#define ONBOARD_EMU_ARCH 90
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() ::onboard_emu::SyncThreads(__LINE__)

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef struct onboard_emu_stream* cudaStream_t;
typedef struct onboard_emu_event* cudaEvent_t;
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};

namespace onboard_emu {

constexpr size_t kStackBytes = 64 * 1024;
constexpr size_t kDefaultSmemBytes = 48 * 1024;
constexpr size_t kMaxSmemBytes = ONBOARD_EMU_ARCH >= 90 ? 227 * 1024 : 163 * 1024;

struct Fiber {
#if ONBOARD_EMU_FAST_SWITCH
  void* sp = nullptr;  // saved stack pointer while switched out
#else
  ucontext_t ctx;
#endif
  uint3 idx;
  int64_t barriers = 0;  // __syncthreads() reached so far
  int line = 0;          // source line of the barrier it waits at
  bool done = false;
};

inline uint3 g_thread_idx, g_block_idx;
inline dim3 g_block_dim, g_grid_dim;
inline unsigned char* g_dyn_smem = nullptr;
inline Fiber* g_cur = nullptr;
inline void (*g_invoke)(void*) = nullptr;
inline void* g_body = nullptr;
inline cudaError_t g_last_error = cudaSuccess;
inline std::string g_message;
inline bool g_reverse = false;
inline int64_t g_stats[4] = {0, 0, 0, 0};  // launches, blocks, thread starts, barrier rounds
inline std::map<const void*, size_t> g_smem_limit;

inline cudaError_t Fail(cudaError_t e, const std::string& why) {
  g_last_error = e;
  g_message = why;
  return e;
}

// Fiber switching. x86-64: a 6-register switch (callee-saved registers + stack pointer), because
// swapcontext makes a system call (the signal mask) per switch; elsewhere, or with
// -DONBOARD_EMU_UCONTEXT: makecontext/swapcontext. Both give the same scheduling.
#if ONBOARD_EMU_FAST_SWITCH
extern "C" void onboard_emu_switch(void** save_sp, void* to_sp);
asm(".text\n.hidden onboard_emu_switch\n.globl onboard_emu_switch\n.type onboard_emu_switch,@function\n"
    "onboard_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size onboard_emu_switch, .-onboard_emu_switch\n");
inline void* g_sched_sp = nullptr;
[[noreturn]] inline void FiberMain() {
  g_invoke(g_body);
  g_cur->done = true;
  onboard_emu_switch(&g_cur->sp, g_sched_sp);
  __builtin_unreachable();
}
inline void StartFiber(Fiber& f, unsigned char* stack, size_t bytes) {
  void** sp = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15));
  *--sp = nullptr;                              // FiberMain's return address (never used)
  *--sp = reinterpret_cast<void*>(&FiberMain);  // taken by `ret`: entry with rsp % 16 == 8
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  f.sp = sp;
}
inline void Resume(Fiber& f) { onboard_emu_switch(&g_sched_sp, f.sp); }
inline void Yield(Fiber& f) { onboard_emu_switch(&f.sp, g_sched_sp); }
#else
inline ucontext_t g_sched;
inline void FiberEntry() {
  g_invoke(g_body);
  g_cur->done = true;  // returning resumes g_sched (uc_link)
}
// A context captured once (getcontext costs a system call); makecontext sets stack and entry.
inline const ucontext_t* Template() {
  static ucontext_t t;
  static const bool ready = getcontext(&t) == 0;
  return ready ? &t : nullptr;
}
inline void StartFiber(Fiber& f, unsigned char* stack, size_t bytes) {
  f.ctx = *Template();
  f.ctx.uc_stack.ss_sp = stack;
  f.ctx.uc_stack.ss_size = bytes;
  f.ctx.uc_link = &g_sched;
  makecontext(&f.ctx, FiberEntry, 0);
}
inline void Resume(Fiber& f) { swapcontext(&g_sched, &f.ctx); }
inline void Yield(Fiber& f) { swapcontext(&f.ctx, &g_sched); }
#endif

inline void SyncThreads(int line) {
  Fiber* f = g_cur;
  ++f->barriers;
  f->line = line;
  Yield(*f);
}

// Fiber stacks for up to 1024 threads, each with a PROT_NONE guard page below it (reused).
inline unsigned char* Stacks(size_t n) {
  static unsigned char* base = nullptr;
  static size_t have = 0;
  const size_t page = 4096, slot = kStackBytes + page;
  if (n > have) {
    if (base != nullptr) munmap(base, have * slot);
    void* p = mmap(nullptr, n * slot, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    base = static_cast<unsigned char*>(p);
    have = n;
    for (size_t i = 0; i < n; ++i) mprotect(base + i * slot, page, PROT_NONE);
  }
  return base;
}

inline std::string Idx(const uint3& u) {
  return "(" + std::to_string(u.x) + "," + std::to_string(u.y) + "," + std::to_string(u.z) + ")";
}

// Runs one block: every thread a fiber, rounds between barriers. Returns false on a divergent barrier.
inline bool RunBlock(std::vector<Fiber>& fibers, const char* kernel) {
  const size_t n = fibers.size();
  unsigned char* stacks = Stacks(n);
  if (stacks == nullptr) return Fail(cudaErrorMemoryAllocation, "no memory for fiber stacks"), false;
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    f.barriers = 0;
    f.line = 0;
    f.done = false;
    StartFiber(f, stacks + i * (kStackBytes + 4096) + 4096, kStackBytes);
  }
  g_stats[2] += static_cast<int64_t>(n);
  while (true) {
    for (size_t k = 0; k < n; ++k) {
      Fiber& f = fibers[g_reverse ? n - 1 - k : k];
      if (f.done) continue;
      g_cur = &f;
      g_thread_idx = f.idx;
      Resume(f);
    }
    size_t done = 0;
    const Fiber* first_waiting = nullptr;
    for (const Fiber& f : fibers) {
      if (f.done) {
        ++done;
        continue;
      }
      if (first_waiting == nullptr) first_waiting = &f;
      if (f.barriers != first_waiting->barriers || f.line != first_waiting->line) {
        Fail(cudaErrorLaunchFailure,
             std::string(kernel) + ": divergent __syncthreads in block " + Idx(g_block_idx) + ": thread " +
                 Idx(first_waiting->idx) + " waits at barrier #" + std::to_string(first_waiting->barriers) +
                 " (line " + std::to_string(first_waiting->line) + "), thread " + Idx(f.idx) +
                 " at barrier #" + std::to_string(f.barriers) + " (line " + std::to_string(f.line) + ")");
        return false;
      }
    }
    if (done == n) return true;
    if (done > 0) {
      Fail(cudaErrorLaunchFailure, std::string(kernel) + ": divergent __syncthreads in block " +
                                       Idx(g_block_idx) + ": " + std::to_string(done) +
                                       " thread(s) exited while thread " + Idx(first_waiting->idx) +
                                       " waits at barrier #" + std::to_string(first_waiting->barriers) +
                                       " (line " + std::to_string(first_waiting->line) + ")");
      return false;
    }
    ++g_stats[3];
  }
}

template <typename... A>
const void* FuncKey(void (*fn)(A...)) {
  return reinterpret_cast<const void*>(fn);
}

// kernel<<<grid, block, smem>>>(args) under emulation: validate the configuration, run every block.
template <typename Body>
cudaError_t Launch(const void* key, const char* kernel, dim3 grid, dim3 block, size_t smem, Body body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    return Fail(cudaErrorInvalidConfiguration,
                std::string(kernel) + ": bad block " + Idx(uint3{block.x, block.y, block.z}));
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    return Fail(cudaErrorInvalidConfiguration,
                std::string(kernel) + ": bad grid " + Idx(uint3{grid.x, grid.y, grid.z}));
  }
  const auto lim = g_smem_limit.find(key);
  const size_t allowed = lim == g_smem_limit.end() ? kDefaultSmemBytes : lim->second;
  if (smem > allowed) {
    return Fail(cudaErrorInvalidValue, std::string(kernel) + ": " + std::to_string(smem) +
                                           " bytes of dynamic shared memory, " + std::to_string(allowed) +
                                           " allowed");
  }
  ++g_stats[0];
  std::vector<unsigned char> dyn(smem + 16);
  g_dyn_smem = dyn.data();
  g_block_dim = block;
  g_grid_dim = grid;
  g_body = &body;
  g_invoke = [](void* p) { (*static_cast<Body*>(p))(); };
  std::vector<Fiber> fibers(threads);
  for (unsigned z = 0, i = 0; z < block.z; ++z)
    for (unsigned y = 0; y < block.y; ++y)
      for (unsigned x = 0; x < block.x; ++x) fibers[i++].idx = uint3{x, y, z};
  const uint64_t nblocks = uint64_t(grid.x) * grid.y * grid.z;
  for (uint64_t k = 0; k < nblocks; ++k) {
    const uint64_t b = g_reverse ? nblocks - 1 - k : k;
    g_block_idx = uint3{unsigned(b % grid.x), unsigned(b / grid.x % grid.y), unsigned(b / grid.x / grid.y)};
    std::memset(dyn.data(), 0xFF, dyn.size());
    ++g_stats[1];
    if (!RunBlock(fibers, kernel)) return g_last_error;
  }
  return cudaSuccess;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

}  // namespace onboard_emu

using onboard_emu::max;
using onboard_emu::min;

#define threadIdx (static_cast<const uint3&>(::onboard_emu::g_thread_idx))
#define blockIdx (static_cast<const uint3&>(::onboard_emu::g_block_idx))
#define blockDim (static_cast<const dim3&>(::onboard_emu::g_block_dim))
#define gridDim (static_cast<const dim3&>(::onboard_emu::g_grid_dim))

// Fibers never interleave between barriers, so plain read-modify-write is atomic here.
template <typename T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}

inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }

// bf16 storage with round-to-nearest-even conversion (as cuda_bf16.h's __float2bfloat16).
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float(uint32_t(h.bits) << 16); }
inline __nv_bfloat16 __float2bfloat16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return __nv_bfloat16{uint16_t((u >> 16) | 0x40u)};  // quiet NaN
  return __nv_bfloat16{uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

inline cudaError_t cudaGetLastError() {
  const cudaError_t e = onboard_emu::g_last_error;
  onboard_emu::g_last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return onboard_emu::g_last_error; }
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : onboard_emu::g_message.c_str();
}
template <typename... A>
inline cudaError_t cudaFuncSetAttribute(void (*fn)(A...), cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      size_t(value) > onboard_emu::kMaxSmemBytes) {
    return onboard_emu::Fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                                        " bytes of dynamic shared memory exceed sm_" +
                                                        std::to_string(ONBOARD_EMU_ARCH) + "'s limit");
  }
  onboard_emu::g_smem_limit[onboard_emu::FuncKey(fn)] = size_t(value);
  return cudaSuccess;
}
// Host-side memory API for the harnesses (device memory is host memory here).
template <typename T>
inline cudaError_t cudaMalloc(T** p, size_t bytes) {
  *p = static_cast<T*>(std::malloc(bytes ? bytes : 1));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* d, int v, size_t n) {
  std::memset(d, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return onboard_emu::g_last_error; }
// Events read the host's steady clock (launches are synchronous here): not GPU timings.
struct onboard_emu_event {
  std::chrono::steady_clock::time_point at;
};
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new onboard_emu_event{};
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  e->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}

extern "C" const char* onboard_cuda_emulation_message(void) { return onboard_emu::g_message.c_str(); }
extern "C" void onboard_cuda_emulation_configure(int reverse) {
  onboard_emu::g_reverse = reverse != 0;
  onboard_emu::g_message.clear();
  onboard_emu::g_last_error = cudaSuccess;
}
extern "C" void onboard_cuda_emulation_stats(int64_t* out) {
  for (int i = 0; i < 4; ++i) out[i] = onboard_emu::g_stats[i];
}
// ---- end of the emulation runtime ----

#endif  // ONBOARD_VALIDATORS_CUDA_EMULATION_RUNTIME_H_
