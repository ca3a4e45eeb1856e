//! What each fused update operator is: its name, inputs, arguments (with MXNet's
//! defaults) and which inputs it writes, plus the parsed hyperparameters.

use crate::error::Result;
use crate::op::{Attrs, Params};

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
    /// Argument names.
    pub params: &'static [&'static str],
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

pub(crate) const SGD: &[&str] = &["lr", "wd", "rescale_grad", "clip_gradient", "lazy_update"];

pub(crate) const SGD_MOM: &[&str] = &[
    "lr",
    "momentum",
    "wd",
    "rescale_grad",
    "clip_gradient",
    "lazy_update",
];

pub(crate) const NAG: &[&str] = &["lr", "momentum", "wd", "rescale_grad", "clip_gradient"];

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
                params: &[
                    "lr",
                    "beta1",
                    "beta2",
                    "epsilon",
                    "wd",
                    "rescale_grad",
                    "clip_gradient",
                    "lazy_update",
                ],
                aux: &[2, 3],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Adam optimizer.",
            },
            Kind::RmsProp => &Spec {
                name: "rmsprop_update",
                inputs: &["weight", "grad", "n"],
                params: &[
                    "lr",
                    "gamma1",
                    "epsilon",
                    "wd",
                    "rescale_grad",
                    "clip_gradient",
                    "clip_weights",
                ],
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "Update function for RMSProp optimizer (Tieleman & Hinton).",
            },
            Kind::RmsPropAlex => &Spec {
                name: "rmspropalex_update",
                inputs: &["weight", "grad", "n", "g", "delta"],
                params: &[
                    "lr",
                    "gamma1",
                    "gamma2",
                    "epsilon",
                    "wd",
                    "rescale_grad",
                    "clip_gradient",
                    "clip_weights",
                ],
                aux: &[2, 3, 4],
                mp_from: None,
                f32_params: true,
                doc: "Update function for RMSPropAlex optimizer (Graves).",
            },
            Kind::Ftrl => &Spec {
                name: "ftrl_update",
                inputs: &["weight", "grad", "z", "n"],
                params: &[
                    "lr",
                    "lamda1",
                    "beta",
                    "wd",
                    "rescale_grad",
                    "clip_gradient",
                ],
                aux: &[2, 3],
                mp_from: None,
                f32_params: true,
                doc: "Update function for Ftrl optimizer.",
            },
            Kind::SignSgd => &Spec {
                name: "signsgd_update",
                inputs: &["weight", "grad"],
                params: &["lr", "wd", "rescale_grad", "clip_gradient"],
                aux: &[],
                mp_from: None,
                f32_params: true,
                doc: "Update function for SignSGD optimizer.",
            },
            Kind::Signum => &Spec {
                name: "signum_update",
                inputs: &["weight", "grad", "mom"],
                params: &[
                    "lr",
                    "momentum",
                    "wd",
                    "rescale_grad",
                    "clip_gradient",
                    "wd_lh",
                ],
                aux: &[2],
                mp_from: None,
                f32_params: true,
                doc: "SIGN momentUM (Signum) optimizer.",
            },
            Kind::AdaGrad => &Spec {
                name: "_rsmx_adagrad_update",
                inputs: &["weight", "grad", "history"],
                params: &["lr", "epsilon", "wd", "rescale_grad", "clip_gradient"],
                aux: &[2],
                mp_from: None,
                f32_params: false,
                doc: "Dense AdaGrad update, as MXNet's AdaGrad.update computes it.",
            },
            Kind::AdaDelta => &Spec {
                name: "_rsmx_adadelta_update",
                inputs: &["weight", "grad", "acc_g", "acc_delta"],
                params: &["rho", "epsilon", "wd", "rescale_grad", "clip_gradient"],
                aux: &[2, 3],
                mp_from: None,
                f32_params: false,
                doc: "Dense AdaDelta update, as MXNet's AdaDelta.update computes it.",
            },
            Kind::AggSgd => &Spec {
                name: "_rsmx_agg_sgd_update",
                inputs: &["weight", "grad"],
                params: &["lr", "wd", "rescale_grad", "clip_gradient"],
                aux: &[],
                mp_from: None,
                f32_params: true,
                doc: "SGD without momentum as MXNet's aggregated multi_sgd_update computes it.",
            },
            Kind::AggMpSgd => &Spec {
                name: "_rsmx_agg_mp_sgd_update",
                inputs: &["weight", "grad", "weight32"],
                params: &["lr", "wd", "rescale_grad", "clip_gradient"],
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
    /// MXNet's defaults for `kind` (and a learning rate of zero).
    pub fn defaults(kind: Kind) -> Hyper {
        Hyper {
            lr: 0.0,
            wd: 0.0,
            rescale_grad: 1.0,
            clip_gradient: -1.0,
            momentum: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: match kind {
                Kind::AdaGrad => 1e-7,
                Kind::AdaDelta => 1e-5,
                _ => 1e-8,
            },
            gamma1: 0.95,
            gamma2: 0.9,
            clip_weights: -1.0,
            lamda1: 0.01,
            beta: 1.0,
            wd_lh: 0.0,
            rho: 0.9,
        }
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
        let p = Params::new(spec.name, attrs, spec.params)?;
        let mut h = Hyper::defaults(kind);
        let takes = |k: &str| spec.params.contains(&k);
        let round = |v: f64| {
            if spec.f32_params {
                v as f32 as f64
            } else {
                v
            }
        };
        if takes("lr") {
            let v = p.required("lr")?;
            h.lr = round(crate::op::params::parse_float(v).ok_or_else(|| {
                crate::error::Error::Value(format!(
                    "{}: invalid value '{v}' for argument 'lr': expected a number",
                    spec.name
                ))
            })?);
        }
        let fields: [(&str, &mut f64); 14] = [
            ("wd", &mut h.wd),
            ("rescale_grad", &mut h.rescale_grad),
            ("clip_gradient", &mut h.clip_gradient),
            ("momentum", &mut h.momentum),
            ("beta1", &mut h.beta1),
            ("beta2", &mut h.beta2),
            ("epsilon", &mut h.epsilon),
            ("gamma1", &mut h.gamma1),
            ("gamma2", &mut h.gamma2),
            ("clip_weights", &mut h.clip_weights),
            ("lamda1", &mut h.lamda1),
            ("beta", &mut h.beta),
            ("wd_lh", &mut h.wd_lh),
            ("rho", &mut h.rho),
        ];
        for (key, slot) in fields {
            if takes(key) {
                *slot = round(p.float(key, *slot)?);
            } else {
                *slot = round(*slot);
            }
        }
        if takes("lazy_update") {
            // Only row-sparse gradients update lazily; dense updates ignore it.
            p.bool("lazy_update", true)?;
        }
        Ok(h)
    }

    /// The attributes that [`Hyper::parse`] reads back into these values, for `kind`.
    pub fn to_attrs(&self, kind: Kind) -> Attrs {
        let spec = kind.spec();
        let all = [
            ("lr", self.lr),
            ("wd", self.wd),
            ("rescale_grad", self.rescale_grad),
            ("clip_gradient", self.clip_gradient),
            ("momentum", self.momentum),
            ("beta1", self.beta1),
            ("beta2", self.beta2),
            ("epsilon", self.epsilon),
            ("gamma1", self.gamma1),
            ("gamma2", self.gamma2),
            ("clip_weights", self.clip_weights),
            ("lamda1", self.lamda1),
            ("beta", self.beta),
            ("wd_lh", self.wd_lh),
            ("rho", self.rho),
        ];
        all.iter()
            .filter(|(k, _)| spec.params.contains(k))
            .map(|(k, v)| (k.to_string(), format!("{v:?}")))
            .collect()
    }
}
