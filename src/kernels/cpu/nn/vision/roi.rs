//! CPU kernels of `ROIPooling` and its backward: the maximum of each bin of each region
//! and its flat index into the data (-1 for an empty bin, whose output is 0); the backward
//! adds each bin's gradient at its maximum.

use crate::dispatch_float;
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::roi_pooling::{RoiPooling, RoiPoolingBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use rayon::prelude::*;

impl CpuKernel for RoiPooling {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null && io.req[1] == OpReq::Null {
            return Ok(());
        }
        let (data, rois, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (batch, h, w) = (data.shape[0], data.shape[2], data.shape[3]);
        let channels = data.shape[1];
        let bins = self.pooled.0 * self.pooled.1;
        let f32_math = data.dtype != DType::F64;
        let mut own_index = Vec::new();
        let index: &mut [i64] = if io.req[1] == OpReq::Null {
            own_index.resize(out.size(), 0);
            &mut own_index
        } else {
            io.outputs[1].slice_mut::<i64>()
        };
        dispatch_float!(NAME, data.dtype, T => {
            let (d, r) = (data.slice::<T>(), rois.slice::<T>());
            let mut own_out = Vec::new();
            let values: &mut [T] = if req == OpReq::Null {
                own_out.resize(out.size(), T::ZERO);
                &mut own_out
            } else {
                out.slice_mut::<T>()
            };
            let floor = T::from_f64(f32::MIN as f64);
            // One (region, channel) pair: its bins' maxima and their indices.
            let pool = |row: usize, (vals, idx): (&mut [T], &mut [i64])| {
                let (roi, ch) = (row / channels, row % channels);
                let corners: [f64; 5] = std::array::from_fn(|k| r[roi * 5 + k].to_f64());
                let region = self.region(corners, batch, f32_math);
                for (b, (v, i)) in vals.iter_mut().zip(idx.iter_mut()).enumerate() {
                    let bin = self.bin(&region, b / self.pooled.1, b % self.pooled.1, (h, w));
                    let Some(n) = region.batch.filter(|_| !bin.is_empty()) else {
                        *v = T::ZERO;
                        *i = -1;
                        continue;
                    };
                    let base = (n * channels + ch) * h * w;
                    let (mut best, mut at) = (floor, -1i64);
                    for y in bin.h0..bin.h1 {
                        for x in bin.w0..bin.w1 {
                            let e = d[base + y * w + x];
                            if e.to_f64() > best.to_f64() {
                                best = e;
                                at = (base + y * w + x) as i64;
                            }
                        }
                    }
                    *v = best;
                    *i = at;
                }
            };
            if out.size() < PAR_MIN / 16 || !pool_shares_work() {
                let work = values.chunks_mut(bins).zip(index.chunks_mut(bins));
                work.enumerate().for_each(|(row, p)| pool(row, p));
            } else {
                values
                    .par_chunks_mut(bins)
                    .zip(index.par_chunks_mut(bins))
                    .enumerate()
                    .for_each(|(row, p)| pool(row, p));
            }
        });
        Ok(())
    }
}

impl CpuKernel for RoiPoolingBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let (og, index, gd) = (&io.inputs[0], &io.inputs[2], &io.outputs[0]);
        dispatch_float!(self.name(), gd.dtype, T => {
            let g = gd.slice_mut::<T>();
            if req != OpReq::Add {
                g.fill(T::ZERO);
            }
            for (&v, &at) in og.slice::<T>().iter().zip(index.slice::<i64>()) {
                if let Some(slot) = usize::try_from(at).ok().and_then(|a| g.get_mut(a)) {
                    *slot = slot.add(v);
                }
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of `ROIPooling`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<RoiPooling>(k);
    cpu::add::<RoiPoolingBackward>(k);
}
