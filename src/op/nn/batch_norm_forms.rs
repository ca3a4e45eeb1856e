//! The other names of batch normalization, run as `BatchNorm` itself: the legacy
//! `BatchNorm_v1` and `_contrib_SyncBatchNorm` (on one device, its statistics are the
//! device's batch statistics; its third output is the variance).

use crate::dtype::DType;
use crate::error::Result;
use crate::op::composite::{Builder, Composite, Decomposition, Src};
use crate::op::{
    find, Attrs, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots, TypeSlots,
};
use crate::shape::Shape;
use std::sync::Arc;

const V1_PARAMS: &[Param] = &[
    Param::new("eps", "float", "0.00100000005", "Epsilon to prevent div 0"),
    Param::new("momentum", "float", "0.899999976", "Momentum for moving average"),
    Param::new("fix_gamma", "boolean", "True", "Fix gamma while training"),
    Param::new("use_global_stats", "boolean", "False", "Whether use global moving statistics instead of local batch-norm. This will force change batch-norm into a scale shift operator."),
    Param::new("output_mean_var", "boolean", "False", "Output All,normal mean and var"),
];

const SYNC_PARAMS: &[Param] = &[
    Param::new("eps", "float", "0.00100000005", "Epsilon to prevent div 0"),
    Param::new("momentum", "float", "0.899999976", "Momentum for moving average"),
    Param::new("fix_gamma", "boolean", "True", "Fix gamma while training"),
    Param::new("use_global_stats", "boolean", "False", "Whether use global moving statistics instead of local batch-norm. This will force change batch-norm into a scale shift operator."),
    Param::new("output_mean_var", "boolean", "False", "Output the mean and inverse std "),
    Param::new("ndev", "int", "1", "The count of GPU devices"),
    Param::required("key", "string", "Hash key for synchronization, please set the same hash key for same layer, Block.prefix is typically used as in :class:`gluon.nn.contrib.SyncBatchNorm`."),
];

/// An operator that is `BatchNorm` under another name and attribute set.
struct BatchNormForm {
    name: &'static str,
    inner: OpRef,
    /// For SyncBatchNorm, whose third output is the variance rather than BatchNorm's
    /// inverse standard deviation: the epsilon to take back out.
    var_eps: Option<f64>,
}

impl Operator for BatchNormForm {
    fn name(&self) -> &'static str {
        self.name
    }
    fn num_outputs(&self) -> usize {
        self.inner.num_outputs()
    }
    fn num_visible_outputs(&self) -> usize {
        self.inner.num_visible_outputs()
    }
    fn output_names(&self) -> Vec<String> {
        self.inner.output_names()
    }
    fn aux_inputs(&self) -> Vec<usize> {
        self.inner.aux_inputs()
    }
    fn input_var_attrs(&self, input: usize) -> &'static [(&'static str, &'static str)] {
        self.inner.input_var_attrs(input)
    }
    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        self.inner.infer_shape(inputs)
    }
    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        self.inner.infer_type(inputs)
    }
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        self.inner.infer_shape_partial(inputs, outputs)
    }
    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        self.inner.infer_type_partial(inputs, outputs)
    }
    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for BatchNormForm {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let mut b = Builder::new();
        let inputs: Vec<Src> = (0..shapes.len()).map(Src::Input).collect();
        let mut outs = b.step(self.inner.clone(), &inputs);
        if let Some(eps) = self.var_eps {
            // var = 1 / invstd^2 - eps
            let sq = b.unary("square", outs[2])?;
            let inv = b.unary("reciprocal", sq)?;
            outs[2] = b.scalar("_minus_scalar", inv, eps)?;
        }
        b.finish(outs)
    }
}

/// `BatchNorm` with the attributes of `keep` given in `attrs` (the defaults agree).
fn batch_norm(attrs: &Attrs, keep: &[&str]) -> Result<OpRef> {
    let inner: Attrs = keep
        .iter()
        .filter_map(|&k| attrs.get(k).map(|v| (k.to_string(), v.clone())))
        .collect();
    find("BatchNorm")?.build(&inner)
}

const COMMON: &[&str] = &[
    "eps",
    "momentum",
    "fix_gamma",
    "use_global_stats",
    "output_mean_var",
];

fn v1(attrs: &Attrs) -> Result<OpRef> {
    Params::declared("BatchNorm_v1", attrs, V1_PARAMS)?;
    Ok(Arc::new(BatchNormForm {
        name: "BatchNorm_v1",
        inner: batch_norm(attrs, COMMON)?,
        var_eps: None,
    }))
}

fn sync(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_contrib_SyncBatchNorm", attrs, SYNC_PARAMS)?;
    p.get::<i64>("ndev")?;
    p.get::<String>("key")?;
    Ok(Arc::new(BatchNormForm {
        name: "_contrib_SyncBatchNorm",
        inner: batch_norm(attrs, COMMON)?,
        var_eps: Some(p.get("eps")?),
    }))
}

/// Registers `BatchNorm_v1` and `_contrib_SyncBatchNorm`.
pub fn register(r: &mut Registry) {
    for (name, params, doc, create) in [
        ("BatchNorm_v1", V1_PARAMS, "Batch normalization (the legacy form, channels on axis 1).", v1 as fn(&Attrs) -> Result<OpRef>),
        ("_contrib_SyncBatchNorm", SYNC_PARAMS, "Batch normalization with statistics over every device of a step; on one device, BatchNorm.", sync),
    ] {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &["data", "gamma", "beta", "moving_mean", "moving_var"],
            variadic: false,
            params,
            doc,
            create: Box::new(create),
        });
    }
}
