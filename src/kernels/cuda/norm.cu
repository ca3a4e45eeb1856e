// Kernels of `BatchNorm` and its backward over data seen as (outer, channels, inner).
//
// Per-channel statistics are sums in double: one block per channel (blocks loop over
// channels when the grid is smaller), each thread folding every blockDim.x-th element in
// order, then a fixed tree in shared memory, so results depend only on the block size.
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

// stats[c] = the mean of channel c, stats[channels + c] its biased variance.
template <typename T>
__device__ void bn_stats(double* stats, const T* x, rsmx_i64 outer, rsmx_i64 channels,
                         rsmx_i64 inner) {
  __shared__ double share[RSMX_NORM_THREADS];
  const rsmx_i64 per = outer * inner;
  const double m = per > 0 ? (double)per : 1.0;
  for (rsmx_i64 c = blockIdx.x; c < channels; c += gridDim.x) {
    double acc = 0.0;
    for (rsmx_i64 e = threadIdx.x; e < per; e += blockDim.x)
      acc += bn_wide(x[bn_at(e, c, channels, inner)]);
    const double mean = bn_block_sum(acc, share) / m;
    acc = 0.0;
    for (rsmx_i64 e = threadIdx.x; e < per; e += blockDim.x) {
      double d = bn_wide(x[bn_at(e, c, channels, inner)]) - mean;
      acc += d * d;
    }
    const double var = bn_block_sum(acc, share) / m;
    if (threadIdx.x == 0) {
      stats[c] = mean;
      stats[channels + c] = var;
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

// sums[c] = Σ dy, sums[channels + c] = Σ dy * (x - mean) * invstd over channel c.
template <typename T>
__device__ void bn_backward_sums(double* sums, const T* dy, const T* x, const T* mean,
                                 const T* invstd, rsmx_i64 outer, rsmx_i64 channels,
                                 rsmx_i64 inner) {
  __shared__ double share[RSMX_NORM_THREADS];
  const rsmx_i64 per = outer * inner;
  for (rsmx_i64 c = blockIdx.x; c < channels; c += gridDim.x) {
    const double mu = bn_wide(mean[c]), s = bn_wide(invstd[c]);
    double a = 0.0, b = 0.0;
    for (rsmx_i64 e = threadIdx.x; e < per; e += blockDim.x) {
      rsmx_i64 j = bn_at(e, c, channels, inner);
      double g = bn_wide(dy[j]);
      a += g;
      b += g * (bn_wide(x[j]) - mu) * s;
    }
    a = bn_block_sum(a, share);
    b = bn_block_sum(b, share);
    if (threadIdx.x == 0) {
      sums[c] = a;
      sums[channels + c] = b;
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

#define RSMX_BN_STATS(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(double* stats, const T* x, rsmx_i64 outer, \
                                               rsmx_i64 channels, rsmx_i64 inner) {       \
    kernel<T>(stats, x, outer, channels, inner);                                          \
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
#define RSMX_BN_BACKWARD_SUMS(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(double* sums, const T* dy, const T* x,     \
                                               const T* mean, const T* invstd,            \
                                               rsmx_i64 outer, rsmx_i64 channels,         \
                                               rsmx_i64 inner) {                          \
    kernel<T>(sums, dy, x, mean, invstd, outer, channels, inner);                         \
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

RSMX_DTYPE_FLOAT(RSMX_BN_STATS, bn_stats)
RSMX_DTYPE_FLOAT(RSMX_BN_COEF, bn_coef)
RSMX_DTYPE_FLOAT(RSMX_BN_APPLY, bn_apply)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_SUMS, bn_backward_sums)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_COEF, bn_backward_coef)
RSMX_DTYPE_FLOAT(RSMX_BN_BACKWARD_APPLY, bn_backward_apply)
