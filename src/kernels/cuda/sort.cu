// Kernels of the sorting operators (`sort`, `argsort`, `topk` and topk's backward). Each
// lane along the axis is padded to a power of two P and sorted as (key, index) pairs by a
// bitonic network: in shared memory by one block per lane when P <= RSMX_SORT_SHARED,
// else one launch per step in global memory. A key places a value in a total order (NaN
// above every number, -0 equal to 0) and is complemented for a descending sort; the index
// breaks ties, so the order is the CPU's stable one whatever the network does.
#include "common.cuh"

#define RSMX_SORT_SHARED 2048

typedef unsigned long long rsmx_key;

// outer blocks of n elements along the axis with inner lanes each; the first k kept of
// each lane, padded to p.
struct rsmx_lanes {
  rsmx_i64 outer, n, inner, k, p;
};

__device__ __forceinline__ rsmx_key rsmx_float_key(double v) {
  if (v != v) return ~0ull;
  union {
    double d;
    rsmx_key u;
  } c;
  c.d = v;
  rsmx_key b = v == 0.0 ? 0ull : c.u;
  return (b >> 63) ? ~b : (b | (1ull << 63));
}

__device__ __forceinline__ rsmx_key rsmx_sort_key(float v) { return rsmx_float_key(v); }
__device__ __forceinline__ rsmx_key rsmx_sort_key(double v) { return rsmx_float_key(v); }
__device__ __forceinline__ rsmx_key rsmx_sort_key(rsmx_half v) {
  return rsmx_float_key(rsmx_half_to_float(v));
}
__device__ __forceinline__ rsmx_key rsmx_int_key(rsmx_i64 v) {
  return (rsmx_key)v ^ (1ull << 63);
}
__device__ __forceinline__ rsmx_key rsmx_sort_key(rsmx_u8 v) { return rsmx_int_key(v); }
__device__ __forceinline__ rsmx_key rsmx_sort_key(rsmx_i8 v) { return rsmx_int_key(v); }
__device__ __forceinline__ rsmx_key rsmx_sort_key(rsmx_i32 v) { return rsmx_int_key(v); }
__device__ __forceinline__ rsmx_key rsmx_sort_key(rsmx_i64 v) { return rsmx_int_key(v); }

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

// (key, index) pairs of every lane, lane after lane, p per lane: padding sorts last.
template <typename T>
__device__ void sort_keys(const T* data, rsmx_lanes l, rsmx_key flip, rsmx_key* keys,
                          rsmx_i64* idx) {
  RSMX_GRID_LOOP(e, l.outer * l.inner * l.p) {
    rsmx_i64 lane = e / l.p, t = e % l.p;
    rsmx_i64 o = lane / l.inner, i = lane % l.inner;
    keys[e] = t < l.n ? rsmx_sort_key(data[(o * l.n + t) * l.inner + i]) ^ flip : ~0ull;
    idx[e] = t;
  }
}

__device__ __forceinline__ bool rsmx_pair_greater(rsmx_key ka, rsmx_i64 ia, rsmx_key kb,
                                                  rsmx_i64 ib) {
  return ka > kb || (ka == kb && ia > ib);
}

// Sorts each lane of p <= RSMX_SORT_SHARED pairs in shared memory, one block per lane;
// writes back the indices only.
extern "C" __global__ void sort_block(const rsmx_key* keys, rsmx_i64* idx, rsmx_i64 lanes,
                                      rsmx_i64 p) {
  __shared__ rsmx_key sk[RSMX_SORT_SHARED];
  __shared__ int si[RSMX_SORT_SHARED];
  for (rsmx_i64 lane = blockIdx.x; lane < lanes; lane += gridDim.x) {
    for (rsmx_i64 t = threadIdx.x; t < p; t += blockDim.x) {
      sk[t] = keys[lane * p + t];
      si[t] = (int)idx[lane * p + t];
    }
    __syncthreads();
    for (int k = 2; k <= p; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int q = threadIdx.x; q < p / 2; q += blockDim.x) {
          int a = 2 * j * (q / j) + (q % j), b = a + j;
          bool up = (a & k) == 0;
          if (rsmx_pair_greater(sk[a], si[a], sk[b], si[b]) == up) {
            rsmx_key tk = sk[a];
            sk[a] = sk[b];
            sk[b] = tk;
            int ti = si[a];
            si[a] = si[b];
            si[b] = ti;
          }
        }
        __syncthreads();
      }
    }
    for (rsmx_i64 t = threadIdx.x; t < p; t += blockDim.x) idx[lane * p + t] = si[t];
    __syncthreads();
  }
}

// One step (k, j) of the bitonic network over every lane, in global memory.
extern "C" __global__ void sort_step(rsmx_key* keys, rsmx_i64* idx, rsmx_i64 lanes,
                                     rsmx_i64 p, rsmx_i64 k, rsmx_i64 j) {
  RSMX_GRID_LOOP(e, lanes * (p / 2)) {
    rsmx_i64 lane = e / (p / 2), q = e % (p / 2);
    rsmx_i64 a = 2 * j * (q / j) + (q % j), b = a + j;
    bool up = (a & k) == 0;
    rsmx_key* kl = keys + lane * p;
    rsmx_i64* il = idx + lane * p;
    if (rsmx_pair_greater(kl[a], il[a], kl[b], il[b]) == up) {
      rsmx_key tk = kl[a];
      kl[a] = kl[b];
      kl[b] = tk;
      rsmx_i64 ti = il[a];
      il[a] = il[b];
      il[b] = ti;
    }
  }
}

// The source position of output element e (outer x k x inner) and its lane's index.
__device__ __forceinline__ rsmx_i64 rsmx_picked(const rsmx_i64* idx, rsmx_lanes l, rsmx_i64 e,
                                                rsmx_i64* pos) {
  rsmx_i64 o = e / (l.k * l.inner), t = (e / l.inner) % l.k, i = e % l.inner;
  rsmx_i64 j = idx[(o * l.inner + i) * l.p + t];
  *pos = (o * l.n + j) * l.inner + i;
  return j;
}

// The k first values of each lane in order.
template <typename T>
__device__ void sort_values(T* out, const T* data, const rsmx_i64* idx, rsmx_lanes l,
                            int add) {
  RSMX_GRID_LOOP(e, l.outer * l.k * l.inner) {
    rsmx_i64 pos;
    rsmx_picked(idx, l, e, &pos);
    T v = data[pos];
    out[e] = add ? rsmx_acc<T>(out[e], v) : v;
  }
}

// The positions along the axis of the k first values of each lane.
template <typename T>
__device__ void sort_indices(T* out, const rsmx_i64* idx, rsmx_lanes l, int add) {
  typedef typename rsmx_num<T>::compute C;
  RSMX_GRID_LOOP(e, l.outer * l.k * l.inner) {
    rsmx_i64 pos;
    T v = rsmx_num<T>::store((C)rsmx_picked(idx, l, e, &pos));
    out[e] = add ? rsmx_acc<T>(out[e], v) : v;
  }
}

// 1 (or +1) where an element is among the k first of its lane; the rest is cleared
// before.
template <typename T>
__device__ void sort_mask(T* out, const rsmx_i64* idx, rsmx_lanes l, int add) {
  typedef typename rsmx_num<T>::compute C;
  const T one = rsmx_num<T>::store((C)1);
  RSMX_GRID_LOOP(e, l.outer * l.k * l.inner) {
    rsmx_i64 pos;
    rsmx_picked(idx, l, e, &pos);
    out[pos] = add ? rsmx_acc<T>(out[pos], one) : one;
  }
}

// topk's backward: the output gradient added where each kept value came from (the rest
// is cleared before for a write); positions within a lane are distinct.
template <typename T>
__device__ void topk_grad(T* out, const T* g, const rsmx_i64* idx, rsmx_lanes l) {
  RSMX_GRID_LOOP(e, l.outer * l.k * l.inner) {
    rsmx_i64 pos;
    rsmx_picked(idx, l, e, &pos);
    out[pos] = rsmx_acc<T>(out[pos], g[e]);
  }
}

#define RSMX_SORT_KEYS(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(const T* data, rsmx_lanes l,          \
                                               rsmx_key flip, rsmx_key* keys,         \
                                               rsmx_i64* idx) {                       \
    kernel<T>(data, l, flip, keys, idx);                                              \
  }
#define RSMX_SORT_VALUES(kernel, T, suffix)                                           \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* data,                \
                                               const rsmx_i64* idx, rsmx_lanes l,     \
                                               int add) {                             \
    kernel<T>(out, data, idx, l, add);                                                \
  }
#define RSMX_SORT_OUT(kernel, T, suffix)                                              \
  extern "C" __global__ void kernel##_##suffix(T* out, const rsmx_i64* idx,          \
                                               rsmx_lanes l, int add) {               \
    kernel<T>(out, idx, l, add);                                                      \
  }
#define RSMX_TOPK_GRAD(kernel, T, suffix)                                             \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g,                   \
                                               const rsmx_i64* idx, rsmx_lanes l) {   \
    kernel<T>(out, g, idx, l);                                                        \
  }

RSMX_DTYPE_NUM(RSMX_SORT_KEYS, sort_keys)
RSMX_DTYPE_NUM(RSMX_SORT_VALUES, sort_values)
RSMX_DTYPE_NUM(RSMX_SORT_OUT, sort_indices)
RSMX_DTYPE_NUM(RSMX_SORT_OUT, sort_mask)
RSMX_DTYPE_NUM(RSMX_TOPK_GRAD, topk_grad)
