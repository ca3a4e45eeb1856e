// Kernels of the operators that move or convert data unchanged in order: joining and
// splitting along an axis (`Concat`, `stack`, `SliceChannel` and the backward of
// `Concat`) as one batched copy over up to RSMX_JOIN_PARTS parts, `Cast` between every
// dtype with MXNet's conversions, plain copies (reshapes), `MakeLoss`'s gradient and the
// triangle copies of `linalg.extracttrian` and `linalg.maketrian`.
#include "common.cuh"

// Parts one launch joins or splits.
#define RSMX_JOIN_PARTS 16

// A join or split of row-major blocks: row r of the joined array is block r of every
// part in turn; this launch covers the columns [base, base + col[nparts]) of each row,
// part p its columns [base + col[p], base + col[p + 1]).
struct rsmx_join {
  rsmx_i64 rows;
  rsmx_i64 row;  // the joined array's row length
  rsmx_i64 base;
  rsmx_i64 nparts;
  rsmx_i64 col[RSMX_JOIN_PARTS + 1];
  const void* part[RSMX_JOIN_PARTS];
  int add[RSMX_JOIN_PARTS];  // per part (split only): accumulate into it
};

// `o + v` with the dtype's arithmetic: integers wrap, float16 rounds once.
template <typename T> __device__ __forceinline__ T rsmx_acc(T o, T v) {
  return rsmx_num<T>::store(rsmx_num<T>::load(o) + rsmx_num<T>::load(v));
}
template <> __device__ __forceinline__ rsmx_i32 rsmx_acc(rsmx_i32 o, rsmx_i32 v) {
  return (rsmx_i32)((unsigned int)o + (unsigned int)v);
}
template <> __device__ __forceinline__ rsmx_i64 rsmx_acc(rsmx_i64 o, rsmx_i64 v) {
  return (rsmx_i64)((unsigned long long)o + (unsigned long long)v);
}
template <> __device__ __forceinline__ rsmx_u8 rsmx_acc(rsmx_u8 o, rsmx_u8 v) {
  return (rsmx_u8)(o + v);
}
template <> __device__ __forceinline__ rsmx_i8 rsmx_acc(rsmx_i8 o, rsmx_i8 v) {
  return (rsmx_i8)(rsmx_u8)((rsmx_u8)o + (rsmx_u8)v);
}

// The part holding column c (0 <= c < col[nparts]) of a batch.
__device__ __forceinline__ int rsmx_join_part(const rsmx_join& d, rsmx_i64 c) {
  int lo = 0, hi = (int)d.nparts - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (d.col[mid] <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// out[r, base + c] = part[p][r, c - col[p]] over the batch's columns.
template <typename T>
__device__ void join(T* out, rsmx_join d, int add) {
  const rsmx_i64 width = d.col[d.nparts];
  RSMX_GRID_LOOP(i, d.rows * width) {
    rsmx_i64 r = i / width, c = i % width;
    int p = rsmx_join_part(d, c);
    rsmx_i64 len = d.col[p + 1] - d.col[p];
    T v = ((const T*)d.part[p])[r * len + (c - d.col[p])];
    T* o = out + r * d.row + d.base + c;
    *o = add ? rsmx_acc<T>(*o, v) : v;
  }
}

// part[p][r, c - col[p]] = in[r, base + c] over the batch's columns.
template <typename T>
__device__ void split(const T* in, rsmx_join d) {
  const rsmx_i64 width = d.col[d.nparts];
  RSMX_GRID_LOOP(i, d.rows * width) {
    rsmx_i64 r = i / width, c = i % width;
    int p = rsmx_join_part(d, c);
    rsmx_i64 len = d.col[p + 1] - d.col[p];
    T v = in[r * d.row + d.base + c];
    T* o = (T*)d.part[p] + r * len + (c - d.col[p]);
    *o = d.add[p] ? rsmx_acc<T>(*o, v) : v;
  }
}

// out = in (or out += in) elementwise.
template <typename T>
__device__ void copy(T* out, const T* in, rsmx_i64 n, int add) {
  RSMX_GRID_LOOP(i, n) { out[i] = add ? rsmx_acc<T>(out[i], in[i]) : in[i]; }
}

// The count of elements of y above thresh, by one block, into *count.
template <typename T>
__device__ void count_above(const T* y, rsmx_i64 n, double thresh, rsmx_i64* count) {
  __shared__ rsmx_i64 part[256];
  rsmx_i64 c = 0;
  if (blockIdx.x == 0) {
    for (rsmx_i64 i = threadIdx.x; i < n; i += blockDim.x) {
      c += (double)rsmx_num<T>::load(y[i]) > thresh ? 1 : 0;
    }
  }
  part[threadIdx.x] = c;
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = part[0];
}

// MakeLoss's gradient: every element is scale, divided by max(*count, 1) when count is
// given.
template <typename T>
__device__ void make_loss_grad(T* out, rsmx_i64 n, double scale, const rsmx_i64* count,
                               int add) {
  typedef typename rsmx_num<T>::compute C;
  double g = scale;
  if (count) g = scale / (double)(*count > 1 ? *count : 1);
  const T v = rsmx_num<T>::store((C)g);
  RSMX_GRID_LOOP(i, n) { out[i] = add ? rsmx_acc<T>(out[i], v) : v; }
}

// One element of each n x n matrix per position: the triangle copy between the matrices
// and their packed triangles (`extract`: matrix to packed; otherwise packed to matrix,
// zeros outside the triangle). The triangle starts `k` diagonals off the main one; an
// upper triangle (k > 0, or k = 0 and not `lower`) is packed as its transpose.
template <typename T>
__device__ void trian_copy(T* out, const T* in, rsmx_i64 total, rsmx_i64 n, rsmx_i64 k,
                           int lower, int extract, int add) {
  const rsmx_i64 a = k < 0 ? -k : k;
  const rsmx_i64 t = n - a;
  const rsmx_i64 m = t * (t + 1) / 2;
  RSMX_GRID_LOOP(i, total) {
    const rsmx_i64 b = i / (n * n);
    rsmx_i64 row = (i / n) % n, col = i % n;
    if (k > 0 || (k == 0 && !lower)) {
      const rsmx_i64 tmp = row;
      row = col;
      col = tmp;
    }
    row -= a;
    const bool inside = row >= 0 && row >= col;
    const rsmx_i64 p = b * m + (inside ? row * (row + 1) / 2 + col : 0);
    if (extract) {
      if (inside) out[p] = add ? rsmx_acc<T>(out[p], in[i]) : in[i];
    } else {
      const T v = inside ? in[p] : rsmx_num<T>::store(0);
      if (add) {
        if (inside) out[i] = rsmx_acc<T>(out[i], v);
      } else {
        out[i] = v;
      }
    }
  }
}

#define RSMX_JOIN(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_join d, int add) {       \
    kernel<T>(out, d, add);                                                           \
  }
#define RSMX_SPLIT(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(const T* in, rsmx_join d) {           \
    kernel<T>(in, d);                                                                 \
  }
#define RSMX_COPY(kernel, T, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n,      \
                                               int add) {                             \
    kernel<T>(out, in, n, add);                                                       \
  }
#define RSMX_COUNT_ABOVE(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(const T* y, rsmx_i64 n, double thresh,\
                                               rsmx_i64* count) {                     \
    kernel<T>(y, n, thresh, count);                                                   \
  }
#define RSMX_MAKE_LOSS_GRAD(kernel, T, suffix)                                        \
  extern "C" __global__ void kernel##_##suffix(T* out, rsmx_i64 n, double scale,     \
                                               const rsmx_i64* count, int add) {      \
    kernel<T>(out, n, scale, count, add);                                             \
  }

RSMX_DTYPE_ALL(RSMX_JOIN, join)
RSMX_DTYPE_ALL(RSMX_SPLIT, split)
RSMX_DTYPE_ALL(RSMX_COPY, copy)
#define RSMX_TRIAN_COPY(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 total,  \
                                               rsmx_i64 n, rsmx_i64 k, int lower,     \
                                               int extract, int add) {                \
    kernel<T>(out, in, total, n, k, lower, extract, add);                             \
  }
RSMX_DTYPE_ALL(RSMX_TRIAN_COPY, trian_copy)
RSMX_DTYPE_FLOAT(RSMX_COUNT_ABOVE, count_above)
RSMX_DTYPE_FLOAT(RSMX_MAKE_LOSS_GRAD, make_loss_grad)

// ---------------------------------------------------------------------------------------
// Cast, with MXNet's (C's) conversions: a value is read as an integer (integers, bool) or
// a double (floats); floats truncate toward zero into integers (through int32 for the
// narrow ones, and the minimum for NaN or out of range, as x86 does), integers wrap, and
// anything non-zero is true.

// bool storage: one byte of 0 or 1.
struct rsmx_bool {
  unsigned char v;
};

__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_u8 v, double*) { return v; }
__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_i8 v, double*) { return v; }
__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_i32 v, double*) { return v; }
__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_i64 v, double*) { return v; }
__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_bool v, double*) { return v.v != 0; }
// Floats: the value goes to *f and the result is unused.
__device__ __forceinline__ rsmx_i64 rsmx_read(float v, double* f) { *f = v; return 0; }
__device__ __forceinline__ rsmx_i64 rsmx_read(double v, double* f) { *f = v; return 0; }
__device__ __forceinline__ rsmx_i64 rsmx_read(rsmx_half v, double* f) {
  *f = rsmx_half_to_float(v);
  return 0;
}

template <typename S> struct rsmx_src_is_float { static const bool value = false; };
template <> struct rsmx_src_is_float<float> { static const bool value = true; };
template <> struct rsmx_src_is_float<double> { static const bool value = true; };
template <> struct rsmx_src_is_float<rsmx_half> { static const bool value = true; };

__device__ __forceinline__ int rsmx_trunc_i32(double f) {
  if (f != f || f <= -2147483649.0 || f >= 2147483648.0) return (int)0x80000000u;
  return (int)f;
}
__device__ __forceinline__ rsmx_i64 rsmx_trunc_i64(double f) {
  if (f != f || f < -9223372036854775808.0 || f >= 9223372036854775808.0)
    return (rsmx_i64)0x8000000000000000ull;
  return (rsmx_i64)f;
}

// A destination type from an integer (is_float false) or a double.
template <typename D> struct rsmx_conv;
#define RSMX_CONV_NARROW(D)                                                           \
  template <> struct rsmx_conv<D> {                                                   \
    __device__ __forceinline__ static D from(bool is_float, rsmx_i64 i, double f) {   \
      return (D)(is_float ? (rsmx_i64)rsmx_trunc_i32(f) : i);                         \
    }                                                                                 \
  };
RSMX_CONV_NARROW(rsmx_u8)
RSMX_CONV_NARROW(rsmx_i8)
RSMX_CONV_NARROW(rsmx_i32)
template <> struct rsmx_conv<rsmx_i64> {
  __device__ __forceinline__ static rsmx_i64 from(bool is_float, rsmx_i64 i, double f) {
    return is_float ? rsmx_trunc_i64(f) : i;
  }
};
template <> struct rsmx_conv<float> {
  __device__ __forceinline__ static float from(bool is_float, rsmx_i64 i, double f) {
    return is_float ? (float)f : (float)i;
  }
};
template <> struct rsmx_conv<double> {
  __device__ __forceinline__ static double from(bool is_float, rsmx_i64 i, double f) {
    return is_float ? f : (double)i;
  }
};
template <> struct rsmx_conv<rsmx_half> {
  __device__ __forceinline__ static rsmx_half from(bool is_float, rsmx_i64 i, double f) {
    return rsmx_float_to_half(is_float ? (float)f : (float)i);
  }
};
template <> struct rsmx_conv<rsmx_bool> {
  __device__ __forceinline__ static rsmx_bool from(bool is_float, rsmx_i64 i, double f) {
    rsmx_bool b;
    b.v = (unsigned char)(is_float ? f != 0.0 : i != 0);
    return b;
  }
};

template <typename D> __device__ __forceinline__ D rsmx_cast_acc(D o, D v) {
  return rsmx_acc<D>(o, v);
}
template <> __device__ __forceinline__ rsmx_bool rsmx_cast_acc(rsmx_bool o, rsmx_bool v) {
  rsmx_bool b;
  b.v = (unsigned char)(o.v | v.v);
  return b;
}

template <typename D, typename S>
__device__ void cast(D* out, const S* in, rsmx_i64 n, int add) {
  const bool is_float = rsmx_src_is_float<S>::value;
  RSMX_GRID_LOOP(k, n) {
    double f = 0.0;
    rsmx_i64 i = rsmx_read(in[k], &f);
    D v = rsmx_conv<D>::from(is_float, i, f);
    out[k] = add ? rsmx_cast_acc<D>(out[k], v) : v;
  }
}

// The destination type of each `cast_<dst>` family.
typedef float cast_f32_dst;
typedef double cast_f64_dst;
typedef rsmx_half cast_f16_dst;
typedef rsmx_u8 cast_u8_dst;
typedef rsmx_i8 cast_i8_dst;
typedef rsmx_i32 cast_i32_dst;
typedef rsmx_i64 cast_i64_dst;
typedef rsmx_bool cast_bool_dst;

// `cast_<dst>_<src>`: converts n elements of src into dst.
#define RSMX_CAST(kernel, S, suffix)                                                  \
  extern "C" __global__ void kernel##_##suffix(kernel##_dst* out, const S* in,       \
                                               rsmx_i64 n, int add) {                 \
    cast<kernel##_dst, S>(out, in, n, add);                                           \
  }

RSMX_DTYPE_ALL(RSMX_CAST, cast_f32)
RSMX_DTYPE_ALL(RSMX_CAST, cast_f64)
RSMX_DTYPE_ALL(RSMX_CAST, cast_f16)
RSMX_DTYPE_ALL(RSMX_CAST, cast_u8)
RSMX_DTYPE_ALL(RSMX_CAST, cast_i8)
RSMX_DTYPE_ALL(RSMX_CAST, cast_i32)
RSMX_DTYPE_ALL(RSMX_CAST, cast_i64)
RSMX_DTYPE_ALL(RSMX_CAST, cast_bool)
RSMX_CAST(cast_f32, rsmx_bool, bool)
RSMX_CAST(cast_f64, rsmx_bool, bool)
RSMX_CAST(cast_f16, rsmx_bool, bool)
RSMX_CAST(cast_u8, rsmx_bool, bool)
RSMX_CAST(cast_i8, rsmx_bool, bool)
RSMX_CAST(cast_i32, rsmx_bool, bool)
RSMX_CAST(cast_i64, rsmx_bool, bool)
RSMX_CAST(cast_bool, rsmx_bool, bool)
