//! Shape and type inference helpers. Each operator writes one inference: either the
//! full one (`infer_shape`, from which the trait derives the partial one) or the partial
//! one, from which [`shapes_from_partial`] and [`types_from_partial`] give the full one,
//! so the imperative path and the graph passes can never disagree.

use super::Operator;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;
use smallvec::SmallVec;

/// Output shapes from known input shapes, through the operator's partial inference: the
/// `infer_shape` of an operator whose inference is written as `infer_shape_partial`.
pub fn shapes_from_partial<O: Operator + ?Sized>(op: &O, inputs: &[Shape]) -> Result<Vec<Shape>> {
    let mut ins: SmallVec<[Option<Shape>; 4]> = inputs.iter().cloned().map(Some).collect();
    let mut outs: SmallVec<[Option<Shape>; 2]> = SmallVec::from_elem(None, op.num_outputs());
    op.infer_shape_partial(&mut ins, &mut outs)?;
    for (i, (given, got)) in inputs.iter().zip(&ins).enumerate() {
        if got.as_ref() != Some(given) {
            return Err(Error::Value(format!(
                "{}: input {i} has shape {}, which does not fit the other inputs",
                op.name(),
                crate::shape::fmt_shape(given)
            )));
        }
    }
    outs.into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.ok_or_else(|| {
                Error::Value(format!(
                    "{}: cannot infer the shape of output {i}",
                    op.name()
                ))
            })
        })
        .collect()
}

/// Output types from known input types, through the operator's partial type inference.
pub fn types_from_partial<O: Operator + ?Sized>(op: &O, inputs: &[DType]) -> Result<Vec<DType>> {
    let mut ins: SmallVec<[Option<DType>; 4]> = inputs.iter().copied().map(Some).collect();
    let mut outs: SmallVec<[Option<DType>; 2]> = SmallVec::from_elem(None, op.num_outputs());
    op.infer_type_partial(&mut ins, &mut outs)?;
    for (i, (given, got)) in inputs.iter().zip(&ins).enumerate() {
        if *got != Some(*given) {
            return Err(Error::Type(format!(
                "{}: input {i} has dtype {given}, which does not fit the other inputs",
                op.name()
            )));
        }
    }
    outs.into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.ok_or_else(|| {
                Error::Type(format!(
                    "{}: cannot infer the dtype of output {i}",
                    op.name()
                ))
            })
        })
        .collect()
}

/// Checks that an operator got `want` inputs (`got`), as the partial inferences do
/// before anything else.
pub fn check_count(op: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::Value(format!(
            "{op}: expected {want} input(s), got {got}"
        )));
    }
    Ok(())
}

/// Gives every unknown slot among `inputs` and `outputs` the shape of the first known one
/// and checks the known ones agree: the shape inference of every element-wise operator.
/// Allocates nothing unless shapes disagree.
pub fn same_shape(
    op: &str,
    inputs: &mut [Option<Shape>],
    outputs: &mut [Option<Shape>],
) -> Result<()> {
    let Some(known) = inputs
        .iter()
        .chain(outputs.iter())
        .flatten()
        .next()
        .cloned()
    else {
        return Ok(());
    };
    fill_shapes(op, "input", inputs, &known)?;
    fill_shapes(op, "output", outputs, &known)
}

fn fill_shapes(op: &str, what: &str, slots: &mut [Option<Shape>], known: &Shape) -> Result<()> {
    for (i, slot) in slots.iter_mut().enumerate() {
        match slot {
            Some(have) if have != known => {
                return Err(Error::Value(format!(
                    "{op}: shape inconsistent for {what} {i}: expected {}, got {}",
                    crate::shape::fmt_shape(known),
                    crate::shape::fmt_shape(have)
                )))
            }
            Some(_) => {}
            None => *slot = Some(known.clone()),
        }
    }
    Ok(())
}

/// As [`same_shape`], for dtypes.
pub fn same_type(
    op: &str,
    inputs: &mut [Option<DType>],
    outputs: &mut [Option<DType>],
) -> Result<()> {
    let Some(known) = inputs
        .iter()
        .chain(outputs.iter())
        .flatten()
        .next()
        .copied()
    else {
        return Ok(());
    };
    for slot in inputs.iter_mut().chain(outputs.iter_mut()) {
        match slot {
            Some(t) if *t != known => {
                return Err(Error::Type(format!(
                    "{op}: all inputs and outputs must have the same dtype, got {known} and {t}"
                )))
            }
            _ => *slot = Some(known),
        }
    }
    Ok(())
}
