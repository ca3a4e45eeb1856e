//! CPU kernels of the backward of the element-wise unary operators and of the operators
//! with a scalar operand: `dx = dy * f'(x)`, from the input or (where cheaper) the
//! output.

use super::{with_float, FloatKernel};
use crate::error::Result;
use crate::kernels::cpu::map::map2;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::special;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::elemwise::binary::BinaryKind;
use crate::op::elemwise::unary::UnaryKind;
use crate::op::grad::elemwise::{ScalarBackward, UnaryBackward};
use crate::op::{OpContext, OpReq};
use num_traits::Float;

#[inline(always)]
fn c<F: Float>(v: f64) -> F {
    F::from(v).unwrap_or_else(F::nan)
}

/// `dy * f'` where `v` is the input, or the output for kinds that use it.
#[inline(always)]
fn unary_grad<F: Float>(kind: UnaryKind, g: F, v: F) -> F {
    let one = F::one();
    let zero = F::zero();
    match kind {
        UnaryKind::Copy => g,
        UnaryKind::Negative => -g,
        UnaryKind::Abs => {
            if v > zero {
                g
            } else if v < zero {
                -g
            } else {
                zero
            }
        }
        UnaryKind::Sqrt => g / (v + v),
        UnaryKind::Rsqrt => g * c::<F>(-0.5) / (v * v.sqrt()),
        UnaryKind::Cbrt => g / (c::<F>(3.0) * v * v),
        UnaryKind::Rcbrt => g * c::<F>(-1.0 / 3.0) / (v * v.cbrt()),
        UnaryKind::Square => g * (v + v),
        UnaryKind::Reciprocal => -g / (v * v),
        UnaryKind::Exp => g * v,
        UnaryKind::Expm1 => g * v.exp(),
        UnaryKind::Log => g / v,
        UnaryKind::Log1p => g / (one + v),
        UnaryKind::Log2 => g / (v * c::<F>(std::f64::consts::LN_2)),
        UnaryKind::Log10 => g / (v * c::<F>(std::f64::consts::LN_10)),
        UnaryKind::Sin => g * v.cos(),
        UnaryKind::Cos => -g * v.sin(),
        UnaryKind::Tan => g * (one + v * v),
        UnaryKind::Arcsin => g / (one - v * v).sqrt(),
        UnaryKind::Arccos => -g / (one - v * v).sqrt(),
        UnaryKind::Arctan => g / (one + v * v),
        UnaryKind::Sinh => g * v.cosh(),
        UnaryKind::Cosh => g * v.sinh(),
        UnaryKind::Tanh => g * (one - v * v),
        UnaryKind::Arcsinh => g / (v * v + one).sqrt(),
        UnaryKind::Arccosh => g / (v * v - one).sqrt(),
        UnaryKind::Arctanh => g / (one - v * v),
        UnaryKind::Degrees => g * c::<F>(180.0 / std::f64::consts::PI),
        UnaryKind::Radians => g * c::<F>(std::f64::consts::PI / 180.0),
        UnaryKind::Sigmoid => g * v * (one - v),
        UnaryKind::Softsign => {
            let d = one + v.abs();
            g / (d * d)
        }
        // A NaN input gives a NaN gradient, as in MXNet.
        UnaryKind::Relu => {
            if v > zero {
                g
            } else if v.is_nan() {
                v
            } else {
                zero
            }
        }
        // The input lies in [lo, hi], bounds included, as MXNet's clip backward.
        UnaryKind::Clip(lo, hi) => {
            if v >= c::<F>(lo) && v <= c::<F>(hi) {
                g
            } else {
                zero
            }
        }
        UnaryKind::Erf => g * c::<F>(2.0 / std::f64::consts::PI.sqrt()) * (-v * v).exp(),
        // From the output y = erfinv(x): dx/dy of erf is 2/sqrt(pi) exp(-y^2).
        UnaryKind::Erfinv => g * c::<F>(std::f64::consts::PI.sqrt() / 2.0) * (v * v).exp(),
        UnaryKind::Gamma => {
            let x = v.to_f64().unwrap_or(f64::NAN);
            g * c::<F>(special::gamma(x) * special::digamma(x))
        }
        UnaryKind::Gammaln => g * c::<F>(special::digamma(v.to_f64().unwrap_or(f64::NAN))),
        UnaryKind::HardSigmoid(alpha, beta) => {
            let y = c::<F>(alpha) * v + c::<F>(beta);
            if y > zero && y < one {
                g * c::<F>(alpha)
            } else {
                zero
            }
        }
        UnaryKind::Sign
        | UnaryKind::Floor
        | UnaryKind::Ceil
        | UnaryKind::Round
        | UnaryKind::Rint
        | UnaryKind::Fix
        | UnaryKind::Trunc
        | UnaryKind::LogicalNot => zero,
    }
}

struct UnaryGrad(UnaryKind);

impl FloatKernel for UnaryGrad {
    fn run<F: Float + Num>(&self, ins: &[&[F]], out: &mut [F], req: OpReq) {
        let kind = self.0;
        map2(ins[0], ins[1], out, req, |g, v| unary_grad(kind, g, v));
    }
}

/// Runs `k` on the output gradient and the forward input, the two inputs of an
/// element-wise backward op, into the one input gradient.
fn one_input_grad(op: &str, k: &impl FloatKernel, io: Blobs) -> Result<()> {
    with_float(
        op,
        k,
        &[&io.inputs[0], &io.inputs[1]],
        &io.outputs[0],
        io.req[0],
    )
}

impl CpuKernel for UnaryBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let k = UnaryGrad(self.kind);
        one_input_grad(self.name, &k, io)
    }
}

/// `dy * d(x op s)/dx` (or of `s op x` when `reverse`).
#[inline(always)]
fn scalar_grad<F: Float>(kind: BinaryKind, reverse: bool, s: F, g: F, x: F) -> F {
    let zero = F::zero();
    let one = F::one();
    match (kind, reverse) {
        (BinaryKind::Add, _) | (BinaryKind::Sub, false) | (BinaryKind::Mod, false) => g,
        (BinaryKind::Sub, true) => -g,
        (BinaryKind::Mul, _) => g * s,
        (BinaryKind::Div, false) => g / s,
        (BinaryKind::Div, true) => -g * s / (x * x),
        (BinaryKind::Mod, true) => -g * (s / x).floor(),
        (BinaryKind::Power, false) => g * s * x.powf(s - one),
        (BinaryKind::Power, true) => g * s.powf(x) * s.ln(),
        (BinaryKind::Maximum, _) => {
            if x >= s {
                g
            } else {
                zero
            }
        }
        (BinaryKind::Minimum, _) => {
            if x <= s {
                g
            } else {
                zero
            }
        }
        (BinaryKind::Hypot, _) => g * x / x.hypot(s),
        _ => zero,
    }
}

struct ScalarGrad {
    kind: BinaryKind,
    reverse: bool,
    scalar: f64,
}

impl FloatKernel for ScalarGrad {
    fn run<F: Float + Num>(&self, ins: &[&[F]], out: &mut [F], req: OpReq) {
        let (kind, reverse, s) = (self.kind, self.reverse, c::<F>(self.scalar));
        map2(ins[0], ins[1], out, req, |g, x| {
            scalar_grad(kind, reverse, s, g, x)
        });
    }
}

impl CpuKernel for ScalarBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let k = ScalarGrad {
            kind: self.kind,
            reverse: self.reverse,
            scalar: self.scalar,
        };
        one_input_grad(self.name, &k, io)
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<UnaryBackward>(k);
    cpu::add::<ScalarBackward>(k);
}
