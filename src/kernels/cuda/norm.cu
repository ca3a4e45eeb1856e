// Kernels of `BatchNorm` and its backward over data seen as (outer, channels, inner).
//
// Per-channel statistics are sums in double in two steps: each channel is cut into
// `segments` equal parts, one block per part (blocks loop when the grid is smaller), each
// thread folding every blockDim.x-th element in order, then a fixed tree in shared
// memory; `bn_combine` then adds a channel's parts in order. No atomics: results depend
// only on the block size and the number of segments.
// Per-channel coefficients are computed in double and rounded to the data type once, as
// the CPU kernel does; the element-wise passes then run in the data type. blockDim.x must
// be a power of two of at most RSMX_NORM_THREADS.
#include "common.cuh"

#define RSMX_NORM_THREADS 256

template <typename T> __device__ __forceinline__ T bn_round(double v) { return (T)v; }
template <> __device__ __forceinline__ rsmx_half bn_round<rsmx_half>(double v) {
  return rsmx_double_to_half(v);
}

template <typename T> __device__ __forceinline__ double bn_wide(T v) {
  return (double)rsmx_num<T>::load(v);
}

// Stores `v` at out[i] as the request says: 0 nothing, 1 write, 2 add (in the data type).
template <typename T>
__device__ __forceinline__ void bn_store(T* out, rsmx_i64 i, double v, int req) {
  if (req == 1) {
    out[i] = bn_round<T>(v);
  } else if (req == 2) {
    out[i] = rsmx_num<T>::store(rsmx_num<T>::load(out[i]) + rsmx_num<T>::load(bn_round<T>(v)));
  }
}

// The block's sum of each thread's `v`; every thread gets it.
__device__ __forceinline__ double bn_block_sum(double v, double* share) {
  const unsigned t = threadIdx.x;
  share[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) share[t] += share[t + s];
    __syncthreads();
  }
  double r = share[0];
  __syncthreads();
  return r;
}

// The element `e` of channel `c` (e = o * inner + k).
__device__ __forceinline__ rsmx_i64 bn_at(rsmx_i64 e, rsmx_i64 c, rsmx_i64 channels,
                                          rsmx_i64 inner) {
  return ((e / inner) * channels + c) * inner + e % inner;
}

// The element range [lo, hi) of segment `seg` of `segments` equal parts of `per`.
__device__ __forceinline__ void bn_segment(rsmx_i64 seg, rsmx_i64 segments, rsmx_i64 per,
                                           rsmx_i64* lo, rsmx_i64* hi) {
  const rsmx_i64 len = (per + segments - 1) / segments;
  *lo = seg * len < per ? seg * len : per;
  *hi = *lo + len < per ? *lo + len : per;
}

// part[c * segments + s] = Σ x (or Σ (x - center[c])² when `center` is given) over
// segment s of channel c. One block per (channel, segment).
template <typename T>
__device__ void bn_stats_part(double* part, const T* x, const double* center, rsmx_i64 outer,
                              rsmx_i64 channels, rsmx_i64 inner, rsmx_i64 segments) {
  __shared__ double share[RSMX_NORM_THREADS];
  const rsmx_i64 per = outer * inner;
  for (rsmx_i64 p = blockIdx.x; p < channels * segments; p += gridDim.x) {
    const rsmx_i64 c = p / segments;
    rsmx_i64 lo, hi;
    bn_segment(p - c * segments, segments, per, &lo, &hi);
    const double mu = center ? center[c] : 0.0;
    double acc = 0.0;
    for (rsmx_i64 e = lo + threadIdx.x; e < hi; e += blockDim.x) {
      double v = bn_wide(x[bn_at(e, c, channels, inner)]);
      acc += center ? (v - mu) * (v - mu) : v;
    }
    acc = bn_block_sum(acc, share);
    if (threadIdx.x == 0) part[p] = acc;
  }
}

// out[w * channels + c] = (Σ over s of part[(c * segments + s) * width + w]) / divisor,
// the segments added in order.
extern "C" __global__ void bn_combine(double* out, const double* part, rsmx_i64 channels,
                                      rsmx_i64 segments, int width, double divisor) {
  RSMX_GRID_LOOP(c, channels) {
    for (int w = 0; w < width; w++) {
      double acc = 0.0;
      for (rsmx_i64 s = 0; s < segments; s++) acc += part[(c * segments + s) * width + w];
      out[w * channels + c] = acc / divisor;
    }
  }
}

// Per channel: coef = (scale, shift) with y = x * scale + shift; the saved mean and
// inverse standard deviation; with batch statistics, the moving statistics updated.
template <typename T>
__device__ void bn_coef(T* coef, T* out_mean, T* out_invstd, T* moving_mean, T* moving_var,
                        const double* stats, const T* gamma, const T* beta,
                        rsmx_i64 channels, double eps, double momentum, int fix_gamma,
                        int batch, int req_mean, int req_invstd) {
  RSMX_GRID_LOOP(c, channels) {
    double mean, var;
    if (batch) {
      mean = stats[c];
      var = stats[channels + c];
    } else {
      mean = bn_wide(moving_mean[c]);
      var = bn_wide(moving_var[c]);
    }
    const double invstd = 1.0 / sqrt(var + eps);
    const double g = fix_gamma ? 1.0 : bn_wide(gamma[c]);
    const double s = g * invstd;
    coef[c] = bn_round<T>(s);
    coef[channels + c] = bn_round<T>(bn_wide(beta[c]) - mean * s);
    bn_store(out_mean, c, mean, req_mean);
    bn_store(out_invstd, c, invstd, req_invstd);
    if (batch) {
      const double keep = 1.0 - momentum;
      moving_mean[c] = bn_round<T>(bn_wide(moving_mean[c]) * momentum + mean * keep);
      moving_var[c] = bn_round<T>(bn_wide(moving_var[c]) * momentum + var * keep);
    }
  }
}

// y = x * scale[c] + shift[c] over n elements.
template <typename T>
__device__ void bn_apply(T* y, const T* x, const T* coef, rsmx_i64 n, rsmx_i64 channels,
                         rsmx_i64 inner, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 c = (i / inner) % channels;
    C s = rsmx_num<T>::load(coef[c]), h = rsmx_num<T>::load(coef[channels + c]);
    C v = rsmx_num<T>::load(x[i]) * s + h;
    y[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(y[i]) + v : v);
  }
}

// part[2 (c * segments + s)] = Σ dy and part[... + 1] = Σ dy * (x - mean) * invstd over
// segment s of channel c. One block per (channel, segment).
template <typename T>
__device__ void bn_backward_part(double* part, const T* dy, const T* x, const T* mean,
                                 const T* invstd, rsmx_i64 outer, rsmx_i64 channels,
                                 rsmx_i64 inner, rsmx_i64 segments) {
  __shared__ double share[RSMX_NORM_THREADS];
  const rsmx_i64 per = outer * inner;
  for (rsmx_i64 p = blockIdx.x; p < channels * segments; p += gridDim.x) {
    const rsmx_i64 c = p / segments;
    rsmx_i64 lo, hi;
    bn_segment(p - c * segments, segments, per, &lo, &hi);
    const double mu = bn_wide(mean[c]), s = bn_wide(invstd[c]);
    double a = 0.0, b = 0.0;
    for (rsmx_i64 e = lo + threadIdx.x; e < hi; e += blockDim.x) {
      rsmx_i64 j = bn_at(e, c, channels, inner);
      double g = bn_wide(dy[j]);
      a += g;
      b += g * (bn_wide(x[j]) - mu) * s;
    }
    a = bn_block_sum(a, share);
    b = bn_block_sum(b, share);
    if (threadIdx.x == 0) {
      part[2 * p] = a;
      part[2 * p + 1] = b;
    }
  }
}

// Per channel: coef = (k1, k2, k0, mean) with dx = k1 * dy + k2 * (x - mean) + k0, and
// the gradients of gamma and beta.
template <typename T>
__device__ void bn_backward_coef(T* coef, T* dgamma, T* dbeta, const double* sums,
                                 const T* gamma, const T* mean, const T* invstd,
                                 rsmx_i64 channels, double count, int fix_gamma, int batch,
                                 int req_gamma, int req_beta) {
  RSMX_GRID_LOOP(c, channels) {
    const double a = sums[c], b = sums[channels + c], s = bn_wide(invstd[c]);
    const double g = fix_gamma ? 1.0 : bn_wide(gamma[c]);
    const double k1 = g * s;
    const double k2 = batch ? -k1 * s * b / count : 0.0;
    const double k0 = batch ? -k1 * a / count : 0.0;
    coef[c] = bn_round<T>(k1);
    coef[channels + c] = bn_round<T>(k2);
    coef[2 * channels + c] = bn_round<T>(k0);
    coef[3 * channels + c] = mean[c];
    bn_store(dgamma, c, fix_gamma ? 0.0 : b, req_gamma);
    bn_store(dbeta, c, a, req_beta);
  }
}

template <typename T>
__device__ void bn_backward_apply(T* dx, const T* dy, const T* x, const T* coef, rsmx_i64 n,
                                  rsmx_i64 channels, rsmx_i64 inner, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 c = (i / inner) % channels;
    C k1 = rsmx_num<T>::load(coef[c]), k2 = rsmx_num<T>::load(coef[channels + c]);
    C k0 = rsmx_num<T>::load(coef[2 * channels + c]);
    C mu = rsmx_num<T>::load(coef[3 * channels + c]);
    C v = k1 * rsmx_num<T>::load(dy[i]) + k2 * (rsmx_num<T>::load(x[i]) - mu) + k0;
    dx[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(dx[i]) + v : v);
  }
}

#define RSMX_BN_STATS_PART(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(double* part, const T* x,                  \
                                               const double* center, rsmx_i64 outer,      \
                                               rsmx_i64 channels, rsmx_i64 inner,         \
                                               rsmx_i64 segments) {                       \
    kernel<T>(part, x, center, outer, channels, inner, segments);                         \
  }
#define RSMX_BN_COEF(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(                                           \
      T* coef, T* out_mean, T* out_invstd, T* moving_mean, T* moving_var,                 \
      const double* stats, const T* gamma, const T* beta, rsmx_i64 channels, double eps,  \
      double momentum, int fix_gamma, int batch, int req_mean, int req_invstd) {          \
    kernel<T>(coef, out_mean, out_invstd, moving_mean, moving_var, stats, gamma, beta,    \
              channels, eps, momentum, fix_gamma, batch, req_mean, req_invstd);           \
  }
#define RSMX_BN_APPLY(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* y, const T* x, const T* coef,           \
                                               rsmx_i64 n, rsmx_i64 channels,             \
                                               rsmx_i64 inner, int add) {                 \
    kernel<T>(y, x, coef, n, channels, inner, add);                                       \
  }
#define RSMX_BN_BACKWARD_PART(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(double* part, const T* dy, const T* x,     \
                                               const T* mean, const T* invstd,            \
                                               rsmx_i64 outer, rsmx_i64 channels,         \
                                               rsmx_i64 inner, rsmx_i64 segments) {       \
    kernel<T>(part, dy, x, mean, invstd, outer, channels, inner, segments);               \
  }
#define RSMX_BN_BACKWARD_COEF(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(                                           \
      T* coef, T* dgamma, T* dbeta, const double* sums, const T* gamma, const T* mean,    \
      const T* invstd, rsmx_i64 channels, double count, int fix_gamma, int batch,         \
      int req_gamma, int req_beta) {                                                      \
    kernel<T>(coef, dgamma, dbeta, sums, gamma, mean, invstd, channels, count, fix_gamma, \
              batch, req_gamma, req_beta);                                                \
  }
#define RSMX_BN_BACKWARD_APPLY(kernel, T, suffix)                                         \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* dy, const T* x,            \
                                               const T* coef, rsmx_i64 n,                 \
                                               rsmx_i64 channels, rsmx_i64 inner,         \
                                               int add) {                                 \
    kernel<T>(dx, dy, x, coef, n, channels, inner, add);                                  \
  }

RSMX_DTYPE_FLOAT(RSMX_BN_STATS_PART, bn_stats_part)
RSMX_DTYPE_FLOAT(RSMX_BN_COEF, bn_coef)
RSMX_DTYPE_FLOAT(RSMX_BN_APPLY, bn_apply)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_PART, bn_backward_part)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_COEF, bn_backward_coef)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_APPLY, bn_backward_apply)
