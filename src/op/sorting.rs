//! Definitions of the sorting operators: `topk`, `sort`, `argsort` (stable: ties keep
//! index order; NaN sorts above every number).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::indexing::TopkBackward;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
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

pub(crate) fn index_dtype(p: &Params) -> Result<DType> {
    let d = p.get::<Option<DType>>("dtype")?.unwrap_or(DType::F32);
    if matches!(d, DType::Bool | DType::I8) {
        return Err(Error::Type(format!(
            "{}: dtype {d} is not supported for indices; use one of float16, float32, float64, int32, int64, uint8",
            p.op()
        )));
    }
    Ok(d)
}

const INDEX_DTYPES: &str = "{'float16', 'float32', 'float64', 'int32', 'int64', 'uint8'}";

const IS_ASCEND_SORT: Param = Param::new(
    "is_ascend",
    "boolean",
    "True",
    "Whether to sort in ascending or descending order.",
);

const TOPK_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "-1",
        "Axis along which to choose the top k indices. If not given, the flattened array is used. Default is -1.",
    ),
    Param::new(
        "k",
        "int",
        "1",
        "Number of top elements to select, should be always smaller than or equal to the element number in the given axis. A global sort is performed if set k < 1.",
    ),
    Param::new(
        "ret_typ",
        "{'both', 'indices', 'mask', 'value'}",
        "'indices'",
        "The return type. \"value\" means to return the top k values, \"indices\" means to return the indices of the top k values, \"mask\" means to return a mask array containing 0 and 1. 1 means the top k values. \"both\" means to return a list of both values and indices of top k elements.",
    ),
    Param::new(
        "is_ascend",
        "boolean",
        "False",
        "Whether to choose k largest or k smallest elements. Top K largest elements will be chosen if set to false.",
    ),
    Param::new(
        "dtype",
        INDEX_DTYPES,
        "'float32'",
        "DType of the output indices when ret_typ is \"indices\" or \"both\". An error will be raised if the selected data type cannot precisely represent the indices.",
    ),
];

const SORT_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "-1",
        "Axis along which to choose sort the input tensor. If not given, the flattened array is used. Default is -1.",
    ),
    IS_ASCEND_SORT,
];

const ARGSORT_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "-1",
        "Axis along which to sort the input tensor. If not given, the flattened array is used. Default is -1.",
    ),
    IS_ASCEND_SORT,
    Param::new(
        "dtype",
        INDEX_DTYPES,
        "'float32'",
        "DType of the output indices. It is only valid when ret_typ is \"indices\" or \"both\". An error will be raised if the selected data type cannot precisely represent the indices.",
    ),
];

pub(crate) fn create_topk(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("topk", attrs, TOPK_PARAMS)?;
    let ret = match p.get_choice("ret_typ", &["both", "indices", "mask", "value"])? {
        "both" => Ret::Both,
        "mask" => Ret::Mask,
        "value" => Ret::Value,
        _ => Ret::Indices,
    };
    Ok(Arc::new(SortOp {
        name: "topk",
        axis: p.get("axis")?,
        k: p.get("k")?,
        ret,
        ascend: p.get("is_ascend")?,
        dtype: index_dtype(&p)?,
    }))
}

/// `sort` (`ret` values) or `argsort` (`ret` indices): a selection of the whole axis.
fn create_whole_sort(
    name: &'static str,
    decls: &'static [Param],
    ret: Ret,
    attrs: &Attrs,
) -> Result<OpRef> {
    let p = Params::declared(name, attrs, decls)?;
    let dtype = match ret {
        Ret::Indices => index_dtype(&p)?,
        _ => DType::F32,
    };
    Ok(Arc::new(SortOp {
        name,
        axis: p.get("axis")?,
        k: 0,
        ret,
        ascend: p.get("is_ascend")?,
        dtype,
    }))
}

pub(crate) fn create_sort(attrs: &Attrs) -> Result<OpRef> {
    create_whole_sort("sort", SORT_PARAMS, Ret::Value, attrs)
}

pub(crate) fn create_argsort(attrs: &Attrs) -> Result<OpRef> {
    create_whole_sort("argsort", ARGSORT_PARAMS, Ret::Indices, attrs)
}

/// Registers the sorting operators.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "topk",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: TOPK_PARAMS,
        doc: "The k largest (or smallest) elements along an axis: values, indices, a mask or both.",
        create: Box::new(create_topk),
    });
    r.add(OpDef {
        name: "sort",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: SORT_PARAMS,
        doc: "Sorts along an axis (the flattened array for axis=None).",
        create: Box::new(create_sort),
    });
    r.add(OpDef {
        name: "argsort",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: ARGSORT_PARAMS,
        doc: "Indices that sort an array along an axis.",
        create: Box::new(create_argsort),
    });
}
