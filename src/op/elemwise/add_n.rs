//! Definition of `add_n` (`ElementWiseSum`): the element-wise sum of any number of
//! same-shape arrays, and its backward, which hands the output gradient to every input.

use crate::error::{Error, Result};
use crate::op::infer::elementwise_inference;
use crate::op::{check_inputs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::Shape;
use std::sync::Arc;

pub(crate) struct AddN {
    pub(crate) num_args: usize,
}

/// A sum of `n` arrays, for callers in the core (the graph's gradient aggregation).
pub fn add_n_op(n: usize) -> OpRef {
    Arc::new(AddN { num_args: n })
}

impl Operator for AddN {
    fn name(&self) -> &'static str {
        "add_n"
    }

    elementwise_inference!(self.num_args);

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn gradient(&self) -> Grad {
        Gradient::simple(
            Arc::new(AddNBackward { n: self.num_args }),
            &[],
            &[],
            self.num_args,
        )
    }
}

/// Copies the output gradient into the gradient of each of the `n` inputs.
pub(crate) struct AddNBackward {
    pub(crate) n: usize,
}

impl Operator for AddNBackward {
    fn name(&self) -> &'static str {
        "_backward_add_n"
    }

    fn output_is_input(&self, _output: usize) -> Option<usize> {
        Some(0)
    }

    fn num_outputs(&self) -> usize {
        self.n
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 1)?;
        Ok(vec![inputs[0].clone(); self.n])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }
}

const PARAMS: &[Param] = &[Param::required(
    "num_args",
    "int",
    "Number of inputs to be summed.",
)];

pub(crate) fn create(attrs: &crate::op::Attrs) -> Result<OpRef> {
    let p = Params::declared("add_n", attrs, PARAMS)?;
    let n: i64 = p.get("num_args")?;
    if n < 1 {
        return Err(Error::Value(format!(
            "add_n: num_args must be at least 1, got {n}"
        )));
    }
    Ok(add_n_op(n as usize))
}

/// Registers `add_n`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "add_n",
        aliases: &["ElementWiseSum", "_sparse_add_n", "_sparse_ElementWiseSum"],
        inputs: &["args"],
        variadic: true,
        params: PARAMS,
        doc: "Adds all input arguments element-wise.",
        create: Box::new(create),
    });
}
