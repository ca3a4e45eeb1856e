//! Shape and type inference helpers. Each operator writes one inference: either the
//! full one (`infer_shape`, from which the trait derives the partial one) or the partial
//! one, from which [`infer_from_partial`] derives the full one, so the imperative path
//! and the graph passes can never disagree.

use super::{Operator, ShapeSlots, TypeSlots};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{fmt_shape, Shape};
use smallvec::SmallVec;

/// Writes `infer_shape` (`infer_from_partial!(shape)`) or `infer_type`
/// (`infer_from_partial!(type)`) through [`from_partial`], inside the `impl Operator` of an
/// operator whose one inference is the partial one.
macro_rules! infer_from_partial {
    (shape) => {
        $crate::op::infer::infer_from_partial!(infer_shape: $crate::shape::Shape);
    };
    (type) => {
        $crate::op::infer::infer_from_partial!(infer_type: $crate::dtype::DType);
    };
    ($method:ident: $t:ty) => {
        fn $method(&self, inputs: &[$t]) -> $crate::error::Result<Vec<$t>> {
            $crate::op::infer::from_partial(self, inputs)
        }
    };
}
pub(crate) use infer_from_partial;

/// Writes the inference of an element-wise operator inside its `impl Operator`: its
/// inputs (a number, or `self.field`) and its output share one shape and one dtype.
macro_rules! elementwise_inference {
    ($n:literal) => {
        $crate::op::infer::elementwise_inference!(@count |_: &Self| $n);
    };
    (self.$field:ident) => {
        $crate::op::infer::elementwise_inference!(@count |op: &Self| op.$field);
    };
    (@count $count:expr) => {
        fn infer_shape_partial(
            &self,
            inputs: &mut $crate::op::ShapeSlots,
            outputs: &mut $crate::op::ShapeSlots,
        ) -> $crate::error::Result<()> {
            $crate::op::infer::check_count(self.name(), inputs.len(), ($count)(self))?;
            $crate::op::infer::same_shape(self.name(), inputs, outputs)
        }

        $crate::op::infer::infer_from_partial!(shape);

        fn infer_type_partial(
            &self,
            inputs: &mut $crate::op::TypeSlots,
            outputs: &mut $crate::op::TypeSlots,
        ) -> $crate::error::Result<()> {
            $crate::op::infer::same_type(self.name(), inputs, outputs)
        }

        $crate::op::infer::infer_from_partial!(type);
    };
}
pub(crate) use elementwise_inference;

/// What inference fills in: a shape or a dtype.
pub trait Inferred: Clone + PartialEq {
    /// The word for it in messages.
    const NOUN: &'static str;
    /// How messages show a value.
    fn show(&self) -> String;
    /// The error for a message about it.
    fn error(msg: String) -> Error;
    /// The operator's partial inference of this.
    fn partial<O: Operator + ?Sized>(
        op: &O,
        inputs: &mut [Option<Self>],
        outputs: &mut [Option<Self>],
    ) -> Result<()>;
}

impl Inferred for Shape {
    const NOUN: &'static str = "shape";
    fn show(&self) -> String {
        fmt_shape(self)
    }
    fn error(msg: String) -> Error {
        Error::Value(msg)
    }
    fn partial<O: Operator + ?Sized>(
        op: &O,
        ins: &mut ShapeSlots,
        outs: &mut ShapeSlots,
    ) -> Result<()> {
        op.infer_shape_partial(ins, outs)
    }
}

impl Inferred for DType {
    const NOUN: &'static str = "dtype";
    fn show(&self) -> String {
        self.to_string()
    }
    fn error(msg: String) -> Error {
        Error::Type(msg)
    }
    fn partial<O: Operator + ?Sized>(
        op: &O,
        ins: &mut TypeSlots,
        outs: &mut TypeSlots,
    ) -> Result<()> {
        op.infer_type_partial(ins, outs)
    }
}

/// Outputs from fully known `inputs`, through the operator's partial inference: an
/// error if it changed an input or left an output unknown.
pub fn from_partial<O: Operator + ?Sized, T: Inferred>(op: &O, inputs: &[T]) -> Result<Vec<T>> {
    let name = op.name();
    let mut ins: SmallVec<[Option<T>; 4]> = inputs.iter().cloned().map(Some).collect();
    let mut outs: SmallVec<[Option<T>; 2]> = SmallVec::from_elem(None, op.num_outputs());
    T::partial(op, &mut ins, &mut outs)?;
    for (i, (given, got)) in inputs.iter().zip(&ins).enumerate() {
        if got.as_ref() != Some(given) {
            return Err(T::error(format!(
                "{name}: input {i} has {} {}, which does not fit the other inputs",
                T::NOUN,
                given.show()
            )));
        }
    }
    outs.into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.ok_or_else(|| {
                T::error(format!(
                    "{name}: cannot infer the {} of output {i}",
                    T::NOUN
                ))
            })
        })
        .collect()
}

/// The default partial shape inference: the outputs from `infer_shape` once every input
/// is known. Inputs with unknown (0) dimensions may not pass the operator's checks yet;
/// their outputs then stay unknown until more is known.
pub fn outputs_once_inputs_known<O: Operator + ?Sized>(
    op: &O,
    inputs: &ShapeSlots,
    outputs: &mut ShapeSlots,
) -> Result<()> {
    let Some(known) = inputs.iter().cloned().collect::<Option<Vec<Shape>>>() else {
        return Ok(());
    };
    match op.infer_shape(&known) {
        Ok(inferred) => super::assign_shapes(op.name(), "output", outputs, &inferred),
        Err(_) if known.iter().any(|s| crate::shape::is_partial(s)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The first known value among `inputs`, then `outputs`.
pub fn first_known<T: Clone>(inputs: &[Option<T>], outputs: &[Option<T>]) -> Option<T> {
    inputs.iter().chain(outputs).flatten().next().cloned()
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

/// The shape inference of an operator of `want` inputs whose one output has the shape of
/// input `like`: most backward operators, whose output is the gradient of that input.
pub fn shape_of_input(op: &str, inputs: &[Shape], want: usize, like: usize) -> Result<Vec<Shape>> {
    check_count(op, inputs.len(), want)?;
    Ok(vec![inputs[like].clone()])
}

/// The shape inference of a creation operator: the shape `given` by its attributes (no
/// inputs), or with `None` the shape of its one input (the `*_like` forms).
pub fn given_or_like(op: &str, given: Option<&Shape>, inputs: &[Shape]) -> Result<Vec<Shape>> {
    match given {
        Some(s) => {
            check_count(op, inputs.len(), 0)?;
            Ok(vec![s.clone()])
        }
        None => shape_of_input(op, inputs, 1, 0),
    }
}

/// Gives every slot among `inputs` and `outputs` the one shape they share, filling unknown
/// slots and unknown dimensions (0) from the known ones, and checks the known ones agree:
/// the shape inference of every element-wise operator. Allocates nothing unless shapes
/// disagree or are partly known.
pub fn same_shape(op: &str, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
    let Some(first) = first_known(inputs, outputs) else {
        return Ok(());
    };
    let all = inputs.iter().chain(outputs.iter()).flatten();
    let known = if all.clone().all(|s| *s == first) {
        first
    } else {
        let mut both = first;
        for s in all {
            match crate::shape::unify(&both, s) {
                Some(u) => both = u,
                None => break,
            }
        }
        both
    };
    fill_shapes(op, "input", inputs, &known)?;
    fill_shapes(op, "output", outputs, &known)
}

fn fill_shapes(op: &str, what: &str, slots: &mut ShapeSlots, known: &Shape) -> Result<()> {
    for (i, slot) in slots.iter_mut().enumerate() {
        match slot {
            Some(have) if have == known => {}
            Some(have) => match crate::shape::unify(have, known) {
                Some(u) if u == *known => *have = u,
                _ => {
                    return Err(Error::Value(format!(
                        "{op}: shape inconsistent for {what} {i}: expected {}, got {}",
                        fmt_shape(known),
                        fmt_shape(have)
                    )))
                }
            },
            None => *slot = Some(known.clone()),
        }
    }
    Ok(())
}

/// As [`same_shape`], for dtypes.
pub fn same_type(op: &str, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
    let Some(known) = first_known(inputs, outputs) else {
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
