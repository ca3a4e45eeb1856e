//! One time step of each recurrent cell, element-wise over a batch: the forward from the
//! input's gate pre-activations and the hidden product, and the backward to the gradients
//! of those pre-activations.

use crate::kernels::cpu::fastmath::FastMath;
use crate::op::nn::rnn::RnnMode;
use num_traits::Float;

/// What a step reads and writes, for `n` rows of `h` units (`gh = g·h` gate columns).
pub struct StepFwd<'a, F> {
    /// In: the input's pre-activations with the biases added (`n × gh`); out: the gates
    /// after their activations.
    pub gates: &'a mut [F],
    /// The hidden product `h_prev · Whᵀ` (`n × gh`).
    pub hidden: &'a [F],
    /// The hidden biases (`gh`): GRU adds its candidate's inside the reset gate.
    pub bias_h: &'a [F],
    /// The previous hidden state and (LSTM) cell state (`n × h`).
    pub h_prev: &'a [F],
    pub c_prev: &'a [F],
    /// Out: LSTM's cell state, or GRU's candidate hidden product `Whn·h + bhn` (`n × h`).
    pub extra: &'a mut [F],
    /// Out: the new hidden state (`n × h`).
    pub h: &'a mut [F],
}

/// The cell-state clipping of an LSTM: range and whether a NaN becomes the lower bound.
#[derive(Clone, Copy)]
pub struct Clip<F> {
    pub lo: F,
    pub hi: F,
    pub nan_to_lo: bool,
}

impl<F: Float> Clip<F> {
    #[inline(always)]
    fn apply(&self, c: F) -> F {
        if c.is_nan() {
            return if self.nan_to_lo { self.lo } else { c };
        }
        c.max(self.lo).min(self.hi)
    }

    #[inline(always)]
    fn passes(&self, c: F) -> bool {
        c >= self.lo && c <= self.hi
    }
}

#[inline(always)]
fn sigmoid<F: FastMath>(v: F) -> F {
    v.fast_sigmoid()
}

/// Runs one forward step of `mode` over `n` rows of `h` units.
pub fn forward<F: Float + FastMath>(
    mode: RnnMode,
    n: usize,
    h: usize,
    s: StepFwd<F>,
    clip: Option<Clip<F>>,
) {
    let gh = mode.gates() * h;
    crate::kernels::cpu::simd::vectorized(
        #[inline(always)]
        || {
            for r in 0..n {
                let g = &mut s.gates[r * gh..(r + 1) * gh];
                let q = &s.hidden[r * gh..(r + 1) * gh];
                let (hp, out) = (&s.h_prev[r * h..(r + 1) * h], &mut s.h[r * h..(r + 1) * h]);
                match mode {
                    RnnMode::RnnRelu => {
                        for ((o, a), &b) in out.iter_mut().zip(g.iter_mut()).zip(q) {
                            *a = (*a + b).max(F::zero());
                            *o = *a;
                        }
                    }
                    RnnMode::RnnTanh => {
                        for ((o, a), &b) in out.iter_mut().zip(g.iter_mut()).zip(q) {
                            *a = (*a + b).fast_tanh();
                            *o = *a;
                        }
                    }
                    RnnMode::Lstm => {
                        // Every slice cut to `h` so that the loop carries no bounds checks
                        // and vectorises.
                        let cp = &s.c_prev[r * h..(r + 1) * h];
                        let c = &mut s.extra[r * h..(r + 1) * h];
                        let (gi, rest) = g.split_at_mut(h);
                        let (gf, rest) = rest.split_at_mut(h);
                        let (gg, go) = rest.split_at_mut(h);
                        let go = &mut go[..h];
                        let (qi, qf, qg, qo) =
                            (&q[..h], &q[h..2 * h], &q[2 * h..3 * h], &q[3 * h..4 * h]);
                        let out = &mut out[..h];
                        for j in 0..h {
                            let i = sigmoid(gi[j] + qi[j]);
                            let f = sigmoid(gf[j] + qf[j]);
                            let cand = (gg[j] + qg[j]).fast_tanh();
                            let o = sigmoid(go[j] + qo[j]);
                            let mut cj = f * cp[j] + i * cand;
                            if let Some(cl) = clip {
                                cj = cl.apply(cj);
                            }
                            gi[j] = i;
                            gf[j] = f;
                            gg[j] = cand;
                            go[j] = o;
                            c[j] = cj;
                            out[j] = o * cj.fast_tanh();
                        }
                    }
                    RnnMode::Gru => {
                        let hn = &mut s.extra[r * h..(r + 1) * h];
                        let bn = &s.bias_h[2 * h..3 * h];
                        let (gr, rest) = g.split_at_mut(h);
                        let (gz, gn) = rest.split_at_mut(h);
                        let gn = &mut gn[..h];
                        let (qr, qz, qn) = (&q[..h], &q[h..2 * h], &q[2 * h..3 * h]);
                        let (hp, out) = (&hp[..h], &mut out[..h]);
                        for j in 0..h {
                            let rg = sigmoid(gr[j] + qr[j]);
                            let z = sigmoid(gz[j] + qz[j]);
                            let hnj = qn[j] + bn[j];
                            let cand = (gn[j] + rg * hnj).fast_tanh();
                            gr[j] = rg;
                            gz[j] = z;
                            gn[j] = cand;
                            hn[j] = hnj;
                            out[j] = (F::one() - z) * cand + z * hp[j];
                        }
                    }
                }
            }
        },
    )
}

/// What a backward step reads and writes.
pub struct StepBwd<'a, F> {
    /// The gates the forward step left (`n × gh`).
    pub gates: &'a [F],
    /// LSTM's cell state or GRU's candidate hidden product of the step (`n × h`).
    pub extra: &'a [F],
    /// The step's previous hidden and (LSTM) cell state (`n × h`).
    pub h_prev: &'a [F],
    pub c_prev: &'a [F],
    /// The gradient reaching the step's hidden state (`n × h`).
    pub dh: &'a [F],
    /// In: the gradient of the step's cell state from the next step (LSTM); out: that of
    /// the previous cell state.
    pub dc: &'a mut [F],
    /// Out: the gradients of the input's pre-activations (`n × gh`).
    pub dgx: &'a mut [F],
    /// Out: those of the hidden product (`n × gh`); GRU's differ from `dgx` in the
    /// candidate's block, the others' equal it and leave this untouched.
    pub dgh: &'a mut [F],
    /// Out: the part of the previous hidden state's gradient that does not go through
    /// the hidden product (GRU's `dh·z`), zero for the others.
    pub dh_direct: &'a mut [F],
}

/// Runs one backward step of `mode` over `n` rows of `h` units.
pub fn backward<F: Float + FastMath>(
    mode: RnnMode,
    n: usize,
    h: usize,
    s: StepBwd<F>,
    clip: Option<Clip<F>>,
) {
    let gh = mode.gates() * h;
    let one = F::one();
    crate::kernels::cpu::simd::vectorized(
        #[inline(always)]
        || {
            for r in 0..n {
                let g = &s.gates[r * gh..(r + 1) * gh];
                let d = &mut s.dgx[r * gh..(r + 1) * gh];
                let dh = &s.dh[r * h..(r + 1) * h];
                match mode {
                    RnnMode::RnnRelu => {
                        for ((o, &a), &v) in d.iter_mut().zip(g).zip(dh) {
                            *o = if a > F::zero() { v } else { F::zero() };
                        }
                    }
                    RnnMode::RnnTanh => {
                        for ((o, &a), &v) in d.iter_mut().zip(g).zip(dh) {
                            *o = v * (one - a * a);
                        }
                    }
                    RnnMode::Lstm => {
                        let c = &s.extra[r * h..(r + 1) * h];
                        let cp = &s.c_prev[r * h..(r + 1) * h];
                        let dc = &mut s.dc[r * h..(r + 1) * h];
                        let (gi, gf, gg, go) =
                            (&g[..h], &g[h..2 * h], &g[2 * h..3 * h], &g[3 * h..4 * h]);
                        let (di, rest) = d.split_at_mut(h);
                        let (df, rest) = rest.split_at_mut(h);
                        let (dg, dout) = rest.split_at_mut(h);
                        let dout = &mut dout[..h];
                        for j in 0..h {
                            let (i, f, cand, o) = (gi[j], gf[j], gg[j], go[j]);
                            let tc = c[j].fast_tanh();
                            let mut dcj = dc[j] + dh[j] * o * (one - tc * tc);
                            if let Some(cl) = clip {
                                if !cl.passes(f * cp[j] + i * cand) {
                                    dcj = F::zero();
                                }
                            }
                            di[j] = dcj * cand * i * (one - i);
                            df[j] = dcj * cp[j] * f * (one - f);
                            dg[j] = dcj * i * (one - cand * cand);
                            dout[j] = dh[j] * tc * o * (one - o);
                            dc[j] = dcj * f;
                        }
                    }
                    RnnMode::Gru => {
                        let hn = &s.extra[r * h..(r + 1) * h];
                        let hp = &s.h_prev[r * h..(r + 1) * h];
                        let dq = &mut s.dgh[r * gh..(r + 1) * gh];
                        let direct = &mut s.dh_direct[r * h..(r + 1) * h];
                        for j in 0..h {
                            let (rg, z, cand) = (g[j], g[h + j], g[2 * h + j]);
                            let dn = dh[j] * (one - z) * (one - cand * cand);
                            let dr = dn * hn[j] * rg * (one - rg);
                            let dz = dh[j] * (hp[j] - cand) * z * (one - z);
                            d[j] = dr;
                            d[h + j] = dz;
                            d[2 * h + j] = dn;
                            dq[j] = dr;
                            dq[h + j] = dz;
                            dq[2 * h + j] = dn * rg;
                            direct[j] = dh[j] * z;
                        }
                    }
                }
            }
        },
    )
}
