// Batched dense linear algebra of MXNet 1.9.1's `linalg` operators (potrf, potri, trsm,
// trmm, inverse, det, slogdet, gelqf, syevd) and their backward formulas, computed as
// rsmx's CPU routines compute them (same algorithms, same operation order, same
// conventions), so that device and CPU results agree to rounding. The host build is
// bit-for-bit equal to the CPU routines; on the device, NVRTC fuses a * b + c where the
// CPU rounds twice, and the device's logf/expf/hypot are within an ulp or two of libm's.
//
// Layout: matrices are row-major and contiguous, matrix b of a batch right after matrix
// b - 1. Threads: la_trsm and la_trmm give one thread to each (matrix, right-hand side),
// i.e. batch * n threads (a column of B each) on the left side and batch * m threads (a
// row of B each) with rightside; every other kernel gives one thread to each matrix
// (batch threads). Either way a grid-stride loop, so any grid works. All matrices and
// scratch are in global memory.
//
// Scratch of matrix b: work + b * W (T elements) and ipiv + b * P (ints):
//   kernel           W      P     notes
//   la_potrf         -      -     info: batch ints
//   la_potri         0      -     work unused (may be null); info: batch ints
//   la_trsm          -      -
//   la_trmm          -      -
//   la_inverse       n*n    n     info: batch ints
//   la_det           n*n    n
//   la_slogdet       n*n    n
//   la_gelqf         m      -
//   la_syevd         n*n    -
//   la_potrf_bwd     0      -     work unused (may be null)
//   la_potri_bwd     0      -     work unused (may be null)
//   la_trsm_bwd      0      -     work unused (may be null)
//   la_trmm_bwd      0      -     work unused (may be null)
//   la_gelqf_bwd     m*m    -
//   la_syevd_bwd     n*n    -
//   la_inverse_bwd   n*n    -
//   la_det_bwd       n*n    n
//   la_slogdet_bwd   n*n    n
//
// Aliasing: la_potrf's out may be a; la_potri's out may be l; la_trsm's and la_trmm's out
// may be b; la_inverse's out may be a; la_potrf_bwd's da may be dl; la_trsm_bwd's and
// la_trmm_bwd's db may be dc. Nothing else may alias.
//
// Every element of every output is written. Failures are reported, never raised:
// * la_potrf: info[b] = 0, or the 1-based order of the first leading minor whose pivot is
//   <= 0 (LAPACK's info; a NaN pivot is no failure). out then holds the partial factor,
//   the failing pivot on the diagonal, the rest as copied from a, and its opposite strict
//   triangle zeroed.
// * la_potri: info[b] = 0, or the 1-based index of the first zero diagonal entry of the
//   factor; out is then all NaN.
// * la_inverse: info[b] = 0, or getrf's info, the 1-based index of the first exactly zero
//   pivot ("the input matrix is non-convertible"); out is then all NaN.
// * la_syevd: a QR iteration that does not converge in 30 n steps gives NaN in u and lam
//   (the CPU's "syevd failed"). Non-finite input gives NaN in u and lam.
// * la_gelqf needs m <= n; with m > n, q and l are all NaN.
// trsm's zero diagonal gives inf/NaN and det/slogdet's singular matrices 0 / (0, -inf), as
// on the CPU.
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// Scalars: T's own arithmetic (float's functions for float), as LAPACK's s* routines.

__device__ __forceinline__ float la_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double la_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float la_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double la_abs(double x) { return fabs(x); }
__device__ __forceinline__ float la_log(float x) { return logf(x); }
__device__ __forceinline__ double la_log(double x) { return log(x); }
__device__ __forceinline__ float la_exp(float x) { return expf(x); }
__device__ __forceinline__ double la_exp(double x) { return exp(x); }
__device__ __forceinline__ float la_hypot(float x, float y) { return hypotf(x, y); }
__device__ __forceinline__ double la_hypot(double x, double y) { return hypot(x, y); }
__device__ __forceinline__ float la_fma(float x, float y, float z) { return fmaf(x, y, z); }
__device__ __forceinline__ double la_fma(double x, double y, double z) { return fma(x, y, z); }
// Fortran SIGN(a, b): |a| with b's sign bit (so -0.0 counts as negative).
__device__ __forceinline__ float la_sign(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double la_sign(double a, double b) { return copysign(a, b); }

// Machine epsilon, the smallest positive normal value, and syevd_bwd's eigenvalue-gap floor.
template <typename T> struct la_lim;
template <> struct la_lim<float> {
  __device__ __forceinline__ static float eps() { return 1.1920928955078125e-07f; }
  __device__ __forceinline__ static float tiny() { return 1.17549435082228750797e-38f; }
  __device__ __forceinline__ static float gap() { return 1e-30f; }
};
template <> struct la_lim<double> {
  __device__ __forceinline__ static double eps() { return 2.220446049250313080847e-16; }
  __device__ __forceinline__ static double tiny() { return 2.2250738585072013830902e-308; }
  __device__ __forceinline__ static double gap() { return 1e-100; }
};

template <typename T> __device__ __forceinline__ T la_nan() { return (T)__int_as_float(0x7fc00000); }
template <typename T> __device__ __forceinline__ bool la_finite(T v) { return v - v == T(0); }

// ---------------------------------------------------------------------------------------
// Whole-matrix helpers (one thread).

template <typename T>
__device__ __forceinline__ void la_copy(T* dst, const T* src, rsmx_i64 len) {
  if (dst == src) return;
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) dst[i] = src[i];
}

template <typename T>
__device__ __forceinline__ void la_fill(T* dst, rsmx_i64 len, T v) {
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) dst[i] = v;
}

// Zeroes the strict lower (`zero_lower`) or strict upper triangle of the k x k `x`.
template <typename T>
__device__ __forceinline__ void la_zero_tri(T* x, rsmx_i64 k, int zero_lower) {
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < k; ++i) {
    rsmx_i64 lo = zero_lower ? 0 : i + 1, hi = zero_lower ? i : k;
    #pragma unroll 1
    for (rsmx_i64 j = lo; j < hi; ++j) x[i * k + j] = T(0);
  }
}

// Mirrors one strict triangle of the k x k `x` onto the other: `to_lower` copies the upper
// one down (copyUTL), otherwise the lower one up (copyLTU).
template <typename T>
__device__ __forceinline__ void la_mirror(T* x, rsmx_i64 k, int to_lower) {
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < k; ++i) {
    #pragma unroll 1
    for (rsmx_i64 j = 0; j < i; ++j) {
      if (to_lower) x[i * k + j] = x[j * k + i];
      else x[j * k + i] = x[i * k + j];
    }
  }
}

// out (r x c) = alpha * op(A) op(B) (+ out when `add`); op(A) is r x k, op(B) k x c; `ta`
// says A is stored k x r, `tb` that B is stored c x k. Sums run over p in order.
template <typename T>
__device__ __forceinline__ void la_gemm(rsmx_i64 r, rsmx_i64 c, rsmx_i64 k, T alpha, const T* a,
                                        int ta, const T* b, int tb, int add, T* out) {
  // op(A)(i, p) = a[i * ai + p * ap], op(B)(p, j) = b[p * bp + j * bj].
  const rsmx_i64 ai = ta ? 1 : k, ap = ta ? r : 1, bp = tb ? 1 : c, bj = tb ? k : 1;
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < r; ++i) {
    #pragma unroll 1
    for (rsmx_i64 j = 0; j < c; ++j) {
      const T* x = a + i * ai;
      const T* y = b + j * bj;
      T s = T(0);
      #pragma unroll 1
      for (rsmx_i64 p = 0; p < k; ++p, x += ap, y += bp) s += *x * *y;
      T v = alpha * s;
      T* o = out + i * c + j;
      *o = add ? v + *o : v;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Triangular solve and multiply of one vector x (k elements, `s` apart).
//
// T is the `lower` (else upper) triangle of the k x k `a`; with `tr` the matrix M used is
// T^T, else T. For trsm/trmm, M = op(T) on the left side (x a column of B) and op(T)^T on
// the right side (x a row of B), so tr = transpose XOR rightside. M is lower triangular
// iff lower != tr. Flags are 0 or 1.

// x <- M^-1 (alpha x): forward (M lower) or backward substitution, each x_i = (x_i - sum
// of M(i,p) x_p over the solved p, in increasing p) * (1 / M(i,i)).
template <typename T>
__device__ __forceinline__ void la_trsv(const T* a, rsmx_i64 k, int lower, int tr, T alpha,
                                        T* x, rsmx_i64 s) {
  if (alpha == T(0)) {
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < k; ++i) x[i * s] = T(0);
    return;
  }
  if (alpha != T(1)) {
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < k; ++i) x[i * s] *= alpha;
  }
  // M(i, p) = a[i * ri + p * rp].
  const rsmx_i64 ri = tr ? 1 : k, rp = tr ? k : 1;
  const bool low = lower != tr;
  const rsmx_i64 step = low ? 1 : -1;
  #pragma unroll 1
  for (rsmx_i64 n = 0, i = low ? 0 : k - 1; n < k; ++n, i += step) {
    // The solved p: 0..i (M lower) or i+1..k (M upper), in increasing order.
    const rsmx_i64 p0 = low ? 0 : i + 1, cnt = low ? i : k - 1 - i;
    const T* m = a + i * ri + p0 * rp;
    const T* y = x + p0 * s;
    T v = x[i * s];
    #pragma unroll 1
    for (rsmx_i64 q = 0; q < cnt; ++q, m += rp, y += s) v -= *m * *y;
    x[i * s] = v * (T(1) / a[i * (k + 1)]);
  }
}

// x <- alpha M x, in place (rows in the order that reads only unchanged ones).
template <typename T>
__device__ __forceinline__ void la_trmv(const T* a, rsmx_i64 k, int lower, int tr, T alpha,
                                        T* x, rsmx_i64 s) {
  if (alpha == T(0)) {
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < k; ++i) x[i * s] = T(0);
    return;
  }
  const rsmx_i64 ri = tr ? 1 : k, rp = tr ? k : 1;
  const bool low = lower != tr;
  const rsmx_i64 step = low ? -1 : 1;
  #pragma unroll 1
  for (rsmx_i64 n = 0, i = low ? k - 1 : 0; n < k; ++n, i += step) {
    // p over 0..=i (M lower) or i..k (M upper), in increasing order.
    const rsmx_i64 p0 = low ? 0 : i, cnt = low ? i + 1 : k - i;
    const T* m = a + i * ri + p0 * rp;
    const T* y = x + p0 * s;
    T v = T(0);
    #pragma unroll 1
    for (rsmx_i64 q = 0; q < cnt; ++q, m += rp, y += s) v += *m * *y;
    x[i * s] = v * alpha;
  }
}

// The m x n `x` <- alpha op(T)^-1 x (left) or alpha x op(T)^-1 (right), as trsm.
template <typename T>
__device__ __forceinline__ void la_trsm_mat(const T* a, T* x, rsmx_i64 m, rsmx_i64 n,
                                            int transpose, int rightside, int lower, T alpha) {
  const rsmx_i64 k = rightside ? n : m, cnt = rightside ? m : n;
  #pragma unroll 1
  for (rsmx_i64 v = 0; v < cnt; ++v) {
    la_trsv(a, k, lower, transpose ^ rightside, alpha, x + (rightside ? v * n : v),
            rightside ? (rsmx_i64)1 : n);
  }
}

// The m x n `x` <- alpha op(T) x (left) or alpha x op(T) (right), as trmm.
template <typename T>
__device__ __forceinline__ void la_trmm_mat(const T* a, T* x, rsmx_i64 m, rsmx_i64 n,
                                            int transpose, int rightside, int lower, T alpha) {
  const rsmx_i64 k = rightside ? n : m, cnt = rightside ? m : n;
  #pragma unroll 1
  for (rsmx_i64 v = 0; v < cnt; ++v) {
    la_trmv(a, k, lower, transpose ^ rightside, alpha, x + (rightside ? v * n : v),
            rightside ? (rsmx_i64)1 : n);
  }
}

// ---------------------------------------------------------------------------------------
// LU of M = A^T as MXNet hands the row-major buffer to LAPACK getrf: left-looking (Crout)
// with partial pivoting, M[i][k] = lu[k*n + i]; FMA dot products (as OpenBLAS), which
// decide whether a singular matrix's pivot comes out exactly 0. ipiv gets the 1-based
// interchanges; returns info (0, or the first exactly zero pivot, 1-based).
template <typename T>
__device__ __forceinline__ int la_getrf(T* lu, rsmx_i64 n, int* ipiv) {
  int info = 0;
  #pragma unroll 1
  for (rsmx_i64 j = 0; j < n; ++j) {
    T* col = lu + j * n;
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < j; ++i) {
      rsmx_i64 ip = ipiv[i] - 1;
      if (ip != i) {
        T t = col[i];
        col[i] = col[ip];
        col[ip] = t;
      }
    }
    // i < j: the U part (unit-lower substitution); i >= j: the update of the rest (row 0
    // of the first column would subtract an empty sum: a no-op).
    #pragma unroll 1
    for (rsmx_i64 i = 1; i < n; ++i) {
      rsmx_i64 kend = i < j ? i : j;
      T s = T(0);
      #pragma unroll 1
      for (rsmx_i64 k = 0; k < kend; ++k) s = la_fma(lu[k * n + i], col[k], s);
      col[i] -= s;
    }
    rsmx_i64 jp = j;
    T best = la_abs(col[j]);
    #pragma unroll 1
    for (rsmx_i64 i = j + 1; i < n; ++i) {
      T v = la_abs(col[i]);
      if (v > best) {
        best = v;
        jp = i;
      }
    }
    ipiv[j] = (int)(jp + 1);
    T piv = col[jp];
    if (piv != T(0)) {
      if (jp != j) {
        col[jp] = col[j];
        col[j] = piv;
        #pragma unroll 1
        for (rsmx_i64 c = 0; c < j; ++c) {
          T t = lu[c * n + j];
          lu[c * n + j] = lu[c * n + jp];
          lu[c * n + jp] = t;
        }
      }
      T inv = T(1) / piv;
      #pragma unroll 1
      for (rsmx_i64 i = j + 1; i < n; ++i) col[i] *= inv;
    } else if (info == 0) {
      info = (int)(j + 1);
    }
  }
  return info;
}

// Column c of M^-1 (= row c of A^-1) from la_getrf's factors into x (n elements, `s`
// apart), as LAPACK getri's result.
template <typename T>
__device__ __forceinline__ void la_getri_vec(const T* lu, const int* ipiv, rsmx_i64 n,
                                             rsmx_i64 c, T* x, rsmx_i64 s) {
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < n; ++i) x[i * s] = i == c ? T(1) : T(0);
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < n; ++i) {
    rsmx_i64 ip = ipiv[i] - 1;
    if (ip != i) {
      T t = x[i * s];
      x[i * s] = x[ip * s];
      x[ip * s] = t;
    }
  }
  #pragma unroll 1
  for (rsmx_i64 i = 1; i < n; ++i) {
    T v = T(0);
    #pragma unroll 1
    for (rsmx_i64 k = 0; k < i; ++k) v += lu[k * n + i] * x[k * s];
    x[i * s] -= v;
  }
  #pragma unroll 1
  for (rsmx_i64 i = n - 1; i >= 0; --i) {
    T v = T(0);
    #pragma unroll 1
    for (rsmx_i64 k = i + 1; k < n; ++k) v += lu[k * n + i] * x[k * s];
    x[i * s] = (x[i * s] - v) / lu[i * (n + 1)];
  }
}

// (sign, log|det|) from la_getrf's factors, as MXNet's SignedLogDet.
template <typename T>
__device__ __forceinline__ void la_signed_logdet(const T* lu, const int* ipiv, rsmx_i64 n,
                                                 T* sign, T* logabs) {
  int changes = 0;
  T dsign = T(1), lsum = T(0);
  #pragma unroll 1
  for (rsmx_i64 j = 0; j < n; ++j) {
    if ((rsmx_i64)ipiv[j] != j + 1) changes ^= 1;
    T d = lu[j * (n + 1)];
    T sg = T(0) < d ? T(1) : (d < T(0) ? T(-1) : T(0));
    dsign *= sg;
    lsum += la_log(la_abs(d));
  }
  *sign = (changes ? T(-1) : T(1)) * dsign;
  *logabs = lsum;
}

// da = scale * A^-T from a fresh LU of `a` (lu: n*n scratch), as MXNet's getri-based
// helper of det/slogdet backward.
template <typename T>
__device__ __forceinline__ void la_scaled_inv_t(T* da, const T* a, rsmx_i64 n, T scale, T* lu,
                                                int* ipiv) {
  la_copy(lu, a, n * n);
  la_getrf(lu, n, ipiv);
  #pragma unroll 1
  for (rsmx_i64 c = 0; c < n; ++c) {
    // Row c of A^-1 is column c of A^-T.
    la_getri_vec(lu, ipiv, n, c, da + c, n);
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < n; ++i) da[i * n + c] = scale * da[i * n + c];
  }
}

// ---------------------------------------------------------------------------------------
// Householder reflectors (LAPACK dnrm2 / dlarfg / dlarf conventions).

// 2-norm of len elements `s` apart, scaled against overflow.
template <typename T>
__device__ __forceinline__ T la_nrm2(const T* x, rsmx_i64 len, rsmx_i64 s) {
  T scale = T(0);
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) {
    T a = la_abs(x[i * s]);
    if (a != a) return a;
    if (a > scale) scale = a;
  }
  if (scale == T(0) || !la_finite(scale)) return scale;
  T ssq = T(0);
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) {
    T t = x[i * s] / scale;
    ssq += t * t;
  }
  return scale * la_sqrt(ssq);
}

// dlarfg on x (len elements `s` apart): x[0] alpha -> beta, x[1..] -> the essential part
// of v (v[0] = 1); returns tau (0 with x unchanged when x[1..] is zero).
template <typename T>
__device__ __forceinline__ T la_larfg(T* x, rsmx_i64 len, rsmx_i64 s) {
  if (len <= 1) return T(0);
  T alpha = x[0];
  T xnorm = la_nrm2(x + s, len - 1, s);
  if (xnorm == T(0)) return T(0);
  T beta = -la_sign(la_hypot(alpha, xnorm), alpha);
  const T safmin = la_lim<T>::tiny() / (la_lim<T>::eps() * T(0.5));
  int knt = 0;
  if (la_abs(beta) < safmin) {
    const T rsafmn = T(1) / safmin;
    do {
      knt += 1;
      #pragma unroll 1
      for (rsmx_i64 i = 1; i < len; ++i) x[i * s] *= rsafmn;
      beta *= rsafmn;
      alpha *= rsafmn;
    } while (la_abs(beta) < safmin && knt < 20);
    xnorm = la_nrm2(x + s, len - 1, s);
    beta = -la_sign(la_hypot(alpha, xnorm), alpha);
  }
  T tau = (beta - alpha) / beta;
  T scal = T(1) / (alpha - beta);
  #pragma unroll 1
  for (rsmx_i64 i = 1; i < len; ++i) x[i * s] *= scal;
  #pragma unroll 1
  for (int i = 0; i < knt; ++i) beta *= safmin;
  x[0] = beta;
  return tau;
}

// y <- (I - tau v v^T) y for contiguous v (v[0] = 1) and y of len elements.
template <typename T>
__device__ __forceinline__ void la_reflect(const T* v, T tau, T* y, rsmx_i64 len) {
  if (tau == T(0)) return;
  T d = T(0);
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) d += v[i] * y[i];
  T f = tau * d;
  #pragma unroll 1
  for (rsmx_i64 i = 0; i < len; ++i) y[i] -= f * v[i];
}

// ---------------------------------------------------------------------------------------
// Symmetric eigensolver pieces. w: the full symmetric n x n matrix; z: rows of Q^T.

// Householder tridiagonalization of w, z <- H_k z; zt is n scratch elements. v lives in
// column k of w below the diagonal and p/q in row k right of it while step k runs; the
// step then leaves beta on the sub/superdiagonal and zeros beyond.
template <typename T>
__device__ __forceinline__ void la_tridiag(T* w, rsmx_i64 n, T* z, T* zt) {
  #pragma unroll 1
  for (rsmx_i64 k = 0; k + 2 < n; ++k) {
    const rsmx_i64 len = n - k - 1;
    T* v = w + (k + 1) * n + k;  // v_i = v[i * n]
    T* p = w + k * n + k + 1;    // p_i = p[i]
    T* blk = w + (k + 1) * n + k + 1;
    T tau = la_larfg(v, len, n);
    T beta = v[0];
    v[0] = T(1);
    if (tau != T(0)) {
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) {
        T d = T(0);
        #pragma unroll 1
        for (rsmx_i64 j = 0; j < len; ++j) d += blk[i * n + j] * v[j * n];
        p[i] = tau * d;
      }
      T d = T(0);
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) d += p[i] * v[i * n];
      T kk = T(0.5) * tau * d;
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) p[i] -= kk * v[i * n];
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) {
        T vi = v[i * n], qi = p[i];
        #pragma unroll 1
        for (rsmx_i64 j = 0; j < len; ++j) blk[i * n + j] -= vi * p[j] + qi * v[j * n];
      }
      #pragma unroll 1
      for (rsmx_i64 t = 0; t < n; ++t) zt[t] = T(0);
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) {
        T vi = v[i * n];
        const T* row = z + (k + 1 + i) * n;
        #pragma unroll 1
        for (rsmx_i64 t = 0; t < n; ++t) zt[t] += vi * row[t];
      }
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < len; ++i) {
        T f = tau * v[i * n];
        T* row = z + (k + 1 + i) * n;
        #pragma unroll 1
        for (rsmx_i64 t = 0; t < n; ++t) row[t] -= f * zt[t];
      }
    }
    v[0] = beta;
    p[0] = beta;
    #pragma unroll 1
    for (rsmx_i64 i = 1; i < len; ++i) {
      v[i * n] = T(0);
      p[i] = T(0);
    }
  }
}

// One implicit symmetric QR step with Wilkinson shift on the unreduced block lo..hi of
// the tridiagonal (d, e); e_k = e[k * es]; rotations applied to rows k, k+1 of z.
template <typename T>
__device__ __forceinline__ void la_qr_step(T* d, T* e, rsmx_i64 es, T* z, rsmx_i64 n,
                                           rsmx_i64 lo, rsmx_i64 hi) {
  const T two = T(1) + T(1);
  T dd = (d[hi - 1] - d[hi]) * T(0.5);
  T eh = e[(hi - 1) * es];
  T sgn = dd >= T(0) ? T(1) : T(-1);
  T mu = d[hi] - eh * (eh / (dd + sgn * la_hypot(dd, eh)));
  T x = d[lo] - mu;
  T bulge = e[lo * es];
  #pragma unroll 1
  for (rsmx_i64 k = lo; k < hi; ++k) {
    T r = la_hypot(x, bulge);
    T c = T(1), s = T(0);
    if (r != T(0)) {
      c = x / r;
      s = -bulge / r;
    }
    if (k > lo) e[(k - 1) * es] = r;
    T a = d[k], b = e[k * es], cc = d[k + 1];
    d[k] = c * c * a - two * c * s * b + s * s * cc;
    d[k + 1] = s * s * a + two * c * s * b + c * c * cc;
    e[k * es] = c * s * (a - cc) + (c * c - s * s) * b;
    if (k + 1 < hi) {
      x = e[k * es];
      bulge = -s * e[(k + 1) * es];
      e[(k + 1) * es] *= c;
    }
    T* rk = z + k * n;
    #pragma unroll 1
    for (rsmx_i64 t = 0; t < n; ++t) {
      T u = rk[t], q = rk[n + t];
      rk[t] = c * u - s * q;
      rk[n + t] = s * u + c * q;
    }
  }
}

template <typename T>
__device__ __forceinline__ bool la_negligible(T ev, T a, T b) {
  T m = la_abs(ev);
  return m <= la_lim<T>::eps() * (la_abs(a) + la_abs(b)) || m < la_lim<T>::tiny();
}

// Implicit QR on the tridiagonal (d, e), at most 30 n steps; false if it did not converge.
template <typename T>
__device__ __forceinline__ bool la_tridiag_qr(T* d, T* e, rsmx_i64 es, T* z, rsmx_i64 n) {
  if (n < 2) return true;
  rsmx_i64 budget = 30 * n;
  rsmx_i64 hi = n - 1;
  while (hi > 0) {
    if (la_negligible(e[(hi - 1) * es], d[hi - 1], d[hi])) {
      e[(hi - 1) * es] = T(0);
      hi -= 1;
      continue;
    }
    rsmx_i64 lo = hi - 1;
    while (lo > 0 && !la_negligible(e[(lo - 1) * es], d[lo - 1], d[lo])) lo -= 1;
    if (lo > 0) e[(lo - 1) * es] = T(0);
    if (budget == 0) return false;
    budget -= 1;
    la_qr_step(d, e, es, z, n, lo, hi);
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Forward kernels.

// Cholesky: out = L (A = L L^T, lower) or U (A = U^T U); reads only the chosen triangle.
template <typename T>
__device__ void la_potrf(T* out, const T* a, rsmx_i64 batch, rsmx_i64 n, int lower, int* info) {
  // L(i, j) (i >= j) at x[i * rs + j * cs].
  const rsmx_i64 rs = lower ? n : 1, cs = lower ? 1 : n;
  RSMX_GRID_LOOP(b, batch) {
    T* x = out + b * n * n;
    la_copy(x, a + b * n * n, n * n);
    int res = 0;
    #pragma unroll 1
    for (rsmx_i64 j = 0; j < n; ++j) {
      T s = T(0);
      #pragma unroll 1
      for (rsmx_i64 k = 0; k < j; ++k) {
        T v = x[j * rs + k * cs];
        s = la_fma(v, v, s);
      }
      T ajj = x[j * (n + 1)] - s;
      if (ajj <= T(0)) {
        x[j * (n + 1)] = ajj;
        res = (int)(j + 1);
        break;
      }
      ajj = la_sqrt(ajj);
      x[j * (n + 1)] = ajj;
      T inv = T(1) / ajj;
      #pragma unroll 1
      for (rsmx_i64 i = j + 1; i < n; ++i) {
        T t = T(0);
        #pragma unroll 1
        for (rsmx_i64 k = 0; k < j; ++k) t = la_fma(x[i * rs + k * cs], x[j * rs + k * cs], t);
        x[i * rs + j * cs] = (x[i * rs + j * cs] - t) * inv;
      }
    }
    la_zero_tri(x, n, !lower);
    info[b] = res;
  }
}

// Inverse from a Cholesky factor: W = L^-1 is built in out's lower triangle, then out =
// W^T W row by row over it (each entry read before it is overwritten).
template <typename T>
__device__ void la_potri(T* out, const T* l, rsmx_i64 batch, rsmx_i64 n, int lower, T* work,
                         int* info) {
  (void)work;
  // at(i, j) = src[i * rs + j * cs] for i >= j.
  const rsmx_i64 rs = lower ? n : 1, cs = lower ? 1 : n;
  RSMX_GRID_LOOP(b, batch) {
    const T* src = l + b * n * n;
    T* x = out + b * n * n;
    int res = 0;
    #pragma unroll 1
    for (rsmx_i64 j = 0; j < n; ++j) {
      if (src[j * (n + 1)] == T(0)) {
        res = (int)(j + 1);
        break;
      }
    }
    info[b] = res;
    if (res != 0) {
      la_fill(x, n * n, la_nan<T>());
      continue;
    }
    #pragma unroll 1
    for (rsmx_i64 j = 0; j < n; ++j) {
      x[j * (n + 1)] = T(1) / src[j * (n + 1)];
      #pragma unroll 1
      for (rsmx_i64 i = j + 1; i < n; ++i) {
        T s = T(0);
        #pragma unroll 1
        for (rsmx_i64 k = j; k < i; ++k) s += src[i * rs + k * cs] * x[k * n + j];
        x[i * n + j] = -s / src[i * (n + 1)];
      }
    }
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < n; ++i) {
      #pragma unroll 1
      for (rsmx_i64 j = 0; j <= i; ++j) {
        T s = T(0);
        #pragma unroll 1
        for (rsmx_i64 k = i; k < n; ++k) s += x[k * n + i] * x[k * n + j];
        x[i * n + j] = s;
        x[j * n + i] = s;
      }
    }
  }
}

// trsm / trmm: one thread per (matrix, column of B) on the left side, per (matrix, row of
// B) on the right side.
template <typename T>
__device__ void la_trsm(T* out, const T* a, const T* b, rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n,
                        int transpose, int rightside, int lower, double alpha) {
  transpose = transpose != 0;
  rightside = rightside != 0;
  lower = lower != 0;
  const rsmx_i64 k = rightside ? n : m, cnt = rightside ? m : n, s = rightside ? 1 : n;
  RSMX_GRID_LOOP(t, batch * cnt) {
    rsmx_i64 bi = t / cnt, v = t % cnt;
    rsmx_i64 off = bi * m * n + (rightside ? v * n : v);
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < k; ++i) out[off + i * s] = b[off + i * s];
    la_trsv(a + bi * k * k, k, lower, transpose ^ rightside, (T)alpha, out + off, s);
  }
}

template <typename T>
__device__ void la_trmm(T* out, const T* a, const T* b, rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n,
                        int transpose, int rightside, int lower, double alpha) {
  transpose = transpose != 0;
  rightside = rightside != 0;
  lower = lower != 0;
  const rsmx_i64 k = rightside ? n : m, cnt = rightside ? m : n, s = rightside ? 1 : n;
  RSMX_GRID_LOOP(t, batch * cnt) {
    rsmx_i64 bi = t / cnt, v = t % cnt;
    rsmx_i64 off = bi * m * n + (rightside ? v * n : v);
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < k; ++i) out[off + i * s] = b[off + i * s];
    la_trmv(a + bi * k * k, k, lower, transpose ^ rightside, (T)alpha, out + off, s);
  }
}

// Inverse by getrf + getri of A^T (MXNet's CPU path); out row c = column c of (A^T)^-1.
template <typename T>
__device__ void la_inverse(T* out, const T* a, rsmx_i64 batch, rsmx_i64 n, T* work, int* ipiv,
                           int* info) {
  RSMX_GRID_LOOP(b, batch) {
    T* lu = work + b * n * n;
    int* piv = ipiv + b * n;
    T* x = out + b * n * n;
    la_copy(lu, a + b * n * n, n * n);
    int res = la_getrf(lu, n, piv);
    info[b] = res;
    if (res != 0) {
      la_fill(x, n * n, la_nan<T>());
      continue;
    }
    #pragma unroll 1
    for (rsmx_i64 c = 0; c < n; ++c) la_getri_vec(lu, piv, n, c, x + c * n, (rsmx_i64)1);
  }
}

// det = sign * exp(log|det|) from the LU factors, as MXNet (n = 0 gives 1).
template <typename T>
__device__ void la_det(T* det, const T* a, rsmx_i64 batch, rsmx_i64 n, T* work, int* ipiv) {
  RSMX_GRID_LOOP(b, batch) {
    T* lu = work + b * n * n;
    int* piv = ipiv + b * n;
    la_copy(lu, a + b * n * n, n * n);
    la_getrf(lu, n, piv);
    T sign, logabs;
    la_signed_logdet(lu, piv, n, &sign, &logabs);
    det[b] = sign * la_exp(logabs);
  }
}

template <typename T>
__device__ void la_slogdet(T* sign, T* logabsdet, const T* a, rsmx_i64 batch, rsmx_i64 n, T* work,
                           int* ipiv) {
  RSMX_GRID_LOOP(b, batch) {
    T* lu = work + b * n * n;
    int* piv = ipiv + b * n;
    la_copy(lu, a + b * n * n, n * n);
    la_getrf(lu, n, piv);
    la_signed_logdet(lu, piv, n, sign + b, logabsdet + b);
  }
}

// LQ: Householder QR (geqr2 + org2r) of A^T, whose column i is row i of the buffer; Q is
// built in q, tau in work (m per matrix). Needs m <= n (otherwise q and l are NaN).
template <typename T>
__device__ void la_gelqf(T* q, T* l, const T* a, rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n, T* work) {
  RSMX_GRID_LOOP(b, batch) {
    T* x = q + b * m * n;
    T* lo = l + b * m * m;
    T* tau = work + b * m;
    if (m > n) {
      la_fill(x, m * n, la_nan<T>());
      la_fill(lo, m * m, la_nan<T>());
      continue;
    }
    la_copy(x, a + b * m * n, m * n);
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < m; ++i) {
      T* col = x + i * n + i;
      T t = la_larfg(col, n - i, (rsmx_i64)1);
      tau[i] = t;
      if (t != T(0) && i + 1 < m) {
        T beta = col[0];
        col[0] = T(1);
        #pragma unroll 1
        for (rsmx_i64 r = i + 1; r < m; ++r) la_reflect(col, t, x + r * n + i, n - i);
        col[0] = beta;
      }
    }
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < m; ++i) {
      #pragma unroll 1
      for (rsmx_i64 j = 0; j < m; ++j) lo[i * m + j] = j <= i ? x[i * n + j] : T(0);
    }
    #pragma unroll 1
    for (rsmx_i64 i = m - 1; i >= 0; --i) {
      T* col = x + i * n;
      T t = tau[i];
      if (i + 1 < m) {
        col[i] = T(1);
        #pragma unroll 1
        for (rsmx_i64 r = i + 1; r < m; ++r) la_reflect(col + i, t, x + r * n + i, n - i);
      }
      #pragma unroll 1
      for (rsmx_i64 j = i + 1; j < n; ++j) col[j] *= -t;
      col[i] = T(1) - t;
      #pragma unroll 1
      for (rsmx_i64 j = 0; j < i; ++j) col[j] = T(0);
    }
  }
}

// Symmetric eigendecomposition of the lower triangle of A: lam ascending, u's rows the
// eigenvectors (A = U^T diag(lam) U), each row's first entry of largest magnitude made
// positive. work: the n x n matrix being reduced; its superdiagonal then holds e, lam d.
template <typename T>
__device__ void la_syevd(T* u, T* lam, const T* a, rsmx_i64 batch, rsmx_i64 n, T* work) {
  RSMX_GRID_LOOP(b, batch) {
    const T* src = a + b * n * n;
    T* z = u + b * n * n;
    T* d = lam + b * n;
    T* w = work + b * n * n;
    T anrm = T(0);
    bool bad = false;
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < n && !bad; ++i) {
      #pragma unroll 1
      for (rsmx_i64 j = 0; j <= i; ++j) {
        T v = src[i * n + j];
        if (!la_finite(v)) {
          bad = true;
          break;
        }
        w[i * n + j] = v;
        w[j * n + i] = v;
        if (la_abs(v) > anrm) anrm = la_abs(v);
      }
    }
    if (!bad) {
      const T smlnum = la_lim<T>::tiny() / la_lim<T>::eps();
      const T rmin = la_sqrt(smlnum), rmax = la_sqrt(T(1) / smlnum);
      T sigma = T(1);
      if (anrm > T(0) && anrm < rmin) sigma = rmin / anrm;
      else if (anrm > rmax) sigma = rmax / anrm;
      if (sigma != T(1)) {
        #pragma unroll 1
        for (rsmx_i64 i = 0; i < n * n; ++i) w[i] *= sigma;
      }
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < n * n; ++i) z[i] = i % (n + 1) == 0 ? T(1) : T(0);
      la_tridiag(w, n, z, d);  // d: scratch until the diagonal is read
      #pragma unroll 1
      for (rsmx_i64 i = 0; i < n; ++i) d[i] = w[i * (n + 1)];
      bad = !la_tridiag_qr(d, w + 1, n + 1, z, n);
      if (!bad) {
        #pragma unroll 1
        for (rsmx_i64 i = 0; i < n; ++i) {
          rsmx_i64 kmin = i;
          #pragma unroll 1
          for (rsmx_i64 k = i + 1; k < n; ++k) {
            if (d[k] < d[kmin]) kmin = k;
          }
          if (kmin != i) {
            T t = d[i];
            d[i] = d[kmin];
            d[kmin] = t;
            #pragma unroll 1
            for (rsmx_i64 j = 0; j < n; ++j) {
              T y = z[i * n + j];
              z[i * n + j] = z[kmin * n + j];
              z[kmin * n + j] = y;
            }
          }
        }
        if (sigma != T(1)) {
          #pragma unroll 1
          for (rsmx_i64 i = 0; i < n; ++i) d[i] = d[i] / sigma;
        }
        #pragma unroll 1
        for (rsmx_i64 i = 0; i < n; ++i) {
          T* row = z + i * n;
          rsmx_i64 kmax = 0;
          T vmax = la_abs(row[0]);
          #pragma unroll 1
          for (rsmx_i64 j = 1; j < n; ++j) {
            if (la_abs(row[j]) > vmax) {
              vmax = la_abs(row[j]);
              kmax = j;
            }
          }
          if (row[kmax] < T(0)) {
            #pragma unroll 1
            for (rsmx_i64 j = 0; j < n; ++j) row[j] = -row[j];
          }
        }
      }
    }
    if (bad) {
      la_fill(z, n * n, la_nan<T>());
      la_fill(d, n, la_nan<T>());
    }
  }
}

// ---------------------------------------------------------------------------------------
// Backward kernels (MXNet 1.9.1 la_op-inl.h), one thread per matrix.

// dA = 0.5 L^-T copyLTU(L^T dL) L^-1 (lower) or 0.5 U^-1 copyUTL(dU U^T) U^-T, in place
// in da.
template <typename T>
__device__ void la_potrf_bwd(T* da, const T* l, const T* dl, rsmx_i64 batch, rsmx_i64 n,
                             int lower, T* work) {
  (void)work;
  lower = lower != 0;
  RSMX_GRID_LOOP(b, batch) {
    const T* lb = l + b * n * n;
    T* x = da + b * n * n;
    la_copy(x, dl + b * n * n, n * n);
    la_trmm_mat(lb, x, n, n, 1, !lower, lower, T(1));
    la_mirror(x, n, !lower);
    la_trsm_mat(lb, x, n, n, lower, 0, lower, T(1));
    la_trsm_mat(lb, x, n, n, !lower, 1, lower, T(0.5));
  }
}

// dL = -tril(A (dA + dA^T) L^-T) (lower) or -triu(U^-T (dA + dA^T) A).
template <typename T>
__device__ void la_potri_bwd(T* dl_out, const T* l, const T* a_out, const T* da, rsmx_i64 batch,
                             rsmx_i64 n, int lower, T* work) {
  (void)work;
  lower = lower != 0;
  RSMX_GRID_LOOP(b, batch) {
    const T* ab = a_out + b * n * n;
    const T* gb = da + b * n * n;
    T* x = dl_out + b * n * n;
    if (lower) {
      la_gemm(n, n, n, T(1), ab, 0, gb, 0, 0, x);
      la_gemm(n, n, n, T(1), ab, 0, gb, 1, 1, x);
    } else {
      la_gemm(n, n, n, T(1), gb, 0, ab, 0, 0, x);
      la_gemm(n, n, n, T(1), gb, 1, ab, 0, 1, x);
    }
    la_trsm_mat(l + b * n * n, x, n, n, 1, lower, lower, T(-1));
    la_zero_tri(x, n, !lower);
  }
}

// dB = alpha op(T)^-T dC (or alpha dC op(T)^-T); dA = -(1/alpha) mask(G), G = dB C^T,
// C dB^T, C^T dB or dB^T C.
template <typename T>
__device__ void la_trsm_bwd(T* da, T* db, const T* a, const T* c, const T* dc, rsmx_i64 batch,
                            rsmx_i64 m, rsmx_i64 n, int transpose, int rightside, int lower,
                            double alpha, T* work) {
  (void)work;
  transpose = transpose != 0;
  rightside = rightside != 0;
  lower = lower != 0;
  const rsmx_i64 k = rightside ? n : m, inner = rightside ? m : n;
  const T al = (T)alpha;
  const T scale = -(T(1) / al);
  RSMX_GRID_LOOP(b, batch) {
    const T* ab = a + b * k * k;
    const T* cb = c + b * m * n;
    T* xb = db + b * m * n;
    T* xa = da + b * k * k;
    la_copy(xb, dc + b * m * n, m * n);
    la_trsm_mat(ab, xb, m, n, !transpose, rightside, lower, al);
    if (rightside == transpose) la_gemm(k, k, inner, scale, (const T*)xb, transpose, cb, !transpose, 0, xa);
    else la_gemm(k, k, inner, scale, cb, !transpose, (const T*)xb, transpose, 0, xa);
    la_zero_tri(xa, k, !lower);
  }
}

// dA = alpha mask(G), G = dC B^T, B dC^T, B^T dC or dC^T B; dB = alpha op(T)^T dC (or
// alpha dC op(T)^T).
template <typename T>
__device__ void la_trmm_bwd(T* da, T* db, const T* a, const T* bm, const T* dc, rsmx_i64 batch,
                            rsmx_i64 m, rsmx_i64 n, int transpose, int rightside, int lower,
                            double alpha, T* work) {
  (void)work;
  transpose = transpose != 0;
  rightside = rightside != 0;
  lower = lower != 0;
  const rsmx_i64 k = rightside ? n : m, inner = rightside ? m : n;
  const T al = (T)alpha;
  RSMX_GRID_LOOP(b, batch) {
    const T* bb = bm + b * m * n;
    const T* gb = dc + b * m * n;
    T* xa = da + b * k * k;
    T* xb = db + b * m * n;
    if (rightside == transpose) la_gemm(k, k, inner, al, gb, transpose, bb, !transpose, 0, xa);
    else la_gemm(k, k, inner, al, bb, !transpose, gb, transpose, 0, xa);
    la_zero_tri(xa, k, !lower);
    la_copy(xb, gb, m * n);
    la_trmm_mat(a + b * k * k, xb, m, n, !transpose, rightside, lower, al);
  }
}

// dA = L^-T (dQ + copyLTU(M) Q), M = L^T dL - dQ Q^T (M in work, m*m per matrix).
template <typename T>
__device__ void la_gelqf_bwd(T* da, const T* q, const T* l, const T* dq, const T* dl,
                             rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n, T* work) {
  RSMX_GRID_LOOP(b, batch) {
    const T* qb = q + b * m * n;
    const T* lb = l + b * m * m;
    T* x = da + b * m * n;
    T* tm = work + b * m * m;
    la_copy(x, dq + b * m * n, m * n);
    la_copy(tm, dl + b * m * m, m * m);
    la_trmm_mat(lb, tm, m, m, 1, 0, 1, T(1));
    la_gemm(m, m, n, T(-1), (const T*)x, 0, qb, 1, 1, tm);
    la_mirror(tm, m, 0);
    la_gemm(m, n, m, T(1), (const T*)tm, 0, qb, 0, 1, x);
    la_trsm_mat(lb, x, m, n, 1, 0, 1, T(1));
  }
}

// dA = U^T Y U, X = dU U^T, Y_ij = Y_ji = (X_ij - X_ji) / (2 max(lam_i - lam_j, eps)) for
// i > j, Y_ii = dlam_i. X in work (n*n per matrix); Y in da.
template <typename T>
__device__ void la_syevd_bwd(T* da, const T* u, const T* lam, const T* du, const T* dlam,
                             rsmx_i64 batch, rsmx_i64 n, T* work) {
  RSMX_GRID_LOOP(b, batch) {
    const T* ub = u + b * n * n;
    const T* lb = lam + b * n;
    T* x = work + b * n * n;
    T* y = da + b * n * n;
    la_gemm(n, n, n, T(1), du + b * n * n, 0, ub, 1, 0, x);
    #pragma unroll 1
    for (rsmx_i64 i = 1; i < n; ++i) {
      #pragma unroll 1
      for (rsmx_i64 j = 0; j < i; ++j) {
        T denom = lb[i] - lb[j];
        if (denom < la_lim<T>::gap()) denom = la_lim<T>::gap();
        denom *= T(2);
        T elem = (x[i * n + j] - x[j * n + i]) / denom;
        y[i * n + j] = elem;
        y[j * n + i] = elem;
      }
    }
    #pragma unroll 1
    for (rsmx_i64 i = 0; i < n; ++i) y[i * (n + 1)] = dlam[b * n + i];
    la_gemm(n, n, n, T(1), ub, 1, (const T*)y, 0, 0, x);
    la_gemm(n, n, n, T(1), (const T*)x, 0, ub, 0, 0, y);
  }
}

// dA = -B^T dB B^T (tmp = dB B^T in work, n*n per matrix).
template <typename T>
__device__ void la_inverse_bwd(T* da, const T* bm, const T* db, rsmx_i64 batch, rsmx_i64 n,
                               T* work) {
  RSMX_GRID_LOOP(b, batch) {
    const T* bb = bm + b * n * n;
    T* tmp = work + b * n * n;
    la_gemm(n, n, n, T(1), db + b * n * n, 0, bb, 1, 0, tmp);
    la_gemm(n, n, n, T(-1), bb, 1, (const T*)tmp, 0, 0, da + b * n * n);
  }
}

// dA = (det ddet) A^-T, zeros when det == 0.
template <typename T>
__device__ void la_det_bwd(T* da, const T* a, const T* det, const T* ddet, rsmx_i64 batch,
                           rsmx_i64 n, T* work, int* ipiv) {
  RSMX_GRID_LOOP(b, batch) {
    T* x = da + b * n * n;
    T d = det[b];
    if (d == T(0)) {
      la_fill(x, n * n, T(0));
      continue;
    }
    la_scaled_inv_t(x, a + b * n * n, n, d * ddet[b], work + b * n * n, ipiv + b * n);
  }
}

// dA = dlogabsdet A^-T, zeros when logabsdet == -inf (the sign's gradient is ignored).
template <typename T>
__device__ void la_slogdet_bwd(T* da, const T* a, const T* logabsdet, const T* dlogabsdet,
                               rsmx_i64 batch, rsmx_i64 n, T* work, int* ipiv) {
  RSMX_GRID_LOOP(b, batch) {
    T* x = da + b * n * n;
    if (logabsdet[b] == -(T)INFINITY) {
      la_fill(x, n * n, T(0));
      continue;
    }
    la_scaled_inv_t(x, a + b * n * n, n, dlogabsdet[b], work + b * n * n, ipiv + b * n);
  }
}

// ---------------------------------------------------------------------------------------
// Instantiations.

#define LA_POTRF(kernel, T, suffix)                                                          \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* a, rsmx_i64 batch,           \
                                               rsmx_i64 n, int lower, int* info) {           \
    kernel<T>(out, a, batch, n, lower, info);                                                \
  }
#define LA_POTRI(kernel, T, suffix)                                                          \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* l, rsmx_i64 batch,           \
                                               rsmx_i64 n, int lower, T* work, int* info) {  \
    kernel<T>(out, l, batch, n, lower, work, info);                                          \
  }
#define LA_TRI(kernel, T, suffix)                                                            \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* a, const T* b,               \
                                               rsmx_i64 batch, rsmx_i64 m, rsmx_i64 n,       \
                                               int transpose, int rightside, int lower,      \
                                               double alpha) {                               \
    kernel<T>(out, a, b, batch, m, n, transpose, rightside, lower, alpha);                   \
  }
#define LA_INVERSE(kernel, T, suffix)                                                        \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* a, rsmx_i64 batch,           \
                                               rsmx_i64 n, T* work, int* ipiv, int* info) {  \
    kernel<T>(out, a, batch, n, work, ipiv, info);                                           \
  }
#define LA_DET(kernel, T, suffix)                                                            \
  extern "C" __global__ void kernel##_##suffix(T* det, const T* a, rsmx_i64 batch,           \
                                               rsmx_i64 n, T* work, int* ipiv) {             \
    kernel<T>(det, a, batch, n, work, ipiv);                                                 \
  }
#define LA_SLOGDET(kernel, T, suffix)                                                        \
  extern "C" __global__ void kernel##_##suffix(T* sign, T* logabsdet, const T* a,            \
                                               rsmx_i64 batch, rsmx_i64 n, T* work,          \
                                               int* ipiv) {                                  \
    kernel<T>(sign, logabsdet, a, batch, n, work, ipiv);                                     \
  }
#define LA_GELQF(kernel, T, suffix)                                                          \
  extern "C" __global__ void kernel##_##suffix(T* q, T* l, const T* a, rsmx_i64 batch,       \
                                               rsmx_i64 m, rsmx_i64 n, T* work) {            \
    kernel<T>(q, l, a, batch, m, n, work);                                                   \
  }
#define LA_SYEVD(kernel, T, suffix)                                                          \
  extern "C" __global__ void kernel##_##suffix(T* u, T* lam, const T* a, rsmx_i64 batch,     \
                                               rsmx_i64 n, T* work) {                        \
    kernel<T>(u, lam, a, batch, n, work);                                                    \
  }
#define LA_POTRF_BWD(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* da, const T* l, const T* dl,               \
                                               rsmx_i64 batch, rsmx_i64 n, int lower,        \
                                               T* work) {                                    \
    kernel<T>(da, l, dl, batch, n, lower, work);                                             \
  }
#define LA_POTRI_BWD(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* dl_out, const T* l, const T* a_out,        \
                                               const T* da, rsmx_i64 batch, rsmx_i64 n,      \
                                               int lower, T* work) {                         \
    kernel<T>(dl_out, l, a_out, da, batch, n, lower, work);                                  \
  }
#define LA_TRI_BWD(kernel, T, suffix)                                                        \
  extern "C" __global__ void kernel##_##suffix(                                              \
      T* da, T* db, const T* a, const T* b, const T* dc, rsmx_i64 batch, rsmx_i64 m,         \
      rsmx_i64 n, int transpose, int rightside, int lower, double alpha, T* work) {          \
    kernel<T>(da, db, a, b, dc, batch, m, n, transpose, rightside, lower, alpha, work);      \
  }
#define LA_GELQF_BWD(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* da, const T* q, const T* l, const T* dq,   \
                                               const T* dl, rsmx_i64 batch, rsmx_i64 m,      \
                                               rsmx_i64 n, T* work) {                        \
    kernel<T>(da, q, l, dq, dl, batch, m, n, work);                                          \
  }
#define LA_SYEVD_BWD(kernel, T, suffix)                                                      \
  extern "C" __global__ void kernel##_##suffix(T* da, const T* u, const T* lam, const T* du, \
                                               const T* dlam, rsmx_i64 batch, rsmx_i64 n,    \
                                               T* work) {                                    \
    kernel<T>(da, u, lam, du, dlam, batch, n, work);                                         \
  }
#define LA_INVERSE_BWD(kernel, T, suffix)                                                    \
  extern "C" __global__ void kernel##_##suffix(T* da, const T* b, const T* db,               \
                                               rsmx_i64 batch, rsmx_i64 n, T* work) {        \
    kernel<T>(da, b, db, batch, n, work);                                                    \
  }
#define LA_DET_BWD(kernel, T, suffix)                                                        \
  extern "C" __global__ void kernel##_##suffix(T* da, const T* a, const T* v, const T* dv,   \
                                               rsmx_i64 batch, rsmx_i64 n, T* work,          \
                                               int* ipiv) {                                  \
    kernel<T>(da, a, v, dv, batch, n, work, ipiv);                                           \
  }

RSMX_DTYPE_REAL(LA_POTRF, la_potrf)
RSMX_DTYPE_REAL(LA_POTRI, la_potri)
RSMX_DTYPE_REAL(LA_TRI, la_trsm)
RSMX_DTYPE_REAL(LA_TRI, la_trmm)
RSMX_DTYPE_REAL(LA_INVERSE, la_inverse)
RSMX_DTYPE_REAL(LA_DET, la_det)
RSMX_DTYPE_REAL(LA_SLOGDET, la_slogdet)
RSMX_DTYPE_REAL(LA_GELQF, la_gelqf)
RSMX_DTYPE_REAL(LA_SYEVD, la_syevd)
RSMX_DTYPE_REAL(LA_POTRF_BWD, la_potrf_bwd)
RSMX_DTYPE_REAL(LA_POTRI_BWD, la_potri_bwd)
RSMX_DTYPE_REAL(LA_TRI_BWD, la_trsm_bwd)
RSMX_DTYPE_REAL(LA_TRI_BWD, la_trmm_bwd)
RSMX_DTYPE_REAL(LA_GELQF_BWD, la_gelqf_bwd)
RSMX_DTYPE_REAL(LA_SYEVD_BWD, la_syevd_bwd)
RSMX_DTYPE_REAL(LA_INVERSE_BWD, la_inverse_bwd)
RSMX_DTYPE_REAL(LA_DET_BWD, la_det_bwd)
RSMX_DTYPE_REAL(LA_DET_BWD, la_slogdet_bwd)
