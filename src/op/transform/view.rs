//! Strided views: where each element of a transform operator's output reads its input
//! (transpose, slice, flip, broadcast, tile).

use crate::shape::strides_of;

/// Where each element of an output comes from: output index `i` reads the input element
/// at `offset + sum(i[k] * strides[k])`; strides are in elements and may be zero
/// (broadcast) or negative (flip).
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// Output shape.
    pub shape: Vec<usize>,
    /// Input stride of each output axis.
    pub strides: Vec<isize>,
    /// Input element read for the first output element.
    pub offset: isize,
}

impl View {
    /// The identity view of a row-major array of `shape`.
    pub fn of(shape: &[usize]) -> View {
        View {
            shape: shape.to_vec(),
            strides: strides_of(shape).iter().map(|&s| s as isize).collect(),
            offset: 0,
        }
    }

    /// Number of output elements.
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }

    /// Drops axes of length 1 and merges neighbours that step through the input evenly.
    pub(crate) fn simplified(&self) -> View {
        let mut shape: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut strides: Vec<isize> = Vec::with_capacity(self.shape.len());
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 1 {
                continue;
            }
            match (shape.last_mut(), strides.last_mut()) {
                (Some(pn), Some(ps)) if *ps == s * n as isize => {
                    *pn *= n;
                    *ps = s;
                }
                _ => {
                    shape.push(n);
                    strides.push(s);
                }
            }
        }
        View {
            shape,
            strides,
            offset: self.offset,
        }
    }

    /// The lowest and highest input elements the view reads (for a non-empty view).
    pub(crate) fn extent(&self) -> (isize, isize) {
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (n as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        (lo, hi)
    }

    /// The gather that undoes the view if it visits each of the `n` input elements once.
    pub fn inverse(&self, n: usize) -> Option<View> {
        let ostrides = strides_of(&self.shape);
        let mut axes: Vec<(usize, isize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .zip(ostrides.iter())
            .filter(|((&len, _), _)| len > 1)
            .map(|((&len, &s), &os)| (len, s, os))
            .collect();
        if axes.iter().any(|a| a.1 == 0) {
            return None;
        }
        axes.sort_by_key(|a| std::cmp::Reverse(a.1.unsigned_abs()));
        let mut expect = 1usize;
        for &(len, s, _) in axes.iter().rev() {
            if s.unsigned_abs() != expect {
                return None;
            }
            expect *= len;
        }
        let flipped = |f: &dyn Fn(&(usize, isize, usize)) -> usize| -> usize {
            axes.iter().filter(|a| a.1 < 0).map(f).sum()
        };
        if expect != n || self.offset != flipped(&|a| (a.0 - 1) * a.1.unsigned_abs()) as isize {
            return None;
        }
        Some(View {
            shape: axes.iter().map(|a| a.0).collect(),
            strides: axes
                .iter()
                .map(|a| {
                    if a.1 < 0 {
                        -(a.2 as isize)
                    } else {
                        a.2 as isize
                    }
                })
                .collect(),
            offset: flipped(&|a| (a.0 - 1) * a.2) as isize,
        })
    }

    /// The axes to sum over if the view reads the `n` input elements in order, each
    /// repeated along the axes of stride zero.
    pub fn repeating_axes(&self, n: usize) -> Option<Vec<bool>> {
        if self.offset != 0 {
            return None;
        }
        let mut expect = 1usize;
        for (&len, &s) in self.shape.iter().zip(&self.strides).rev() {
            if len > 1 && s != 0 {
                if s as usize != expect {
                    return None;
                }
                expect *= len;
            }
        }
        (expect == n).then(|| {
            self.shape
                .iter()
                .zip(&self.strides)
                .map(|(&len, &s)| len > 1 && s == 0)
                .collect()
        })
    }
}
