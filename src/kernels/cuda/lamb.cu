// LAMB's two update phases, element-wise, in float (double for float64 weights). The
// `mp_` forms take float16 weights and gradients with float32 moments, directions and
// master weights.
#include "common.cuh"

// `out (=|+=) v` in S.
template <typename S, typename C>
__device__ __forceinline__ void lamb_put(S* out, C v, int add) {
  if (add) v += rsmx_num<S>::load(*out);
  *out = rsmx_num<S>::store(v);
}

// Phase one: the moments (type S) updated in place from the rescaled, clipped gradient,
// stored and read back, then the direction `m / (sqrt(v) + eps) + wd * weight` (bias
// corrected by `b1t = beta1^t`, `b2t = beta2^t` when asked); the weight is `w32` where
// given (the mp form), else `w`.
template <typename T, typename S>
__device__ void lamb_phase1(S* out, S* mean, S* var, const T* w, const float* w32, const T* g,
                            rsmx_i64 n, double beta1, double beta2, double epsilon, double wd,
                            double rescale, double clip, double b1t, double b2t,
                            int bias_correction, int add) {
  typedef typename rsmx_num<S>::compute C;
  const C one = (C)1, c_beta1 = (C)beta1, c_beta2 = (C)beta2, c_clip = (C)clip;
  RSMX_GRID_LOOP(i, n) {
    C gr = (C)rsmx_num<T>::load(g[i]) * (C)rescale;
    if (c_clip >= (C)0) gr = gr > c_clip ? c_clip : (gr < -c_clip ? -c_clip : gr);
    mean[i] = rsmx_num<S>::store(c_beta1 * rsmx_num<S>::load(mean[i]) + (one - c_beta1) * gr);
    var[i] = rsmx_num<S>::store(c_beta2 * rsmx_num<S>::load(var[i]) + (one - c_beta2) * gr * gr);
    C m = rsmx_num<S>::load(mean[i]), v = rsmx_num<S>::load(var[i]);
    if (bias_correction) {
      m = m / (one - (C)b1t);
      v = v / (one - (C)b2t);
    }
    C weight = w32 ? (C)w32[i] : (C)rsmx_num<T>::load(w[i]);
    lamb_put<S, C>(out + i, m / (sqrt(v) + (C)epsilon) + (C)wd * weight, add);
  }
}

// Phase two: `out = base - lr' * dir`, where lr' is `lr * r1 / r2` with r1 clipped to the
// bounds that are set (not negative), or `lr` when either norm is zero. `base` may be
// `out` itself (the weight updated in place).
template <typename T, typename R>
__device__ void lamb_phase2(T* out, const R* base, const R* dir, const R* r1p, const R* r2p,
                            rsmx_i64 n, double lr, double lower, double upper, int add) {
  typedef typename rsmx_num<R>::compute C;
  C r1 = rsmx_num<R>::load(r1p[0]), r2 = rsmx_num<R>::load(r2p[0]);
  if (lower >= 0) r1 = r1 > (C)lower ? r1 : (C)lower;
  if (upper >= 0) r1 = r1 < (C)upper ? r1 : (C)upper;
  C rate = (r1 == (C)0 || r2 == (C)0) ? (C)lr : (C)lr * r1 / r2;
  RSMX_GRID_LOOP(i, n) {
    C v = rsmx_num<R>::load(base[i]) - rate * rsmx_num<R>::load(dir[i]);
    lamb_put<T, C>(out + i, v, add);
  }
}

#define RSMX_LAMB_PHASE1_ARGS                                                            \
  rsmx_i64 n, double beta1, double beta2, double epsilon, double wd, double rescale,     \
      double clip, double b1t, double b2t, int bias_correction, int add
#define RSMX_LAMB_PHASE1_PASS \
  n, beta1, beta2, epsilon, wd, rescale, clip, b1t, b2t, bias_correction, add
#define RSMX_LAMB_PHASE1(kernel, T, suffix)                                              \
  extern "C" __global__ void kernel##_##suffix(T* out, T* mean, T* var, const T* w,      \
                                               const float* w32, const T* g,             \
                                               RSMX_LAMB_PHASE1_ARGS) {                  \
    kernel<T, T>(out, mean, var, w, w32, g, RSMX_LAMB_PHASE1_PASS);                      \
  }
#define RSMX_LAMB_PHASE2(kernel, T, suffix)                                              \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* base, const T* dir,      \
                                               const T* r1, const T* r2, rsmx_i64 n,     \
                                               double lr, double lower, double upper,    \
                                               int add) {                                \
    kernel<T, T>(out, base, dir, r1, r2, n, lr, lower, upper, add);                      \
  }

RSMX_DTYPE_FLOAT(RSMX_LAMB_PHASE1, lamb_phase1)
RSMX_DTYPE_FLOAT(RSMX_LAMB_PHASE2, lamb_phase2)

extern "C" __global__ void mp_lamb_phase1_f16(float* out, float* mean, float* var,
                                              const rsmx_half* w, const float* w32,
                                              const rsmx_half* g, RSMX_LAMB_PHASE1_ARGS) {
  lamb_phase1<rsmx_half, float>(out, mean, var, w, w32, g, RSMX_LAMB_PHASE1_PASS);
}

extern "C" __global__ void mp_lamb_phase2_f16(rsmx_half* out, const float* base, const float* dir,
                                              const float* r1, const float* r2, rsmx_i64 n,
                                              double lr, double lower, double upper, int add) {
  lamb_phase2<rsmx_half, float>(out, base, dir, r1, r2, n, lr, lower, upper, add);
}
