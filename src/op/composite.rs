//! Composite operators: an operator defined as a small graph of registered operators,
//! run by expanding it (in an executor's graph, or call by call imperatively), so its
//! kernels on every device and its gradient are those of its parts.

use super::{find, Attrs, OpRef, Operator};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Shape;
use std::sync::Arc;

/// Where a step's input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// Input `i` of the composite operator.
    Input(usize),
    /// Output `out` of step `step`.
    Step(usize, usize),
}

/// One operator applied inside a decomposition.
pub struct Step {
    /// The operator.
    pub op: OpRef,
    /// Its inputs, in the operator's order.
    pub inputs: Vec<Src>,
}

/// A composite operator's graph: its steps in order (each reads only inputs and earlier
/// steps) and which entries are its outputs.
pub struct Decomposition {
    pub steps: Vec<Step>,
    pub outputs: Vec<Src>,
}

/// An operator defined by a decomposition.
pub trait Composite {
    /// The graph computing the operator for inputs of these shapes and types.
    fn decompose(&self, shapes: &[Shape], types: &[DType]) -> Result<Decomposition>;
}

/// Builds a decomposition step by step.
#[derive(Default)]
pub struct Builder {
    steps: Vec<Step>,
}

impl Builder {
    /// A decomposition with no steps yet.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Adds operator `op` (a registered name) with attributes `attrs` applied to
    /// `inputs`; returns every output.
    pub fn op_n(&mut self, op: &str, attrs: &[(&str, String)], inputs: &[Src]) -> Result<Vec<Src>> {
        let attrs: Attrs = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let op = find(op)?.build(&attrs)?;
        Ok(self.step(op, inputs))
    }

    /// Adds an operator already built; returns every output.
    pub fn step(&mut self, op: OpRef, inputs: &[Src]) -> Vec<Src> {
        let n = op.num_outputs();
        self.steps.push(Step {
            op,
            inputs: inputs.to_vec(),
        });
        let step = self.steps.len() - 1;
        (0..n).map(|o| Src::Step(step, o)).collect()
    }

    /// As [`Builder::op_n`], for the operator's first output.
    pub fn op(&mut self, op: &str, attrs: &[(&str, String)], inputs: &[Src]) -> Result<Src> {
        Ok(self.op_n(op, attrs, inputs)?[0])
    }

    /// A one-input operator without attributes (`sqrt`, `square`).
    pub fn unary(&mut self, op: &str, x: Src) -> Result<Src> {
        self.op(op, &[], &[x])
    }

    /// A two-input operator without attributes (`broadcast_mul`).
    pub fn binary(&mut self, op: &str, a: Src, b: Src) -> Result<Src> {
        self.op(op, &[], &[a, b])
    }

    /// An operator with a scalar (`_plus_scalar`, `_power_scalar`).
    pub fn scalar(&mut self, op: &str, x: Src, v: f64) -> Result<Src> {
        self.op(op, &[("scalar", format!("{v:e}"))], &[x])
    }

    /// A reduction (`sum`, `mean`, `max`) over `axes`.
    pub fn reduce(&mut self, op: &str, x: Src, axes: &[usize], keepdims: bool) -> Result<Src> {
        let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        self.op(
            op,
            &[
                ("axis", tuple_attr(&axes)),
                ("keepdims", keepdims.to_string()),
            ],
            &[x],
        )
    }

    /// `x` reshaped to `shape`.
    pub fn reshape(&mut self, x: Src, shape: &[usize]) -> Result<Src> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        self.op("Reshape", &[("shape", tuple_attr(&dims))], &[x])
    }

    /// The decomposition with these outputs; an output that is an input is copied, so
    /// every output is a step's.
    pub fn finish(mut self, outputs: Vec<Src>) -> Result<Decomposition> {
        let mut outputs = outputs;
        for o in outputs.iter_mut() {
            if let Src::Input(_) = o {
                *o = self.op("_copy", &[], &[*o])?;
            }
        }
        Ok(Decomposition {
            steps: self.steps,
            outputs,
        })
    }
}

/// Output shapes from input shapes.
pub type ShapeFn = Box<dyn Fn(&[Shape]) -> Result<Vec<Shape>> + Send + Sync>;
/// Output types from input types.
pub type TypeFn = Box<dyn Fn(&[DType]) -> Result<Vec<DType>> + Send + Sync>;
/// Appends the steps computing the outputs from the inputs (of these shapes and types).
pub type BuildFn = Box<dyn Fn(&mut Builder, &[Shape], &[DType]) -> Result<Vec<Src>> + Send + Sync>;

/// A composite operator given by closures: most composites need nothing more.
pub struct Defined {
    pub name: &'static str,
    pub num_outputs: usize,
    pub shape: ShapeFn,
    pub dtype: TypeFn,
    pub build: BuildFn,
}

impl Defined {
    /// An operator `name` whose outputs have the inferred shapes and types.
    pub fn op(name: &'static str, shape: ShapeFn, dtype: TypeFn, build: BuildFn) -> OpRef {
        Arc::new(Defined {
            name,
            num_outputs: 1,
            shape,
            dtype,
            build,
        })
    }
}

impl Operator for Defined {
    fn name(&self) -> &'static str {
        self.name
    }

    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        (self.shape)(inputs)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        (self.dtype)(inputs)
    }

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for Defined {
    fn decompose(&self, shapes: &[Shape], types: &[DType]) -> Result<Decomposition> {
        let mut b = Builder::new();
        let outs = (self.build)(&mut b, shapes, types)?;
        b.finish(outs)
    }
}

/// An attribute value as MXNet writes a tuple: `(2, 3)`, `(4,)`.
pub fn tuple_attr(values: &[i64]) -> String {
    match values {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_numbers_steps_and_outputs_in_order() {
        let mut b = Builder::new();
        let s = b.op("square", &[], &[Src::Input(0)]).unwrap();
        let parts = b
            .op_n("SliceChannel", &[("num_outputs", "2".into())], &[s])
            .unwrap();
        assert_eq!(s, Src::Step(0, 0));
        assert_eq!(parts, vec![Src::Step(1, 0), Src::Step(1, 1)]);
        let d = b.finish(vec![parts[1]]).unwrap();
        assert_eq!(d.steps.len(), 2);
        assert_eq!(d.steps[1].inputs, vec![Src::Step(0, 0)]);
    }

    #[test]
    fn an_input_given_as_output_is_copied() {
        let d = Builder::new().finish(vec![Src::Input(0)]).unwrap();
        assert_eq!(d.outputs, vec![Src::Step(0, 0)]);
        assert_eq!(d.steps[0].op.name(), "_copy");
    }

    #[test]
    fn an_unknown_step_operator_is_an_error() {
        let mut b = Builder::new();
        assert!(b.op("no_such_op", &[], &[Src::Input(0)]).is_err());
    }

    #[test]
    fn tuples_are_written_as_mxnet_writes_them() {
        assert_eq!(tuple_attr(&[4]), "(4,)");
        assert_eq!(tuple_attr(&[2, -1]), "(2, -1)");
    }
}
