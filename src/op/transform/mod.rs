//! Definitions of the transform operators: reshaping, transposing, joining, splitting,
//! slicing, tiling and broadcasting arrays; they move bytes and so work for every dtype.

pub mod broadcast;
pub mod join;
pub mod layout;
pub mod pad;
pub mod reshape;
pub mod sequence;
pub mod slice;
pub mod view;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::view::GatherBackward;
pub use crate::op::grad::view::ViewFn;
use crate::op::{
    assign_shape, check_inputs, same_dtype, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param,
    Params, Registry, ShapeSlots,
};
use crate::shape::{fmt_shape, is_partial, zero_is_unknown, Shape};
use std::sync::Arc;
use view::View;

/// An operator whose output is a strided view of its first input (transpose, slice,
/// flip, tile, broadcast...); further inputs only lend their shapes. The view may have
/// more axes than the output (tile, repeat) as long as the element order is the same.
pub(crate) struct Gather {
    pub(crate) name: &'static str,
    pub(crate) inputs: usize,
    pub(crate) view: ViewFn,
}

/// The output shape of a view read straight.
pub(crate) fn plain(v: View) -> (Shape, View) {
    (Shape::from_slice(&v.shape), v)
}

/// A one-input gather operator.
pub(crate) fn gather_op(
    name: &'static str,
    view: impl Fn(&[usize]) -> Result<(Shape, View)> + Send + Sync + 'static,
) -> Result<OpRef> {
    Ok(Arc::new(Gather {
        name,
        inputs: 1,
        view: Arc::new(move |s: &[Shape]| view(&s[0])),
    }))
}

/// A gather operator whose second input gives only a shape.
pub(crate) fn gather_op2(
    name: &'static str,
    view: impl Fn(&[usize], &[usize]) -> Result<(Shape, View)> + Send + Sync + 'static,
) -> Result<OpRef> {
    Ok(Arc::new(Gather {
        name,
        inputs: 2,
        view: Arc::new(move |s: &[Shape]| view(&s[0], &s[1])),
    }))
}

/// The one-input gathers whose output axes follow input axes one to one (a permutation,
/// or each kept or cut in place), so that an unknown input size leaves its output size
/// unknown and, for the permutations, a known output tells the input.
const AXIS_WISE: &[&str] = &["transpose", "SwapAxis", "reverse", "slice", "slice_axis"];

/// Stand-in input sizes while inferring over unknown ones: `PROBE + axis`, told apart from
/// real sizes by being at least `PROBE / 2` afterwards.
const PROBE: usize = 1 << 24;

impl Gather {
    /// Shapes over unknown (0) sizes for the [`AXIS_WISE`] gathers.
    fn infer_axis_wise(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let rank = inputs[0].as_ref().or(outputs[0].as_ref()).map(|s| s.len());
        // A probe of all-distinct sizes shows which input axis each output axis copies.
        if let (Some(rank), Some(out)) = (rank, &outputs[0]) {
            let probe: Shape = (0..rank).map(|k| PROBE + k).collect();
            if let Ok((moved, _)) = (self.view)(&[probe]) {
                let from: Option<Vec<usize>> = moved
                    .iter()
                    .map(|&d| d.checked_sub(PROBE).filter(|&k| k < rank))
                    .collect();
                if let Some(from) = from.filter(|f| f.len() == out.len()) {
                    let mut input: Shape = Shape::from_elem(0, rank);
                    for (&k, &o) in from.iter().zip(out.iter()) {
                        input[k] = o;
                    }
                    assign_shape(self.name, "input 0", &mut inputs[0], &input)?;
                }
            }
        }
        let Some(data) = &inputs[0] else {
            return Ok(());
        };
        if data.iter().filter(|&&d| d == 0).count() > 2 {
            return Ok(());
        }
        let probe: Shape = data
            .iter()
            .enumerate()
            .map(|(k, &d)| if d == 0 { PROBE + k } else { d })
            .collect();
        let Ok((out, _)) = (self.view)(&[probe]) else {
            return Ok(());
        };
        // A slice's axis of unknown size stays unknown whatever its bounds, as in MXNet.
        let sliced = |k: usize| self.name.starts_with("slice") && data[k] == 0;
        let out: Shape = out
            .iter()
            .enumerate()
            .map(|(k, &d)| if d >= PROBE / 2 || sliced(k) { 0 } else { d })
            .collect();
        assign_shape(self.name, "output 0", &mut outputs[0], &out)
    }
}

impl Operator for Gather {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let partly_known = |s: &Option<Shape>| s.as_ref().is_none_or(|s| is_partial(s));
        if self.inputs == 1
            && zero_is_unknown()
            && AXIS_WISE.contains(&self.name)
            && inputs.len() == 1
            && partly_known(&inputs[0])
        {
            return self.infer_axis_wise(inputs, outputs);
        }
        crate::op::infer::outputs_once_inputs_known(self, inputs, outputs)
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, self.inputs)?;
        let (shape, _) = (self.view)(inputs)?;
        checked_size(self.name, &shape)?;
        Ok(vec![shape])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        // The shape-only inputs may have any dtype.
        Ok(vec![same_dtype(self.name, &inputs[..inputs.len().min(1)])?])
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(GatherBackward {
            name: backward_name(self.name),
            view: self.view.clone(),
            inputs: self.inputs,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: (0..self.inputs).collect(),
            outputs: vec![],
            grad_of: vec![0],
        })
    }
}

/// MXNet's name of the backward op of a gather operator.
pub(crate) fn backward_name(name: &str) -> &'static str {
    match name {
        "transpose" => "_backward_transpose",
        "SwapAxis" => "_backward_SwapAxis",
        "reverse" => "_backward_reverse",
        "depth_to_space" => "_backward_depth_to_space",
        "space_to_depth" => "_backward_space_to_depth",
        "slice" => "_backward_slice",
        "slice_axis" => "_backward_slice_axis",
        "slice_like" => "_backward_slice_like",
        "reshape_like" => "_backward_reshape_like",
        "broadcast_to" => "_backward_broadcast_to",
        "broadcast_like" => "_backward_broadcast_like",
        "broadcast_axis" => "_backward_broadcast_axis",
        "tile" => "_backward_tile",
        "repeat" => "_backward_repeat",
        _ => "_backward_gather",
    }
}

/// Builds an operator definition; `create` parses the attributes.
pub(crate) fn def(
    name: &'static str,
    aliases: &'static [&'static str],
    inputs: &'static [&'static str],
    params: &'static [Param],
    doc: &'static str,
    create: fn(&Attrs) -> Result<OpRef>,
) -> OpDef {
    OpDef {
        name,
        aliases,
        inputs,
        variadic: false,
        params,
        doc,
        create: Box::new(create),
    }
}

/// A tuple attribute whose declared default is `()`; `None` also reads as empty.
pub(crate) fn tuple_or_empty(p: &Params, key: &str) -> Result<Vec<i64>> {
    Ok(p.get::<Option<Vec<i64>>>(key)?.unwrap_or_default())
}

/// Normalises `axis` for `ndim` dimensions, where `-ndim <= axis < ndim`.
pub(crate) fn axis_in(op: &str, axis: i64, ndim: usize) -> Result<usize> {
    crate::shape::norm_axis(axis, ndim, op)
}

/// A tuple of dimension sizes, each non-negative.
pub(crate) fn dims(op: &str, key: &str, v: &[i64]) -> Result<Vec<usize>> {
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                Error::Value(format!(
                    "{op}: '{key}' must hold non-negative sizes, got {}",
                    fmt_tuple(v)
                ))
            })
        })
        .collect()
}

/// `(a, b)` text of an attribute tuple for messages.
pub(crate) fn fmt_tuple(v: &[i64]) -> String {
    match v.len() {
        1 => format!("({},)", v[0]),
        _ => format!(
            "({})",
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The number of elements of `shape`, or an error if it overflows.
pub(crate) fn checked_size(op: &str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::Value(format!(
                "{op}: the result shape {} is too large",
                fmt_shape(shape)
            ))
        })
}

/// Registers the transform operators.
pub fn register(r: &mut Registry) {
    reshape::register(r);
    layout::register(r);
    join::register(r);
    slice::register(r);
    broadcast::register(r);
    sequence::register(r);
    pad::register(r);
}
