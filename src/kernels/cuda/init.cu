// Kernels of the creation operators: fill with a value (`_zeros`, `_ones`, `_full`,
// `*_like`), `_arange` and `_eye`.
#include "common.cuh"

// out[i] = value.
template <typename T>
__device__ void fill(T* out, rsmx_i64 n, double value) {
  const T v = rsmx_num<T>::store((typename rsmx_num<T>::compute)value);
  RSMX_GRID_LOOP(i, n) { out[i] = v; }
}

// out[i] = start + (i / repeat) * step.
template <typename T>
__device__ void arange(T* out, rsmx_i64 n, double start, double step, rsmx_i64 repeat) {
  RSMX_GRID_LOOP(i, n) {
    double v = start + (double)(i / repeat) * step;
    out[i] = rsmx_num<T>::store((typename rsmx_num<T>::compute)v);
  }
}

// A rows x cols matrix with ones on diagonal k (above the main one for k > 0).
template <typename T>
__device__ void eye(T* out, rsmx_i64 rows, rsmx_i64 cols, rsmx_i64 k) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, rows * cols) {
    rsmx_i64 r = i / cols, c = i % cols;
    out[i] = rsmx_num<T>::store((C)(c - r == k ? 1 : 0));
  }
}

#define RSMX_FILL(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, double value) {   \
    kernel<T>(out, n, value);                                                         \
  }
#define RSMX_ARANGE(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, double start,     \
                                               double step, rsmx_i64 repeat) {        \
    kernel<T>(out, n, start, step, repeat);                                           \
  }
#define RSMX_EYE(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 rows, rsmx_i64 cols, \
                                               rsmx_i64 k) {                          \
    kernel<T>(out, rows, cols, k);                                                    \
  }

RSMX_DTYPE_ALL(RSMX_FILL, fill)
RSMX_DTYPE_ALL(RSMX_ARANGE, arange)
RSMX_DTYPE_ALL(RSMX_EYE, eye)
