//! Definitions of the normalization layers run as compositions of reductions and
//! broadcasts: `LayerNorm`, `InstanceNorm`, `GroupNorm`, `L2Normalization`, `LRN`, and
//! the statistics operator `moments`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Src};
use crate::op::infer::{check_count, infer_from_partial};
use crate::op::{assign_shape, Attrs, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// Shapes a normalization layer derives from its data: its parameters' and its outputs'.
type Derived = (Vec<Shape>, Vec<Shape>);

/// The partial shape inference of a layer whose parameters and outputs follow from the
/// data (input 0): the output's shape gives the data's when only it is known.
fn from_data(
    op: &str,
    names: &[&str],
    inputs: &mut ShapeSlots,
    outputs: &mut ShapeSlots,
    derive: impl Fn(&Shape) -> Result<Derived>,
) -> Result<()> {
    check_count(op, inputs.len(), names.len())?;
    if inputs[0].is_none() {
        if let Some(y) = &outputs[0] {
            inputs[0] = Some(y.clone());
        }
    }
    let Some(data) = inputs[0].clone() else {
        return Ok(());
    };
    let (params, outs) = derive(&data)?;
    for (i, s) in params.iter().enumerate() {
        assign_shape(op, names[i + 1], &mut inputs[i + 1], s)?;
    }
    for (i, s) in outs.iter().enumerate() {
        assign_shape(op, &format!("output {i}"), &mut outputs[i], s)?;
    }
    Ok(())
}

/// `axis` of an array of `ndim` dimensions, negative counting from the end.
fn norm_axis(op: &str, axis: i64, ndim: usize) -> Result<usize> {
    let a = if axis < 0 { axis + ndim as i64 } else { axis };
    if a < 0 || a >= ndim as i64 {
        return Err(Error::Value(format!(
            "{op}: axis {axis} is out of range for data of {ndim} dimensions"
        )));
    }
    Ok(a as usize)
}

/// `shape` with dimension `axis` set to `to`.
fn with_dim(shape: &[usize], axis: usize, to: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s[axis] = to;
    s
}

/// Shape `(1, .., n, .., 1)` of `ndim` dimensions with `n` at `axis`: a per-channel
/// parameter ready to broadcast.
fn along(ndim: usize, axis: usize, n: usize) -> Vec<usize> {
    with_dim(&vec![1; ndim], axis, n)
}

/// Appends `(x - mean) / sqrt(var + eps)` over `axes` (kept); returns (normalized, mean,
/// std, var).
fn standardize(b: &mut Builder, x: Src, axes: &[usize], eps: f64) -> Result<[Src; 4]> {
    let mean = b.reduce("mean", x, axes, true)?;
    let centred = b.binary("broadcast_sub", x, mean)?;
    let sq = b.unary("square", centred)?;
    let var = b.reduce("mean", sq, axes, true)?;
    let shifted = b.scalar("_plus_scalar", var, eps)?;
    let std = b.unary("sqrt", shifted)?;
    let norm = b.binary("broadcast_div", centred, std)?;
    Ok([norm, mean, std, var])
}

/// `x * gamma + beta` with the parameters reshaped to `pshape` to broadcast.
fn affine(b: &mut Builder, x: Src, pshape: &[usize]) -> Result<Src> {
    let g = b.reshape(Src::Input(1), pshape)?;
    let beta = b.reshape(Src::Input(2), pshape)?;
    let scaled = b.binary("broadcast_mul", x, g)?;
    b.binary("broadcast_add", scaled, beta)
}

/// Writes the parts every composite layer shares inside its `impl Operator`.
macro_rules! composite_layer {
    ($name:literal, [$($out:literal),+], $visible:expr) => {
        fn name(&self) -> &'static str {
            $name
        }
        fn num_outputs(&self) -> usize {
            [$($out),+].len()
        }
        fn output_names(&self) -> Vec<String> {
            vec![$($out.to_string()),+]
        }
        fn num_visible_outputs(&self) -> usize {
            $visible(self)
        }
        fn as_composite(&self) -> Option<&dyn Composite> {
            Some(self)
        }
        infer_from_partial!(shape);
    };
}

const EPS_DOC: &str = "An `epsilon` parameter to prevent division by 0.";
const MEAN_VAR_DOC: &str = "Output the mean and std calculated along the given axis.";

// ---------------------------------------------------------------- LayerNorm

const LAYER_NORM_PARAMS: &[Param] = &[
    Param::new(
        "axis",
        "int",
        "-1",
        "The axis to perform layer normalization. Usually, this should be be axis of the channel dimension. Negative values means indexing from right to left.",
    ),
    Param::new("eps", "float", "9.99999975e-06", EPS_DOC),
    Param::new("output_mean_var", "boolean", "False", MEAN_VAR_DOC),
];

/// `LayerNorm`: normalizes over one axis, then scales and shifts per position on it.
struct LayerNorm {
    axis: i64,
    eps: f64,
    output_mean_var: bool,
}

impl Operator for LayerNorm {
    composite_layer!(
        "LayerNorm",
        ["output", "mean", "std"],
        |s: &LayerNorm| if s.output_mean_var { 3 } else { 1 }
    );

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        from_data(
            "LayerNorm",
            &["data", "gamma", "beta"],
            inputs,
            outputs,
            |d| {
                let a = norm_axis("LayerNorm", self.axis, d.len())?;
                let c = Shape::from_slice(&[d[a]]);
                let m = Shape::from_slice(&with_dim(d, a, 1));
                Ok((vec![c.clone(), c], vec![d.clone(), m.clone(), m]))
            },
        )
    }
}

impl Composite for LayerNorm {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let a = norm_axis("LayerNorm", self.axis, d.len())?;
        let mut b = Builder::new();
        let [norm, mean, std, _] = standardize(&mut b, Src::Input(0), &[a], self.eps)?;
        let out = affine(&mut b, norm, &along(d.len(), a, d[a]))?;
        b.finish(vec![out, mean, std])
    }
}

fn layer_norm(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("LayerNorm", attrs, LAYER_NORM_PARAMS)?;
    Ok(Arc::new(LayerNorm {
        axis: p.get("axis")?,
        eps: p.get("eps")?,
        output_mean_var: p.get("output_mean_var")?,
    }))
}

// ---------------------------------------------------------------- InstanceNorm

const INSTANCE_NORM_PARAMS: &[Param] = &[Param::new("eps", "float", "0.00100000005", EPS_DOC)];

/// `InstanceNorm`: normalizes each channel of each sample over its spatial axes.
struct InstanceNorm {
    eps: f64,
}

fn check_spatial(op: &str, d: &Shape) -> Result<()> {
    if d.len() < 3 {
        return Err(Error::Value(format!(
            "{op}: data must have at least 3 dimensions (batch, channel, spatial...), got shape {}",
            fmt_shape(d)
        )));
    }
    Ok(())
}

impl Operator for InstanceNorm {
    composite_layer!(
        "InstanceNorm",
        ["output", "mean", "var"],
        |_: &InstanceNorm| 1
    );

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        from_data(
            "InstanceNorm",
            &["data", "gamma", "beta"],
            inputs,
            outputs,
            |d| {
                check_spatial("InstanceNorm", d)?;
                let c = Shape::from_slice(&[d[1]]);
                let m = Shape::from_slice(&[d[0], d[1]]);
                Ok((vec![c.clone(), c], vec![d.clone(), m.clone(), m]))
            },
        )
    }
}

impl Composite for InstanceNorm {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let axes: Vec<usize> = (2..d.len()).collect();
        let mut b = Builder::new();
        let [norm, mean, _, var] = standardize(&mut b, Src::Input(0), &axes, self.eps)?;
        let out = affine(&mut b, norm, &along(d.len(), 1, d[1]))?;
        let mean = b.reshape(mean, &[d[0], d[1]])?;
        let var = b.reshape(var, &[d[0], d[1]])?;
        b.finish(vec![out, mean, var])
    }
}

fn instance_norm(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("InstanceNorm", attrs, INSTANCE_NORM_PARAMS)?;
    Ok(Arc::new(InstanceNorm { eps: p.get("eps")? }))
}

// ---------------------------------------------------------------- GroupNorm

const GROUP_NORM_PARAMS: &[Param] = &[
    Param::new("num_groups", "int", "1", "Total number of groups."),
    Param::new("eps", "float", "9.99999975e-06", EPS_DOC),
    Param::new("output_mean_var", "boolean", "False", MEAN_VAR_DOC),
];

/// `GroupNorm`: normalizes each group of channels of each sample; gamma and beta hold
/// one value per group.
struct GroupNorm {
    groups: usize,
    eps: f64,
    output_mean_var: bool,
}

impl GroupNorm {
    fn check(&self, d: &Shape) -> Result<()> {
        if d.len() < 2 || self.groups == 0 || !d[1].is_multiple_of(self.groups) {
            return Err(Error::Value(format!(
                "GroupNorm: the channels (axis 1) of data of shape {} must split into num_groups={} groups",
                fmt_shape(d),
                self.groups
            )));
        }
        Ok(())
    }
}

impl Operator for GroupNorm {
    composite_layer!(
        "GroupNorm",
        ["output", "mean", "std"],
        |s: &GroupNorm| if s.output_mean_var { 3 } else { 1 }
    );

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        from_data(
            "GroupNorm",
            &["data", "gamma", "beta"],
            inputs,
            outputs,
            |d| {
                self.check(d)?;
                let g = Shape::from_slice(&[self.groups]);
                let m = Shape::from_slice(&[d[0], self.groups]);
                Ok((vec![g.clone(), g], vec![d.clone(), m.clone(), m]))
            },
        )
    }
}

impl Composite for GroupNorm {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        self.check(d)?;
        let rest: usize = d[1..].iter().product::<usize>() / self.groups;
        let mut b = Builder::new();
        let grouped = b.reshape(Src::Input(0), &[d[0], self.groups, rest])?;
        let [norm, mean, std, _] = standardize(&mut b, grouped, &[2], self.eps)?;
        let out = affine(&mut b, norm, &[1, self.groups, 1])?;
        let out = b.reshape(out, d)?;
        let mean = b.reshape(mean, &[d[0], self.groups])?;
        let std = b.reshape(std, &[d[0], self.groups])?;
        b.finish(vec![out, mean, std])
    }
}

fn group_norm(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("GroupNorm", attrs, GROUP_NORM_PARAMS)?;
    Ok(Arc::new(GroupNorm {
        groups: p.get("num_groups")?,
        eps: p.get("eps")?,
        output_mean_var: p.get("output_mean_var")?,
    }))
}

// ---------------------------------------------------------------- L2Normalization

const L2_PARAMS: &[Param] = &[
    Param::new(
        "eps",
        "float",
        "1.00000001e-10",
        "A small constant for numerical stability.",
    ),
    Param::new(
        "mode",
        "{'channel', 'instance', 'spatial'}",
        "'instance'",
        "Specify the dimension along which to compute L2 norm.",
    ),
];

/// Over which axes `L2Normalization` takes the norm.
#[derive(Clone, Copy, PartialEq)]
enum L2Mode {
    /// Everything but the batch axis.
    Instance,
    /// The channel axis, at each spatial position.
    Channel,
    /// The spatial axes, for each channel.
    Spatial,
}

/// `L2Normalization`: divides the data by its L2 norm (plus eps) over the mode's axes.
struct L2Normalization {
    eps: f64,
    mode: L2Mode,
}

impl L2Normalization {
    /// The reduced axes and the shape of the norm output.
    fn layout(&self, d: &Shape) -> Result<(Vec<usize>, Vec<usize>)> {
        if self.mode != L2Mode::Instance && d.len() < 3 {
            return Err(Error::Value(format!(
                "L2Normalization: channel and spatial modes need at least 3 dimensions, got shape {}",
                fmt_shape(d)
            )));
        }
        if d.is_empty() {
            return Err(Error::Value(
                "L2Normalization: data must have a batch axis".into(),
            ));
        }
        Ok(match self.mode {
            L2Mode::Instance => ((1..d.len()).collect(), vec![d[0]]),
            L2Mode::Channel => (vec![1], with_dim(d, 1, 1)),
            L2Mode::Spatial => ((2..d.len()).collect(), vec![d[0], d[1]]),
        })
    }
}

impl Operator for L2Normalization {
    composite_layer!(
        "L2Normalization",
        ["output", "norm"],
        |_: &L2Normalization| 1
    );

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        from_data("L2Normalization", &["data"], inputs, outputs, |d| {
            let (_, norm) = self.layout(d)?;
            Ok((vec![], vec![d.clone(), Shape::from_slice(&norm)]))
        })
    }
}

impl Composite for L2Normalization {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let (axes, norm_shape) = self.layout(d)?;
        let mut b = Builder::new();
        let sq = b.unary("square", Src::Input(0))?;
        let sum = b.reduce("sum", sq, &axes, true)?;
        let shifted = b.scalar("_plus_scalar", sum, self.eps)?;
        let norm = b.unary("sqrt", shifted)?;
        let out = b.binary("broadcast_div", Src::Input(0), norm)?;
        let norm = b.reshape(norm, &norm_shape)?;
        b.finish(vec![out, norm])
    }
}

fn l2_normalization(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("L2Normalization", attrs, L2_PARAMS)?;
    let mode = match p.get_choice("mode", &["instance", "channel", "spatial"])? {
        "channel" => L2Mode::Channel,
        "spatial" => L2Mode::Spatial,
        _ => L2Mode::Instance,
    };
    Ok(Arc::new(L2Normalization {
        eps: p.get("eps")?,
        mode,
    }))
}

// ---------------------------------------------------------------- LRN

const LRN_PARAMS: &[Param] = &[
    Param::new(
        "alpha",
        "float",
        "9.99999975e-05",
        "The variance scaling parameter alpha in the LRN expression.",
    ),
    Param::new(
        "beta",
        "float",
        "0.75",
        "The power parameter beta in the LRN expression.",
    ),
    Param::new(
        "knorm",
        "float",
        "2",
        "The parameter k in the LRN expression.",
    ),
    Param::required(
        "nsize",
        "int (non-negative), required",
        "normalization window width in elements.",
    ),
];

/// `LRN`: divides each value by `(knorm + alpha / nsize * sum of squares over nsize
/// neighbouring channels) ^ beta`.
struct Lrn {
    alpha: f64,
    beta: f64,
    knorm: f64,
    nsize: usize,
}

impl Operator for Lrn {
    composite_layer!("LRN", ["output", "tmp_norm"], |_: &Lrn| 1);

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        from_data("LRN", &["data"], inputs, outputs, |d| {
            if d.len() != 4 {
                return Err(Error::Value(format!(
                    "LRN: data must be 4-dimensional (batch, channel, height, width), got shape {}",
                    fmt_shape(d)
                )));
            }
            Ok((vec![], vec![d.clone(), d.clone()]))
        })
    }
}

impl Composite for Lrn {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let half = (self.nsize / 2) as i64;
        let mut b = Builder::new();
        let sq = b.unary("square", Src::Input(0))?;
        // A sum pool over the channel axis, as a (channel x 1) window on an image whose
        // rows are the channels.
        let rows = b.reshape(sq, &[d[0], 1, d[1], d[2] * d[3]])?;
        let window = b.op(
            "Pooling",
            &[
                ("pool_type", "sum".into()),
                ("kernel", tuple_attr(&[self.nsize as i64, 1])),
                ("pad", tuple_attr(&[half, 0])),
                ("stride", tuple_attr(&[1, 1])),
            ],
            &[rows],
        )?;
        let window = b.reshape(window, d)?;
        let scaled = b.scalar("_mul_scalar", window, self.alpha / self.nsize as f64)?;
        let norm = b.scalar("_plus_scalar", scaled, self.knorm)?;
        let factor = b.scalar("_power_scalar", norm, -self.beta)?;
        let out = b.binary("elemwise_mul", Src::Input(0), factor)?;
        b.finish(vec![out, norm])
    }
}

fn lrn(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("LRN", attrs, LRN_PARAMS)?;
    let nsize: usize = p.get("nsize")?;
    if nsize == 0 || nsize.is_multiple_of(2) {
        return Err(Error::Value(format!(
            "LRN: nsize must be odd and positive, got {nsize}"
        )));
    }
    Ok(Arc::new(Lrn {
        alpha: p.get("alpha")?,
        beta: p.get("beta")?,
        knorm: p.get("knorm")?,
        nsize,
    }))
}

// ---------------------------------------------------------------- moments

const MOMENTS_PARAMS: &[Param] = &[
    Param::new(
        "axes",
        "Shape or None",
        "None",
        "Array of ints. Axes along which to compute the moments.",
    ),
    Param::new(
        "keepdims",
        "boolean",
        "False",
        "produce moments with the same dimensionality as the input.",
    ),
];

/// `moments`: the mean and variance over some axes.
struct Moments {
    axes: Option<Vec<i64>>,
    keepdims: bool,
}

impl Moments {
    fn axes(&self, ndim: usize) -> Result<Vec<usize>> {
        match &self.axes {
            None => Ok((0..ndim).collect()),
            Some(v) => {
                let mut out = Vec::new();
                for &a in v {
                    let a = norm_axis("moments", a, ndim)?;
                    if out.contains(&a) {
                        return Err(Error::Value(format!("moments: axis {a} is given twice")));
                    }
                    out.push(a);
                }
                out.sort_unstable();
                Ok(out)
            }
        }
    }

    fn reduced(&self, d: &Shape) -> Result<Shape> {
        let axes = self.axes(d.len())?;
        let dims: Vec<usize> = (0..d.len())
            .filter_map(|i| match (axes.contains(&i), self.keepdims) {
                (true, true) => Some(1),
                (true, false) => None,
                (false, _) => Some(d[i]),
            })
            .collect();
        // Reducing every axis leaves one element, as MXNet's reductions do.
        Ok(Shape::from_slice(if dims.is_empty() {
            &[1]
        } else {
            &dims
        }))
    }
}

impl Operator for Moments {
    composite_layer!("moments", ["output0", "output1"], |_: &Moments| 2);

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        check_count("moments", inputs.len(), 1)?;
        let Some(d) = inputs[0].clone() else {
            return Ok(());
        };
        let r = self.reduced(&d)?;
        assign_shape("moments", "mean", &mut outputs[0], &r)?;
        assign_shape("moments", "var", &mut outputs[1], &r)
    }
}

impl Composite for Moments {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let d = &shapes[0];
        let axes = self.axes(d.len())?;
        let r = self.reduced(d)?;
        let mut b = Builder::new();
        let [_, mean, _, var] = standardize(&mut b, Src::Input(0), &axes, 0.0)?;
        let mean = b.reshape(mean, &r)?;
        let var = b.reshape(var, &r)?;
        b.finish(vec![mean, var])
    }
}

fn moments(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("moments", attrs, MOMENTS_PARAMS)?;
    let axes: Option<Vec<i64>> = match p.raw("axes") {
        None | Some("None") | Some("") => None,
        Some(_) => Some(p.get("axes")?),
    };
    Ok(Arc::new(Moments {
        axes,
        keepdims: p.get("keepdims")?,
    }))
}

fn def(
    name: &'static str,
    inputs: &'static [&'static str],
    params: &'static [Param],
    doc: &'static str,
    create: fn(&Attrs) -> Result<OpRef>,
) -> OpDef {
    OpDef {
        name,
        aliases: &[],
        inputs,
        variadic: false,
        params,
        doc,
        create: Box::new(create),
    }
}

/// Registers the normalization layers and `moments`.
pub fn register(r: &mut Registry) {
    r.add(def(
        "LayerNorm",
        &["data", "gamma", "beta"],
        LAYER_NORM_PARAMS,
        "Layer normalization over one axis, with a learned scale and shift.",
        layer_norm,
    ));
    r.add(def(
        "InstanceNorm",
        &["data", "gamma", "beta"],
        INSTANCE_NORM_PARAMS,
        "Instance normalization: each channel of each sample over its spatial axes.",
        instance_norm,
    ));
    r.add(def(
        "GroupNorm",
        &["data", "gamma", "beta"],
        GROUP_NORM_PARAMS,
        "Group normalization: each group of channels of each sample.",
        group_norm,
    ));
    r.add(def(
        "L2Normalization",
        &["data"],
        L2_PARAMS,
        "Normalizes the data to unit L2 norm over the mode's axes.",
        l2_normalization,
    ));
    r.add(def(
        "LRN",
        &["data"],
        LRN_PARAMS,
        "Local response normalization across neighbouring channels.",
        lrn,
    ));
    r.add(def(
        "moments",
        &["data"],
        MOMENTS_PARAMS,
        "The mean and variance of the data over the given axes.",
        moments,
    ));
}
