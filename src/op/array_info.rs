//! Definitions of `shape_array` and `size_array`: an array's shape, or its number of
//! elements, as an int64 array.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, Attrs, Grad, OpDef, OpRef, OpReq, Operator, Params, Registry};
use crate::shape::{size_of, Shape};
use std::sync::Arc;

/// What an [`ArrayInfo`] operator reports of its input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Info {
    /// `shape_array`: the dimensions.
    Shape,
    /// `size_array`: the number of elements, as a one-element array.
    Size,
}

/// `shape_array` or `size_array`.
pub(crate) struct ArrayInfo {
    pub(crate) info: Info,
}

impl ArrayInfo {
    /// The values the output holds for an input of shape `shape`, or `None` when the
    /// request `req` writes nothing; adding into the output is refused.
    pub(crate) fn values(&self, req: OpReq, shape: &[usize]) -> Result<Option<Vec<i64>>> {
        match req {
            OpReq::Null => Ok(None),
            OpReq::Add => Err(Error::NotImplemented(format!(
                "{}: adding into the output is not supported",
                self.name()
            ))),
            _ => Ok(Some(match self.info {
                Info::Shape => shape.iter().map(|&d| d as i64).collect(),
                Info::Size => vec![size_of(shape) as i64],
            })),
        }
    }
}

impl Operator for ArrayInfo {
    fn name(&self) -> &'static str {
        match self.info {
            Info::Shape => "shape_array",
            Info::Size => "size_array",
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name(), inputs, 1)?;
        let n = match self.info {
            Info::Shape => inputs[0].len(),
            Info::Size => 1,
        };
        Ok(vec![Shape::from_slice(&[n])])
    }

    fn infer_type(&self, _inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![DType::I64])
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }
}

fn create(info: Info, name: &str, attrs: &Attrs) -> Result<OpRef> {
    Params::declared(name, attrs, &[])?;
    Ok(Arc::new(ArrayInfo { info }))
}

/// Registers `shape_array` and `size_array`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "shape_array",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: &[],
        doc: "The shape of the data as a 1-D int64 array.",
        create: Box::new(|a| create(Info::Shape, "shape_array", a)),
    });
    r.add(OpDef {
        name: "size_array",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: &[],
        doc: "The number of elements of the data as a one-element int64 array.",
        create: Box::new(|a| create(Info::Size, "size_array", a)),
    });
}
