//! CPU kernels of `Dropout`: zeroes elements with probability `p` and scales the rest by
//! `1/(1-p)` while training (or always), optionally sharing the draw along `axes`; the
//! backward multiplies by the scaled keep mask.

use super::common::{ld, overlaps, put, st};
use crate::dispatch_float;
use crate::error::Result;
use crate::kernels::cpu::map::{map1, map2, pool_shares_work};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::common::check_float;
use crate::op::nn::dropout::{Dropout, DropoutBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

/// Masks longer than this are drawn in chunks, each from its own generator seeded from
/// the device's, in parallel.
const CHUNK: usize = 1 << 16;

impl Dropout {
    /// Fills `mask` (the data's shape) with `1/(1-p)` where kept and 0 where dropped.
    fn draw<T: Num>(&self, mask: &mut [T], shape: &[usize], rng: &mut Pcg64Mcg) -> Result<()> {
        let keep = 1.0 - self.p;
        let scale = 1.0 / keep;
        // Keep when a uniform 32-bit draw falls below keep·2³²; with keep = 0 the 0·∞
        // gives NaN, as MXNet's mask does.
        let threshold = (keep * 4_294_967_296.0) as u64;
        let value = |r: &mut Pcg64Mcg| {
            let kept = ((r.next_u32() as u64) < threshold) as u8 as f64;
            T::from_f64(kept * scale)
        };
        let small = self.draw_shape(shape)?;
        if small.as_slice() == shape {
            fill(mask, rng, value);
            return Ok(());
        }
        let mut reduced = vec![T::ZERO; small.iter().product()];
        fill(&mut reduced, rng, value);
        broadcast(&reduced, &small, mask, shape);
        Ok(())
    }
}

/// Fills `out` with draws; large outputs in parallel chunks with their own generators.
fn fill<T: Num>(out: &mut [T], rng: &mut Pcg64Mcg, value: impl Fn(&mut Pcg64Mcg) -> T + Sync) {
    if out.len() <= CHUNK {
        out.iter_mut().for_each(|o| *o = value(rng));
        return;
    }
    let seeds: Vec<u64> = (0..out.len().div_ceil(CHUNK))
        .map(|_| rng.next_u64())
        .collect();
    let each = |(chunk, seed): (&mut [T], u64)| {
        let mut r = Pcg64Mcg::seed_from_u64(seed);
        chunk.iter_mut().for_each(|o| *o = value(&mut r));
    };
    // The chunks and their seeds are the same either way, so the mask is too.
    if pool_shares_work() {
        out.par_chunks_mut(CHUNK).zip(seeds).for_each(each);
    } else {
        out.chunks_mut(CHUNK).zip(seeds).for_each(each);
    }
}

/// Copies `src` of shape `small` (the same rank as `shape`, 1 along broadcast axes) into
/// every position of `dst` of shape `shape`.
fn broadcast<T: Num>(src: &[T], small: &[usize], dst: &mut [T], shape: &[usize]) {
    let strides = crate::kernels::cpu::map::broadcast_strides(small, shape);
    for (i, o) in dst.iter_mut().enumerate() {
        let (mut rem, mut at) = (i, 0);
        for ax in (0..shape.len()).rev() {
            at += (rem % shape[ax]) * strides[ax];
            rem /= shape[ax];
        }
        *o = src[at];
    }
}

impl CpuKernel for Dropout {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (x, out, mask) = (&io.inputs[0], &io.outputs[0], &io.outputs[1]);
        let active = self.active(ctx.is_train);
        dispatch_float!(NAME, x.dtype, T, F => {
            if !active {
                super::common::unary::<T>(x, out, io.req[0], |v| v);
                return Ok(());
            }
            let m = mask.slice_mut::<T>();
            self.draw(m, &x.shape, ctx.rng(NAME)?)?;
            if io.req[0] == OpReq::Null {
                return Ok(());
            }
            let add = io.req[0] == OpReq::Add;
            if overlaps(x, out) {
                let o = out.slice_mut::<T>();
                for (o, &k) in o.iter_mut().zip(m.iter()) {
                    let v = st::<F, T>(ld::<T, F>(*o) * ld::<T, F>(k));
                    put(o, v, add);
                }
            } else {
                map2(x.slice::<T>(), &*m, out.slice_mut::<T>(), io.req[0], |v, k| {
                    st::<F, T>(ld::<T, F>(v) * ld::<T, F>(k))
                });
            }
        });
        Ok(())
    }
}

impl CpuKernel for DropoutBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, mask, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        check_float(self.name(), "output gradient", g.dtype)?;
        let masked = ctx.is_train || self.always;
        dispatch_float!(self.name(), g.dtype, T, F => {
            if masked {
                map2(g.slice::<T>(), mask.slice::<T>(), out.slice_mut::<T>(), io.req[0], |g, k| {
                    st::<F, T>(ld::<T, F>(g) * ld::<T, F>(k))
                });
            } else {
                map1(g.slice::<T>(), out.slice_mut::<T>(), io.req[0], |g| g);
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Dropout>(k);
    cpu::add::<DropoutBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::testing::{build, run_error, run_req};

    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    fn op(attrs: &[(&str, &str)]) -> OpRef {
        build(NAME, attrs)
    }

    #[test]
    fn identity_outside_training() {
        let x = f32a(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run(NAME, &[("p", "0.5")], std::slice::from_ref(&x));
        assert_eq!(y.len(), 2);
        assert_eq!(f32s(&y[0]), f32s(&x));
    }

    #[test]
    fn training_drops_and_scales() {
        let n = 200_000;
        let x = f32a(&[n], &vec![1.0; n]);
        let d = op(&[("p", "0.3")]);
        let y = crate::imperative::invoke(&d, std::slice::from_ref(&x), None, None, true).unwrap();
        let (out, mask) = (f32s(&y[0]), f32s(&y[1]));
        let scale = 1.0 / 0.7f32;
        assert!(out.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6));
        assert_eq!(out, mask);
        let kept = out.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
        assert!((kept - 0.7).abs() < 0.01, "kept {kept}");

        // mode=always drops also outside training; p=0 keeps everything.
        let y = run(
            NAME,
            &[("p", "0.5"), ("mode", "always")],
            std::slice::from_ref(&x),
        );
        assert!(f32s(&y[0]).contains(&0.0));
        let y = crate::imperative::invoke(
            &op(&[("p", "0")]),
            std::slice::from_ref(&x),
            None,
            None,
            true,
        )
        .unwrap();
        assert!(f32s(&y[0]).iter().all(|&v| v == 1.0));
        // p=1 gives NaN, as MXNet's 0 · 1/0 does.
        let y = crate::imperative::invoke(
            &op(&[("p", "1")]),
            &[f32a(&[2], &[1.0, 1.0])],
            None,
            None,
            true,
        )
        .unwrap();
        assert!(f32s(&y[0]).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn axes_share_the_draw() {
        let x = f32a(&[40, 6], &vec![1.0; 240]);
        let d = op(&[("p", "0.5"), ("axes", "(1,)")]);
        let y = crate::imperative::invoke(&d, &[x], None, None, true).unwrap();
        let out = f32s(&y[0]);
        for row in out.chunks(6) {
            assert!(row.iter().all(|&v| v == row[0]), "{row:?}");
        }
        assert!(out.contains(&0.0) && out.contains(&2.0));
    }

    #[test]
    fn backward_uses_the_mask() {
        let x = array::<f64>(
            &[3, 4],
            &(0..12).map(|i| i as f64 * 0.5 - 2.0).collect::<Vec<_>>(),
        );
        // Every forward draws a new mask, so the numeric check uses p = 0 (all ones).
        gradcheck(&op(&[("p", "0")]), &[x], &[0], 1e-6, 1e-8);

        let d = op(&[("p", "0.5")]);
        let Grad::Op(g) = d.gradient() else {
            panic!("no gradient")
        };
        assert_eq!(
            (g.ograds.as_slice(), g.outputs.as_slice()),
            (&[0][..], &[1][..])
        );
        let og = f32a(&[4], &[1.0, 2.0, 3.0, 4.0]);
        let mask = f32a(&[4], &[2.0, 0.0, 2.0, 0.0]);
        let dx = f32a(&[4], &[1.0; 4]);
        run_req(&g.op, &[og, mask], std::slice::from_ref(&dx), &[OpReq::Add]);
        assert_eq!(f32s(&dx), vec![3.0, 1.0, 7.0, 1.0]);
    }

    #[test]
    fn in_place_shapes_and_errors() {
        let d = op(&[("p", "0.5")]);
        let x = f32a(&[64], &[3.0; 64]);
        let mask = f32a(&[64], &[0.0; 64]);
        run_req(
            &d,
            std::slice::from_ref(&x),
            &[x.clone(), mask.clone()],
            &[OpReq::WriteInplace, OpReq::Write],
        );
        let (xv, mv) = (f32s(&x), f32s(&mask));
        assert!(xv.iter().zip(&mv).all(|(x, m)| *x == 3.0 * m));

        let mut ins = vec![Some(Shape::from_slice(&[2, 3]))];
        let mut outs = vec![None, None];
        d.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(outs[1].as_deref(), Some(&[2usize, 3][..]));
        assert_eq!(d.num_visible_outputs(), 1);

        assert!(try_run(NAME, &[("p", "1.5")], &[f32a(&[1], &[0.0])]).is_err());
        assert!(try_run(NAME, &[("mode", "test")], &[f32a(&[1], &[0.0])]).is_err());
        let e = run_error(NAME, &[("axes", "(5,)")], &[f32a(&[2, 2], &[0.0; 4])]);
        assert!(e.contains("Dropout"), "{e}");
        assert!(run(NAME, &[("cudnn_off", "None")], &[f32a(&[1], &[0.0])]).len() == 2);
    }
}
