//! Which registered update operator runs one fused update, with the attributes MXNet's
//! Python optimizer passes it, and a cache of the operators built.

use super::config::{Config, OptKind};
use crate::error::Result;
use crate::op::{self, Attrs, OpRef};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// An attribute value; equal when written the same (floats compare by their bits).
#[derive(Debug, Clone, Copy)]
enum Val {
    F(f64),
    B(bool),
}

impl Val {
    fn bits(self) -> (bool, u64) {
        match self {
            Val::F(x) => (false, x.to_bits()),
            Val::B(b) => (true, u64::from(b)),
        }
    }
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        self.bits() == other.bits()
    }
}

impl Eq for Val {}

impl Hash for Val {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bits().hash(state)
    }
}

/// One update operator: its registered name and its attributes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct OpCall {
    pub name: &'static str,
    attrs: Vec<(&'static str, Val)>,
}

/// The per-update values the optimizer's rules give: learning rate and weight decay (with
/// multipliers), the key's update count, and the gradient scale.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rates {
    pub lr: f64,
    pub wd: f64,
    pub t: i64,
    pub rescale_grad: f64,
}

impl OpCall {
    fn new(name: &'static str) -> OpCall {
        OpCall {
            name,
            attrs: Vec::with_capacity(9),
        }
    }

    fn f(mut self, key: &'static str, v: f64) -> OpCall {
        self.attrs.push((key, Val::F(v)));
        self
    }

    fn f_if(self, cond: bool, key: &'static str, v: f64) -> OpCall {
        if cond {
            self.f(key, v)
        } else {
            self
        }
    }

    fn lazy(mut self, on: bool) -> OpCall {
        self.attrs.push(("lazy_update", Val::B(on)));
        self
    }

    /// `lr`, `wd` and `rescale_grad`, which every update takes.
    fn rates(self, lr: f64, r: &Rates) -> OpCall {
        self.f("lr", lr)
            .f("wd", r.wd)
            .f("rescale_grad", r.rescale_grad)
    }

    /// `clip_gradient` when it is set and not zero, as MXNet's optimizers pass it.
    fn clip_truthy(self, clip: Option<f64>) -> OpCall {
        match clip {
            Some(v) if v != 0.0 => self.f("clip_gradient", v),
            _ => self,
        }
    }

    /// The attributes as the registry takes them.
    fn attrs(&self) -> Attrs {
        self.attrs
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Val::F(x) => format!("{x:?}"),
                    Val::B(b) => (if *b { "True" } else { "False" }).to_string(),
                };
                (k.to_string(), text)
            })
            .collect()
    }

    /// The operator, built through the registry.
    pub fn build(&self) -> Result<OpRef> {
        op::find(self.name)?.build(&self.attrs())
    }
}

/// The update operator MXNet's optimizer of `c.kind` runs for one weight: `has_mom` when
/// the state holds a momentum buffer (sgd, nag, signum), `mp` for the `mp_*` operators
/// of sgd and nag on float16 weights with a float32 copy.
pub(super) fn op_call(c: &Config, r: &Rates, has_mom: bool, mp: bool) -> OpCall {
    // MXNet passes `momentum` when it is positive, which is when the state holds one.
    let mom = has_mom && c.momentum > 0.0;
    match c.kind {
        OptKind::Sgd => {
            let call = match (mp, has_mom, c.aggregate) {
                (false, true, _) => OpCall::new("sgd_mom_update").lazy(c.lazy_update),
                // MXNet's updater hands SGD lists of weights, which it updates with the
                // aggregated `multi_sgd_update` (`multi_mp_sgd_update`).
                (false, false, true) => OpCall::new("_rsmx_agg_sgd_update"),
                (false, false, false) => OpCall::new("sgd_update").lazy(c.lazy_update),
                (true, true, _) => OpCall::new("mp_sgd_mom_update"),
                (true, false, true) => OpCall::new("_rsmx_agg_mp_sgd_update"),
                (true, false, false) => OpCall::new("mp_sgd_update"),
            };
            call.rates(r.lr, r)
                .f_if(mom, "momentum", c.momentum)
                .clip_truthy(c.clip_gradient)
        }
        OptKind::Nag => {
            let name = match (mp, has_mom) {
                (false, true) => "nag_mom_update",
                (false, false) => "sgd_update",
                (true, true) => "mp_nag_mom_update",
                (true, false) => "mp_sgd_update",
            };
            OpCall::new(name)
                .rates(r.lr, r)
                .f_if(mom, "momentum", c.momentum)
                .clip_truthy(c.clip_gradient)
        }
        OptKind::Signum => {
            let name = if has_mom {
                "signum_update"
            } else {
                "signsgd_update"
            };
            OpCall::new(name)
                .rates(r.lr, r)
                .f_if(mom, "momentum", c.momentum)
                .clip_truthy(c.clip_gradient)
                .f_if(c.wd_lh != 0.0, "wd_lh", c.wd_lh)
        }
        OptKind::Adam => {
            let t = r.t as f64;
            let coef1 = 1.0 - c.beta1.powf(t);
            let coef2 = 1.0 - c.beta2.powf(t);
            OpCall::new("adam_update")
                .lazy(c.lazy_update)
                .rates(r.lr * (coef2.sqrt() / coef1), r)
                .f("beta1", c.beta1)
                .f("beta2", c.beta2)
                .f("epsilon", c.epsilon)
                .clip_truthy(c.clip_gradient)
        }
        // AdaGrad and AdaDelta clip whenever `clip_gradient` is set, zero included.
        OptKind::AdaGrad => OpCall::new("_rsmx_adagrad_update")
            .rates(r.lr, r)
            .f("epsilon", c.epsilon)
            .f("clip_gradient", c.clip_gradient.unwrap_or(-1.0)),
        OptKind::AdaDelta => OpCall::new("_rsmx_adadelta_update")
            .f("wd", r.wd)
            .f("rescale_grad", r.rescale_grad)
            .f("rho", c.rho)
            .f("epsilon", c.epsilon)
            .f("clip_gradient", c.clip_gradient.unwrap_or(-1.0)),
        OptKind::RmsProp => {
            let name = if c.centered {
                "rmspropalex_update"
            } else {
                "rmsprop_update"
            };
            let clip_weights = c.clip_weights.filter(|v| *v != 0.0);
            OpCall::new(name)
                .rates(r.lr, r)
                .f("gamma1", c.gamma1)
                .f("epsilon", c.epsilon)
                .f_if(c.centered, "gamma2", c.gamma2)
                .clip_truthy(c.clip_gradient)
                .f_if(
                    clip_weights.is_some(),
                    "clip_weights",
                    clip_weights.unwrap_or(-1.0),
                )
        }
        OptKind::Ftrl => OpCall::new("ftrl_update")
            .rates(r.lr, r)
            .f("lamda1", c.lamda1)
            .f("beta", c.beta)
            .clip_truthy(c.clip_gradient),
    }
}

/// The operators built lately, by call. Updates in one step mostly share their
/// attributes (one learning rate, one Adam step count), so most updates build nothing
/// even while the rate changes from step to step.
#[derive(Default)]
pub(super) struct OpCache {
    ops: Mutex<HashMap<OpCall, OpRef>>,
}

/// More distinct calls than this empties the cache (old rates are not seen again).
const CACHE_LIMIT: usize = 64;

impl OpCache {
    /// The operator for `call`, built unless built lately.
    pub fn get(&self, call: OpCall) -> Result<OpRef> {
        let mut ops = self.ops.lock();
        if let Some(op) = ops.get(&call) {
            return Ok(op.clone());
        }
        let op = call.build()?;
        if ops.len() >= CACHE_LIMIT {
            ops.clear();
        }
        ops.insert(call, op.clone());
        Ok(op)
    }
}
