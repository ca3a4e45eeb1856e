//! Definitions of the sorting operators: `topk`, `sort`, `argsort` (stable: ties keep
//! index order; NaN sorts above every number).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::indexing::TopkBackward;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, ParamList, Params, Registry,
};
use crate::shape::{norm_axis, size_of, Shape};
use std::sync::Arc;

/// What `topk` returns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Ret {
    Value,
    Indices,
    Mask,
    Both,
}

/// `topk`, `sort` and `argsort`: the `k` first elements of each lane along an axis (all of
/// them for `sort`/`argsort`) in ascending or descending order.
pub(crate) struct SortOp {
    pub(crate) name: &'static str,
    /// `None`: the flattened array is one lane.
    pub(crate) axis: Option<i64>,
    /// Elements kept per lane; `<= 0` keeps all.
    pub(crate) k: i64,
    pub(crate) ret: Ret,
    pub(crate) ascend: bool,
    /// dtype of the indices output.
    pub(crate) dtype: DType,
}

/// A lane decomposition of the input: `outer` blocks of `n` elements along the axis, with
/// `inner` interleaved lanes per block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lanes {
    pub(crate) outer: usize,
    pub(crate) n: usize,
    pub(crate) inner: usize,
}

impl SortOp {
    pub(crate) fn lanes(&self, shape: &[usize]) -> Result<(Lanes, Option<usize>)> {
        match self.axis {
            None => Ok((
                Lanes {
                    outer: 1,
                    n: size_of(shape),
                    inner: 1,
                },
                None,
            )),
            Some(a) => {
                let ax = norm_axis(a, shape.len(), self.name)?;
                Ok((
                    Lanes {
                        outer: size_of(&shape[..ax]),
                        n: shape[ax],
                        inner: size_of(&shape[ax + 1..]),
                    },
                    Some(ax),
                ))
            }
        }
    }

    pub(crate) fn k_of(&self, n: usize) -> Result<usize> {
        if self.k <= 0 {
            return Ok(n);
        }
        let k = self.k as usize;
        if k > n {
            return Err(Error::Value(format!(
                "{}: k must be at most the number of elements along the axis ({n}), got k = {k}",
                self.name
            )));
        }
        Ok(k)
    }
}

impl Operator for SortOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        if !matches!(self.ret, Ret::Value | Ret::Both) {
            return Grad::Zero;
        }
        let order = Arc::new(SortOp {
            name: self.name,
            axis: self.axis,
            k: self.k,
            ret: Ret::Indices,
            ascend: self.ascend,
            dtype: DType::I64,
        });
        let op = Arc::new(TopkBackward {
            axis: self.axis,
            order,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn num_outputs(&self) -> usize {
        if self.ret == Ret::Both {
            2
        } else {
            1
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 1)?;
        let data = &inputs[0];
        let (l, ax) = self.lanes(data)?;
        let k = self.k_of(l.n)?;
        let picked: Shape = match ax {
            None => Shape::from_slice(&[k]),
            Some(ax) => {
                let mut s = data.clone();
                s[ax] = k;
                s
            }
        };
        Ok(match self.ret {
            Ret::Mask => vec![data.clone()],
            Ret::Both => vec![picked.clone(), picked],
            _ => vec![picked],
        })
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let Some(&t) = inputs.first() else {
            return Err(Error::Value(format!(
                "{}: expected 1 input(s), got 0",
                self.name
            )));
        };
        if t == DType::Bool {
            return Err(Error::Type(format!(
                "{}: dtype bool is not supported",
                self.name
            )));
        }
        Ok(match self.ret {
            Ret::Value | Ret::Mask => vec![t],
            Ret::Indices => vec![self.dtype],
            Ret::Both => vec![t, self.dtype],
        })
    }
}

pub(crate) fn axis_param(p: &Params) -> Result<Option<i64>> {
    match p.raw("axis") {
        None => Ok(Some(-1)),
        Some(_) => p.opt_int("axis"),
    }
}

pub(crate) fn index_dtype(p: &Params) -> Result<DType> {
    let d = p.opt_dtype("dtype")?.unwrap_or(DType::F32);
    if matches!(d, DType::Bool | DType::I8) {
        return Err(Error::Type(format!(
            "{}: dtype {d} is not supported for indices; use one of float16, float32, float64, int32, int64, uint8",
            p.op()
        )));
    }
    Ok(d)
}

pub(crate) fn create_topk(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new(
        "topk",
        attrs,
        &["axis", "k", "ret_typ", "is_ascend", "dtype"],
    )?;
    let ret = match p.choice("ret_typ", "indices", &["both", "indices", "mask", "value"])? {
        "both" => Ret::Both,
        "mask" => Ret::Mask,
        "value" => Ret::Value,
        _ => Ret::Indices,
    };
    Ok(Arc::new(SortOp {
        name: "topk",
        axis: axis_param(&p)?,
        k: p.int("k", 1)?,
        ret,
        ascend: p.bool("is_ascend", false)?,
        dtype: index_dtype(&p)?,
    }))
}

pub(crate) fn create_sort(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("sort", attrs, &["axis", "is_ascend"])?;
    Ok(Arc::new(SortOp {
        name: "sort",
        axis: axis_param(&p)?,
        k: 0,
        ret: Ret::Value,
        ascend: p.bool("is_ascend", true)?,
        dtype: DType::F32,
    }))
}

pub(crate) fn create_argsort(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new("argsort", attrs, &["axis", "is_ascend", "dtype"])?;
    Ok(Arc::new(SortOp {
        name: "argsort",
        axis: axis_param(&p)?,
        k: 0,
        ret: Ret::Indices,
        ascend: p.bool("is_ascend", true)?,
        dtype: index_dtype(&p)?,
    }))
}

/// Registers the sorting operators.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "topk",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&["axis", "k", "ret_typ", "is_ascend", "dtype"]),
        doc: "The k largest (or smallest) elements along an axis: values, indices, a mask or both.",
        create: Box::new(create_topk),
    });
    r.add(OpDef {
        name: "sort",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&["axis", "is_ascend"]),
        doc: "Sorts along an axis (the flattened array for axis=None).",
        create: Box::new(create_sort),
    });
    r.add(OpDef {
        name: "argsort",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&["axis", "is_ascend", "dtype"]),
        doc: "Indices that sort an array along an axis.",
        create: Box::new(create_argsort),
    });
}
