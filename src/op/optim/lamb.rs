//! Definitions of LAMB's two update phases: `lamb_update_phase1` updates the moments in
//! place and gives the step direction; `lamb_update_phase2` scales the learning rate by
//! the trust ratio of the two norms it is given and steps the weight. The `mp_` forms
//! take float16 weights with float32 moments and master weights.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{check_inputs, Attrs, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};
use num_traits::Float;
use std::sync::Arc;

const PHASE1_PARAMS: &[Param] = &[
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
    Param::new(
        "epsilon",
        "float",
        "1e-06",
        "A small constant for numerical stability.",
    ),
    Param::required("t", "int", "Index update count."),
    Param::new(
        "bias_correction",
        "boolean",
        "True",
        "Whether to use bias correction.",
    ),
    Param::required(
        "wd",
        "float",
        "Weight decay: the weight times wd is added to the direction.",
    ),
    Param::new(
        "rescale_grad",
        "float",
        "1",
        "Rescale gradient to grad = rescale_grad*grad.",
    ),
    Param::new(
        "clip_gradient",
        "float",
        "-1",
        "Clip the rescaled gradient to [-clip_gradient, clip_gradient]; off when negative.",
    ),
];

const PHASE2_PARAMS: &[Param] = &[
    Param::required("lr", "float", "Learning rate"),
    Param::new(
        "lower_bound",
        "float",
        "-1",
        "Lower limit of the weight's norm r1; not set when negative.",
    ),
    Param::new(
        "upper_bound",
        "float",
        "-1",
        "Upper limit of the weight's norm r1; not set when negative.",
    ),
];

/// Phase one's arguments, rounded to float32 as MXNet's `float` fields are.
#[derive(Debug, Clone, Copy)]
pub struct PhaseOne {
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub t: i32,
    pub bias_correction: bool,
    pub wd: f32,
    pub rescale_grad: f32,
    pub clip_gradient: f32,
}

impl PhaseOne {
    /// `beta1^t` and `beta2^t`, computed in double precision as MXNet does.
    pub fn powers(&self) -> (f64, f64) {
        (
            (self.beta1 as f64).powi(self.t),
            (self.beta2 as f64).powi(self.t),
        )
    }
}

/// Phase two's arguments.
#[derive(Debug, Clone, Copy)]
pub struct PhaseTwo {
    pub lr: f32,
    pub lower_bound: f32,
    pub upper_bound: f32,
}

impl PhaseTwo {
    /// The learning rate scaled by the trust ratio `r1 / r2` in the compute type `F`, `r1`
    /// first clipped to the bounds that are set (not negative); unscaled when either norm
    /// is zero.
    pub fn scaled_lr<F: Float>(&self, r1: F, r2: F) -> F {
        let of = |v: f32| F::from(v).unwrap_or_else(F::nan);
        let mut r1 = r1;
        if self.lower_bound >= 0.0 {
            r1 = r1.max(of(self.lower_bound));
        }
        if self.upper_bound >= 0.0 {
            r1 = r1.min(of(self.upper_bound));
        }
        if r1 == F::zero() || r2 == F::zero() {
            of(self.lr)
        } else {
            of(self.lr) * r1 / r2
        }
    }
}

/// Which phase.
#[derive(Debug, Clone, Copy)]
pub enum Phase {
    One(PhaseOne),
    Two(PhaseTwo),
}

/// A LAMB phase; `mp` for the multi-precision form.
#[derive(Debug, Clone, Copy)]
pub struct LambOp {
    pub phase: Phase,
    pub mp: bool,
}

impl LambOp {
    fn input_list(&self) -> &'static [&'static str] {
        match (self.phase, self.mp) {
            (Phase::One(_), false) => &["weight", "grad", "mean", "var"],
            (Phase::One(_), true) => &["weight", "grad", "mean", "var", "weight32"],
            (Phase::Two(_), false) => &["weight", "g", "r1", "r2"],
            (Phase::Two(_), true) => &["weight", "g", "r1", "r2", "weight32"],
        }
    }

    /// The dtype each input must have, given the weight's.
    fn input_types(&self, w: DType) -> Vec<DType> {
        let f = DType::F32;
        match (self.phase, self.mp) {
            (_, false) => vec![w; 4],
            (Phase::One(_), true) => vec![w, w, f, f, f],
            (Phase::Two(_), true) => vec![w, f, f, f, f],
        }
    }
}

impl Operator for LambOp {
    fn name(&self) -> &'static str {
        match (self.phase, self.mp) {
            (Phase::One(_), false) => "lamb_update_phase1",
            (Phase::One(_), true) => "mp_lamb_update_phase1",
            (Phase::Two(_), false) => "lamb_update_phase2",
            (Phase::Two(_), true) => "mp_lamb_update_phase2",
        }
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        match (self.phase, self.mp) {
            (Phase::Two(_), false) => &[(0, 0)],
            _ => &[],
        }
    }

    fn aux_inputs(&self) -> Vec<usize> {
        match (self.phase, self.mp) {
            (Phase::One(_), _) => vec![2, 3],
            (Phase::Two(_), true) => vec![4],
            (Phase::Two(_), false) => vec![],
        }
    }

    /// The weight, its gradient or direction, the moments and the master weight share a
    /// shape; the norms hold one value each.
    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        let names = self.input_list();
        check_inputs(name, inputs, names.len())?;
        let w = &inputs[0];
        for (i, s) in inputs.iter().enumerate().skip(1) {
            let scalar = matches!(self.phase, Phase::Two(_)) && (i == 2 || i == 3);
            let ok = if scalar {
                s.iter().product::<usize>() == 1 && !s.is_empty()
            } else {
                s == w
            };
            if !ok {
                let want = if scalar {
                    "(1,)".to_string()
                } else {
                    fmt_shape(w)
                };
                return Err(Error::Value(format!(
                    "{name}: {} has shape {} but must have shape {want} (weight {})",
                    names[i],
                    fmt_shape(s),
                    fmt_shape(w)
                )));
            }
        }
        Ok(vec![w.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let name = self.name();
        let w = inputs[0];
        let allowed = if self.mp {
            matches!(w, DType::F16)
        } else {
            matches!(w, DType::F16 | DType::F32 | DType::F64)
        };
        if !allowed {
            let want = if self.mp {
                "float16"
            } else {
                "float16, float32 or float64"
            };
            return Err(Error::Type(format!(
                "{name}: weight must be {want}, got {w}"
            )));
        }
        let names = self.input_list();
        for ((n, &have), want) in names.iter().zip(inputs).zip(self.input_types(w)) {
            if have != want {
                return Err(Error::Type(format!(
                    "{name}: {n} has dtype {have} but must be {want} (weight has dtype {w})"
                )));
            }
        }
        let out = match (self.phase, self.mp) {
            (Phase::One(_), true) => DType::F32,
            _ => w,
        };
        Ok(vec![out])
    }
}

fn f32_param(p: &Params, key: &str) -> Result<f32> {
    Ok(p.get::<f64>(key)? as f32)
}

fn create(name: &'static str, params: &'static [Param], mp: bool, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(name, attrs, params)?;
    let phase = if params.len() == PHASE1_PARAMS.len() {
        let t: i64 = p.get("t")?;
        Phase::One(PhaseOne {
            beta1: f32_param(&p, "beta1")?,
            beta2: f32_param(&p, "beta2")?,
            epsilon: f32_param(&p, "epsilon")?,
            t: i32::try_from(t)
                .map_err(|_| Error::Value(format!("{name}: t={t} is out of range")))?,
            bias_correction: p.get("bias_correction")?,
            wd: f32_param(&p, "wd")?,
            rescale_grad: f32_param(&p, "rescale_grad")?,
            clip_gradient: f32_param(&p, "clip_gradient")?,
        })
    } else {
        Phase::Two(PhaseTwo {
            lr: f32_param(&p, "lr")?,
            lower_bound: f32_param(&p, "lower_bound")?,
            upper_bound: f32_param(&p, "upper_bound")?,
        })
    };
    Ok(Arc::new(LambOp { phase, mp }))
}

/// One phase operator to register: name, inputs, arguments, multi-precision, doc.
type PhaseDef = (
    &'static str,
    &'static [&'static str],
    &'static [Param],
    bool,
    &'static str,
);

/// Registers the four LAMB phase operators.
pub fn register(r: &mut Registry) {
    let ops: [PhaseDef; 4] = [
        (
            "lamb_update_phase1",
            &["weight", "grad", "mean", "var"],
            PHASE1_PARAMS,
            false,
            "LAMB's first phase: updates the moments in place and gives the step direction.",
        ),
        (
            "lamb_update_phase2",
            &["weight", "g", "r1", "r2"],
            PHASE2_PARAMS,
            false,
            "LAMB's second phase: steps the weight by the direction at the trust-ratio-scaled rate.",
        ),
        (
            "mp_lamb_update_phase1",
            &["weight", "grad", "mean", "var", "weight32"],
            PHASE1_PARAMS,
            true,
            "LAMB's first phase for float16 weights with float32 moments and master weights.",
        ),
        (
            "mp_lamb_update_phase2",
            &["weight", "g", "r1", "r2", "weight32"],
            PHASE2_PARAMS,
            true,
            "LAMB's second phase for float16 weights, stepping from the float32 master weight.",
        ),
    ];
    for (name, inputs, params, mp, doc) in ops {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs,
            variadic: false,
            params,
            doc,
            create: Box::new(move |a| create(name, params, mp, a)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_ratio_clips_r1_and_falls_back_on_zero_norms() {
        let p = PhaseTwo {
            lr: 0.5,
            lower_bound: 1.0,
            upper_bound: 4.0,
        };
        assert_eq!(p.scaled_lr(2.0f32, 4.0), 0.25);
        assert_eq!(p.scaled_lr(10.0f32, 2.0), 1.0);
        assert_eq!(p.scaled_lr(0.5f64, 2.0), 0.25);
        assert_eq!(p.scaled_lr(2.0f32, 0.0), 0.5);
        let unbounded = PhaseTwo {
            lower_bound: -1.0,
            upper_bound: -1.0,
            ..p
        };
        assert_eq!(unbounded.scaled_lr(0.0f32, 3.0), 0.5);
    }
}
