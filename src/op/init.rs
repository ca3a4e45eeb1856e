//! Definitions of the array creation operators: `_zeros`, `_ones`, `_full`, `_arange`,
//! `_eye`, `zeros_like`, `ones_like`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::given_or_like;
use crate::op::params::{ALL_TYPES, ALL_TYPES_WITH_BOOL};
use crate::op::{Attrs, Grad, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::{fmt_shape, zero_is_unknown, Shape};
use std::sync::Arc;

/// What a creation op writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fill {
    Value(f64),
    Arange {
        start: f64,
        step: f64,
        repeat: usize,
    },
    Eye {
        m: usize,
        k: i64,
    },
}

pub(crate) struct Init {
    pub(crate) name: &'static str,
    pub(crate) fill: Fill,
    /// Shape and dtype from attributes, or `None` to take the input's (`*_like`).
    pub(crate) shape: Option<(Shape, DType)>,
    /// Whether the shape attribute leaves sizes unknown (-1, held as 0) for graph
    /// inference to fill in.
    pub(crate) unknown_dims: bool,
}

impl Operator for Init {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        if self.unknown_dims && !zero_is_unknown() {
            return Err(Error::Value(format!(
                "{}: shape {} leaves sizes unknown (-1), which only a graph can infer",
                self.name,
                fmt_shape(self.shape.as_ref().map_or(&[][..], |(s, _)| s))
            )));
        }
        given_or_like(self.name, self.shape.as_ref().map(|(s, _)| s), inputs)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        match &self.shape {
            Some((_, t)) => Ok(vec![*t]),
            None => Ok(vec![inputs[0]]),
        }
    }
}

/// The shape attribute `key`, and whether it leaves sizes unknown: -1, held as 0 for
/// graph inference (MXNet's legacy unknown size).
pub(crate) fn shape_attr(p: &Params, key: &str) -> Result<(Shape, bool)> {
    let dims: Vec<i64> = p.get::<Option<Vec<i64>>>(key)?.unwrap_or_default();
    let shape = dims
        .iter()
        .map(|&d| match d {
            -1 => Ok(0),
            d => usize::try_from(d).map_err(|_| {
                Error::Value(format!(
                    "{}: shape {dims:?} has a negative dimension",
                    p.op()
                ))
            }),
        })
        .collect::<Result<Shape>>()?;
    Ok((shape, dims.contains(&-1)))
}

pub(crate) fn dtype_attr(p: &Params) -> Result<DType> {
    Ok(p.get::<Option<DType>>("dtype")?.unwrap_or(DType::F32))
}

const SHAPE: Param = Param::new("shape", "Shape(tuple)", "()", "The shape of the output");
const CTX: Param = Param::new(
    "ctx",
    "string",
    "''",
    "Context of output, in format [cpu|gpu|cpu_pinned](n).Only used for imperative calls.",
);
const DTYPE: Param = Param::new(
    "dtype",
    ALL_TYPES_WITH_BOOL,
    "'float32'",
    "Target data type.",
);

const FILLED_PARAMS: &[Param] = &[SHAPE, CTX, DTYPE];

const FULL_PARAMS: &[Param] = &[
    SHAPE,
    CTX,
    DTYPE,
    Param::new(
        "value",
        "double",
        "0",
        "Value with which to fill newly created tensor",
    ),
];

const ARANGE_PARAMS: &[Param] = &[
    Param::new(
        "start",
        "double",
        "0",
        "Start of interval. The interval includes this value. The default start value is 0.",
    ),
    Param::new(
        "stop",
        "double or None",
        "None",
        "End of interval. The interval does not include this value, except in some cases where step is not an integer and floating point round-off affects the length of out.",
    ),
    Param::new("step", "double", "1", "Spacing between values."),
    Param::new(
        "repeat",
        "int",
        "1",
        "The repeating time of all elements. E.g repeat=3, the element a will be repeated three times --> a, a, a.",
    ),
    Param::new(
        "infer_range",
        "boolean",
        "False",
        "When set to True, infer the stop position from the start, step, repeat, and output tensor size.",
    ),
    CTX,
    Param::new("dtype", ALL_TYPES, "'float32'", "Target data type."),
];

const EYE_PARAMS: &[Param] = &[
    Param::new("N", "long", "0", "Number of rows in the output."),
    Param::new(
        "M",
        "long",
        "0",
        "Number of columns in the output. If 0, defaults to N",
    ),
    Param::new(
        "k",
        "long",
        "0",
        "Index of the diagonal. 0 (the default) refers to the main diagonal.A positive value refers to an upper diagonal.A negative value to a lower diagonal.",
    ),
    CTX,
    Param::new(
        "dtype",
        "{'float16', 'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}",
        "'float32'",
        "Target data type.",
    ),
];

pub(crate) fn create_value(name: &'static str, value: Option<f64>, attrs: &Attrs) -> Result<OpRef> {
    let decls = if value.is_none() {
        FULL_PARAMS
    } else {
        FILLED_PARAMS
    };
    let p = Params::declared(name, attrs, decls)?;
    let v = match value {
        Some(v) => v,
        None => p.get("value")?,
    };
    let (shape, unknown_dims) = shape_attr(&p, "shape")?;
    Ok(Arc::new(Init {
        name,
        fill: Fill::Value(v),
        shape: Some((shape, dtype_attr(&p)?)),
        unknown_dims,
    }))
}

pub(crate) fn create_arange(attrs: &Attrs) -> Result<OpRef> {
    let name = "_arange";
    let p = Params::declared(name, attrs, ARANGE_PARAMS)?;
    let mut start: f64 = p.get("start")?;
    let stop: Option<f64> = p.get("stop")?;
    let step: f64 = p.get("step")?;
    let repeat: usize = p.get("repeat")?;
    let (start_v, stop_v) = match stop {
        Some(s) => (start, s),
        None => {
            let s = start;
            start = 0.0;
            (start, s)
        }
    };
    if step == 0.0 {
        return Err(Error::Value(format!("{name}: step must not be 0")));
    }
    if repeat == 0 {
        return Err(Error::Value(format!("{name}: repeat must be positive")));
    }
    let n = ((stop_v - start_v) / step).ceil().max(0.0) as usize;
    Ok(Arc::new(Init {
        name,
        fill: Fill::Arange {
            start: start_v,
            step,
            repeat,
        },
        shape: Some((Shape::from_slice(&[n * repeat]), dtype_attr(&p)?)),
        unknown_dims: false,
    }))
}

pub(crate) fn create_eye(attrs: &Attrs) -> Result<OpRef> {
    let name = "_eye";
    let p = Params::declared(name, attrs, EYE_PARAMS)?;
    let n: usize = p.get("N")?;
    let m = match p.get::<usize>("M")? {
        0 => n,
        m => m,
    };
    Ok(Arc::new(Init {
        name,
        fill: Fill::Eye { m, k: p.get("k")? },
        shape: Some((Shape::from_slice(&[n, m]), dtype_attr(&p)?)),
        unknown_dims: false,
    }))
}

pub(crate) fn create_like(name: &'static str, value: f64, attrs: &Attrs) -> Result<OpRef> {
    Params::declared(name, attrs, &[])?;
    Ok(Arc::new(Init {
        name,
        fill: Fill::Value(value),
        shape: None,
        unknown_dims: false,
    }))
}

/// Registers the creation operators.
pub fn register(r: &mut Registry) {
    let creation: [(&'static str, Option<f64>, &'static [Param]); 3] = [
        ("_zeros", Some(0.0), FILLED_PARAMS),
        ("_ones", Some(1.0), FILLED_PARAMS),
        ("_full", None, FULL_PARAMS),
    ];
    for (name, value, params) in creation {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &[],
            variadic: false,
            params,
            doc: "A new array filled with one value.",
            create: Box::new(move |a| create_value(name, value, a)),
        });
    }
    r.add(OpDef {
        name: "_arange",
        aliases: &[],
        inputs: &[],
        variadic: false,
        params: ARANGE_PARAMS,
        doc: "Evenly spaced values in [start, stop).",
        create: Box::new(create_arange),
    });
    r.add(OpDef {
        name: "_eye",
        aliases: &[],
        inputs: &[],
        variadic: false,
        params: EYE_PARAMS,
        doc: "A 2-D array with ones on the k-th diagonal.",
        create: Box::new(create_eye),
    });
    for (name, value) in [("zeros_like", 0.0), ("ones_like", 1.0)] {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &["data"],
            variadic: false,
            params: &[],
            doc: "An array of the input's shape and dtype filled with one value.",
            create: Box::new(move |a| create_like(name, value, a)),
        });
    }
}
