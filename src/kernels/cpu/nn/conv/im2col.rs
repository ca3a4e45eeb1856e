//! Unfolding an image into the column matrix of its sliding windows (`im2col`) and the
//! adjoint folding that adds columns back into an image (`col2im`).
//!
//! The column matrix has one row per (channel, kernel tap) and one column per output
//! position; padded taps read zero.

use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::op::nn::geometry::volume;
pub use crate::op::nn::geometry::ColGeom;
use std::ops::Range;

impl ColGeom {
    /// For kernel tap `t` along dimension `dim`: the range of output positions whose input
    /// coordinate `o * stride + t * dilate - pad` lies inside the input, and the offset
    /// `t * dilate - pad`.
    pub(super) fn valid(&self, dim: usize, t: usize) -> (usize, usize, isize) {
        let w = &self.win;
        let off = (t * w.dilate[dim]) as isize - w.pad[dim] as isize;
        let s = w.stride[dim] as isize;
        let n_in = self.input[dim] as isize;
        let n_out = self.output[dim] as isize;
        // Smallest o with o*s + off >= 0, largest with o*s + off <= n_in - 1.
        let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
        let hi = if n_in - 1 - off < 0 {
            0
        } else {
            ((n_in - 1 - off) / s + 1).min(n_out)
        };
        let lo = lo.min(n_out);
        (lo as usize, (hi.max(lo)) as usize, off)
    }

    /// Calls `f(row, tap ranges)` for every row of the column matrix: the channel, and
    /// for each dimension the valid output range and input offset of the row's tap.
    #[inline(always)]
    fn for_each_row(&self, mut f: impl FnMut(usize, usize, [(usize, usize, isize); 3])) {
        let k = self.win.kernel;
        let mut row = 0;
        for c in 0..self.channels {
            for kd in 0..k[0] {
                let vd = self.valid(0, kd);
                for kh in 0..k[1] {
                    let vh = self.valid(1, kh);
                    for kw in 0..k[2] {
                        f(row, c, [vd, vh, self.valid(2, kw)]);
                        row += 1;
                    }
                }
            }
        }
    }
}

/// Copies `n` elements from `s` to `d` inline: the runs of an image row that the column
/// matrix is made of are short, and a call to `memcpy` per run costs more than the copy.
///
/// # Safety
/// `s` and `d` address `n` readable and writable elements that do not overlap.
#[inline(always)]
unsafe fn copy_run<T: Copy>(d: *mut T, s: *const T, n: usize) {
    const BLOCK: usize = 8;
    if n < BLOCK {
        for j in 0..n {
            d.add(j).write(s.add(j).read());
        }
        return;
    }
    let block = |j: usize| {
        d.add(j)
            .cast::<[T; BLOCK]>()
            .write_unaligned(s.add(j).cast::<[T; BLOCK]>().read_unaligned())
    };
    let mut j = 0;
    while j + BLOCK <= n {
        block(j);
        j += BLOCK;
    }
    if j < n {
        // The last block overlaps the one before: same values, written twice.
        block(n - BLOCK);
    }
}

/// Adds `n` elements of `s` into `d` in whole blocks of 8 and then one by one: the runs
/// are short, and a loop over the CPU's full vector width would leave them all to its
/// scalar remainder.
///
/// # Safety
/// As [`copy_run`].
#[inline(always)]
unsafe fn add_run<T: Num>(d: *mut T, s: *const T, n: usize) {
    const BLOCK: usize = 8;
    let mut j = 0;
    while j + BLOCK <= n {
        let mut acc = d.add(j).cast::<[T; BLOCK]>().read_unaligned();
        let v = s.add(j).cast::<[T; BLOCK]>().read_unaligned();
        for i in 0..BLOCK {
            acc[i] = acc[i].add(v[i]);
        }
        d.add(j).cast::<[T; BLOCK]>().write_unaligned(acc);
        j += BLOCK;
    }
    for j in j..n {
        d.add(j).write(d.add(j).read().add(s.add(j).read()));
    }
}

/// Where one row of the column matrix meets one depth slice of the image: the output
/// lines `h0..h1` whose taps fall inside the image, and in each, the output columns
/// `w0..w1` that do, reading the image from `first` (an offset in the slice) on, `step`
/// elements further per line and `stride` per column.
#[derive(Clone, Copy)]
struct Lines {
    h0: usize,
    h1: usize,
    w0: usize,
    w1: usize,
    first: usize,
    step: usize,
    stride: usize,
}

impl Lines {
    fn new(
        g: &ColGeom,
        (h0, h1, hoff): (usize, usize, isize),
        (w0, w1, woff): (usize, usize, isize),
    ) -> Self {
        let s = g.win.stride;
        let iw = g.input[2];
        let zy = (h0 * s[1]) as isize + hoff;
        let zx = (w0 * s[2]) as isize + woff;
        Lines {
            h0,
            h1,
            w0,
            w1,
            first: (zy.max(0) as usize) * iw + zx.max(0) as usize,
            step: s[1] * iw,
            stride: s[2],
        }
    }

    fn is_empty(&self) -> bool {
        self.h0 == self.h1 || self.w0 == self.w1
    }

    /// The lines `a..b`, a non-empty part of `h0..h1`.
    fn within(&self, a: usize, b: usize) -> Lines {
        debug_assert!(self.h0 <= a && a < b && b <= self.h1);
        Lines {
            h0: a,
            h1: b,
            first: self.first + (a - self.h0) * self.step,
            ..*self
        }
    }

    /// Checks that every element the lines address lies within `image` (one depth
    /// slice) and `slab` (`oh × ow` outputs), so that the loops over them may skip it.
    fn check(&self, image: usize, slab: usize, ow: usize) {
        let (lines, n) = (self.h1 - self.h0, self.w1 - self.w0);
        let last_read = self.first + (lines - 1) * self.step + (n - 1) * self.stride;
        let last_write = (self.h1 - 1) * ow + self.w1 - 1;
        assert!(
            last_read < image && last_write < slab,
            "im2col lines out of bounds"
        );
    }

    /// For each line: the offset of its first valid output in the slab, and of the image
    /// element that output reads.
    fn offsets(&self, ow: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        (self.h0..self.h1)
            .enumerate()
            .map(move |(i, y)| (y * ow + self.w0, self.first + i * self.step))
    }
}

/// Writes the column matrix (`rows × cols`, row-major) of `img` into `col`.
pub fn im2col<T: Num>(g: &ColGeom, img: &[T], col: &mut [T]) {
    im2col_lines(g, img, col, 0..g.output[1])
}

/// Writes the columns of output lines `lines` (a range of output rows of a 1-D or 2-D
/// window, whose output depth is 1; all of them otherwise) into `col`, a `rows ×
/// (lines × output width)` row-major matrix: one tile of the column matrix.
pub fn im2col_lines<T: Num>(g: &ColGeom, img: &[T], col: &mut [T], lines: Range<usize>) {
    assert!(
        (g.output[0] == 1 && lines.end <= g.output[1]) || lines == (0..g.output[1]),
        "im2col: a tile of output lines of a 3-D window"
    );
    vectorized(
        #[inline(always)]
        || im2col_rows(g, img, col, lines),
    )
}

#[inline(always)]
fn im2col_rows<T: Num>(g: &ColGeom, img: &[T], col: &mut [T], tile: Range<usize>) {
    let [od_n, _, ow] = g.output;
    let [_, ih, iw] = g.input;
    let plane = volume(&g.input);
    let (r0, r1) = (tile.start, tile.end.max(tile.start));
    let slab_len = (r1 - r0) * ow;
    let ncols = od_n * slab_len;
    if ncols == 0 {
        return;
    }
    g.for_each_row(
        #[inline(always)]
        |row, c, [(d0, d1, doff), vh, vw]| {
            let dst = &mut col[row * ncols..(row + 1) * ncols];
            let src = &img[c * plane..(c + 1) * plane];
            let lines = Lines::new(g, vh, vw);
            for (od, slab) in dst.chunks_exact_mut(slab_len).enumerate() {
                if od < d0 || od >= d1 || lines.is_empty() {
                    slab.fill(T::ZERO);
                    continue;
                }
                let zd = ((od * g.win.stride[0]) as isize + doff) as usize;
                let src = &src[zd * ih * iw..(zd + 1) * ih * iw];
                let Lines { h0, h1, w0, w1, .. } = lines;
                // The valid lines of this tap within the tile, as offsets in the slab.
                let (a, b) = (h0.clamp(r0, r1), h1.clamp(r0, r1));
                if a == b {
                    slab.fill(T::ZERO);
                    continue;
                }
                slab[..(a - r0) * ow].fill(T::ZERO);
                slab[(b - r0) * ow..].fill(T::ZERO);
                if w0 > 0 || w1 < ow {
                    for line in slab[(a - r0) * ow..(b - r0) * ow].chunks_exact_mut(ow) {
                        line[..w0].fill(T::ZERO);
                        line[w1..].fill(T::ZERO);
                    }
                }
                let part = lines.within(a, b);
                part.check(src.len(), slab.len() + r0 * ow, ow);
                let n = w1 - w0;
                for (out, at) in part.offsets(ow) {
                    // SAFETY: `check` bounds every line's reads in `src` and writes in
                    // the tile's slab (its offsets shifted back by the `r0` lines before
                    // it), which are distinct borrows.
                    unsafe {
                        let d = slab.as_mut_ptr().add(out - r0 * ow);
                        let s = src.as_ptr().add(at);
                        if part.stride == 1 {
                            copy_run(d, s, n);
                        } else {
                            for j in 0..n {
                                d.add(j).write(s.add(j * part.stride).read());
                            }
                        }
                    }
                }
            }
        },
    );
}

/// Adds the column matrix `col` back into `img` (each tap to the pixel it read); `img`
/// must hold what the result is to be added to (zero for a plain write).
pub fn col2im<T: Num>(g: &ColGeom, col: &[T], img: &mut [T]) {
    vectorized(
        #[inline(always)]
        || col2im_rows(g, col, img),
    )
}

#[inline(always)]
fn col2im_rows<T: Num>(g: &ColGeom, col: &[T], img: &mut [T]) {
    let (ncols, plane) = (g.cols(), volume(&g.input));
    let [_, oh, ow] = g.output;
    let [_, ih, iw] = g.input;
    if ncols == 0 {
        return;
    }
    g.for_each_row(
        #[inline(always)]
        |row, c, [(d0, d1, doff), vh, vw]| {
            let lines = Lines::new(g, vh, vw);
            if lines.is_empty() {
                return;
            }
            let src = &col[row * ncols..(row + 1) * ncols];
            let dst = &mut img[c * plane..(c + 1) * plane];
            let n = lines.w1 - lines.w0;
            for od in d0..d1 {
                let zd = ((od * g.win.stride[0]) as isize + doff) as usize;
                let dst = &mut dst[zd * ih * iw..(zd + 1) * ih * iw];
                let slab = &src[od * oh * ow..(od + 1) * oh * ow];
                lines.check(dst.len(), slab.len(), ow);
                for (out, at) in lines.offsets(ow) {
                    // SAFETY: as in `im2col_rows`, the other way round.
                    unsafe {
                        let s = slab.as_ptr().add(out);
                        let d = dst.as_mut_ptr().add(at);
                        if lines.stride == 1 {
                            add_run(d, s, n);
                        } else {
                            for j in 0..n {
                                let p = d.add(j * lines.stride);
                                p.write(p.read().add(s.add(j).read()));
                            }
                        }
                    }
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::nn::geometry::{Dims3, Window};

    fn geom(input: Dims3, k: Dims3, s: Dims3, d: Dims3, p: Dims3, channels: usize) -> ColGeom {
        let win = Window {
            kernel: k,
            stride: s,
            dilate: d,
            pad: p,
        };
        let output = [0, 1, 2].map(|i| (input[i] + 2 * p[i] - win.span(i)) / s[i] + 1);
        ColGeom {
            channels,
            input,
            output,
            win,
        }
    }

    /// The column matrix by its definition.
    fn naive(g: &ColGeom, img: &[f64]) -> Vec<f64> {
        let mut col = Vec::new();
        let w = &g.win;
        for c in 0..g.channels {
            for kd in 0..w.kernel[0] {
                for kh in 0..w.kernel[1] {
                    for kw in 0..w.kernel[2] {
                        for od in 0..g.output[0] {
                            for oh in 0..g.output[1] {
                                for ow in 0..g.output[2] {
                                    let z = [
                                        (od * w.stride[0] + kd * w.dilate[0]) as isize
                                            - w.pad[0] as isize,
                                        (oh * w.stride[1] + kh * w.dilate[1]) as isize
                                            - w.pad[1] as isize,
                                        (ow * w.stride[2] + kw * w.dilate[2]) as isize
                                            - w.pad[2] as isize,
                                    ];
                                    let inside =
                                        (0..3).all(|i| z[i] >= 0 && z[i] < g.input[i] as isize);
                                    col.push(if inside {
                                        let [a, b, e] = z.map(|v| v as usize);
                                        img[((c * g.input[0] + a) * g.input[1] + b) * g.input[2]
                                            + e]
                                    } else {
                                        0.0
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        col
    }

    #[test]
    fn matches_definition_and_adjoint() {
        let cases = [
            geom([1, 5, 6], [1, 3, 3], [1, 1, 1], [1, 1, 1], [0, 0, 0], 2),
            geom([1, 7, 6], [1, 3, 2], [1, 2, 3], [1, 1, 2], [0, 1, 2], 1),
            geom([1, 1, 9], [1, 1, 4], [1, 1, 2], [1, 1, 1], [0, 0, 3], 3),
            geom([4, 5, 5], [2, 3, 2], [2, 1, 2], [1, 2, 1], [1, 1, 0], 2),
            geom([1, 3, 3], [1, 3, 3], [1, 1, 1], [1, 1, 1], [0, 4, 4], 1),
            // Runs of 19 and 16 elements: whole and overlapping blocks of the inline copy.
            geom([1, 4, 21], [1, 3, 3], [1, 1, 1], [1, 1, 1], [0, 0, 0], 2),
            geom([1, 4, 18], [1, 2, 3], [1, 1, 1], [1, 1, 1], [0, 1, 0], 1),
        ];
        for g in cases {
            let img: Vec<f64> = (0..g.image_len()).map(|i| i as f64 + 1.0).collect();
            let mut col = vec![f64::NAN; g.rows() * g.cols()];
            im2col(&g, &img, &mut col);
            assert_eq!(col, naive(&g, &img), "{g:?}");
            if g.output[0] == 1 {
                // Tiles of two output lines each hold their columns of every row.
                let (oh, ow, ncols) = (g.output[1], g.output[2], g.cols());
                for r0 in (0..oh).step_by(2) {
                    let lines = r0..(r0 + 2).min(oh);
                    let tc = lines.len() * ow;
                    let mut tile = vec![f64::NAN; g.rows() * tc];
                    im2col_lines(&g, &img, &mut tile, lines);
                    for (row, got) in tile.chunks(tc.max(1)).enumerate() {
                        let want = &col[row * ncols + r0 * ow..][..tc];
                        assert_eq!(got, want, "{g:?} lines from {r0}");
                    }
                }
            }
            // <im2col(x), y> == <x, col2im(y)>
            let y: Vec<f64> = (0..col.len()).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
            let mut back = vec![0.0; img.len()];
            col2im(&g, &y, &mut back);
            let lhs: f64 = col.iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: f64 = img.iter().zip(&back).map(|(a, b)| a * b).sum();
            assert_eq!(lhs, rhs, "{g:?}");
        }
    }
}
