//! Array shapes and the helpers that check and combine them.

use crate::error::{Error, Result};
use smallvec::SmallVec;

/// A shape: dimension sizes, outermost first.
pub type Shape = SmallVec<[usize; 6]>;

/// Number of elements in `shape` (1 for a scalar shape `()`).
pub fn size_of(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `(2, 3)` style text for error messages, as MXNet prints shapes.
pub fn fmt_shape(shape: &[usize]) -> String {
    match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Row-major strides in elements.
pub fn strides_of(shape: &[usize]) -> SmallVec<[usize; 6]> {
    let mut strides: SmallVec<[usize; 6]> = SmallVec::from_elem(1, shape.len());
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Normalises a possibly negative `axis` for an array of `ndim` dimensions.
pub fn norm_axis(axis: i64, ndim: usize, op: &str) -> Result<usize> {
    let n = ndim as i64;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(Error::Index(format!(
            "{op}: axis {axis} is out of range for an array of {ndim} dimensions"
        )));
    }
    Ok(a as usize)
}

/// The shape two arrays broadcast to (numpy rules), or an error naming both.
pub fn broadcast_shapes(op: &str, a: &[usize], b: &[usize]) -> Result<Shape> {
    let n = a.len().max(b.len());
    let mut out = Shape::from_elem(0, n);
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::Value(format!(
                "{op}: operands could not be broadcast together with shapes {} {}",
                fmt_shape(a),
                fmt_shape(b)
            )));
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_rules() {
        assert_eq!(
            broadcast_shapes("t", &[2, 1, 3], &[4, 1])
                .unwrap()
                .as_slice(),
            &[2, 4, 3]
        );
        assert!(broadcast_shapes("t", &[2, 3], &[4]).is_err());
        assert_eq!(strides_of(&[2, 3, 4]).as_slice(), &[12, 4, 1]);
        assert_eq!(fmt_shape(&[3]), "(3,)");
        assert_eq!(norm_axis(-1, 3, "t").unwrap(), 2);
        assert!(norm_axis(3, 3, "t").is_err());
    }
}
