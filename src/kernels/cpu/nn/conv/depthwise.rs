//! The forward pass of a convolution whose groups each read one input channel (a
//! depthwise convolution, as in MobileNet), computed directly: every output plane is a
//! sum of shifted, scaled copies of its channel, with no column matrix, which for such
//! convolutions holds as many elements as the products compute.
//!
//! Each input plane is copied once, padded, into one plane per phase of the stride (rows
//! `qy, qy + sh, …` and columns `qx, qx + sw, …` of the padded input), so that output
//! `(oy, ox)` of tap `(ty, tx)` reads phase `(ty·dh mod sh, tx·dw mod sw)` at
//! `(oy + ty·dh div sh, ox + tx·dw div sw)`. With the output computed at the phases' row
//! width (the columns past the output's width are computed and dropped), every tap reads
//! one flat run of a phase, whatever the plane's size: in float32 and float64 a few
//! vectors of output accumulate all the taps in registers before being stored.

use super::epilogue::Epilogue;
use super::layer::Forward;
use super::wide::{self, Wide};
use crate::kernels::cpu::map::pool_shares_work;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::op::nn::convolution::Plan;
use pulp::{Simd, WithSimd};
use rayon::prelude::*;

/// Below this many multiply-adds the planes are computed on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// Output vectors one pass over the taps accumulates in registers.
const BLOCK: usize = 4;

/// The widest vector, in elements of any type, that a run of outputs is rounded up to.
const MAX_RUN: usize = BLOCK * 16;

/// True if `p` is computed here: one input channel per group, and a 1-D or 2-D window.
pub fn applies(p: &Plan) -> bool {
    p.geom.channels == p.groups && p.geom.output[0] == 1 && p.geom.input[0] == 1
}

/// `y (=|+=) post(conv(x, w))` for a plan that [`applies`].
pub fn forward<T: Num>(p: &Plan, a: Forward<'_, T>) {
    let Forward {
        x, w, post, y, add, ..
    } = a;
    assert!(
        !add || post.is_bias_only(),
        "Convolution: an epilogue over added outputs"
    );
    let [_, oh, ow] = p.geom.output;
    let cols = oh * ow;
    if cols == 0 {
        return;
    }
    let phases = Phases::of(p);
    assert!(
        x.len() >= p.batch * p.groups * phases.ih * phases.iw
            && y.len() >= p.batch * p.filters * cols,
        "Convolution: arrays smaller than the plan"
    );
    let planes = p.batch * p.filters;
    let runs = |first: usize, ys: &mut [T]| {
        let job = Planes {
            p,
            ph: &phases,
            x,
            w,
            post,
            ys,
            first,
            add,
        };
        if job.is::<f32>() {
            return pulp::Arch::new().dispatch(job.cast::<f32>());
        }
        if job.is::<f64>() {
            return pulp::Arch::new().dispatch(job.cast::<f64>());
        }
        vectorized(
            #[inline(always)]
            || job.scalar(),
        );
    };
    let threads = rayon::current_num_threads();
    if planes * cols * p.geom.win.taps() > PAR_WORK && planes > 1 && pool_shares_work() {
        let chunk = planes.div_ceil(threads * 4);
        y.par_chunks_mut(chunk * cols)
            .enumerate()
            .for_each(|(i, ys)| runs(i * chunk, ys));
    } else {
        runs(0, &mut y[..planes * cols]);
    }
}

/// The phase planes' layout, the same for every plane of a pass.
struct Phases {
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    sh: usize,
    sw: usize,
    pad_left: usize,
    /// Rows and columns of each phase plane.
    rows: usize,
    width: usize,
    /// Elements of each phase plane, with slack for the reads of the last run.
    len: usize,
    /// Outputs computed per plane: `oh` rows at the phases' width, rounded up to runs.
    computed: usize,
    /// Each phase row's image rows: `(first phase row, end, first image row)`.
    image_rows: Vec<(usize, usize, usize)>,
    /// Each phase column's image columns likewise.
    image_cols: Vec<(usize, usize, usize)>,
    /// Each tap's offset into the phases, in order `ty·kw + tx`.
    taps: Vec<usize>,
}

impl Phases {
    fn of(p: &Plan) -> Phases {
        let g = &p.geom;
        let [_, kh, kw] = g.win.kernel;
        let [_, sh, sw] = g.win.stride;
        let [_, dh, dw] = g.win.dilate;
        let [_, pt, pl] = g.win.pad;
        let [_, ih, iw] = g.input;
        let [_, oh, ow] = g.output;
        let (reach_y, reach_x) = ((kh - 1) * dh / sh, (kw - 1) * dw / sw);
        let (rows, width) = (oh + reach_y, ow + reach_x);
        let computed = (oh * width).div_ceil(MAX_RUN) * MAX_RUN;
        let len = (rows * width).max(reach_y * width + reach_x + computed);
        // Phase `q` index `j` is padded index `q + j·s`, image index `q + j·s − pad`.
        let image = |q: usize, s: usize, pad: usize, size: usize, count: usize| {
            let j0 = pad.saturating_sub(q).div_ceil(s);
            let j1 = (pad + size).saturating_sub(q).div_ceil(s).min(count);
            let j1 = j1.max(j0);
            (j0, j1, (q + j0 * s).saturating_sub(pad))
        };
        let taps = (0..kh)
            .flat_map(|ty| (0..kw).map(move |tx| (ty, tx)))
            .map(|(ty, tx)| {
                let phase = (ty * dh % sh) * sw + tx * dw % sw;
                phase * len + (ty * dh / sh) * width + tx * dw / sw
            })
            .collect();
        Phases {
            ih,
            iw,
            oh,
            ow,
            sh,
            sw,
            pad_left: pl,
            rows,
            width,
            len,
            computed,
            image_rows: (0..sh).map(|q| image(q, sh, pt, ih, rows)).collect(),
            image_cols: (0..sw).map(|q| image(q, sw, pl, iw, width)).collect(),
            taps,
        }
    }

    /// Copies the image plane `x` into the phases; the padding there stays as it was
    /// (zero, as the buffer was made).
    #[inline(always)]
    fn fill<T: Copy>(&self, x: &[T], phases: &mut [T]) {
        let (sh, sw, iw) = (self.sh, self.sw, self.iw);
        let row_len = self.rows * self.width;
        for (qy, &(i0, i1, r0)) in self.image_rows.iter().enumerate() {
            for (k, i) in (i0..i1).enumerate() {
                let src = &x[(r0 + k * sh) * iw..][..iw];
                if sw == 2 {
                    self.fill_pairs(src, phases, qy, i);
                    continue;
                }
                for (qx, &(j0, j1, c0)) in self.image_cols.iter().enumerate() {
                    let phase = &mut phases[(qy * sw + qx) * self.len..][..row_len];
                    let dst = &mut phase[i * self.width..][j0..j1];
                    if sw == 1 {
                        dst.copy_from_slice(&src[c0..c0 + (j1 - j0)]);
                    } else {
                        for (d, s) in dst.iter_mut().zip(src[c0..].iter().step_by(sw)) {
                            *d = *s;
                        }
                    }
                }
            }
        }
    }

    /// Row `i` of phases `(qy, 0)` and `(qy, 1)` from image row `src`, at a column stride
    /// of 2: each pair of image columns goes one to each phase, in one loop that the
    /// compiler vectorises as an interleaved load.
    #[inline(always)]
    fn fill_pairs<T: Copy>(&self, src: &[T], phases: &mut [T], qy: usize, i: usize) {
        // Image column `c` is padded column `c + pl`: phase `(c + pl) mod 2`, index
        // `(c + pl) div 2`.
        let pad = self.pad_left;
        let (even_phase, even_at) = (pad % 2, pad / 2);
        let (odd_phase, odd_at) = ((pad + 1) % 2, pad.div_ceil(2));
        let w = self.width;
        let plane = |q: usize| (qy * 2 + q) * self.len + i * w;
        let (a, b) = (plane(even_phase), plane(odd_phase));
        let (lo, hi) = phases.split_at_mut(a.max(b));
        let (even, odd) = if a < b {
            (&mut lo[a..a + w], &mut hi[..w])
        } else {
            (&mut hi[..w], &mut lo[b..b + w])
        };
        let pairs = (src.len() / 2)
            .min(w.saturating_sub(even_at))
            .min(w.saturating_sub(odd_at));
        for ((pair, e), o) in src
            .chunks_exact(2)
            .zip(&mut even[even_at..even_at + pairs])
            .zip(&mut odd[odd_at..odd_at + pairs])
        {
            *e = pair[0];
            *o = pair[1];
        }
        for (c, &v) in src.iter().enumerate().skip(2 * pairs) {
            let (row, at) = if c % 2 == 0 {
                (&mut *even, even_at + c / 2)
            } else {
                (&mut *odd, odd_at + c / 2)
            };
            if at < w {
                row[at] = v;
            }
        }
    }

    /// Writes (or adds) the output rows of a computed plane into `out`, dropping the
    /// columns past the output's width.
    #[inline(always)]
    fn store<T: Num>(&self, computed: &[T], out: &mut [T], add: bool) {
        for (row, acc) in out
            .chunks_exact_mut(self.ow)
            .zip(computed.chunks(self.width))
        {
            if add {
                for (o, &a) in row.iter_mut().zip(acc) {
                    *o = o.add(a);
                }
            } else {
                row.copy_from_slice(&acc[..self.ow]);
            }
        }
    }
}

/// The output planes `first..` (as many as `ys` holds) of one thread.
struct Planes<'a, T> {
    p: &'a Plan,
    ph: &'a Phases,
    x: &'a [T],
    w: &'a [T],
    post: Epilogue<'a, T>,
    ys: &'a mut [T],
    first: usize,
    add: bool,
}

impl<'a, T: Num> Planes<'a, T> {
    /// True if `T` is `E`.
    fn is<E: Num>(&self) -> bool {
        wide::cast::<T, E>(self.x).is_some()
    }

    /// The same job over `E`, which is `T`.
    fn cast<E: Num>(self) -> Planes<'a, E> {
        let slice = |s: Option<&'a [T]>| s.map(|s| wide::cast::<T, E>(s).expect("one type"));
        let Planes {
            p,
            ph,
            x,
            w,
            post,
            ys,
            first,
            add,
        } = self;
        Planes {
            p,
            ph,
            x: wide::cast::<T, E>(x).expect("one type"),
            w: wide::cast::<T, E>(w).expect("one type"),
            post: Epilogue {
                scale: slice(post.scale),
                shift: slice(post.shift),
                residual: slice(post.residual),
                relu: post.relu,
            },
            ys: wide::cast_mut::<T, E>(ys).expect("one type"),
            first,
            add,
        }
    }

    /// Plane `plane`'s input channel and filter taps.
    fn inputs(&self, plane: usize) -> (&'a [T], &'a [T], usize) {
        let p = self.p;
        let (n, f) = (plane / p.filters, plane % p.filters);
        let c = f / (p.filters / p.groups);
        let plane_in = self.ph.ih * self.ph.iw;
        let taps = self.ph.taps.len();
        let x = &self.x[(n * p.groups + c) * plane_in..][..plane_in];
        (x, &self.w[f * taps..(f + 1) * taps], f)
    }

    /// Every plane, for element types without explicit vectors.
    #[inline(always)]
    fn scalar(mut self) {
        let ph = self.ph;
        let ys = std::mem::take(&mut self.ys);
        let cols = ph.oh * ph.ow;
        let mut phases = vec![T::ZERO; ph.sh * ph.sw * ph.len];
        let mut acc = vec![T::ZERO; ph.computed];
        let first = self.first;
        for (k, out) in ys.chunks_mut(cols).enumerate() {
            let (x, w, f) = self.inputs(first + k);
            ph.fill(x, &mut phases);
            acc.fill(T::ZERO);
            for (&at, &wv) in ph.taps.iter().zip(w) {
                for (a, &v) in acc.iter_mut().zip(&phases[at..at + ph.computed]) {
                    *a = a.add(wv.mul(v));
                }
            }
            ph.store(&acc, out, self.add);
            self.post.apply(f, (first + k) * cols, out);
        }
    }
}

impl<E: Wide + Num> WithSimd for Planes<'_, E> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(mut self, s: S) {
        let ph = self.ph;
        let ys = std::mem::take(&mut self.ys);
        let cols = ph.oh * ph.ow;
        let wd = E::width::<S>();
        let run = BLOCK * wd;
        debug_assert!(run <= MAX_RUN && ph.computed.is_multiple_of(run));
        let mut phases = vec![E::ZERO; ph.sh * ph.sw * ph.len];
        let mut acc = vec![E::ZERO; ph.computed];
        let mut taps: Vec<(usize, E::V<S>)> = Vec::with_capacity(ph.taps.len());
        let first = self.first;
        for (k, out) in ys.chunks_mut(cols).enumerate() {
            let (x, w, f) = self.inputs(first + k);
            ph.fill(x, &mut phases);
            taps.clear();
            taps.extend(
                ph.taps
                    .iter()
                    .zip(w)
                    .map(|(&at, &wv)| (at, E::splat(s, wv))),
            );
            for (i0, dst) in (0..ph.computed).step_by(run).zip(acc.chunks_exact_mut(run)) {
                let mut sums = [E::splat(s, E::ZERO); BLOCK];
                for &(at, wv) in &taps {
                    let src = &phases[at + i0..at + i0 + run];
                    for (u, a) in sums.iter_mut().enumerate() {
                        *a = E::mul_add(s, wv, wide::load::<E, S>(&src[u * wd..]), *a);
                    }
                }
                for (u, a) in sums.into_iter().enumerate() {
                    wide::store::<E, S>(&mut dst[u * wd..], a);
                }
            }
            ph.store(&acc, out, self.add);
            self.post.apply_in(s, f, (first + k) * cols, out);
        }
    }
}
