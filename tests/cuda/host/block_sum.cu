// Test kernels for the host emulation itself: a shared-memory block sum, and the same
// sum with one barrier left out, which the thread-order check must catch.
#include "common.cuh"

template <bool kSync>
__device__ void block_sum(const float* in, float* out, rsmx_i64 n) {
  __shared__ float partial[256];
  const unsigned t = threadIdx.x;
  rsmx_i64 i = (rsmx_i64)blockIdx.x * blockDim.x + t;
  partial[t] = i < n ? in[i] : 0.0f;
  if (kSync) __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void block_sum_f32(const float* in, float* out, rsmx_i64 n) {
  block_sum<true>(in, out, n);
}

extern "C" __global__ void block_sum_racy_f32(const float* in, float* out, rsmx_i64 n) {
  block_sum<false>(in, out, n);
}
