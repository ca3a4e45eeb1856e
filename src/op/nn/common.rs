//! Helpers the network layer definitions share: float dtype checks, same-shape inference,
//! boolean printing and the `normalization` argument.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::check_count;
use crate::op::{assign_shape, Param, ShapeSlots};
use crate::shape::{fmt_shape, Shape};

/// The one float dtype all `inputs` share, or a type error naming the op.
pub fn float_dtype(op: &str, inputs: &[DType]) -> Result<DType> {
    let t = crate::op::same_dtype(op, inputs)?;
    check_float(op, "data", t)?;
    Ok(t)
}

/// Errors unless `t` is a float dtype.
pub fn check_float(op: &str, what: &str, t: DType) -> Result<()> {
    if matches!(t, DType::F16 | DType::F32 | DType::F64) {
        Ok(())
    } else {
        Err(Error::Type(format!(
            "{op}: {what} must be float16, float32 or float64, got {t}"
        )))
    }
}

/// Shape inference for ops whose output has the input's shape, in both directions;
/// `inputs` holds that one input.
pub fn same_shape(op: &str, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
    check_count(op, inputs.len(), 1)?;
    match (&inputs[0], &outputs[0]) {
        (Some(s), _) => {
            let s = s.clone();
            assign_shape(op, "output", &mut outputs[0], &s)
        }
        (None, Some(s)) => {
            let s = s.clone();
            assign_shape(op, "data", &mut inputs[0], &s)
        }
        _ => Ok(()),
    }
}

/// Shape inference of a backward operator taking `want` inputs whose first two, the
/// output gradient and `other`, share their shape with the one output.
pub fn ograd_shape(op: &str, inputs: &[Shape], want: usize, other: &str) -> Result<Vec<Shape>> {
    check_count(op, inputs.len(), want)?;
    if inputs[0] != inputs[1] {
        return Err(Error::Value(format!(
            "{op}: output gradient {} and {other} {} differ in shape",
            fmt_shape(&inputs[0]),
            fmt_shape(&inputs[1])
        )));
    }
    Ok(vec![inputs[1].clone()])
}

/// The `no_bias` attribute of the layers whose bias is on by default.
pub const NO_BIAS: Param = Param::new(
    "no_bias",
    "boolean",
    "False",
    "Whether to disable bias parameter.",
);

/// The input names of an operator that takes the first `n` of `all`.
pub fn first_inputs(all: &[&str], n: usize) -> Option<Vec<String>> {
    Some(all[..n].iter().map(|s| s.to_string()).collect())
}

/// `True`/`False` as MXNet prints booleans.
pub fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Label smoothing, normalisation and friends take `batch`, `null` or `valid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalization {
    Null,
    Batch,
    Valid,
}

impl Normalization {
    /// Parses MXNet's `normalization` argument.
    pub fn parse(p: &crate::op::Params) -> Result<Normalization> {
        Ok(
            match p.get_choice("normalization", &["null", "batch", "valid"])? {
                "batch" => Normalization::Batch,
                "valid" => Normalization::Valid,
                _ => Normalization::Null,
            },
        )
    }
}
