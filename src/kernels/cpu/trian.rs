//! CPU kernel of the triangle copies `linalg.extracttrian` and `linalg.maketrian`.

use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::la_trian::Trian;
use crate::op::{OpContext, OpReq, Operator};

impl CpuKernel for Trian {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let (src, dst) = (&io.inputs[0], &io.outputs[0]);
        let matrix = if self.extract { &src.shape } else { &dst.shape };
        let n = matrix.last().copied().unwrap_or(0);
        let m = self.packed_len(n);
        let add = req == OpReq::Add;
        dispatch_num!(self.name(), src.dtype, T => {
            let (x, y) = (src.slice::<T>(), dst.slice_mut::<T>());
            let put = |o: &mut T, v: T| *o = if add { o.add(v) } else { v };
            for b in 0..matrix.iter().product::<usize>() / (n * n).max(1) {
                for r in 0..n {
                    for c in 0..n {
                        let at = (b * n + r) * n + c;
                        match (self.packed(r, c), self.extract) {
                            (Some(i), true) => put(&mut y[b * m + i], x[at]),
                            (Some(i), false) => put(&mut y[at], x[b * m + i]),
                            (None, false) if !add => y[at] = T::ZERO,
                            _ => {}
                        }
                    }
                }
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernel of the triangle copies.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Trian>(k);
}
