//! Unfolding an image into the column matrix of its sliding windows (`im2col`) and the
//! adjoint folding that adds columns back into an image (`col2im`).
//!
//! The column matrix has one row per (channel, kernel tap) and one column per output
//! position; padded taps read zero.

use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::simd::vectorized;
use crate::op::nn::geometry::volume;
pub use crate::op::nn::geometry::ColGeom;

impl ColGeom {
    /// For kernel tap `t` along dimension `dim`: the range of output positions whose input
    /// coordinate `o * stride + t * dilate - pad` lies inside the input, and the offset
    /// `t * dilate - pad`.
    fn valid(&self, dim: usize, t: usize) -> (usize, usize, isize) {
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

/// Copies `src` into `dst` (of equal length) inline: the runs of an image row that the
/// column matrix is made of are short, and a call to `memcpy` per run costs more than the
/// copy.
#[inline(always)]
fn copy_run<T: Copy>(dst: &mut [T], src: &[T]) {
    const BLOCK: usize = 8;
    let n = dst.len();
    if n < BLOCK {
        dst.iter_mut().zip(src).for_each(|(d, &s)| *d = s);
        return;
    }
    let mut i = 0;
    while i + BLOCK <= n {
        dst[i..i + BLOCK].copy_from_slice(&src[i..i + BLOCK]);
        i += BLOCK;
    }
    if i < n {
        // The last block overlaps the one before: same values, written twice.
        dst[n - BLOCK..].copy_from_slice(&src[n - BLOCK..n]);
    }
}

/// Adds `src` into `dst` (of equal length) in whole blocks of 8 and then one by one: the
/// runs are short, and a loop over the CPU's full vector width would leave them all to
/// its scalar remainder.
#[inline(always)]
fn add_run<T: Num>(dst: &mut [T], src: &[T]) {
    const BLOCK: usize = 8;
    let mut d = dst.chunks_exact_mut(BLOCK);
    let mut s = src.chunks_exact(BLOCK);
    for (d, s) in (&mut d).zip(&mut s) {
        let d: &mut [T; BLOCK] = d.try_into().expect("a whole block");
        let s: &[T; BLOCK] = s.try_into().expect("a whole block");
        for j in 0..BLOCK {
            d[j] = d[j].add(s[j]);
        }
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = d.add(s);
    }
}

/// Writes the column matrix (`rows × cols`, row-major) of `img` into `col`.
pub fn im2col<T: Num>(g: &ColGeom, img: &[T], col: &mut [T]) {
    vectorized(
        #[inline(always)]
        || im2col_rows(g, img, col),
    )
}

#[inline(always)]
fn im2col_rows<T: Num>(g: &ColGeom, img: &[T], col: &mut [T]) {
    let (ncols, plane) = (g.cols(), volume(&g.input));
    let [_, oh, ow] = g.output;
    let [_, ih, iw] = g.input;
    let s = g.win.stride;
    g.for_each_row(
        #[inline(always)]
        |row, c, [(d0, d1, doff), (h0, h1, hoff), (w0, w1, woff)]| {
            let dst = &mut col[row * ncols..(row + 1) * ncols];
            let src = &img[c * plane..(c + 1) * plane];
            for od in 0..g.output[0] {
                let slab = &mut dst[od * oh * ow..(od + 1) * oh * ow];
                if od < d0 || od >= d1 {
                    slab.fill(T::ZERO);
                    continue;
                }
                let zd = (od * s[0]) as isize + doff;
                let src = &src[zd as usize * ih * iw..(zd as usize + 1) * ih * iw];
                for y in 0..oh {
                    let out = &mut slab[y * ow..(y + 1) * ow];
                    if y < h0 || y >= h1 {
                        out.fill(T::ZERO);
                        continue;
                    }
                    let zy = ((y * s[1]) as isize + hoff) as usize;
                    let line = &src[zy * iw..(zy + 1) * iw];
                    out[..w0].fill(T::ZERO);
                    out[w1..].fill(T::ZERO);
                    // First input column read by output column w0.
                    let x0 = ((w0 * s[2]) as isize + woff) as usize;
                    if s[2] == 1 {
                        copy_run(&mut out[w0..w1], &line[x0..x0 + (w1 - w0)]);
                    } else {
                        for (j, o) in out[w0..w1].iter_mut().enumerate() {
                            *o = line[x0 + j * s[2]];
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
    let s = g.win.stride;
    g.for_each_row(
        #[inline(always)]
        |row, c, [(d0, d1, doff), (h0, h1, hoff), (w0, w1, woff)]| {
            let src = &col[row * ncols..(row + 1) * ncols];
            let dst = &mut img[c * plane..(c + 1) * plane];
            for od in d0..d1 {
                let zd = ((od * s[0]) as isize + doff) as usize;
                let dst = &mut dst[zd * ih * iw..(zd + 1) * ih * iw];
                let slab = &src[od * oh * ow..(od + 1) * oh * ow];
                for y in h0..h1 {
                    let zy = ((y * s[1]) as isize + hoff) as usize;
                    let line = &mut dst[zy * iw..(zy + 1) * iw];
                    let x0 = ((w0 * s[2]) as isize + woff) as usize;
                    let vals = &slab[y * ow + w0..y * ow + w1];
                    if s[2] == 1 {
                        add_run(&mut line[x0..x0 + vals.len()], vals);
                    } else {
                        for (j, &v) in vals.iter().enumerate() {
                            let d = &mut line[x0 + j * s[2]];
                            *d = d.add(v);
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
