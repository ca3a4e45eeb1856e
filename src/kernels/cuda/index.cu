// Kernels of the indexing operators: `take`, `Embedding`, `pick`, `one_hot`, `where`,
// `gather_nd`, `scatter_nd` and their backward.
//
// Index arrays of any dtype are first turned into int64 positions (`index_fix`,
// `gather_nd_pos`) with the CPU's conversions: floats truncate toward zero, NaN and
// values past int64 become INT64_MIN; a position the mode rejects is -1 (raise) or 0.
// Gathers then read one element per thread. Scatters that may hit an element more than
// once sort the positions stably by target first, then fold each target's rows in their
// order, so sums run in the CPU's order with no float atomics. `add` accumulates into
// the output (`req=add`).
#include "common.cuh"

// bool: one byte, 0 or 1; accumulating is "or".
struct rsmx_b8 {
  unsigned char v;
};

#define RSMX_INDEX_DIMS 10
#define RSMX_INDEX_THREADS 256

// `a + b` in the storage type, as the CPU adds (integers wrap, float16 rounds each sum).
template <typename T>
__device__ __forceinline__ T ix_add(T a, T b) {
  return rsmx_num<T>::store(rsmx_num<T>::load(a) + rsmx_num<T>::load(b));
}
template <>
__device__ __forceinline__ rsmx_u8 ix_add<rsmx_u8>(rsmx_u8 a, rsmx_u8 b) {
  return (rsmx_u8)(a + b);
}
template <>
__device__ __forceinline__ rsmx_i8 ix_add<rsmx_i8>(rsmx_i8 a, rsmx_i8 b) {
  return (rsmx_i8)(unsigned char)((unsigned)a + (unsigned)b);
}
template <>
__device__ __forceinline__ rsmx_i32 ix_add<rsmx_i32>(rsmx_i32 a, rsmx_i32 b) {
  return (rsmx_i32)((unsigned)a + (unsigned)b);
}
template <>
__device__ __forceinline__ rsmx_i64 ix_add<rsmx_i64>(rsmx_i64 a, rsmx_i64 b) {
  return (rsmx_i64)((unsigned long long)a + (unsigned long long)b);
}
template <>
__device__ __forceinline__ rsmx_b8 ix_add<rsmx_b8>(rsmx_b8 a, rsmx_b8 b) {
  rsmx_b8 r;
  r.v = (unsigned char)(a.v | b.v);
  return r;
}

template <typename T>
__device__ __forceinline__ void ix_put(T* out, rsmx_i64 i, T v, int add) {
  out[i] = add ? ix_add(out[i], v) : v;
}

// An index element as a double (gather_nd's bounds check reads values so) and as the
// integer C's conversion gives.
template <typename I> __device__ __forceinline__ double ix_double(I v) { return (double)v; }
template <> __device__ __forceinline__ double ix_double<rsmx_half>(rsmx_half v) {
  return (double)rsmx_half_to_float(v);
}
template <> __device__ __forceinline__ double ix_double<rsmx_b8>(rsmx_b8 v) {
  return (double)v.v;
}

__device__ __forceinline__ rsmx_i64 ix_trunc(double f) {
  // NaN and values outside int64 give INT64_MIN, as x86's conversion does.
  if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
    return (rsmx_i64)(-9223372036854775807ll - 1);
  return (rsmx_i64)f;
}

template <typename I> __device__ __forceinline__ rsmx_i64 ix_int(I v) { return (rsmx_i64)v; }
template <> __device__ __forceinline__ rsmx_i64 ix_int<float>(float v) {
  return ix_trunc((double)v);
}
template <> __device__ __forceinline__ rsmx_i64 ix_int<double>(double v) { return ix_trunc(v); }
template <> __device__ __forceinline__ rsmx_i64 ix_int<rsmx_half>(rsmx_half v) {
  return ix_trunc((double)rsmx_half_to_float(v));
}
template <> __device__ __forceinline__ rsmx_i64 ix_int<rsmx_b8>(rsmx_b8 v) {
  return (rsmx_i64)v.v;
}

enum rsmx_index_mode {
  RSMX_INDEX_CLIP,        // clamped into [0, n)
  RSMX_INDEX_WRAP,        // modulo n, non-negative
  RSMX_INDEX_RAISE,       // -1 when outside [0, n)
  RSMX_INDEX_RAISE_ZERO,  // 0 when outside [0, n) (the backward of raise mode)
  RSMX_INDEX_EMBEDDING,   // the value truncated, then clamped into [0, n) (NaN is 0)
  RSMX_INDEX_RAW          // the integer as converted
};

// out[i] = the position index i names along an axis of length n.
template <typename I>
__device__ void index_fix(rsmx_i64* out, const I* idx, rsmx_i64 count, rsmx_i64 n, int mode) {
  RSMX_GRID_LOOP(i, count) {
    rsmx_i64 p;
    if (mode == RSMX_INDEX_EMBEDDING) {
      double v = ix_double(idx[i]);
      double last = (double)(n > 0 ? n - 1 : 0);
      p = !(v >= 0.0) ? 0 : (v >= last ? (rsmx_i64)last : (rsmx_i64)v);
    } else {
      rsmx_i64 v = ix_int(idx[i]);
      bool inside = v >= 0 && v < n;
      switch (mode) {
        case RSMX_INDEX_CLIP: p = n <= 0 ? 0 : (v < 0 ? 0 : (v >= n ? n - 1 : v)); break;
        case RSMX_INDEX_WRAP:
          p = n <= 0 ? 0 : v % n;
          if (p < 0) p += n;
          break;
        case RSMX_INDEX_RAISE: p = inside ? v : -1; break;
        case RSMX_INDEX_RAISE_ZERO: p = inside ? v : 0; break;
        default: p = v;
      }
    }
    out[i] = p;
  }
}

// gather_nd's addressed blocks: the lengths of the first `m` axes and their strides in
// blocks.
struct rsmx_index_nd {
  rsmx_i64 dim[RSMX_INDEX_DIMS];
  rsmx_i64 stride[RSMX_INDEX_DIMS];
};

// out[c] = the block column c of idx (shape (m, count)) addresses, negative indices
// counting from the end; -(ax + 1) when the index on axis ax (the first such) is out of
// range, checked on the value as given.
template <typename I>
__device__ void gather_nd_pos(rsmx_i64* out, const I* idx, rsmx_i64 m, rsmx_i64 count,
                              const rsmx_index_nd& nd) {
  RSMX_GRID_LOOP(c, count) {
    rsmx_i64 off = 0;
    for (int ax = 0; ax < m; ax++) {
      double v = ix_double(idx[ax * count + c]);
      double d = (double)nd.dim[ax];
      if (v != v || v > d - 1.0 || v < -d) {
        off = -(rsmx_i64)ax - 1;
        break;
      }
      double j = v < 0.0 ? v + d : v;
      off += (rsmx_i64)j * nd.stride[ax];
    }
    out[c] = off;
  }
}

// out[0] = the first i with pos[i] < 0 (or -1), out[1] = pos[i]. One block; each thread
// keeps the first of its stride, then a tree in shared memory takes the least.
extern "C" __global__ void index_first_bad(rsmx_i64* out, const rsmx_i64* pos, rsmx_i64 count) {
  __shared__ rsmx_i64 share[RSMX_INDEX_THREADS];
  const unsigned t = threadIdx.x;
  rsmx_i64 first = count;
  for (rsmx_i64 i = t; i < count; i += blockDim.x) {
    if (pos[i] < 0) {
      first = i;
      break;
    }
  }
  share[t] = first;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s && share[t + s] < share[t]) share[t] = share[t + s];
    __syncthreads();
  }
  if (t == 0) {
    rsmx_i64 f = share[0];
    out[0] = f < count ? f : -1;
    out[1] = f < count ? pos[f] : 0;
  }
}

// out (outer, m, inner) = a (outer, n, inner) at rows idx[j] of the middle axis.
template <typename T>
__device__ void take(T* out, const T* a, const rsmx_i64* idx, rsmx_i64 outer, rsmx_i64 n,
                     rsmx_i64 m, rsmx_i64 inner, int add) {
  RSMX_GRID_LOOP(i, outer * m * inner) {
    rsmx_i64 k = i % inner, r = i / inner;
    rsmx_i64 j = r % m, o = r / m;
    ix_put(out, i, a[(o * n + idx[j]) * inner + k], add);
  }
}

// out[r] = data[o, idx[r], k] for r = o * inner + k.
template <typename T>
__device__ void pick(T* out, const T* data, const rsmx_i64* idx, rsmx_i64 rows, rsmx_i64 n,
                     rsmx_i64 inner, int add) {
  RSMX_GRID_LOOP(r, rows) {
    rsmx_i64 o = r / inner, k = r % inner;
    ix_put(out, r, data[(o * n + idx[r]) * inner + k], add);
  }
}

// The gradient of pick: out[o, idx[r], k] += g[r]; every r hits its own element.
template <typename T>
__device__ void pick_backward(T* out, const T* g, const rsmx_i64* idx, rsmx_i64 rows,
                              rsmx_i64 n, rsmx_i64 inner) {
  RSMX_GRID_LOOP(r, rows) {
    rsmx_i64 o = r / inner, k = r % inner;
    rsmx_i64 d = (o * n + idx[r]) * inner + k;
    out[d] = ix_add(out[d], g[r]);
  }
}

// out (count, depth): `on` where the column is idx[r], `off` elsewhere.
template <typename T>
__device__ void one_hot(T* out, const rsmx_i64* idx, rsmx_i64 count, rsmx_i64 depth, T on,
                        T off, int add) {
  RSMX_GRID_LOOP(i, count * depth) {
    ix_put(out, i, idx[i / depth] == i % depth ? on : off, add);
  }
}

// out[i] = 1 if c[i] is non-zero (NaN included), else 0.
template <typename I>
__device__ void truth(rsmx_u8* out, const I* c, rsmx_i64 n) {
  RSMX_GRID_LOOP(i, n) { out[i] = ix_double(c[i]) != 0.0 ? 1 : 0; }
}

// out[i] = cond[i / row] ? x[i] : y[i].
template <typename T>
__device__ void where(T* out, const rsmx_u8* cond, const T* x, const T* y, rsmx_i64 n,
                      rsmx_i64 row, int add) {
  RSMX_GRID_LOOP(i, n) { ix_put(out, i, cond[i / row] ? x[i] : y[i], add); }
}

// The gradient of where: g where cond[i / row] == want, else zero.
template <typename T>
__device__ void where_backward(T* out, const T* g, const rsmx_u8* cond, rsmx_i64 n,
                               rsmx_i64 row, int want, int add) {
  RSMX_GRID_LOOP(i, n) {
    T zero = T();
    ix_put(out, i, (int)cond[i / row] == want ? g[i] : zero, add);
  }
}

enum rsmx_scatter_mode {
  RSMX_SCATTER_SUM,  // out = the sum of the rows sent to it (zero if none)
  RSMX_SCATTER_ADD,  // out += that sum
  RSMX_SCATTER_LAST  // out = the last row sent to it (zero if none)
};

// A scatter first lists, for each target row, the source rows sent to it in their order
// (a stable counting sort of the positions): `scatter_count` counts them per target
// (integer atomics, so the counts are exact), `scatter_offsets` turns counts into each
// list's start, `scatter_place` fills the lists. Then `scatter` gives each output element
// one thread that folds its list in order, so the result is the CPU's whatever order
// threads run in. Positions outside [0, n) are left out.

extern "C" __global__ void scatter_count(unsigned long long* counts, const rsmx_i64* pos,
                                         rsmx_i64 m, rsmx_i64 n) {
  RSMX_GRID_LOOP(j, m) {
    rsmx_i64 r = pos[j];
    if (r >= 0 && r < n) atomicAdd(counts + r, 1ull);
  }
}

// start[r] = the sum of counts[0..r] (start[n] = the total), cursor[r] = start[r]. One
// block: each thread sums a contiguous range, thread 0 chains the ranges.
extern "C" __global__ void scatter_offsets(rsmx_i64* start, rsmx_i64* cursor,
                                           const unsigned long long* counts, rsmx_i64 n) {
  __shared__ rsmx_i64 share[RSMX_INDEX_THREADS];
  const unsigned t = threadIdx.x;
  const rsmx_i64 per = (n + blockDim.x - 1) / blockDim.x;
  const rsmx_i64 lo = per * t < n ? per * t : n, hi = lo + per < n ? lo + per : n;
  rsmx_i64 sum = 0;
  for (rsmx_i64 r = lo; r < hi; r++) sum += (rsmx_i64)counts[r];
  share[t] = sum;
  __syncthreads();
  if (t == 0) {
    rsmx_i64 run = 0;
    for (unsigned u = 0; u < blockDim.x; u++) {
      rsmx_i64 v = share[u];
      share[u] = run;
      run += v;
    }
    start[n] = run;
  }
  __syncthreads();
  rsmx_i64 run = share[t];
  for (rsmx_i64 r = lo; r < hi; r++) {
    start[r] = run;
    cursor[r] = run;
    run += (rsmx_i64)counts[r];
  }
}

// sorted[cursor[pos[j]]++] = j for j in order. One block takes blockDim.x positions at a
// time; each thread counts the same targets before it in the group for its slot, and the
// group's last thread of each target moves that target's cursor.
extern "C" __global__ void scatter_place(rsmx_i64* sorted, rsmx_i64* cursor,
                                         const rsmx_i64* pos, rsmx_i64 m, rsmx_i64 n) {
  __shared__ rsmx_i64 share[RSMX_INDEX_THREADS];
  const unsigned t = threadIdx.x;
  for (rsmx_i64 base = 0; base < m; base += blockDim.x) {
    const rsmx_i64 j = base + t;
    rsmx_i64 r = j < m ? pos[j] : -1;
    if (r >= n) r = -1;
    share[t] = r;
    __syncthreads();
    rsmx_i64 before = 0;
    bool last = true;
    for (unsigned u = 0; u < blockDim.x; u++) {
      if (share[u] != r) continue;
      if (u < t) before++;
      if (u > t) last = false;
    }
    rsmx_i64 at = r >= 0 ? cursor[r] : 0;
    __syncthreads();
    if (r >= 0) {
      sorted[at + before] = j;
      if (last) cursor[r] = at + before + 1;
    }
    __syncthreads();
  }
}

// out (outer, n, inner) gets the rows of g (outer, m, inner) listed for each target row.
template <typename T>
__device__ void scatter(T* out, const T* g, const rsmx_i64* start, const rsmx_i64* sorted,
                        rsmx_i64 outer, rsmx_i64 n, rsmx_i64 m, rsmx_i64 inner, int mode) {
  RSMX_GRID_LOOP(e, outer * n * inner) {
    const rsmx_i64 r = e / inner, o = r / n;
    const rsmx_i64 k = e - r * inner, row = r - o * n;
    const rsmx_i64 lo = start[row], hi = start[row + 1];
    const T* src = g + o * m * inner + k;
    T acc = mode == RSMX_SCATTER_ADD ? out[e] : T();
    if (mode == RSMX_SCATTER_LAST) {
      if (hi > lo) acc = src[sorted[hi - 1] * inner];
    } else {
      for (rsmx_i64 s = lo; s < hi; s++) acc = ix_add(acc, src[sorted[s] * inner]);
    }
    out[e] = acc;
  }
}

#define RSMX_INDEX_FIX(kernel, I, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(rsmx_i64* out, const I* idx, rsmx_i64 count, \
                                               rsmx_i64 n, int mode) {                    \
    kernel<I>(out, idx, count, n, mode);                                                  \
  }
#define RSMX_GATHER_ND_POS(kernel, I, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(rsmx_i64* out, const I* idx, rsmx_i64 m,   \
                                               rsmx_i64 count, rsmx_index_nd nd) {        \
    kernel<I>(out, idx, m, count, nd);                                                    \
  }
#define RSMX_TRUTH(kernel, I, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(rsmx_u8* out, const I* c, rsmx_i64 n) {    \
    kernel<I>(out, c, n);                                                                 \
  }
#define RSMX_TAKE(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* a, const rsmx_i64* idx,   \
                                               rsmx_i64 outer, rsmx_i64 n, rsmx_i64 m,    \
                                               rsmx_i64 inner, int add) {                 \
    kernel<T>(out, a, idx, outer, n, m, inner, add);                                      \
  }
#define RSMX_PICK(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* data, const rsmx_i64* idx, \
                                               rsmx_i64 rows, rsmx_i64 n, rsmx_i64 inner, \
                                               int add) {                                 \
    kernel<T>(out, data, idx, rows, n, inner, add);                                       \
  }
#define RSMX_PICK_BACKWARD(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const rsmx_i64* idx,   \
                                               rsmx_i64 rows, rsmx_i64 n,                 \
                                               rsmx_i64 inner) {                          \
    kernel<T>(out, g, idx, rows, n, inner);                                               \
  }
#define RSMX_ONE_HOT(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* out, const rsmx_i64* idx,               \
                                               rsmx_i64 count, rsmx_i64 depth, T on,      \
                                               T off, int add) {                          \
    kernel<T>(out, idx, count, depth, on, off, add);                                      \
  }
#define RSMX_WHERE(kernel, T, suffix)                                                     \
  extern "C" __global__ void kernel##_##suffix(T* out, const rsmx_u8* cond, const T* x,   \
                                               const T* y, rsmx_i64 n, rsmx_i64 row,      \
                                               int add) {                                 \
    kernel<T>(out, cond, x, y, n, row, add);                                              \
  }
#define RSMX_WHERE_BACKWARD(kernel, T, suffix)                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const rsmx_u8* cond,   \
                                               rsmx_i64 n, rsmx_i64 row, int want,        \
                                               int add) {                                 \
    kernel<T>(out, g, cond, n, row, want, add);                                           \
  }
#define RSMX_SCATTER(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, const rsmx_i64* start, \
                                               const rsmx_i64* sorted, rsmx_i64 outer,    \
                                               rsmx_i64 n, rsmx_i64 m, rsmx_i64 inner,    \
                                               int mode) {                                \
    kernel<T>(out, g, start, sorted, outer, n, m, inner, mode);                           \
  }

RSMX_DTYPE_ALL(RSMX_INDEX_FIX, index_fix)
RSMX_INDEX_FIX(index_fix, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_GATHER_ND_POS, gather_nd_pos)
RSMX_GATHER_ND_POS(gather_nd_pos, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_TRUTH, truth)
RSMX_TRUTH(truth, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_TAKE, take)
RSMX_TAKE(take, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_PICK, pick)
RSMX_PICK(pick, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_WHERE, where)
RSMX_WHERE(where, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_SCATTER, scatter)
RSMX_SCATTER(scatter, rsmx_b8, b8)
RSMX_DTYPE_ALL(RSMX_PICK_BACKWARD, pick_backward)
RSMX_DTYPE_ALL(RSMX_WHERE_BACKWARD, where_backward)
RSMX_DTYPE_ALL(RSMX_ONE_HOT, one_hot)
