//! `linalg.extracttrian` and `linalg.maketrian`: a triangle of each matrix (the last two
//! axes) packed into a vector, and a vector unpacked into a triangular matrix; each is the
//! other's gradient.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::Registry;
use crate::op::{check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// A triangle copy between square matrices and packed vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trian {
    /// The diagonal the triangle starts from: below the main one if negative.
    pub(crate) offset: i64,
    /// With a zero offset, the lower (true) or upper triangle.
    pub(crate) lower: bool,
    /// Matrix to vector (`extracttrian`), or back (`maketrian`).
    pub(crate) extract: bool,
}

impl Trian {
    /// The packed position of matrix element (`row`, `col`), or None
    /// outside the triangle. Rows of the lower triangle are packed one after another; the
    /// upper triangle is packed as its transpose, as MXNet does.
    #[inline]
    pub(crate) fn packed(&self, row: usize, col: usize) -> Option<usize> {
        let (row, col) = if self.offset > 0 || (self.offset == 0 && !self.lower) {
            (col, row)
        } else {
            (row, col)
        };
        let row = row.checked_sub(self.offset.unsigned_abs() as usize)?;
        (row >= col).then(|| row * (row + 1) / 2 + col)
    }

    /// The packed length of an `n`×`n` matrix's triangle.
    pub(crate) fn packed_len(&self, n: usize) -> usize {
        let t = n - self.offset.unsigned_abs() as usize;
        t * (t + 1) / 2
    }
}

impl Operator for Trian {
    fn name(&self) -> &'static str {
        if self.extract {
            "_linalg_extracttrian"
        } else {
            "_linalg_maketrian"
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 1)?;
        let s = &inputs[0];
        let k = self.offset.unsigned_abs() as usize;
        let nd = s.len();
        if self.extract {
            if nd < 2 || s[nd - 1] != s[nd - 2] {
                return Err(Error::Value(format!(
                    "{}: the input must be a tensor of square matrices, got shape {}",
                    self.name(),
                    fmt_shape(s)
                )));
            }
            if s[nd - 1] <= k {
                return Err(Error::Value(format!(
                    "{}: offset {} leaves no triangle in matrices of shape {}",
                    self.name(),
                    self.offset,
                    fmt_shape(s)
                )));
            }
            let mut o = Shape::from_slice(&s[..nd - 2]);
            o.push(self.packed_len(s[nd - 1]));
            return Ok(vec![o]);
        }
        let m = s.last().copied().unwrap_or(0);
        let t = ((((8 * m + 1) as f64).sqrt() - 1.0) / 2.0).round() as usize;
        if nd == 0 || m == 0 || t * (t + 1) / 2 != m {
            return Err(Error::Value(format!(
                "{}: the last axis must hold a triangle, t(t+1)/2 elements for some t > 0, \
                 got shape {}",
                self.name(),
                fmt_shape(s)
            )));
        }
        let mut o = Shape::from_slice(&s[..nd - 1]);
        o.push(t + k);
        o.push(t + k);
        Ok(vec![o])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(Trian {
                extract: !self.extract,
                ..*self
            }),
            ograds: vec![0],
            inputs: vec![],
            outputs: vec![],
            grad_of: vec![0],
        })
    }
}

const TRIAN_PARAMS: &[Param] = &[
    Param::new(
        "offset",
        "int",
        "0",
        "Offset of the diagonal versus the main diagonal. 0 corresponds to the main diagonal, \
         a negative/positive value to diagonals below/above the main diagonal.",
    ),
    Param::new(
        "lower",
        "boolean",
        "1",
        "Refer to the lower triangular matrix if lower=true, refer to the upper otherwise. \
         Only relevant when offset=0",
    ),
];

fn create(name: &str, attrs: &Attrs, extract: bool) -> Result<OpRef> {
    let p = Params::declared(name, attrs, TRIAN_PARAMS)?;
    Ok(Arc::new(Trian {
        offset: p.get("offset")?,
        lower: p.get("lower")?,
        extract,
    }))
}

/// Registers `_linalg_extracttrian` and `_linalg_maketrian`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "_linalg_extracttrian",
        aliases: &["linalg_extracttrian"],
        inputs: &["A"],
        variadic: false,
        params: TRIAN_PARAMS,
        doc: "Extracts a triangular sub-matrix from a square matrix.",
        create: Box::new(|a| create("_linalg_extracttrian", a, true)),
    });
    r.add(OpDef {
        name: "_linalg_maketrian",
        aliases: &["linalg_maketrian"],
        inputs: &["A"],
        variadic: false,
        params: TRIAN_PARAMS,
        doc: "Constructs a square matrix with the input representing a specific triangular \
              sub-matrix.",
        create: Box::new(|a| create("_linalg_maketrian", a, false)),
    });
}

#[cfg(test)]
mod tests {
    use super::Trian;
    use crate::op::Operator;
    use crate::shape::Shape;

    fn trian(offset: i64, lower: bool) -> Trian {
        Trian {
            offset,
            lower,
            extract: true,
        }
    }

    #[test]
    fn triangles_pack_as_mxnet_packs_them() {
        // The lower triangle row by row; the upper one as its transpose.
        let lower: Vec<_> = (0..3)
            .flat_map(|r| (0..3).map(move |c| (r, c)))
            .filter_map(|(r, c)| trian(0, true).packed(r, c).map(|i| (i, r * 3 + c)))
            .collect();
        let mut order = lower.clone();
        order.sort();
        assert_eq!(
            order.iter().map(|p| p.1).collect::<Vec<_>>(),
            [0, 3, 4, 6, 7, 8]
        );
        let mut upper: Vec<_> = (0..3)
            .flat_map(|r| (0..3).map(move |c| (r, c)))
            .filter_map(|(r, c)| trian(0, false).packed(r, c).map(|i| (i, r * 3 + c)))
            .collect();
        upper.sort();
        assert_eq!(
            upper.iter().map(|p| p.1).collect::<Vec<_>>(),
            [0, 1, 4, 2, 5, 8]
        );
        assert_eq!(trian(1, true).packed(0, 1), Some(0));
        assert_eq!(trian(1, true).packed(1, 1), None);
        assert_eq!(trian(-2, true).packed(2, 0), Some(0));
        assert_eq!(trian(-2, true).packed(1, 0), None);
    }

    #[test]
    fn shapes_and_errors() {
        let s = |v: &[usize]| Shape::from_slice(v);
        let e = trian(-1, true);
        assert_eq!(e.infer_shape(&[s(&[2, 4, 4])]).unwrap(), vec![s(&[2, 6])]);
        let m = Trian {
            extract: false,
            ..e
        };
        assert_eq!(m.infer_shape(&[s(&[2, 6])]).unwrap(), vec![s(&[2, 4, 4])]);
        assert!(m.infer_shape(&[s(&[2, 5])]).is_err());
        assert!(e.infer_shape(&[s(&[4, 3])]).is_err());
        assert!(trian(4, true).infer_shape(&[s(&[4, 4])]).is_err());
    }
}
