//! CPU kernels of the element-wise unary operators (`exp`, `tanh`, `relu`, `clip`, ...).

use super::map::{map1, map_io};
use super::num::Num;
use super::special;
use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::{InOut, TBlob};
use crate::op::elemwise::unary::{Unary, UnaryKind, UNARY_OPS};
use crate::op::{OpContext, OpReq};
use num_traits::Float;

/// Maps `f`, a function of doubles, over values of any float type.
fn wide<F: Float + Num>(io: InOut<'_, F>, req: OpReq, f: fn(f64) -> f64) {
    map_io(io, req, |v: F| {
        F::from(f(v.to_f64())).unwrap_or_else(F::nan)
    })
}

fn float_kernel<F: Float + Num>(kind: UnaryKind, io: InOut<'_, F>, req: OpReq) {
    let one = F::one();
    let zero = F::zero();
    macro_rules! m {
        ($f:expr) => {
            map_io(io, req, $f)
        };
    }
    match kind {
        UnaryKind::Copy => m!(|v| v),
        UnaryKind::Negative => m!(|v: F| -v),
        UnaryKind::Abs => m!(|v: F| v.abs()),
        UnaryKind::Sign => m!(|v: F| if v > zero {
            one
        } else if v < zero {
            -one
        } else {
            zero
        }),
        UnaryKind::Sqrt => m!(|v: F| v.sqrt()),
        UnaryKind::Rsqrt => m!(|v: F| one / v.sqrt()),
        UnaryKind::Cbrt => m!(|v: F| v.cbrt()),
        UnaryKind::Rcbrt => m!(|v: F| one / v.cbrt()),
        UnaryKind::Square => m!(|v: F| v * v),
        UnaryKind::Reciprocal => m!(|v: F| one / v),
        UnaryKind::Exp => m!(|v: F| v.exp()),
        UnaryKind::Expm1 => m!(|v: F| v.exp_m1()),
        UnaryKind::Log => m!(|v: F| v.ln()),
        UnaryKind::Log1p => m!(|v: F| v.ln_1p()),
        UnaryKind::Log2 => m!(|v: F| v.log2()),
        UnaryKind::Log10 => m!(|v: F| v.log10()),
        UnaryKind::Sin => m!(|v: F| v.sin()),
        UnaryKind::Cos => m!(|v: F| v.cos()),
        UnaryKind::Tan => m!(|v: F| v.tan()),
        UnaryKind::Arcsin => m!(|v: F| v.asin()),
        UnaryKind::Arccos => m!(|v: F| v.acos()),
        UnaryKind::Arctan => m!(|v: F| v.atan()),
        UnaryKind::Sinh => m!(|v: F| v.sinh()),
        UnaryKind::Cosh => m!(|v: F| v.cosh()),
        UnaryKind::Tanh => m!(|v: F| v.tanh()),
        UnaryKind::Arcsinh => m!(|v: F| v.asinh()),
        UnaryKind::Arccosh => m!(|v: F| v.acosh()),
        UnaryKind::Arctanh => m!(|v: F| v.atanh()),
        UnaryKind::Degrees => m!(|v: F| v.to_degrees()),
        UnaryKind::Radians => m!(|v: F| v.to_radians()),
        UnaryKind::Sigmoid => m!(|v: F| one / (one + (-v).exp())),
        UnaryKind::Softsign => m!(|v: F| v / (one + v.abs())),
        // NaN stays NaN, as MXNet's relu keeps it.
        UnaryKind::Relu => m!(|v: F| if v <= zero { zero } else { v }),
        UnaryKind::Floor => m!(|v: F| v.floor()),
        UnaryKind::Ceil => m!(|v: F| v.ceil()),
        UnaryKind::Round => m!(|v: F| v.round()),
        UnaryKind::Rint => m!(|v: F| {
            // Round half to even, as numpy's rint does.
            let r = v.round();
            if (v - v.trunc()).abs() == F::from(0.5).unwrap_or(zero)
                && (r / (one + one)).fract() != zero
            {
                r - v.signum()
            } else {
                r
            }
        }),
        UnaryKind::Fix | UnaryKind::Trunc => m!(|v: F| v.trunc()),
        UnaryKind::LogicalNot => m!(|v: F| if v == zero { one } else { zero }),
        UnaryKind::Erf => wide(io, req, special::erf),
        UnaryKind::Erfinv => wide(io, req, special::erfinv),
        UnaryKind::Gamma => wide(io, req, special::gamma),
        UnaryKind::Gammaln => wide(io, req, special::gammaln),
        UnaryKind::HardSigmoid(alpha, beta) => {
            let (alpha, beta) = (
                F::from(alpha).unwrap_or(zero),
                F::from(beta).unwrap_or(zero),
            );
            m!(|v: F| (alpha * v + beta).max(zero).min(one))
        }
        UnaryKind::Clip(lo, hi) => {
            let lo = F::from(lo).unwrap_or(F::neg_infinity());
            let hi = F::from(hi).unwrap_or(F::infinity());
            m!(|v: F| if v < lo {
                lo
            } else if v > hi {
                hi
            } else {
                v
            })
        }
    }
}

fn int_kernel<T: Num>(kind: UnaryKind, io: InOut<'_, T>, req: OpReq) {
    let zero = T::ZERO;
    match kind {
        UnaryKind::Copy => map_io(io, req, |v| v),
        UnaryKind::Negative => map_io(io, req, |v: T| v.neg()),
        UnaryKind::Abs => map_io(io, req, |v: T| if v < zero { v.neg() } else { v }),
        UnaryKind::Sign => map_io(io, req, |v: T| {
            if v > zero {
                T::ONE
            } else if v < zero {
                T::ONE.neg()
            } else {
                zero
            }
        }),
        UnaryKind::Square => map_io(io, req, |v: T| v.mul(v)),
        UnaryKind::Relu => map_io(io, req, |v: T| if v > zero { v } else { zero }),
        UnaryKind::Floor
        | UnaryKind::Ceil
        | UnaryKind::Round
        | UnaryKind::Rint
        | UnaryKind::Fix
        | UnaryKind::Trunc => map_io(io, req, |v| v),
        UnaryKind::LogicalNot => map_io(io, req, |v: T| if v == zero { T::ONE } else { zero }),
        UnaryKind::Clip(lo, hi) => map_io(io, req, |v: T| {
            let f = v.to_f64();
            if f < lo {
                T::from_f64(lo)
            } else if f > hi {
                T::from_f64(hi)
            } else {
                v
            }
        }),
        _ => {
            // Other functions compute in double precision and cast back, as MXNet does.
            let wide: Vec<f64> = io.input().iter().map(|v| v.to_f64()).collect();
            let mut res = vec![0f64; wide.len()];
            float_kernel(kind, InOut::Apart(&wide, &mut res), OpReq::Write);
            let out = match io {
                InOut::Same(o) => o,
                InOut::Apart(_, o) => o,
            };
            map1(&res, out, req, T::from_f64);
        }
    }
}

/// Applies `kind` to `x`, writing `out` as `req` says.
pub fn apply(kind: UnaryKind, x: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::WriteInplace && x.ptr() == out.ptr() && kind == UnaryKind::Copy {
        return Ok(());
    }
    match x.dtype {
        DType::F32 => float_kernel::<f32>(kind, x.in_out(out), req),
        DType::F64 => float_kernel::<f64>(kind, x.in_out(out), req),
        DType::F16 => {
            let wide: Vec<f32> = x.to_vec::<half::f16>().iter().map(|v| v.to_f32()).collect();
            let mut res = vec![0f32; wide.len()];
            float_kernel(kind, InOut::Apart(&wide, &mut res), OpReq::Write);
            map1(&res, out.slice_mut::<half::f16>(), req, half::f16::from_f32);
        }
        other => {
            dispatch_num!(kind_name(kind), other, T => int_kernel::<T>(kind, x.in_out(out), req))
        }
    }
    Ok(())
}

fn kind_name(kind: UnaryKind) -> &'static str {
    UNARY_OPS
        .iter()
        .find(|(_, _, k)| std::mem::discriminant(k) == std::mem::discriminant(&kind))
        .map_or("unary", |(n, _, _)| n)
}

impl CpuKernel for Unary {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        apply(self.kind, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Unary>(k);
}
