//! CPU kernels of the array creation operators: `_zeros`, `_ones`, `_full`, `_arange`,
//! `_eye`, `zeros_like`, `ones_like`.

use super::map::map_inplace;
use super::num::Num;
use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::init::{Fill, Init};
use crate::op::{OpContext, OpReq};

fn fill<T: Num>(f: Fill, out: &mut [T], req: OpReq) {
    match f {
        Fill::Value(v) => {
            let v = T::from_f64(v);
            if req == OpReq::Add {
                map_inplace(out, |o| o.add(v));
            } else {
                out.fill(v);
            }
        }
        Fill::Arange {
            start,
            step,
            repeat,
        } => {
            for (i, o) in out.iter_mut().enumerate() {
                let v = T::from_f64(start + (i / repeat) as f64 * step);
                *o = if req == OpReq::Add { o.add(v) } else { v };
            }
        }
        Fill::Eye { m, k } => {
            for (i, o) in out.iter_mut().enumerate() {
                let (r, c) = ((i / m) as i64, (i % m) as i64);
                let v = if c - r == k { T::ONE } else { T::ZERO };
                *o = if req == OpReq::Add { o.add(v) } else { v };
            }
        }
    }
}

impl CpuKernel for Init {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let out = &io.outputs[0];
        if out.dtype == DType::Bool {
            let v = matches!(self.fill, Fill::Value(v) if v != 0.0);
            out.slice_mut::<bool>().fill(v);
            return Ok(());
        }
        dispatch_num!(self.name, out.dtype, T => fill::<T>(self.fill, out.slice_mut(), io.req[0]));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Init>(k);
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{f32a, f32s, run, try_run, values};

    #[test]
    fn creation() {
        let z = &run("_full", &[("shape", "(2, 2)"), ("value", "3.5")], &[])[0];
        assert_eq!(f32s(z), vec![3.5; 4]);
        let a = &run(
            "_arange",
            &[("start", "1"), ("stop", "4"), ("repeat", "2")],
            &[],
        )[0];
        assert_eq!(f32s(a), vec![1., 1., 2., 2., 3., 3.]);
        let e = &run(
            "_eye",
            &[("N", "2"), ("k", "1"), ("M", "3"), ("dtype", "int64")],
            &[],
        )[0];
        assert_eq!(values::<i64>(e), vec![0, 1, 0, 0, 0, 1]);
        let o = &run("ones_like", &[], &[f32a(&[3], &[5., 6., 7.])])[0];
        assert_eq!(f32s(o), vec![1.; 3]);
        assert!(try_run("_zeros", &[("shape", "(2, -1)")], &[]).is_err());
        assert!(try_run("_zeros", &[("shape", "(2,)"), ("dtype", "complex")], &[]).is_err());
    }
}
