//! CPU kernels of the backward of the reductions over axes: the output gradient broadcast
//! back over the reduced axes, times each input element's share of the result.

use super::{map3_broadcast, with_float, FloatKernel};
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::grad::reduce::ReduceBackward;
use crate::op::reduce::{reduce_axes, ReduceKind};
use crate::op::{OpContext, OpReq};
use num_traits::Float;

/// `d(reduce)/dx * g` for one element `x` whose reduction gave `y`.
#[inline(always)]
fn share<F: Float>(kind: ReduceKind, count: F, g: F, x: F, y: F) -> F {
    let zero = F::zero();
    match kind {
        ReduceKind::Sum => g,
        ReduceKind::Mean => g / count,
        ReduceKind::NanSum => {
            if x.is_nan() {
                zero
            } else {
                g
            }
        }
        ReduceKind::Prod => g * y / x,
        ReduceKind::NanProd => {
            if x.is_nan() {
                zero
            } else {
                g * y / x
            }
        }
        ReduceKind::Max | ReduceKind::Min => {
            if x == y {
                g
            } else {
                zero
            }
        }
        ReduceKind::Norm1 => {
            if x > zero {
                g
            } else if x < zero {
                -g
            } else {
                zero
            }
        }
        ReduceKind::Norm2 => g * x / y,
    }
}

struct Share<'a> {
    kind: ReduceKind,
    count: usize,
    kept: &'a [usize],
    shape: &'a [usize],
}

impl FloatKernel for Share<'_> {
    fn run<F: Float + Num>(&self, ins: &[&[F]], out: &mut [F], req: OpReq) {
        let (kind, count) = (self.kind, F::from(self.count).unwrap_or_else(F::one));
        map3_broadcast(
            [
                (ins[0], self.kept),
                (ins[1], self.shape),
                (ins[2], self.kept),
            ],
            out,
            self.shape,
            req,
            |g, x, y| share(kind, count, g, x, y),
        );
    }
}

impl CpuKernel for ReduceBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, x, y) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (mask, _) = reduce_axes(
            self.name,
            &x.shape,
            self.axis.as_deref(),
            true,
            self.exclude,
        )?;
        let kept: Vec<usize> = x
            .shape
            .iter()
            .zip(&mask)
            .map(|(&d, &m)| if m { 1 } else { d })
            .collect();
        let count = x
            .shape
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| m)
            .map(|(&d, _)| d)
            .product();
        let k = Share {
            kind: self.kind,
            count,
            kept: &kept,
            shape: &x.shape,
        };
        with_float(self.name, &k, &[g, x, y], &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<ReduceBackward>(k);
}
