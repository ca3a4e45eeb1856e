//! The multi-tensor SGD updates (`multi_sgd_update` and its momentum and
//! multi-precision forms): one operator updating several weights, each with its own
//! learning rate and weight decay, element by element as the single-weight update of the
//! same formula.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::optim::op::is_float;
use crate::op::optim::spec::{Hyper, Kind, SGD, SGD_MOM};
use crate::op::optim::UpdateOp;
use crate::op::params::Params;
use crate::op::{assign_shape, Attrs, Operator, Param, ShapeSlots, TypeSlots};
use crate::shape::fmt_shape;
use std::ops::Range;

/// The operators of this family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiKind {
    Sgd,
    SgdMom,
    MpSgd,
    MpSgdMom,
}

/// What one multi-tensor operator is.
pub struct MultiSpec {
    pub name: &'static str,
    /// Each weight's inputs, in order.
    pub per_weight: &'static [&'static str],
    /// How many of each weight's last inputs are float32 whatever the weight's type.
    pub fp32_tail: usize,
    pub params: &'static [Param],
    pub doc: &'static str,
}

const LRS: Param = Param::required("lrs", "tuple of <float>", "Learning rates.");
const WDS: Param = Param::required(
    "wds",
    "tuple of <float>",
    "Weight decay augments the objective function with a regularization term that penalizes large weights. The penalty scales with the square of the magnitude of each weight.",
);
const NUM_WEIGHTS: Param = Param::new("num_weights", "int", "1", "Number of updated weights.");

const MULTI_SGD: &[Param] = &[LRS, WDS, SGD[2], SGD[3], NUM_WEIGHTS];
const MULTI_SGD_MOM: &[Param] = &[LRS, WDS, SGD_MOM[1], SGD[2], SGD[3], NUM_WEIGHTS];

static SPECS: [MultiSpec; 4] = [
    MultiSpec {
        name: "multi_sgd_update",
        per_weight: &["weight", "grad"],
        fp32_tail: 0,
        params: MULTI_SGD,
        doc: "Update function for Stochastic Gradient Descent (SGD) optimizer, over several weights.",
    },
    MultiSpec {
        name: "multi_sgd_mom_update",
        per_weight: &["weight", "grad", "mom"],
        fp32_tail: 0,
        params: MULTI_SGD_MOM,
        doc: "Momentum update function for Stochastic Gradient Descent (SGD) optimizer, over several weights.",
    },
    MultiSpec {
        name: "multi_mp_sgd_update",
        per_weight: &["weight", "grad", "weight32"],
        fp32_tail: 1,
        params: MULTI_SGD,
        doc: "Update function for multi-precision Stochastic Gradient Descent (SGD) optimizer, over several weights.",
    },
    MultiSpec {
        name: "multi_mp_sgd_mom_update",
        per_weight: &["weight", "grad", "mom", "weight32"],
        fp32_tail: 2,
        params: MULTI_SGD_MOM,
        doc: "Momentum update function for multi-precision Stochastic Gradient Descent (SGD) optimizer, over several weights.",
    },
];

impl MultiKind {
    pub const ALL: [MultiKind; 4] = [
        MultiKind::Sgd,
        MultiKind::SgdMom,
        MultiKind::MpSgd,
        MultiKind::MpSgdMom,
    ];

    pub fn spec(self) -> &'static MultiSpec {
        &SPECS[self as usize]
    }

    /// The single-weight update computing one weight of this kind, and how many of the
    /// weight's inputs it reads. A float32 weight of a multi-precision kind is updated
    /// from itself, its float32 copy left alone, as MXNet does.
    fn per_weight(self, dtype: DType) -> (Kind, usize) {
        match (self, dtype) {
            (MultiKind::Sgd, _) | (MultiKind::MpSgd, DType::F32) => (Kind::AggSgd, 2),
            (MultiKind::SgdMom, _) | (MultiKind::MpSgdMom, DType::F32) => (Kind::SgdMom, 3),
            (MultiKind::MpSgd, _) => (Kind::AggMpSgd, 3),
            (MultiKind::MpSgdMom, _) => (Kind::MpSgdMom, 4),
        }
    }
}

/// A multi-tensor update with its parsed arguments.
pub struct MultiUpdateOp {
    pub kind: MultiKind,
    pub lrs: Vec<f64>,
    pub wds: Vec<f64>,
    pub rescale_grad: f64,
    pub clip_gradient: f64,
    pub momentum: f64,
}

impl MultiUpdateOp {
    pub fn parse(kind: MultiKind, attrs: &Attrs) -> Result<MultiUpdateOp> {
        let spec = kind.spec();
        let p = Params::declared(spec.name, attrs, spec.params)?;
        let n: usize = p.get("num_weights")?;
        let lrs: Vec<f64> = p.get("lrs")?;
        let wds: Vec<f64> = p.get("wds")?;
        if n == 0 {
            return Err(Error::Value(format!(
                "{}: num_weights must be at least 1",
                spec.name
            )));
        }
        for (what, v) in [("learning rates", &lrs), ("weight decays", &wds)] {
            if v.len() != n {
                return Err(Error::Value(format!(
                    "{}: {} {what} given for num_weights={n}",
                    spec.name,
                    v.len()
                )));
            }
        }
        let momentum = match kind {
            MultiKind::SgdMom | MultiKind::MpSgdMom => p.get("momentum")?,
            _ => 0.0,
        };
        Ok(MultiUpdateOp {
            kind,
            lrs,
            wds,
            rescale_grad: p.get("rescale_grad")?,
            clip_gradient: p.get("clip_gradient")?,
            momentum,
        })
    }

    fn stride(&self) -> usize {
        self.kind.spec().per_weight.len()
    }

    /// The number of weights.
    pub fn count(&self) -> usize {
        self.lrs.len()
    }

    /// The single-weight update of weight `t` (whose type is `dtype`) and the inputs it
    /// reads.
    pub fn weight_update(&self, t: usize, dtype: DType) -> (UpdateOp, Range<usize>) {
        let (kind, reads) = self.kind.per_weight(dtype);
        let mut h = Hyper::defaults(kind);
        h.lr = self.lrs[t];
        h.wd = self.wds[t];
        h.rescale_grad = self.rescale_grad;
        h.clip_gradient = self.clip_gradient;
        h.momentum = self.momentum;
        let first = t * self.stride();
        (
            UpdateOp {
                kind,
                h: h.rounded(kind),
            },
            first..first + reads,
        )
    }
}

impl Operator for MultiUpdateOp {
    fn name(&self) -> &'static str {
        self.kind.spec().name
    }

    fn num_outputs(&self) -> usize {
        self.count()
    }

    fn input_names(&self) -> Option<Vec<String>> {
        let per = self.kind.spec().per_weight;
        Some(
            (0..self.count())
                .flat_map(|t| per.iter().map(move |n| format!("{n}_{t}")))
                .collect(),
        )
    }

    fn aux_inputs(&self) -> Vec<usize> {
        let s = self.stride();
        (0..self.count())
            .flat_map(|t| (t * s + 2)..(t * s + s))
            .collect()
    }

    /// Each weight's inputs and its output share one shape.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let (name, s) = (self.name(), self.stride());
        self.check_count(inputs.len())?;
        let per = self.kind.spec().per_weight;
        for (t, (group, out)) in inputs.chunks_mut(s).zip(outputs.iter_mut()).enumerate() {
            let Some(known) = group.iter().chain(std::iter::once(&*out)).flatten().next() else {
                continue;
            };
            let known = known.clone();
            for (j, slot) in group.iter_mut().enumerate() {
                if let Some(have) = slot.as_ref().filter(|h| **h != known) {
                    return Err(Error::Value(format!(
                        "{name}: {}_{t} has shape {} but weight_{t} has shape {}",
                        per[j],
                        fmt_shape(have),
                        fmt_shape(&known)
                    )));
                }
                *slot = Some(known.clone());
            }
            assign_shape(name, &format!("output {t}"), out, &known)?;
        }
        Ok(())
    }

    infer_from_partial!(shape);

    /// Each weight's type is a float type shared by its gradient, its non-float32
    /// states and its output; the multi-precision states are float32.
    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        let (name, s) = (self.name(), self.stride());
        self.check_count(inputs.len())?;
        let spec = self.kind.spec();
        let same = s - spec.fp32_tail;
        for (t, (group, out)) in inputs.chunks_mut(s).zip(outputs.iter_mut()).enumerate() {
            for slot in &mut group[same..] {
                match slot {
                    Some(d) if *d != DType::F32 => {
                        return Err(Error::Type(format!(
                            "{name}: weight32_{t} and the multi-precision states must be float32, got {d}"
                        )))
                    }
                    _ => *slot = Some(DType::F32),
                }
            }
            let Some(w) = group[..same]
                .iter()
                .chain(std::iter::once(&*out))
                .flatten()
                .next()
            else {
                continue;
            };
            let w = *w;
            if !is_float(w) {
                return Err(Error::Type(format!(
                    "{name}: weight_{t} must be float16, float32 or float64, got {w}"
                )));
            }
            for (j, slot) in group[..same]
                .iter_mut()
                .chain(std::iter::once(out))
                .enumerate()
            {
                match slot {
                    Some(d) if *d != w => {
                        let what = spec
                            .per_weight
                            .get(j)
                            .map_or(format!("output {t}"), |n| format!("{n}_{t}"));
                        return Err(Error::Type(format!(
                            "{name}: {what} has dtype {d} but weight_{t} has dtype {w}"
                        )));
                    }
                    _ => *slot = Some(w),
                }
            }
        }
        Ok(())
    }

    infer_from_partial!(type);
}

impl MultiUpdateOp {
    fn check_count(&self, inputs: usize) -> Result<()> {
        let want = self.count() * self.stride();
        if inputs != want {
            return Err(Error::Value(format!(
                "{}: expected {want} inputs ({} per weight for num_weights={}), got {inputs}",
                self.name(),
                self.stride(),
                self.count()
            )));
        }
        Ok(())
    }
}
