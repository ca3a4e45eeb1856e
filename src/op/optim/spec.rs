//! What each fused update operator is: its name, inputs, arguments (with MXNet's
//! defaults) and which inputs it writes, plus the parsed hyperparameters.

use crate::error::Result;
use crate::op::params::parse_float;
use crate::op::{Attrs, Param, Params};

/// The update operators of this family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sgd,
    SgdMom,
    MpSgd,
    MpSgdMom,
    NagMom,
    MpNagMom,
    Adam,
    RmsProp,
    RmsPropAlex,
    Ftrl,
    SignSgd,
    Signum,
    AdaGrad,
    AdaDelta,
    AggSgd,
    AggMpSgd,
    Ftml,
    AdamW,
    MpAdamW,
}

/// The static description of one update operator.
#[derive(Clone, Copy)]
pub struct Spec {
    /// The registered name.
    pub name: &'static str,
    /// Input names, weight and gradient first.
    pub inputs: &'static [&'static str],
    /// The arguments, declared with MXNet's defaults.
    pub params: &'static [Param],
    /// Inputs the op writes in place (its optimizer states).
    pub aux: &'static [usize],
    /// Mixed precision: inputs from this index on are float32 whatever the weight's type.
    pub mp_from: Option<usize>,
    /// True if the arguments are MXNet `float` fields (rounded to float32 when parsed);
    /// false for the Python-side optimizers whose scalars are doubles.
    pub f32_params: bool,
    /// True if the last input is `rescale_grad`, a one-element float32 array read when
    /// the update runs (the update is skipped when it is zero or not finite).
    pub scale_input: bool,
    /// One-line description.
    pub doc: &'static str,
}

impl Spec {
    /// An update operator over `inputs` (weight, gradient, then the optimizer states it
    /// updates in place) with float32 arguments.
    const fn new(
        name: &'static str,
        inputs: &'static [&'static str],
        params: &'static [Param],
    ) -> Spec {
        const INDICES: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7];
        Spec {
            name,
            inputs,
            params,
            aux: INDICES.split_at(inputs.len()).0.split_at(2).1,
            mp_from: None,
            f32_params: true,
            scale_input: false,
            doc: "",
        }
    }

    const fn doc(self, doc: &'static str) -> Spec {
        Spec { doc, ..self }
    }

    /// The multi-precision form: the states, float32 master weight included, are float32.
    const fn mixed_precision(self) -> Spec {
        Spec {
            mp_from: Some(2),
            ..self
        }
    }

    /// The last input is the `rescale_grad` array, which is neither a state nor updated.
    const fn scaled(self) -> Spec {
        Spec {
            scale_input: true,
            aux: self.aux.split_at(self.aux.len() - 1).0,
            ..self
        }
    }

    /// Arguments read as doubles, as the Python-side optimizers hold them.
    const fn double_params(self) -> Spec {
        Spec {
            f32_params: false,
            ..self
        }
    }
}

/// The update operators, in the order of `Kind`.
static SPECS: [Spec; Kind::ALL.len()] = [
    Spec::new("sgd_update", &["weight", "grad"], SGD)
        .doc("Update function for Stochastic Gradient Descent (SGD) optimizer."),
    Spec::new("sgd_mom_update", &["weight", "grad", "mom"], SGD_MOM)
        .doc("Momentum update function for Stochastic Gradient Descent (SGD) optimizer."),
    Spec::new("mp_sgd_update", &["weight", "grad", "weight32"], SGD)
        .mixed_precision()
        .doc("Updater function for multi-precision sgd optimizer."),
    Spec::new(
        "mp_sgd_mom_update",
        &["weight", "grad", "mom", "weight32"],
        SGD_MOM,
    )
    .mixed_precision()
    .doc("Updater function for multi-precision sgd optimizer with momentum."),
    Spec::new("nag_mom_update", &["weight", "grad", "mom"], NAG)
        .doc("Update function for Nesterov Accelerated Gradient (NAG) optimizer."),
    Spec::new(
        "mp_nag_mom_update",
        &["weight", "grad", "mom", "weight32"],
        NAG,
    )
    .mixed_precision()
    .doc("Update function for multi-precision Nesterov Accelerated Gradient (NAG) optimizer."),
    Spec::new("adam_update", &["weight", "grad", "mean", "var"], ADAM)
        .doc("Update function for Adam optimizer."),
    Spec::new("rmsprop_update", &["weight", "grad", "n"], RMSPROP)
        .doc("Update function for RMSProp optimizer (Tieleman & Hinton)."),
    Spec::new(
        "rmspropalex_update",
        &["weight", "grad", "n", "g", "delta"],
        RMSPROP_ALEX,
    )
    .doc("Update function for RMSPropAlex optimizer (Graves)."),
    Spec::new("ftrl_update", &["weight", "grad", "z", "n"], FTRL)
        .doc("Update function for Ftrl optimizer."),
    Spec::new("signsgd_update", &["weight", "grad"], PLAIN)
        .doc("Update function for SignSGD optimizer."),
    Spec::new("signum_update", &["weight", "grad", "mom"], SIGNUM)
        .doc("SIGN momentUM (Signum) optimizer."),
    Spec::new(
        "_rsmx_adagrad_update",
        &["weight", "grad", "history"],
        ADAGRAD,
    )
    .double_params()
    .doc("Dense AdaGrad update, as MXNet's AdaGrad.update computes it."),
    Spec::new(
        "_rsmx_adadelta_update",
        &["weight", "grad", "acc_g", "acc_delta"],
        ADADELTA,
    )
    .double_params()
    .doc("Dense AdaDelta update, as MXNet's AdaDelta.update computes it."),
    Spec::new("_rsmx_agg_sgd_update", &["weight", "grad"], PLAIN)
        .doc("SGD without momentum as MXNet's aggregated multi_sgd_update computes it."),
    Spec::new(
        "_rsmx_agg_mp_sgd_update",
        &["weight", "grad", "weight32"],
        PLAIN,
    )
    .mixed_precision()
    .doc("Multi-precision SGD as MXNet's aggregated multi_mp_sgd_update computes it."),
    Spec::new("ftml_update", &["weight", "grad", "d", "v", "z"], FTML)
        .doc("The FTML optimizer's update (Follow the Moving Leader)."),
    Spec::new(
        "_adamw_update",
        &["weight", "grad", "mean", "var", "rescale_grad"],
        ADAMW,
    )
    .scaled()
    .doc("Update function for AdamW optimizer (Adam with decoupled weight decay)."),
    Spec::new(
        "_mp_adamw_update",
        &["weight", "grad", "mean", "var", "weight32", "rescale_grad"],
        ADAMW,
    )
    .scaled()
    .mixed_precision()
    .doc("Update function for multi-precision AdamW optimizer."),
];

const LR: Param = Param::required("lr", "float", "Learning rate");
const WD: Param = Param::new(
    "wd",
    "float",
    "0",
    "Weight decay augments the objective function with a regularization term that penalizes large weights. The penalty scales with the square of the magnitude of each weight.",
);
const RESCALE_GRAD: Param = Param::new(
    "rescale_grad",
    "float",
    "1",
    "Rescale gradient to grad = rescale_grad*grad.",
);
const CLIP_GRADIENT: Param = Param::new(
    "clip_gradient",
    "float",
    "-1",
    "Clip gradient to the range of [-clip_gradient, clip_gradient] If clip_gradient <= 0, gradient clipping is turned off. grad = max(min(grad, clip_gradient), -clip_gradient).",
);
const MOMENTUM: Param = Param::new(
    "momentum",
    "float",
    "0",
    "The decay rate of momentum estimates at each epoch.",
);
const EPSILON: Param = Param::new(
    "epsilon",
    "float",
    "1e-08",
    "A small constant for numerical stability.",
);
const CLIP_WEIGHTS: Param = Param::new(
    "clip_weights",
    "float",
    "-1",
    "Clip weights to the range of [-clip_weights, clip_weights] If clip_weights <= 0, weight clipping is turned off. weights = max(min(weights, clip_weights), -clip_weights).",
);

pub(crate) const SGD: &[Param] = &[
    LR,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    Param::new(
        "lazy_update",
        "boolean",
        "True",
        "If true, lazy updates are applied if gradient's stype is row_sparse.",
    ),
];

pub(crate) const SGD_MOM: &[Param] = &[
    LR,
    MOMENTUM,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    Param::new(
        "lazy_update",
        "boolean",
        "True",
        "If true, lazy updates are applied if gradient's stype is row_sparse and both weight and momentum have the same stype",
    ),
];

pub(crate) const NAG: &[Param] = &[LR, MOMENTUM, WD, RESCALE_GRAD, CLIP_GRADIENT];

const ADAM_BETA1: Param = Param::new(
    "beta1",
    "float",
    "0.9",
    "The decay rate for the 1st moment estimates.",
);
const ADAM_BETA2: Param = Param::new(
    "beta2",
    "float",
    "0.999",
    "The decay rate for the 2nd moment estimates.",
);

const ADAM: &[Param] = &[
    LR,
    ADAM_BETA1,
    ADAM_BETA2,
    EPSILON,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    Param::new(
        "lazy_update",
        "boolean",
        "True",
        "If true, lazy updates are applied if gradient's stype is row_sparse and all of w, m and v have the same stype",
    ),
];

const RMSPROP: &[Param] = &[
    LR,
    Param::new(
        "gamma1",
        "float",
        "0.95",
        "The decay rate of momentum estimates.",
    ),
    EPSILON,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    CLIP_WEIGHTS,
];

const RMSPROP_ALEX: &[Param] = &[
    LR,
    Param::new("gamma1", "float", "0.95", "Decay rate."),
    Param::new("gamma2", "float", "0.9", "Decay rate."),
    EPSILON,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    CLIP_WEIGHTS,
];

const FTRL: &[Param] = &[
    LR,
    Param::new(
        "lamda1",
        "float",
        "0.01",
        "The L1 regularization coefficient.",
    ),
    Param::new("beta", "float", "1", "Per-Coordinate Learning Rate beta."),
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
];

const ADAMW: &[Param] = &[
    LR,
    ADAM_BETA1,
    ADAM_BETA2,
    EPSILON,
    WD,
    Param::required("eta", "float", "Learning rate schedule multiplier"),
    CLIP_GRADIENT,
];

const PLAIN: &[Param] = &[LR, WD, RESCALE_GRAD, CLIP_GRADIENT];

const FTML: &[Param] = &[
    LR,
    Param::new("beta1", "float", "0.6", "Generally close to 0.5."),
    Param::new("beta2", "float", "0.999", "Generally close to 1."),
    Param::new("epsilon", "double", "1e-08", "Epsilon to prevent div 0."),
    Param::required("t", "int", "Number of update."),
    WD,
    RESCALE_GRAD,
    Param::new(
        "clip_grad",
        "float",
        "-1",
        "Clip gradient to the range of [-clip_gradient, clip_gradient] If clip_gradient <= 0, gradient clipping is turned off. grad = max(min(grad, clip_gradient), -clip_gradient).",
    ),
];

const SIGNUM: &[Param] = &[
    LR,
    MOMENTUM,
    WD,
    RESCALE_GRAD,
    CLIP_GRADIENT,
    Param::new(
        "wd_lh",
        "float",
        "0",
        "The amount of weight decay that does not go into gradient/momentum calculationsotherwise do weight decay algorithmically only.",
    ),
];

const ADAGRAD: &[Param] = &[
    Param::required("lr", "double", "Learning rate"),
    Param::new(
        "epsilon",
        "double",
        "1e-07",
        "Small value added to the history's square root to avoid division by 0.",
    ),
    Param::new("wd", "double", "0", "weight decay"),
    Param::new(
        "rescale_grad",
        "double",
        "1",
        "Rescale gradient to grad = rescale_grad*grad.",
    ),
    Param::new(
        "clip_gradient",
        "double",
        "-1",
        "Clip gradient to the range of [-clip_gradient, clip_gradient] If clip_gradient <= 0, gradient clipping is turned off.",
    ),
];

const ADADELTA: &[Param] = &[
    Param::new(
        "rho",
        "double",
        "0.9",
        "Decay rate for both squared gradients and delta.",
    ),
    Param::new(
        "epsilon",
        "double",
        "1e-05",
        "Small value to avoid division by 0.",
    ),
    Param::new("wd", "double", "0", "weight decay"),
    Param::new(
        "rescale_grad",
        "double",
        "1",
        "Rescale gradient to grad = rescale_grad*grad.",
    ),
    Param::new(
        "clip_gradient",
        "double",
        "-1",
        "Clip gradient to the range of [-clip_gradient, clip_gradient] If clip_gradient <= 0, gradient clipping is turned off.",
    ),
];

/// The names of [`Hyper`]'s fields, in the order of [`Hyper::fields_mut`].
const FIELDS: [&str; 17] = [
    "lr",
    "wd",
    "rescale_grad",
    "clip_gradient",
    "momentum",
    "beta1",
    "beta2",
    "epsilon",
    "gamma1",
    "gamma2",
    "clip_weights",
    "lamda1",
    "beta",
    "wd_lh",
    "rho",
    "t",
    "eta",
];

/// The argument FTML names `clip_grad`, read into [`Hyper::clip_gradient`].
const CLIP_GRAD: &str = "clip_grad";

impl Kind {
    /// Every kind, in registration order.
    pub const ALL: [Kind; 19] = [
        Kind::Sgd,
        Kind::SgdMom,
        Kind::MpSgd,
        Kind::MpSgdMom,
        Kind::NagMom,
        Kind::MpNagMom,
        Kind::Adam,
        Kind::RmsProp,
        Kind::RmsPropAlex,
        Kind::Ftrl,
        Kind::SignSgd,
        Kind::Signum,
        Kind::AdaGrad,
        Kind::AdaDelta,
        Kind::AggSgd,
        Kind::AggMpSgd,
        Kind::Ftml,
        Kind::AdamW,
        Kind::MpAdamW,
    ];

    /// The kind's description.
    pub fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    /// The kind registered under `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.spec().name == name)
    }
}

/// The hyperparameters of one update, as given (arguments a kind does not take keep
/// their defaults and are unused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyper {
    pub lr: f64,
    pub wd: f64,
    pub rescale_grad: f64,
    /// Negative: no clipping.
    pub clip_gradient: f64,
    pub momentum: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub gamma1: f64,
    pub gamma2: f64,
    /// Negative: no clipping.
    pub clip_weights: f64,
    pub lamda1: f64,
    pub beta: f64,
    pub wd_lh: f64,
    pub rho: f64,
    /// The update's count, from 1 (FTML).
    pub t: f64,
    /// The learning-rate schedule multiplier (AdamW).
    pub eta: f64,
}

impl Hyper {
    /// The declared defaults of `kind`'s arguments (a learning rate of zero). Fields the
    /// kind does not take are never read by its update and hold placeholder values.
    pub fn defaults(kind: Kind) -> Hyper {
        let mut h = Hyper {
            lr: 0.0,
            wd: 0.0,
            rescale_grad: 1.0,
            clip_gradient: -1.0,
            momentum: 0.0,
            beta1: 0.0,
            beta2: 0.0,
            epsilon: 0.0,
            gamma1: 0.0,
            gamma2: 0.0,
            clip_weights: -1.0,
            lamda1: 0.0,
            beta: 0.0,
            wd_lh: 0.0,
            rho: 0.0,
            t: 1.0,
            eta: 1.0,
        };
        let decls = kind.spec().params;
        for (key, slot) in FIELDS.iter().zip(h.fields_mut()) {
            let default = decls
                .iter()
                .find(|d| d.name == *key)
                .and_then(|d| d.default);
            if let Some(v) = default.and_then(parse_float) {
                *slot = v;
            }
        }
        h
    }

    /// The values `kind` computes with: rounded to float32 where MXNet's op declares its
    /// arguments as `float`.
    pub fn rounded(mut self, kind: Kind) -> Hyper {
        if kind.spec().f32_params {
            for v in self.fields_mut() {
                *v = *v as f32 as f64;
            }
        }
        self
    }

    pub(crate) fn fields_mut(&mut self) -> [&mut f64; 17] {
        [
            &mut self.lr,
            &mut self.wd,
            &mut self.rescale_grad,
            &mut self.clip_gradient,
            &mut self.momentum,
            &mut self.beta1,
            &mut self.beta2,
            &mut self.epsilon,
            &mut self.gamma1,
            &mut self.gamma2,
            &mut self.clip_weights,
            &mut self.lamda1,
            &mut self.beta,
            &mut self.wd_lh,
            &mut self.rho,
            &mut self.t,
            &mut self.eta,
        ]
    }

    /// Parses the arguments of `kind` as MXNet does; `lr` is required where taken.
    pub fn parse(kind: Kind, attrs: &Attrs) -> Result<Hyper> {
        let spec = kind.spec();
        let p = Params::declared(spec.name, attrs, spec.params)?;
        let mut h = Hyper::defaults(kind);
        for (key, slot) in FIELDS.iter().zip(h.fields_mut()) {
            if spec.params.iter().any(|d| d.name == *key) {
                *slot = p.get(key)?;
            }
        }
        if spec.params.iter().any(|d| d.name == CLIP_GRAD) {
            h.clip_gradient = p.get(CLIP_GRAD)?;
        }
        if spec.params.iter().any(|d| d.name == "lazy_update") {
            // Only row-sparse gradients update lazily; dense updates ignore it.
            p.get::<bool>("lazy_update")?;
        }
        Ok(h.rounded(kind))
    }

    /// The attributes that [`Hyper::parse`] reads back into these values, for `kind`.
    pub fn to_attrs(&self, kind: Kind) -> Attrs {
        let spec = kind.spec();
        let mut h = *self;
        let mut attrs: Attrs = FIELDS
            .iter()
            .zip(h.fields_mut())
            .filter(|(k, _)| spec.params.iter().any(|d| d.name == **k))
            .map(|(k, v)| (k.to_string(), format!("{:?}", *v)))
            .collect();
        if spec.params.iter().any(|d| d.name == CLIP_GRAD) {
            attrs.insert(CLIP_GRAD.to_string(), format!("{:?}", self.clip_gradient));
        }
        if spec.params.iter().any(|d| d.name == "t") {
            attrs.insert("t".to_string(), format!("{}", self.t as i64));
        }
        attrs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_finds_its_own_row() {
        for (i, k) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, i);
            let s = k.spec();
            assert_eq!(s.mp_from.is_some(), s.inputs.contains(&"weight32"));
        }
        assert_eq!(Kind::Sgd.spec().name, "sgd_update");
        assert_eq!(Kind::MpNagMom.spec().name, "mp_nag_mom_update");
        assert_eq!(Kind::AdaGrad.spec().name, "_rsmx_adagrad_update");
        assert_eq!(Kind::AggMpSgd.spec().name, "_rsmx_agg_mp_sgd_update");
        assert_eq!(Kind::RmsPropAlex.spec().aux, &[2, 3, 4]);
        assert_eq!(Kind::AdamW.spec().aux, &[2, 3]);
        assert_eq!(Kind::MpAdamW.spec().aux, &[2, 3, 4]);
        assert!(Kind::MpAdamW.spec().scale_input && !Kind::Adam.spec().scale_input);
    }
}
