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

/// One row of an LSTM step: the gates (`4h`; in: the input's pre-activations, out: the
/// activated gates), the hidden product (`4h`), the previous cell state, and the new cell
/// and hidden states (`h` each).
pub struct LstmFwdRow<'a, F> {
    pub g: &'a mut [F],
    pub q: &'a [F],
    pub cp: &'a [F],
    pub c: &'a mut [F],
    pub out: &'a mut [F],
}

/// One row of a GRU step: the gates (`3h`), the hidden product (`3h`), the candidate's
/// hidden bias, the candidate hidden product out, the previous and the new hidden state.
pub struct GruFwdRow<'a, F> {
    pub g: &'a mut [F],
    pub q: &'a [F],
    pub bn: &'a [F],
    pub hn: &'a mut [F],
    pub hp: &'a [F],
    pub out: &'a mut [F],
}

/// One row of an LSTM backward step: the step's gates, cell state and previous cell
/// state, the hidden state's gradient, the cell state's gradient (in: from the next step,
/// out: the previous cell state's) and the four gates' pre-activation gradients out.
pub struct LstmBwdRow<'a, F> {
    pub g: &'a [F],
    pub c: &'a [F],
    pub cp: &'a [F],
    pub dh: &'a [F],
    pub dc: &'a mut [F],
    pub d: &'a mut [F],
}

/// One row of a GRU backward step: gates, candidate hidden product, previous hidden state
/// and the hidden state's gradient in; the input's and the hidden product's pre-activation
/// gradients and the direct part of the previous state's gradient out.
pub struct GruBwdRow<'a, F> {
    pub g: &'a [F],
    pub hn: &'a [F],
    pub hp: &'a [F],
    pub dh: &'a [F],
    pub d: &'a mut [F],
    pub dq: &'a mut [F],
    pub direct: &'a mut [F],
}

/// Cells computed several units at a time with wide vectors where the type and the CPU
/// allow. Each returns how many leading units of the row (`h` units) it computed; the
/// scalar loops compute the rest.
pub trait WideCell: Sized {
    fn lstm_forward(_h: usize, _row: &mut LstmFwdRow<Self>, _clip: Option<Clip<Self>>) -> usize {
        0
    }
    fn gru_forward(_h: usize, _row: &mut GruFwdRow<Self>) -> usize {
        0
    }
    fn tanh_forward(_g: &mut [Self], _q: &[Self], _out: &mut [Self]) -> usize {
        0
    }
    fn lstm_backward(_h: usize, _row: &mut LstmBwdRow<Self>, _clip: Option<Clip<Self>>) -> usize {
        0
    }
    fn gru_backward(_h: usize, _row: &mut GruBwdRow<Self>) -> usize {
        0
    }
}

impl WideCell for f64 {}

#[cfg(not(target_arch = "x86_64"))]
impl WideCell for f32 {}

// SAFETY (each call): `wide` runs it only where the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
impl WideCell for f32 {
    fn lstm_forward(h: usize, row: &mut LstmFwdRow<f32>, clip: Option<Clip<f32>>) -> usize {
        wide(|| unsafe { super::cell_avx2::lstm_forward(h, row, clip) })
    }
    fn gru_forward(h: usize, row: &mut GruFwdRow<f32>) -> usize {
        wide(|| unsafe { super::cell_avx2::gru_forward(h, row) })
    }
    fn tanh_forward(g: &mut [f32], q: &[f32], out: &mut [f32]) -> usize {
        wide(|| unsafe { super::cell_avx2::tanh_forward(g, q, out) })
    }
    fn lstm_backward(h: usize, row: &mut LstmBwdRow<f32>, clip: Option<Clip<f32>>) -> usize {
        wide(|| unsafe { super::cell_avx2::lstm_backward(h, row, clip) })
    }
    fn gru_backward(h: usize, row: &mut GruBwdRow<f32>) -> usize {
        wide(|| unsafe { super::cell_avx2::gru_backward(h, row) })
    }
}

/// Runs `f` (a call into the AVX2 cells) if the CPU has AVX2 and FMA; 0 units otherwise.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn wide(f: impl FnOnce() -> usize) -> usize {
    if crate::kernels::cpu::vmath::available() {
        f()
    } else {
        0
    }
}

/// The units `from..h` of an LSTM row.
#[inline(always)]
fn lstm_forward_units<F: Float + FastMath>(
    h: usize,
    from: usize,
    r: &mut LstmFwdRow<F>,
    clip: Option<Clip<F>>,
) {
    // Every slice cut to `h` so that the loop carries no bounds checks.
    let (gi, rest) = r.g.split_at_mut(h);
    let (gf, rest) = rest.split_at_mut(h);
    let (gg, go) = rest.split_at_mut(h);
    let go = &mut go[..h];
    let q = r.q;
    let (qi, qf, qg, qo) = (&q[..h], &q[h..2 * h], &q[2 * h..3 * h], &q[3 * h..4 * h]);
    let (cp, c, out) = (&r.cp[..h], &mut r.c[..h], &mut r.out[..h]);
    for j in from..h {
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

/// The units `from..h` of a GRU row.
#[inline(always)]
fn gru_forward_units<F: Float + FastMath>(h: usize, from: usize, r: &mut GruFwdRow<F>) {
    let (gr, rest) = r.g.split_at_mut(h);
    let (gz, gn) = rest.split_at_mut(h);
    let gn = &mut gn[..h];
    let q = r.q;
    let (qr, qz, qn) = (&q[..h], &q[h..2 * h], &q[2 * h..3 * h]);
    let (bn, hn, hp, out) = (&r.bn[..h], &mut r.hn[..h], &r.hp[..h], &mut r.out[..h]);
    for j in from..h {
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

/// Runs one forward step of `mode` over `n` rows of `h` units.
pub fn forward<F: Float + FastMath + WideCell>(
    mode: RnnMode,
    n: usize,
    h: usize,
    s: StepFwd<F>,
    clip: Option<Clip<F>>,
) {
    let gh = mode.gates() * h;
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
                let from = F::tanh_forward(g, q, out);
                for ((o, a), &b) in out.iter_mut().zip(g.iter_mut()).zip(q).skip(from) {
                    *a = (*a + b).fast_tanh();
                    *o = *a;
                }
            }
            RnnMode::Lstm => {
                let mut row = LstmFwdRow {
                    g,
                    q,
                    cp: &s.c_prev[r * h..(r + 1) * h],
                    c: &mut s.extra[r * h..(r + 1) * h],
                    out,
                };
                let from = F::lstm_forward(h, &mut row, clip);
                lstm_forward_units(h, from, &mut row, clip);
            }
            RnnMode::Gru => {
                let mut row = GruFwdRow {
                    g,
                    q,
                    bn: &s.bias_h[2 * h..3 * h],
                    hn: &mut s.extra[r * h..(r + 1) * h],
                    hp,
                    out,
                };
                let from = F::gru_forward(h, &mut row);
                gru_forward_units(h, from, &mut row);
            }
        }
    }
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

/// The units `from..h` of an LSTM backward row.
#[inline(always)]
fn lstm_backward_units<F: Float + FastMath>(
    h: usize,
    from: usize,
    r: &mut LstmBwdRow<F>,
    clip: Option<Clip<F>>,
) {
    let one = F::one();
    let g = r.g;
    let (gi, gf, gg, go) = (&g[..h], &g[h..2 * h], &g[2 * h..3 * h], &g[3 * h..4 * h]);
    let (c, cp, dh, dc) = (&r.c[..h], &r.cp[..h], &r.dh[..h], &mut r.dc[..h]);
    let (di, rest) = r.d.split_at_mut(h);
    let (df, rest) = rest.split_at_mut(h);
    let (dg, dout) = rest.split_at_mut(h);
    let dout = &mut dout[..h];
    for j in from..h {
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

/// The units `from..h` of a GRU backward row.
#[inline(always)]
fn gru_backward_units<F: Float>(h: usize, from: usize, r: &mut GruBwdRow<F>) {
    let one = F::one();
    let g = r.g;
    let (hn, hp, dh, direct) = (&r.hn[..h], &r.hp[..h], &r.dh[..h], &mut r.direct[..h]);
    let (d, dq) = (&mut *r.d, &mut *r.dq);
    for j in from..h {
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

/// Runs one backward step of `mode` over `n` rows of `h` units.
pub fn backward<F: Float + FastMath + WideCell>(
    mode: RnnMode,
    n: usize,
    h: usize,
    s: StepBwd<F>,
    clip: Option<Clip<F>>,
) {
    let gh = mode.gates() * h;
    let one = F::one();
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
                let mut row = LstmBwdRow {
                    g,
                    c: &s.extra[r * h..(r + 1) * h],
                    cp: &s.c_prev[r * h..(r + 1) * h],
                    dh,
                    dc: &mut s.dc[r * h..(r + 1) * h],
                    d,
                };
                let from = F::lstm_backward(h, &mut row, clip);
                lstm_backward_units(h, from, &mut row, clip);
            }
            RnnMode::Gru => {
                let mut row = GruBwdRow {
                    g,
                    hn: &s.extra[r * h..(r + 1) * h],
                    hp: &s.h_prev[r * h..(r + 1) * h],
                    dh,
                    d,
                    dq: &mut s.dgh[r * gh..(r + 1) * gh],
                    direct: &mut s.dh_direct[r * h..(r + 1) * h],
                };
                let from = F::gru_backward(h, &mut row);
                gru_backward_units(h, from, &mut row);
            }
        }
    }
}
