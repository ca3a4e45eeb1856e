//! Byte-moving kernels shared by the transform operators: strided gathers (transpose,
//! slice, flip, broadcast, tile), block copies (concat, stack) and the output request.

use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::map::{map1, pool_shares_work, PAR_MIN};
use crate::kernels::cpu::num::Num;
use crate::ndarray::TBlob;
use crate::op::transform::view::View;
use crate::op::OpReq;
use crate::shape::strides_of;
use rayon::prelude::*;
use std::borrow::Cow;

/// Side of the square tiles a transposing gather works in.
const TILE: usize = 32;

/// Bytes below which a plain copy stays on one thread.
const PAR_BYTES: usize = 1 << 20;

/// True if the memory of the two blobs overlaps.
fn overlaps(a: &TBlob, b: &TBlob) -> bool {
    let (a0, a1) = (
        a.ptr() as usize,
        a.ptr() as usize + a.size() * a.dtype.size(),
    );
    let (b0, b1) = (
        b.ptr() as usize,
        b.ptr() as usize + b.size() * b.dtype.size(),
    );
    a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1
}

/// The bytes of `input`, copied first if they share memory with `out`.
pub fn source<'a>(input: &'a TBlob, out: &TBlob) -> Cow<'a, [u8]> {
    if overlaps(input, out) {
        Cow::Owned(input.bytes().to_vec())
    } else {
        Cow::Borrowed(input.bytes())
    }
}

/// The bytes of a numeric slice, writable.
fn bytes_of_mut<T: Num>(v: &mut [T]) -> &mut [u8] {
    let n = std::mem::size_of_val(v);
    // SAFETY: the numeric element types are plain data with no padding, valid for every
    // bit pattern, so their memory may be seen and written as bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, n) }
}

/// Writes `out` as `req` says, with `fill` producing the result's bytes: straight into
/// the output for a write, into a buffer that is then added for `Add`.
pub fn emit(out: &TBlob, req: OpReq, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<()> {
    match req {
        OpReq::Null => Ok(()),
        OpReq::Write | OpReq::WriteInplace => fill(out.bytes_mut()),
        OpReq::Add => {
            if out.dtype == DType::Bool {
                return Err(Error::Type(
                    "cannot add to an output of dtype bool".to_string(),
                ));
            }
            dispatch_num!("transform", out.dtype, T => {
                let mut tmp = vec![<T as Num>::ZERO; out.size()];
                fill(bytes_of_mut(&mut tmp))?;
                map1(&tmp, out.slice_mut::<T>(), OpReq::Add, |v| v);
            });
            Ok(())
        }
    }
}

/// Copies `src` into `dst` (same length), in parallel for large copies.
pub fn par_copy(dst: &mut [u8], src: &[u8]) {
    if dst.len() < PAR_BYTES || !pool_shares_work() {
        dst.copy_from_slice(src);
    } else {
        let c = chunk_bytes(dst.len());
        dst.par_chunks_mut(c)
            .zip(src.par_chunks(c))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

fn chunk_bytes(n: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    n.div_ceil(threads * 4).max(PAR_BYTES / 4)
}

/// `out = input` with the data unchanged (reshape-like ops); nothing to do in place.
pub fn copy_same(input: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    if req != OpReq::Add && req != OpReq::Null && input.ptr() == out.ptr() {
        return Ok(());
    }
    let src = source(input, out);
    emit(out, req, |dst| {
        par_copy(dst, &src);
        Ok(())
    })
}

/// `out = input[view]`, for any dtype, honouring `req`.
pub fn gather(input: &TBlob, view: &View, out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Null || out.size() == 0 {
        return Ok(());
    }
    if view.size() != out.size() {
        return Err(Error::Runtime(format!(
            "internal error: a view of {} elements for an output of {}",
            view.size(),
            out.size()
        )));
    }
    let (lo, hi) = view.extent();
    if lo < 0 || hi >= input.size() as isize {
        return Err(Error::Runtime(
            "internal error: a view reaches outside its input".to_string(),
        ));
    }
    let src = source(input, out);
    let esize = input.dtype.size();
    emit(out, req, |dst| {
        gather_bytes(&src, esize, view, dst);
        Ok(())
    })
}

/// `dst = src[view]` on raw bytes with elements of `esize` bytes (the view is checked).
pub fn gather_bytes(src: &[u8], esize: usize, view: &View, dst: &mut [u8]) {
    if view.size() == 0 {
        return;
    }
    let v = view.simplified();
    match esize {
        1 => gather_n::<1>(src.as_chunks().0, &v, dst.as_chunks_mut().0),
        2 => gather_n::<2>(src.as_chunks().0, &v, dst.as_chunks_mut().0),
        4 => gather_n::<4>(src.as_chunks().0, &v, dst.as_chunks_mut().0),
        _ => gather_n::<8>(src.as_chunks().0, &v, dst.as_chunks_mut().0),
    }
}

type El<const N: usize> = [u8; N];

fn gather_n<const N: usize>(src: &[El<N>], v: &View, dst: &mut [El<N>]) {
    let nd = v.shape.len();
    if nd == 0 {
        dst[0] = src[v.offset as usize];
        return;
    }
    let inner = v.shape[nd - 1];
    let istride = v.strides[nd - 1];
    if istride != 1 && inner >= TILE / 2 {
        if let Some(j) = (0..nd - 1).find(|&j| v.strides[j] == 1 && v.shape[j] >= TILE / 2) {
            return gather_tiled(src, v, j, dst);
        }
    }
    let rows = dst.len() / inner;
    if dst.len() < PAR_MIN || !pool_shares_work() {
        gather_rows(src, v, 0, dst);
    } else if rows == 1 && istride == 1 {
        let off = v.offset as usize;
        par_copy(dst.as_flattened_mut(), src[off..off + inner].as_flattened());
    } else {
        let threads = rayon::current_num_threads().max(1);
        let per = rows
            .div_ceil(threads * 4)
            .max((PAR_MIN / 4).div_ceil(inner))
            .max(1);
        dst.par_chunks_mut(per * inner)
            .enumerate()
            .for_each(|(t, d)| gather_rows(src, v, t * per, d));
    }
}

/// Fills `dst` with whole rows (the last output axis) starting at row `first`. Rows
/// along the second-to-last axis are done in a tight loop, so short rows (repeat,
/// small trailing axes) stay cheap; an odometer steps through the axes before it.
fn gather_rows<const N: usize>(src: &[El<N>], v: &View, first: usize, dst: &mut [El<N>]) {
    let nd = v.shape.len();
    let (n0, s0) = (v.shape[nd - 1], v.strides[nd - 1]);
    let (n1, s1) = if nd >= 2 {
        (v.shape[nd - 2], v.strides[nd - 2])
    } else {
        (1, 0)
    };
    let outer = &v.shape[..nd.saturating_sub(2)];
    let ostr = &v.strides[..nd.saturating_sub(2)];
    let mut j = first % n1;
    let mut idx = vec![0usize; outer.len()];
    let mut off = v.offset;
    let mut rem = first / n1;
    for k in (0..outer.len()).rev() {
        idx[k] = rem % outer[k];
        rem /= outer[k];
        off += idx[k] as isize * ostr[k];
    }
    let mut rest = dst;
    while !rest.is_empty() {
        let take = (n1 - j).min(rest.len() / n0);
        let (seg, tail) = rest.split_at_mut(take * n0);
        rest = tail;
        let base = off + j as isize * s1;
        if s0 == 0 {
            // Each source element repeated n0 times.
            for (r, row) in seg.chunks_exact_mut(n0).enumerate() {
                row.fill(src[(base + r as isize * s1) as usize]);
            }
        } else {
            for (r, row) in seg.chunks_exact_mut(n0).enumerate() {
                copy_row(src, base + r as isize * s1, s0, row);
            }
        }
        j = 0;
        let mut k = outer.len();
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            off += ostr[k];
            if idx[k] < outer[k] {
                break;
            }
            off -= outer[k] as isize * ostr[k];
            idx[k] = 0;
        }
    }
}

#[inline]
fn copy_row<const N: usize>(src: &[El<N>], off: isize, is: isize, row: &mut [El<N>]) {
    let n = row.len();
    let o = off as usize;
    match is {
        1 => row.copy_from_slice(&src[o..o + n]),
        0 => row.fill(src[o]),
        -1 => {
            let s = &src[o + 1 - n..=o];
            row.iter_mut()
                .zip(s.iter().rev())
                .for_each(|(d, s)| *d = *s);
        }
        s if s > 0 => {
            let s = s as usize;
            let win = &src[o..=o + (n - 1) * s];
            for (k, d) in row.iter_mut().enumerate() {
                *d = win[k * s];
            }
        }
        s => {
            let s = s.unsigned_abs();
            let win = &src[o - (n - 1) * s..=o];
            let last = (n - 1) * s;
            for (k, d) in row.iter_mut().enumerate() {
                *d = win[last - k * s];
            }
        }
    }
}

/// A pointer that may be shared by tasks writing disjoint elements.
#[derive(Clone, Copy)]
struct SharedMut<T>(*mut T);

impl<T> SharedMut<T> {
    /// The pointer (a method, so closures capture the whole wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: only used by `gather_tiled`, whose tasks write disjoint elements.
unsafe impl<T> Send for SharedMut<T> {}

// SAFETY: as above.
unsafe impl<T> Sync for SharedMut<T> {}

/// A gather whose last output axis strides through the input while axis `j` is the
/// input's contiguous one (a transpose): copies square tiles so that both the reads and
/// the writes stay within a few cache lines.
fn gather_tiled<const N: usize>(src: &[El<N>], v: &View, j: usize, dst: &mut [El<N>]) {
    let nd = v.shape.len();
    let (nj, nl) = (v.shape[j], v.shape[nd - 1]);
    let is = v.strides[nd - 1];
    let dstr = strides_of(&v.shape);
    let dj = dstr[j];
    let others: Vec<usize> = (0..nd - 1).filter(|&k| k != j).collect();
    let n_outer: usize = others.iter().map(|&k| v.shape[k]).product();
    let jblocks = nj.div_ceil(TILE);
    let tasks = n_outer * jblocks;
    let total = dst.len();
    let out = SharedMut(dst.as_mut_ptr());
    let task = move |t: usize| {
        let (o, jb) = (t / jblocks, t % jblocks);
        let (mut sbase, mut dbase, mut rem) = (v.offset, 0usize, o);
        for &k in others.iter().rev() {
            let i = rem % v.shape[k];
            rem /= v.shape[k];
            sbase += i as isize * v.strides[k];
            dbase += i * dstr[k];
        }
        let (a0, a1) = (jb * TILE, ((jb + 1) * TILE).min(nj));
        let wa = a1 - a0;
        let mut buf = [[[0u8; N]; TILE]; TILE];
        for b0 in (0..nl).step_by(TILE) {
            let wb = (b0 + TILE).min(nl) - b0;
            // Read `wb` input runs (contiguous along a) into the tile, transposed...
            let runs = (b0..b0 + wb).map(|b| {
                let start = (sbase + a0 as isize + b as isize * is) as usize;
                &src[start..start + wa]
            });
            for (bi, run) in runs.enumerate() {
                for (ai, x) in run.iter().enumerate() {
                    buf[ai][bi] = *x;
                }
            }
            // ...and write it out as `wa` output runs (contiguous along b).
            for (ai, row) in buf.iter().enumerate().take(wa) {
                let d = dbase + (a0 + ai) * dj + b0;
                assert!(d + wb <= total);
                // SAFETY: `d..d + wb` are the row-major indices of output elements
                // (outer o, a0 + ai, b0..b0 + wb), inside the output (checked above);
                // each output element is written by exactly one task (tasks split the
                // outer index and blocks of a), and `dst` is borrowed mutably for the
                // whole call, so nothing else reads or writes it meanwhile.
                unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), out.get().add(d), wb) };
            }
        }
    };
    if total < PAR_MIN || !pool_shares_work() {
        (0..tasks).for_each(task);
    } else {
        (0..tasks).into_par_iter().for_each(task);
    }
}

/// Concatenates row-major blocks: output row `r` is the `r`-th block of `len_i` bytes of
/// every part in turn (concat and stack along an axis).
pub fn concat_bytes(parts: &[(&[u8], usize)], dst: &mut [u8]) {
    let row: usize = parts.iter().map(|p| p.1).sum();
    if row == 0 || dst.is_empty() {
        return;
    }
    let rows = dst.len() / row;
    let body = |first: usize, d: &mut [u8]| {
        for (r, drow) in d.chunks_exact_mut(row).enumerate() {
            let mut at = 0;
            for &(src, len) in parts {
                let s = (first + r) * len;
                drow[at..at + len].copy_from_slice(&src[s..s + len]);
                at += len;
            }
        }
    };
    let threads = rayon::current_num_threads().max(1);
    if dst.len() < PAR_BYTES || !pool_shares_work() {
        body(0, dst);
    } else if rows >= threads * 2 {
        let per = rows
            .div_ceil(threads * 4)
            .max((PAR_BYTES / 4).div_ceil(row));
        dst.par_chunks_mut(per * row)
            .enumerate()
            .for_each(|(t, d)| body(t * per, d));
    } else {
        // Few long rows: copy each piece in parallel.
        for (r, drow) in dst.chunks_exact_mut(row).enumerate() {
            let mut at = 0;
            for &(src, len) in parts {
                par_copy(&mut drow[at..at + len], &src[r * len..(r + 1) * len]);
                at += len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gather_u32(src: &[u32], view: &View) -> Vec<u32> {
        let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut out = vec![0u8; view.size() * 4];
        gather_bytes(&bytes, 4, view, &mut out);
        out.chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn simplify_merges_contiguous_axes() {
        let v = View::of(&[2, 1, 3, 4]).simplified();
        assert_eq!(v.shape, vec![24]);
        assert_eq!(v.strides, vec![1]);
        let t = View {
            shape: vec![4, 2, 3],
            strides: vec![1, 12, 4],
            offset: 0,
        }
        .simplified();
        assert_eq!(t.shape, vec![4, 6]);
        assert_eq!(t.strides, vec![1, 4]);
    }

    #[test]
    fn tiled_transpose_matches_naive() {
        for (r, c) in [(40usize, 70usize), (100, 33), (512, 300)] {
            let src: Vec<u32> = (0..(r * c) as u32).collect();
            let view = View {
                shape: vec![c, r],
                strides: vec![1, c as isize],
                offset: 0,
            };
            let got = gather_u32(&src, &view);
            let want: Vec<u32> = (0..c)
                .flat_map(|j| (0..r).map(move |i| (i * c + j) as u32))
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn negative_and_zero_strides() {
        let src: Vec<u32> = (0..12).collect();
        // Rows reversed, columns stepped by -2.
        let view = View {
            shape: vec![3, 2],
            strides: vec![-4, -2],
            offset: 11,
        };
        assert_eq!(gather_u32(&src, &view), vec![11, 9, 7, 5, 3, 1]);
        let bcast = View {
            shape: vec![2, 3],
            strides: vec![0, 1],
            offset: 4,
        };
        assert_eq!(gather_u32(&src, &bcast), vec![4, 5, 6, 4, 5, 6]);
        let fill = View {
            shape: vec![2, 3],
            strides: vec![1, 0],
            offset: 0,
        };
        assert_eq!(gather_u32(&src, &fill), vec![0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn large_gathers_run_in_parallel_chunks() {
        let (r, c) = (700usize, 600usize);
        let src: Vec<u32> = (0..(r * c) as u32).collect();
        let view = View {
            shape: vec![r, c],
            strides: vec![c as isize, -1],
            offset: c as isize - 1,
        };
        let got = gather_u32(&src, &view);
        for i in [0usize, 1, 350, 699] {
            for j in [0usize, 5, 599] {
                assert_eq!(got[i * c + j], (i * c + c - 1 - j) as u32);
            }
        }
    }

    fn naive(src: &[u32], v: &View) -> Vec<u32> {
        (0..v.size())
            .map(|mut i| {
                let mut off = v.offset;
                for k in (0..v.shape.len()).rev() {
                    off += (i % v.shape[k]) as isize * v.strides[k];
                    i /= v.shape[k];
                }
                src[off as usize]
            })
            .collect()
    }

    #[test]
    fn every_path_matches_the_naive_gather() {
        let src: Vec<u32> = (0..600_000).collect();
        let views = [
            // repeat of a long axis (short rows of stride 0), serial and parallel
            (vec![50, 2], vec![1, 0], 0),
            (vec![300_000, 2], vec![1, 0], 0),
            // short rows under two outer axes, parallel chunks starting mid-axis
            (vec![40, 700, 3], vec![2100, 3, 1], 0),
            (vec![40, 700, 3], vec![2100, 3, -1], 2),
            (vec![7, 3, 5000], vec![0, 5000, 1], 0),
            // strided and reversed rows
            (vec![300, 900], vec![1800, 2], 0),
            (vec![300, 900], vec![1800, -2], 1798),
            (vec![3, 250_000], vec![0, 2], 0),
            // transposes (tiled) with an outer axis
            (vec![5, 200, 300], vec![60_000, 1, 200], 0),
            (vec![200, 5, 300], vec![1, 60_000, 200], 0),
            (vec![5, 200, 300], vec![60_000, 1, -200], 59_800),
            (vec![37, 45], vec![1, -37], 37 * 44),
        ];
        for (shape, strides, offset) in views {
            let v = View {
                shape,
                strides,
                offset,
            };
            assert_eq!(gather_u32(&src, &v), naive(&src, &v), "{v:?}");
        }
    }

    #[test]
    fn concat_rows() {
        let a = [1u8, 2, 3, 4];
        let b = [9u8, 8];
        let mut out = [0u8; 6];
        concat_bytes(&[(&a, 2), (&b, 1)], &mut out);
        assert_eq!(out, [1, 2, 9, 3, 4, 8]);
    }
}
