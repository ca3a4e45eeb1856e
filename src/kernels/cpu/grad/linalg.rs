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

/// The (rows, cols) of each stored operand as the forward op sees it, and the batch.
fn stored(
    batched: bool,
    ta: bool,
    tb: bool,
    l: &[usize],
    r: &[usize],
) -> ((usize, usize), (usize, usize), usize) {
    let prod = |s: &[usize]| s.iter().product::<usize>();
    if batched {
        let nd = l.len();
        return (
            (l[nd - 2], l[nd - 1]),
            (r[nd - 2], r[nd - 1]),
            prod(&l[..nd - 2]),
        );
    }
    if l.len() == 1 && r.len() == 1 {
        return ((1, l[0]), (r[0], 1), 1);
    }
    let (ln, rn) = (l.len(), r.len());
    let a = if ta {
        (l[0], prod(&l[1..]))
    } else {
        (prod(&l[..ln - 1]), l[ln - 1])
    };
    let b = if tb {
        (prod(&r[..rn - 1]), r[rn - 1])
    } else {
        (r[0], prod(&r[1..]))
    };
    (a, b, 1)
}

impl CpuKernel for DotBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, a, b) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (ta, tb) = (self.ta, self.tb);
        let ((ar, ac), (br, bc), batch) = stored(self.batched, ta, tb, &a.shape, &b.shape);
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
