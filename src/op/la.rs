//! Definitions of the `_linalg_` operators built from `batch_dot` and index arithmetic:
//! `gemm`, `gemm2`, `syrk`, `sumlogdiag` and `extractdiag`, on batches of matrices in
//! the last two axes (or the axis given).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const GEMM_PARAMS: &[Param] = &[
    Param::new(
        "transpose_a",
        "boolean",
        "False",
        "Multiply with transposed of first input (A).",
    ),
    Param::new(
        "transpose_b",
        "boolean",
        "False",
        "Multiply with transposed of second input (B).",
    ),
    Param::new("alpha", "double", "1", "Scalar factor multiplied with A*B."),
    Param::new("beta", "double", "1", "Scalar factor multiplied with C."),
    Param::new(
        "axis",
        "int",
        "-2",
        "Axis corresponding to the matrix rows.",
    ),
];

const GEMM2_PARAMS: &[Param] = &[
    Param::new(
        "transpose_a",
        "boolean",
        "False",
        "Multiply with transposed of first input (A).",
    ),
    Param::new(
        "transpose_b",
        "boolean",
        "False",
        "Multiply with transposed of second input (B).",
    ),
    Param::new("alpha", "double", "1", "Scalar factor multiplied with A*B."),
    Param::new(
        "axis",
        "int",
        "-2",
        "Axis corresponding to the matrix rows.",
    ),
];

/// A product `alpha * op(A) op(B) (+ beta * C)` of batches of matrices.
#[derive(Clone, Copy)]
struct Gemm {
    name: &'static str,
    ta: bool,
    tb: bool,
    alpha: f64,
    beta: f64,
    axis: i64,
    with_c: bool,
}

impl Gemm {
    /// The rows axis, from the end: the matrices are in axes (rows, rows + 1) or, when
    /// rows is not second to last, in (rows, last).
    fn rows_axis(&self, ndim: usize) -> Result<usize> {
        let a = if self.axis < 0 {
            self.axis + ndim as i64
        } else {
            self.axis
        };
        if ndim < 2 || a < 0 || a as usize >= ndim - 1 {
            return Err(Error::Value(format!(
                "{}: axis {} does not leave a column axis after it in {ndim} dimensions",
                self.name, self.axis
            )));
        }
        Ok(a as usize)
    }

    /// The input shapes with the row axis moved second to last.
    fn canonical(&self, s: &Shape, rows: usize) -> Shape {
        let mut c = s.clone();
        let n = c.len();
        c.swap(rows, n - 2);
        c
    }

    fn output(&self, inputs: &[Shape]) -> Result<Shape> {
        let n = inputs[0].len();
        let rows = self.rows_axis(n)?;
        if inputs.iter().any(|s| s.len() != n) {
            return Err(Error::Value(format!(
                "{}: inputs must have the same number of dimensions",
                self.name
            )));
        }
        let (a, b) = (
            self.canonical(&inputs[0], rows),
            self.canonical(&inputs[1], rows),
        );
        let (m, ka) = if self.ta {
            (a[n - 1], a[n - 2])
        } else {
            (a[n - 2], a[n - 1])
        };
        let (kb, k) = if self.tb {
            (b[n - 1], b[n - 2])
        } else {
            (b[n - 2], b[n - 1])
        };
        if ka != kb || a[..n - 2] != b[..n - 2] {
            return Err(Error::Value(format!(
                "{}: shapes {} and {} do not multiply (transpose_a={}, transpose_b={})",
                self.name,
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[1]),
                self.ta,
                self.tb
            )));
        }
        let mut out = a.clone();
        out[n - 2] = m;
        out[n - 1] = k;
        let out = self.canonical(&out, rows);
        if self.with_c && inputs[2] != out {
            return Err(Error::Value(format!(
                "{}: C has shape {}, the product has shape {}",
                self.name,
                fmt_shape(&inputs[2]),
                fmt_shape(&out)
            )));
        }
        Ok(out)
    }

    fn build(&self, b: &mut Builder, shapes: &[Shape]) -> Result<Src> {
        let n = shapes[0].len();
        let rows = self.rows_axis(n)?;
        let out = self.output(shapes)?;
        let swap = |b: &mut Builder, x: Src| -> Result<Src> {
            if rows == n - 2 {
                return Ok(x);
            }
            b.op(
                "SwapAxis",
                &[("dim1", rows.to_string()), ("dim2", (n - 2).to_string())],
                &[x],
            )
        };
        let batch: usize = self.canonical(&shapes[0], rows)[..n - 2].iter().product();
        let as3 = |b: &mut Builder, x: Src, s: &Shape| -> Result<Src> {
            let c = self.canonical(s, rows);
            b.reshape(x, &[batch, c[n - 2], c[n - 1]])
        };
        let a = swap(b, Src::Input(0))?;
        let a = as3(b, a, &shapes[0])?;
        let bm = swap(b, Src::Input(1))?;
        let bm = as3(b, bm, &shapes[1])?;
        let p = b.op(
            "batch_dot",
            &[
                ("transpose_a", self.ta.to_string()),
                ("transpose_b", self.tb.to_string()),
            ],
            &[a, bm],
        )?;
        let p = b.reshape(p, &self.canonical(&out, rows))?;
        let p = swap(b, p)?;
        let mut y = if self.alpha != 1.0 {
            b.scalar("_mul_scalar", p, self.alpha)?
        } else {
            p
        };
        if self.with_c {
            let c = b.scalar("_mul_scalar", Src::Input(2), self.beta)?;
            y = b.binary("elemwise_add", y, c)?;
        }
        Ok(y)
    }
}

fn gemm(name: &'static str, with_c: bool, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(name, attrs, if with_c { GEMM_PARAMS } else { GEMM2_PARAMS })?;
    let g = Gemm {
        name,
        ta: p.get("transpose_a")?,
        tb: p.get("transpose_b")?,
        alpha: p.get("alpha")?,
        beta: if with_c { p.get("beta")? } else { 0.0 },
        axis: p.get("axis")?,
        with_c,
    };
    let n_in = if with_c { 3 } else { 2 };
    Ok(Defined::op(
        name,
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs(name, s, n_in)?;
            Ok(vec![g.output(s)?])
        }),
        Box::new(move |t: &[DType]| Ok(vec![crate::op::same_dtype(name, t)?])),
        Box::new(move |b, s, _| Ok(vec![g.build(b, s)?])),
    ))
}

const SYRK_PARAMS: &[Param] = &[
    Param::new(
        "transpose",
        "boolean",
        "False",
        "Use transpose of input matrix.",
    ),
    Param::new(
        "alpha",
        "double",
        "1",
        "Scalar factor to be applied to the result.",
    ),
];

fn syrk(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_linalg_syrk", attrs, SYRK_PARAMS)?;
    let t: bool = p.get("transpose")?;
    let g = Gemm {
        name: "_linalg_syrk",
        ta: t,
        tb: !t,
        alpha: p.get("alpha")?,
        beta: 0.0,
        axis: -2,
        with_c: false,
    };
    Ok(Defined::op(
        "_linalg_syrk",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_linalg_syrk", s, 1)?;
            Ok(vec![g.output(&[s[0].clone(), s[0].clone()])?])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, _| Ok(vec![g.build_same(b, &[s[0].clone(), s[0].clone()])?])),
    ))
}

impl Gemm {
    /// As [`Gemm::build`] with both operands the first input.
    fn build_same(&self, b: &mut Builder, shapes: &[Shape]) -> Result<Src> {
        let n = shapes[0].len();
        let s = &shapes[0];
        let batch: usize = s[..n - 2].iter().product();
        let a = b.reshape(Src::Input(0), &[batch, s[n - 2], s[n - 1]])?;
        let p = b.op(
            "batch_dot",
            &[
                ("transpose_a", self.ta.to_string()),
                ("transpose_b", self.tb.to_string()),
            ],
            &[a, a],
        )?;
        let p = b.reshape(p, &self.output(shapes)?)?;
        if self.alpha != 1.0 {
            return b.scalar("_mul_scalar", p, self.alpha);
        }
        Ok(p)
    }
}

// ---------------------------------------------------------------- diagonals

const DIAG_PARAMS: &[Param] = &[Param::new("offset", "int", "0", "Offset of the diagonal versus the main diagonal. 0 corresponds to the main diagonal, a negative/positive value to diagonals below/above the main diagonal.")];

fn square_check(op: &str, s: &Shape) -> Result<()> {
    if s.len() < 2 {
        return Err(Error::Value(format!(
            "{op}: input must have at least 2 dimensions, got shape {}",
            fmt_shape(s)
        )));
    }
    Ok(())
}

/// Appends `diag` of the input's last two axes at `offset`: its (batch..., len) vector.
fn extract(b: &mut Builder, x: Src, s: &Shape, offset: i64) -> Result<Src> {
    let n = s.len();
    b.op(
        "diag",
        &[
            ("k", offset.to_string()),
            ("axis1", (n - 2).to_string()),
            ("axis2", (n - 1).to_string()),
        ],
        &[x],
    )
}

fn diag_len(s: &Shape, offset: i64) -> usize {
    let n = s.len();
    let (r0, c0) = if offset >= 0 {
        (0, offset as usize)
    } else {
        ((-offset) as usize, 0)
    };
    s[n - 2].saturating_sub(r0).min(s[n - 1].saturating_sub(c0))
}

fn extractdiag(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_linalg_extractdiag", attrs, DIAG_PARAMS)?;
    let offset: i64 = p.get("offset")?;
    Ok(Defined::op(
        "_linalg_extractdiag",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_linalg_extractdiag", s, 1)?;
            square_check("_linalg_extractdiag", &s[0])?;
            let n = s[0].len();
            let mut o = Shape::from_slice(&s[0][..n - 2]);
            o.push(diag_len(&s[0], offset));
            Ok(vec![o])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, _| Ok(vec![extract(b, Src::Input(0), &s[0], offset)?])),
    ))
}

/// `makediag`: each vector of the last axis laid on the diagonal at `offset` of a square
/// matrix, zeros elsewhere: the vector times an identity, then zero rows and columns.
fn makediag(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_linalg_makediag", attrs, DIAG_PARAMS)?;
    let offset: i64 = p.get("offset")?;
    let k = offset.unsigned_abs() as usize;
    Ok(Defined::op(
        "_linalg_makediag",
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs("_linalg_makediag", s, 1)?;
            let Some(&len) = s[0].last() else {
                return Err(Error::Value(
                    "_linalg_makediag: input must have at least 1 dimension, got shape ()".into(),
                ));
            };
            let mut o = s[0].clone();
            o.push(len + k);
            let nd = o.len();
            o[nd - 2] = len + k;
            Ok(vec![o])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(move |b, s, t| {
            let nd = s[0].len() + 1;
            let len = s[0][nd - 2];
            let lead = &s[0][..nd - 2];
            let dtype = ("dtype", t[0].name().to_string());
            let dims = |tail: &[usize]| {
                let v: Vec<i64> = lead.iter().chain(tail).map(|&d| d as i64).collect();
                tuple_attr(&v)
            };
            let eye = b.op(
                "_eye",
                &[
                    ("N", len.to_string()),
                    ("M", len.to_string()),
                    dtype.clone(),
                ],
                &[],
            )?;
            let mut eye_shape = vec![1; nd - 2];
            eye_shape.extend([len, len]);
            let eye = b.reshape(eye, &eye_shape)?;
            let col = b.op(
                "expand_dims",
                &[("axis", (nd - 1).to_string())],
                &[Src::Input(0)],
            )?;
            let mut m = b.binary("broadcast_mul", col, eye)?;
            if k == 0 {
                return Ok(vec![m]);
            }
            let zeros = |b: &mut Builder, tail: [usize; 2]| {
                b.op("_zeros", &[("shape", dims(&tail)), dtype.clone()], &[])
            };
            let concat = |b: &mut Builder, parts: [Src; 2], dim: usize| {
                b.op(
                    "Concat",
                    &[("num_args", "2".into()), ("dim", dim.to_string())],
                    &parts,
                )
            };
            // Above the main diagonal: zero columns before, zero rows after; below it,
            // zero rows before and zero columns after.
            if offset > 0 {
                let z = zeros(b, [len, k])?;
                m = concat(b, [z, m], nd - 1)?;
                let z = zeros(b, [k, len + k])?;
                m = concat(b, [m, z], nd - 2)?;
            } else {
                let z = zeros(b, [k, len])?;
                m = concat(b, [z, m], nd - 2)?;
                let z = zeros(b, [len + k, k])?;
                m = concat(b, [m, z], nd - 1)?;
            }
            Ok(vec![m])
        }),
    ))
}

fn sumlogdiag(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("_linalg_sumlogdiag", attrs, &[])?;
    Ok(Defined::op(
        "_linalg_sumlogdiag",
        Box::new(|s: &[Shape]| {
            crate::op::check_inputs("_linalg_sumlogdiag", s, 1)?;
            square_check("_linalg_sumlogdiag", &s[0])?;
            let n = s[0].len();
            if s[0][n - 1] != s[0][n - 2] {
                return Err(Error::Value(format!(
                    "_linalg_sumlogdiag: matrices must be square, got shape {}",
                    fmt_shape(&s[0])
                )));
            }
            let o = if n == 2 {
                Shape::from_slice(&[1])
            } else {
                Shape::from_slice(&s[0][..n - 2])
            };
            Ok(vec![o])
        }),
        Box::new(|t: &[DType]| Ok(vec![t[0]])),
        Box::new(|b, s, _| {
            let d = extract(b, Src::Input(0), &s[0], 0)?;
            let l = b.unary("log", d)?;
            let n = s[0].len();
            let axis = tuple_attr(&[n as i64 - 2]);
            Ok(vec![b.op("sum", &[("axis", axis)], &[l])?])
        }),
    ))
}

fn def(
    name: &'static str,
    aliases: &'static [&'static str],
    inputs: &'static [&'static str],
    params: &'static [Param],
    doc: &'static str,
    create: crate::op::Creator,
) -> OpDef {
    OpDef {
        name,
        aliases,
        inputs,
        variadic: false,
        params,
        doc,
        create,
    }
}

/// Registers the `_linalg_` operators of this module.
pub fn register(r: &mut Registry) {
    r.add(def(
        "_linalg_gemm",
        &["linalg_gemm"],
        &["A", "B", "C"],
        GEMM_PARAMS,
        "alpha * op(A) op(B) + beta * C on batches of matrices.",
        Box::new(|a| gemm("_linalg_gemm", true, a)),
    ));
    r.add(def(
        "_linalg_gemm2",
        &["linalg_gemm2"],
        &["A", "B"],
        GEMM2_PARAMS,
        "alpha * op(A) op(B) on batches of matrices.",
        Box::new(|a| gemm("_linalg_gemm2", false, a)),
    ));
    r.add(def(
        "_linalg_syrk",
        &["linalg_syrk"],
        &["A"],
        SYRK_PARAMS,
        "alpha * A A^T (or A^T A) on batches of matrices.",
        Box::new(syrk),
    ));
    r.add(def(
        "_linalg_extractdiag",
        &["linalg_extractdiag"],
        &["A"],
        DIAG_PARAMS,
        "The diagonal at an offset of each matrix of a batch.",
        Box::new(extractdiag),
    ));
    r.add(def(
        "_linalg_makediag",
        &["linalg_makediag"],
        &["A"],
        DIAG_PARAMS,
        "Square matrices with each vector of the input on the diagonal at an offset.",
        Box::new(makediag),
    ));
    r.add(def(
        "_linalg_sumlogdiag",
        &["linalg_sumlogdiag"],
        &["A"],
        &[],
        "The sum of the logarithms of the diagonal of each square matrix of a batch.",
        Box::new(sumlogdiag),
    ));
}
