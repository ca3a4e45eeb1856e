// Host emulation of the CUDA execution model, for testing rsmx's kernels without a GPU:
// the same .cu text is compiled by g++ with this header. Each CUDA thread of a block is a
// fiber (ucontext) on one OS thread; blocks run one after another. Between barriers the
// threads of a block run in a chosen order (forward, reverse or shuffled), so a missing
// __syncthreads shows up as results that depend on the order. Atomics are plain
// read-modify-writes (one OS thread runs everything).
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace rsmx_host {

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  dim3 idx;
  bool done = false;
};

struct Launch {
  dim3 grid, block, block_idx;
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = -1;
  void (*body)(void**) = nullptr;
  void** params = nullptr;
  std::vector<unsigned char> dynamic_shared;
};

inline Launch*& current_launch() {
  static thread_local Launch* launch = nullptr;
  return launch;
}

inline void fiber_entry() {
  Launch* l = current_launch();
  l->body(l->params);
  l->fibers[l->current].done = true;
  swapcontext(&l->fibers[l->current].ctx, &l->scheduler);
}

inline void barrier() {
  Launch* l = current_launch();
  swapcontext(&l->fibers[l->current].ctx, &l->scheduler);
}

// Calls `f` with its arguments read from `params`, as cuLaunchKernel passes them.
template <typename... A, std::size_t... I>
void call_with(void (*f)(A...), void** params, std::index_sequence<I...>) {
  f(*static_cast<std::remove_reference_t<A>*>(params[I])...);
}
template <typename... A>
void call_with(void (*f)(A...), void** params) {
  call_with(f, params, std::index_sequence_for<A...>{});
}

// Runs one block: every fiber from the start, in `order`, until all are done.
inline void run_block(Launch& l, const std::vector<int>& order) {
  const std::size_t stack_bytes = 64 * 1024;
  for (std::size_t i = 0; i < l.fibers.size(); i++) {
    Fiber& f = l.fibers[i];
    f.done = false;
    if (f.stack.empty()) f.stack.resize(stack_bytes);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
  }
  for (;;) {
    bool any_live = false;
    for (int i : order) {
      Fiber& f = l.fibers[i];
      if (f.done) continue;
      any_live = true;
      l.current = i;
      swapcontext(&l.scheduler, &f.ctx);
    }
    if (!any_live) return;
    // Every live fiber now waits at a barrier: release them all for the next round.
  }
}

}  // namespace rsmx_host

#define threadIdx (rsmx_host::current_launch()->fibers[rsmx_host::current_launch()->current].idx)
#define blockIdx (rsmx_host::current_launch()->block_idx)
#define blockDim (rsmx_host::current_launch()->block)
#define gridDim (rsmx_host::current_launch()->grid)

#define __global__ __attribute__((used))
#define __device__
#define __host__
#define __forceinline__ inline
// Blocks run one at a time, so one static copy serves as each block's shared memory.
#define __shared__ static
#define RSMX_EXTERN_SHARED(T, name) \
  T* name = reinterpret_cast<T*>(rsmx_host::current_launch()->dynamic_shared.data())

inline void __syncthreads() { rsmx_host::barrier(); }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
template <typename T>
inline T atomicAdd(T* p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}

// The launcher the generated kernel table calls.
namespace rsmx_host {
inline int launch(void (*body)(void**), dim3 grid, dim3 block, std::size_t smem, void** params,
                  int order, unsigned seed) {
  Launch l;
  l.grid = grid;
  l.block = block;
  l.body = body;
  l.params = params;
  l.dynamic_shared.assign(smem, 0xCD);
  unsigned n = block.x * block.y * block.z;
  l.fibers.resize(n);
  for (unsigned t = 0; t < n; t++) {
    l.fibers[t].idx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
  }
  std::vector<int> seq(n);
  for (unsigned t = 0; t < n; t++) seq[t] = (int)t;
  if (order == 1) std::reverse(seq.begin(), seq.end());
  std::mt19937 rng(seed);
  current_launch() = &l;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        l.block_idx = dim3(bx, by, bz);
        if (order == 2) std::shuffle(seq.begin(), seq.end(), rng);
        run_block(l, seq);
      }
  current_launch() = nullptr;
  return 0;
}
}  // namespace rsmx_host
