// Kernels of the reductions over axes (`sum`, `mean`, `prod`, `max`, `min`, `nansum`,
// `nanprod`, `norm`), the index reductions (`argmax`, `argmin`, `argmax_channel`), the
// backward of the reductions, and the strided gather behind `broadcast_to` and the other
// view operators, with the scatter of their backward.
//
// A reduction sees its input through `rsmx_reduce_desc`: the kept axes (which give the
// output's row-major order) and the reduced axes, each with its element stride in the
// input, after the launcher merged neighbouring axes and dropped those of size 1. A block
// of `blockDim.x` threads (at most 256) works on tiles of `cols` outputs at a time (the
// launcher picks powers of two); the `blockDim.x / cols` lanes of each output fold every
// lanes-th reduced element in order, then combine their partial results in a fixed tree
// in shared memory. No atomics: the result does not depend on the order threads run.
#include "common.cuh"

#define RSMX_REDUCE_DIMS 8
// Kept out of line: one copy of the dtype switch serves every caller.
#ifdef __CUDACC_RTC__
#define RSMX_RD_NOINLINE __noinline__
#else
#define RSMX_RD_NOINLINE
#endif
#define RSMX_REDUCE_THREADS 256

struct rsmx_reduce_desc {
  int kept_ndim;
  int red_ndim;
  rsmx_i64 kept_shape[RSMX_REDUCE_DIMS];
  rsmx_i64 kept_stride[RSMX_REDUCE_DIMS];
  rsmx_i64 red_shape[RSMX_REDUCE_DIMS];
  rsmx_i64 red_stride[RSMX_REDUCE_DIMS];
};

// The reductions, in the order of the launcher's codes.
enum rsmx_reduce_kind {
  RSMX_REDUCE_SUM, RSMX_REDUCE_MEAN, RSMX_REDUCE_PROD, RSMX_REDUCE_MAX, RSMX_REDUCE_MIN,
  RSMX_REDUCE_NANSUM, RSMX_REDUCE_NANPROD, RSMX_REDUCE_NORM1, RSMX_REDUCE_NORM2
};

// Dtype codes of an output written through `store_as` (the order of the `_<suffix>`s).
enum rsmx_dtype_code {
  RSMX_DT_F32, RSMX_DT_F64, RSMX_DT_F16, RSMX_DT_U8, RSMX_DT_I8, RSMX_DT_I32, RSMX_DT_I64
};

// ---- integer and float helpers --------------------------------------------------------

// An integer type's unsigned twin (for wrapping arithmetic), signedness and extremes;
// floats map to themselves.
template <typename T> struct rd_int {
  static const bool is_int = false;
  static const bool is_signed = true;
  typedef T U;
};
#define RSMX_RD_INT(T, UT, SIGNED, LO, HI)                                       \
  template <> struct rd_int<T> {                                                 \
    static const bool is_int = true;                                             \
    static const bool is_signed = SIGNED;                                        \
    typedef UT U;                                                                \
    __device__ __forceinline__ static T lowest() { return (T)(LO); }             \
    __device__ __forceinline__ static T highest() { return (T)(HI); }            \
  };
RSMX_RD_INT(rsmx_u8, unsigned char, false, 0, 255)
RSMX_RD_INT(rsmx_i8, unsigned char, true, -128, 127)
RSMX_RD_INT(rsmx_i32, unsigned int, true, (-2147483647 - 1), 2147483647)
RSMX_RD_INT(rsmx_i64, unsigned long long, true, (-9223372036854775807LL - 1),
            9223372036854775807LL)

// True for a NaN; never for an integer.
template <typename A>
__device__ __forceinline__ bool rd_isnan(A v) {
  if constexpr (rd_int<A>::is_int) {
    return false;
  } else {
    return v != v;
  }
}

// True for a negative value, read from the top bit for integers (no comparison of an
// unsigned type with zero).
template <typename A>
__device__ __forceinline__ bool rd_negative(A v) {
  if constexpr (rd_int<A>::is_int) {
    typedef typename rd_int<A>::U U;
    return rd_int<A>::is_signed && (((U)v >> (sizeof(A) * 8 - 1)) & 1u);
  } else {
    return v < (A)0;
  }
}

// `v` as integer type T the way Rust's `as` converts: NaN gives 0, the ends saturate.
template <typename T>
__device__ __forceinline__ T rd_saturate(double v) {
  if (v != v) return (T)0;
  if (v <= (double)rd_int<T>::lowest()) return rd_int<T>::lowest();
  if (v >= (double)rd_int<T>::highest()) return rd_int<T>::highest();
  return (T)v;
}

// Wrapping integer arithmetic; plain arithmetic for floats.
template <typename A>
__device__ __forceinline__ A rd_add(A a, A b) {
  typedef typename rd_int<A>::U U;
  return (A)((U)a + (U)b);
}
template <typename A>
__device__ __forceinline__ A rd_mul(A a, A b) {
  typedef typename rd_int<A>::U U;
  return (A)((U)a * (U)b);
}
template <typename A>
__device__ __forceinline__ A rd_neg(A a) {
  typedef typename rd_int<A>::U U;
  return (A)((U)0 - (U)a);
}
// Division as the CPU kernels do it: for integers a zero divisor gives 0 and MIN / -1
// wraps.
template <typename A>
__device__ __forceinline__ A rd_div(A a, A b) {
  if constexpr (rd_int<A>::is_int) {
    if (b == (A)0) return (A)0;
    if (rd_int<A>::is_signed && rd_negative(b) && rd_neg(b) == (A)1) return rd_neg(a);
  }
  return a / b;
}

// ---- output stores ------------------------------------------------------------------

template <typename T> struct rd_code;
template <> struct rd_code<float> { static const int value = RSMX_DT_F32; };
template <> struct rd_code<double> { static const int value = RSMX_DT_F64; };
template <> struct rd_code<rsmx_half> { static const int value = RSMX_DT_F16; };
template <> struct rd_code<rsmx_u8> { static const int value = RSMX_DT_U8; };
template <> struct rd_code<rsmx_i8> { static const int value = RSMX_DT_I8; };
template <> struct rd_code<rsmx_i32> { static const int value = RSMX_DT_I32; };
template <> struct rd_code<rsmx_i64> { static const int value = RSMX_DT_I64; };

// out[i] (=|+=) v, where v (in T's compute type) already holds a value of T.
template <typename T>
__device__ __forceinline__ void rd_put(T* out, rsmx_i64 i, typename rsmx_num<T>::compute v,
                                       int add) {
  typedef rsmx_num<T> N;
  // Added in T's arithmetic to the stored value, as the CPU adds a converted result.
  out[i] = N::store(add ? rd_add(N::load(out[i]), v) : v);
}

// out[i] (=|+=) v for an output of dtype `dt`, converted as Rust's `as` converts.
__device__ RSMX_RD_NOINLINE void store_as(void* out, int dt, rsmx_i64 i, double v, int add) {
  switch (dt) {
    case RSMX_DT_F32: rd_put((float*)out, i, (float)v, add); break;
    case RSMX_DT_F64: rd_put((double*)out, i, v, add); break;
    case RSMX_DT_F16:
      rd_put((rsmx_half*)out, i, rsmx_half_to_float(rsmx_double_to_half(v)), add);
      break;
    case RSMX_DT_U8: rd_put((rsmx_u8*)out, i, rd_saturate<rsmx_u8>(v), add); break;
    case RSMX_DT_I8: rd_put((rsmx_i8*)out, i, rd_saturate<rsmx_i8>(v), add); break;
    case RSMX_DT_I32: rd_put((rsmx_i32*)out, i, rd_saturate<rsmx_i32>(v), add); break;
    default: rd_put((rsmx_i64*)out, i, rd_saturate<rsmx_i64>(v), add); break;
  }
}

// An accumulator of type A (float, double or an integer type) stored to an output of
// dtype `dt`: directly when the output has A's type (no round trip through double for
// 64-bit integers), else converted.
template <typename A>
__device__ __forceinline__ void store_acc(void* out, int dt, rsmx_i64 i, A v, int add) {
  if (dt == rd_code<A>::value) {
    rd_put((A*)out, i, v, add);
  } else {
    store_as(out, dt, i, (double)v, add);
  }
}

// ---- addressing ---------------------------------------------------------------------

// The input offset of kept (output) index `o`.
__device__ __forceinline__ rsmx_i64 kept_offset(const rsmx_reduce_desc& d, rsmx_i64 o) {
  rsmx_i64 off = 0;
  #pragma unroll 1
  for (int k = d.kept_ndim - 1; k > 0; k--) {
    rsmx_i64 q = o / d.kept_shape[k];
    off += (o - q * d.kept_shape[k]) * d.kept_stride[k];
    o = q;
  }
  return d.kept_ndim > 0 ? off + o * d.kept_stride[0] : off;
}

// The input offset of reduced index `r` (row-major over the reduced axes).
__device__ __forceinline__ rsmx_i64 red_offset(const rsmx_reduce_desc& d, rsmx_i64 r) {
  rsmx_i64 off = 0;
  #pragma unroll 1
  for (int k = d.red_ndim - 1; k > 0; k--) {
    rsmx_i64 q = r / d.red_shape[k];
    off += (r - q * d.red_shape[k]) * d.red_stride[k];
    r = q;
  }
  return d.red_ndim > 0 ? off + r * d.red_stride[0] : off;
}

// ---- reductions -----------------------------------------------------------------------

enum rsmx_combine { RSMX_COMBINE_ADD, RSMX_COMBINE_MUL, RSMX_COMBINE_MAX, RSMX_COMBINE_MIN };

// Maps applied to each element before it is combined.
enum rsmx_map { RSMX_MAP_ID, RSMX_MAP_NAN_ZERO, RSMX_MAP_NAN_ONE, RSMX_MAP_ABS, RSMX_MAP_SQUARE };

template <typename A, int OP>
__device__ __forceinline__ A rd_identity() {
  if constexpr (OP == RSMX_COMBINE_ADD) {
    return (A)0;
  } else if constexpr (OP == RSMX_COMBINE_MUL) {
    return (A)1;
  } else if constexpr (rd_int<A>::is_int) {
    return OP == RSMX_COMBINE_MAX ? rd_int<A>::lowest() : rd_int<A>::highest();
  } else {
    return OP == RSMX_COMBINE_MAX ? (A)-INFINITY : (A)INFINITY;
  }
}

// The CPU's combinations: wrapping for integers; a NaN wins max and min.
template <typename A, int OP>
__device__ __forceinline__ A rd_combine(A a, A b) {
  if constexpr (OP == RSMX_COMBINE_ADD) {
    return rd_add(a, b);
  } else if constexpr (OP == RSMX_COMBINE_MUL) {
    return rd_mul(a, b);
  } else if constexpr (OP == RSMX_COMBINE_MAX) {
    return (a > b || rd_isnan(a)) ? a : b;
  } else {
    return (a < b || rd_isnan(a)) ? a : b;
  }
}

// Element `v` of storage type T, mapped, in accumulator type A.
template <typename T, typename A>
__device__ __forceinline__ A rd_map(T v, int map) {
  typedef typename rsmx_num<T>::compute C;
  const C c = rsmx_num<T>::load(v);
  if constexpr (rd_int<C>::is_int) {
    return (A)(map == RSMX_MAP_ABS && rd_negative(c) ? rd_neg(c) : c);
  } else {
    if (c != c) {
      if (map == RSMX_MAP_NAN_ZERO) return (A)0;
      if (map == RSMX_MAP_NAN_ONE) return (A)1;
    }
    if (map == RSMX_MAP_ABS) return c < (C)0 ? (A)-c : (A)c;
    if (map == RSMX_MAP_SQUARE) return (A)c * (A)c;
    return (A)c;
  }
}

// The combination `op` at run time.
template <typename A>
__device__ __forceinline__ A rd_combine_rt(int op, A a, A b) {
  switch (op) {
    case RSMX_COMBINE_ADD: return rd_combine<A, RSMX_COMBINE_ADD>(a, b);
    case RSMX_COMBINE_MUL: return rd_combine<A, RSMX_COMBINE_MUL>(a, b);
    case RSMX_COMBINE_MAX: return rd_combine<A, RSMX_COMBINE_MAX>(a, b);
    default: return rd_combine<A, RSMX_COMBINE_MIN>(a, b);
  }
}

template <typename A>
__device__ __forceinline__ A rd_identity_rt(int op) {
  switch (op) {
    case RSMX_COMBINE_ADD: return rd_identity<A, RSMX_COMBINE_ADD>();
    case RSMX_COMBINE_MUL: return rd_identity<A, RSMX_COMBINE_MUL>();
    case RSMX_COMBINE_MAX: return rd_identity<A, RSMX_COMBINE_MAX>();
    default: return rd_identity<A, RSMX_COMBINE_MIN>();
  }
}

// The first step of the combining tree over `lanes` lanes: half the power of two that
// covers them.
__device__ __forceinline__ int tree_top(int lanes) {
  int p = 1;
  while (p < lanes) p <<= 1;
  return p >> 1;
}

// Combines the lanes of each column through shared memory `buf` (one slot per thread)
// in a fixed tree; the result is valid in lane 0. No barrier with one lane per column.
template <typename A>
__device__ __forceinline__ A block_combine(A* buf, A acc, int op, int cols, int lanes) {
  if (lanes == 1) return acc;
  const int t = threadIdx.x, lane = t / cols;
  __syncthreads();  // the previous tile is done with `buf`
  buf[t] = acc;
  for (int s = tree_top(lanes); s > 0; s >>= 1) {
    __syncthreads();
    if (lane < s && lane + s < lanes) buf[t] = rd_combine_rt<A>(op, buf[t], buf[t + s * cols]);
  }
  return buf[t];
}

enum rsmx_finish { RSMX_FINISH_NONE, RSMX_FINISH_MEAN, RSMX_FINISH_SQRT };

// How one launch of a reduction runs. A long reduction into few outputs runs in two
// launches: the first writes the unfinished result of each of `segments` runs of the
// reduced elements (in the accumulator's type: float for float16, double for a float
// 2-norm), the second combines them in order (`partials`) and finishes.
struct rsmx_reduce_plan {
  rsmx_i64 n_out;     // outputs
  rsmx_i64 r;         // reduced elements of each output in this launch's input
  rsmx_i64 count;     // the elements a mean divides by
  rsmx_i64 segments;  // > 1: write each segment's partial result, at o * segments + s
  int cols;           // outputs per tile
  int kind;           // `enum rsmx_reduce_kind`
  int out_dtype;      // `enum rsmx_dtype_code` of the output
  int add;            // add into the output
  int partials;       // the input holds partial results: no element map
};

// The tile loop of a reduction with accumulator A, combination `op`, element map `map`
// and finish `fin`.
template <typename T, typename A>
__device__ __forceinline__ void reduce_tiles(void* out, const T* in, const rsmx_reduce_desc& d,
                                             const rsmx_reduce_plan& p, int op, int map,
                                             int fin, A* buf) {
  const int cols = p.cols < 1 ? 1 : (p.cols > (int)blockDim.x ? (int)blockDim.x : p.cols);
  const int lanes = blockDim.x / cols, col = threadIdx.x % cols, lane = threadIdx.x / cols;
  const rsmx_i64 segments = p.segments > 1 ? p.segments : 1;
  const rsmx_i64 seg_len = (p.r + segments - 1) / segments;
  const rsmx_i64 tiles = (p.n_out + cols - 1) / cols * segments;
  for (rsmx_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const rsmx_i64 otile = tile / segments, seg = tile - otile * segments;
    const rsmx_i64 o = otile * cols + col;
    const rsmx_i64 k1 = seg_len * (seg + 1) < p.r ? seg_len * (seg + 1) : p.r;
    A acc = rd_identity_rt<A>(op);
    if (o < p.n_out && lane < lanes) {
      const rsmx_i64 base = kept_offset(d, o);
      for (rsmx_i64 k = seg * seg_len + lane; k < k1; k += lanes) {
        acc = rd_combine_rt<A>(op, acc, rd_map<T, A>(in[base + red_offset(d, k)], map));
      }
    }
    acc = block_combine<A>(buf, acc, op, cols, lanes);
    if (lane == 0 && o < p.n_out) {
      if (p.segments > 1) {
        ((A*)out)[o * segments + seg] = acc;
        continue;
      }
      if (fin == RSMX_FINISH_MEAN) {
        if constexpr (rd_int<A>::is_int) {
          acc = rd_div(acc, rd_saturate<A>((double)p.count));
        } else {
          acc = acc / (A)p.count;
        }
      } else if (fin == RSMX_FINISH_SQRT) {
        acc = (A)sqrt((double)acc);
      }
      store_acc<A>(out, p.out_dtype, o, acc, p.add);
    }
  }
}

// The 2-norm of integer data as the CPU computes it: a scaled sum of squares in the
// integer type itself, folded in row-major order, one thread per output.
template <typename T>
__device__ __forceinline__ void int_norm2(void* out, const T* in, const rsmx_reduce_desc& d,
                                          rsmx_i64 n_out, rsmx_i64 r, int out_dtype, int add) {
  RSMX_GRID_LOOP(o, n_out) {
    T sos = (T)0, scale = (T)0;
    const rsmx_i64 base = kept_offset(d, o);
    for (rsmx_i64 k = 0; k < r; k++) {
      const T v = in[base + red_offset(d, k)];
      if (v == (T)0) continue;
      const T a = rd_negative(v) ? rd_neg(v) : v;
      if (scale < a) {
        const T q = rd_div(scale, a);
        sos = rd_add((T)1, rd_mul(rd_mul(sos, q), q));
        scale = a;
      } else {
        const T q = rd_div(a, scale);
        sos = rd_add(sos, rd_mul(q, q));
      }
    }
    const T res = rd_saturate<T>((double)scale * sqrt((double)sos));
    store_acc<T>(out, out_dtype, o, res, add);
  }
}

// out (=|+=) the reduction `p.kind` of `in` over the reduced axes of `d`, into an output
// of dtype `p.out_dtype` (the input's, or `norm`'s `out_dtype`), or one stage of it (see
// `rsmx_reduce_plan`). The launcher gives integer 2-norms one lane per output (`cols` =
// blockDim.x) and one stage.
template <typename T>
__device__ void reduce(void* out, const T* in, const rsmx_reduce_desc& d,
                       const rsmx_reduce_plan& p) {
  typedef typename rsmx_num<T>::compute C;
  // Every launch reaches a barrier, also those with one lane per output: the host
  // emulation runs a kernel without fibers once a launch of it reached none.
  __syncthreads();
  if (p.kind == RSMX_REDUCE_NORM2) {
    if constexpr (rd_int<C>::is_int) {
      int_norm2<T>(out, in, d, p.n_out, p.r, p.out_dtype, p.add);
    } else {
      // Squares summed in double precision, as the CPU sums them.
      __shared__ double dbuf[RSMX_REDUCE_THREADS];
      reduce_tiles<T, double>(out, in, d, p, RSMX_COMBINE_ADD,
                              p.partials ? RSMX_MAP_ID : RSMX_MAP_SQUARE, RSMX_FINISH_SQRT, dbuf);
    }
    return;
  }
  __shared__ C buf[RSMX_REDUCE_THREADS];
  int op = RSMX_COMBINE_ADD, map = RSMX_MAP_ID;
  switch (p.kind) {
    case RSMX_REDUCE_PROD: op = RSMX_COMBINE_MUL; break;
    case RSMX_REDUCE_NANPROD: op = RSMX_COMBINE_MUL; map = RSMX_MAP_NAN_ONE; break;
    case RSMX_REDUCE_MAX: op = RSMX_COMBINE_MAX; break;
    case RSMX_REDUCE_MIN: op = RSMX_COMBINE_MIN; break;
    case RSMX_REDUCE_NANSUM: map = RSMX_MAP_NAN_ZERO; break;
    case RSMX_REDUCE_NORM1: map = RSMX_MAP_ABS; break;
    default: break;
  }
  reduce_tiles<T, C>(out, in, d, p, op, p.partials ? RSMX_MAP_ID : map,
                     p.kind == RSMX_REDUCE_MEAN ? RSMX_FINISH_MEAN : RSMX_FINISH_NONE, buf);
}

// ---- index reductions -----------------------------------------------------------------

// True if candidate (v, i) beats (b, bi): the first NaN, else the first extreme.
template <typename C>
__device__ __forceinline__ bool arg_better(int max, C v, rsmx_i64 i, C b, rsmx_i64 bi) {
  const bool vn = rd_isnan(v), bn = rd_isnan(b);
  if (vn || bn) return vn && (!bn || i < bi);
  if (v == b) return i < bi;
  return max ? v > b : v < b;
}

// out (=|+=) the index (in T) of the first maximum (`max`) or minimum along the reduced
// axes of `d`, a NaN counting as the extreme; `r` > 0.
template <typename T>
__device__ void arg_reduce(T* out, const T* in, const rsmx_reduce_desc& d, rsmx_i64 n_out,
                           rsmx_i64 r, int cols, int max, int add) {
  typedef typename rsmx_num<T>::compute C;
  __shared__ C vbuf[RSMX_REDUCE_THREADS];
  __shared__ rsmx_i64 ibuf[RSMX_REDUCE_THREADS];
  cols = cols < 1 ? 1 : (cols > (int)blockDim.x ? (int)blockDim.x : cols);
  const int t = threadIdx.x, lanes = blockDim.x / cols, col = t % cols, lane = t / cols;
  const rsmx_i64 tiles = (n_out + cols - 1) / cols;
  __syncthreads();  // on every launch (see `reduce`)
  for (rsmx_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const rsmx_i64 o = tile * cols + col;
    C best = max ? rd_identity<C, RSMX_COMBINE_MAX>() : rd_identity<C, RSMX_COMBINE_MIN>();
    rsmx_i64 at = 9223372036854775807LL;
    if (o < n_out && lane < lanes) {
      const rsmx_i64 base = kept_offset(d, o);
      for (rsmx_i64 k = lane; k < r; k += lanes) {
        const C v = rsmx_num<T>::load(in[base + red_offset(d, k)]);
        if (arg_better<C>(max, v, k, best, at)) {
          best = v;
          at = k;
        }
      }
    }
    if (lanes > 1) {
      __syncthreads();  // the previous tile is done with the buffers
      vbuf[t] = best;
      ibuf[t] = at;
      for (int s = tree_top(lanes); s > 0; s >>= 1) {
        __syncthreads();
        if (lane < s && lane + s < lanes &&
            arg_better<C>(max, vbuf[t + s * cols], ibuf[t + s * cols], vbuf[t], ibuf[t])) {
          vbuf[t] = vbuf[t + s * cols];
          ibuf[t] = ibuf[t + s * cols];
        }
      }
      at = ibuf[t];
    }
    if (lane == 0 && o < n_out) store_as(out, rd_code<T>::value, o, (double)at, add);
  }
}

// ---- backward of the reductions ---------------------------------------------------------

// The merged axes of the data gradient and the strides of the reduction's output (and its
// gradient) over them: 0 along the reduced axes.
struct rsmx_bcast_desc {
  int ndim;
  rsmx_i64 shape[RSMX_REDUCE_DIMS];
  rsmx_i64 stride[RSMX_REDUCE_DIMS];
};

// The type the CPU computes a gradient of T in: float for float16 and float32, double
// for float64 and the integer types.
template <typename T> struct rd_grad { typedef double F; };
template <> struct rd_grad<float> { typedef float F; };
template <> struct rd_grad<rsmx_half> { typedef float F; };

// dx (=|+=) the output gradient g broadcast back, times each element's share of the
// result y of reduction `kind` over `count` elements.
template <typename T>
__device__ void reduce_backward(T* dx, const T* g, const T* x, const T* y, rsmx_i64 n,
                                const rsmx_bcast_desc& b, int kind, rsmx_i64 count, int add) {
  typedef typename rd_grad<T>::F F;
  const F zero = (F)0, cnt = (F)count;
  RSMX_GRID_LOOP(i, n) {
    rsmx_i64 rest = i, o = 0;
    #pragma unroll 1
    for (int k = b.ndim - 1; k > 0; k--) {
      rsmx_i64 q = rest / b.shape[k];
      o += (rest - q * b.shape[k]) * b.stride[k];
      rest = q;
    }
    if (b.ndim > 0) o += rest * b.stride[0];
    const F gv = (F)rsmx_num<T>::load(g[o]), xv = (F)rsmx_num<T>::load(x[i]);
    F v;
    switch (kind) {
      case RSMX_REDUCE_SUM: v = gv; break;
      case RSMX_REDUCE_MEAN: v = gv / cnt; break;
      case RSMX_REDUCE_NANSUM: v = xv != xv ? zero : gv; break;
      case RSMX_REDUCE_PROD: v = gv * (F)rsmx_num<T>::load(y[o]) / xv; break;
      case RSMX_REDUCE_NANPROD: v = xv != xv ? zero : gv * (F)rsmx_num<T>::load(y[o]) / xv; break;
      case RSMX_REDUCE_MAX:
      case RSMX_REDUCE_MIN: v = xv == (F)rsmx_num<T>::load(y[o]) ? gv : zero; break;
      case RSMX_REDUCE_NORM1: v = xv > zero ? gv : (xv < zero ? -gv : zero); break;
      default: v = gv * xv / (F)rsmx_num<T>::load(y[o]); break;
    }
    if constexpr (rd_int<T>::is_int) {
      rd_put(dx, i, rd_saturate<T>((double)v), add);
    } else {
      rd_put(dx, i, rsmx_num<T>::load(rsmx_num<T>::store((typename rsmx_num<T>::compute)v)),
             add);
    }
  }
}

// ---- strided gather and scatter ----------------------------------------------------------

// A strided view of an array: the element at view index 0 and, per view axis (merged
// where possible), its size and element stride (0 to repeat, negative to flip).
struct rsmx_gather_desc {
  int ndim;
  rsmx_i64 offset;
  rsmx_i64 shape[RSMX_REDUCE_DIMS];
  rsmx_i64 stride[RSMX_REDUCE_DIMS];
};

enum rsmx_view_mode { RSMX_VIEW_GATHER, RSMX_VIEW_GATHER_ADD, RSMX_VIEW_SCATTER_ADD };

// For each view index j < n: out[j] (=|+=) in[view j] (gather), or out[view j] += in[j]
// (scatter, the gradient of a gather whose view reads no element twice, as the launcher
// checks, so that no two threads write one element).
template <typename T>
__device__ void view_copy(T* out, const T* in, rsmx_i64 n, const rsmx_gather_desc& v,
                          int mode) {
  RSMX_GRID_LOOP(j, n) {
    rsmx_i64 rest = j, off = v.offset;
#pragma unroll 1
    for (int k = v.ndim - 1; k > 0; k--) {
      rsmx_i64 q = rest / v.shape[k];
      off += (rest - q * v.shape[k]) * v.stride[k];
      rest = q;
    }
    if (v.ndim > 0) off += rest * v.stride[0];
    if (mode == RSMX_VIEW_GATHER) {
      out[j] = in[off];
    } else if (mode == RSMX_VIEW_GATHER_ADD) {
      rd_put(out, j, rsmx_num<T>::load(in[off]), 1);
    } else {
      rd_put(out, off, rsmx_num<T>::load(in[j]), 1);
    }
  }
}

// ---- instantiations -------------------------------------------------------------------

#define RSMX_REDUCE(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(void* out, const T* in, rsmx_reduce_desc d, \
                                               rsmx_reduce_plan p) {                       \
    kernel<T>(out, in, d, p);                                                              \
  }
#define RSMX_ARG_REDUCE(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_reduce_desc d,    \
                                               rsmx_i64 n_out, rsmx_i64 r, int cols,       \
                                               int max, int add) {                         \
    kernel<T>(out, in, d, n_out, r, cols, max, add);                                       \
  }
#define RSMX_REDUCE_BACKWARD(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(T* dx, const T* g, const T* x, const T* y, \
                                               rsmx_i64 n, rsmx_bcast_desc b, int kind,   \
                                               rsmx_i64 count, int add) {                 \
    kernel<T>(dx, g, x, y, n, b, kind, count, add);                                       \
  }
#define RSMX_VIEW_COPY(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* in, rsmx_i64 n,          \
                                               rsmx_gather_desc v, int mode) {           \
    kernel<T>(out, in, n, v, mode);                                                      \
  }

RSMX_DTYPE_ALL(RSMX_REDUCE, reduce)
RSMX_DTYPE_ALL(RSMX_ARG_REDUCE, arg_reduce)
RSMX_DTYPE_ALL(RSMX_REDUCE_BACKWARD, reduce_backward)
RSMX_DTYPE_ALL(RSMX_VIEW_COPY, view_copy)
