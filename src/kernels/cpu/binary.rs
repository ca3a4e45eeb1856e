//! CPU kernels of the element-wise binary operators: same-shape (`elemwise_*`),
//! broadcasting (`broadcast_*`) and with a scalar (`_plus_scalar`, ...).

use super::map::{map1, map2_broadcast};
use super::num::Num;
use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
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

/// `out = f(a, b)` with broadcasting; `swap` computes `f(b, a)` instead.
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
    macro_rules! m {
        ($f:expr) => {
            map2_broadcast(a, ash, b, bsh, out, osh, req, $f)
        };
    }
    let z = T::ZERO;
    match kind {
        BinaryKind::Add => m!(|x: T, y: T| x.add(y)),
        BinaryKind::Sub => m!(|x: T, y: T| x.sub(y)),
        BinaryKind::Mul => m!(|x: T, y: T| x.mul(y)),
        BinaryKind::Div => m!(|x: T, y: T| x.div(y)),
        BinaryKind::Mod => m!(|x: T, y: T| x.rem(y)),
        BinaryKind::Power => m!(|x: T, y: T| x.pow(y)),
        BinaryKind::Maximum => m!(|x: T, y: T| x.max_of(y)),
        BinaryKind::Minimum => m!(|x: T, y: T| x.min_of(y)),
        BinaryKind::Hypot => m!(|x: T, y: T| T::from_f64(x.to_f64().hypot(y.to_f64()))),
        BinaryKind::Equal => m!(|x: T, y: T| truth(x == y)),
        BinaryKind::NotEqual => m!(|x: T, y: T| truth(x != y)),
        BinaryKind::Greater => m!(|x: T, y: T| truth(x > y)),
        BinaryKind::GreaterEqual => m!(|x: T, y: T| truth(x >= y)),
        BinaryKind::Lesser => m!(|x: T, y: T| truth(x < y)),
        BinaryKind::LesserEqual => m!(|x: T, y: T| truth(x <= y)),
        BinaryKind::LogicalAnd => m!(|x: T, y: T| truth(x != z && y != z)),
        BinaryKind::LogicalOr => m!(|x: T, y: T| truth(x != z || y != z)),
        BinaryKind::LogicalXor => m!(|x: T, y: T| truth((x != z) != (y != z))),
    }
}

/// Computes `out = kind(a, b)` with broadcasting.
pub fn apply(kind: BinaryKind, a: &TBlob, b: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    dispatch_num!("binary", out.dtype, T => kernel::<T>(
        kind, a.slice(), &a.shape, b.slice(), &b.shape, out.slice_mut(), &out.shape, req
    ));
    Ok(())
}

impl CpuKernel for Binary {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        apply(self.kind, &inputs[0], &inputs[1], &outputs[0], req[0])
    }
}

fn scalar_kernel<T: Num>(op: &Scalar, x: &[T], out: &mut [T], req: OpReq) {
    let s = T::from_f64(op.scalar);
    let one = [s];
    if op.reverse {
        kernel(op.kind, &one, &[1], x, &[x.len()], out, &[x.len()], req)
    } else if op.kind == BinaryKind::Mul && req != OpReq::Add {
        map1(x, out, req, |v: T| v.mul(s))
    } else {
        kernel(op.kind, x, &[x.len()], &one, &[1], out, &[x.len()], req)
    }
}

impl CpuKernel for Scalar {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        dispatch_num!(self.name, inputs[0].dtype, T => scalar_kernel::<T>(
            self, inputs[0].slice(), outputs[0].slice_mut(), req[0]
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
