//! `FusedOptimizer`: MXNet's built-in optimizers as the KVStore runs them, each update
//! one fused operator pushed to the engine, with MXNet's update counting and lr/wd rules.

use super::config::{Config, OptKind};
use super::scheduler::LrScheduler;
use super::ParamKey;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::imperative::invoke_at;
use crate::kernels::cpu::optim::{update_op, Hyper, Kind};
use crate::ndarray::NDArray;
use crate::op::{self, Attrs};
use crate::shape::fmt_shape;
use parking_lot::Mutex;
use std::collections::HashMap;

/// What changes as updates run.
struct Dynamic {
    lr: f64,
    rescale_grad: f64,
    scheduler: Option<LrScheduler>,
    num_update: i64,
    /// Per device id, updates counted per key (MXNet's `_all_index_update_counts`).
    counts: HashMap<i32, HashMap<ParamKey, i64>>,
}

/// A built-in optimizer whose updates are fused operators; `Send + Sync`.
pub struct FusedOptimizer {
    cfg: Config,
    dynamic: Mutex<Dynamic>,
}

/// One update to push: the op and its arrays.
struct Plan {
    kind: Kind,
    h: Hyper,
    inputs: Vec<NDArray>,
    out: NDArray,
}

impl FusedOptimizer {
    /// The optimizer MXNet registers as `name` (case-insensitive) with `params` as strings.
    pub fn new(name: &str, params: &HashMap<String, String>) -> Result<FusedOptimizer> {
        let cfg = Config::parse(name, params)?;
        let dynamic = Dynamic {
            lr: cfg.lr,
            rescale_grad: cfg.rescale_grad,
            scheduler: cfg.scheduler.clone(),
            num_update: cfg.num_update,
            counts: HashMap::from([(0, HashMap::new())]),
        };
        Ok(FusedOptimizer {
            cfg,
            dynamic: Mutex::new(dynamic),
        })
    }

    fn multi_precision(&self, weight: &NDArray) -> bool {
        self.cfg.multi_precision && weight.dtype() == DType::F16
    }

    /// Number of inner states (without the float32 master copy).
    fn inner_states(&self) -> usize {
        let c = &self.cfg;
        match c.kind {
            OptKind::Sgd | OptKind::Nag | OptKind::Signum => usize::from(c.momentum != 0.0),
            OptKind::AdaGrad => 1,
            OptKind::RmsProp if c.centered => 3,
            OptKind::RmsProp => 1,
            OptKind::Adam | OptKind::AdaDelta | OptKind::Ftrl => 2,
        }
    }

    /// Zero-filled states for `weight` (and a float32 copy of a float16 weight under
    /// multi-precision), in the order the module docs give.
    pub fn create_state(&self, key: &ParamKey, weight: &NDArray) -> Result<Vec<NDArray>> {
        let _ = key;
        let mp = self.multi_precision(weight);
        let dtype = if mp { DType::F32 } else { weight.dtype() };
        let mut states = (0..self.inner_states())
            .map(|_| zeros(weight, dtype))
            .collect::<Result<Vec<_>>>()?;
        if mp {
            let w32 = cast(weight, DType::F32, None, 0)?;
            match self.cfg.kind {
                OptKind::Sgd | OptKind::Nag => states.push(w32),
                _ => states.insert(0, w32),
            }
        }
        Ok(states)
    }

    /// Pushes the update of `weight` with `grad` and `state` at `priority`, after counting
    /// it and computing its learning rate and weight decay as MXNet's optimizer does.
    pub fn update(
        &self,
        key: &ParamKey,
        weight: &NDArray,
        grad: &NDArray,
        state: &[NDArray],
        priority: i32,
    ) -> Result<()> {
        let mp = self.multi_precision(weight);
        let want = self.inner_states() + usize::from(mp);
        if state.len() != want {
            return Err(Error::Value(format!(
                "FusedOptimizer.update: {:?} expects {want} state array(s) for key {key} \
                 (weight {} {}), got {}",
                self.cfg.kind,
                fmt_shape(weight.shape()),
                weight.dtype(),
                state.len()
            )));
        }
        let (lr, wd, t, rescale) = self.count_and_rates(key, weight)?;
        let plan = self.plan(lr, wd, t, rescale, weight, grad, state, mp);
        let ctx = Some(weight.context());
        if mp && !matches!(self.cfg.kind, OptKind::Sgd | OptKind::Nag) {
            // Update the float32 copy with a float32 gradient, then round into the weight.
            let mut p = plan;
            let w32 = state[0].clone();
            p.inputs[1] = cast(grad, DType::F32, None, priority)?;
            p.out = w32.clone();
            invoke_at(
                &update_op(p.kind, p.h),
                &p.inputs,
                Some(vec![p.out]),
                ctx,
                false,
                priority,
            )?;
            cast(&w32, weight.dtype(), Some(weight.clone()), priority)?;
            return Ok(());
        }
        invoke_at(
            &update_op(plan.kind, plan.h),
            &plan.inputs,
            Some(vec![plan.out]),
            ctx,
            false,
            priority,
        )?;
        Ok(())
    }

    /// Counts one update of `key` and returns (lr, wd, the key's count, rescale_grad).
    fn count_and_rates(&self, key: &ParamKey, weight: &NDArray) -> Result<(f64, f64, i64, f64)> {
        let c = &self.cfg;
        let mut d = self.dynamic.lock();
        let begin = c.begin_num_update;
        let table = d.counts.entry(weight.context().dev_id).or_default();
        let count = table.entry(key.clone()).or_insert(begin);
        *count += 1;
        let t = *count;
        d.num_update = d.num_update.max(t);
        let num_update = d.num_update;
        let base = match d.scheduler.as_mut() {
            Some(s) => s.lr(num_update),
            None => d.lr,
        };
        let lr = base * c.mult(&c.lr_mult, key);
        let wd = c.wd * c.mult(&c.wd_mult, key);
        Ok((lr, wd, t, d.rescale_grad))
    }

    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        lr: f64,
        wd: f64,
        t: i64,
        rescale_grad: f64,
        weight: &NDArray,
        grad: &NDArray,
        state: &[NDArray],
        mp: bool,
    ) -> Plan {
        let c = &self.cfg;
        // MXNet's optimizers pass `clip_gradient` to the C++ ops only when it is truthy.
        let op_clip = c.clip_gradient.filter(|v| *v != 0.0).unwrap_or(-1.0);
        let py_clip = c.clip_gradient.unwrap_or(-1.0);
        let positive_mom = if c.momentum > 0.0 { c.momentum } else { 0.0 };
        let mut h = Hyper {
            lr,
            wd,
            rescale_grad,
            clip_gradient: op_clip,
            momentum: positive_mom,
            beta1: c.beta1,
            beta2: c.beta2,
            epsilon: c.epsilon,
            gamma1: c.gamma1,
            gamma2: c.gamma2,
            clip_weights: c.clip_weights.filter(|v| *v != 0.0).unwrap_or(-1.0),
            lamda1: c.lamda1,
            beta: c.beta,
            wd_lh: c.wd_lh,
            rho: c.rho,
        };
        let (w, g) = (weight.clone(), grad.clone());
        // Under multi-precision (not SGD/NAG) the inner update runs on the float32 copy.
        let (base, inner) = if mp && !matches!(c.kind, OptKind::Sgd | OptKind::Nag) {
            (state[0].clone(), &state[1..])
        } else {
            (w.clone(), state)
        };
        let mut ins = vec![base.clone(), g];
        ins.extend(inner.iter().cloned());
        let kind = match c.kind {
            OptKind::Sgd => match (mp, c.momentum > 0.0) {
                (false, true) => Kind::SgdMom,
                (false, false) => {
                    ins.truncate(2);
                    Kind::AggSgd
                }
                (true, true) => Kind::MpSgdMom,
                (true, false) => {
                    ins = vec![
                        ins[0].clone(),
                        ins[1].clone(),
                        state[state.len() - 1].clone(),
                    ];
                    Kind::AggMpSgd
                }
            },
            OptKind::Nag => match (mp, inner.len() > usize::from(mp)) {
                (false, true) => Kind::NagMom,
                (false, false) => Kind::Sgd,
                (true, true) => Kind::MpNagMom,
                (true, false) => Kind::MpSgd,
            },
            OptKind::Adam => {
                let coef1 = 1.0 - c.beta1.powf(t as f64);
                let coef2 = 1.0 - c.beta2.powf(t as f64);
                h.lr = lr * (coef2.sqrt() / coef1);
                Kind::Adam
            }
            OptKind::AdaGrad => {
                h.clip_gradient = py_clip;
                Kind::AdaGrad
            }
            OptKind::AdaDelta => {
                h.clip_gradient = py_clip;
                Kind::AdaDelta
            }
            OptKind::RmsProp if c.centered => Kind::RmsPropAlex,
            OptKind::RmsProp => Kind::RmsProp,
            OptKind::Signum if inner.is_empty() => Kind::SignSgd,
            OptKind::Signum => Kind::Signum,
            OptKind::Ftrl => Kind::Ftrl,
        };
        Plan {
            kind,
            h: h.rounded(kind),
            inputs: ins,
            out: base,
        }
    }

    /// The number of updates of the most-updated key (MXNet's `num_update`).
    pub fn num_update(&self) -> i64 {
        self.dynamic.lock().num_update
    }

    /// The current learning rate (MXNet's `learning_rate` property).
    pub fn learning_rate(&self) -> f64 {
        let mut d = self.dynamic.lock();
        let n = d.num_update;
        match d.scheduler.as_mut() {
            Some(s) => s.lr(n),
            None => d.lr,
        }
    }

    /// Sets the learning rate; an error when a scheduler sets it, as in MXNet.
    pub fn set_learning_rate(&self, lr: f64) -> Result<()> {
        let mut d = self.dynamic.lock();
        if d.scheduler.is_some() {
            return Err(Error::Value(
                "LRScheduler of the optimizer has already been defined. Note that \
                 set_learning_rate can mutate the value of the learning rate of the optimizer \
                 only when the LRScheduler of the optimizer is undefined."
                    .into(),
            ));
        }
        d.lr = lr;
        Ok(())
    }

    /// Sets the gradient scale (Gluon's Trainer changes it with the batch size).
    pub fn set_rescale_grad(&self, rescale_grad: f64) {
        self.dynamic.lock().rescale_grad = rescale_grad;
    }

    /// The scheduler's current state as JSON, if there is a scheduler.
    pub fn lr_scheduler_json(&self) -> Option<String> {
        self.dynamic.lock().scheduler.as_ref().map(|s| s.to_json())
    }

    /// The update counts per device id and key.
    pub fn counts(&self) -> HashMap<i32, HashMap<ParamKey, i64>> {
        self.dynamic.lock().counts.clone()
    }

    /// Restores update counts (and `num_update`, if given; else the largest count or the
    /// current value, whichever is larger).
    pub fn set_counts(
        &self,
        counts: HashMap<i32, HashMap<ParamKey, i64>>,
        num_update: Option<i64>,
    ) {
        let mut d = self.dynamic.lock();
        let most = counts.values().flat_map(|t| t.values()).copied().max();
        d.num_update = num_update.unwrap_or_else(|| most.unwrap_or(0).max(d.num_update));
        d.counts = counts;
        d.counts.entry(0).or_default();
    }
}

fn zeros(like: &NDArray, dtype: DType) -> Result<NDArray> {
    let attrs: Attrs = [
        ("shape".to_string(), fmt_shape(like.shape())),
        ("dtype".to_string(), dtype.name().to_string()),
    ]
    .into_iter()
    .collect();
    let op = op::find("_zeros")?.build(&attrs)?;
    Ok(invoke_at(&op, &[], None, Some(like.context()), false, 0)?.remove(0))
}

fn cast(a: &NDArray, dtype: DType, out: Option<NDArray>, priority: i32) -> Result<NDArray> {
    let attrs: Attrs = [("dtype".to_string(), dtype.name().to_string())]
        .into_iter()
        .collect();
    let op = op::find("Cast")?.build(&attrs)?;
    let ctx = Some(a.context());
    Ok(invoke_at(
        &op,
        std::slice::from_ref(a),
        out.map(|o| vec![o]),
        ctx,
        false,
        priority,
    )?
    .remove(0))
}
