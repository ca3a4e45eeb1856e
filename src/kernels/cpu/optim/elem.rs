//! The per-element update formulas, written operation by operation in the order MXNet
//! 1.9.1 evaluates them so that results round the same way.

use half::f16;
use num_traits::Float;

/// A floating-point element type the updates compute in.
pub trait Real: Float + crate::dtype::Element + Send + Sync {
    /// The value nearest to `v`.
    fn of(v: f64) -> Self;
    /// The value nearest to `v`.
    fn from_f32(v: f32) -> Self;
    /// The value as float32.
    fn as_f32(self) -> f32;
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn as_f32(self) -> f32 {
        self
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn from_f32(v: f32) -> Self {
        v as f64
    }
    fn as_f32(self) -> f32 {
        self as f32
    }
}

impl Real for f16 {
    fn of(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn as_f32(self) -> f32 {
        self.to_f32()
    }
}

/// Hyperparameters in the element type.
#[derive(Clone, Copy)]
pub struct H<T> {
    pub lr: T,
    pub wd: T,
    pub rg: T,
    pub clip: T,
    pub mom: T,
    pub beta1: T,
    pub beta2: T,
    pub eps: T,
    pub gamma1: T,
    pub gamma2: T,
    pub clip_w: T,
    pub lamda1: T,
    pub beta: T,
    pub wd_lh: T,
    pub rho: T,
    /// `1 - rho`, computed in double as MXNet's Python does before scaling an array.
    pub one_minus_rho: T,
    /// `beta1` and `beta2` to the power `t`, in the element type (FTML).
    pub beta1_t: T,
    pub beta2_t: T,
    /// The learning-rate schedule multiplier (AdamW).
    pub eta: T,
    /// `1 - beta1` and `1 - beta2` computed in float32, as MXNet's AdamW does.
    pub one_minus_beta1: T,
    pub one_minus_beta2: T,
}

impl<T: Real> H<T> {
    /// Casts the parsed hyperparameters.
    pub fn new(h: &crate::op::optim::spec::Hyper) -> H<T> {
        H {
            lr: T::of(h.lr),
            wd: T::of(h.wd),
            rg: T::of(h.rescale_grad),
            clip: T::of(h.clip_gradient),
            mom: T::of(h.momentum),
            beta1: T::of(h.beta1),
            beta2: T::of(h.beta2),
            eps: T::of(h.epsilon),
            gamma1: T::of(h.gamma1),
            gamma2: T::of(h.gamma2),
            clip_w: T::of(h.clip_weights),
            lamda1: T::of(h.lamda1),
            beta: T::of(h.beta),
            wd_lh: T::of(h.wd_lh),
            rho: T::of(h.rho),
            one_minus_rho: T::of(1.0 - h.rho),
            beta1_t: T::of(h.beta1).powf(T::of(h.t)),
            beta2_t: T::of(h.beta2).powf(T::of(h.t)),
            eta: T::of(h.eta),
            one_minus_beta1: T::of((1.0f32 - h.beta1 as f32) as f64),
            one_minus_beta2: T::of((1.0f32 - h.beta2 as f32) as f64),
        }
    }

    fn clipping(&self) -> bool {
        self.clip >= T::zero()
    }
}

/// Clamps `x` to `[-bound, bound]`; NaN stays NaN.
#[inline(always)]
pub fn clip<T: Real>(x: T, bound: T) -> T {
    if x > bound {
        bound
    } else if x < -bound {
        -bound
    } else {
        x
    }
}

/// -1, 0 or 1 (0 for NaN).
#[inline(always)]
pub fn sign<T: Real>(x: T) -> T {
    if x > T::zero() {
        T::one()
    } else if x < T::zero() {
        -T::one()
    } else {
        T::zero()
    }
}

/// `sgd_update`: the new weight.
#[inline(always)]
pub fn sgd<T: Real>(h: &H<T>, w: T, g: T) -> T {
    let keep = T::one() - h.lr * h.wd;
    if h.clipping() {
        keep * w - h.lr * clip(h.rg * g, h.clip)
    } else {
        keep * w - (h.lr * h.rg) * g
    }
}

/// The momentum step shared by `sgd_mom_update`, its multi-precision form and the
/// aggregated SGD: the new momentum.
#[inline(always)]
pub fn sgd_mom<T: Real>(h: &H<T>, w: T, g: T, mom: T) -> T {
    let decay = (h.lr * h.wd) * w;
    if h.clipping() {
        h.mom * mom - decay - h.lr * clip(h.rg * g, h.clip)
    } else {
        h.mom * mom - decay - (h.lr * h.rg) * g
    }
}

/// The NAG step `lr * (rescaled gradient + wd * w)`.
#[inline(always)]
pub fn nag_step<T: Real>(h: &H<T>, w: T, g: T) -> T {
    if h.clipping() {
        h.lr * (clip(h.rg * g, h.clip) + h.wd * w)
    } else {
        h.lr * (h.rg * g + h.wd * w)
    }
}

/// `nag_mom_update`'s new weight from the decayed momentum `m = momentum * mom`. The new
/// momentum is `m - nag_step(h, w, g)` where MXNet reads `w` from the weight array after
/// writing the output, so an in-place update (`out=weight`) uses the new weight there.
#[inline(always)]
pub fn nag_weight<T: Real>(h: &H<T>, w: T, g: T, m: T) -> T {
    w - m + (h.mom + T::one()) * (m - nag_step(h, w, g))
}

/// `adam_update`: (mean, var, new weight).
#[inline(always)]
pub fn adam<T: Real>(h: &H<T>, w: T, g: T, mean: T, var: T) -> (T, T, T) {
    let mut gr = g * h.rg + w * h.wd;
    if h.clipping() {
        gr = clip(gr, h.clip);
    }
    let mean = h.beta1 * mean + (T::one() - h.beta1) * gr;
    let var = h.beta2 * var + (T::one() - h.beta2) * gr * gr;
    (mean, var, w - h.lr * mean / (var.sqrt() + h.eps))
}

fn rescaled_with_wd<T: Real>(h: &H<T>, w: T, g: T) -> T {
    let gr = h.rg * g + h.wd * w;
    if h.clipping() {
        clip(gr, h.clip)
    } else {
        gr
    }
}

fn clip_weight<T: Real>(h: &H<T>, w: T) -> T {
    if h.clip_w >= T::zero() {
        clip(w, h.clip_w)
    } else {
        w
    }
}

/// `rmsprop_update`: (n, new weight).
#[inline(always)]
pub fn rmsprop<T: Real>(h: &H<T>, w: T, g: T, n: T) -> (T, T) {
    let gr = rescaled_with_wd(h, w, g);
    let n = (T::one() - h.gamma1) * (gr * gr) + h.gamma1 * n;
    (n, clip_weight(h, w - h.lr * (gr / (n + h.eps).sqrt())))
}

/// `rmspropalex_update`: (n, g, delta, new weight).
#[inline(always)]
pub fn rmspropalex<T: Real>(h: &H<T>, w: T, g: T, n: T, gs: T, delta: T) -> (T, T, T, T) {
    let gr = rescaled_with_wd(h, w, g);
    let c = T::one() - h.gamma1;
    let n = c * gr * gr + h.gamma1 * n;
    let gs = c * gr + h.gamma1 * gs;
    let delta = h.gamma2 * delta - h.lr * gr / (n - gs * gs + h.eps).sqrt();
    (n, gs, delta, clip_weight(h, w + delta))
}

/// `ftrl_update`: (z, n, new weight).
#[inline(always)]
pub fn ftrl<T: Real>(h: &H<T>, w: T, g: T, z: T, n: T) -> (T, T, T) {
    let mut gr = g * h.rg;
    if h.clipping() {
        gr = clip(gr, h.clip);
    }
    let z = z + (gr - ((n + gr * gr).sqrt() - n.sqrt()) * w / h.lr);
    let n = n + gr * gr;
    let active = if z.abs() > h.lamda1 {
        T::one()
    } else {
        T::zero()
    };
    let out = (sign(z) * h.lamda1 - z) / ((h.beta + n.sqrt()) / h.lr + h.wd) * active;
    (z, n, out)
}

/// `signsgd_update`: the new weight (MXNet ignores rescaling and clipping here).
#[inline(always)]
pub fn signsgd<T: Real>(h: &H<T>, w: T, g: T) -> T {
    (T::one() - h.lr * h.wd) * w - h.lr * sign(g)
}

/// `signum_update`: (momentum, new weight).
#[inline(always)]
pub fn signum<T: Real>(h: &H<T>, w: T, g: T, mom: T) -> (T, T) {
    let c = T::one() - h.mom;
    let mom = if h.clipping() {
        h.mom * mom - c * h.wd * w - c * clip(h.rg * g, h.clip)
    } else {
        h.mom * mom - c * h.wd * w - c * h.rg * g
    };
    (mom, (T::one() - h.lr * h.wd_lh) * w + h.lr * sign(mom))
}

/// The gradient as MXNet's Python AdaGrad and AdaDelta prepare it: rescaled, then clipped.
fn python_rescaled<T: Real>(h: &H<T>, g: T) -> T {
    let g = g * h.rg;
    if h.clipping() {
        clip(g, h.clip)
    } else {
        g
    }
}

/// `AdaGrad.update`: (history, new weight).
#[inline(always)]
pub fn adagrad<T: Real>(h: &H<T>, w: T, g: T, hist: T) -> (T, T) {
    let g = python_rescaled(h, g);
    let hist = hist + g * g;
    let div = g / (hist + h.eps).sqrt();
    (hist, w + (div + w * h.wd) * -h.lr)
}

/// `AdaDelta.update`: (accumulated g, accumulated delta, new weight).
#[inline(always)]
pub fn adadelta<T: Real>(h: &H<T>, w: T, g: T, acc_g: T, acc_d: T) -> (T, T, T) {
    let g = python_rescaled(h, g);
    let acc_g = acc_g * h.rho + g * h.one_minus_rho * g;
    let delta = (acc_d + h.eps).sqrt() / (acc_g + h.eps).sqrt() * g;
    let acc_d = acc_d * h.rho + delta * h.one_minus_rho * delta;
    (acc_g, acc_d, w - (delta + w * h.wd))
}

/// `ftml_update`: (d, v, z, new weight).
#[inline(always)]
pub fn ftml<T: Real>(h: &H<T>, w: T, g: T, d: T, v: T, z: T) -> (T, T, T, T) {
    let gr = rescaled_with_wd(h, w, g);
    let v = h.beta2 * v + (T::one() - h.beta2) * (gr * gr);
    let d_t = (T::one() - h.beta1_t) / h.lr * ((v / (T::one() - h.beta2_t)).sqrt() + h.eps);
    let z = h.beta1 * z + (T::one() - h.beta1) * gr - (d_t - h.beta1 * d) * w;
    (d_t, v, z, -z / d_t)
}

/// `_adamw_update` and its multi-precision form: (mean, var, weight). The weight decay is
/// applied to the weight directly, outside the adaptive step.
#[inline(always)]
pub fn adamw<T: Real>(h: &H<T>, w: T, g: T, mean: T, var: T) -> (T, T, T) {
    let mut g = h.rg * g;
    if h.clipping() {
        g = clip(g, h.clip);
    }
    let mean = h.beta1 * mean + h.one_minus_beta1 * g;
    let var = h.beta2 * var + h.one_minus_beta2 * (g * g);
    let w = w - h.eta * (h.lr * mean / (var.sqrt() + h.eps) + h.wd * w);
    (mean, var, w)
}
