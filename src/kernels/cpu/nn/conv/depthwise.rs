//! The forward pass of a convolution whose groups each read one input channel (a
//! depthwise convolution, as in MobileNet), computed directly: every output plane is a
//! sum of shifted, scaled rows of its channel, with no column matrix, which for such
//! convolutions holds as many elements as the products compute.

use super::layer::Forward;
use crate::kernels::cpu::map::pool_shares_work;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::op::nn::convolution::Plan;
use rayon::prelude::*;

/// Below this many multiply-adds the planes are computed on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// True if `p` is computed here: one input channel per group, and a 1-D or 2-D window.
pub fn applies(p: &Plan) -> bool {
    p.geom.channels == p.groups && p.geom.output[0] == 1 && p.geom.input[0] == 1
}

/// `y (=|+=) conv(x, w) + b` for a plan that [`applies`].
pub fn forward<T: Num>(p: &Plan, a: Forward<'_, T>) {
    let Forward { x, w, bias, y, add } = a;
    let [_, oh, ow] = p.geom.output;
    let [_, ih, iw] = p.geom.input;
    let (cols, plane_in) = (oh * ow, ih * iw);
    if cols == 0 {
        return;
    }
    let per_group = p.filters / p.groups;
    let taps = p.geom.win.taps();
    let planes = p.batch * p.filters;
    let runs = |first: usize, ys: &mut [T]| {
        let mut bufs = Buffers::new(p);
        for (k, out) in ys.chunks_mut(cols).enumerate() {
            let plane = first + k;
            let (n, f) = (plane / p.filters, plane % p.filters);
            let c = f / per_group;
            let x = &x[(n * p.groups + c) * plane_in..][..plane_in];
            let w = &w[f * taps..(f + 1) * taps];
            let b = bias.map_or(T::ZERO, |b| b[f]);
            vectorized(
                #[inline(always)]
                || bufs.plane(p, x, w, b, out, add),
            );
        }
    };
    let threads = rayon::current_num_threads();
    if planes * cols * taps > PAR_WORK && planes > 1 && pool_shares_work() {
        let chunk = planes.div_ceil(threads * 4);
        y.par_chunks_mut(chunk * cols)
            .enumerate()
            .for_each(|(i, ys)| runs(i * chunk, ys));
    } else {
        runs(0, y);
    }
}

/// Working memory for the planes of one thread.
enum Buffers<T> {
    /// Unit stride: the input plane with its padding (and one window's width more, all
    /// zero, so that every tap reads one flat run), and the output rows at the padded
    /// width.
    Padded { input: Vec<T>, output: Vec<T> },
    /// Other strides: the valid output columns and input offset of each tap across, and
    /// one output row.
    Rows {
        across: Vec<(usize, usize, isize)>,
        row: Vec<T>,
    },
}

impl<T: Num> Buffers<T> {
    fn new(p: &Plan) -> Self {
        let g = &p.geom;
        let [_, ih, iw] = g.input;
        let [_, oh, ow] = g.output;
        if g.win.stride[1] == 1 && g.win.stride[2] == 1 {
            let pw = iw + 2 * g.win.pad[2];
            let ph = ih + 2 * g.win.pad[1];
            Buffers::Padded {
                input: vec![T::ZERO; ph * pw + g.win.span(2)],
                output: vec![T::ZERO; oh * pw],
            }
        } else {
            Buffers::Rows {
                across: (0..g.win.kernel[2]).map(|t| g.valid(2, t)).collect(),
                row: vec![T::ZERO; ow],
            }
        }
    }

    /// One output plane from input plane `x`, filter `w` and bias `b`, written or added.
    #[inline(always)]
    fn plane(&mut self, p: &Plan, x: &[T], w: &[T], b: T, out: &mut [T], add: bool) {
        let g = &p.geom;
        let [_, kh, kw] = g.win.kernel;
        let [_, ih, iw] = g.input;
        let [_, _, ow] = g.output;
        match self {
            Buffers::Padded { input, output } => {
                // Output (y, x) reads padded input (y + ty·dh, x + tx·dw): with rows at the
                // padded width, each tap adds one flat run of the padded plane.
                let (pt, pl) = (g.win.pad[1], g.win.pad[2]);
                let pw = iw + 2 * pl;
                for (r, line) in x.chunks_exact(iw).enumerate() {
                    input[(r + pt) * pw + pl..][..iw].copy_from_slice(line);
                }
                output.fill(b);
                let len = output.len();
                for ty in 0..kh {
                    for tx in 0..kw {
                        let wv = w[ty * kw + tx];
                        let from = ty * g.win.dilate[1] * pw + tx * g.win.dilate[2];
                        for (o, &v) in output.iter_mut().zip(&input[from..from + len]) {
                            *o = o.add(wv.mul(v));
                        }
                    }
                }
                debug_assert_eq!(ih * iw, x.len());
                for (row, acc) in out.chunks_exact_mut(ow).zip(output.chunks_exact(pw)) {
                    store(row, &acc[..ow], add);
                }
            }
            Buffers::Rows { across, row: acc } => {
                let (sh, sw) = (g.win.stride[1], g.win.stride[2]);
                for (oy, row) in out.chunks_exact_mut(ow).enumerate() {
                    acc.fill(b);
                    for ty in 0..kh {
                        let (y0, y1, yoff) = g.valid(1, ty);
                        if oy < y0 || oy >= y1 {
                            continue;
                        }
                        let iy = ((oy * sh) as isize + yoff) as usize;
                        let line = &x[iy * iw..(iy + 1) * iw];
                        for (tx, &(x0, x1, xoff)) in across.iter().enumerate() {
                            if x0 >= x1 {
                                continue;
                            }
                            let wv = w[ty * kw + tx];
                            let first = ((x0 * sw) as isize + xoff) as usize;
                            for (a, &v) in
                                acc[x0..x1].iter_mut().zip(line[first..].iter().step_by(sw))
                            {
                                *a = a.add(wv.mul(v));
                            }
                        }
                    }
                    store(row, acc, add);
                }
            }
        }
    }
}

/// Writes `v` into `dst`, or adds it.
#[inline(always)]
fn store<T: Num>(dst: &mut [T], v: &[T], add: bool) {
    if add {
        for (o, &a) in dst.iter_mut().zip(v) {
            *o = o.add(a);
        }
    } else {
        dst.copy_from_slice(v);
    }
}
