//! Definition of `khatri_rao`: the column-wise Kronecker product of matrices, composed
//! of reshapes and broadcast products (so it runs, and differentiates, on every device).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Defined, Src};
use crate::op::{same_dtype, Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const NAME: &str = "khatri_rao";

const PARAMS: &[Param] = &[Param::new(
    "num_args",
    "int",
    "1",
    "Number of input matrices.",
)];

/// The product's shape: (the product of the row counts, the shared column count).
fn output_shape(inputs: &[Shape]) -> Result<Shape> {
    let Some(first) = inputs.first() else {
        return Err(Error::Value(format!("{NAME}: needs at least one matrix")));
    };
    let mut rows = 1;
    for (i, s) in inputs.iter().enumerate() {
        if s.len() != 2 || s[1] != first.get(1).copied().unwrap_or(0) {
            return Err(Error::Value(format!(
                "{NAME}: every input must be a matrix with the columns of the first; input {i} has shape {} and input 0 {}",
                fmt_shape(s),
                fmt_shape(first)
            )));
        }
        rows *= s[0];
    }
    Ok(Shape::from_slice(&[rows, first[1]]))
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let n: i64 = p.get("num_args")?;
    if n < 1 {
        return Err(Error::Value(format!(
            "{NAME}: num_args must be at least 1, got {n}"
        )));
    }
    Ok(Defined::op(
        NAME,
        Box::new(move |s: &[Shape]| {
            if s.len() != n as usize {
                return Err(Error::Value(format!(
                    "{NAME}: num_args is {n} but {} inputs were given",
                    s.len()
                )));
            }
            Ok(vec![output_shape(s)?])
        }),
        Box::new(|t: &[DType]| Ok(vec![same_dtype(NAME, t)?])),
        Box::new(|b, s, _| {
            // Rows of the product so far (r, k) times the next matrix's (m, k): the
            // (r, 1, k) and (1, m, k) views broadcast to (r, m, k), then merge rows.
            let cols = s[0][1];
            let (mut acc, mut rows) = (Src::Input(0), s[0][0]);
            for (i, next) in s.iter().enumerate().skip(1) {
                let a = b.reshape(acc, &[rows, 1, cols])?;
                let c = b.reshape(Src::Input(i), &[1, next[0], cols])?;
                let prod = b.binary("broadcast_mul", a, c)?;
                rows *= next[0];
                acc = b.reshape(prod, &[rows, cols])?;
            }
            Ok(vec![acc])
        }),
    ))
}

/// Registers `khatri_rao`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["args"],
        variadic: true,
        params: PARAMS,
        doc: "The Khatri-Rao (column-wise Kronecker) product of matrices.",
        create: Box::new(create),
    });
}
