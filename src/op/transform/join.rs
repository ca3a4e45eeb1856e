//! Definitions of the operators that join and split arrays along an axis: `Concat`,
//! `stack` and `SliceChannel` (split).

use crate::error::{Error, Result};
use crate::op::grad::join::ConcatBackward;
use crate::op::transform::{axis_in, def};
use crate::op::{assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// Checks the input count against `num_args`, if it was given.
pub(crate) fn check_count(op: &str, inputs: usize, num_args: Option<usize>) -> Result<()> {
    if inputs == 0 {
        return Err(Error::Value(format!(
            "{op}: at least one input is required"
        )));
    }
    if let Some(n) = num_args {
        if n != inputs {
            return Err(Error::Value(format!(
                "{op}: num_args is {n} but {inputs} input(s) were given"
            )));
        }
    }
    Ok(())
}

pub(crate) fn num_args(op: &str, p: &Params) -> Result<Option<usize>> {
    match p.opt_int("num_args")? {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(n as usize)),
        Some(n) => Err(Error::Value(format!(
            "{op}: num_args must be at least 1, got {n}"
        ))),
    }
}

pub(crate) struct Concat {
    pub(crate) dim: i64,
    pub(crate) num_args: Option<usize>,
}

impl Operator for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let op = "Concat";
        check_count(op, inputs.len(), self.num_args)?;
        let first = &inputs[0];
        let axis = axis_in(op, self.dim, first.len())?;
        let mut out = first.clone();
        for s in &inputs[1..] {
            let same =
                s.len() == first.len() && (0..s.len()).all(|k| k == axis || s[k] == first[k]);
            if !same {
                return Err(Error::Value(format!(
                    "{op}: cannot concatenate arrays of shapes {} and {} along axis {axis}",
                    fmt_shape(first),
                    fmt_shape(s)
                )));
            }
            out[axis] = out[axis]
                .checked_add(s[axis])
                .ok_or_else(|| Error::Value(format!("{op}: the result is too large")))?;
        }
        Ok(vec![out])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        concat_partial(self.dim, inputs, &mut outputs[0])
    }

    fn gradient(&self) -> Grad {
        let Some(n) = self.num_args else {
            return Grad::Undefined;
        };
        let op = Arc::new(ConcatBackward {
            dim: self.dim,
            num_args: n,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: (0..n).collect(),
            outputs: vec![],
            grad_of: (0..n).collect(),
        })
    }
}

/// `Concat`'s shape inference over partly known shapes, as MXNet's: every axis but the
/// joined one is shared by all inputs and the output; the output's joined axis is the
/// sum of the inputs', and a single unknown input length is what the output leaves.
pub(crate) fn concat_partial(
    dim: i64,
    inputs: &mut [Option<Shape>],
    output: &mut Option<Shape>,
) -> Result<()> {
    let op = "Concat";
    let Some(ndim) = inputs
        .iter()
        .chain(std::iter::once(&*output))
        .flatten()
        .map(|s| s.len())
        .next()
    else {
        return Ok(());
    };
    let axis = axis_in(op, dim, ndim)?;
    // Shared dims; 0 marks unknown (the joined axis stays unknown here).
    let mut common: Option<Shape> = None;
    for s in inputs.iter().chain(std::iter::once(&*output)).flatten() {
        let mut t = s.clone();
        t[axis] = 0;
        match &common {
            Some(c) if *c != t => {
                return Err(Error::Value(format!(
                    "{op}: cannot concatenate arrays of shapes {} and {} along axis {axis}",
                    fmt_shape(c),
                    fmt_shape(s)
                )))
            }
            _ => common = Some(t),
        }
    }
    let Some(common) = common else {
        return Ok(());
    };
    let known: usize = inputs.iter().flatten().map(|s| s[axis]).sum();
    let missing: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].is_none()).collect();
    match (missing.as_slice(), output.as_ref()) {
        ([], _) => {
            let mut o = common.clone();
            o[axis] = known;
            assign_shape(op, "output 0", output, &o)?;
        }
        ([i], Some(o)) if o[axis] >= known => {
            let mut s = common.clone();
            s[axis] = o[axis] - known;
            inputs[*i] = Some(s);
        }
        _ => {}
    }
    Ok(())
}

pub(crate) struct Stack {
    pub(crate) axis: i64,
    pub(crate) num_args: Option<usize>,
}

impl Stack {
    pub(crate) fn axis(&self, ndim: usize) -> Result<usize> {
        let n = ndim as i64;
        let a = if self.axis < 0 {
            self.axis + n + 1
        } else {
            self.axis
        };
        if a < 0 || a > n {
            return Err(Error::Index(format!(
                "stack: axis {} is out of bounds for stacking arrays of {ndim} dimension(s)",
                self.axis
            )));
        }
        Ok(a as usize)
    }
}

impl Operator for Stack {
    fn name(&self) -> &'static str {
        "stack"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_count("stack", inputs.len(), self.num_args)?;
        let first = &inputs[0];
        if let Some(s) = inputs.iter().find(|s| *s != first) {
            return Err(Error::Value(format!(
                "stack: all inputs must have the same shape, got {} and {}",
                fmt_shape(first),
                fmt_shape(s)
            )));
        }
        let axis = self.axis(first.len())?;
        let mut out = first.clone();
        out.insert(axis, inputs.len());
        Ok(vec![out])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        let Some(first) = inputs.iter().flatten().next().cloned() else {
            return Ok(());
        };
        for (i, s) in inputs.iter_mut().enumerate() {
            assign_shape("stack", &format!("input {i}"), s, &first)?;
        }
        let all: Vec<Shape> = inputs.iter().flatten().cloned().collect();
        let out = self.infer_shape(&all)?;
        crate::op::assign_shapes("stack", "output", outputs, &out)
    }

    fn gradient(&self) -> Grad {
        let Some(n) = self.num_args else {
            return Grad::Undefined;
        };
        let op = Arc::new(SliceChannel {
            num_outputs: n,
            axis: self.axis,
            squeeze_axis: true,
        });
        Gradient::simple(op, &[], &[], n)
    }
}

pub(crate) struct SliceChannel {
    pub(crate) num_outputs: usize,
    pub(crate) axis: i64,
    pub(crate) squeeze_axis: bool,
}

impl SliceChannel {
    pub(crate) fn check(&self, s: &[usize]) -> Result<usize> {
        let op = "SliceChannel";
        let axis = axis_in(op, self.axis, s.len())?;
        let n = self.num_outputs;
        if !s[axis].is_multiple_of(n) {
            return Err(Error::Value(format!(
                "{op}: cannot split axis {axis} of an array of shape {} into {n} equal parts \
                 ({n} does not divide {})",
                fmt_shape(s),
                s[axis]
            )));
        }
        if self.squeeze_axis && s[axis] != n {
            return Err(Error::Value(format!(
                "{op}: with squeeze_axis=True the split axis must have num_outputs={n} \
                 elements, got shape {} and axis {axis}",
                fmt_shape(s)
            )));
        }
        Ok(axis)
    }
}

impl Operator for SliceChannel {
    fn name(&self) -> &'static str {
        "SliceChannel"
    }

    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn gradient(&self) -> Grad {
        let n = self.num_outputs;
        let op: OpRef = if self.squeeze_axis {
            Arc::new(Stack {
                axis: self.axis,
                num_args: Some(n),
            })
        } else {
            Arc::new(Concat {
                dim: self.axis,
                num_args: Some(n),
            })
        };
        Grad::Op(Gradient {
            op,
            ograds: (0..n).collect(),
            inputs: vec![],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        crate::op::check_inputs("SliceChannel", inputs, 1)?;
        let s = &inputs[0];
        let axis = self.check(s)?;
        let mut out = s.clone();
        if self.squeeze_axis {
            out.remove(axis);
        } else {
            out[axis] /= self.num_outputs;
        }
        Ok(vec![out; self.num_outputs])
    }
}

pub(crate) fn create_concat(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("Concat", attrs, &["num_args", "dim"])?;
    Ok(Arc::new(Concat {
        dim: p.int("dim", 1)?,
        num_args: num_args("Concat", &p)?,
    }))
}

pub(crate) fn create_stack(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("stack", attrs, &["num_args", "axis"])?;
    Ok(Arc::new(Stack {
        axis: p.int("axis", 0)?,
        num_args: num_args("stack", &p)?,
    }))
}

pub(crate) fn create_split(attrs: &Attrs) -> Result<OpRef> {
    let op = "SliceChannel";
    let p = Params::new(op, attrs, &["num_outputs", "axis", "squeeze_axis"])?;
    let n = p.int_required("num_outputs")?;
    if n < 1 {
        return Err(Error::Value(format!(
            "{op}: num_outputs must be at least 1, got {n}"
        )));
    }
    Ok(Arc::new(SliceChannel {
        num_outputs: n as usize,
        axis: p.int("axis", 1)?,
        squeeze_axis: p.bool("squeeze_axis", false)?,
    }))
}

pub(super) fn register(r: &mut Registry) {
    r.add(OpDef {
        variadic: true,
        ..def(
            "Concat",
            &["concat"],
            &["data"],
            &["num_args", "dim"],
            "Joins arrays along an existing axis.",
            create_concat,
        )
    });
    r.add(OpDef {
        variadic: true,
        ..def(
            "stack",
            &[],
            &["data"],
            &["num_args", "axis"],
            "Joins arrays of one shape along a new axis.",
            create_stack,
        )
    });
    r.add(def(
        "SliceChannel",
        &["split"],
        &["data"],
        &["num_outputs", "axis", "squeeze_axis"],
        "Splits an array into equal parts along an axis.",
        create_split,
    ));
}
