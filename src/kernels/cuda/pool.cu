// Kernels of `Pooling` (max, average, sum and Lp over 1-D to 3-D windows) and its
// backward. The forward computes one output per thread; the backward gathers: each input
// element sums the gradients of the outputs whose window covers it, in output order, so
// no atomics are needed. Max pooling routes an output's gradient to one element of its
// window, named by the forward's index output or found again by a first pass. Float16
// rounds after every operation, as the CPU kernels compute in float16.
#include "common.cuh"

enum rsmx_pool { RSMX_POOL_MAX, RSMX_POOL_AVG, RSMX_POOL_SUM, RSMX_POOL_LP };

// The sizes of one pooling (`struct Plan` of the operator) and what it computes.
struct rsmx_pool_geom {
  int in[3], out[3], k[3], s[3], p[3];
  int pool, include_pad, p_value;
};

template <typename T> struct pool_limits;
template <> struct pool_limits<float> {
  __device__ __forceinline__ static float lowest() { return -3.40282346638528859812e+38f; }
};
template <> struct pool_limits<double> {
  __device__ __forceinline__ static double lowest() { return -1.79769313486231570815e+308; }
};
template <> struct pool_limits<rsmx_half> {
  __device__ __forceinline__ static float lowest() { return -65504.0f; }
};

__device__ __forceinline__ float pool_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double pool_sqrt(double v) { return sqrt(v); }
__device__ __forceinline__ float pool_cbrt(float v) { return cbrtf(v); }
__device__ __forceinline__ double pool_cbrt(double v) { return cbrt(v); }

// Arithmetic in T's compute type, rounded to T after each operation.
template <typename T> struct pool_math {
  typedef typename rsmx_num<T>::compute C;
  __device__ __forceinline__ static C r(C v) { return rsmx_num<T>::load(rsmx_num<T>::store(v)); }
  __device__ __forceinline__ static C pow(C x, int p) {
    if (p == 1) return x;
    C x2 = r(x * x);
    return p == 2 ? x2 : r(x2 * x);
  }
  __device__ __forceinline__ static C root(C x, int p) {
    if (p == 1) return x;
    return r(p == 2 ? pool_sqrt(x) : pool_cbrt(x));
  }
};

// The window of output position `o` along dimension `i`, as MXNet bounds it: [lo, hi)
// clipped to the input, and its extent counting padding (the end capped at the padded
// extent).
__device__ __forceinline__ void pool_window(const rsmx_pool_geom& g, int i, int o, int* lo,
                                            int* hi, int* padded) {
  const int start = o * g.s[i] - g.p[i];
  int end = start + g.k[i];
  if (end > g.in[i] + g.p[i]) end = g.in[i] + g.p[i];
  *padded = end - start > 0 ? end - start : 0;
  const int s = start > 0 ? start : 0;
  int e = end > 0 ? end : 0;
  if (e > g.in[i]) e = g.in[i];
  *lo = s;
  *hi = e > s ? e : s;
}

// The window of flat output position `j` of a plane: bounds per dimension and the
// divisor of an average.
struct pool_win {
  int lo[3], hi[3];
  int size;
};

__device__ __forceinline__ pool_win pool_window_of(const rsmx_pool_geom& g, int j,
                                                   int include_pad) {
  const int o[3] = {j / g.out[2] / g.out[1], (j / g.out[2]) % g.out[1], j % g.out[2]};
  pool_win w;
  int padded = 1, inner = 1;
  for (int i = 0; i < 3; i++) {
    int pd;
    pool_window(g, i, o[i], &w.lo[i], &w.hi[i], &pd);
    padded *= pd;
    inner *= w.hi[i] - w.lo[i];
  }
  w.size = include_pad ? padded : inner;
  return w;
}

// y[i] (=|+=) the pooled window of output i, over `n` outputs of consecutive planes; for
// max pooling with `at`, also where the maximum came from (plane offset of the first
// element above all before it, -1 for a window wholly in the padding).
template <typename T>
__device__ void pool(T* y, T* at, const T* x, rsmx_i64 n, rsmx_pool_geom g, int add) {
  typedef pool_math<T> M;
  typedef typename M::C C;
  const int out_plane = g.out[0] * g.out[1] * g.out[2];
  const rsmx_i64 in_plane = (rsmx_i64)g.in[0] * g.in[1] * g.in[2];
  RSMX_GRID_LOOP(i, n) {
    const int j = (int)(i % out_plane);
    const T* src = x + (i / out_plane) * in_plane;
    const pool_win w = pool_window_of(g, j, g.pool == RSMX_POOL_AVG ? g.include_pad : 1);
    C v = (C)0;
    int best = -1;
    if (g.pool == RSMX_POOL_MAX) v = pool_limits<T>::lowest();
    for (int a = w.lo[0]; a < w.hi[0]; a++) {
      for (int b = w.lo[1]; b < w.hi[1]; b++) {
        const int row = (a * g.in[1] + b) * g.in[2];
        for (int c = w.lo[2]; c < w.hi[2]; c++) {
          const C e = rsmx_num<T>::load(src[row + c]);
          if (g.pool == RSMX_POOL_MAX) {
            if (best < 0 || e > v) {
              if (e > v) v = e;
              best = row + c;
            }
          } else if (g.pool == RSMX_POOL_LP) {
            v = M::r(v + M::pow(e, g.p_value));
          } else {
            v = M::r(v + e);
          }
        }
      }
    }
    if (g.pool == RSMX_POOL_AVG) {
      v = w.size == 0 ? (C)0 : M::r(v / M::r((C)w.size));
    } else if (g.pool == RSMX_POOL_LP) {
      v = M::root(v, g.p_value);
    }
    y[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(y[i]) + v : v);
    if (at != 0) at[i] = rsmx_num<T>::store((C)best);
  }
}

// Max pooling's routes, one per output: the plane offset of the input element that takes
// its gradient, or -1. From the index output `at` when given (entries that name no
// element of the plane route nowhere), else found again: the first element equal to the
// maximum, else the last one looked at.
template <typename T>
__device__ void pool_route(rsmx_i64* route, const T* at, const T* x, const T* y, rsmx_i64 n,
                           rsmx_pool_geom g) {
  typedef typename rsmx_num<T>::compute C;
  const int out_plane = g.out[0] * g.out[1] * g.out[2];
  const rsmx_i64 in_plane = (rsmx_i64)g.in[0] * g.in[1] * g.in[2];
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 to = -1;
    if (at != 0) {
      const double v = (double)rsmx_num<T>::load(at[i]);
      if (v > -1.0 && v < (double)in_plane) to = (rsmx_i64)v;
    } else {
      const T* src = x + (i / out_plane) * in_plane;
      const C m = rsmx_num<T>::load(y[i]);
      const pool_win w = pool_window_of(g, (int)(i % out_plane), 1);
      bool found = false;
      for (int a = w.lo[0]; a < w.hi[0] && !found; a++) {
        for (int b = w.lo[1]; b < w.hi[1] && !found; b++) {
          const int row = (a * g.in[1] + b) * g.in[2];
          for (int c = w.lo[2]; c < w.hi[2] && !found; c++) {
            to = row + c;
            found = rsmx_num<T>::load(src[row + c]) == m;
          }
        }
      }
    }
    route[i] = to;
  }
}

// The output positions along dimension `i` whose window covers input coordinate `z`.
__device__ __forceinline__ void pool_covering(const rsmx_pool_geom& g, int i, int z, int* lo,
                                              int* hi) {
  const int after = z + g.p[i] - g.k[i];  // window starts must exceed this
  *lo = after < 0 ? 0 : after / g.s[i] + 1;
  int last = (z + g.p[i]) / g.s[i] + 1;
  *hi = last < g.out[i] ? last : g.out[i];
}

// dx[i] (=|+=) the gradient of input element i: the sum, in output order, of what each
// output whose window covers it sends it. `route` serves max pooling.
template <typename T>
__device__ void pool_backward(T* dx, const T* dy, const T* x, const T* y, const rsmx_i64* route,
                              rsmx_i64 n, rsmx_pool_geom g, int add) {
  typedef pool_math<T> M;
  typedef typename M::C C;
  const int out_plane = g.out[0] * g.out[1] * g.out[2];
  const int in_plane = g.in[0] * g.in[1] * g.in[2];
  RSMX_GRID_LOOP(i, n) {
    const int z = (int)(i % in_plane);
    const rsmx_i64 base = (i / in_plane) * out_plane;
    const int zc[3] = {z / g.in[2] / g.in[1], (z / g.in[2]) % g.in[1], z % g.in[2]};
    int lo[3], hi[3];
    for (int d = 0; d < 3; d++) pool_covering(g, d, zc[d], &lo[d], &hi[d]);
    C acc = add ? rsmx_num<T>::load(dx[i]) : (C)0;
    C xv = (C)0;
    if (g.pool == RSMX_POOL_LP) xv = rsmx_num<T>::load(x[i]);
    for (int a = lo[0]; a < hi[0]; a++) {
      for (int b = lo[1]; b < hi[1]; b++) {
        for (int c = lo[2]; c < hi[2]; c++) {
          const int j = (a * g.out[1] + b) * g.out[2] + c;
          const C gv = rsmx_num<T>::load(dy[base + j]);
          if (g.pool == RSMX_POOL_MAX) {
            if (route[base + j] == z) acc = M::r(acc + gv);
          } else if (g.pool == RSMX_POOL_LP) {
            C v = gv;
            if (g.p_value != 1) {
              const C q = M::r(xv / rsmx_num<T>::load(y[base + j]));
              v = M::r(gv * M::pow(q, g.p_value - 1));
            }
            acc = M::r(acc + v);
          } else if (g.pool == RSMX_POOL_AVG) {
            const pool_win w = pool_window_of(g, j, g.include_pad);
            if (w.size != 0) acc = M::r(acc + M::r(gv / M::r((C)w.size)));
          } else {
            acc = M::r(acc + gv);
          }
        }
      }
    }
    dx[i] = rsmx_num<T>::store(acc);
  }
}

#define RSMX_POOL(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* y, T* at, const T* x, rsmx_i64 n,      \
                                               rsmx_pool_geom g, int add) {              \
    kernel<T>(y, at, x, n, g, add);                                                      \
  }
#define RSMX_POOL_ROUTE(kernel, T, suffix)                                               \
  extern "C" __global__ void kernel##_##suffix(rsmx_i64* route, const T* at, const T* x, \
                                               const T* y, rsmx_i64 n, rsmx_pool_geom g) { \
    kernel<T>(route, at, x, y, n, g);                                                    \
  }
#define RSMX_POOL_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* dy, const T* x, const T* y, \
                                               const rsmx_i64* route, rsmx_i64 n,        \
                                               rsmx_pool_geom g, int add) {              \
    kernel<T>(dx, dy, x, y, route, n, g, add);                                           \
  }

RSMX_DTYPE_FLOAT(RSMX_POOL, pool)
RSMX_DTYPE_FLOAT(RSMX_POOL_ROUTE, pool_route)
RSMX_DTYPE_FLOAT(RSMX_POOL_BACKWARD, pool_backward)
