//! Array shapes and the helpers that check and combine them.

use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::cell::Cell;

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

thread_local! {
    static ZERO_IS_UNKNOWN: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` reading a dimension of 0 as an unknown size (`zero_is_unknown`, MXNet's
/// legacy shape semantics) or as an empty axis (NumPy shape semantics). Graph inference
/// runs in it; arrays never do, so imperative calls keep their zero-sized arrays.
pub fn with_zero_meaning<R>(zero_is_unknown: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ZERO_IS_UNKNOWN.with(|z| z.set(self.0));
        }
    }
    let _restore = Restore(ZERO_IS_UNKNOWN.with(|z| z.replace(zero_is_unknown)));
    f()
}

/// Whether dimensions of 0 are unknown sizes here (see [`with_zero_meaning`]).
pub fn zero_is_unknown() -> bool {
    ZERO_IS_UNKNOWN.with(Cell::get)
}

/// Whether a shape is only partly known: some dimension is 0 while 0 means unknown.
pub fn is_partial(shape: &[usize]) -> bool {
    zero_is_unknown() && shape.contains(&0)
}

/// The shape that agrees with both `a` and `b`: equal shapes, or, while 0 means unknown,
/// shapes of one rank whose unknown dimensions take the other's size. `None` when they
/// disagree.
pub fn unify(a: &[usize], b: &[usize]) -> Option<Shape> {
    if a == b {
        return Some(Shape::from_slice(a));
    }
    if a.len() != b.len() || !zero_is_unknown() {
        return None;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| match (x, y) {
            (0, d) | (d, 0) => Some(d),
            (x, y) if x == y => Some(x),
            _ => None,
        })
        .collect()
}

/// How much of a shape is known: its rank, plus one for every known dimension.
pub fn known_dims(shape: &[usize]) -> usize {
    1 + shape.iter().filter(|&&d| d != 0).count()
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
        } else if (da == 0 || db == 0) && zero_is_unknown() {
            // An unknown size is 1 or the other's: the result is the other's, when over 1.
            da.max(db)
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
    fn unknown_dimensions_unify_with_known_ones() {
        assert!(
            unify(&[0, 3], &[2, 3]).is_none(),
            "0 is an empty axis outside inference"
        );
        assert!(!is_partial(&[0, 3]));
        with_zero_meaning(true, || {
            assert_eq!(unify(&[0, 3], &[2, 0]).unwrap().as_slice(), &[2, 3]);
            assert_eq!(unify(&[2, 3], &[2, 3]).unwrap().as_slice(), &[2, 3]);
            assert!(unify(&[2, 3], &[3, 3]).is_none());
            assert!(unify(&[0, 3], &[0, 3, 1]).is_none());
            assert!(is_partial(&[2, 0]) && !is_partial(&[2, 3]));
            assert_eq!(known_dims(&[2, 0]), 2);
        });
        assert!(!zero_is_unknown());
    }

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
