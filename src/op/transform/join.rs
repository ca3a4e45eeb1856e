//! Definitions of the operators that join and split arrays along an axis: `Concat`,
//! `stack` and `SliceChannel` (split).

use crate::error::{Error, Result};
use crate::op::grad::join::ConcatBackward;
use crate::op::infer::infer_from_partial;
use crate::op::transform::{axis_in, def};
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ShapeSlots,
};
use crate::shape::{fmt_shape, is_partial, unify, zero_is_unknown, Shape};
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
    match p.get::<Option<i64>>("num_args")? {
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

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        concat_partial(self.dim, self.num_args, inputs, &mut outputs[0])
    }

    infer_from_partial!(shape);

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

/// The shape `a` and `b` agree on for every axis but `axis` (unknown sizes filled from
/// the other), with `a`'s length on `axis`; `None` when they disagree.
fn unify_but(a: &[usize], b: &[usize], axis: usize) -> Option<Shape> {
    let mut b = Shape::from_slice(b);
    *b.get_mut(axis)? = *a.get(axis)?;
    unify(a, &b)
}

/// `Concat`'s shape inference over partly known shapes, as MXNet's: every axis but the
/// joined one is shared by all inputs and the output; the output's joined axis is the
/// sum of the inputs', and a single unknown input length is what the output leaves.
pub(crate) fn concat_partial(
    dim: i64,
    num_args: Option<usize>,
    inputs: &mut ShapeSlots,
    output: &mut Option<Shape>,
) -> Result<()> {
    let op = "Concat";
    check_count(op, inputs.len(), num_args)?;
    let mut known = inputs.iter().chain(std::iter::once(&*output)).flatten();
    let Some(mut common) = known.next().cloned() else {
        return Ok(());
    };
    let axis = axis_in(op, dim, common.len())?;
    for s in known {
        common = unify_but(&common, s, axis).ok_or_else(|| {
            Error::Value(format!(
                "{op}: cannot concatenate arrays of shapes {} and {} along axis {axis}",
                fmt_shape(&common),
                fmt_shape(s)
            ))
        })?;
    }
    let unknown_len = |s: &Option<Shape>| s.as_ref().is_none_or(|s| is_partial(&s[axis..=axis]));
    let mut total = 0usize;
    let mut missing = Vec::new();
    for (i, slot) in inputs.iter_mut().enumerate() {
        if unknown_len(slot) {
            missing.push(i);
        }
        if let Some(s) = slot {
            let len = s[axis];
            *s = common.clone();
            s[axis] = len;
            total = total
                .checked_add(len)
                .ok_or_else(|| Error::Value(format!("{op}: the result is too large")))?;
        }
    }
    let mut out = common.clone();
    match (missing.as_slice(), output.as_ref()) {
        ([], _) => {
            out[axis] = total;
            return assign_shape(op, "output 0", output, &out);
        }
        (&[i], Some(o)) if !unknown_len(output) && o[axis] >= total => {
            let mut s = common;
            s[axis] = o[axis] - total;
            assign_shape(op, &format!("input {i}"), &mut inputs[i], &s)?;
        }
        _ => {}
    }
    if zero_is_unknown() {
        // The joined length stays unknown, the other axes are known.
        out[axis] = output.as_ref().map_or(0, |o| o[axis]);
        assign_shape(op, "output 0", output, &out)?;
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

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count("stack", inputs.len(), self.num_args)?;
        let Some(first) = inputs.iter().flatten().next().cloned() else {
            return Ok(());
        };
        for slot in inputs.iter_mut() {
            match slot {
                Some(s) if *s != first => {
                    return Err(Error::Value(format!(
                        "stack: all inputs must have the same shape, got {} and {}",
                        fmt_shape(&first),
                        fmt_shape(s)
                    )))
                }
                Some(_) => {}
                None => *slot = Some(first.clone()),
            }
        }
        let axis = self.axis(first.len())?;
        let mut out = first;
        out.insert(axis, inputs.len());
        assign_shape("stack", "output 0", &mut outputs[0], &out)
    }

    infer_from_partial!(shape);

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

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let op = "SliceChannel";
        check_count(op, inputs.len(), Some(1))?;
        // The parts share one shape, which tells the input's.
        crate::op::infer::same_shape(op, &mut [], outputs)?;
        if let Some(part) = outputs.first().cloned().flatten() {
            let n = self.num_outputs;
            let axis = axis_in(op, self.axis, part.len() + usize::from(self.squeeze_axis))?;
            let mut whole = part;
            if self.squeeze_axis {
                whole.insert(axis, n);
            } else {
                whole[axis] = whole[axis].saturating_mul(n);
            }
            assign_shape(op, "input 0", &mut inputs[0], &whole)?;
        }
        crate::op::infer::outputs_once_inputs_known(self, inputs, outputs)
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
    let p = Params::declared("Concat", attrs, CONCAT_PARAMS)?;
    Ok(Arc::new(Concat {
        dim: p.get("dim")?,
        num_args: num_args("Concat", &p)?,
    }))
}

pub(crate) fn create_stack(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("stack", attrs, STACK_PARAMS)?;
    Ok(Arc::new(Stack {
        axis: p.get("axis")?,
        num_args: num_args("stack", &p)?,
    }))
}

pub(crate) fn create_split(attrs: &Attrs) -> Result<OpRef> {
    let op = "SliceChannel";
    let p = Params::declared(op, attrs, SPLIT_PARAMS)?;
    let n: i64 = p.get("num_outputs")?;
    if n < 1 {
        return Err(Error::Value(format!(
            "{op}: num_outputs must be at least 1, got {n}"
        )));
    }
    Ok(Arc::new(SliceChannel {
        num_outputs: n as usize,
        axis: p.get("axis")?,
        squeeze_axis: p.get("squeeze_axis")?,
    }))
}

const CONCAT_PARAMS: &[Param] = &[
    Param::new(
        "num_args",
        "int",
        "None",
        "Number of inputs to be concated; rsmx takes the number of inputs given when it is not set.",
    ),
    Param::new("dim", "int", "1", "the dimension to be concated."),
];

const STACK_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int",
        "0",
        "The axis in the result array along which the input arrays are stacked.",
    ),
    Param::new(
        "num_args",
        "int",
        "None",
        "Number of inputs to be stacked; rsmx takes the number of inputs given when it is not set.",
    ),
];

const SPLIT_PARAMS: &[Param] = &[
    Param::required(
        "num_outputs",
        "int",
        "Number of splits. Note that this should evenly divide the length of the `axis`.",
    ),
    Param::new("axis", "int", "1", "Axis along which to split."),
    Param::new(
        "squeeze_axis",
        "boolean",
        "False",
        "If true, Removes the axis with length 1 from the shapes of the output arrays. **Note** that setting `squeeze_axis` to ``true`` removes axis with length 1 only along the `axis` which it is split. Also `squeeze_axis` can be set to ``true`` only if ``input.shape[axis] == num_outputs``.",
    ),
];

pub(super) fn register(r: &mut Registry) {
    r.add(OpDef {
        variadic: true,
        ..def(
            "Concat",
            &["concat"],
            &["data"],
            CONCAT_PARAMS,
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
            STACK_PARAMS,
            "Joins arrays of one shape along a new axis.",
            create_stack,
        )
    });
    r.add(def(
        "SliceChannel",
        &["split"],
        &["data"],
        SPLIT_PARAMS,
        "Splits an array into equal parts along an axis.",
        create_split,
    ));
}
