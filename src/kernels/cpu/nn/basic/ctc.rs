//! CPU kernels of `CTCLoss` and its backward: per sequence, the log-softmax of the
//! activations, the forward (alpha) and backward (beta) recursions over the label with
//! blanks between its symbols, in log space, the negative log-likelihood and the gradient
//! with respect to the activations (softmax minus the posterior occupancy of each class).

use super::common::{ld, put, st};
use crate::dispatch_float;
use crate::dispatch_num;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::ctc_loss::{CtcLoss, CtcLossBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::{Float, Zero};
use rayon::prelude::*;

/// `log(exp(a) + exp(b))` without overflow; `-inf` is the empty sum.
#[inline]
fn log_plus<F: Float>(a: F, b: F) -> F {
    if a == F::neg_infinity() {
        b
    } else if b == F::neg_infinity() {
        a
    } else {
        a.max(b) + (-(a - b).abs()).exp().ln_1p()
    }
}

/// The values of a numeric blob as `f64`.
fn values(b: &TBlob) -> Result<Vec<f64>> {
    Ok(dispatch_num!(NAME, b.dtype, T => b.slice::<T>().iter().map(|v| v.to_f64()).collect()))
}

/// The loss of one sequence from its log-probabilities `lp` (`steps` rows of `classes`),
/// and, into `grad` (same layout) when given, the gradient with respect to the
/// activations. A label that cannot fit the steps (its length plus its repeated neighbours
/// exceeds them) has loss 0 and a zero gradient, as MXNet gives.
fn sequence_loss<F: Float>(
    lp: &[F],
    classes: usize,
    labels: &[usize],
    blank: usize,
    grad: Option<&mut [F]>,
) -> F {
    let steps = lp.len() / classes;
    let n = labels.len();
    let repeats = labels.windows(2).filter(|w| w[0] == w[1]).count();
    if n + repeats > steps || steps == 0 {
        if let Some(g) = grad {
            g.fill(F::zero());
        }
        return F::zero();
    }
    let s_len = 2 * n + 1;
    let z: Vec<usize> = (0..s_len)
        .map(|s| if s % 2 == 0 { blank } else { labels[s / 2] })
        .collect();
    // A symbol may follow the one two states back directly, unless it is a blank or
    // repeats it.
    let skips = |s: usize| s >= 2 && z[s] != blank && z[s] != z[s - 2];
    let ninf = F::neg_infinity();
    let mut alpha = vec![ninf; steps * s_len];
    alpha[0] = lp[blank];
    if n > 0 {
        alpha[1] = lp[z[1]];
    }
    for t in 1..steps {
        let (prev, cur) = alpha.split_at_mut(t * s_len);
        let prev = &prev[(t - 1) * s_len..];
        for s in 0..s_len {
            let mut v = prev[s];
            if s >= 1 {
                v = log_plus(v, prev[s - 1]);
            }
            if skips(s) {
                v = log_plus(v, prev[s - 2]);
            }
            cur[s] = v + lp[t * classes + z[s]];
        }
    }
    let last = &alpha[(steps - 1) * s_len..];
    let log_p = if n > 0 {
        log_plus(last[s_len - 1], last[s_len - 2])
    } else {
        last[0]
    };
    let Some(grad) = grad else {
        return -log_p;
    };
    let mut beta = vec![ninf; steps * s_len];
    beta[(steps - 1) * s_len + s_len - 1] = lp[(steps - 1) * classes + blank];
    if n > 0 {
        beta[(steps - 1) * s_len + s_len - 2] = lp[(steps - 1) * classes + z[s_len - 2]];
    }
    for t in (0..steps - 1).rev() {
        let (cur, next) = beta.split_at_mut((t + 1) * s_len);
        let cur = &mut cur[t * s_len..];
        for s in 0..s_len {
            let mut v = next[s];
            if s + 1 < s_len {
                v = log_plus(v, next[s + 1]);
            }
            if s + 2 < s_len && skips(s + 2) {
                v = log_plus(v, next[s + 2]);
            }
            cur[s] = v + lp[t * classes + z[s]];
        }
    }
    let mut occupancy = vec![ninf; classes];
    for t in 0..steps {
        occupancy.fill(ninf);
        for s in 0..s_len {
            let k = z[s];
            occupancy[k] = log_plus(occupancy[k], alpha[t * s_len + s] + beta[t * s_len + s]);
        }
        for k in 0..classes {
            let l = lp[t * classes + k];
            let o = occupancy[k];
            let posterior = if o == ninf {
                F::zero()
            } else {
                (o - l - log_p).exp()
            };
            grad[t * classes + k] = l.exp() - posterior;
        }
    }
    -log_p
}

/// The log-softmax of `row` into `out`.
fn log_softmax<F: Float>(row: impl Iterator<Item = F> + Clone, out: &mut [F]) {
    let max = row.clone().fold(F::neg_infinity(), F::max);
    let sum = row.clone().fold(F::zero(), |a, v| a + (v - max).exp());
    let log_sum = sum.ln();
    for (o, v) in out.iter_mut().zip(row) {
        *o = v - max - log_sum;
    }
}

impl CpuKernel for CtcLoss {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let want_grad = io.req[1] != OpReq::Null;
        if io.req[0] == OpReq::Null && !want_grad {
            return Ok(());
        }
        let data = &io.inputs[0];
        let (batch, classes) = (data.shape[1], data.shape[2]);
        let lengths = |i: Option<usize>| i.map(|i| values(&io.inputs[i])).transpose();
        let seqs = self.sequences(
            &data.shape,
            &values(&io.inputs[1])?,
            lengths(self.use_data_lengths.then_some(2))?.as_deref(),
            lengths(self.label_lengths_input())?.as_deref(),
        )?;
        let blank = self.blank(classes);
        dispatch_float!(NAME, data.dtype, T, F => {
            let d = data.slice::<T>();
            let results: Vec<(F, Vec<F>)> = seqs
                .par_iter()
                .enumerate()
                .map(|(n, seq)| {
                    let mut lp = vec![F::zero(); seq.steps * classes];
                    for (t, out) in lp.chunks_mut(classes.max(1)).enumerate() {
                        let at = (t * batch + n) * classes;
                        log_softmax(d[at..at + classes].iter().map(|&v| ld::<T, F>(v)), out);
                    }
                    let mut g = if want_grad { vec![F::zero(); lp.len()] } else { Vec::new() };
                    let loss = sequence_loss(&lp, classes, &seq.labels, blank, want_grad.then_some(&mut g[..]));
                    (loss, g)
                })
                .collect();
            if io.req[0] != OpReq::Null {
                let add = io.req[0] == OpReq::Add;
                let loss = io.outputs[0].slice_mut::<T>();
                for (o, (l, _)) in loss.iter_mut().zip(&results) {
                    put(o, st::<F, T>(*l), add);
                }
            }
            if want_grad {
                let grad = io.outputs[1].slice_mut::<T>();
                grad.fill(T::ZERO);
                for (n, (_, g)) in results.iter().enumerate() {
                    for (t, row) in g.chunks(classes.max(1)).enumerate() {
                        let at = (t * batch + n) * classes;
                        for (o, &v) in grad[at..at + classes].iter_mut().zip(row) {
                            *o = st::<F, T>(v);
                        }
                    }
                }
            }
        });
        Ok(())
    }
}

impl CpuKernel for CtcLossBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let add = req == OpReq::Add;
        let (og, g, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (batch, classes) = (g.shape[1], g.shape[2]);
        dispatch_float!(self.name(), out.dtype, T, F => {
            let (og, g) = (og.slice::<T>(), g.slice::<T>());
            for (i, o) in out.slice_mut::<T>().iter_mut().enumerate() {
                let scale = ld::<T, F>(og[(i / classes.max(1)) % batch.max(1)]);
                put(o, st::<F, T>(scale * ld::<T, F>(g[i])), add);
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of `CTCLoss`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<CtcLoss>(k);
    cpu::add::<CtcLossBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CTC loss by brute force: minus the log of the summed probabilities of every
    /// path that collapses to the label.
    fn brute_force(probs: &[f64], classes: usize, labels: &[usize], blank: usize) -> f64 {
        let steps = probs.len() / classes;
        let mut total = 0.0;
        let paths = classes.pow(steps as u32);
        for code in 0..paths {
            let mut path = Vec::with_capacity(steps);
            let mut c = code;
            for _ in 0..steps {
                path.push(c % classes);
                c /= classes;
            }
            let mut collapsed = Vec::new();
            let mut prev = None;
            for &k in &path {
                if Some(k) != prev && k != blank {
                    collapsed.push(k);
                }
                prev = Some(k);
            }
            if collapsed == labels {
                total += path
                    .iter()
                    .enumerate()
                    .map(|(t, &k)| probs[t * classes + k])
                    .product::<f64>();
            }
        }
        -total.ln()
    }

    #[test]
    fn the_loss_sums_every_path_and_the_gradient_is_its_derivative() {
        let (steps, classes) = (4, 3);
        let acts: Vec<f64> = (0..steps * classes)
            .map(|i| ((i * 7 % 5) as f64 - 2.0) * 0.6)
            .collect();
        let lp_of = |acts: &[f64]| -> Vec<f64> {
            let mut lp = vec![0.0; acts.len()];
            for (row, out) in acts.chunks(classes).zip(lp.chunks_mut(classes)) {
                log_softmax(row.iter().copied(), out);
            }
            lp
        };
        for labels in [vec![1, 2], vec![1, 1], vec![2], vec![]] {
            let lp = lp_of(&acts);
            let mut grad = vec![0.0; lp.len()];
            let loss = sequence_loss(&lp, classes, &labels, 0, Some(&mut grad));
            let probs: Vec<f64> = lp.iter().map(|v| v.exp()).collect();
            let want = brute_force(&probs, classes, &labels, 0);
            assert!((loss - want).abs() < 1e-12, "{labels:?}: {loss} vs {want}");
            for i in 0..acts.len() {
                let mut bumped = acts.clone();
                bumped[i] += 1e-6;
                let up = sequence_loss(&lp_of(&bumped), classes, &labels, 0, None);
                let numeric = (up - loss) / 1e-6;
                assert!(
                    (numeric - grad[i]).abs() < 1e-4,
                    "{labels:?} {i}: {numeric} vs {}",
                    grad[i]
                );
            }
        }
    }

    #[test]
    fn a_label_that_cannot_fit_has_zero_loss_and_gradient() {
        let lp = vec![-(2f64.ln()); 4];
        let mut grad = vec![1.0; 4];
        // Two equal symbols need a blank between them: three steps, only two given.
        assert_eq!(sequence_loss(&lp, 2, &[1, 1], 0, Some(&mut grad)), 0.0);
        assert!(grad.iter().all(|&g| g == 0.0));
    }
}
