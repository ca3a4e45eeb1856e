//! Softmax and log-softmax along one axis of an array seen as (outer, n, inner), forward
//! and backward, with an optional valid length per position; shared by the softmax ops
//! and the loss layers.

use super::common::{for_chunks, ld, put, st};
use crate::dtype::Element;
use crate::kernels::cpu::num::Num;
use num_traits::Float;

pub use crate::op::nn::softmax::Layout;

impl Layout {
    fn block(&self) -> usize {
        self.n * self.inner
    }
}

/// The settings of one softmax.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub layout: Layout,
    /// Inputs are divided by this before the softmax.
    pub temperature: f64,
    /// Log-softmax instead of softmax.
    pub log: bool,
    /// Valid elements along the axis for each (outer, inner) position; the rest give 0.
    pub lengths: Option<&'a [usize]>,
}

impl Spec<'static> {
    /// A plain softmax over `layout`: no temperature, log or lengths.
    pub fn plain(layout: Layout) -> Self {
        Spec {
            layout,
            temperature: 1.0,
            log: false,
            lengths: None,
        }
    }
}

impl Spec<'_> {
    #[inline(always)]
    fn len(&self, o: usize, i: usize) -> usize {
        self.lengths.map_or(self.layout.n, |l| {
            l[o * self.layout.inner + i].min(self.layout.n)
        })
    }
}

/// `y (=|+=) softmax(x)` (or log-softmax) as `spec` says.
pub fn forward<I: Element, O: Num, F: Float + 'static + Send + Sync>(
    x: &[I],
    y: &mut [O],
    spec: &Spec,
    add: bool,
) {
    let lay = spec.layout;
    if lay.block() == 0 {
        return;
    }
    let t = F::from(spec.temperature).unwrap_or_else(F::nan);
    for_chunks(y, lay.block(), |off, yc| {
        let mut e = vec![F::zero(); lay.block()];
        let mut mx = vec![F::neg_infinity(); lay.inner];
        let mut sum = vec![F::zero(); lay.inner];
        for (b, yb) in yc.chunks_mut(lay.block()).enumerate() {
            let o = off / lay.block() + b;
            let xb = &x[o * lay.block()..(o + 1) * lay.block()];
            if lay.inner == 1 {
                row_forward::<I, O, F>(xb, yb, &mut e, t, spec.log, spec.len(o, 0), add);
                continue;
            }
            mx.fill(F::neg_infinity());
            sum.fill(F::zero());
            let lens: Vec<usize> = (0..lay.inner).map(|i| spec.len(o, i)).collect();
            for j in 0..lay.n {
                let xr = &xb[j * lay.inner..(j + 1) * lay.inner];
                for (i, (m, &v)) in mx.iter_mut().zip(xr).enumerate() {
                    if j < lens[i] {
                        *m = m.max(ld::<I, F>(v) * t.signum());
                    }
                }
            }
            for m in mx.iter_mut() {
                *m = *m * t.signum();
            }
            for j in 0..lay.n {
                let xr = &xb[j * lay.inner..(j + 1) * lay.inner];
                let er = &mut e[j * lay.inner..(j + 1) * lay.inner];
                for i in 0..lay.inner {
                    if j < lens[i] {
                        let z = (ld::<I, F>(xr[i]) - mx[i]) / t;
                        er[i] = z;
                        sum[i] = sum[i] + z.exp();
                    }
                }
            }
            let norm: Vec<F> = sum
                .iter()
                .map(|&s| if spec.log { s.ln() } else { F::one() / s })
                .collect();
            for j in 0..lay.n {
                let er = &e[j * lay.inner..(j + 1) * lay.inner];
                let yr = &mut yb[j * lay.inner..(j + 1) * lay.inner];
                for i in 0..lay.inner {
                    let v = if j >= lens[i] {
                        F::zero()
                    } else if spec.log {
                        er[i] - norm[i]
                    } else {
                        er[i].exp() * norm[i]
                    };
                    put(&mut yr[i], st::<F, O>(v), add);
                }
            }
        }
    });
}

/// One contiguous row of the forward; `e` is scratch of at least the row's length.
#[inline]
fn row_forward<I: Element, O: Num, F: Float + 'static>(
    x: &[I],
    y: &mut [O],
    e: &mut [F],
    t: F,
    log: bool,
    len: usize,
    add: bool,
) {
    // The largest of x / t leads: x's maximum, or its minimum under a negative t (softmin).
    let sgn = t.signum();
    let mut m = F::neg_infinity();
    for &v in &x[..len] {
        m = m.max(ld::<I, F>(v) * sgn);
    }
    let m = m * sgn;
    let mut sum = F::zero();
    if log {
        for (ej, &v) in e.iter_mut().zip(&x[..len]) {
            *ej = (ld::<I, F>(v) - m) / t;
            sum = sum + ej.exp();
        }
        let ls = sum.ln();
        for (yj, &ej) in y.iter_mut().zip(&e[..len]) {
            put(yj, st::<F, O>(ej - ls), add);
        }
    } else {
        for (ej, &v) in e.iter_mut().zip(&x[..len]) {
            *ej = ((ld::<I, F>(v) - m) / t).exp();
            sum = sum + *ej;
        }
        let inv = F::one() / sum;
        for (yj, &ej) in y.iter_mut().zip(&e[..len]) {
            put(yj, st::<F, O>(ej * inv), add);
        }
    }
    for yj in &mut y[len..] {
        put(yj, O::ZERO, add);
    }
}

/// `dx (=|+=)` the gradient of the softmax (or log-softmax) with output `y` and output
/// gradient `g`: `y ⊙ (g − Σ g⊙y) / T`, or `(g − exp(y) Σ g) / T`.
pub fn backward<O: Element, D: Num, F: Float + 'static + Send + Sync>(
    g: &[O],
    y: &[O],
    dx: &mut [D],
    spec: &Spec,
    add: bool,
) {
    let lay = spec.layout;
    if lay.block() == 0 {
        return;
    }
    let inv_t = F::one() / F::from(spec.temperature).unwrap_or_else(F::nan);
    let term = |gv: F, yv: F, s: F| {
        if spec.log {
            (gv - yv.exp() * s) * inv_t
        } else {
            yv * (gv - s) * inv_t
        }
    };
    for_chunks(dx, lay.block(), |off, dc| {
        let mut sum = vec![F::zero(); lay.inner];
        for (b, db) in dc.chunks_mut(lay.block()).enumerate() {
            let o = off / lay.block() + b;
            let r = o * lay.block()..(o + 1) * lay.block();
            let (gb, yb) = (&g[r.clone()], &y[r]);
            sum.fill(F::zero());
            for j in 0..lay.n {
                let row = j * lay.inner..(j + 1) * lay.inner;
                let (gr, yr) = (&gb[row.clone()], &yb[row]);
                for (i, (s, (&gv, &yv))) in sum.iter_mut().zip(gr.iter().zip(yr)).enumerate() {
                    if j < spec.len(o, i) {
                        let gv = ld::<O, F>(gv);
                        *s = *s + if spec.log { gv } else { gv * ld::<O, F>(yv) };
                    }
                }
            }
            for j in 0..lay.n {
                let row = j * lay.inner..(j + 1) * lay.inner;
                let (gr, yr) = (&gb[row.clone()], &yb[row.clone()]);
                let dr = &mut db[row];
                for (i, (d, &s)) in dr.iter_mut().zip(&sum).enumerate() {
                    let v = if j < spec.len(o, i) {
                        term(ld::<O, F>(gr[i]), ld::<O, F>(yr[i]), s)
                    } else {
                        F::zero()
                    };
                    put(d, st::<F, D>(v), add);
                }
            }
        }
    });
}
