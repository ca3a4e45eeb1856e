// Kernels of the softmax family: `softmax` and `log_softmax` (temperature, a valid length
// per position, an output dtype of its own) with their backward, which `SoftmaxActivation`
// and `SoftmaxOutput` share; the backward of `SoftmaxOutput` (the cross-entropy gradient
// against a label); and the regression output layers with their backward.
//
// A softmax sees its data as (outer, n, inner) and works along n at each of the
// outer * inner positions. A block of `blockDim.x` threads (at most 256) takes tiles of
// `cols` positions; the `blockDim.x / cols` lanes of a position take every lanes-th
// element and combine their maxima and sums in a fixed tree in shared memory, so the
// result does not depend on the order threads run. Results are computed in float (double
// when the data or the output is float64), as the CPU kernels compute them.
#include "common.cuh"

#define RSMX_SM_THREADS 256

// Dtype codes of the integer length and label arrays (`enum rsmx_dtype_code` of reduce.cu).
enum rsmx_sm_dtype {
  RSMX_SM_F32, RSMX_SM_F64, RSMX_SM_F16, RSMX_SM_U8, RSMX_SM_I8, RSMX_SM_I32, RSMX_SM_I64
};

// The type a pair of storage types computes in: double if either is double.
template <typename A, typename B> struct sm_wider { typedef float F; };
template <typename B> struct sm_wider<double, B> { typedef double F; };
template <typename A> struct sm_wider<A, double> { typedef double F; };
template <> struct sm_wider<double, double> { typedef double F; };

__device__ __forceinline__ float sm_exp(float x) { return expf(x); }
__device__ __forceinline__ double sm_exp(double x) { return exp(x); }
__device__ __forceinline__ float sm_log(float x) { return logf(x); }
__device__ __forceinline__ double sm_log(double x) { return log(x); }

// The larger of two values, a NaN giving way to the other (Rust's `Float::max`).
template <typename F>
__device__ __forceinline__ F sm_max(F a, F b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}

// A computed value rounded once to storage type O.
template <typename O> struct sm_cast;
template <> struct sm_cast<float> {
  __device__ __forceinline__ static float of(float v) { return v; }
  __device__ __forceinline__ static float of(double v) { return (float)v; }
};
template <> struct sm_cast<double> {
  __device__ __forceinline__ static double of(float v) { return (double)v; }
  __device__ __forceinline__ static double of(double v) { return v; }
};
template <> struct sm_cast<rsmx_half> {
  __device__ __forceinline__ static rsmx_half of(float v) { return rsmx_float_to_half(v); }
  __device__ __forceinline__ static rsmx_half of(double v) { return rsmx_double_to_half(v); }
};

// out[i] (=|+=) v: rounded to O first, then added in O's arithmetic, as the CPU adds.
template <typename O, typename F>
__device__ __forceinline__ void sm_put(O* out, rsmx_i64 i, F v, int add) {
  O s = sm_cast<O>::of(v);
  if (add) s = rsmx_num<O>::store(rsmx_num<O>::load(out[i]) + rsmx_num<O>::load(s));
  out[i] = s;
}

// Element `i` of an array of dtype `dt`, as a double.
__device__ __forceinline__ double sm_load_as_double(const void* p, int dt, rsmx_i64 i) {
  switch (dt) {
    case RSMX_SM_F32: return (double)((const float*)p)[i];
    case RSMX_SM_F64: return ((const double*)p)[i];
    case RSMX_SM_F16: return (double)rsmx_half_to_float(((const rsmx_half*)p)[i]);
    case RSMX_SM_U8: return (double)((const rsmx_u8*)p)[i];
    case RSMX_SM_I8: return (double)((const rsmx_i8*)p)[i];
    case RSMX_SM_I32: return (double)((const rsmx_i32*)p)[i];
    default: return (double)((const rsmx_i64*)p)[i];
  }
}

// `v` as a 64-bit integer the way Rust's `as` converts: NaN gives 0, the ends saturate.
__device__ __forceinline__ rsmx_i64 sm_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return 9223372036854775807LL;
  if (v <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  return (rsmx_i64)v;
}

// The valid length at position `p` (at most n; negative counts as 0), n without lengths.
__device__ __forceinline__ rsmx_i64 sm_length(const void* lengths, int dt, rsmx_i64 p,
                                              rsmx_i64 n) {
  if (lengths == 0) return n;
  rsmx_i64 l;
  switch (dt) {
    case RSMX_SM_U8: l = ((const rsmx_u8*)lengths)[p]; break;
    case RSMX_SM_I8: l = ((const rsmx_i8*)lengths)[p]; break;
    case RSMX_SM_I32: l = ((const rsmx_i32*)lengths)[p]; break;
    default: l = ((const rsmx_i64*)lengths)[p]; break;
  }
  return l < 0 ? 0 : (l < n ? l : n);
}

// The first step of the combining tree over `lanes` lanes.
__device__ __forceinline__ int sm_tree_top(int lanes) {
  int p = 1;
  while (p < lanes) p <<= 1;
  return p >> 1;
}

// Combines the lanes of each column (the maximum, or the sum) in a fixed tree through
// shared memory `buf`; every thread gets its column's result.
template <typename F>
__device__ __forceinline__ F sm_combine(F* buf, F v, int is_max, int cols, int lanes) {
  if (lanes == 1) return v;
  const int t = threadIdx.x, lane = t / cols;
  __syncthreads();  // the previous readers of `buf` are done
  buf[t] = v;
  for (int s = sm_tree_top(lanes); s > 0; s >>= 1) {
    __syncthreads();
    if (lane < s && lane + s < lanes) {
      const F o = buf[t + s * cols];
      buf[t] = is_max ? sm_max(buf[t], o) : buf[t] + o;
    }
  }
  __syncthreads();
  return buf[t % cols];
}

// The tiling of positions: `cols` clamped to the block, lanes per position, and this
// thread's column and lane.
struct sm_tiling {
  int cols, lanes, col, lane;
  __device__ __forceinline__ explicit sm_tiling(int c) {
    cols = c < 1 ? 1 : (c > (int)blockDim.x ? (int)blockDim.x : c);
    lanes = blockDim.x / cols;
    col = threadIdx.x % cols;
    lane = threadIdx.x / cols;
  }
};

// out (=|+=) softmax((x - max) / temperature) along n, or its log; elements at or past
// a position's valid length give 0. `out` may be `in` itself (same dtype).
template <typename I, typename O>
__device__ void softmax(O* out, const I* in, rsmx_i64 n_pos, rsmx_i64 n, rsmx_i64 inner,
                        int cols, double temperature, int log, const void* lengths,
                        int len_dtype, int add) {
  typedef typename sm_wider<typename rsmx_num<I>::compute, typename rsmx_num<O>::compute>::F F;
  __shared__ F buf[RSMX_SM_THREADS];
  // Every launch reaches a barrier: the host emulation runs a kernel without fibers once
  // a launch of it reached none.
  __syncthreads();
  const sm_tiling tl(cols);
  const F t = (F)temperature;
  const rsmx_i64 tiles = (n_pos + tl.cols - 1) / tl.cols;
  for (rsmx_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const rsmx_i64 p = tile * tl.cols + tl.col;
    const bool mine = p < n_pos && tl.lane < tl.lanes;
    rsmx_i64 base = 0, len = 0;
    if (mine) {
      const rsmx_i64 o = p / inner;
      base = o * n * inner + (p - o * inner);
      len = sm_length(lengths, len_dtype, p, n);
    }
    // The largest of x / t leads: x's maximum, or its minimum under a negative t (softmin).
    const F sgn = t < (F)0 ? (F)-1 : (F)1;
    F m = (F)-INFINITY;
    for (rsmx_i64 j = tl.lane; j < len; j += tl.lanes) {
      m = sm_max(m, sgn * (F)rsmx_num<I>::load(in[base + j * inner]));
    }
    m = sgn * sm_combine(buf, m, 1, tl.cols, tl.lanes);
    F s = (F)0;
    for (rsmx_i64 j = tl.lane; j < len; j += tl.lanes) {
      s += sm_exp(((F)rsmx_num<I>::load(in[base + j * inner]) - m) / t);
    }
    s = sm_combine(buf, s, 0, tl.cols, tl.lanes);
    const F norm = log ? sm_log(s) : (F)1 / s;
    if (mine) {
      for (rsmx_i64 j = tl.lane; j < n; j += tl.lanes) {
        F v = (F)0;
        if (j < len) {
          const F z = ((F)rsmx_num<I>::load(in[base + j * inner]) - m) / t;
          v = log ? z - norm : sm_exp(z) * norm;
        }
        sm_put(out, base + j * inner, v, add);
      }
    }
  }
}

// dx (=|+=) the gradient of the softmax (or log-softmax) with output y and output
// gradient g: y (g - sum(g y)) / T, or (g - exp(y) sum(g)) / T; 0 past the valid length.
template <typename O, typename D>
__device__ void softmax_backward(D* dx, const O* g, const O* y, rsmx_i64 n_pos, rsmx_i64 n,
                                 rsmx_i64 inner, int cols, double temperature, int log,
                                 const void* lengths, int len_dtype, int add) {
  typedef typename sm_wider<typename rsmx_num<O>::compute, typename rsmx_num<D>::compute>::F F;
  __shared__ F buf[RSMX_SM_THREADS];
  __syncthreads();  // on every launch (see `softmax`)
  const sm_tiling tl(cols);
  const F inv_t = (F)1 / (F)temperature;
  const rsmx_i64 tiles = (n_pos + tl.cols - 1) / tl.cols;
  for (rsmx_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const rsmx_i64 p = tile * tl.cols + tl.col;
    const bool mine = p < n_pos && tl.lane < tl.lanes;
    rsmx_i64 base = 0, len = 0;
    if (mine) {
      const rsmx_i64 o = p / inner;
      base = o * n * inner + (p - o * inner);
      len = sm_length(lengths, len_dtype, p, n);
    }
    F s = (F)0;
    for (rsmx_i64 j = tl.lane; j < len; j += tl.lanes) {
      const F gv = (F)rsmx_num<O>::load(g[base + j * inner]);
      s += log ? gv : gv * (F)rsmx_num<O>::load(y[base + j * inner]);
    }
    s = sm_combine(buf, s, 0, tl.cols, tl.lanes);
    if (mine) {
      for (rsmx_i64 j = tl.lane; j < n; j += tl.lanes) {
        F v = (F)0;
        if (j < len) {
          const F gv = (F)rsmx_num<O>::load(g[base + j * inner]);
          const F yv = (F)rsmx_num<O>::load(y[base + j * inner]);
          v = log ? (gv - sm_exp(yv) * s) * inv_t : yv * (gv - s) * inv_t;
        }
        sm_put(dx, base + j * inner, v, add);
      }
    }
  }
}

// The settings of `_backward_SoftmaxOutput`, as the launcher works them out.
struct rsmx_softmax_output {
  rsmx_i64 n, inner;    // the layout's axis length and inner size
  rsmx_i64 positions;   // outer * inner: the labels counted for `valid` normalisation
  rsmx_i64 ignore;      // ignore_label as an integer
  double scale;         // grad_scale / the normalisation (grad_scale alone for `valid`)
  double on, off;       // the target of the label's class and, smoothing, of the others
  int label_dtype;      // `enum rsmx_sm_dtype`
  int prob_labels;      // labels are probabilities of the data's shape
  int use_ignore;       // labels equal to ignore_label give no gradient
  int smooth;           // the other classes take `off`
  int valid;            // divide by the number of labels not equal to ignore_label
  int has_ograd;        // multiply by the output gradient
};

// dx (=|+=) (y - target) * scale [* ograd] for every element of the (outer, n, inner)
// output y: target the label's one-hot (smoothed) encoding, or the probability labels.
template <typename T>
__device__ void softmax_output_backward(T* dx, const T* y, const T* g, const void* labels,
                                        rsmx_i64 total, const rsmx_softmax_output& s,
                                        int add) {
  typedef typename rsmx_num<T>::compute F;
  __shared__ rsmx_i64 count[RSMX_SM_THREADS];
  __syncthreads();  // on every launch (see `softmax`)
  double scale = s.scale;
  if (s.valid) {
    // Each block counts the valid labels itself (the launcher keeps the grid small).
    rsmx_i64 c = 0;
    for (rsmx_i64 p = threadIdx.x; p < s.positions; p += blockDim.x) {
      c += sm_to_i64(sm_load_as_double(labels, s.label_dtype, p)) != s.ignore;
    }
    count[threadIdx.x] = c;
    for (int k = sm_tree_top(blockDim.x); k > 0; k >>= 1) {
      __syncthreads();
      if ((int)threadIdx.x < k && threadIdx.x + k < blockDim.x) {
        count[threadIdx.x] += count[threadIdx.x + k];
      }
    }
    __syncthreads();
    scale = scale / (double)(count[0] > 1 ? count[0] : 1);
  }
  const F fscale = (F)scale, on = (F)s.on, off = (F)s.off;
  const rsmx_i64 block = s.n * s.inner;
  RSMX_GRID_LOOP(e, total) {
    const rsmx_i64 o = e / block, rem = e - o * block, j = rem / s.inner;
    const rsmx_i64 pos = o * s.inner + (rem - j * s.inner);
    F v = (F)0;
    F target;
    bool skip = false;
    if (s.prob_labels) {
      target = (F)sm_load_as_double(labels, s.label_dtype, e);
    } else {
      const rsmx_i64 label = sm_to_i64(sm_load_as_double(labels, s.label_dtype, pos));
      skip = s.use_ignore && label == s.ignore;
      target = j == label ? on : (s.smooth ? off : (F)0);
    }
    if (!skip) {
      v = ((F)rsmx_num<T>::load(y[e]) - target) * fscale;
      if (s.has_ograd) v = v * (F)rsmx_num<T>::load(g[e]);
    }
    sm_put(dx, e, v, add);
  }
}

// out (=|+=) the regression output layer's forward: the data, or its sigmoid
// (`logistic`); `out` may be `in` itself.
template <typename T>
__device__ void regression(T* out, const T* in, rsmx_i64 n, int logistic, int add) {
  typedef typename rsmx_num<T>::compute F;
  RSMX_GRID_LOOP(i, n) {
    const F x = rsmx_num<T>::load(in[i]);
    sm_put(out, i, logistic ? (F)1 / ((F)1 + sm_exp(-x)) : x, add);
  }
}

// dx (=|+=) d(y, label) * scale: y - label, or its sign for the absolute error (`mae`,
// -1 where they are equal, as MXNet takes it).
template <typename T>
__device__ void regression_backward(T* dx, const T* y, const T* label, rsmx_i64 n, int mae,
                                    double scale, int add) {
  typedef typename rsmx_num<T>::compute F;
  const F s = (F)scale;
  RSMX_GRID_LOOP(i, n) {
    F d = (F)rsmx_num<T>::load(y[i]) - (F)rsmx_num<T>::load(label[i]);
    if (mae) d = d > (F)0 ? (F)1 : (F)-1;
    sm_put(dx, i, d * s, add);
  }
}

// dx (=|+=) the SVM hinge loss's gradient at y, by rows of `cols` with one label each:
// at the label's column -[m > y] (L1, `linear`) or -2(m - y)+ (L2), elsewhere
// [m > -y] or 2(m + y)+; times `coef`.
template <typename T>
__device__ void svm_output_backward(T* dx, const T* y, const T* label, rsmx_i64 n,
                                    rsmx_i64 cols, double margin, double coef, int linear,
                                    int add) {
  typedef typename rsmx_num<T>::compute F;
  const F m = (F)margin;
  RSMX_GRID_LOOP(i, n) {
    const F v = (F)rsmx_num<T>::load(y[i]);
    const rsmx_i64 k = (rsmx_i64)(F)rsmx_num<T>::load(label[i / cols]);
    F d = (F)0;
    if (i % cols == k) {
      if (m > v) d = linear ? (F)-1 : (F)-2 * (m - v);
    } else if (m > -v) {
      d = linear ? (F)1 : (F)2 * (m + v);
    }
    sm_put(dx, i, d * (F)coef, add);
  }
}

// ---- instantiations -------------------------------------------------------------------

// softmax_<in>_<out> and softmax_backward_<out>_<grad>: one line per first dtype, the
// macro's type the second.
#define RSMX_SOFTMAX_FROM(I)                                                                  \
  template <typename O>                                                                       \
  __device__ __forceinline__ void softmax_from_##I(O* out, const void* in, rsmx_i64 n_pos,    \
                                                   rsmx_i64 n, rsmx_i64 inner, int cols,      \
                                                   double t, int log, const void* lengths,    \
                                                   int len_dtype, int add) {                  \
    softmax<I, O>(out, (const I*)in, n_pos, n, inner, cols, t, log, lengths, len_dtype, add); \
  }                                                                                           \
  template <typename D>                                                                       \
  __device__ __forceinline__ void softmax_backward_from_##I(                                  \
      D* dx, const void* g, const void* y, rsmx_i64 n_pos, rsmx_i64 n, rsmx_i64 inner,        \
      int cols, double t, int log, const void* lengths, int len_dtype, int add) {             \
    softmax_backward<I, D>(dx, (const I*)g, (const I*)y, n_pos, n, inner, cols, t, log,       \
                           lengths, len_dtype, add);                                          \
  }
RSMX_SOFTMAX_FROM(float)
RSMX_SOFTMAX_FROM(double)
RSMX_SOFTMAX_FROM(rsmx_half)

#define RSMX_SOFTMAX_PAIR(kernel, I, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, const void* in, rsmx_i64 n_pos,          \
                                               rsmx_i64 n, rsmx_i64 inner, int cols, double t, \
                                               int log, const void* lengths, int len_dtype,    \
                                               int add) {                                      \
    softmax_from_##I<T>(out, in, n_pos, n, inner, cols, t, log, lengths, len_dtype, add);      \
  }
#define RSMX_SOFTMAX_BACKWARD_PAIR(kernel, I, T, suffix)                                        \
  extern "C" __global__ void kernel##_##suffix(T* dx, const void* g, const void* y,             \
                                               rsmx_i64 n_pos, rsmx_i64 n, rsmx_i64 inner,     \
                                               int cols, double t, int log,                    \
                                               const void* lengths, int len_dtype, int add) {  \
    softmax_backward_from_##I<T>(dx, g, y, n_pos, n, inner, cols, t, log, lengths, len_dtype,  \
                                 add);                                                         \
  }
#define RSMX_SOFTMAX_F32(kernel, T, suffix) RSMX_SOFTMAX_PAIR(kernel, float, T, suffix)
#define RSMX_SOFTMAX_F64(kernel, T, suffix) RSMX_SOFTMAX_PAIR(kernel, double, T, suffix)
#define RSMX_SOFTMAX_F16(kernel, T, suffix) RSMX_SOFTMAX_PAIR(kernel, rsmx_half, T, suffix)
#define RSMX_SOFTMAX_BACKWARD_F32(kernel, T, suffix) \
  RSMX_SOFTMAX_BACKWARD_PAIR(kernel, float, T, suffix)
#define RSMX_SOFTMAX_BACKWARD_F64(kernel, T, suffix) \
  RSMX_SOFTMAX_BACKWARD_PAIR(kernel, double, T, suffix)
#define RSMX_SOFTMAX_BACKWARD_F16(kernel, T, suffix) \
  RSMX_SOFTMAX_BACKWARD_PAIR(kernel, rsmx_half, T, suffix)

#define RSMX_SOFTMAX_OUTPUT_BACKWARD(kernel, T, suffix)                                      \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* y, const T* g,                \
                                               const void* labels, rsmx_i64 total,           \
                                               rsmx_softmax_output s, int add) {             \
    kernel<T>(dx, y, g, labels, total, s, add);                                              \
  }
#define RSMX_REGRESSION(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n,             \
                                               int logistic, int add) {                      \
    kernel<T>(out, in, n, logistic, add);                                                    \
  }
#define RSMX_REGRESSION_BACKWARD(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* y, const T* label,           \
                                               rsmx_i64 n, int mae, double scale, int add) { \
    kernel<T>(dx, y, label, n, mae, scale, add);                                             \
  }
#define RSMX_SVM_OUTPUT_BACKWARD(kernel, T, suffix)                                          \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* y, const T* label,           \
                                               rsmx_i64 n, rsmx_i64 cols, double margin,     \
                                               double coef, int linear, int add) {           \
    kernel<T>(dx, y, label, n, cols, margin, coef, linear, add);                             \
  }

RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_F32, softmax_f32)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_F64, softmax_f64)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_F16, softmax_f16)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_BACKWARD_F32, softmax_backward_f32)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_BACKWARD_F64, softmax_backward_f64)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_BACKWARD_F16, softmax_backward_f16)
RSMX_DTYPE_FLOAT(RSMX_SOFTMAX_OUTPUT_BACKWARD, softmax_output_backward)
RSMX_DTYPE_FLOAT(RSMX_REGRESSION, regression)
RSMX_DTYPE_FLOAT(RSMX_REGRESSION_BACKWARD, regression_backward)
RSMX_DTYPE_FLOAT(RSMX_SVM_OUTPUT_BACKWARD, svm_output_backward)
