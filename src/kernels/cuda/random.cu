// Random draws on the device from a counter-based generator: element i of a launch takes
// the SplitMix64 hash of (key, i), so the result depends only on the key the host draws
// from the device's generator for the launch, never on how threads are scheduled.
#include "common.cuh"

typedef unsigned long long rsmx_rand_u64;

__device__ __forceinline__ rsmx_rand_u64 rsmx_splitmix(rsmx_rand_u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) from draw `d` of element `i`.
__device__ __forceinline__ double rsmx_uniform01(rsmx_rand_u64 key, rsmx_i64 i, int d) {
  rsmx_rand_u64 h = rsmx_splitmix(key ^ rsmx_splitmix((rsmx_rand_u64)i * 2ull + (rsmx_rand_u64)d));
  return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

template <typename T>
__device__ void random_uniform(T* out, rsmx_i64 n, rsmx_rand_u64 key, double low, double high,
                               int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C v = (C)(low + (high - low) * rsmx_uniform01(key, i, 0));
    out[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[i]) + v : v);
  }
}

// Box-Muller: the first uniform is moved to (0, 1] so its logarithm is finite.
template <typename T>
__device__ void random_normal(T* out, rsmx_i64 n, rsmx_rand_u64 key, double loc, double scale,
                              int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    double u1 = 1.0 - rsmx_uniform01(key, i, 0), u2 = rsmx_uniform01(key, i, 1);
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    C v = (C)(loc + scale * z);
    out[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[i]) + v : v);
  }
}

#define RSMX_RANDOM(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, rsmx_rand_u64 key,      \
                                               double a, double b, int add) {              \
    kernel<T>(out, n, key, a, b, add);                                                     \
  }
RSMX_DTYPE_FLOAT(RSMX_RANDOM, random_uniform)
RSMX_DTYPE_FLOAT(RSMX_RANDOM, random_normal)
