//! CPU kernels of LAMB's two update phases, element by element as MXNet 1.9.1 computes
//! them: the moments are stored and read back in their own type before the direction
//! uses them.

use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::kernels::cpu::nn::basic::common::{ld, put, st};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::optim::lamb::{LambOp, Phase, PhaseOne, PhaseTwo};
use crate::op::{OpContext, OpReq, Operator};
use crate::{dispatch_float, ndarray::TBlob};
use num_traits::Float;

/// Phase one over `n` elements: weight `w` (or the float32 master weight `w32` when
/// given), gradient `g`, moments `mean` and `var` of type `S`, direction into `out`.
#[allow(clippy::too_many_arguments)]
fn phase_one<T: Element, S: Element + Num, F: Float + 'static>(
    p: &PhaseOne,
    w: &[T],
    w32: Option<&[f32]>,
    g: &[T],
    mean: &mut [S],
    var: &mut [S],
    out: &mut [S],
    add: bool,
) {
    let c = |v: f64| F::from(v).unwrap_or_else(F::nan);
    let (b1t, b2t) = p.powers();
    let (beta1, beta2) = (c(p.beta1 as f64), c(p.beta2 as f64));
    let (one, eps, wd) = (F::one(), c(p.epsilon as f64), c(p.wd as f64));
    let (rescale, clip) = (c(p.rescale_grad as f64), c(p.clip_gradient as f64));
    let (b1t, b2t) = (c(b1t), c(b2t));
    for i in 0..out.len() {
        let mut gr = ld::<T, F>(g[i]) * rescale;
        if clip >= F::zero() {
            gr = gr.max(-clip).min(clip);
        }
        mean[i] = st::<F, S>(beta1 * ld::<S, F>(mean[i]) + (one - beta1) * gr);
        var[i] = st::<F, S>(beta2 * ld::<S, F>(var[i]) + (one - beta2) * gr * gr);
        let (mut m, mut v) = (ld::<S, F>(mean[i]), ld::<S, F>(var[i]));
        if p.bias_correction {
            m = m / (one - b1t);
            v = v / (one - b2t);
        }
        let weight = match w32 {
            Some(w32) => c(w32[i] as f64),
            None => ld::<T, F>(w[i]),
        };
        put(
            &mut out[i],
            st::<F, S>(m / (v.sqrt() + eps) + wd * weight),
            add,
        );
    }
}

/// Phase two: `out = base - lr * dir`, the rate scaled by the trust ratio of the norms;
/// `base` is `None` when it is the output itself (the weight updated in place).
fn phase_two<T: Element + Num, B: Element, D: Element, F: Float + 'static>(
    p: &PhaseTwo,
    base: Option<&[B]>,
    dir: &[D],
    norms: (F, F),
    out: &mut [T],
    add: bool,
) {
    let lr = p.scaled_lr(norms.0, norms.1);
    match base {
        Some(base) => {
            for ((o, &b), &d) in out.iter_mut().zip(base).zip(dir) {
                put(o, st::<F, T>(ld::<B, F>(b) - lr * ld::<D, F>(d)), add);
            }
        }
        None => {
            for (o, &d) in out.iter_mut().zip(dir) {
                *o = st::<F, T>(ld::<T, F>(*o) - lr * ld::<D, F>(d));
            }
        }
    }
}

/// The one value of a norm input, in the compute type.
fn norm<T: Element, F: Float + 'static>(b: &TBlob) -> F {
    ld::<T, F>(b.slice::<T>()[0])
}

impl CpuKernel for LambOp {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let add = req == OpReq::Add;
        let ins = io.inputs;
        let out = &io.outputs[0];
        match (self.phase, self.mp) {
            (Phase::One(p), false) => dispatch_float!(self.name(), ins[0].dtype, T, F => {
                phase_one::<T, T, F>(&p, ins[0].slice::<T>(), None, ins[1].slice::<T>(),
                    ins[2].slice_mut::<T>(), ins[3].slice_mut::<T>(), out.slice_mut::<T>(), add)
            }),
            (Phase::One(p), true) => {
                debug_assert_eq!(ins[0].dtype, DType::F16);
                phase_one::<half::f16, f32, f32>(
                    &p,
                    ins[0].slice::<half::f16>(),
                    Some(ins[4].slice::<f32>()),
                    ins[1].slice::<half::f16>(),
                    ins[2].slice_mut::<f32>(),
                    ins[3].slice_mut::<f32>(),
                    out.slice_mut::<f32>(),
                    add,
                )
            }
            (Phase::Two(p), false) => dispatch_float!(self.name(), ins[0].dtype, T, F => {
                let norms = (norm::<T, F>(&ins[2]), norm::<T, F>(&ins[3]));
                let in_place = out.ptr() == ins[0].ptr() && !add;
                let base = (!in_place).then(|| ins[0].slice::<T>());
                phase_two::<T, T, T, F>(&p, base, ins[1].slice::<T>(), norms,
                    out.slice_mut::<T>(), add)
            }),
            (Phase::Two(p), true) => {
                let norms = (norm::<f32, f32>(&ins[2]), norm::<f32, f32>(&ins[3]));
                phase_two::<half::f16, f32, f32, f32>(
                    &p,
                    Some(ins[4].slice::<f32>()),
                    ins[1].slice::<f32>(),
                    norms,
                    out.slice_mut::<half::f16>(),
                    add,
                )
            }
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the LAMB phases.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<LambOp>(k);
}
