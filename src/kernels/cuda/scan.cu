// Running sums (`cumsum` and its backward) and histograms.
#include "common.cuh"

// a + b in T's own arithmetic: integers wrap (the wide ones added as unsigned, so signed
// overflow is defined), float16 rounds each sum to float16.
template <typename T>
__device__ __forceinline__ T scan_add(T a, T b) {
  return rsmx_num<T>::store(rsmx_num<T>::load(a) + rsmx_num<T>::load(b));
}
template <>
__device__ __forceinline__ rsmx_i32 scan_add(rsmx_i32 a, rsmx_i32 b) {
  return (rsmx_i32)((unsigned)a + (unsigned)b);
}
template <>
__device__ __forceinline__ rsmx_i64 scan_add(rsmx_i64 a, rsmx_i64 b) {
  return (rsmx_i64)((unsigned long long)a + (unsigned long long)b);
}
// Running sums of `lanes` lanes of `len` elements `stride` apart, in place: lane l starts
// at (l / stride) * len * stride + l % stride. `reverse` sums from each lane's end.
template <typename T>
__device__ void cumsum(T* data, rsmx_i64 lanes, rsmx_i64 len, rsmx_i64 stride, int reverse) {
  RSMX_GRID_LOOP(l, lanes) {
    T* p = data + (l / stride) * len * stride + l % stride;
    if (reverse) {
      for (rsmx_i64 j = len - 2; j >= 0; --j) p[j * stride] = scan_add(p[(j + 1) * stride], p[j * stride]);
    } else {
      for (rsmx_i64 j = 1; j < len; ++j) p[j * stride] = scan_add(p[(j - 1) * stride], p[j * stride]);
    }
  }
}

// `v` in T, rounded once.
template <typename T>
__device__ __forceinline__ T edge_from(double v) {
  return (T)v;
}
template <>
__device__ __forceinline__ rsmx_half edge_from(double v) {
  return rsmx_double_to_half(v);
}

// The `bins + 1` edges of a histogram, from the given edges `given` or (null) spread
// evenly over [lo, hi]; the counts are zeroed.
template <typename T>
__device__ void hist_edges(T* edges, rsmx_i64* counts, const T* given, rsmx_i64 bins, double lo,
                           double hi) {
  RSMX_GRID_LOOP(i, bins + 1) {
    if (given) {
      edges[i] = given[i];
    } else {
      double v = (hi * (double)i + (double)(bins - i) * lo) / (double)bins;
      edges[i] = edge_from<T>(v);
    }
    if (i < bins) counts[i] = 0;
  }
}

// Counts each element of `data` in its bin among `edges` (the last bin includes its right
// edge; outside values and NaN are left out). With `uniform`, the first guess comes from
// [lo, hi] and moves by one against the rounded edges; otherwise a binary search.
template <typename T>
__device__ void hist_count(unsigned long long* counts, const T* data, const T* edges, rsmx_i64 n,
                           rsmx_i64 bins, int uniform, double lo, double hi) {
  RSMX_GRID_LOOP(i, n) {
    double x = (double)rsmx_num<T>::load(data[i]);
    double e0 = (double)rsmx_num<T>::load(edges[0]);
    double en = (double)rsmx_num<T>::load(edges[bins]);
    rsmx_i64 t = -1;
    if (uniform) {
      if (x >= lo && x <= hi) {
        t = (rsmx_i64)((x - lo) * (double)bins / (hi - lo));
        if (t > bins - 1) t = bins - 1;
        if (t >= 0 && x < (double)rsmx_num<T>::load(edges[t])) t -= 1;
        if (t + 1 < bins && x >= (double)rsmx_num<T>::load(edges[t + 1])) t += 1;
      }
    } else if (x >= e0 && x <= en) {
      rsmx_i64 a = 0, b = bins + 1;  // the first edge above x lies in [a, b]
      while (a < b) {
        rsmx_i64 m = (a + b) / 2;
        if ((double)rsmx_num<T>::load(edges[m]) <= x) a = m + 1; else b = m;
      }
      t = a - 1 < bins - 1 ? a - 1 : bins - 1;
    }
    if (t >= 0) atomicAdd(counts + t, 1ull);
  }
}

#define RSMX_CUMSUM(kernel, T, suffix)                                                    \
  extern "C" __global__ void kernel##_##suffix(T* data, rsmx_i64 lanes, rsmx_i64 len,     \
                                               rsmx_i64 stride, int reverse) {           \
    kernel<T>(data, lanes, len, stride, reverse);                                         \
  }
#define RSMX_HIST_EDGES(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* edges, rsmx_i64* counts, const T* given, \
                                               rsmx_i64 bins, double lo, double hi) {     \
    kernel<T>(edges, counts, given, bins, lo, hi);                                        \
  }
#define RSMX_HIST_COUNT(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(unsigned long long* counts, const T* data, \
                                               const T* edges, rsmx_i64 n, rsmx_i64 bins, \
                                               int uniform, double lo, double hi) {       \
    kernel<T>(counts, data, edges, n, bins, uniform, lo, hi);                             \
  }

RSMX_DTYPE_NUM(RSMX_CUMSUM, cumsum)
RSMX_DTYPE_NUM(RSMX_HIST_EDGES, hist_edges)
RSMX_DTYPE_NUM(RSMX_HIST_COUNT, hist_count)
