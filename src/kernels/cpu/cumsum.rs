//! CPU kernel of `cumsum` and its backward: the input converted to the output's type,
//! then summed along each lane in place, rows of a lane's neighbours at a time.

use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::indexing::cast_blob;
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::cumsum::{Cumsum, Lanes};
use crate::op::{OpContext, OpReq, Operator};
use rayon::prelude::*;

/// Running sums of every lane of `data` in place: from the first element of each lane,
/// or (`reverse`) from the last.
fn scan<T: Num>(data: &mut [T], l: Lanes, reverse: bool) {
    let (len, stride) = (l.len, l.stride);
    let block = len * stride;
    if block == 0 || len < 2 {
        return;
    }
    // One block holds `stride` lanes side by side: element j of every lane is a row.
    let run = |b: &mut [T]| {
        if reverse {
            for j in (0..len - 1).rev() {
                let (head, tail) = b.split_at_mut((j + 1) * stride);
                for (c, &n) in head[j * stride..].iter_mut().zip(&tail[..stride]) {
                    *c = n.add(*c);
                }
            }
        } else {
            for j in 1..len {
                let (head, tail) = b.split_at_mut(j * stride);
                for (c, &p) in tail[..stride].iter_mut().zip(&head[(j - 1) * stride..]) {
                    *c = p.add(*c);
                }
            }
        }
    };
    if data.len() >= PAR_MIN && data.len() > block && pool_shares_work() {
        data.par_chunks_mut(block).for_each(run);
    } else {
        data.chunks_mut(block).for_each(run);
    }
}

impl CpuKernel for Cumsum {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let (src, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let lanes = self.lanes(&out.shape)?;
        // Adding into the output: sum in scratch memory first (8-byte words keep every
        // element type aligned).
        let mut words = Vec::new();
        let scratch;
        let target = if req == OpReq::Add {
            words.resize((out.size() * out.dtype.size()).div_ceil(8), 0u64);
            scratch = TBlob::from_raw(words.as_mut_ptr().cast(), out.shape.clone(), out.dtype);
            &scratch
        } else {
            out
        };
        cast_blob(src, target, OpReq::Write);
        dispatch_num!(self.name(), target.dtype, T => scan::<T>(target.slice_mut(), lanes, self.reverse));
        if req == OpReq::Add {
            dispatch_num!(self.name(), out.dtype, T => {
                for (o, &s) in out.slice_mut::<T>().iter_mut().zip(target.slice::<T>()) {
                    *o = o.add(s);
                }
            });
        }
        Ok(())
    }
}

/// Registers the CPU kernel of `cumsum` and its backward.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Cumsum>(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_rows_and_flat_lanes_both_ways() {
        let mut a: Vec<i32> = (1..=6).collect();
        let l = Lanes {
            lanes: 3,
            len: 2,
            stride: 3,
        };
        scan(&mut a, l, false);
        assert_eq!(a, [1, 2, 3, 5, 7, 9]);
        let mut b: Vec<i32> = (1..=6).collect();
        scan(&mut b, l, true);
        assert_eq!(b, [5, 7, 9, 4, 5, 6]);
        let mut c: Vec<u8> = vec![200, 100, 1];
        let flat = Lanes {
            lanes: 1,
            len: 3,
            stride: 1,
        };
        scan(&mut c, flat, false);
        assert_eq!(c, [200, 44, 45]);
    }
}
