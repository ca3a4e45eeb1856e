// Matrix products that cuBLAS does not do: the integer types' `dot` and `batch_dot`
// (wrapping arithmetic, as on the CPU). One thread per output element.
#include "common.cuh"

// The accumulator: integers wrap modulo 2^64 and are cut to their width at the end,
// which is their own wrapping arithmetic; floats add in their compute type.
template <typename T> struct rsmx_acc {
  typedef unsigned long long type;
  __device__ static type load(T v) { return (type)(long long)v; }
  __device__ static T store(type v) { return (T)v; }
};
template <> struct rsmx_acc<float> {
  typedef float type;
  __device__ static type load(float v) { return v; }
  __device__ static float store(type v) { return v; }
};
template <> struct rsmx_acc<double> {
  typedef double type;
  __device__ static type load(double v) { return v; }
  __device__ static double store(type v) { return v; }
};
template <> struct rsmx_acc<rsmx_half> {
  typedef float type;
  __device__ static type load(rsmx_half v) { return rsmx_num<rsmx_half>::load(v); }
  __device__ static rsmx_half store(type v) { return rsmx_num<rsmx_half>::store(v); }
};

// Row-major c[b] (=|+=) op(a[b]) . op(b[b]) for `batch` products of m x k by k x n;
// `ta`/`tb` say the operand is stored transposed; leading dimensions and batch strides
// in elements.
template <typename T>
__device__ void matmul(T* c, const T* a, const T* b, rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n,
                       rsmx_i64 k, rsmx_i64 lda, rsmx_i64 ldb, rsmx_i64 ldc, rsmx_i64 sa,
                       rsmx_i64 sb, rsmx_i64 sc, int ta, int tb, int add) {
  typedef rsmx_acc<T> A;
  RSMX_GRID_LOOP(idx, batch * m * n) {
    rsmx_i64 j = idx % n, i = (idx / n) % m, bi = idx / (m * n);
    const T* pa = a + bi * sa;
    const T* pb = b + bi * sb;
    typename A::type sum = A::load(T());
    for (rsmx_i64 p = 0; p < k; ++p) {
      T x = ta ? pa[p * lda + i] : pa[i * lda + p];
      T y = tb ? pb[j * ldb + p] : pb[p * ldb + j];
      sum += A::load(x) * A::load(y);
    }
    T* out = c + bi * sc + i * ldc + j;
    *out = A::store(add ? A::load(*out) + sum : sum);
  }
}

#define RSMX_MATMUL(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(                                          \
      T* c, const T* a, const T* b, rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n, rsmx_i64 k,  \
      rsmx_i64 lda, rsmx_i64 ldb, rsmx_i64 ldc, rsmx_i64 sa, rsmx_i64 sb, rsmx_i64 sc,   \
      int ta, int tb, int add) {                                                         \
    kernel<T>(c, a, b, batch, m, n, k, lda, ldb, ldc, sa, sb, sc, ta, tb, add);          \
  }

RSMX_DTYPE_ALL(RSMX_MATMUL, matmul)
