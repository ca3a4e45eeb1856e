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
}
