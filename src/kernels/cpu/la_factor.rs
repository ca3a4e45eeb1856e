//! CPU kernels of the factorization `_linalg_` operators and their backward operators:
//! each matrix of the batch through the single-matrix routines of `la_dense`, across the
//! pool for batches of several matrices.

use super::la_dense::{self as la, LaFloat};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::la_factor::{LaKind, LaOp};
use crate::op::{OpContext, OpReq, Operator};
use rayon::prelude::*;

/// One matrix's slices: the inputs read and the outputs written.
struct Matrix<'a, T> {
    ins: Vec<&'a [T]>,
    outs: Vec<&'a mut [T]>,
}

impl LaOp {
    /// Runs one matrix.
    fn one<T: LaFloat>(&self, m: usize, n: usize, x: Matrix<T>) -> std::result::Result<(), String> {
        let (a, t, r, lo) = (self.alpha, self.transpose, self.rightside, self.lower);
        let alpha = T::from_f64(a);
        let Matrix { ins, mut outs } = x;
        match (self.kind, self.backward) {
            (LaKind::Potrf, false) => {
                outs[0].copy_from_slice(ins[0]);
                la::potrf(outs[0], n, lo)
            }
            (LaKind::Potri, false) => la::potri(ins[0], n, lo, outs[0]),
            (LaKind::Trsm | LaKind::Trmm, false) => {
                outs[0].copy_from_slice(ins[1]);
                let f = if self.kind == LaKind::Trsm {
                    la::trsm::<T>
                } else {
                    la::trmm::<T>
                };
                f(ins[0], outs[0], m, n, t, r, lo, alpha)
            }
            (LaKind::Gelqf, false) => {
                let [q, l] = &mut outs[..] else {
                    return Err("two outputs expected".into());
                };
                la::gelqf(ins[0], m, n, q, l)
            }
            (LaKind::Syevd, false) => {
                let [u, lam] = &mut outs[..] else {
                    return Err("two outputs expected".into());
                };
                la::syevd(ins[0], n, u, lam)
            }
            (LaKind::Inverse, false) => la::inverse(ins[0], n, outs[0]),
            (LaKind::Det, false) => {
                outs[0][0] = la::det(ins[0], n)?;
                Ok(())
            }
            (LaKind::Slogdet, false) => {
                let (sign, logabs) = la::slogdet(ins[0], n)?;
                outs[0][0] = sign;
                outs[1][0] = logabs;
                Ok(())
            }
            // Backward inputs: head gradients, then forward inputs, then outputs.
            (LaKind::Potrf, true) => la::potrf_backward(ins[1], ins[0], n, lo, outs[0]),
            (LaKind::Potri, true) => la::potri_backward(ins[1], ins[2], ins[0], n, lo, outs[0]),
            (LaKind::Trmm, true) => {
                let [da, db] = &mut outs[..] else {
                    return Err("two outputs expected".into());
                };
                la::trmm_backward(ins[1], ins[2], ins[0], m, n, t, r, lo, alpha, da, db)
            }
            (LaKind::Trsm, true) => {
                let [da, db] = &mut outs[..] else {
                    return Err("two outputs expected".into());
                };
                la::trsm_backward(ins[1], ins[2], ins[0], m, n, t, r, lo, alpha, da, db)
            }
            (LaKind::Gelqf, true) => {
                la::gelqf_backward(ins[2], ins[3], ins[0], ins[1], m, n, outs[0])
            }
            (LaKind::Syevd, true) => la::syevd_backward(ins[2], ins[3], ins[0], ins[1], n, outs[0]),
            (LaKind::Inverse, true) => la::inverse_backward(ins[1], ins[0], n, outs[0]),
            (LaKind::Det, true) => la::det_backward(ins[1], n, ins[2][0], ins[0][0], outs[0]),
            (LaKind::Slogdet, true) => {
                la::slogdet_backward(ins[1], n, ins[2][0], ins[0][0], outs[0])
            }
        }
    }

    /// Every matrix of the batch, into fresh buffers (one per output) that are then
    /// written or added into the outputs.
    fn run<T: LaFloat + Element>(&self, io: &Blobs) -> Result<()> {
        let (batch, m, n) = self.matrix_dims(
            &io.inputs.iter().map(|b| &b.shape[..]).collect::<Vec<_>>(),
            &io.outputs.iter().map(|b| &b.shape[..]).collect::<Vec<_>>(),
        );
        let mut bufs: Vec<Vec<T>> = io.outputs.iter().map(|b| vec![T::ZERO; b.size()]).collect();
        if batch > 0 && m > 0 && n > 0 {
            let ins: Vec<&[T]> = io.inputs.iter().map(|b| b.slice::<T>()).collect();
            let in_chunk: Vec<usize> = ins.iter().map(|s| s.len() / batch).collect();
            let out_chunk: Vec<usize> = bufs.iter().map(|b| b.len() / batch).collect();
            let mut per: Vec<Vec<&mut [T]>> = (0..batch).map(|_| Vec::new()).collect();
            for (buf, &c) in bufs.iter_mut().zip(&out_chunk) {
                for (k, part) in buf.chunks_mut(c.max(1)).enumerate().take(batch) {
                    per[k].push(part);
                }
            }
            let run = |(k, outs): (usize, Vec<&mut [T]>)| {
                let ins = ins
                    .iter()
                    .zip(&in_chunk)
                    .map(|(s, &c)| &s[k * c..(k + 1) * c])
                    .collect();
                self.one(m, n, Matrix { ins, outs })
            };
            let results: Vec<std::result::Result<(), String>> = if batch > 1 {
                per.into_par_iter().enumerate().map(run).collect()
            } else {
                per.into_iter().enumerate().map(run).collect()
            };
            if let Some(e) = results.into_iter().find_map(|r| r.err()) {
                return Err(Error::Value(format!("{}: {e}", self.name())));
            }
        }
        for ((blob, &req), buf) in io.outputs.iter().zip(io.req).zip(&bufs) {
            let out = blob.slice_mut::<T>();
            match req {
                OpReq::Null => {}
                OpReq::Add => out.iter_mut().zip(buf).for_each(|(o, &v)| *o += v),
                _ => out.copy_from_slice(buf),
            }
        }
        Ok(())
    }
}

impl CpuKernel for LaOp {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        match io.inputs[0].dtype {
            DType::F32 => self.run::<f32>(&io),
            DType::F64 => self.run::<f64>(&io),
            other => Err(Error::Type(format!(
                "{}: this operation only supports float32 and float64, got {other}",
                self.name()
            ))),
        }
    }
}

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<LaOp>(k);
}
