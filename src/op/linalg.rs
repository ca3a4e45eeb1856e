//! Definitions of the matrix products: `dot` (MXNet's N-d dot over flattened 2-D views)
//! and `batch_dot`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::linalg::DotBackward;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// One matrix product `dst (m × n, row-major) (=|+=) op(a) · op(b)`, with `op(a)` element
/// (i, p) at `a[i * a_rs + p * a_cs]` and `op(b)` element (p, j) at `b[p * b_rs + j * b_cs]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatMul {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_rs: usize,
    pub a_cs: usize,
    pub b_rs: usize,
    pub b_cs: usize,
}

impl MatMul {
    /// `op(a)` of an `a_rows × a_cols` row-major matrix times `op(b)` of a `b_rows × b_cols`
    /// one, transposed as asked; `None` if the inner dimensions differ.
    pub fn new(
        a_rows: usize,
        a_cols: usize,
        ta: bool,
        b_rows: usize,
        b_cols: usize,
        tb: bool,
    ) -> Option<MatMul> {
        let (m, k, a_rs, a_cs) = if ta {
            (a_cols, a_rows, 1, a_cols)
        } else {
            (a_rows, a_cols, a_cols, 1)
        };
        let (k2, n, b_rs, b_cs) = if tb {
            (b_cols, b_rows, 1, b_cols)
        } else {
            (b_rows, b_cols, b_cols, 1)
        };
        (k == k2).then_some(MatMul {
            m,
            n,
            k,
            a_rs,
            a_cs,
            b_rs,
            b_cs,
        })
    }

    /// Elements `a` must hold.
    pub(crate) fn a_len(&self) -> usize {
        self.m * self.k
    }

    /// Elements `b` must hold.
    pub(crate) fn b_len(&self) -> usize {
        self.k * self.n
    }

    pub(crate) fn flops(&self) -> usize {
        self.m.saturating_mul(self.n).saturating_mul(self.k)
    }
}

/// `True` or `False`, as the attribute was written.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

pub(crate) fn same_float_or_int(op: &str, inputs: &[DType]) -> Result<Vec<DType>> {
    let t = crate::op::same_dtype(op, inputs)?;
    if t == DType::Bool {
        return Err(Error::Type(format!("{op}: dtype bool is not supported")));
    }
    Ok(vec![t])
}

/// `dot`: the product of `lhs` flattened to (all but last, last) and `rhs` flattened to
/// (first, all but first); a transposed input is flattened the other way round first.
pub(crate) struct Dot {
    pub(crate) ta: bool,
    pub(crate) tb: bool,
}

impl Dot {
    /// The product and the output shape for these input shapes, as MXNet's DotShape.
    pub(crate) fn plan(&self, l: &[usize], r: &[usize]) -> Result<(MatMul, Shape)> {
        let mismatch = || {
            Error::Value(format!(
                "dot: shape mismatch: {} X {} (transpose_a={}, transpose_b={})",
                fmt_shape(l),
                fmt_shape(r),
                py_bool(self.ta),
                py_bool(self.tb)
            ))
        };
        if l.is_empty() || r.is_empty() {
            return Err(Error::Value(format!(
                "dot: inputs must have at least one dimension, got shapes {} and {}",
                fmt_shape(l),
                fmt_shape(r)
            )));
        }
        if l.len() == 1 && r.len() == 1 {
            if self.ta || self.tb {
                return Err(Error::Value(format!(
                    "dot: cannot transpose vectors, got shapes {} and {}",
                    fmt_shape(l),
                    fmt_shape(r)
                )));
            }
            let d = MatMul::new(1, l[0], false, r[0], 1, false).ok_or_else(mismatch)?;
            return Ok((d, Shape::from_slice(&[1])));
        }
        let prod = |s: &[usize]| s.iter().product::<usize>();
        let (lnd, rnd) = (l.len(), r.len());
        // (rows, cols) of the stored 2-D views and the output parts they contribute.
        let (a_rows, a_cols, l_out) = if self.ta {
            (l[0], prod(&l[1..]), &l[1..])
        } else {
            (prod(&l[..lnd - 1]), l[lnd - 1], &l[..lnd - 1])
        };
        let (b_rows, b_cols, r_out) = if self.tb {
            (prod(&r[..rnd - 1]), r[rnd - 1], &r[..rnd - 1])
        } else {
            (r[0], prod(&r[1..]), &r[1..])
        };
        let d =
            MatMul::new(a_rows, a_cols, self.ta, b_rows, b_cols, self.tb).ok_or_else(mismatch)?;
        let mut out = Shape::new();
        if lnd > 1 {
            out.extend_from_slice(l_out);
        }
        if rnd > 1 {
            out.extend_from_slice(r_out);
        }
        Ok((d, out))
    }
}

impl Operator for Dot {
    fn name(&self) -> &'static str {
        "dot"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("dot", inputs, 2)?;
        Ok(vec![self.plan(&inputs[0], &inputs[1])?.1])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        same_float_or_int("dot", inputs)
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(DotBackward {
            ta: self.ta,
            tb: self.tb,
            batched: false,
        });
        Gradient::simple(op, &[0, 1], &[], 2)
    }
}

/// `batch_dot`: products of matching matrices over the leading (batch) axes.
pub(crate) struct BatchDot {
    pub(crate) ta: bool,
    pub(crate) tb: bool,
}

impl BatchDot {
    pub(crate) fn plan(&self, l: &[usize], r: &[usize]) -> Result<(MatMul, usize, Shape)> {
        let nd = l.len();
        if nd < 3 || r.len() != nd {
            return Err(Error::Value(format!(
                "batch_dot: inputs must both have the same number N >= 3 of dimensions, got shapes {} and {}",
                fmt_shape(l),
                fmt_shape(r)
            )));
        }
        if l[..nd - 2] != r[..nd - 2] {
            return Err(Error::Value(format!(
                "batch_dot: the leading batch dimensions must be equal, got shapes {} and {}",
                fmt_shape(l),
                fmt_shape(r)
            )));
        }
        let d = MatMul::new(l[nd - 2], l[nd - 1], self.ta, r[nd - 2], r[nd - 1], self.tb)
            .ok_or_else(|| {
                Error::Value(format!(
                    "batch_dot: shape mismatch: {} X {} (transpose_a={}, transpose_b={})",
                    fmt_shape(l),
                    fmt_shape(r),
                    py_bool(self.ta),
                    py_bool(self.tb)
                ))
            })?;
        let mut out = Shape::from_slice(&l[..nd - 2]);
        out.push(d.m);
        out.push(d.n);
        Ok((d, l[..nd - 2].iter().product(), out))
    }
}

impl Operator for BatchDot {
    fn name(&self) -> &'static str {
        "batch_dot"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("batch_dot", inputs, 2)?;
        Ok(vec![self.plan(&inputs[0], &inputs[1])?.2])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        same_float_or_int("batch_dot", inputs)
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(DotBackward {
            ta: self.ta,
            tb: self.tb,
            batched: true,
        });
        Gradient::simple(op, &[0, 1], &[], 2)
    }
}

pub(crate) const DOT_PARAMS: &[Param] = &[
    Param::new(
        "transpose_a",
        "boolean",
        "False",
        "If true then transpose the first input before dot.",
    ),
    Param::new(
        "transpose_b",
        "boolean",
        "False",
        "If true then transpose the second input before dot.",
    ),
    Param::new(
        "forward_stype",
        "{None, 'csr', 'default', 'row_sparse'}",
        "None",
        "The desired storage type of the forward output given by user; only dense output is produced.",
    ),
];

/// Reads the attributes shared by `dot` and `batch_dot`; only dense output is produced.
pub(crate) fn transposes(op: &str, attrs: &Attrs) -> Result<(bool, bool)> {
    let p = Params::declared(op, attrs, DOT_PARAMS)?;
    p.get_choice("forward_stype", &["None", "default", "csr", "row_sparse"])?;
    Ok((p.get("transpose_a")?, p.get("transpose_b")?))
}

/// A `dot` operator, for callers in the core.
pub fn dot_op(transpose_a: bool, transpose_b: bool) -> OpRef {
    Arc::new(Dot {
        ta: transpose_a,
        tb: transpose_b,
    })
}

/// A `batch_dot` operator, for callers in the core.
pub fn batch_dot_op(transpose_a: bool, transpose_b: bool) -> OpRef {
    Arc::new(BatchDot {
        ta: transpose_a,
        tb: transpose_b,
    })
}

/// Registers the linalg operators.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "dot",
        aliases: &[],
        inputs: &["lhs", "rhs"],
        variadic: false,
        params: DOT_PARAMS,
        doc: "Dot product of two arrays (N-d inputs are flattened to matrices).",
        create: Box::new(|attrs: &Attrs| -> Result<OpRef> {
            let (ta, tb) = transposes("dot", attrs)?;
            Ok(dot_op(ta, tb))
        }),
    });
    r.add(OpDef {
        name: "batch_dot",
        aliases: &[],
        inputs: &["lhs", "rhs"],
        variadic: false,
        params: DOT_PARAMS,
        doc: "Batched matrix product over the leading axes of two N-d (N >= 3) arrays.",
        create: Box::new(|attrs: &Attrs| -> Result<OpRef> {
            let (ta, tb) = transposes("batch_dot", attrs)?;
            Ok(batch_dot_op(ta, tb))
        }),
    });
}
