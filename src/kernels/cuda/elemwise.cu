// Kernels of the element-wise operators: unary, binary on equal
// shapes, binary with a scalar, and binary with broadcasting. One kernel per dtype; the
// operator is chosen by its code (the order of `enum rsmx_unary` / `enum rsmx_binary`,
// which the core's launcher follows). `add` accumulates into the output (`req=add`).
#include "common.cuh"

enum rsmx_unary {
  RSMX_UNARY_COPY, RSMX_UNARY_NEGATIVE, RSMX_UNARY_ABS, RSMX_UNARY_SIGN, RSMX_UNARY_SQRT,
  RSMX_UNARY_RSQRT, RSMX_UNARY_CBRT, RSMX_UNARY_RCBRT, RSMX_UNARY_SQUARE,
  RSMX_UNARY_RECIPROCAL, RSMX_UNARY_EXP, RSMX_UNARY_EXPM1, RSMX_UNARY_LOG, RSMX_UNARY_LOG1P,
  RSMX_UNARY_LOG2, RSMX_UNARY_LOG10, RSMX_UNARY_SIN, RSMX_UNARY_COS, RSMX_UNARY_TAN,
  RSMX_UNARY_ARCSIN, RSMX_UNARY_ARCCOS, RSMX_UNARY_ARCTAN, RSMX_UNARY_SINH, RSMX_UNARY_COSH,
  RSMX_UNARY_TANH, RSMX_UNARY_ARCSINH, RSMX_UNARY_ARCCOSH, RSMX_UNARY_ARCTANH,
  RSMX_UNARY_DEGREES, RSMX_UNARY_RADIANS, RSMX_UNARY_SIGMOID, RSMX_UNARY_SOFTSIGN,
  RSMX_UNARY_RELU, RSMX_UNARY_FLOOR, RSMX_UNARY_CEIL, RSMX_UNARY_ROUND, RSMX_UNARY_RINT,
  RSMX_UNARY_FIX, RSMX_UNARY_TRUNC, RSMX_UNARY_LOGICAL_NOT, RSMX_UNARY_CLIP,
  RSMX_UNARY_ERF, RSMX_UNARY_ERFINV, RSMX_UNARY_GAMMA, RSMX_UNARY_GAMMALN,
  RSMX_UNARY_HARD_SIGMOID
};

// The C math library's float and double functions under one name each.
#define RSMX_MATH(name, fname)                                              \
  __device__ __forceinline__ float m_##name(float x) { return fname##f(x); } \
  __device__ __forceinline__ double m_##name(double x) { return fname(x); }
RSMX_MATH(sqrt, sqrt) RSMX_MATH(cbrt, cbrt) RSMX_MATH(exp, exp) RSMX_MATH(expm1, expm1)
RSMX_MATH(log, log) RSMX_MATH(log1p, log1p) RSMX_MATH(log2, log2) RSMX_MATH(log10, log10)
RSMX_MATH(sin, sin) RSMX_MATH(cos, cos) RSMX_MATH(tan, tan) RSMX_MATH(asin, asin)
RSMX_MATH(acos, acos) RSMX_MATH(atan, atan) RSMX_MATH(sinh, sinh) RSMX_MATH(cosh, cosh)
RSMX_MATH(tanh, tanh) RSMX_MATH(asinh, asinh) RSMX_MATH(acosh, acosh)
RSMX_MATH(atanh, atanh) RSMX_MATH(floor, floor) RSMX_MATH(ceil, ceil)
RSMX_MATH(round, round) RSMX_MATH(rint, rint) RSMX_MATH(trunc, trunc) RSMX_MATH(fabs, fabs)
RSMX_MATH(erf, erf) RSMX_MATH(erfinv, erfinv) RSMX_MATH(tgamma, tgamma)
RSMX_MATH(lgamma, lgamma)

#define RSMX_MATH2(name, fname)                                                        \
  __device__ __forceinline__ float m_##name(float x, float y) { return fname##f(x, y); } \
  __device__ __forceinline__ double m_##name(double x, double y) { return fname(x, y); }
RSMX_MATH2(fmod, fmod) RSMX_MATH2(pow, pow) RSMX_MATH2(hypot, hypot)

template <typename C>
__device__ __forceinline__ C unary_op(int op, C v, double a, double b) {
  const C one = (C)1, zero = (C)0;
  const C pi = (C)3.14159265358979323846;
  switch (op) {
    case RSMX_UNARY_COPY: return v;
    case RSMX_UNARY_NEGATIVE: return -v;
    case RSMX_UNARY_ABS: return m_fabs(v);
    case RSMX_UNARY_SIGN: return v > zero ? one : (v < zero ? -one : zero);
    case RSMX_UNARY_SQRT: return m_sqrt(v);
    case RSMX_UNARY_RSQRT: return one / m_sqrt(v);
    case RSMX_UNARY_CBRT: return m_cbrt(v);
    case RSMX_UNARY_RCBRT: return one / m_cbrt(v);
    case RSMX_UNARY_SQUARE: return v * v;
    case RSMX_UNARY_RECIPROCAL: return one / v;
    case RSMX_UNARY_EXP: return m_exp(v);
    case RSMX_UNARY_EXPM1: return m_expm1(v);
    case RSMX_UNARY_LOG: return m_log(v);
    case RSMX_UNARY_LOG1P: return m_log1p(v);
    case RSMX_UNARY_LOG2: return m_log2(v);
    case RSMX_UNARY_LOG10: return m_log10(v);
    case RSMX_UNARY_SIN: return m_sin(v);
    case RSMX_UNARY_COS: return m_cos(v);
    case RSMX_UNARY_TAN: return m_tan(v);
    case RSMX_UNARY_ARCSIN: return m_asin(v);
    case RSMX_UNARY_ARCCOS: return m_acos(v);
    case RSMX_UNARY_ARCTAN: return m_atan(v);
    case RSMX_UNARY_SINH: return m_sinh(v);
    case RSMX_UNARY_COSH: return m_cosh(v);
    case RSMX_UNARY_TANH: return m_tanh(v);
    case RSMX_UNARY_ARCSINH: return m_asinh(v);
    case RSMX_UNARY_ARCCOSH: return m_acosh(v);
    case RSMX_UNARY_ARCTANH: return m_atanh(v);
    case RSMX_UNARY_DEGREES: return v * ((C)180 / pi);
    case RSMX_UNARY_RADIANS: return v * (pi / (C)180);
    case RSMX_UNARY_SIGMOID: return one / (one + m_exp(-v));
    case RSMX_UNARY_SOFTSIGN: return v / (one + m_fabs(v));
    case RSMX_UNARY_RELU: return v <= zero ? zero : v;  // NaN stays NaN
    case RSMX_UNARY_FLOOR: return m_floor(v);
    case RSMX_UNARY_CEIL: return m_ceil(v);
    case RSMX_UNARY_ROUND: return m_round(v);
    case RSMX_UNARY_RINT: return m_rint(v);
    case RSMX_UNARY_FIX:
    case RSMX_UNARY_TRUNC: return m_trunc(v);
    case RSMX_UNARY_LOGICAL_NOT: return v == zero ? one : zero;
    case RSMX_UNARY_CLIP: return v < (C)a ? (C)a : (v > (C)b ? (C)b : v);
    case RSMX_UNARY_ERF: return m_erf(v);
    case RSMX_UNARY_ERFINV: return m_erfinv(v);
    case RSMX_UNARY_GAMMA: return m_tgamma(v);
    case RSMX_UNARY_GAMMALN: return m_lgamma(v);
    case RSMX_UNARY_HARD_SIGMOID: {
      C y = (C)a * v + (C)b;
      return y < zero ? zero : (y > one ? one : y);
    }
    default: return v;
  }
}

enum rsmx_binary {
  RSMX_BINARY_ADD, RSMX_BINARY_SUB, RSMX_BINARY_MUL, RSMX_BINARY_DIV, RSMX_BINARY_MOD,
  RSMX_BINARY_POWER, RSMX_BINARY_MAXIMUM, RSMX_BINARY_MINIMUM, RSMX_BINARY_HYPOT,
  RSMX_BINARY_EQUAL, RSMX_BINARY_NOT_EQUAL, RSMX_BINARY_GREATER, RSMX_BINARY_GREATER_EQUAL,
  RSMX_BINARY_LESSER, RSMX_BINARY_LESSER_EQUAL, RSMX_BINARY_LOGICAL_AND,
  RSMX_BINARY_LOGICAL_OR, RSMX_BINARY_LOGICAL_XOR
};

// The comparisons and logical operators: 1 or 0 in the operands' type.
template <typename C>
__device__ __forceinline__ C compare_op(int op, C x, C y) {
  const C one = (C)1, zero = (C)0;
  switch (op) {
    case RSMX_BINARY_EQUAL: return x == y ? one : zero;
    case RSMX_BINARY_NOT_EQUAL: return x != y ? one : zero;
    case RSMX_BINARY_GREATER: return x > y ? one : zero;
    case RSMX_BINARY_GREATER_EQUAL: return x >= y ? one : zero;
    case RSMX_BINARY_LESSER: return x < y ? one : zero;
    case RSMX_BINARY_LESSER_EQUAL: return x <= y ? one : zero;
    case RSMX_BINARY_LOGICAL_AND: return (x != zero && y != zero) ? one : zero;
    case RSMX_BINARY_LOGICAL_OR: return (x != zero || y != zero) ? one : zero;
    case RSMX_BINARY_LOGICAL_XOR: return ((x != zero) != (y != zero)) ? one : zero;
    default: return x;
  }
}

template <typename C>
__device__ __forceinline__ C binary_op(int op, C x, C y) {
  const C zero = (C)0;
  switch (op) {
    case RSMX_BINARY_ADD: return x + y;
    case RSMX_BINARY_SUB: return x - y;
    case RSMX_BINARY_MUL: return x * y;
    case RSMX_BINARY_DIV: return x / y;
    case RSMX_BINARY_MOD: {  // the sign of the divisor, as numpy; 0 for a zero divisor
      if (y == zero) return zero;
      C r = m_fmod(x, y);
      return (r != zero && ((r < zero) != (y < zero))) ? r + y : r;
    }
    case RSMX_BINARY_POWER: return m_pow(x, y);
    case RSMX_BINARY_MAXIMUM: return (x > y || x != x) ? x : y;
    case RSMX_BINARY_MINIMUM: return (x < y || x != x) ? x : y;
    case RSMX_BINARY_HYPOT: return m_hypot(x, y);
    default: return compare_op<C>(op, x, y);
  }
}

// An integer type T with unsigned twin U: its extremes, and its sign read from the top
// bit so that unsigned types need no comparison with zero.
template <typename T, typename U, bool kSigned>
struct int_limits {
  static constexpr U top = (U)((U)1 << ((int)sizeof(T) * 8 - 1));
  __device__ __forceinline__ static T lowest() { return kSigned ? (T)top : (T)0; }
  __device__ __forceinline__ static T highest() { return (T)(kSigned ? (U)(top - 1) : (U)~(U)0); }
  __device__ __forceinline__ static bool negative(T v) { return kSigned && ((U)v & top); }
};

// `v` as an integer type, saturating at its extremes, NaN giving 0 (Rust's `as`).
template <typename T, typename U, bool kSigned>
__device__ __forceinline__ T saturate(double v) {
  typedef int_limits<T, U, kSigned> L;
  if (v != v) return (T)0;
  if (v <= (double)L::lowest()) return L::lowest();
  if (v >= (double)L::highest()) return L::highest();
  return (T)v;
}

// Integer arithmetic as the CPU kernels do it: wrapping, a zero divisor giving 0, the
// remainder taking the divisor's sign, a negative power giving 0 (1 for a base of 1), and
// hypot computed in double and saturated back.
template <typename T, typename U, bool kSigned>
__device__ __forceinline__ T int_binary_op(int op, T x, T y) {
  typedef int_limits<T, U, kSigned> L;
  const bool y_neg = L::negative(y);
  switch (op) {
    case RSMX_BINARY_ADD: return (T)((U)x + (U)y);
    case RSMX_BINARY_SUB: return (T)((U)x - (U)y);
    case RSMX_BINARY_MUL: return (T)((U)x * (U)y);
    case RSMX_BINARY_DIV:
      if (y == (T)0) return (T)0;
      if (kSigned && x == L::lowest() && (U)y == (U)~(U)0) return x;
      return (T)(x / y);
    case RSMX_BINARY_MOD: {
      if (y == (T)0 || (kSigned && (U)y == (U)~(U)0)) return (T)0;
      T r = (T)(x % y);
      return (r != (T)0 && L::negative(r) != y_neg) ? (T)((U)r + (U)y) : r;
    }
    case RSMX_BINARY_POWER: {
      if (y_neg) return x == (T)1 ? (T)1 : (T)0;
      unsigned int e = (unsigned int)(unsigned long long)(U)y;
      U base = (U)x, acc = 1;
      for (; e; e >>= 1) {
        if (e & 1u) acc = (U)(acc * base);
        base = (U)(base * base);
      }
      return (T)acc;
    }
    case RSMX_BINARY_MAXIMUM: return x > y ? x : y;
    case RSMX_BINARY_MINIMUM: return x < y ? x : y;
    case RSMX_BINARY_HYPOT: return saturate<T, U, kSigned>(hypot((double)x, (double)y));
    default: return compare_op<T>(op, x, y);
  }
}

// The binary operators for storage type T, in its compute type, and a scalar operand
// as the CPU kernels take it: rounded to T first.
template <typename T> struct binary_of {
  typedef typename rsmx_num<T>::compute C;
  __device__ __forceinline__ static C apply(int op, C x, C y) { return binary_op<C>(op, x, y); }
  __device__ __forceinline__ static C scalar(double s) {
    return rsmx_num<T>::load(rsmx_num<T>::store((C)s));
  }
};
#define RSMX_INT_BINARY(T, U, kSigned)                                                \
  template <> struct binary_of<T> {                                                   \
    __device__ __forceinline__ static T apply(int op, T x, T y) {                     \
      return int_binary_op<T, U, kSigned>(op, x, y);                                  \
    }                                                                                 \
    __device__ __forceinline__ static T scalar(double s) {                            \
      return saturate<T, U, kSigned>(s);                                              \
    }                                                                                 \
  };
RSMX_INT_BINARY(rsmx_u8, unsigned char, false)
RSMX_INT_BINARY(rsmx_i8, unsigned char, true)
RSMX_INT_BINARY(rsmx_i32, unsigned int, true)
RSMX_INT_BINARY(rsmx_i64, unsigned long long, true)

// Writes `v` (compute type) to out[i], or adds it.
template <typename T>
__device__ __forceinline__ void put(T* out, rsmx_i64 i, typename rsmx_num<T>::compute v,
                                    int add) {
  out[i] = rsmx_num<T>::store(
      add ? binary_of<T>::apply(RSMX_BINARY_ADD, rsmx_num<T>::load(out[i]), v) : v);
}

// 16 bytes of T, loaded and stored whole: one wide memory access keeps more bytes in
// flight per thread than one element at a time.
template <typename T> struct alignas(16) rsmx_pack {
  T v[16 / sizeof(T)];
};

// out[i] (=|+=) f(x[i], y[i]) for i < n, with f in T's compute type; without `y`, f
// gets x[i] twice. Types of two bytes or more go a pack at a time when every pointer is
// 16-byte aligned; the remainder, and everything otherwise, one element at a time.
template <typename T, typename F>
__device__ __forceinline__ void map_into(T* out, const T* x, const T* y, rsmx_i64 n, int add,
                                         F f) {
  typedef rsmx_num<T> N;
  typedef rsmx_pack<T> P;
  const int W = sizeof(P) / sizeof(T);
  const T* y_or_x = y ? y : x;
  const unsigned long long bits =
      (unsigned long long)out | (unsigned long long)x | (unsigned long long)y_or_x;
  rsmx_i64 done = 0;
  if (sizeof(T) >= 2 && (bits & 15) == 0) {
    const rsmx_i64 packs = n / W;
    RSMX_GRID_LOOP(p, packs) {
      const P a = ((const P*)x)[p];
      const P b = y ? ((const P*)y)[p] : a;
      P o = add ? ((const P*)out)[p] : a;
#pragma unroll
      for (int k = 0; k < W; k++) {
        typename N::compute v = f(N::load(a.v[k]), N::load(b.v[k]));
        o.v[k] = N::store(add ? binary_of<T>::apply(RSMX_BINARY_ADD, N::load(o.v[k]), v) : v);
      }
      ((P*)out)[p] = o;
    }
    done = packs * W;
  }
  RSMX_GRID_LOOP(j, n - done) {
    const rsmx_i64 i = done + j;
    put(out, i, f(N::load(x[i]), N::load(y_or_x[i])), add);
  }
}

// out[i] (=|+=) op(lhs[i], rhs[i]); either input may be `out`.
template <typename T>
__device__ void binary(T* out, const T* lhs, const T* rhs, rsmx_i64 n, int op, int add) {
  typedef typename rsmx_num<T>::compute C;
  map_into(out, lhs, rhs, n, add, [op](C x, C y) { return binary_of<T>::apply(op, x, y); });
}

// out[i] (=|+=) op(in[i], s), or op(s, in[i]) with `reverse`.
template <typename T>
__device__ void binary_scalar(T* out, const T* in, rsmx_i64 n, int op, int reverse, int add,
                              double s) {
  typedef typename rsmx_num<T>::compute C;
  const C c = binary_of<T>::scalar(s);
  map_into(out, in, (const T*)0, n, add, [=](C v, C) {
    return reverse ? binary_of<T>::apply(op, c, v) : binary_of<T>::apply(op, v, c);
  });
}

#define RSMX_MAX_DIM 8

// The output's shape and each input's element strides over it (0 where it broadcasts).
struct rsmx_broadcast {
  int ndim;
  rsmx_i64 shape[RSMX_MAX_DIM];
  rsmx_i64 lhs_stride[RSMX_MAX_DIM];
  rsmx_i64 rhs_stride[RSMX_MAX_DIM];
};

// out (=|+=) op(lhs, rhs) with numpy broadcasting; `n` is the output's size.
template <typename T>
__device__ void broadcast(T* out, const T* lhs, const T* rhs, rsmx_i64 n, rsmx_broadcast b,
                          int op, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 rest = i, l = 0, r = 0;
    for (int d = b.ndim - 1; d >= 0; d--) {
      rsmx_i64 k = rest % b.shape[d];
      rest /= b.shape[d];
      l += k * b.lhs_stride[d];
      r += k * b.rhs_stride[d];
    }
    put(out, i, binary_of<T>::apply(op, rsmx_num<T>::load(lhs[l]), rsmx_num<T>::load(rhs[r])),
        add);
  }
}

// Unary operators on integers as the CPU kernels do them: the exact ones in the type
// (wrapping), rounding ones the identity, the others in double precision saturated back.
template <typename T, typename U, bool kSigned>
__device__ __forceinline__ T int_unary_op(int op, T v, double a, double b) {
  typedef int_limits<T, U, kSigned> L;
  const bool neg = L::negative(v);
  switch (op) {
    case RSMX_UNARY_COPY: case RSMX_UNARY_FLOOR: case RSMX_UNARY_CEIL: case RSMX_UNARY_ROUND:
    case RSMX_UNARY_RINT: case RSMX_UNARY_FIX: case RSMX_UNARY_TRUNC: return v;
    case RSMX_UNARY_NEGATIVE: return (T)((U)0 - (U)v);
    case RSMX_UNARY_ABS: return neg ? (T)((U)0 - (U)v) : v;
    case RSMX_UNARY_SIGN: return neg ? (T)(U)~(U)0 : (v != (T)0 ? (T)1 : (T)0);
    case RSMX_UNARY_SQUARE: return (T)((U)v * (U)v);
    case RSMX_UNARY_RELU: return neg ? (T)0 : v;
    case RSMX_UNARY_LOGICAL_NOT: return v == (T)0 ? (T)1 : (T)0;
    case RSMX_UNARY_CLIP: {
      double f = (double)v;
      return f < a ? saturate<T, U, kSigned>(a) : (f > b ? saturate<T, U, kSigned>(b) : v);
    }
    default: return saturate<T, U, kSigned>(unary_op<double>(op, (double)v, a, b));
  }
}

// The unary operators for storage type T, in its compute type.
template <typename T> struct unary_of {
  typedef typename rsmx_num<T>::compute C;
  __device__ __forceinline__ static C apply(int op, C v, double a, double b) {
    return unary_op<C>(op, v, a, b);
  }
};
#define RSMX_INT_UNARY(T, U, kSigned)                                                 \
  template <> struct unary_of<T> {                                                    \
    __device__ __forceinline__ static T apply(int op, T v, double a, double b) {      \
      return int_unary_op<T, U, kSigned>(op, v, a, b);                                \
    }                                                                                 \
  };
RSMX_INT_UNARY(rsmx_u8, unsigned char, false)
RSMX_INT_UNARY(rsmx_i8, unsigned char, true)
RSMX_INT_UNARY(rsmx_i32, unsigned int, true)
RSMX_INT_UNARY(rsmx_i64, unsigned long long, true)

// out[i] (=|+=) op(in[i]); `in` may be `out` (in place).
template <typename T>
__device__ void unary(T* out, const T* in, rsmx_i64 n, int op, int add, double a, double b) {
  RSMX_GRID_LOOP(i, n) { put(out, i, unary_of<T>::apply(op, rsmx_num<T>::load(in[i]), a, b), add); }
}

#define RSMX_UNARY(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n, int op, \
                                               int add, double a, double b) {         \
    kernel<T>(out, in, n, op, add, a, b);                                             \
  }

#define RSMX_BINARY(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* lhs, const T* rhs,      \
                                               rsmx_i64 n, int op, int add) {           \
    kernel<T>(out, lhs, rhs, n, op, add);                                               \
  }
#define RSMX_BINARY_SCALAR(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n, int op, \
                                               int reverse, int add, double s) {        \
    kernel<T>(out, in, n, op, reverse, add, s);                                         \
  }
#define RSMX_BROADCAST(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* lhs, const T* rhs,      \
                                               rsmx_i64 n, rsmx_broadcast b, int op,    \
                                               int add) {                               \
    kernel<T>(out, lhs, rhs, n, b, op, add);                                            \
  }

RSMX_DTYPE_NUM(RSMX_UNARY, unary)
RSMX_DTYPE_NUM(RSMX_BINARY, binary)
RSMX_DTYPE_NUM(RSMX_BINARY_SCALAR, binary_scalar)
RSMX_DTYPE_NUM(RSMX_BROADCAST, broadcast)
