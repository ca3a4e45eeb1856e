// Kernels of gradient sums and of the element-wise backward operators: `add_n` (and the
// copies of `_backward_add_n`), the backward of the unary operators and of the operators
// with a scalar operand (`dx = dy * f'(x)`), and the backward of the binary operators,
// whose broadcast inputs sum their gradient over the axes they were stretched along.
// Float16 computes in float32, as the CPU kernels do.
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// add_n: arithmetic in the storage type, as the CPU sums (float16 rounds every addition;
// integers wrap).

template <typename T> struct sum_of {
  typedef typename rsmx_num<T>::compute C;
  __device__ __forceinline__ static T add(T a, T b) {
    return rsmx_num<T>::store(rsmx_num<T>::load(a) + rsmx_num<T>::load(b));
  }
  __device__ __forceinline__ static T times(T a, int k) {
    const T kt = rsmx_num<T>::store((C)k);
    return rsmx_num<T>::store(rsmx_num<T>::load(a) * rsmx_num<T>::load(kt));
  }
};
#define RSMX_WRAPPING_SUM(T, U)                                                           \
  template <> struct sum_of<T> {                                                          \
    __device__ __forceinline__ static T add(T a, T b) { return (T)(U)((U)a + (U)b); }     \
    __device__ __forceinline__ static T times(T a, int k) { return (T)(U)((U)a * (U)k); } \
  };
RSMX_WRAPPING_SUM(rsmx_u8, unsigned char)
RSMX_WRAPPING_SUM(rsmx_i8, unsigned char)
RSMX_WRAPPING_SUM(rsmx_i32, unsigned int)
RSMX_WRAPPING_SUM(rsmx_i64, unsigned long long)

#define RSMX_SUM_INPUTS 8

// Up to RSMX_SUM_INPUTS arrays of one launch of `add_n`.
struct rsmx_sum_inputs {
  const void* p[RSMX_SUM_INPUTS];
};

// out = keep * out + in[0] + in[1] + ... in that order (keep 0: out = in[0] + ...).
template <typename T>
__device__ void add_n(T* out, const rsmx_sum_inputs& in, rsmx_i64 n, int count, int keep) {
  RSMX_GRID_LOOP(i, n) {
    T acc;
    if (keep == 0) {
      acc = count > 0 ? ((const T*)in.p[0])[i] : rsmx_num<T>::store(0);
    } else {
      acc = keep == 1 ? out[i] : sum_of<T>::times(out[i], keep);
    }
    // Unrolled, so that each pointer is read from the parameter by a constant index.
#ifdef __CUDACC_RTC__
#pragma unroll
#endif
    for (int k = 0; k < RSMX_SUM_INPUTS; k++) {
      if (k < count && (k > 0 || keep != 0)) acc = sum_of<T>::add(acc, ((const T*)in.p[k])[i]);
    }
    out[i] = acc;
  }
}

// ---------------------------------------------------------------------------------------
// The backward of the unary operators: op codes in the order of the core's `UnaryKind`.

enum rsmx_unary_grad {
  RSMX_UG_COPY, RSMX_UG_NEGATIVE, RSMX_UG_ABS, RSMX_UG_SIGN, RSMX_UG_SQRT, RSMX_UG_RSQRT,
  RSMX_UG_CBRT, RSMX_UG_RCBRT, RSMX_UG_SQUARE, RSMX_UG_RECIPROCAL, RSMX_UG_EXP,
  RSMX_UG_EXPM1, RSMX_UG_LOG, RSMX_UG_LOG1P, RSMX_UG_LOG2, RSMX_UG_LOG10, RSMX_UG_SIN,
  RSMX_UG_COS, RSMX_UG_TAN, RSMX_UG_ARCSIN, RSMX_UG_ARCCOS, RSMX_UG_ARCTAN, RSMX_UG_SINH,
  RSMX_UG_COSH, RSMX_UG_TANH, RSMX_UG_ARCSINH, RSMX_UG_ARCCOSH, RSMX_UG_ARCTANH,
  RSMX_UG_DEGREES, RSMX_UG_RADIANS, RSMX_UG_SIGMOID, RSMX_UG_SOFTSIGN, RSMX_UG_RELU,
  RSMX_UG_FLOOR, RSMX_UG_CEIL, RSMX_UG_ROUND, RSMX_UG_RINT, RSMX_UG_FIX, RSMX_UG_TRUNC,
  RSMX_UG_LOGICAL_NOT, RSMX_UG_CLIP, RSMX_UG_ERF, RSMX_UG_ERFINV, RSMX_UG_GAMMA,
  RSMX_UG_GAMMALN, RSMX_UG_HARD_SIGMOID
};

#define RSMX_GRAD_MATH(name, fname)                                              \
  __device__ __forceinline__ float gm_##name(float x) { return fname##f(x); }   \
  __device__ __forceinline__ double gm_##name(double x) { return fname(x); }
RSMX_GRAD_MATH(sqrt, sqrt) RSMX_GRAD_MATH(cbrt, cbrt) RSMX_GRAD_MATH(exp, exp)
RSMX_GRAD_MATH(sinh, sinh)
RSMX_GRAD_MATH(cosh, cosh) RSMX_GRAD_MATH(floor, floor) RSMX_GRAD_MATH(log, log)
RSMX_GRAD_MATH(fabs, fabs) RSMX_GRAD_MATH(tgamma, tgamma)

#define RSMX_GRAD_MATH2(name, fname)                                                       \
  __device__ __forceinline__ float gm_##name(float x, float y) { return fname##f(x, y); } \
  __device__ __forceinline__ double gm_##name(double x, double y) { return fname(x, y); }
RSMX_GRAD_MATH2(pow, pow) RSMX_GRAD_MATH2(hypot, hypot)

#ifdef __CUDACC_RTC__
__device__ __forceinline__ double gm_sinpi(double x) { return sinpi(x); }
__device__ __forceinline__ double gm_cospi(double x) { return cospi(x); }
#else
__device__ __forceinline__ double gm_sinpi(double x) { return sin(x * 3.14159265358979323846); }
__device__ __forceinline__ double gm_cospi(double x) { return cos(x * 3.14159265358979323846); }
#endif

// sin(x), or cos(x) with `cosine`, in double without the library's reduction of large
// arguments (which keeps an array on the stack): x / pi in double-double, reduced modulo 2
// exactly, then sinpi or cospi. Accurate to a few units in the last place of a double for
// |x| up to about 2^50.
__device__ __forceinline__ double gm_sin_cos(double x, bool cosine) {
  const double inv_pi_hi = 0.3183098861837907, inv_pi_lo = -1.9678676675182486e-17;
  const double hi = x * inv_pi_hi;
  const double lo = fma(x, inv_pi_hi, -hi) + x * inv_pi_lo;
  const double turns = (hi - 2.0 * rint(0.5 * hi)) + lo;
  return cosine ? gm_cospi(turns) : gm_sinpi(turns);
}
template <typename C> __device__ __forceinline__ C gm_sin(C x) { return (C)gm_sin_cos((double)x, false); }
template <typename C> __device__ __forceinline__ C gm_cos(C x) { return (C)gm_sin_cos((double)x, true); }

// The digamma function (the derivative of lgamma): reflection below 0, the recurrence up
// to 10, then the asymptotic series.
__device__ double gm_digamma(double x) {
  const double pi = 3.14159265358979323846;
  if (x != x || (x <= 0.0 && x == floor(x))) return nan("");
  double acc = 0.0;
  if (x < 0.0) {
    acc = -pi * gm_cospi(x) / gm_sinpi(x);  // -pi / tan(pi x), exact reduction
    x = 1.0 - x;
  }
  while (x < 10.0) {
    acc -= 1.0 / x;
    x += 1.0;
  }
  const double r = 1.0 / (x * x);
  const double series =
      r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132)))));
  return acc + log(x) - 0.5 / x - series;
}

// dy * f' where `v` is the input, or the output for the kinds that use it.
template <typename C>
__device__ __forceinline__ C unary_grad(int op, C g, C v, double lo, double hi) {
  const C one = (C)1, zero = (C)0;
  switch (op) {
    case RSMX_UG_COPY: return g;
    case RSMX_UG_NEGATIVE: return -g;
    case RSMX_UG_ABS: return v > zero ? g : (v < zero ? -g : zero);
    case RSMX_UG_SQRT: return g / (v + v);
    case RSMX_UG_RSQRT: return g * (C)-0.5 / (v * gm_sqrt(v));
    case RSMX_UG_CBRT: return g / ((C)3 * v * v);
    case RSMX_UG_RCBRT: return g * (C)(-1.0 / 3.0) / (v * gm_cbrt(v));
    case RSMX_UG_SQUARE: return g * (v + v);
    case RSMX_UG_RECIPROCAL: return -g / (v * v);
    case RSMX_UG_EXP: return g * v;
    case RSMX_UG_EXPM1: return g * gm_exp(v);
    case RSMX_UG_LOG: return g / v;
    case RSMX_UG_LOG1P: return g / (one + v);
    case RSMX_UG_LOG2: return g / (v * (C)0.693147180559945309417232121458176568);
    case RSMX_UG_LOG10: return g / (v * (C)2.30258509299404568401799145468436421);
    case RSMX_UG_SIN: return g * gm_cos(v);
    case RSMX_UG_COS: return -g * gm_sin(v);
    case RSMX_UG_TAN: return g * (one + v * v);
    case RSMX_UG_ARCSIN: return g / gm_sqrt(one - v * v);
    case RSMX_UG_ARCCOS: return -g / gm_sqrt(one - v * v);
    case RSMX_UG_ARCTAN: return g / (one + v * v);
    case RSMX_UG_SINH: return g * gm_cosh(v);
    case RSMX_UG_COSH: return g * gm_sinh(v);
    case RSMX_UG_TANH: return g * (one - v * v);
    case RSMX_UG_ARCSINH: return g / gm_sqrt(v * v + one);
    case RSMX_UG_ARCCOSH: return g / gm_sqrt(v * v - one);
    case RSMX_UG_ARCTANH: return g / (one - v * v);
    case RSMX_UG_DEGREES: return g * (C)(180.0 / 3.14159265358979323846);
    case RSMX_UG_RADIANS: return g * (C)(3.14159265358979323846 / 180.0);
    case RSMX_UG_SIGMOID: return g * v * (one - v);
    case RSMX_UG_SOFTSIGN: {
      C d = one + gm_fabs(v);
      return g / (d * d);
    }
    case RSMX_UG_RELU: return v > zero ? g : (v != v ? v : zero);
    // The input lies in [lo, hi], bounds included, as MXNet's clip backward.
    case RSMX_UG_CLIP: return (v >= (C)lo && v <= (C)hi) ? g : zero;
    case RSMX_UG_ERF: return g * (C)1.12837916709551257390 * gm_exp(-v * v);
    // From the output y = erfinv(x).
    case RSMX_UG_ERFINV: return g * (C)0.88622692545275801364 * gm_exp(v * v);
    case RSMX_UG_GAMMA: return g * (C)(tgamma((double)v) * gm_digamma((double)v));
    case RSMX_UG_GAMMALN: return g * (C)gm_digamma((double)v);
    case RSMX_UG_HARD_SIGMOID: {
      C y = (C)lo * v + (C)hi;
      return (y > zero && y < one) ? g * (C)lo : zero;
    }
    default: return zero;  // sign, rounding and logical_not: zero gradient
  }
}

// Writes `v` (compute type) to out[i] rounded to T, or adds it in T's arithmetic.
template <typename T>
__device__ __forceinline__ void grad_put(T* out, rsmx_i64 i, typename rsmx_num<T>::compute v,
                                         int add) {
  T t = rsmx_num<T>::store(v);
  out[i] = add ? rsmx_num<T>::store(rsmx_num<T>::load(out[i]) + rsmx_num<T>::load(t)) : t;
}

template <typename T>
__device__ void unary_backward(T* out, const T* g, const T* v, rsmx_i64 n, int op, int add,
                               double lo, double hi) {
  RSMX_GRID_LOOP(i, n) {
    grad_put(out, i, unary_grad(op, rsmx_num<T>::load(g[i]), rsmx_num<T>::load(v[i]), lo, hi),
             add);
  }
}

// ---------------------------------------------------------------------------------------
// The binary operators: codes in the order of the core's `BinaryKind` (as elemwise.cu).

enum rsmx_binary_grad {
  RSMX_BG_ADD, RSMX_BG_SUB, RSMX_BG_MUL, RSMX_BG_DIV, RSMX_BG_MOD, RSMX_BG_POWER,
  RSMX_BG_MAXIMUM, RSMX_BG_MINIMUM, RSMX_BG_HYPOT
};

// dy * d(x op s)/dx, or of (s op x) with `reverse`.
template <typename C>
__device__ __forceinline__ C scalar_grad(int op, int reverse, C s, C g, C x) {
  const C zero = (C)0, one = (C)1;
  switch (op) {
    case RSMX_BG_ADD: return g;
    case RSMX_BG_SUB: return reverse ? -g : g;
    case RSMX_BG_MUL: return g * s;
    case RSMX_BG_DIV: return reverse ? -g * s / (x * x) : g / s;
    case RSMX_BG_MOD: return reverse ? -g * gm_floor(s / x) : g;
    case RSMX_BG_POWER: return reverse ? g * gm_pow(s, x) * gm_log(s) : g * s * gm_pow(x, s - one);
    case RSMX_BG_MAXIMUM: return x >= s ? g : zero;
    case RSMX_BG_MINIMUM: return x <= s ? g : zero;
    case RSMX_BG_HYPOT: return g * x / gm_hypot(x, s);
    default: return zero;
  }
}

template <typename T>
__device__ void scalar_backward(T* out, const T* g, const T* x, rsmx_i64 n, int op,
                                int reverse, int add, double s) {
  typedef typename rsmx_num<T>::compute C;
  const C sc = (C)s;
  RSMX_GRID_LOOP(i, n) {
    grad_put(out, i,
             scalar_grad(op, reverse, sc, rsmx_num<T>::load(g[i]), rsmx_num<T>::load(x[i])),
             add);
  }
}

// d(a op b)/da * g (`lhs`) or d(a op b)/db * g, as MXNet defines them at ties.
template <typename C>
__device__ __forceinline__ C binary_partial(int op, int lhs, C g, C a, C b) {
  const C zero = (C)0, one = (C)1;
  switch (op) {
    case RSMX_BG_ADD: return g;
    case RSMX_BG_SUB: return lhs ? g : -g;
    case RSMX_BG_MUL: return lhs ? g * b : g * a;
    case RSMX_BG_DIV: return lhs ? g / b : -g * a / (b * b);
    case RSMX_BG_MOD: return lhs ? g : -g * gm_floor(a / b);
    case RSMX_BG_POWER: return lhs ? g * b * gm_pow(a, b - one) : g * gm_pow(a, b) * gm_log(a);
    case RSMX_BG_MAXIMUM: return (lhs ? a >= b : a < b) ? g : zero;
    case RSMX_BG_MINIMUM: return (lhs ? a <= b : a > b) ? g : zero;
    case RSMX_BG_HYPOT: return (lhs ? g * a : g * b) / gm_hypot(a, b);
    default: return zero;
  }
}

#define RSMX_GRAD_MAX_DIM 8

// One side's gradient of a binary operator over the output's (full) shape, summed over
// the axes the side was stretched along. The output (the side's gradient) enumerates the
// kept axes in order; each of its elements sums over every index of the reduced axes.
// Strides are in elements of g, a and b along each axis (0 where an input broadcasts).
struct rsmx_sum_to {
  int nkeep, nreduce;
  rsmx_i64 keep_shape[RSMX_GRAD_MAX_DIM], keep_g[RSMX_GRAD_MAX_DIM],
      keep_a[RSMX_GRAD_MAX_DIM], keep_b[RSMX_GRAD_MAX_DIM];
  rsmx_i64 red_shape[RSMX_GRAD_MAX_DIM], red_g[RSMX_GRAD_MAX_DIM], red_a[RSMX_GRAD_MAX_DIM],
      red_b[RSMX_GRAD_MAX_DIM];
};

// Offsets into g, a and b of kept index `o` (or, with kReduced, of reduced index `o`).
template <bool kReduced>
__device__ __forceinline__ void sum_to_offsets(const rsmx_sum_to& d, rsmx_i64 o, rsmx_i64& og,
                                               rsmx_i64& oa, rsmx_i64& ob) {
  og = 0;
  oa = 0;
  ob = 0;
  for (int k = (kReduced ? d.nreduce : d.nkeep) - 1; k >= 0; k--) {
    const rsmx_i64 size = kReduced ? d.red_shape[k] : d.keep_shape[k];
    const rsmx_i64 j = o % size;
    o /= size;
    og += j * (kReduced ? d.red_g[k] : d.keep_g[k]);
    oa += j * (kReduced ? d.red_a[k] : d.keep_a[k]);
    ob += j * (kReduced ? d.red_b[k] : d.keep_b[k]);
  }
}

// The partial at one position, rounded to T as the CPU's full-shape scratch holds it.
template <typename T>
__device__ __forceinline__ typename rsmx_num<T>::compute partial_at(const T* g, const T* a,
                                                                    const T* b, rsmx_i64 og,
                                                                    rsmx_i64 oa, rsmx_i64 ob,
                                                                    int op, int lhs) {
  typedef rsmx_num<T> N;
  return N::load(N::store(binary_partial(op, lhs, N::load(g[og]), N::load(a[oa]), N::load(b[ob]))));
}

// One thread per output element, summing its `count` reduced positions in order.
template <typename T>
__device__ void binary_backward(T* out, const T* g, const T* a, const T* b, rsmx_i64 n,
                                const rsmx_sum_to& d, rsmx_i64 count, int op, int lhs,
                                int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 kg, ka, kb;
    sum_to_offsets<false>(d, i, kg, ka, kb);
    C acc = (C)0;
    for (rsmx_i64 r = 0; r < count; r++) {
      rsmx_i64 rg, ra, rb;
      sum_to_offsets<true>(d, r, rg, ra, rb);
      C p = partial_at(g, a, b, kg + rg, ka + ra, kb + rb, op, lhs);
      acc = r == 0 ? p : acc + p;
    }
    grad_put(out, i, acc, add);
  }
}

#define RSMX_GRAD_MAX_BLOCK 1024

// One block per output element (blocks loop over them): each thread sums a fixed strided
// share of the `count` reduced positions, then a tree over shared memory adds the shares;
// the result depends only on the block size. blockDim.x must be a power of two of at most
// RSMX_GRAD_MAX_BLOCK.
template <typename T>
__device__ void binary_backward_block(T* out, const T* g, const T* a, const T* b, rsmx_i64 n,
                                      const rsmx_sum_to& d, rsmx_i64 count, int op, int lhs,
                                      int add) {
  typedef typename rsmx_num<T>::compute C;
  __shared__ C share[RSMX_GRAD_MAX_BLOCK];
  const unsigned t = threadIdx.x;
  for (rsmx_i64 i = blockIdx.x; i < n; i += gridDim.x) {
    rsmx_i64 kg, ka, kb;
    sum_to_offsets<false>(d, i, kg, ka, kb);
    C acc = (C)0;
    for (rsmx_i64 r = t; r < count; r += blockDim.x) {
      rsmx_i64 rg, ra, rb;
      sum_to_offsets<true>(d, r, rg, ra, rb);
      acc += partial_at(g, a, b, kg + rg, ka + ra, kb + rb, op, lhs);
    }
    share[t] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) share[t] += share[t + s];
      __syncthreads();
    }
    if (t == 0) grad_put(out, i, share[0], add);
    __syncthreads();
  }
}

#define RSMX_ADD_N(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_sum_inputs in, rsmx_i64 n,    \
                                               int count, int keep) {                    \
    kernel<T>(out, in, n, count, keep);                                                   \
  }
#define RSMX_UNARY_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* v,            \
                                               rsmx_i64 n, int op, int add, double lo,   \
                                               double hi) {                              \
    kernel<T>(out, g, v, n, op, add, lo, hi);                                             \
  }
#define RSMX_SCALAR_BACKWARD(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* x,            \
                                               rsmx_i64 n, int op, int reverse, int add, \
                                               double s) {                               \
    kernel<T>(out, g, x, n, op, reverse, add, s);                                         \
  }
#define RSMX_BINARY_BACKWARD(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const T* a,            \
                                               const T* b, rsmx_i64 n, rsmx_sum_to d,    \
                                               rsmx_i64 count, int op, int lhs,          \
                                               int add) {                                \
    kernel<T>(out, g, a, b, n, d, count, op, lhs, add);                                   \
  }

RSMX_DTYPE_NUM(RSMX_ADD_N, add_n)
RSMX_DTYPE_FLOAT(RSMX_UNARY_BACKWARD, unary_backward)
RSMX_DTYPE_FLOAT(RSMX_SCALAR_BACKWARD, scalar_backward)
RSMX_DTYPE_FLOAT(RSMX_BINARY_BACKWARD, binary_backward)
RSMX_DTYPE_FLOAT(RSMX_BINARY_BACKWARD, binary_backward_block)
