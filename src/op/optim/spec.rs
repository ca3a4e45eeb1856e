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
}

/// The static description of one update operator.
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
    /// One-line description.
    pub doc: &'static str,
}

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

const ADAM: &[Param] = &[
    LR,
    Param::new(
        "beta1",
        "float",
        "0.9",
        "The decay rate for the 1st moment estimates.",
    ),
    Param::new(
        "beta2",
        "float",
        "0.999",
        "The decay rate for the 2nd moment estimates.",
    ),
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

const PLAIN: &[Param] = &[LR, WD, RESCALE_GRAD, CLIP_GRADIENT];

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
const FIELDS: [&str; 15] = [
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
];

impl Kind {
    /// Every kind, in registration order.
    pub const ALL: [Kind; 16] = [
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
    ];

    /// The kind's description.
    pub fn spec(self) -> &'static Spec {
        match self {
            Kind::Sgd => &Spec {
                name: "sgd_update",
                inputs: &["weight", "grad"],
                params: SGD,
                aux: &[],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Stochastic Gradient Descent (SGD) optimizer.",
            },
            Kind::SgdMom => &Spec {
                name: "sgd_mom_update",
                inputs: &["weight", "grad", "mom"],
                params: SGD_MOM,
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "Momentum update function for Stochastic Gradient Descent (SGD) optimizer.",
            },
            Kind::MpSgd => &Spec {
                name: "mp_sgd_update",
                inputs: &["weight", "grad", "weight32"],
                params: SGD,
                aux: &[2],
                mp_from: Some(2),
                f32_params: true,
                doc: "Updater function for multi-precision sgd optimizer.",
            },
            Kind::MpSgdMom => &Spec {
                name: "mp_sgd_mom_update",
                inputs: &["weight", "grad", "mom", "weight32"],
                params: SGD_MOM,
                aux: &[2, 3],
                mp_from: Some(2),
                f32_params: true,
                doc: "Updater function for multi-precision sgd optimizer with momentum.",
            },
            Kind::NagMom => &Spec {
                name: "nag_mom_update",
                inputs: &["weight", "grad", "mom"],
                params: NAG,
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Nesterov Accelerated Gradient (NAG) optimizer.",
            },
            Kind::MpNagMom => &Spec {
                name: "mp_nag_mom_update",
                inputs: &["weight", "grad", "mom", "weight32"],
                params: NAG,
                aux: &[2, 3],
                mp_from: Some(2),
                f32_params: true,
                doc: "Update function for multi-precision Nesterov Accelerated Gradient (NAG) optimizer.",
            },
            Kind::Adam => &Spec {
                name: "adam_update",
                inputs: &["weight", "grad", "mean", "var"],
                params: ADAM,
                aux: &[2, 3],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Adam optimizer.",
            },
            Kind::RmsProp => &Spec {
                name: "rmsprop_update",
                inputs: &["weight", "grad", "n"],
                params: RMSPROP,
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "Update function for RMSProp optimizer (Tieleman & Hinton).",
            },
            Kind::RmsPropAlex => &Spec {
                name: "rmspropalex_update",
                inputs: &["weight", "grad", "n", "g", "delta"],
                params: RMSPROP_ALEX,
                aux: &[2, 3, 4],
                mp_from: None,
                f32_params: true,
                doc: "Update function for RMSPropAlex optimizer (Graves).",
            },
            Kind::Ftrl => &Spec {
                name: "ftrl_update",
                inputs: &["weight", "grad", "z", "n"],
                params: FTRL,
                aux: &[2, 3],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Ftrl optimizer.",
            },
            Kind::SignSgd => &Spec {
                name: "signsgd_update",
                inputs: &["weight", "grad"],
                params: PLAIN,
                aux: &[],
                mp_from: None,
                f32_params: true,
                doc: "Update function for SignSGD optimizer.",
            },
            Kind::Signum => &Spec {
                name: "signum_update",
                inputs: &["weight", "grad", "mom"],
                params: SIGNUM,
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "SIGN momentUM (Signum) optimizer.",
            },
            Kind::AdaGrad => &Spec {
                name: "_rsmx_adagrad_update",
                inputs: &["weight", "grad", "history"],
                params: ADAGRAD,
                aux: &[2],
                mp_from: None,
                f32_params: false,
                doc: "Dense AdaGrad update, as MXNet's AdaGrad.update computes it.",
            },
            Kind::AdaDelta => &Spec {
                name: "_rsmx_adadelta_update",
                inputs: &["weight", "grad", "acc_g", "acc_delta"],
                params: ADADELTA,
                aux: &[2, 3],
                mp_from: None,
                f32_params: false,
                doc: "Dense AdaDelta update, as MXNet's AdaDelta.update computes it.",
            },
            Kind::AggSgd => &Spec {
                name: "_rsmx_agg_sgd_update",
                inputs: &["weight", "grad"],
                params: PLAIN,
                aux: &[],
                mp_from: None,
                f32_params: true,
                doc: "SGD without momentum as MXNet's aggregated multi_sgd_update computes it.",
            },
            Kind::AggMpSgd => &Spec {
                name: "_rsmx_agg_mp_sgd_update",
                inputs: &["weight", "grad", "weight32"],
                params: PLAIN,
                aux: &[2],
                mp_from: Some(2),
                f32_params: true,
                doc: "Multi-precision SGD as MXNet's aggregated multi_mp_sgd_update computes it.",
            },
        }
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

    pub(crate) fn fields_mut(&mut self) -> [&mut f64; 15] {
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
        FIELDS
            .iter()
            .zip(h.fields_mut())
            .filter(|(k, _)| spec.params.iter().any(|d| d.name == **k))
            .map(|(k, v)| (k.to_string(), format!("{:?}", *v)))
            .collect()
    }
}
