//! Definitions of the reductions over axes (`sum`, `mean`, `prod`, `max`, `min`,
//! `nansum`, `nanprod`, `norm`) and index reductions (`argmax`, `argmin`,
//! `argmax_channel`).
//!
//! A reduction merges neighbouring axes that are all reduced or all kept, then removes
//! the reduced groups innermost first. Each step views its input as (outer, reduced,
//! inner): with `inner == 1` the reduced axis is contiguous and is folded with several
//! independent accumulators (vectorisable); otherwise whole rows are combined
//! element-wise. Large inputs are split across the rayon pool over output blocks, columns
//! or the reduced axis.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::reduce::ReduceBackward;
use crate::op::transform::fmt_tuple;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// The reductions over axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    NanSum,
    NanProd,
    /// Sum of absolute values (`norm` with `ord=1`).
    Norm1,
    /// Square root of the sum of squares (`norm` with `ord=2`).
    Norm2,
}

/// Which axes of `shape` are reduced and the output shape, as MXNet's reduce ops decide
/// them: no axis (or an empty tuple) reduces everything; `exclude` reduces the axes not
/// named; a result without axes has shape `(1,)` unless `keepdims` keeps them all as 1.
pub fn reduce_axes(
    op: &str,
    shape: &[usize],
    axis: Option<&[i64]>,
    keepdims: bool,
    exclude: bool,
) -> Result<(Vec<bool>, Shape)> {
    let nd = shape.len();
    let mask = match axis {
        None | Some([]) => vec![true; nd],
        Some(axes) => {
            let mut mask = vec![false; nd];
            for &a in axes {
                let n = if a < 0 { a + nd as i64 } else { a };
                if n < 0 || n >= nd as i64 {
                    return Err(Error::Index(format!(
                        "{op}: axis {a} is out of range for an array of shape {}",
                        fmt_shape(shape)
                    )));
                }
                if mask[n as usize] {
                    return Err(Error::Value(format!(
                        "{op}: axis {n} appears more than once in axis={} for an array of shape {}",
                        fmt_tuple(axes),
                        fmt_shape(shape)
                    )));
                }
                mask[n as usize] = true;
            }
            if exclude {
                mask.iter_mut().for_each(|m| *m = !*m);
            }
            mask
        }
    };
    let out: Shape = if keepdims {
        shape
            .iter()
            .zip(&mask)
            .map(|(&d, &m)| if m { 1 } else { d })
            .collect()
    } else {
        let kept: Shape = shape
            .iter()
            .zip(&mask)
            .filter(|(_, &m)| !m)
            .map(|(&d, _)| d)
            .collect();
        if kept.is_empty() {
            Shape::from_slice(&[1])
        } else {
            kept
        }
    };
    Ok((mask, out))
}

pub(crate) fn no_bool(op: &str, t: DType) -> Result<DType> {
    if t == DType::Bool {
        return Err(Error::Type(format!("{op}: dtype bool is not supported")));
    }
    Ok(t)
}

/// A reduction over axes.
pub(crate) struct Reduce {
    pub(crate) name: &'static str,
    pub(crate) kind: ReduceKind,
    pub(crate) axis: Option<Vec<i64>>,
    pub(crate) keepdims: bool,
    pub(crate) exclude: bool,
    pub(crate) out_dtype: Option<DType>,
}

impl Operator for Reduce {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 1)?;
        let (mask, out) = reduce_axes(
            self.name,
            &inputs[0],
            self.axis.as_deref(),
            self.keepdims,
            self.exclude,
        )?;
        let empty = mask
            .iter()
            .zip(inputs[0].iter())
            .any(|(&m, &d)| m && d == 0);
        if empty
            && matches!(self.kind, ReduceKind::Max | ReduceKind::Min)
            && !crate::shape::zero_is_unknown()
        {
            return Err(Error::Value(format!(
                "{}: cannot reduce an empty axis of data of shape {}: it has no identity",
                self.name,
                fmt_shape(&inputs[0])
            )));
        }
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let t = no_bool(self.name, crate::op::same_dtype(self.name, inputs)?)?;
        Ok(vec![self.out_dtype.unwrap_or(t)])
    }

    fn gradient(&self) -> Grad {
        let name = match self.kind {
            ReduceKind::Sum => "_backward_sum",
            ReduceKind::Mean => "_backward_mean",
            ReduceKind::Prod => "_backward_prod",
            ReduceKind::Max => "_backward_max",
            ReduceKind::Min => "_backward_min",
            ReduceKind::NanSum => "_backward_nansum",
            ReduceKind::NanProd => "_backward_nanprod",
            ReduceKind::Norm1 | ReduceKind::Norm2 => "_backward_norm",
        };
        let op = Arc::new(ReduceBackward {
            name,
            kind: self.kind,
            axis: self.axis.clone(),
            exclude: self.exclude,
        });
        Gradient::simple(op, &[0], &[0], 1)
    }
}

/// A reduction operator by kind, for callers in the core (`axis` `None` reduces all).
pub fn reduce_op(
    name: &'static str,
    kind: ReduceKind,
    axis: Option<Vec<i64>>,
    keepdims: bool,
    exclude: bool,
) -> OpRef {
    Arc::new(Reduce {
        name,
        kind,
        axis,
        keepdims,
        exclude,
        out_dtype: None,
    })
}

/// `argmax`, `argmin` and `argmax_channel`: the index along one axis (or of the flattened
/// array), in the input's dtype as MXNet gives it.
pub(crate) struct ArgReduce {
    pub(crate) name: &'static str,
    pub(crate) max: bool,
    pub(crate) axis: Option<i64>,
    pub(crate) keepdims: bool,
}

impl ArgReduce {
    pub(crate) fn axis(&self, shape: &[usize]) -> Result<Option<usize>> {
        let Some(a) = self.axis else { return Ok(None) };
        let nd = shape.len() as i64;
        if a < -nd || a >= nd {
            return Err(Error::Index(format!(
                "{}: axis {a} is out of range for an array of shape {}",
                self.name,
                fmt_shape(shape)
            )));
        }
        Ok(Some(if a < 0 { a + nd } else { a } as usize))
    }
}

impl Operator for ArgReduce {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 1)?;
        let shape = &inputs[0];
        let out: Shape = match self.axis(shape)? {
            None if self.keepdims => Shape::from_elem(1, shape.len()),
            None => Shape::from_slice(&[1]),
            Some(a) if self.keepdims => {
                let mut s = shape.clone();
                s[a] = 1;
                s
            }
            Some(a) => {
                let s: Shape = shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != a)
                    .map(|(_, &d)| d)
                    .collect();
                if s.is_empty() {
                    Shape::from_slice(&[1])
                } else {
                    s
                }
            }
        };
        let axis_len = self
            .axis(shape)?
            .map_or(shape.iter().product(), |a| shape[a]);
        if axis_len == 0 && out.iter().product::<usize>() > 0 {
            return Err(Error::Value(format!(
                "{}: cannot take the index of an extreme over an empty axis, got shape {}",
                self.name,
                fmt_shape(shape)
            )));
        }
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![no_bool(
            self.name,
            crate::op::same_dtype(self.name, inputs)?,
        )?])
    }
}

pub(crate) type Entry = (
    &'static str,
    &'static [&'static str],
    ReduceKind,
    &'static str,
);

pub(crate) const REDUCE_OPS: &[Entry] = &[
    (
        "sum",
        &["sum_axis"],
        ReduceKind::Sum,
        "Sum of array elements over the given axes.",
    ),
    (
        "mean",
        &[],
        ReduceKind::Mean,
        "Mean of array elements over the given axes.",
    ),
    (
        "prod",
        &[],
        ReduceKind::Prod,
        "Product of array elements over the given axes.",
    ),
    (
        "max",
        &["max_axis"],
        ReduceKind::Max,
        "Maximum of array elements over the given axes.",
    ),
    (
        "min",
        &["min_axis"],
        ReduceKind::Min,
        "Minimum of array elements over the given axes.",
    ),
    (
        "nansum",
        &[],
        ReduceKind::NanSum,
        "Sum over the given axes, NaN counted as zero.",
    ),
    (
        "nanprod",
        &[],
        ReduceKind::NanProd,
        "Product over the given axes, NaN counted as one.",
    ),
];

const AXES_DOC: &str = "The axis or axes along which to perform the reduction.";
const KEEPDIMS_DOC: &str =
    "If this is set to `True`, the reduced axes are left in the result as dimension with size one.";
const KEEPDIM_DOC: &str =
    "If this is set to `True`, the reduced axis is left in the result as dimension with size one.";

pub(crate) const REDUCE_PARAMS: &[Param] = &[
    Param::new("axis", "Shape or None", "None", AXES_DOC),
    Param::new("keepdims", "boolean", "False", KEEPDIMS_DOC),
    Param::new(
        "exclude",
        "boolean",
        "False",
        "Whether to perform reduction on axis that are NOT in axis instead.",
    ),
];

const NORM_DTYPES: &[&str] = &[
    "None", "float16", "float32", "float64", "int32", "int64", "int8",
];

pub(crate) const NORM_PARAMS: &[Param] = &[
    Param::new(
        "ord",
        "int",
        "2",
        "Order of the norm. Currently ord=1 and ord=2 is supported.",
    ),
    Param::new("axis", "Shape or None", "None", AXES_DOC),
    Param::new(
        "out_dtype",
        "{None, 'float16', 'float32', 'float64', 'int32', 'int64', 'int8'}",
        "None",
        "The data type of the output.",
    ),
    Param::new("keepdims", "boolean", "False", KEEPDIM_DOC),
];

pub(crate) const ARG_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "None",
        "The axis along which to perform the reduction. Negative values means indexing from right to left.",
    ),
    Param::new("keepdims", "boolean", "False", KEEPDIM_DOC),
];

/// `argmax_channel` accepts `argmax`'s attributes and, as MXNet's parser does, ignores
/// them.
const ARG_CHANNEL_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "None",
        "Accepted and ignored: the reduction is always along axis 1.",
    ),
    Param::new(
        "keepdims",
        "boolean",
        "False",
        "Accepted and ignored: the reduced axis is always removed.",
    ),
];

pub(crate) fn create_norm(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("norm", attrs, NORM_PARAMS)?;
    let kind = match p.get::<i64>("ord")? {
        1 => ReduceKind::Norm1,
        2 => ReduceKind::Norm2,
        o => {
            return Err(Error::Value(format!(
                "norm: ord={o} is not supported; norm only supports ord=1 and ord=2"
            )))
        }
    };
    let out_dtype = match p.get_choice("out_dtype", NORM_DTYPES)? {
        "None" => None,
        name => Some(DType::from_name(name)?),
    };
    Ok(Arc::new(Reduce {
        name: "norm",
        kind,
        axis: p.get("axis")?,
        keepdims: p.get("keepdims")?,
        exclude: false,
        out_dtype,
    }))
}

pub(crate) fn create_arg(name: &'static str, max: bool, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(name, attrs, ARG_PARAMS)?;
    Ok(Arc::new(ArgReduce {
        name,
        max,
        axis: p.get("axis")?,
        keepdims: p.get("keepdims")?,
    }))
}

/// Registers the reduce operators.
pub fn register(r: &mut Registry) {
    for &(name, aliases, kind, doc) in REDUCE_OPS {
        r.add(OpDef {
            name,
            aliases,
            inputs: &["data"],
            variadic: false,
            params: REDUCE_PARAMS,
            doc,
            create: Box::new(move |attrs: &Attrs| -> Result<OpRef> {
                let p = Params::declared(name, attrs, REDUCE_PARAMS)?;
                Ok(reduce_op(
                    name,
                    kind,
                    p.get("axis")?,
                    p.get("keepdims")?,
                    p.get("exclude")?,
                ))
            }),
        });
    }
    r.add(OpDef {
        name: "norm",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: NORM_PARAMS,
        doc: "The 1-norm or 2-norm over the given axes (all elements by default).",
        create: Box::new(create_norm),
    });
    r.add(OpDef {
        name: "argmax",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ARG_PARAMS,
        doc: "Index of the maximum along an axis (of the flattened array without one).",
        create: Box::new(|attrs: &Attrs| create_arg("argmax", true, attrs)),
    });
    r.add(OpDef {
        name: "argmin",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ARG_PARAMS,
        doc: "Index of the minimum along an axis (of the flattened array without one).",
        create: Box::new(|attrs: &Attrs| create_arg("argmin", false, attrs)),
    });
    r.add(OpDef {
        name: "argmax_channel",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ARG_CHANNEL_PARAMS,
        doc: "Index of the maximum along axis 1.",
        create: Box::new(|attrs: &Attrs| -> Result<OpRef> {
            // MXNet's parser fixes axis=1 and ignores what it is given.
            Params::declared("argmax_channel", attrs, ARG_CHANNEL_PARAMS)?;
            Ok(Arc::new(ArgReduce {
                name: "argmax_channel",
                max: true,
                axis: Some(1),
                keepdims: false,
            }))
        }),
    });
}
