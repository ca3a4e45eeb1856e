//! Definitions of the array creation operators: `_zeros`, `_ones`, `_full`, `_arange`,
//! `_eye`, `zeros_like`, `ones_like`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, Attrs, Grad, OpDef, OpRef, Operator, ParamList, Params, Registry};
use crate::shape::Shape;
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
}

impl Operator for Init {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        match &self.shape {
            Some((s, _)) => {
                check_inputs(self.name, inputs, 0)?;
                Ok(vec![s.clone()])
            }
            None => {
                check_inputs(self.name, inputs, 1)?;
                Ok(vec![inputs[0].clone()])
            }
        }
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        match &self.shape {
            Some((_, t)) => Ok(vec![*t]),
            None => Ok(vec![inputs[0]]),
        }
    }
}

pub(crate) fn shape_attr(p: &Params, key: &str) -> Result<Shape> {
    let dims = p.tuple(key, &[])?;
    dims.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                Error::Value(format!(
                    "{}: shape {dims:?} has a negative dimension",
                    p.op()
                ))
            })
        })
        .collect()
}

pub(crate) fn dtype_attr(p: &Params) -> Result<DType> {
    Ok(p.opt_dtype("dtype")?.unwrap_or(DType::F32))
}

pub(crate) fn create_value(name: &'static str, value: Option<f64>, attrs: &Attrs) -> Result<OpRef> {
    let allowed: &[&str] = if value.is_none() {
        &["shape", "ctx", "dtype", "value"]
    } else {
        &["shape", "ctx", "dtype"]
    };
    let p = Params::new(name, attrs, allowed)?;
    let v = match value {
        Some(v) => v,
        None => p.float("value", 0.0)?,
    };
    Ok(Arc::new(Init {
        name,
        fill: Fill::Value(v),
        shape: Some((shape_attr(&p, "shape")?, dtype_attr(&p)?)),
    }))
}

pub(crate) fn create_arange(attrs: &Attrs) -> Result<OpRef> {
    let name = "_arange";
    let p = Params::new(
        name,
        attrs,
        &[
            "start",
            "stop",
            "step",
            "repeat",
            "infer_range",
            "ctx",
            "dtype",
        ],
    )?;
    let mut start = p.float("start", 0.0)?;
    let stop = p.opt_float("stop")?;
    let step = p.float("step", 1.0)?;
    let repeat = p.usize("repeat", 1)?;
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
    }))
}

pub(crate) fn create_eye(attrs: &Attrs) -> Result<OpRef> {
    let name = "_eye";
    let p = Params::new(name, attrs, &["N", "M", "k", "ctx", "dtype"])?;
    let n = p.usize("N", 0)?;
    let m = match p.usize("M", 0)? {
        0 => n,
        m => m,
    };
    Ok(Arc::new(Init {
        name,
        fill: Fill::Eye {
            m,
            k: p.int("k", 0)?,
        },
        shape: Some((Shape::from_slice(&[n, m]), dtype_attr(&p)?)),
    }))
}

pub(crate) fn create_like(name: &'static str, value: f64, attrs: &Attrs) -> Result<OpRef> {
    Params::new(name, attrs, &[])?;
    Ok(Arc::new(Init {
        name,
        fill: Fill::Value(value),
        shape: None,
    }))
}

/// Registers the creation operators.
pub fn register(r: &mut Registry) {
    let creation: [(&'static str, Option<f64>, &'static [&'static str]); 3] = [
        ("_zeros", Some(0.0), &["shape", "ctx", "dtype"]),
        ("_ones", Some(1.0), &["shape", "ctx", "dtype"]),
        ("_full", None, &["shape", "ctx", "dtype", "value"]),
    ];
    for (name, value, params) in creation {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &[],
            variadic: false,
            params: ParamList::Names(params),
            doc: "A new array filled with one value.",
            create: Box::new(move |a| create_value(name, value, a)),
        });
    }
    r.add(OpDef {
        name: "_arange",
        aliases: &[],
        inputs: &[],
        variadic: false,
        params: ParamList::Names(&[
            "start",
            "stop",
            "step",
            "repeat",
            "infer_range",
            "ctx",
            "dtype",
        ]),
        doc: "Evenly spaced values in [start, stop).",
        create: Box::new(create_arange),
    });
    r.add(OpDef {
        name: "_eye",
        aliases: &[],
        inputs: &[],
        variadic: false,
        params: ParamList::Names(&["N", "M", "k", "ctx", "dtype"]),
        doc: "A 2-D array with ones on the k-th diagonal.",
        create: Box::new(create_eye),
    });
    for (name, value) in [("zeros_like", 0.0), ("ones_like", 1.0)] {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &["data"],
            variadic: false,
            params: ParamList::Names(&[]),
            doc: "An array of the input's shape and dtype filled with one value.",
            create: Box::new(move |a| create_like(name, value, a)),
        });
    }
}
