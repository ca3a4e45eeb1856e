//! CPU kernels of the element-wise binary operators: same-shape (`elemwise_*`),
//! broadcasting (`broadcast_*`) and with a scalar (`_plus_scalar`, ...).

use super::map::{map1, map2_broadcast, map2_broadcast_inplace, map_inplace};
use super::num::Num;
use crate::dispatch_num;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::{InOut, TBlob};
use crate::op::elemwise::binary::{Binary, BinaryKind, Scalar};
use crate::op::{OpContext, OpRef, OpReq};
use std::sync::Arc;

#[inline(always)]
fn truth<T: Num>(b: bool) -> T {
    if b {
        T::ONE
    } else {
        T::ZERO
    }
}

/// Runs `$body` with `$f` bound to the element function of `$kind` on `$T`.
macro_rules! with_binary_fn {
    ($kind:expr, $T:ty, $f:ident => $body:expr) => {{
        let z = <$T>::ZERO;
        match $kind {
            BinaryKind::Add => {
                let $f = |x: $T, y: $T| Num::add(x, y);
                $body
            }
            BinaryKind::Sub => {
                let $f = |x: $T, y: $T| Num::sub(x, y);
                $body
            }
            BinaryKind::Mul => {
                let $f = |x: $T, y: $T| Num::mul(x, y);
                $body
            }
            BinaryKind::Div => {
                let $f = |x: $T, y: $T| Num::div(x, y);
                $body
            }
            BinaryKind::Mod => {
                let $f = |x: $T, y: $T| Num::rem(x, y);
                $body
            }
            BinaryKind::Power => {
                let $f = |x: $T, y: $T| Num::pow(x, y);
                $body
            }
            BinaryKind::Maximum => {
                let $f = |x: $T, y: $T| Num::max_of(x, y);
                $body
            }
            BinaryKind::Minimum => {
                let $f = |x: $T, y: $T| Num::min_of(x, y);
                $body
            }
            BinaryKind::Hypot => {
                let $f = |x: $T, y: $T| {
                    <$T as Element>::from_f64(Element::to_f64(x).hypot(Element::to_f64(y)))
                };
                $body
            }
            BinaryKind::Equal => {
                let $f = |x: $T, y: $T| truth::<$T>(x == y);
                $body
            }
            BinaryKind::NotEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x != y);
                $body
            }
            BinaryKind::Greater => {
                let $f = |x: $T, y: $T| truth::<$T>(x > y);
                $body
            }
            BinaryKind::GreaterEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x >= y);
                $body
            }
            BinaryKind::Lesser => {
                let $f = |x: $T, y: $T| truth::<$T>(x < y);
                $body
            }
            BinaryKind::LesserEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x <= y);
                $body
            }
            BinaryKind::LogicalAnd => {
                let $f = |x: $T, y: $T| truth::<$T>(x != z && y != z);
                $body
            }
            BinaryKind::LogicalOr => {
                let $f = |x: $T, y: $T| truth::<$T>(x != z || y != z);
                $body
            }
            BinaryKind::LogicalXor => {
                let $f = |x: $T, y: $T| truth::<$T>((x != z) != (y != z));
                $body
            }
        }
    }};
}

/// `out = f(a, b)` with broadcasting.
#[allow(clippy::too_many_arguments)]
fn kernel<T: Num>(
    kind: BinaryKind,
    a: &[T],
    ash: &[usize],
    b: &[T],
    bsh: &[usize],
    out: &mut [T],
    osh: &[usize],
    req: OpReq,
) {
    with_binary_fn!(kind, T, f => map2_broadcast(a, ash, b, bsh, out, osh, req, f))
}

/// True if `x` is exactly the memory of `out` (an in-place operand).
fn is_out(x: &TBlob, out: &TBlob) -> bool {
    x.ptr() == out.ptr() && x.size() == out.size()
}

/// Computes `out = kind(a, b)` with broadcasting; an input that is the output itself is
/// read through the output (the in-place form).
pub fn apply(kind: BinaryKind, a: &TBlob, b: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    let (osh, ash, bsh) = (&out.shape, &a.shape, &b.shape);
    match (is_out(a, out), is_out(b, out)) {
        (false, false) => dispatch_num!("binary", out.dtype, T => kernel::<T>(
            kind, a.slice(), ash, b.slice(), bsh, out.slice_mut(), osh, req
        )),
        (true, true) => dispatch_num!("binary", out.dtype, T => with_binary_fn!(kind, T, f => {
            let add = req == OpReq::Add;
            if req != OpReq::Null {
                map_inplace(out.slice_mut::<T>(), |v| if add { Num::add(v, f(v, v)) } else { f(v, v) })
            }
        })),
        (in_a, _) => {
            let other = if in_a { b } else { a };
            dispatch_num!("binary", out.dtype, T => with_binary_fn!(kind, T, f => {
                map2_broadcast_inplace(
                    out.slice_mut::<T>(), osh, other.slice::<T>(), &other.shape, !in_a, req, f
                )
            }))
        }
    }
    Ok(())
}

impl CpuKernel for Binary {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        apply(
            self.kind,
            &io.inputs[0],
            &io.inputs[1],
            &io.outputs[0],
            io.req[0],
        )
    }
}

fn scalar_kernel<T: Num>(op: &Scalar, io: InOut<'_, T>, req: OpReq) {
    let s = T::from_f64(op.scalar);
    let one = [s];
    match io {
        InOut::Same(out) => {
            let n = [out.len()];
            map2_broadcast_inplace(
                out,
                &n,
                &one,
                &[1],
                op.reverse,
                req,
                |x: T, y: T| with_binary_fn!(op.kind, T, f => f(x, y)),
            )
        }
        InOut::Apart(x, out) => {
            if op.reverse {
                kernel(op.kind, &one, &[1], x, &[x.len()], out, &[x.len()], req)
            } else if op.kind == BinaryKind::Mul && req != OpReq::Add {
                map1(x, out, req, |v: T| v.mul(s))
            } else {
                kernel(op.kind, x, &[x.len()], &one, &[1], out, &[x.len()], req)
            }
        }
    }
}

impl CpuKernel for Scalar {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        dispatch_num!(self.name, io.inputs[0].dtype, T => scalar_kernel::<T>(
            self, io.inputs[0].in_out(&io.outputs[0]), io.req[0]
        ));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Binary>(k);
    cpu::add::<Scalar>(k);
}

/// A broadcasting binary operator, for callers in the core.
pub fn broadcast_op(name: &'static str, kind: BinaryKind) -> OpRef {
    Arc::new(Binary {
        name,
        kind,
        broadcast: true,
    })
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    #[test]
    fn broadcast_and_scalar() {
        let a = f32a(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = f32a(&[3], &[10., 20., 30.]);
        let c = &run("broadcast_add", &[], &[a.clone(), b])[0];
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(f32s(c), vec![11., 22., 33., 14., 25., 36.]);
        let d = &run(
            "_rminus_scalar",
            &[("scalar", "1")],
            std::slice::from_ref(&a),
        )[0];
        assert_eq!(f32s(d), vec![0., -1., -2., -3., -4., -5.]);
        let col = f32a(&[2, 1], &[1., 2.]);
        let e = &run("broadcast_mul", &[], &[a.clone(), col])[0];
        assert_eq!(f32s(e), vec![1., 2., 3., 8., 10., 12.]);
        assert!(try_run("broadcast_add", &[], &[a.clone(), f32a(&[2], &[1., 2.])]).is_err());
        assert!(try_run("elemwise_add", &[], &[a.clone(), f32a(&[3], &[1., 2., 3.])]).is_err());
    }

    #[test]
    fn integer_semantics_follow_mxnet() {
        let a = array::<i32>(&[4], &[-7, 7, -7, 7]);
        let b = array::<i32>(&[4], &[2, -2, -2, 2]);
        assert_eq!(
            values::<i32>(&run("_div", &[], &[a.clone(), b.clone()])[0]),
            vec![-3, -3, 3, 3]
        );
        assert_eq!(
            values::<i32>(&run("_mod", &[], &[a.clone(), b])[0]),
            vec![1, -1, -1, 1]
        );
        assert_eq!(
            values::<i32>(&run("_div_scalar", &[("scalar", "0")], &[a])[0]),
            vec![0; 4]
        );
    }
}
