//! Partial shape and type inference shared by element-wise operators: every input and
//! output has one shape (and one dtype), so whatever is known fills the rest.

use super::assign_shape;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Shape;

/// Gives every unknown slot among `inputs` and `outputs` the shape of the first known one
/// and checks the known ones agree.
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
    for (i, slot) in inputs.iter_mut().enumerate() {
        assign_shape(op, &format!("input {i}"), slot, &known)?;
    }
    for (i, slot) in outputs.iter_mut().enumerate() {
        assign_shape(op, &format!("output {i}"), slot, &known)?;
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
