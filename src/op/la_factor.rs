//! Definitions of the `_linalg_` operators that factor or solve: `potrf`, `potri`,
//! `trmm`, `trsm`, `gelqf`, `syevd`, `inverse`, `det` and `slogdet`, on batches of
//! matrices in the last two axes, with their backward operators (MXNet 1.9.1's formulas).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// The operators of this family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaKind {
    Potrf,
    Potri,
    Trmm,
    Trsm,
    Gelqf,
    Syevd,
    Inverse,
    Det,
    Slogdet,
}

/// One operator of the family, or (`backward`) its gradient.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaOp {
    pub kind: LaKind,
    /// The triangle read (`potrf`, `potri`, `trmm`, `trsm`).
    pub lower: bool,
    /// `trmm`/`trsm`: use the triangle transposed.
    pub transpose: bool,
    /// `trmm`/`trsm`: the triangle multiplies from the right.
    pub rightside: bool,
    pub alpha: f64,
    pub backward: bool,
}

const LOWER: Param = Param::new(
    "lower",
    "boolean",
    "True",
    "True if the triangular matrix is lower triangular, false if it is upper triangular.",
);

const TRI_PARAMS: &[Param] = &[
    Param::new(
        "transpose",
        "boolean",
        "False",
        "Use transposed of the triangular matrix",
    ),
    Param::new(
        "rightside",
        "boolean",
        "False",
        "Multiply triangular matrix from the right to non-triangular one.",
    ),
    LOWER,
    Param::new(
        "alpha",
        "double",
        "1",
        "Scalar factor to be applied to the result.",
    ),
];

impl LaKind {
    /// The registered name of the forward operator.
    pub fn name(self) -> &'static str {
        match self {
            LaKind::Potrf => "_linalg_potrf",
            LaKind::Potri => "_linalg_potri",
            LaKind::Trmm => "_linalg_trmm",
            LaKind::Trsm => "_linalg_trsm",
            LaKind::Gelqf => "_linalg_gelqf",
            LaKind::Syevd => "_linalg_syevd",
            LaKind::Inverse => "_linalg_inverse",
            LaKind::Det => "_linalg_det",
            LaKind::Slogdet => "_linalg_slogdet",
        }
    }

    fn backward_name(self) -> &'static str {
        match self {
            LaKind::Potrf => "_backward_linalg_potrf",
            LaKind::Potri => "_backward_linalg_potri",
            LaKind::Trmm => "_backward_linalg_trmm",
            LaKind::Trsm => "_backward_linalg_trsm",
            LaKind::Gelqf => "_backward_linalg_gelqf",
            LaKind::Syevd => "_backward_linalg_syevd",
            LaKind::Inverse => "_backward_linalg_inverse",
            LaKind::Det => "_backward_linalg_det",
            LaKind::Slogdet => "_backward_linalg_slogdet",
        }
    }

    fn num_inputs(self) -> usize {
        match self {
            LaKind::Trmm | LaKind::Trsm => 2,
            _ => 1,
        }
    }

    fn num_outputs(self) -> usize {
        match self {
            LaKind::Gelqf | LaKind::Syevd | LaKind::Slogdet => 2,
            _ => 1,
        }
    }
}

/// The matrix size and batch count of a batch of square matrices.
pub fn square(op: &str, what: &str, s: &[usize]) -> Result<(usize, usize)> {
    let (batch, m, n) = matrices(op, what, s)?;
    if m != n {
        return Err(Error::Value(format!(
            "{op}: {what} must hold square matrices in its last two axes, got shape {}",
            fmt_shape(s)
        )));
    }
    Ok((batch, n))
}

/// (batch count, rows, columns) of a batch of matrices in the last two axes.
pub fn matrices(op: &str, what: &str, s: &[usize]) -> Result<(usize, usize, usize)> {
    let nd = s.len();
    if nd < 2 {
        return Err(Error::Value(format!(
            "{op}: {what} must have at least 2 dimensions, got shape {}",
            fmt_shape(s)
        )));
    }
    Ok((s[..nd - 2].iter().product(), s[nd - 2], s[nd - 1]))
}

impl LaOp {
    /// The output shapes of the forward operator for `inputs`.
    fn forward_shapes(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.kind.name();
        let a = &inputs[0];
        let nd = a.len();
        match self.kind {
            LaKind::Potrf | LaKind::Potri | LaKind::Inverse => {
                square(name, "A", a)?;
                Ok(vec![a.clone()])
            }
            LaKind::Trmm | LaKind::Trsm => {
                let (_, m) = square(name, "A", a)?;
                let b = &inputs[1];
                matrices(name, "B", b)?;
                if b.len() != nd || b[..nd - 2] != a[..nd - 2] {
                    return Err(Error::Value(format!(
                        "{name}: A {} and B {} must have the same leading dimensions",
                        fmt_shape(a),
                        fmt_shape(b)
                    )));
                }
                let k = if self.rightside { b[nd - 1] } else { b[nd - 2] };
                if k != m {
                    return Err(Error::Value(format!(
                        "{name}: A {} and B {} do not multiply (rightside={})",
                        fmt_shape(a),
                        fmt_shape(b),
                        self.rightside
                    )));
                }
                Ok(vec![b.clone()])
            }
            LaKind::Gelqf => {
                let (_, m, n) = matrices(name, "A", a)?;
                if m > n {
                    return Err(Error::Value(format!(
                        "{name}: A must have no more rows than columns, got shape {}",
                        fmt_shape(a)
                    )));
                }
                let mut l = a.clone();
                l[nd - 1] = m;
                Ok(vec![a.clone(), l])
            }
            LaKind::Syevd => {
                square(name, "A", a)?;
                Ok(vec![a.clone(), Shape::from_slice(&a[..nd - 1])])
            }
            LaKind::Det | LaKind::Slogdet => {
                square(name, "A", a)?;
                let out = if nd == 2 {
                    Shape::from_slice(&[1])
                } else {
                    Shape::from_slice(&a[..nd - 2])
                };
                Ok(vec![out; self.kind.num_outputs()])
            }
        }
    }

    /// The backward operator's inputs as [`LaOp::gradient`] arranges them: which
    /// forward outputs' gradients, inputs and outputs it reads.
    fn backward_reads(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        match self.kind {
            LaKind::Potrf | LaKind::Inverse => (vec![0], vec![], vec![0]),
            LaKind::Potri => (vec![0], vec![0], vec![0]),
            LaKind::Trmm => (vec![0], vec![0, 1], vec![]),
            LaKind::Trsm => (vec![0], vec![0], vec![0]),
            LaKind::Gelqf | LaKind::Syevd => (vec![0, 1], vec![], vec![0, 1]),
            LaKind::Det => (vec![0], vec![0], vec![0]),
            // The sign's gradient is zero wherever it is defined.
            LaKind::Slogdet => (vec![1], vec![0], vec![1]),
        }
    }

    /// The shape of the forward input `i` given the backward operator's input shapes.
    fn backward_shape(&self, inputs: &[Shape], i: usize) -> Shape {
        let (ograds, ins, outs) = self.backward_reads();
        if let Some(k) = ins.iter().position(|&j| j == i) {
            return inputs[ograds.len() + k].clone();
        }
        // Otherwise the input has the shape of the first forward output read: trsm's B
        // that of C, and the single inputs that of B, Q or U.
        debug_assert!(!outs.is_empty());
        inputs[ograds.len() + ins.len()].clone()
    }
}

impl LaOp {
    /// (batch count, rows, columns) of the matrices the routines take, from a kernel's
    /// input and output shapes: B's for `trmm`/`trsm`, A's for the others (for a
    /// backward operator, those of the gradient it writes last).
    pub fn matrix_dims(&self, inputs: &[&[usize]], outputs: &[&[usize]]) -> (usize, usize, usize) {
        let s = match (self.kind, self.backward) {
            (_, true) => outputs[outputs.len() - 1],
            (LaKind::Trmm | LaKind::Trsm, false) => inputs[1],
            _ => inputs[0],
        };
        let nd = s.len();
        (s[..nd - 2].iter().product(), s[nd - 2], s[nd - 1])
    }
}

/// The element types the family computes in.
fn check_real(op: &str, t: DType) -> Result<DType> {
    match t {
        DType::F32 | DType::F64 => Ok(t),
        other => Err(Error::Type(format!(
            "{op}: this operation only supports float32 and float64, got {other}"
        ))),
    }
}

impl Operator for LaOp {
    fn name(&self) -> &'static str {
        if self.backward {
            self.kind.backward_name()
        } else {
            self.kind.name()
        }
    }

    fn num_outputs(&self) -> usize {
        if self.backward {
            self.kind.num_inputs()
        } else {
            self.kind.num_outputs()
        }
    }

    fn mxnet_num_outputs(&self) -> usize {
        match (self.kind, self.backward) {
            // MXNet keeps the LU factors and pivots as hidden outputs.
            (LaKind::Det, false) => 3,
            (LaKind::Slogdet, false) => 4,
            _ => self.num_outputs(),
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        if !self.backward {
            crate::op::check_inputs(name, inputs, self.kind.num_inputs())?;
            return self.forward_shapes(inputs);
        }
        let (o, i, p) = self.backward_reads();
        crate::op::check_inputs(name, inputs, o.len() + i.len() + p.len())?;
        Ok((0..self.kind.num_inputs())
            .map(|k| self.backward_shape(inputs, k))
            .collect())
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let name = self.name();
        let t = check_real(name, crate::op::same_dtype(name, inputs)?)?;
        Ok(vec![t; self.num_outputs()])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        match (self.kind, self.backward) {
            (LaKind::Potrf | LaKind::Potri | LaKind::Inverse, false) => &[(0, 0)],
            _ => &[],
        }
    }

    fn gradient(&self) -> Grad {
        if self.backward {
            return Grad::Undefined;
        }
        let (ograds, inputs, outputs) = self.backward_reads();
        Grad::Op(Gradient {
            op: Arc::new(LaOp {
                backward: true,
                ..*self
            }),
            ograds,
            inputs,
            outputs,
            grad_of: (0..self.kind.num_inputs()).collect(),
        })
    }
}

fn create(kind: LaKind, attrs: &Attrs) -> Result<OpRef> {
    let name = kind.name();
    let mut op = LaOp {
        kind,
        lower: true,
        transpose: false,
        rightside: false,
        alpha: 1.0,
        backward: false,
    };
    match kind {
        LaKind::Potrf | LaKind::Potri => {
            let p = Params::declared(name, attrs, std::slice::from_ref(&LOWER))?;
            op.lower = p.get("lower")?;
        }
        LaKind::Trmm | LaKind::Trsm => {
            let p = Params::declared(name, attrs, TRI_PARAMS)?;
            op.transpose = p.get("transpose")?;
            op.rightside = p.get("rightside")?;
            op.lower = p.get("lower")?;
            op.alpha = p.get("alpha")?;
        }
        _ => {
            Params::declared(name, attrs, &[])?;
        }
    }
    Ok(Arc::new(op))
}

/// A registration: the kind, its aliases, input names, arguments and description.
type Def = (
    LaKind,
    &'static [&'static str],
    &'static [&'static str],
    &'static [Param],
    &'static str,
);

const DEFS: [Def; 9] = [
    (LaKind::Potrf, &["linalg_potrf"], &["A"], &[LOWER], "The Cholesky factor of each symmetric positive-definite matrix of a batch."),
    (LaKind::Potri, &["linalg_potri"], &["A"], &[LOWER], "The inverse of A = L L^T from each Cholesky factor L of a batch."),
    (LaKind::Trmm, &["linalg_trmm"], &["A", "B"], TRI_PARAMS, "alpha * op(A) B (or B op(A)) with A triangular, on batches of matrices."),
    (LaKind::Trsm, &["linalg_trsm"], &["A", "B"], TRI_PARAMS, "Solves op(A) X = alpha B (or X op(A) = alpha B) with A triangular, on batches of matrices."),
    (LaKind::Gelqf, &["linalg_gelqf"], &["A"], &[], "The LQ factorization A = L Q of each matrix of a batch (Q with orthonormal rows)."),
    (LaKind::Syevd, &[], &["A"], &[], "The eigendecomposition A = U^T diag(L) U of each symmetric matrix of a batch."),
    (LaKind::Inverse, &["linalg_inverse", "_npi_inv"], &["A"], &[], "The inverse of each square matrix of a batch."),
    (LaKind::Det, &["linalg_det", "_npi_det"], &["A"], &[], "The determinant of each square matrix of a batch."),
    (LaKind::Slogdet, &["linalg_slogdet", "_npi_slogdet"], &["A"], &[], "The sign and the logarithm of the absolute value of the determinant of each square matrix of a batch."),
];

/// Registers the operators of this module.
pub fn register(r: &mut Registry) {
    for (kind, aliases, inputs, params, doc) in DEFS {
        r.add(OpDef {
            name: kind.name(),
            aliases,
            inputs,
            variadic: false,
            params,
            doc,
            create: Box::new(move |a| create(kind, a)),
        });
    }
}
