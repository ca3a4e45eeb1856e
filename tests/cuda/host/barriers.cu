// Test kernels for the host emulation's handling of barriers and thread indices: a kernel
// that reaches a barrier only when asked, one whose threads disagree about a barrier, and
// one that writes each thread's 3-D indices.
#include "common.cuh"

extern "C" __global__ void maybe_sync(int* out, int sync) {
  const unsigned t = threadIdx.x;
  if (sync) __syncthreads();
  out[blockIdx.x * blockDim.x + t] = (int)t;
}

extern "C" __global__ void divergent(int* out) {
  if (threadIdx.x < 4) __syncthreads();
  out[threadIdx.x] = 1;
}

// out[linear thread id] = the thread's (x, y, z) and its block's, packed one byte each.
extern "C" __global__ void where(rsmx_i64* out) {
  const rsmx_i64 block = ((rsmx_i64)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const rsmx_i64 t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  out[block * blockDim.x * blockDim.y * blockDim.z + t] =
      ((rsmx_i64)threadIdx.x << 40) | ((rsmx_i64)threadIdx.y << 32) |
      ((rsmx_i64)threadIdx.z << 24) | (blockIdx.x << 16) | (blockIdx.y << 8) | blockIdx.z;
}
