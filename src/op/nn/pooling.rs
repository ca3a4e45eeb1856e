//! Definition of `Pooling` (max, average, sum and Lp over 1-D to 3-D windows, `valid`
//! `full` and `same` conventions, global pooling) and its backward.

use super::geometry::{check_layout, kernel_tuple, to3, window_tuple, Dims3};
use crate::error::{Error, Result};
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// What a window is reduced to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolType {
    Max,
    Avg,
    Sum,
    /// `(Σ xᵖ)^(1/p)` for p in 1..=3.
    Lp(u32),
}

/// The `Pooling` operator's arguments.
#[derive(Debug, Clone)]
pub(crate) struct Pooling {
    pub(crate) pool: PoolType,
    pub(crate) global: bool,
    /// Windows may overhang the input's end (the `full` and `same` conventions).
    pub(crate) full: bool,
    /// `same`: one output per stride of the input (1-D only, without padding).
    pub(crate) same: bool,
    /// Empty for global pooling without a kernel.
    pub(crate) kernel: Vec<usize>,
    pub(crate) stride: Vec<usize>,
    pub(crate) pad: Vec<usize>,
    pub(crate) count_include_pad: bool,
}

/// The sizes of one pooling: `planes` images of extent `input` pooled to `output`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) planes: usize,
    pub(crate) input: Dims3,
    pub(crate) output: Dims3,
    pub(crate) kernel: Dims3,
    pub(crate) stride: Dims3,
    pub(crate) pad: Dims3,
}

impl Pooling {
    /// Checks `data` against the arguments and sizes the pooling.
    pub(crate) fn plan(&self, data: &[usize]) -> Result<Plan> {
        let nd = data.len().wrapping_sub(2);
        if !(1..=3).contains(&nd) || (!self.global && nd != self.kernel.len()) {
            let want = if self.global {
                "3-D, 4-D or 5-D".to_string()
            } else {
                format!("{}-D", self.kernel.len() + 2)
            };
            return Err(Error::Value(format!(
                "Pooling: data must be {want} (batch, channel, spatial...), got shape {}",
                fmt_shape(data)
            )));
        }
        if self.same && data.len() != 3 {
            return Err(Error::Value(format!(
                "Pooling: pooling_convention 'same' takes 3-D data (batch, channel, x), got shape {}",
                fmt_shape(data)
            )));
        }
        let input = to3(&data[2..], 1);
        let (kernel, stride, pad) = if self.global {
            (input, [1; 3], [0; 3])
        } else {
            (
                to3(&self.kernel, 1),
                to3(&self.stride, 1),
                to3(&self.pad, 0),
            )
        };
        let mut output = [1; 3];
        for i in 3 - nd..3 {
            let padded = input[i] + 2 * pad[i];
            if kernel[i] > padded {
                return Err(Error::Value(format!(
                    "Pooling: kernel size ({}) exceeds input ({} padded to {}), data shape {}",
                    kernel[i],
                    input[i],
                    padded,
                    fmt_shape(data)
                )));
            }
            let span = padded - kernel[i];
            output[i] = if self.same && !self.global {
                padded.div_ceil(stride[i])
            } else if self.full {
                1 + span.div_ceil(stride[i])
            } else {
                1 + span / stride[i]
            };
        }
        Ok(Plan {
            planes: data[0] * data[1],
            input,
            output,
            kernel,
            stride,
            pad,
        })
    }
}

impl Operator for Pooling {
    fn name(&self) -> &'static str {
        "Pooling"
    }

    /// Max pooling has a second, hidden output (as in MXNet's default build, where it is
    /// the oneDNN workspace): where each maximum came from, which the backward uses.
    fn num_outputs(&self) -> usize {
        if self.pool == PoolType::Max {
            2
        } else {
            1
        }
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn optional_outputs(&self) -> &'static [usize] {
        &[1]
    }

    fn output_names(&self) -> Vec<String> {
        let mut names = vec!["output".to_string()];
        if self.pool == PoolType::Max {
            names.push("index".to_string());
        }
        names
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("Pooling", inputs, 1)?;
        let p = self.plan(&inputs[0])?;
        let mut out = Shape::from_slice(&inputs[0][..2]);
        out.extend_from_slice(&p.output[5 - inputs[0].len()..]);
        Ok(vec![out; self.num_outputs()])
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(PoolingBackward { fwd: self.clone() });
        let outputs: &[usize] = if self.pool == PoolType::Max {
            &[0, 1]
        } else {
            &[0]
        };
        Gradient::simple(op, &[0], outputs, 1)
    }
}

/// `_backward_Pooling`: inputs (output gradient, data, output, and for max pooling the
/// index output); output the data gradient.
pub(crate) struct PoolingBackward {
    pub(crate) fwd: Pooling,
}

impl Operator for PoolingBackward {
    fn name(&self) -> &'static str {
        "_backward_Pooling"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let want = if self.fwd.pool == PoolType::Max { 4 } else { 3 };
        check_inputs("_backward_Pooling", inputs, want)?;
        self.fwd.plan(&inputs[1])?;
        Ok(vec![inputs[1].clone()])
    }
}

const PARAMS: &[Param] = &[
    Param::new(
        "kernel",
        "Shape(tuple)",
        "[]",
        "Pooling kernel size: (y, x) or (d, y, x)",
    ),
    Param::new(
        "pool_type",
        "{'avg', 'lp', 'max', 'sum'}",
        "'max'",
        "Pooling type to be applied.",
    ),
    Param::new(
        "global_pool",
        "boolean",
        "False",
        "Ignore kernel size, do global pooling based on current input feature map. ",
    ),
    Param::new(
        "cudnn_off",
        "boolean",
        "False",
        "Turn off cudnn pooling and use MXNet pooling operator. ",
    ),
    Param::new(
        "pooling_convention",
        "{'full', 'same', 'valid'}",
        "'valid'",
        "Pooling convention to be applied.",
    ),
    Param::new(
        "stride",
        "Shape(tuple)",
        "[]",
        "Stride: for pooling (y, x) or (d, y, x). Defaults to 1 for each dimension.",
    ),
    Param::new(
        "pad",
        "Shape(tuple)",
        "[]",
        "Pad for pooling: (y, x) or (d, y, x). Defaults to no padding.",
    ),
    Param::new(
        "p_value",
        "int or None",
        "None",
        "Value of p for Lp pooling, can be 1 or 2, required for Lp Pooling.",
    ),
    Param::new(
        "count_include_pad",
        "boolean or None",
        "None",
        "Only used for AvgPool, specify whether to count padding elements for \
         averagecalculation. For example, with a 5*5 kernel on a 3*3 corner of a image,the sum \
         of the 9 valid elements will be divided by 25 if this is set to true,or it will be \
         divided by 9 if this is set to false. Defaults to true.",
    ),
    Param::new(
        "layout",
        "{None, 'NCDHW', 'NCHW', 'NCW', 'NDHWC', 'NHWC', 'NWC'}",
        "None",
        "Set layout for input and output. Empty for default layout: NCW for 1d, NCHW for 2d \
         and NCDHW for 3d.",
    ),
];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("Pooling", attrs, PARAMS)?;
    let global: bool = p.get("global_pool")?;
    let kernel = kernel_tuple(&p, false)?;
    if kernel.is_empty() && !global {
        return Err(Error::Value(
            "Pooling: kernel must be given unless global_pool is set".into(),
        ));
    }
    let nd = kernel.len();
    let pool = match p.get_choice("pool_type", &["max", "avg", "sum", "lp"])? {
        "max" => PoolType::Max,
        "avg" => PoolType::Avg,
        "sum" => PoolType::Sum,
        _ => match p.get::<Option<i64>>("p_value")? {
            Some(v @ 1..=3) => PoolType::Lp(v as u32),
            other => {
                return Err(Error::Value(format!(
                    "Pooling: lp pooling needs p_value 1, 2 or 3, got {}",
                    other.map_or("None".to_string(), |v| v.to_string())
                )))
            }
        },
    };
    let (full, same) = match p.get_choice("pooling_convention", &["valid", "full", "same"])? {
        "valid" => (false, false),
        "full" => (true, false),
        _ => (true, true),
    };
    p.get::<bool>("cudnn_off")?;
    if nd > 0 {
        check_layout(&p, nd)?;
    }
    let count_include_pad = p.get::<Option<bool>>("count_include_pad")?.unwrap_or(true);
    let pad = if same {
        // MXNet reads three pad entries here, so scripts pass (0, 0, 0) even for 1-D.
        let given = p.get::<Option<Vec<i64>>>("pad")?.unwrap_or_default();
        if given.iter().any(|&v| v != 0) {
            return Err(Error::Value(format!(
                "Pooling: pooling_convention 'same' takes no padding, got pad {}",
                p.raw("pad").unwrap_or("")
            )));
        }
        vec![0; nd]
    } else if nd > 0 {
        window_tuple(&p, "pad", nd, 0, 0)?
    } else {
        Vec::new()
    };
    Ok(Arc::new(Pooling {
        pool,
        global,
        full,
        same,
        // Global pooling ignores these; without a kernel they have nothing to match.
        stride: if nd > 0 {
            window_tuple(&p, "stride", nd, 1, 1)?
        } else {
            Vec::new()
        },
        pad,
        kernel,
        count_include_pad,
    }))
}

/// Registers `Pooling`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Pooling",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: PARAMS,
        doc: "Performs pooling on the input.",
        create: Box::new(create),
    });
}
