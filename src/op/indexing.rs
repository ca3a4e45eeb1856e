//! Definitions of the indexing operators: `take`, `pick`, `one_hot`, `where`, `Cast`,
//! `gather_nd`, `scatter_nd`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::grad::indexing::{
    CastBackward, GatherNdBackward, PickBackward, TakeBackward, WhereBackward,
};
use crate::op::infer::infer_from_partial;
use crate::op::params::{ALL_TYPES, ALL_TYPES_WITH_BOOL};
use crate::op::{
    assign_shape, check_inputs, infer, shape_err, Attrs, Grad, Gradient, OpDef, OpRef, Operator,
    Param, Params, Registry, ShapeSlots, TypeSlots,
};
use crate::shape::{fmt_shape, is_partial, norm_axis, unify, Shape};
use std::sync::Arc;

pub(crate) fn shape_dims(op: &str, key: &str, dims: &[i64]) -> Result<Shape> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| Error::Value(format!("{op}: {key} {dims:?} has a negative dimension")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// take

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IndexMode {
    Clip,
    Wrap,
    Raise,
}

pub(crate) fn mode_param(p: &Params, allowed: &[&'static str]) -> Result<IndexMode> {
    Ok(match p.get_choice("mode", allowed)? {
        "wrap" => IndexMode::Wrap,
        "raise" => IndexMode::Raise,
        _ => IndexMode::Clip,
    })
}

pub(crate) struct Take {
    pub(crate) axis: i64,
    pub(crate) mode: IndexMode,
}

impl Operator for Take {
    fn name(&self) -> &'static str {
        "take"
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(TakeBackward {
            axis: self.axis,
            mode: self.mode,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![1, 0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("take", inputs, 2)?;
        let (a, idx) = (&inputs[0], &inputs[1]);
        if a.is_empty() {
            return Err(shape_err(
                "take",
                "the data must have at least one dimension",
                a,
            ));
        }
        let axis = norm_axis(self.axis, a.len(), "take")?;
        let mut out = Shape::new();
        out.extend_from_slice(&a[..axis]);
        out.extend_from_slice(idx);
        out.extend_from_slice(&a[axis + 1..]);
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

const TAKE_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int",
        "0",
        "The axis of input array to be taken.For input tensor of rank r, it could be in the range of [-r, r-1]",
    ),
    Param::new(
        "mode",
        "{'clip', 'raise', 'wrap'}",
        "'clip'",
        "Specify how out-of-bound indices bahave. Default is \"clip\". \"clip\" means clip to the range. So, if all indices mentioned are too large, they are replaced by the index that addresses the last element along an axis. \"wrap\" means to wrap around. \"raise\" means to raise an error when index out of range.",
    ),
];

pub(crate) fn create_take(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("take", attrs, TAKE_PARAMS)?;
    Ok(Arc::new(Take {
        axis: p.get("axis")?,
        mode: mode_param(&p, &["clip", "raise", "wrap"])?,
    }))
}

// ---------------------------------------------------------------------------------------
// pick

pub(crate) struct Pick {
    pub(crate) axis: i64,
    pub(crate) keepdims: bool,
    pub(crate) mode: IndexMode,
}

impl Pick {
    pub(crate) fn out_shape(&self, data: &[usize]) -> Result<(usize, Shape)> {
        let axis = norm_axis(self.axis, data.len(), "pick")?;
        let mut out = Shape::from_slice(data);
        if self.keepdims || data.len() == 1 {
            // A 1-d input keeps one element, as MXNet 1.x's reductions do.
            out[axis] = 1;
        } else {
            out.remove(axis);
        }
        Ok((axis, out))
    }
}

impl Operator for Pick {
    fn name(&self) -> &'static str {
        "pick"
    }

    fn gradient(&self) -> Grad {
        let op = Arc::new(PickBackward {
            axis: self.axis,
            mode: self.mode,
        });
        Grad::Op(Gradient {
            op,
            ograds: vec![0],
            inputs: vec![0, 1],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        infer::check_count("pick", inputs.len(), 2)?;
        // The data alone tells the index's shape: the output's.
        if let (Some(data), None) = (&inputs[0], &inputs[1]) {
            if !data.is_empty() {
                inputs[1] = Some(self.out_shape(data)?.1);
            }
        }
        infer::outputs_once_inputs_known(self, inputs, outputs)
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("pick", inputs, 2)?;
        let (data, index) = (&inputs[0], &inputs[1]);
        if data.is_empty() {
            return Err(shape_err(
                "pick",
                "the data must have at least one dimension",
                data,
            ));
        }
        let (axis, out) = self.out_shape(data)?;
        let mut kept = Shape::from_slice(data);
        kept[axis] = 1;
        let mut removed = Shape::from_slice(data);
        removed.remove(axis);
        if index.as_slice() != kept.as_slice() && index.as_slice() != removed.as_slice() {
            return Err(Error::Value(format!(
                "pick: index shape {} does not match data shape {} with axis {}: expected {} or {}",
                fmt_shape(index),
                fmt_shape(data),
                self.axis,
                fmt_shape(&removed),
                fmt_shape(&kept)
            )));
        }
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

const PICK_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int or None",
        "-1",
        "int or None. The axis to picking the elements. Negative values means indexing from right to left; rsmx does not support `None` (picking from the flattened input).",
    ),
    Param::new(
        "keepdims",
        "boolean",
        "False",
        "If true, the axis where we pick the elements is left in the result as dimension with size one.",
    ),
    Param::new(
        "mode",
        "{'clip', 'wrap'}",
        "'clip'",
        "Specify how out-of-bound indices behave. Default is \"clip\". \"clip\" means clip to the range. So, if all indices mentioned are too large, they are replaced by the index that addresses the last element along an axis.  \"wrap\" means to wrap around.",
    ),
];

pub(crate) fn create_pick(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("pick", attrs, PICK_PARAMS)?;
    let axis = p.get::<Option<i64>>("axis")?.ok_or_else(|| {
        Error::Value("pick: axis=None is not supported by pick; an axis must be given".into())
    })?;
    Ok(Arc::new(Pick {
        axis,
        keepdims: p.get("keepdims")?,
        mode: mode_param(&p, &["clip", "wrap"])?,
    }))
}

// ---------------------------------------------------------------------------------------
// one_hot

pub(crate) struct OneHot {
    pub(crate) depth: usize,
    pub(crate) on: f64,
    pub(crate) off: f64,
    pub(crate) dtype: DType,
}

impl Operator for OneHot {
    fn name(&self) -> &'static str {
        "one_hot"
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("one_hot", inputs, 1)?;
        let mut out = inputs[0].clone();
        out.push(self.depth);
        Ok(vec![out])
    }

    fn infer_type(&self, _: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![self.dtype])
    }
}

const ONE_HOT_PARAMS: &[Param] = &[
    Param::required("depth", "int", "Depth of the one hot dimension."),
    Param::new(
        "on_value",
        "double",
        "1",
        "The value assigned to the locations represented by indices.",
    ),
    Param::new(
        "off_value",
        "double",
        "0",
        "The value assigned to the locations not represented by indices.",
    ),
    Param::new("dtype", ALL_TYPES, "'float32'", "DType of the output"),
];

pub(crate) fn create_one_hot(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("one_hot", attrs, ONE_HOT_PARAMS)?;
    let depth: i64 = p.get("depth")?;
    let depth = usize::try_from(depth).map_err(|_| {
        Error::Value(format!(
            "one_hot: depth must be a non-negative integer, got {depth}"
        ))
    })?;
    let dtype = p.get::<Option<DType>>("dtype")?.unwrap_or(DType::F32);
    if dtype == DType::Bool {
        return Err(Error::Type(
            "one_hot: dtype bool is not supported; use a numeric dtype".into(),
        ));
    }
    Ok(Arc::new(OneHot {
        depth,
        on: p.get("on_value")?,
        off: p.get("off_value")?,
        dtype,
    }))
}

// ---------------------------------------------------------------------------------------
// where

pub(crate) struct Where;

impl Operator for Where {
    fn name(&self) -> &'static str {
        "where"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        infer::check_count("where", inputs.len(), 3)?;
        // As MXNet's, the inference waits for a fully known condition.
        if inputs[0].as_ref().is_none_or(|c| is_partial(c)) {
            return Ok(());
        }
        if let [_, Some(x), Some(y)] = &*inputs {
            if unify(x, y).is_none() {
                return Err(Error::Value(format!(
                    "where: x and y must have the same shape, got {} and {}",
                    fmt_shape(x),
                    fmt_shape(y)
                )));
            }
        }
        // x, y and the output share one shape; the condition has it too, or is 1-d with
        // one element per row of x.
        let (cond, xy) = inputs.split_at_mut(1);
        infer::same_shape("where", xy, outputs)?;
        if let (Some(c), Some(x)) = (&cond[0], &xy[0]) {
            // A condition of x's rank is x's shape, and tells its unknown sizes.
            if c.len() == x.len() && c.len() != 1 && unify(c, x).is_some() {
                let c = c.clone();
                for slot in xy.iter_mut().chain(outputs.iter_mut()) {
                    assign_shape("where", "x, y and output", slot, &c)?;
                }
                return Ok(());
            }
            let rows_ok = c.len() == 1 && !x.is_empty() && (c[0] == x[0] || x[0] == 0);
            if c != x && !rows_ok && !(is_partial(x) && unify(c, x).is_some()) {
                return Err(Error::Value(format!(
                    "where: condition must have the shape of x {} or be 1-d with x.shape[0] elements, got {}",
                    fmt_shape(x),
                    fmt_shape(c)
                )));
            }
        }
        Ok(())
    }

    infer_from_partial!(shape);

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(WhereBackward),
            ograds: vec![0],
            inputs: vec![0],
            outputs: vec![],
            grad_of: vec![1, 2],
        })
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        if inputs.len() != 3 {
            return Err(Error::Value(format!(
                "where: expected 3 input(s), got {}",
                inputs.len()
            )));
        }
        if inputs[1] != inputs[2] {
            return Err(Error::Type(format!(
                "where: x and y must have the same dtype, got {} and {}",
                inputs[1], inputs[2]
            )));
        }
        Ok(vec![inputs[1]])
    }
}

// ---------------------------------------------------------------------------------------
// Cast

pub(crate) struct Cast {
    pub(crate) dtype: DType,
}

impl Operator for Cast {
    fn name(&self) -> &'static str {
        "Cast"
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        infer::check_count("Cast", inputs.len(), 1)?;
        infer::same_shape("Cast", inputs, outputs)
    }

    infer_from_partial!(shape);

    fn gradient(&self) -> Grad {
        Gradient::simple(Arc::new(CastBackward), &[0], &[], 1)
    }

    fn infer_type(&self, _: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![self.dtype])
    }

    /// The output's dtype is the attribute's, known before the input's (as in MXNet).
    fn infer_type_partial(&self, _inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        match outputs.first_mut() {
            Some(Some(t)) if *t != self.dtype => Err(Error::Type(format!(
                "Cast: output must have dtype {}, got {t}",
                self.dtype
            ))),
            Some(slot) => {
                *slot = Some(self.dtype);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

const CAST_PARAMS: &[Param] = &[Param::required(
    "dtype",
    ALL_TYPES_WITH_BOOL,
    "Output data type.",
)];

pub(crate) fn create_cast(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Cast", attrs, CAST_PARAMS)?;
    let dtype = p
        .get::<Option<DType>>("dtype")?
        .ok_or_else(|| Error::Value("Cast: required argument 'dtype' is missing".into()))?;
    Ok(Arc::new(Cast { dtype }))
}

pub(crate) struct GatherNd;

impl Operator for GatherNd {
    fn name(&self) -> &'static str {
        "gather_nd"
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(GatherNdBackward),
            ograds: vec![0],
            inputs: vec![1, 0],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("gather_nd", inputs, 2)?;
        let (data, idx) = (&inputs[0], &inputs[1]);
        if idx.is_empty() || idx[0] == 0 || idx[0] > data.len() {
            return Err(Error::Value(format!(
                "gather_nd: indices shape {} must be (M, ...) with 0 < M <= data.ndim ({}) ",
                fmt_shape(idx),
                data.len()
            )));
        }
        let mut out = Shape::from_slice(&idx[1..]);
        out.extend_from_slice(&data[idx[0]..]);
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

pub(crate) struct ScatterNd {
    pub(crate) shape: Shape,
}

impl Operator for ScatterNd {
    fn name(&self) -> &'static str {
        "scatter_nd"
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(GatherNd),
            ograds: vec![0],
            inputs: vec![1],
            outputs: vec![],
            grad_of: vec![0],
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("scatter_nd", inputs, 2)?;
        let (data, idx) = (&inputs[0], &inputs[1]);
        let bad = idx.is_empty() || idx[0] == 0 || idx[0] > self.shape.len() || {
            let mut want = Shape::from_slice(&idx[1..]);
            want.extend_from_slice(&self.shape[idx[0]..]);
            want != *data
        };
        if bad {
            return Err(Error::Value(format!(
                "scatter_nd: data shape {} and indices shape {} do not fit output shape {}: data must be indices.shape[1:] + shape[indices.shape[0]:]",
                fmt_shape(data),
                fmt_shape(idx),
                fmt_shape(&self.shape)
            )));
        }
        Ok(vec![self.shape.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

// ---------------------------------------------------------------------------------------

const SCATTER_ND_PARAMS: &[Param] = &[Param::required("shape", "Shape(tuple)", "Shape of output.")];

/// Registers the indexing operators.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "take",
        aliases: &[],
        inputs: &["a", "indices"],
        variadic: false,
        params: TAKE_PARAMS,
        doc: "Takes elements from an array along an axis at the given indices.",
        create: Box::new(create_take),
    });
    r.add(OpDef {
        name: "pick",
        aliases: &["choose_element_0index"],
        inputs: &["data", "index"],
        variadic: false,
        params: PICK_PARAMS,
        doc: "Picks one element per position along an axis, at the given indices.",
        create: Box::new(create_pick),
    });
    r.add(OpDef {
        name: "one_hot",
        aliases: &[],
        inputs: &["indices"],
        variadic: false,
        params: ONE_HOT_PARAMS,
        doc: "One-hot encoding of integer indices, in a new last axis of size depth.",
        create: Box::new(create_one_hot),
    });
    r.add(OpDef {
        name: "where",
        aliases: &[],
        inputs: &["condition", "x", "y"],
        variadic: false,
        params: &[],
        doc: "Elements of x where condition is non-zero, else of y.",
        create: Box::new(|attrs| {
            Params::declared("where", attrs, &[])?;
            Ok(Arc::new(Where) as OpRef)
        }),
    });
    r.add(OpDef {
        name: "Cast",
        aliases: &["cast"],
        inputs: &["data"],
        variadic: false,
        params: CAST_PARAMS,
        doc: "Converts every element to dtype (floats truncate toward zero).",
        create: Box::new(create_cast),
    });
    r.add(OpDef {
        name: "gather_nd",
        aliases: &[],
        inputs: &["data", "indices"],
        variadic: false,
        params: &[],
        doc: "Gathers slices of data at the N-d indices given by the first axis of indices.",
        create: Box::new(|attrs| {
            Params::declared("gather_nd", attrs, &[])?;
            Ok(Arc::new(GatherNd) as OpRef)
        }),
    });
    r.add(OpDef {
        name: "scatter_nd",
        aliases: &[],
        inputs: &["data", "indices"],
        variadic: false,
        params: SCATTER_ND_PARAMS,
        doc: "Scatters data into a zero array of the given shape at the N-d indices.",
        create: Box::new(|attrs| {
            let p = Params::declared("scatter_nd", attrs, SCATTER_ND_PARAMS)?;
            let shape = shape_dims("scatter_nd", "shape", &p.get::<Vec<i64>>("shape")?)?;
            Ok(Arc::new(ScatterNd { shape }) as OpRef)
        }),
    });
}
