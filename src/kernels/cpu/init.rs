//! Array creation operators: `_zeros`, `_ones`, `_full`, `_arange`, `_eye`, `zeros_like`,
//! `ones_like`.

use super::map::map_inplace;
use super::num::Num;
use crate::dispatch_num;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::{
    check_inputs, Attrs, Grad, OpContext, OpDef, OpRef, OpReq, Operator, ParamList, Params,
    Registry,
};
use crate::shape::Shape;
use std::sync::Arc;

/// What a creation op writes.
#[derive(Debug, Clone, Copy)]
enum Fill {
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

struct Init {
    name: &'static str,
    fill: Fill,
    /// Shape and dtype from attributes, or `None` to take the input's (`*_like`).
    shape: Option<(Shape, DType)>,
}

fn fill<T: Num>(f: Fill, out: &mut [T], req: OpReq) {
    match f {
        Fill::Value(v) => {
            let v = T::from_f64(v);
            if req == OpReq::Add {
                map_inplace(out, |o| o.add(v));
            } else {
                out.fill(v);
            }
        }
        Fill::Arange {
            start,
            step,
            repeat,
        } => {
            for (i, o) in out.iter_mut().enumerate() {
                let v = T::from_f64(start + (i / repeat) as f64 * step);
                *o = if req == OpReq::Add { o.add(v) } else { v };
            }
        }
        Fill::Eye { m, k } => {
            for (i, o) in out.iter_mut().enumerate() {
                let (r, c) = ((i / m) as i64, (i % m) as i64);
                let v = if c - r == k { T::ONE } else { T::ZERO };
                *o = if req == OpReq::Add { o.add(v) } else { v };
            }
        }
    }
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

impl CpuKernel for Init {
    fn forward(
        &self,
        _: &mut OpContext,
        _inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let out = &outputs[0];
        if out.dtype == DType::Bool {
            let v = matches!(self.fill, Fill::Value(v) if v != 0.0);
            out.slice_mut::<bool>().fill(v);
            return Ok(());
        }
        dispatch_num!(self.name, out.dtype, T => fill::<T>(self.fill, out.slice_mut(), req[0]));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Init>(k);
}

fn shape_attr(p: &Params, key: &str) -> Result<Shape> {
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

fn dtype_attr(p: &Params) -> Result<DType> {
    Ok(p.opt_dtype("dtype")?.unwrap_or(DType::F32))
}

fn create_value(name: &'static str, value: Option<f64>, attrs: &Attrs) -> Result<OpRef> {
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

fn create_arange(attrs: &Attrs) -> Result<OpRef> {
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

fn create_eye(attrs: &Attrs) -> Result<OpRef> {
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

fn create_like(name: &'static str, value: f64, attrs: &Attrs) -> Result<OpRef> {
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

#[cfg(test)]
mod tests {
    use crate::op::testutil::{f32a, f32s, run, try_run, values};

    #[test]
    fn creation() {
        let z = &run("_full", &[("shape", "(2, 2)"), ("value", "3.5")], &[])[0];
        assert_eq!(f32s(z), vec![3.5; 4]);
        let a = &run(
            "_arange",
            &[("start", "1"), ("stop", "4"), ("repeat", "2")],
            &[],
        )[0];
        assert_eq!(f32s(a), vec![1., 1., 2., 2., 3., 3.]);
        let e = &run(
            "_eye",
            &[("N", "2"), ("k", "1"), ("M", "3"), ("dtype", "int64")],
            &[],
        )[0];
        assert_eq!(values::<i64>(e), vec![0, 1, 0, 0, 0, 1]);
        let o = &run("ones_like", &[], &[f32a(&[3], &[5., 6., 7.])])[0];
        assert_eq!(f32s(o), vec![1.; 3]);
        assert!(try_run("_zeros", &[("shape", "(2, -1)")], &[]).is_err());
        assert!(try_run("_zeros", &[("shape", "(2,)"), ("dtype", "complex")], &[]).is_err());
    }
}
