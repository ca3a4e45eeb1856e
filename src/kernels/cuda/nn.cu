// Kernels of the activation layers and dropout: `Activation` (relu, sigmoid, tanh,
// softrelu, softsign), `LeakyReLU` (leaky, elu, selu, gelu, prelu, rrelu) and `Dropout`,
// each with its backward. Float16 computes in float32, as the CPU kernels do. `add`
// accumulates into the output (`req=add`); every kernel may run in place.
#include "common.cuh"

enum rsmx_act { RSMX_ACT_RELU, RSMX_ACT_SIGMOID, RSMX_ACT_TANH, RSMX_ACT_SOFTRELU, RSMX_ACT_SOFTSIGN };

enum rsmx_leaky { RSMX_LEAKY_LEAKY, RSMX_LEAKY_ELU, RSMX_LEAKY_SELU, RSMX_LEAKY_GELU };

#define RSMX_NN_MATH(name, fname)                                              \
  __device__ __forceinline__ float nn_##name(float x) { return fname##f(x); } \
  __device__ __forceinline__ double nn_##name(double x) { return fname(x); }
RSMX_NN_MATH(exp, exp) RSMX_NN_MATH(expm1, expm1) RSMX_NN_MATH(log1p, log1p)
RSMX_NN_MATH(tanh, tanh) RSMX_NN_MATH(fabs, fabs)

// Writes `v` (compute type) to out[i], or adds it.
template <typename T>
__device__ __forceinline__ void nn_put(T* out, rsmx_i64 i, typename rsmx_num<T>::compute v,
                                       int add) {
  out[i] = rsmx_num<T>::store(add ? rsmx_num<T>::load(out[i]) + v : v);
}

template <typename C>
__device__ __forceinline__ C act_forward(int act, C x) {
  const C one = (C)1, zero = (C)0;
  switch (act) {
    case RSMX_ACT_RELU: return x <= zero ? zero : x;  // NaN stays NaN
    case RSMX_ACT_SIGMOID: return one / (one + nn_exp(-x));
    case RSMX_ACT_TANH: return nn_tanh(x);
    // Above 20, log(1 + e^x) equals x in float precision and e^x could overflow.
    case RSMX_ACT_SOFTRELU: return x > (C)20 ? x : nn_log1p(nn_exp(x));
    case RSMX_ACT_SOFTSIGN: return x / (one + nn_fabs(x));
    default: return x;
  }
}

// The output gradient times the derivative, from the output (the input for softsign).
template <typename C>
__device__ __forceinline__ C act_backward(int act, C g, C v) {
  const C one = (C)1, zero = (C)0;
  switch (act) {
    case RSMX_ACT_RELU: return v > zero ? g : (v != v ? v : zero);
    case RSMX_ACT_SIGMOID: return g * (v * (one - v));
    case RSMX_ACT_TANH: return g * (one - v * v);
    case RSMX_ACT_SOFTRELU: return g * -nn_expm1(-v);
    case RSMX_ACT_SOFTSIGN: {
      C d = one + nn_fabs(v);
      return g * (one / (d * d));
    }
    default: return g;
  }
}

template <typename T>
__device__ void activation(T* out, const T* in, rsmx_i64 n, int act, int add) {
  RSMX_GRID_LOOP(i, n) { nn_put(out, i, act_forward(act, rsmx_num<T>::load(in[i])), add); }
}

template <typename T>
__device__ void activation_backward(T* out, const T* g, const T* v, rsmx_i64 n, int act,
                                    int add) {
  RSMX_GRID_LOOP(i, n) {
    nn_put(out, i, act_backward(act, rsmx_num<T>::load(g[i]), rsmx_num<T>::load(v[i])), add);
  }
}

#define RSMX_SELU_ALPHA 1.6732632423543772
#define RSMX_SELU_LAMBDA 1.0507009873554805
#define RSMX_FRAC_1_SQRT_2 0.70710678118654752440
#define RSMX_FRAC_1_SQRT_2PI 0.39894228040143267794

// The leaky kinds without a slope array; `slope` rounded to C as the CPU does.
template <typename C>
__device__ __forceinline__ C leaky_forward(int kind, C x, C slope) {
  const bool pos = x > (C)0;
  switch (kind) {
    case RSMX_LEAKY_LEAKY: return pos ? x : slope * x;
    case RSMX_LEAKY_ELU: return pos ? x : slope * nn_expm1(x);
    case RSMX_LEAKY_SELU:
      return (C)RSMX_SELU_LAMBDA * (pos ? x : (C)RSMX_SELU_ALPHA * nn_expm1(x));
    case RSMX_LEAKY_GELU: {
      // 0.5 x (1 + erf(x / sqrt 2)) in double; erfc keeps the far negative tail accurate.
      double v = (double)x;
      return (C)(0.5 * v * erfc(-v * RSMX_FRAC_1_SQRT_2));
    }
    default: return x;
  }
}

template <typename C>
__device__ __forceinline__ C leaky_derivative(int kind, C x, C slope) {
  const bool pos = x > (C)0;
  switch (kind) {
    case RSMX_LEAKY_LEAKY: return pos ? (C)1 : slope;
    case RSMX_LEAKY_ELU: return pos ? (C)1 : slope * nn_exp(x);
    case RSMX_LEAKY_SELU:
      return pos ? (C)RSMX_SELU_LAMBDA : (C)(RSMX_SELU_LAMBDA * RSMX_SELU_ALPHA) * nn_exp(x);
    case RSMX_LEAKY_GELU: {
      double v = (double)x;
      return (C)(0.5 * erfc(-v * RSMX_FRAC_1_SQRT_2) + v * exp(-0.5 * v * v) * RSMX_FRAC_1_SQRT_2PI);
    }
    default: return (C)1;
  }
}

template <typename T>
__device__ void leaky(T* out, const T* in, rsmx_i64 n, int kind, int add, double slope) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    nn_put(out, i, leaky_forward(kind, rsmx_num<T>::load(in[i]), (C)slope), add);
  }
}

template <typename T>
__device__ void leaky_backward(T* out, const T* g, const T* x, rsmx_i64 n, int kind, int add,
                               double slope) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C d = leaky_derivative(kind, rsmx_num<T>::load(x[i]), (C)slope);
    nn_put(out, i, rsmx_num<T>::load(g[i]) * d, add);
  }
}

// The slope of element i: gamma[(i / inner) % channels] (rrelu: channels = n, inner = 1).
__device__ __forceinline__ rsmx_i64 channel_of(rsmx_i64 i, rsmx_i64 channels, rsmx_i64 inner) {
  return channels == 1 ? 0 : (i / inner) % channels;
}

// prelu and rrelu: x where positive, slope * x elsewhere.
template <typename T>
__device__ void prelu(T* out, const T* x, const T* gamma, rsmx_i64 n, rsmx_i64 channels,
                      rsmx_i64 inner, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C v = rsmx_num<T>::load(x[i]);
    C s = rsmx_num<T>::load(gamma[channel_of(i, channels, inner)]);
    nn_put(out, i, v > (C)0 ? v : s * v, add);
  }
}

// The data gradient of prelu and rrelu: g where the input is positive, slope * g elsewhere.
template <typename T>
__device__ void prelu_backward(T* out, const T* g, const T* x, const T* gamma, rsmx_i64 n,
                               rsmx_i64 channels, rsmx_i64 inner, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C s = rsmx_num<T>::load(x[i]) > (C)0 ? (C)1
                                          : rsmx_num<T>::load(gamma[channel_of(i, channels, inner)]);
    nn_put(out, i, rsmx_num<T>::load(g[i]) * s, add);
  }
}

// Most threads per block a block reduction serves.
#define RSMX_NN_MAX_BLOCK 1024

// prelu's gamma gradient: for each channel, the sum of x * g over its non-positive inputs.
// One block per channel (blocks loop over channels); each thread sums a fixed strided
// share of the channel, then a tree over shared memory adds the shares: the result
// depends only on the block size, never on the thread order or the grid. blockDim.x
// must be a power of two of at most RSMX_NN_MAX_BLOCK.
template <typename T>
__device__ void prelu_gamma_backward(T* out, const T* g, const T* x, rsmx_i64 n,
                                     rsmx_i64 channels, rsmx_i64 inner, int add) {
  typedef typename rsmx_num<T>::compute C;
  __shared__ C share[RSMX_NN_MAX_BLOCK];
  const rsmx_i64 per_channel = n / channels;
  const unsigned t = threadIdx.x;
  for (rsmx_i64 c = blockIdx.x; c < channels; c += gridDim.x) {
    C acc = (C)0;
    for (rsmx_i64 e = t; e < per_channel; e += blockDim.x) {
      rsmx_i64 j = (e / inner) * channels * inner + c * inner + e % inner;
      C v = rsmx_num<T>::load(x[j]);
      if (v <= (C)0) acc += v * rsmx_num<T>::load(g[j]);
    }
    share[t] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) share[t] += share[t + s];
      __syncthreads();
    }
    if (t == 0) nn_put(out, c, share[0], add);
    __syncthreads();
  }
}

__device__ __forceinline__ unsigned long long nn_hash(unsigned long long seed, rsmx_i64 i) {
  return rsmx_hash(seed, i);
}

// rrelu's slopes: uniform in [lower, upper) per element (lower = upper outside training).
template <typename T>
__device__ void rrelu_draw(T* mask, rsmx_i64 n, unsigned long long seed, double lower,
                           double upper) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    double u = (double)(nn_hash(seed, i) >> 11) * (1.0 / 9007199254740992.0);
    mask[i] = rsmx_num<T>::store((C)(lower + (upper - lower) * u));
  }
}

#define RSMX_NN_MAX_DIM 8

// Where each element's draw comes from: the data's shape and the strides of the draw's
// (smaller) shape over it, 0 along the axes that share one draw.
struct rsmx_draw_shape {
  int ndim;
  rsmx_i64 shape[RSMX_NN_MAX_DIM];
  rsmx_i64 stride[RSMX_NN_MAX_DIM];
};

// Dropout while active: mask[i] = scale where the draw keeps element i (a 32-bit draw below
// `threshold`), else 0 * scale; out (=|+=) x * mask unless `req` is 0 (null).
template <typename T>
__device__ void dropout(T* out, T* mask, const T* x, rsmx_i64 n, unsigned long long seed,
                        unsigned long long threshold, double scale, const rsmx_draw_shape& d,
                        int req) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 at = i;
    if (d.ndim > 0) {
      rsmx_i64 rest = i;
      at = 0;
      for (int k = d.ndim - 1; k >= 0; k--) {
        at += (rest % d.shape[k]) * d.stride[k];
        rest /= d.shape[k];
      }
    }
    const bool kept = (nn_hash(seed, at) >> 32) < threshold;
    const T m = rsmx_num<T>::store((C)(kept ? scale : 0.0 * scale));
    const C v = rsmx_num<T>::load(x[i]);
    mask[i] = m;
    if (req != 0) nn_put(out, i, v * rsmx_num<T>::load(m), req == 2);
  }
}

// out (=|+=) g * mask, or g where `masked` is 0.
template <typename T>
__device__ void dropout_backward(T* out, const T* g, const T* mask, rsmx_i64 n, int masked,
                                 int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    C v = rsmx_num<T>::load(g[i]);
    nn_put(out, i, masked ? v * rsmx_num<T>::load(mask[i]) : v, add);
  }
}

#define RSMX_ACTIVATION(kernel, T, suffix)                                               \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n, int act, \
                                               int add) {                               \
    kernel<T>(out, in, n, act, add);                                                     \
  }
#define RSMX_ACTIVATION_BACKWARD(kernel, T, suffix)                                      \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* v,           \
                                               rsmx_i64 n, int act, int add) {           \
    kernel<T>(out, g, v, n, act, add);                                                   \
  }
#define RSMX_LEAKY(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n, int kind, \
                                               int add, double slope) {                  \
    kernel<T>(out, in, n, kind, add, slope);                                              \
  }
#define RSMX_LEAKY_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* x,            \
                                               rsmx_i64 n, int kind, int add,            \
                                               double slope) {                           \
    kernel<T>(out, g, x, n, kind, add, slope);                                            \
  }
#define RSMX_PRELU(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* x, const T* gamma,        \
                                               rsmx_i64 n, rsmx_i64 channels,            \
                                               rsmx_i64 inner, int add) {                \
    kernel<T>(out, x, gamma, n, channels, inner, add);                                    \
  }
#define RSMX_PRELU_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* x,            \
                                               const T* gamma, rsmx_i64 n,               \
                                               rsmx_i64 channels, rsmx_i64 inner,        \
                                               int add) {                                \
    kernel<T>(out, g, x, gamma, n, channels, inner, add);                                 \
  }
#define RSMX_PRELU_GAMMA_BACKWARD(kernel, T, suffix)                                      \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* x,            \
                                               rsmx_i64 n, rsmx_i64 channels,            \
                                               rsmx_i64 inner, int add) {                \
    kernel<T>(out, g, x, n, channels, inner, add);                                        \
  }
#define RSMX_RRELU_DRAW(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* mask, rsmx_i64 n,                       \
                                               unsigned long long seed, double lower,    \
                                               double upper) {                           \
    kernel<T>(mask, n, seed, lower, upper);                                               \
  }
#define RSMX_DROPOUT(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(                                           \
      T* out, T* mask, const T* x, rsmx_i64 n, unsigned long long seed,                  \
      unsigned long long threshold, double scale, rsmx_draw_shape d, int req) {          \
    kernel<T>(out, mask, x, n, seed, threshold, scale, d, req);                           \
  }
#define RSMX_DROPOUT_BACKWARD(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* mask,         \
                                               rsmx_i64 n, int masked, int add) {        \
    kernel<T>(out, g, mask, n, masked, add);                                              \
  }

RSMX_DTYPE_FLOAT(RSMX_ACTIVATION, activation)
RSMX_DTYPE_FLOAT(RSMX_ACTIVATION_BACKWARD, activation_backward)
RSMX_DTYPE_FLOAT(RSMX_LEAKY, leaky)
RSMX_DTYPE_FLOAT(RSMX_LEAKY_BACKWARD, leaky_backward)
RSMX_DTYPE_FLOAT(RSMX_PRELU, prelu)
RSMX_DTYPE_FLOAT(RSMX_PRELU_BACKWARD, prelu_backward)
RSMX_DTYPE_FLOAT(RSMX_PRELU_GAMMA_BACKWARD, prelu_gamma_backward)
RSMX_DTYPE_FLOAT(RSMX_RRELU_DRAW, rrelu_draw)
RSMX_DTYPE_FLOAT(RSMX_DROPOUT, dropout)
RSMX_DTYPE_FLOAT(RSMX_DROPOUT_BACKWARD, dropout_backward)
