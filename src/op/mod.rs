//! The operator registry: every operator once, with MXNet's name and aliases, attribute
//! parsing, shape and type inference and a kernel per device.

pub mod invoke;
pub mod params;
mod registry;
#[cfg(test)]
pub mod testutil;

pub use params::{Attrs, Params};
pub use registry::{find, list_ops, OpDef, Registry};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ndarray::TBlob;
use crate::shape::{fmt_shape, Shape};
use rand_pcg::Pcg64Mcg;
use std::sync::Arc;

/// How an op's output is to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpReq {
    /// Leave the output alone.
    Null,
    /// Overwrite the output.
    Write,
    /// Overwrite an output that shares memory with an input.
    WriteInplace,
    /// Add to the output.
    Add,
}

/// What a kernel gets besides its inputs and outputs.
pub struct OpContext<'a> {
    /// True during training (dropout, batch statistics).
    pub is_train: bool,
    /// The device's random generator, for ops that ask for one.
    pub rng: Option<&'a mut Pcg64Mcg>,
}

impl OpContext<'_> {
    /// The random generator, or an error naming the op if it was not requested.
    pub fn rng(&mut self, op: &str) -> Result<&mut Pcg64Mcg> {
        self.rng
            .as_deref_mut()
            .ok_or_else(|| Error::Runtime(format!("{op}: no random generator was provided")))
    }
}

/// An operator with its attributes parsed: what the engine runs.
pub trait Operator: Send + Sync {
    /// MXNet's name of the operator.
    fn name(&self) -> &'static str;

    /// Number of outputs.
    fn num_outputs(&self) -> usize {
        1
    }

    /// Output shapes from input shapes; errors name the op and the shapes.
    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>>;

    /// Output types from input types. By default all inputs must share one type, which
    /// the outputs take.
    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let t = same_dtype(self.name(), inputs)?;
        Ok(vec![t; self.num_outputs()])
    }

    /// Computes the outputs on the CPU.
    fn forward(
        &self,
        ctx: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()>;

    /// True if the op needs the device's random generator.
    fn needs_rng(&self) -> bool {
        false
    }

    /// Pairs (input, output) that may share memory.
    fn inplace(&self) -> &'static [(usize, usize)] {
        &[]
    }
}

/// The one dtype all inputs share, or an error naming the op.
pub fn same_dtype(op: &str, inputs: &[DType]) -> Result<DType> {
    let Some(&first) = inputs.first() else {
        return Err(Error::Type(format!(
            "{op}: cannot infer the output type without inputs"
        )));
    };
    if let Some(other) = inputs.iter().find(|t| **t != first) {
        return Err(Error::Type(format!(
            "{op}: all inputs must have the same dtype, got {first} and {other}"
        )));
    }
    Ok(first)
}

/// Checks the number of inputs.
pub fn check_inputs(op: &str, inputs: &[Shape], want: usize) -> Result<()> {
    if inputs.len() != want {
        return Err(Error::Value(format!(
            "{op}: expected {want} input(s), got {}",
            inputs.len()
        )));
    }
    Ok(())
}

/// An error saying the op got a shape it cannot take.
pub fn shape_err(op: &str, what: &str, shape: &[usize]) -> Error {
    Error::Value(format!("{op}: {what}, got shape {}", fmt_shape(shape)))
}

/// A shared parsed operator.
pub type OpRef = Arc<dyn Operator>;
