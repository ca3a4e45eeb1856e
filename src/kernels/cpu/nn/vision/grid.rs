//! CPU kernels of `GridGenerator` and its backward: the affine grid (each sample's 2x3
//! matrix applied to the target's normalised coordinates) or the normalised warp.

use crate::dispatch_float;
use crate::error::Result;
use crate::kernels::cpu::nn::basic::common::{for_chunks, ld, put, st};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::grid_generator::{
    half_extent, normalised, GridGenerator, GridGeneratorBackward, Transform, NAME,
};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::Float;

impl CpuKernel for GridGenerator {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let add = req == OpReq::Add;
        let (data, out) = (&io.inputs[0], &io.outputs[0]);
        let (h, w) = (out.shape[2], out.shape[3]);
        let plane = h * w;
        dispatch_float!(NAME, out.dtype, T, F => {
            let d = data.slice::<T>();
            let xs: Vec<F> = (0..w).map(|j| normalised::<F>(j, w)).collect();
            let ys: Vec<F> = (0..h).map(|i| normalised::<F>(i, h)).collect();
            let (hw, hh) = (half_extent::<F>(w), half_extent::<F>(h));
            // Each chunk is whole planes: one coordinate of one sample.
            for_chunks(out.slice_mut::<T>(), plane, |off, o| {
                for (k, plane_out) in o.chunks_mut(plane).enumerate() {
                    let row = off / plane + k;
                    for (p, o) in plane_out.iter_mut().enumerate() {
                        let (x, y) = (xs[p % w], ys[p / w]);
                        let v: F = match self.transform {
                            Transform::Affine { .. } => {
                                let a = &d[row * 3..row * 3 + 3];
                                ld::<T, F>(a[0]) * x + ld::<T, F>(a[1]) * y + ld::<T, F>(a[2])
                            }
                            Transform::Warp => {
                                let flow = ld::<T, F>(d[row * plane + p]);
                                if row % 2 == 0 {
                                    (flow + num::<F>(p % w)) / hw - num::<F>(1)
                                } else {
                                    (flow + num::<F>(p / w)) / hh - num::<F>(1)
                                }
                            }
                        };
                        put(o, st::<F, T>(v), add);
                    }
                }
            });
        });
        Ok(())
    }
}

impl CpuKernel for GridGeneratorBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let add = req == OpReq::Add;
        let (og, gd) = (&io.inputs[0], &io.outputs[0]);
        let (h, w) = (og.shape[2], og.shape[3]);
        let plane = h * w;
        dispatch_float!(self.name(), gd.dtype, T, F => {
            let g = og.slice::<T>();
            match self.0.transform {
                Transform::Affine { .. } => {
                    let xs: Vec<F> = (0..w).map(|j| normalised::<F>(j, w)).collect();
                    let ys: Vec<F> = (0..h).map(|i| normalised::<F>(i, h)).collect();
                    for_chunks(gd.slice_mut::<T>(), 3, |off, o| {
                        for (k, coeffs) in o.chunks_mut(3).enumerate() {
                            let row = off / 3 + k;
                            let mut sums = [num::<F>(0); 3];
                            for (p, &v) in g[row * plane..(row + 1) * plane].iter().enumerate() {
                                let v = ld::<T, F>(v);
                                sums[0] += v * xs[p % w];
                                sums[1] += v * ys[p / w];
                                sums[2] += v;
                            }
                            for (c, s) in coeffs.iter_mut().zip(sums) {
                                put(c, st::<F, T>(s), add);
                            }
                        }
                    });
                }
                Transform::Warp => {
                    let (hw, hh) = (half_extent::<F>(w), half_extent::<F>(h));
                    for_chunks(gd.slice_mut::<T>(), plane, |off, o| {
                        for (k, plane_out) in o.chunks_mut(plane).enumerate() {
                            let row = off / plane + k;
                            let scale = if row % 2 == 0 { hw } else { hh };
                            let src = &g[row * plane..(row + 1) * plane];
                            for (o, &v) in plane_out.iter_mut().zip(src) {
                                put(o, st::<F, T>(ld::<T, F>(v) / scale), add);
                            }
                        }
                    });
                }
            }
        });
        Ok(())
    }
}

/// `v` in the compute type.
fn num<F: Float>(v: usize) -> F {
    F::from(v).unwrap_or_else(F::nan)
}

/// Registers the CPU kernels of `GridGenerator`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<GridGenerator>(k);
    cpu::add::<GridGeneratorBackward>(k);
}
