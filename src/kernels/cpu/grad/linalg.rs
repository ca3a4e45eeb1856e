//! CPU kernels of the backward of `dot` and `batch_dot`: two matrix products of the
//! output gradient with the other operand, transposed to match how each input entered the
//! product.

use crate::error::{Error, Result};
use crate::kernels::cpu::linalg::run_products;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::grad::linalg::DotBackward;
use crate::op::linalg::MatMul;
use crate::op::{OpContext, OpReq, Operator};

impl CpuKernel for DotBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, a, b) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (ta, tb) = (self.ta, self.tb);
        let ((ar, ac), (br, bc), batch) = self.stored_operands(ta, tb, &a.shape, &b.shape);
        let bad = || Error::Runtime(format!("{}: operand shapes do not match", self.name()));
        let fwd = MatMul::new(ar, ac, ta, br, bc, tb).ok_or_else(bad)?;
        let (m, n) = (fwd.m, fwd.n);
        if io.req[0] != OpReq::Null {
            let (d, x, y) = if ta {
                (MatMul::new(br, bc, tb, m, n, true), b, g)
            } else {
                (MatMul::new(m, n, false, br, bc, !tb), g, b)
            };
            run_products(&d.ok_or_else(bad)?, batch, x, y, &io.outputs[0], io.req[0])?;
        }
        if io.req[1] != OpReq::Null {
            let (d, x, y) = if tb {
                (MatMul::new(m, n, true, ar, ac, ta), g, a)
            } else {
                (MatMul::new(ar, ac, !ta, m, n, false), a, g)
            };
            run_products(&d.ok_or_else(bad)?, batch, x, y, &io.outputs[1], io.req[1])?;
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<DotBackward>(k);
}
