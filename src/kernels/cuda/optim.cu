// Kernels of the fused optimizer updates: one element-wise pass that updates a weight and
// its optimizer states in place, as MXNet 1.9.1 computes them. The formulas follow the CPU
// kernels operation by operation, each operation rounded on its own (no fused
// multiply-add), so that float32 and float64 results equal the CPU's bit for bit; float16
// rounds every operation to float16 as the CPU's float16 arithmetic does.
//
// `update_<dtype>` runs every kind whose states share the weight's dtype, chosen by its
// code (the order of the core's `Kind`); `mp_update_<dtype>` runs the multi-precision
// kinds, whose states (float32 master weight included) are float32.
#include "common.cuh"

enum rsmx_update {
  RSMX_UPDATE_SGD, RSMX_UPDATE_SGD_MOM, RSMX_UPDATE_MP_SGD, RSMX_UPDATE_MP_SGD_MOM,
  RSMX_UPDATE_NAG_MOM, RSMX_UPDATE_MP_NAG_MOM, RSMX_UPDATE_ADAM, RSMX_UPDATE_RMSPROP,
  RSMX_UPDATE_RMSPROPALEX, RSMX_UPDATE_FTRL, RSMX_UPDATE_SIGNSGD, RSMX_UPDATE_SIGNUM,
  RSMX_UPDATE_ADAGRAD, RSMX_UPDATE_ADADELTA, RSMX_UPDATE_AGG_SGD, RSMX_UPDATE_AGG_MP_SGD,
  RSMX_UPDATE_FTML, RSMX_UPDATE_ADAMW, RSMX_UPDATE_MP_ADAMW
};

// The hyperparameters, each already rounded to the type the update computes in.
struct rsmx_hyper {
  double lr, wd, rescale_grad, clip_gradient, momentum, beta1, beta2, epsilon, gamma1,
      gamma2, clip_weights, lamda1, beta, wd_lh, rho, one_minus_rho, beta1_t, beta2_t, eta,
      one_minus_beta1, one_minus_beta2;
};

// IEEE operations rounded one by one: the device intrinsics keep NVRTC from contracting
// a product and a sum into one fused multiply-add.
#ifdef __CUDACC_RTC__
#define RSMX_RN(name, op, f, d)                                                            \
  __device__ __forceinline__ float name(float a, float b) { return f(a, b); }             \
  __device__ __forceinline__ double name(double a, double b) { return d(a, b); }
RSMX_RN(rn_add, +, __fadd_rn, __dadd_rn)
RSMX_RN(rn_sub, -, __fsub_rn, __dsub_rn)
RSMX_RN(rn_mul, *, __fmul_rn, __dmul_rn)
RSMX_RN(rn_div, /, __fdiv_rn, __ddiv_rn)
#else
#define RSMX_RN(name, op, f, d)                                                            \
  __device__ __forceinline__ float name(float a, float b) { return a op b; }              \
  __device__ __forceinline__ double name(double a, double b) { return a op b; }
RSMX_RN(rn_add, +, _, _)
RSMX_RN(rn_sub, -, _, _)
RSMX_RN(rn_mul, *, _, _)
RSMX_RN(rn_div, /, _, _)
#endif
__device__ __forceinline__ float rn_sqrt(float a) { return sqrtf(a); }
__device__ __forceinline__ double rn_sqrt(double a) { return sqrt(a); }

// float32 or float64 arithmetic.
template <typename F>
struct ieee {
  F v;
  __device__ __forceinline__ static ieee of(double d) { ieee r; r.v = (F)d; return r; }
  __device__ __forceinline__ static ieee raw(F f) { ieee r; r.v = f; return r; }
  __device__ __forceinline__ ieee operator+(ieee o) const { return raw(rn_add(v, o.v)); }
  __device__ __forceinline__ ieee operator-(ieee o) const { return raw(rn_sub(v, o.v)); }
  __device__ __forceinline__ ieee operator*(ieee o) const { return raw(rn_mul(v, o.v)); }
  __device__ __forceinline__ ieee operator/(ieee o) const { return raw(rn_div(v, o.v)); }
  __device__ __forceinline__ ieee operator-() const { return raw(-v); }
  __device__ __forceinline__ ieee sqrt() const { return raw(rn_sqrt(v)); }
  __device__ __forceinline__ ieee abs() const { return raw(v < (F)0 ? -v : (v == (F)0 ? (F)0 : v)); }
  __device__ __forceinline__ bool operator>(ieee o) const { return v > o.v; }
  __device__ __forceinline__ bool operator<(ieee o) const { return v < o.v; }
  __device__ __forceinline__ bool operator>=(ieee o) const { return v >= o.v; }
};

// float16 arithmetic: each operation in float32, rounded to float16.
struct half_real {
  float v;  // always a float16 value
  __device__ __forceinline__ static half_real raw(float f) {
    half_real r;
    r.v = rsmx_half_to_float(rsmx_float_to_half(f));
    return r;
  }
  __device__ __forceinline__ static half_real of(double d) { return raw((float)d); }
  __device__ __forceinline__ half_real operator+(half_real o) const { return raw(rn_add(v, o.v)); }
  __device__ __forceinline__ half_real operator-(half_real o) const { return raw(rn_sub(v, o.v)); }
  __device__ __forceinline__ half_real operator*(half_real o) const { return raw(rn_mul(v, o.v)); }
  __device__ __forceinline__ half_real operator/(half_real o) const { return raw(rn_div(v, o.v)); }
  __device__ __forceinline__ half_real operator-() const { half_real r; r.v = -v; return r; }
  __device__ __forceinline__ half_real sqrt() const { return raw(rn_sqrt(v)); }
  __device__ __forceinline__ half_real abs() const {
    half_real r;
    r.v = v < 0.0f ? -v : (v == 0.0f ? 0.0f : v);
    return r;
  }
  __device__ __forceinline__ bool operator>(half_real o) const { return v > o.v; }
  __device__ __forceinline__ bool operator<(half_real o) const { return v < o.v; }
  __device__ __forceinline__ bool operator>=(half_real o) const { return v >= o.v; }
};


// A storage type's arithmetic type, and the conversions between the two.
template <typename T> struct real_of;
template <> struct real_of<float> {
  typedef ieee<float> R;
  __device__ __forceinline__ static R load(float x) { return R::raw(x); }
  __device__ __forceinline__ static float store(R r) { return r.v; }
  __device__ __forceinline__ static R from_f32(float x) { return R::raw(x); }
};
template <> struct real_of<double> {
  typedef ieee<double> R;
  __device__ __forceinline__ static R load(double x) { return R::raw(x); }
  __device__ __forceinline__ static double store(R r) { return r.v; }
  __device__ __forceinline__ static R from_f32(float x) { return R::raw((double)x); }
};
template <> struct real_of<rsmx_half> {
  typedef half_real R;
  __device__ __forceinline__ static R load(rsmx_half x) {
    R r;
    r.v = rsmx_half_to_float(x);
    return r;
  }
  __device__ __forceinline__ static rsmx_half store(R r) { return rsmx_float_to_half(r.v); }
  __device__ __forceinline__ static R from_f32(float x) { return R::raw(x); }
};

// The hyperparameters in arithmetic type R.
template <typename R>
struct hyper {
  R lr, wd, rg, clip, mom, beta1, beta2, eps, gamma1, gamma2, clip_w, lamda1, beta, wd_lh,
      rho, one_minus_rho, beta1_t, beta2_t, eta, one_minus_beta1, one_minus_beta2;
  __device__ __forceinline__ explicit hyper(const rsmx_hyper& h)
      : lr(R::of(h.lr)), wd(R::of(h.wd)), rg(R::of(h.rescale_grad)),
        clip(R::of(h.clip_gradient)), mom(R::of(h.momentum)), beta1(R::of(h.beta1)),
        beta2(R::of(h.beta2)), eps(R::of(h.epsilon)), gamma1(R::of(h.gamma1)),
        gamma2(R::of(h.gamma2)), clip_w(R::of(h.clip_weights)), lamda1(R::of(h.lamda1)),
        beta(R::of(h.beta)), wd_lh(R::of(h.wd_lh)), rho(R::of(h.rho)),
        one_minus_rho(R::of(h.one_minus_rho)), beta1_t(R::of(h.beta1_t)),
        beta2_t(R::of(h.beta2_t)), eta(R::of(h.eta)), one_minus_beta1(R::of(h.one_minus_beta1)),
        one_minus_beta2(R::of(h.one_minus_beta2)) {}
  __device__ __forceinline__ bool clipping() const { return clip >= R::of(0.0); }
};

// Clamps `x` to [-bound, bound]; NaN stays NaN.
template <typename R>
__device__ __forceinline__ R clip_to(R x, R bound) {
  return x > bound ? bound : (x < -bound ? -bound : x);
}

// -1, 0 or 1 (0 for NaN).
template <typename R>
__device__ __forceinline__ R sign_of(R x) {
  const R zero = R::of(0.0);
  return x > zero ? R::of(1.0) : (x < zero ? R::of(-1.0) : zero);
}

template <typename R>
__device__ __forceinline__ R sgd(const hyper<R>& h, R w, R g) {
  R keep = R::of(1.0) - h.lr * h.wd;
  if (h.clipping()) return keep * w - h.lr * clip_to(h.rg * g, h.clip);
  return keep * w - (h.lr * h.rg) * g;
}

// The new momentum of sgd_mom_update (and of the aggregated SGD with a zero momentum).
template <typename R>
__device__ __forceinline__ R sgd_mom(const hyper<R>& h, R w, R g, R mom) {
  R decay = (h.lr * h.wd) * w;
  if (h.clipping()) return h.mom * mom - decay - h.lr * clip_to(h.rg * g, h.clip);
  return h.mom * mom - decay - (h.lr * h.rg) * g;
}

template <typename R>
__device__ __forceinline__ R nag_step(const hyper<R>& h, R w, R g) {
  if (h.clipping()) return h.lr * (clip_to(h.rg * g, h.clip) + h.wd * w);
  return h.lr * (h.rg * g + h.wd * w);
}

template <typename R>
__device__ __forceinline__ R nag_weight(const hyper<R>& h, R w, R g, R m) {
  return w - m + (h.mom + R::of(1.0)) * (m - nag_step(h, w, g));
}

template <typename R>
__device__ __forceinline__ R rescaled_with_wd(const hyper<R>& h, R w, R g) {
  R gr = h.rg * g + h.wd * w;
  return h.clipping() ? clip_to(gr, h.clip) : gr;
}

template <typename R>
__device__ __forceinline__ R clip_weight(const hyper<R>& h, R w) {
  return h.clip_w >= R::of(0.0) ? clip_to(w, h.clip_w) : w;
}

// The gradient as MXNet's Python AdaGrad and AdaDelta prepare it.
template <typename R>
__device__ __forceinline__ R python_rescaled(const hyper<R>& h, R g) {
  g = g * h.rg;
  return h.clipping() ? clip_to(g, h.clip) : g;
}

// AdamW's step: updates `mean` and `var` and returns the new weight; the weight decay
// is applied to the weight directly, outside the adaptive step.
template <typename R>
__device__ __forceinline__ R adamw(const hyper<R>& h, R w, R g, R& mean, R& var) {
  g = h.rg * g;
  if (h.clipping()) g = clip_to(g, h.clip);
  mean = h.beta1 * mean + h.one_minus_beta1 * g;
  var = h.beta2 * var + h.one_minus_beta2 * (g * g);
  return w - h.eta * (h.lr * mean / (var.sqrt() + h.eps) + h.wd * w);
}

// A `rescale_grad` array's value; false when the update is to be skipped (zero or not
// finite), as MXNet skips it.
__device__ __forceinline__ bool scale_of(const float* scale, double* v) {
  float s = *scale;
  *v = (double)s;
  return s == s && s != 0.0f && s - s == 0.0f;
}

// Writes `v` to out[i], adds it, or (req null) leaves out[i].
template <typename T>
__device__ __forceinline__ void put(T* out, rsmx_i64 i, typename real_of<T>::R v, int req) {
  typedef real_of<T> N;
  if (req == 0) return;
  out[i] = N::store(req == 2 ? N::load(out[i]) + v : v);
}

// The kinds whose states share the weight's dtype. `req`: 0 null, 1 write, 2 add.
template <typename T>
__device__ void update(T* out, const T* wp, const T* gp, T* s0, T* s1, T* s2, rsmx_i64 n,
                       int kind, int req, rsmx_hyper hp) {
  typedef real_of<T> N;
  typedef typename N::R R;
  const hyper<R> h(hp);
  switch (kind) {
    case RSMX_UPDATE_SGD:
      RSMX_GRID_LOOP(i, n) { put(out, i, sgd(h, N::load(wp[i]), N::load(gp[i])), req); }
      break;
    case RSMX_UPDATE_SIGNSGD:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]), g = N::load(gp[i]);
        put(out, i, (R::of(1.0) - h.lr * h.wd) * w - h.lr * sign_of(g), req);
      }
      break;
    case RSMX_UPDATE_SGD_MOM:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R m = sgd_mom(h, w, N::load(gp[i]), N::load(s0[i]));
        s0[i] = N::store(m);
        put(out, i, w + m, req);
      }
      break;
    case RSMX_UPDATE_AGG_SGD:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        put(out, i, w + sgd_mom(h, w, N::load(gp[i]), R::of(0.0)), req);
      }
      break;
    case RSMX_UPDATE_NAG_MOM:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]), g = N::load(gp[i]);
        R m = h.mom * N::load(s0[i]);
        put(out, i, nag_weight(h, w, g, m), req);
        // The weight is read again after the output is written, as MXNet's kernel does.
        s0[i] = N::store(m - nag_step(h, N::load(wp[i]), g));
      }
      break;
    case RSMX_UPDATE_SIGNUM:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]), g = N::load(gp[i]), m = N::load(s0[i]);
        R c = R::of(1.0) - h.mom;
        if (h.clipping()) {
          m = h.mom * m - c * h.wd * w - c * clip_to(h.rg * g, h.clip);
        } else {
          m = h.mom * m - c * h.wd * w - c * h.rg * g;
        }
        s0[i] = N::store(m);
        put(out, i, (R::of(1.0) - h.lr * h.wd_lh) * w + h.lr * sign_of(m), req);
      }
      break;
    case RSMX_UPDATE_RMSPROP:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R gr = rescaled_with_wd(h, w, N::load(gp[i]));
        R s = (R::of(1.0) - h.gamma1) * (gr * gr) + h.gamma1 * N::load(s0[i]);
        s0[i] = N::store(s);
        put(out, i, clip_weight(h, w - h.lr * (gr / (s + h.eps).sqrt())), req);
      }
      break;
    case RSMX_UPDATE_ADAGRAD:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R g = python_rescaled(h, N::load(gp[i]));
        R hist = N::load(s0[i]) + g * g;
        R div = g / (hist + h.eps).sqrt();
        s0[i] = N::store(hist);
        put(out, i, w + (div + w * h.wd) * -h.lr, req);
      }
      break;
    case RSMX_UPDATE_ADAM:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R gr = N::load(gp[i]) * h.rg + w * h.wd;
        if (h.clipping()) gr = clip_to(gr, h.clip);
        R mean = h.beta1 * N::load(s0[i]) + (R::of(1.0) - h.beta1) * gr;
        R var = h.beta2 * N::load(s1[i]) + (R::of(1.0) - h.beta2) * gr * gr;
        s0[i] = N::store(mean);
        s1[i] = N::store(var);
        put(out, i, w - h.lr * mean / (var.sqrt() + h.eps), req);
      }
      break;
    case RSMX_UPDATE_FTRL:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R gr = N::load(gp[i]) * h.rg;
        if (h.clipping()) gr = clip_to(gr, h.clip);
        R z = N::load(s0[i]), s = N::load(s1[i]);
        z = z + (gr - ((s + gr * gr).sqrt() - s.sqrt()) * w / h.lr);
        s = s + gr * gr;
        R active = z.abs() > h.lamda1 ? R::of(1.0) : R::of(0.0);
        s0[i] = N::store(z);
        s1[i] = N::store(s);
        put(out, i, (sign_of(z) * h.lamda1 - z) / ((h.beta + s.sqrt()) / h.lr + h.wd) * active,
            req);
      }
      break;
    case RSMX_UPDATE_ADADELTA:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R g = python_rescaled(h, N::load(gp[i]));
        R acc_g = N::load(s0[i]) * h.rho + g * h.one_minus_rho * g;
        R acc_d = N::load(s1[i]);
        R delta = (acc_d + h.eps).sqrt() / (acc_g + h.eps).sqrt() * g;
        acc_d = acc_d * h.rho + delta * h.one_minus_rho * delta;
        s0[i] = N::store(acc_g);
        s1[i] = N::store(acc_d);
        put(out, i, w - (delta + w * h.wd), req);
      }
      break;
    case RSMX_UPDATE_FTML:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R gr = rescaled_with_wd(h, w, N::load(gp[i]));
        R one = R::of(1.0);
        R v = h.beta2 * N::load(s1[i]) + (one - h.beta2) * (gr * gr);
        R d = (one - h.beta1_t) / h.lr * ((v / (one - h.beta2_t)).sqrt() + h.eps);
        R z = h.beta1 * N::load(s2[i]) + (one - h.beta1) * gr - (d - h.beta1 * N::load(s0[i])) * w;
        s0[i] = N::store(d);
        s1[i] = N::store(v);
        s2[i] = N::store(z);
        put(out, i, -z / d, req);
      }
      break;
    case RSMX_UPDATE_RMSPROPALEX:
      RSMX_GRID_LOOP(i, n) {
        R w = N::load(wp[i]);
        R gr = rescaled_with_wd(h, w, N::load(gp[i]));
        R c = R::of(1.0) - h.gamma1;
        R sn = c * gr * gr + h.gamma1 * N::load(s0[i]);
        R sg = c * gr + h.gamma1 * N::load(s1[i]);
        R delta = h.gamma2 * N::load(s2[i]) - h.lr * gr / (sn - sg * sg + h.eps).sqrt();
        s0[i] = N::store(sn);
        s1[i] = N::store(sg);
        s2[i] = N::store(delta);
        put(out, i, clip_weight(h, w + delta), req);
      }
      break;
    default:
      break;
  }
}

// The multi-precision kinds: the float32 master copy `w32` is updated in float32 and the
// result rounded into the weight's type; `mom` is float32 too.
template <typename T>
__device__ void mp_update(T* out, const T* gp, float* mom, float* w32, rsmx_i64 n, int kind,
                          int req, rsmx_hyper hp) {
  typedef real_of<float> F;
  typedef real_of<T> N;
  typedef ieee<float> R;
  const hyper<R> h(hp);
  RSMX_GRID_LOOP(i, n) {
    R g = R::raw((float)rsmx_num<T>::load(gp[i]));
    R w = F::load(w32[i]);
    switch (kind) {
      case RSMX_UPDATE_MP_SGD:
        w = sgd(h, w, g);
        break;
      case RSMX_UPDATE_AGG_MP_SGD:
        w = w + sgd_mom(h, w, g, R::of(0.0));
        break;
      case RSMX_UPDATE_MP_SGD_MOM: {
        R m = sgd_mom(h, w, g, F::load(mom[i]));
        mom[i] = m.v;
        w = w + m;
        break;
      }
      case RSMX_UPDATE_MP_NAG_MOM: {
        R m = h.mom * F::load(mom[i]);
        w = nag_weight(h, w, g, m);
        // MXNet's kernel computes the momentum from the updated master weight.
        mom[i] = (m - nag_step(h, w, g)).v;
        break;
      }
      default:
        break;
    }
    w32[i] = w.v;
    put(out, i, N::from_f32(w.v), req);
  }
}

// `_adamw_update`: weight, gradient, mean and var share the weight's dtype; the
// gradient scale is read from `scale` on the device.
template <typename T>
__device__ void adamw_update(T* out, const T* wp, const T* gp, T* mean, T* var,
                             const float* scale, rsmx_i64 n, int req, rsmx_hyper hp) {
  typedef real_of<T> N;
  typedef typename N::R R;
  if (!scale_of(scale, &hp.rescale_grad)) return;
  const hyper<R> h(hp);
  RSMX_GRID_LOOP(i, n) {
    R m = N::load(mean[i]), v = N::load(var[i]);
    R w = adamw(h, N::load(wp[i]), N::load(gp[i]), m, v);
    mean[i] = N::store(m);
    var[i] = N::store(v);
    put(out, i, w, req);
  }
}

// `_mp_adamw_update`: the float32 master weight, mean and var are updated in float32.
template <typename T>
__device__ void mp_adamw_update(T* out, const T* gp, float* mean, float* var, float* w32,
                                const float* scale, rsmx_i64 n, int req, rsmx_hyper hp) {
  typedef real_of<float> F;
  typedef real_of<T> N;
  typedef ieee<float> R;
  if (!scale_of(scale, &hp.rescale_grad)) return;
  const hyper<R> h(hp);
  RSMX_GRID_LOOP(i, n) {
    R m = F::load(mean[i]), v = F::load(var[i]);
    R w = adamw(h, F::load(w32[i]), R::raw((float)rsmx_num<T>::load(gp[i])), m, v);
    mean[i] = m.v;
    var[i] = v.v;
    w32[i] = w.v;
    put(out, i, N::from_f32(w.v), req);
  }
}

#define RSMX_UPDATE(kernel, T, suffix)                                                   \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* w, const T* g, T* s0,     \
                                               T* s1, T* s2, rsmx_i64 n, int kind,       \
                                               int req, rsmx_hyper h) {                  \
    kernel<T>(out, w, g, s0, s1, s2, n, kind, req, h);                                    \
  }
#define RSMX_MP_UPDATE(kernel, T, suffix)                                                \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, float* mom,            \
                                               float* w32, rsmx_i64 n, int kind, int req, \
                                               rsmx_hyper h) {                            \
    kernel<T>(out, g, mom, w32, n, kind, req, h);                                         \
  }

RSMX_DTYPE_FLOAT(RSMX_UPDATE, update)
RSMX_DTYPE_FLOAT(RSMX_MP_UPDATE, mp_update)
#define RSMX_ADAMW(kernel, T, suffix)                                                    \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* w, const T* g, T* mean,  \
                                               T* var, const float* scale, rsmx_i64 n,   \
                                               int req, rsmx_hyper h) {                  \
    kernel<T>(out, w, g, mean, var, scale, n, req, h);                                    \
  }
#define RSMX_MP_ADAMW(kernel, T, suffix)                                                 \
  extern "C" __global__ void kernel##_##suffix(T* out, const T* g, float* mean,          \
                                               float* var, float* w32, const float* scale, \
                                               rsmx_i64 n, int req, rsmx_hyper h) {        \
    kernel<T>(out, g, mean, var, w32, scale, n, req, h);                                  \
  }
RSMX_DTYPE_FLOAT(RSMX_ADAMW, adamw_update)
RSMX_DTYPE_FLOAT(RSMX_MP_ADAMW, mp_adamw_update)
