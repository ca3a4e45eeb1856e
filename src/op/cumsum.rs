//! Definition of `cumsum`: running sums along one axis (or over the flattened array),
//! accumulated in the output's type, and its gradient, the running sums taken from the
//! other end.

use crate::dtype::DType;
use crate::error::Result;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
};
use crate::shape::{norm_axis, size_of, Shape};
use std::sync::Arc;

const PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "None",
        "Axis along which the cumulative sum is computed. The default (None) is to compute the cumsum over the flattened array.",
    ),
    Param::new(
        "dtype",
        "{None, 'float16', 'float32', 'float64', 'int32', 'int64', 'int8'}",
        "None",
        "Type of the returned array and of the accumulator in which the elements are summed. If dtype is not specified, it defaults to the dtype of a (int64 for a boolean a).",
    ),
];

const DTYPES: &[&str] = &[
    "None", "float16", "float32", "float64", "int32", "int64", "int8",
];

/// `cumsum`, or (`reverse`) its backward: the sums from the last element of each lane.
pub struct Cumsum {
    pub axis: Option<i64>,
    pub dtype: Option<DType>,
    /// The backward: sums run from the end of each lane, the output has the forward
    /// input's shape and type (the forward input is the second input).
    pub reverse: bool,
}

/// How a cumulative sum walks an array: `lanes` runs of `len` elements each, `stride`
/// apart inside a run; lane `l` starts at `(l / stride) * len * stride + l % stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lanes {
    pub lanes: usize,
    pub len: usize,
    pub stride: usize,
}

impl Lanes {
    /// The first element of lane `l`.
    pub fn start(&self, l: usize) -> usize {
        (l / self.stride) * self.len * self.stride + l % self.stride
    }
}

impl Cumsum {
    /// The lanes of an input of `shape`.
    pub fn lanes(&self, shape: &[usize]) -> Result<Lanes> {
        let n = size_of(shape);
        let Some(axis) = self.axis else {
            return Ok(Lanes {
                lanes: (n > 0) as usize,
                len: n,
                stride: 1,
            });
        };
        let a = norm_axis(axis, shape.len(), "cumsum")?;
        let len = shape[a];
        let stride = size_of(&shape[a + 1..]);
        Ok(Lanes {
            lanes: n.checked_div(len).unwrap_or(0),
            len,
            stride,
        })
    }
}

impl Operator for Cumsum {
    fn name(&self) -> &'static str {
        if self.reverse {
            "_backward_np_cumsum"
        } else {
            "cumsum"
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        if self.reverse {
            check_inputs(self.name(), inputs, 2)?;
            return Ok(vec![inputs[1].clone()]);
        }
        check_inputs(self.name(), inputs, 1)?;
        self.lanes(&inputs[0])?;
        Ok(vec![match self.axis {
            Some(_) => inputs[0].clone(),
            None => Shape::from_slice(&[size_of(&inputs[0])]),
        }])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        if self.reverse {
            return Ok(vec![inputs[1]]);
        }
        Ok(vec![match (self.dtype, inputs[0]) {
            (Some(t), _) => t,
            (None, DType::Bool) => DType::I64,
            (None, t) => t,
        }])
    }

    fn gradient(&self) -> Grad {
        if self.reverse {
            return Grad::Undefined;
        }
        let op = Arc::new(Cumsum {
            axis: self.axis,
            dtype: None,
            reverse: true,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("cumsum", attrs, PARAMS)?;
    let dtype = match p.get_choice("dtype", DTYPES)? {
        "None" => None,
        name => Some(DType::from_name(name)?),
    };
    Ok(Arc::new(Cumsum {
        axis: p.get("axis")?,
        dtype,
        reverse: false,
    }))
}

/// Registers `cumsum`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "cumsum",
        aliases: &["_np_cumsum"],
        inputs: &["a"],
        variadic: false,
        params: PARAMS,
        doc: "Return the cumulative sum of the elements along a given axis.",
        create: Box::new(create),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_walk_the_axis() {
        let c = |axis| Cumsum {
            axis,
            dtype: None,
            reverse: false,
        };
        let l = c(Some(1)).lanes(&[2, 3, 4]).unwrap();
        assert_eq!((l.lanes, l.len, l.stride), (8, 3, 4));
        assert_eq!(l.start(5), 12 + 1);
        let l = c(Some(-1)).lanes(&[2, 3, 4]).unwrap();
        assert_eq!((l.lanes, l.len, l.stride), (6, 4, 1));
        assert_eq!(l.start(5), 20);
        let l = c(None).lanes(&[2, 3]).unwrap();
        assert_eq!((l.lanes, l.len, l.stride), (1, 6, 1));
        assert_eq!(c(Some(0)).lanes(&[0, 3]).unwrap().lanes, 0);
        assert!(c(Some(3)).lanes(&[2, 3, 4]).is_err());
    }
}
