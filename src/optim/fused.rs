//! `FusedOptimizer`: MXNet's built-in optimizers as the KVStore runs them, each update
//! one registered update operator pushed to the engine. It owns the optimizer's rules and
//! state (update counts, `num_update`, learning rate and schedule, multipliers); a Python
//! optimizer bound to it reads them from here.

use super::config::{Config, OptKind};
use super::ops::{op_call, OpCache, Rates};
use super::scheduler::{LrScheduler, RateChange};
use super::ParamKey;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::imperative::invoke_at;
use crate::kvstore::StoreUpdater;
use crate::ndarray::NDArray;
use crate::op::{self, Attrs, OpRef};
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

impl Dynamic {
    /// Counts one more update of `key` on device `dev` (MXNet's `_update_count`; a key's
    /// count starts at `begin`) and returns the key's count.
    fn count(&mut self, dev: i32, key: &ParamKey, begin: i64) -> i64 {
        let count = self
            .counts
            .entry(dev)
            .or_default()
            .entry(key.clone())
            .or_insert(begin);
        *count += 1;
        let t = *count;
        self.num_update = self.num_update.max(t);
        t
    }

    /// The learning rate before multipliers: the schedule's at `num_update` (which may
    /// step the schedule), else the set rate.
    fn base_lr(&mut self) -> f64 {
        let n = self.num_update;
        match self.scheduler.as_mut() {
            Some(s) => s.lr(n),
            None => self.lr,
        }
    }
}

/// The settings and the state, under one lock.
struct Inner {
    cfg: Config,
    d: Dynamic,
}

impl Inner {
    /// The learning rates of `keys` (MXNet's `_get_lrs`: one schedule value, times each
    /// key's multiplier).
    fn lrs(&mut self, keys: &[ParamKey]) -> Vec<f64> {
        let base = self.d.base_lr();
        let c = &self.cfg;
        keys.iter().map(|k| base * c.mult(&c.lr_mult, k)).collect()
    }

    /// The weight decay of `key` (MXNet's `_get_wd`).
    fn wd(&self, key: &ParamKey) -> f64 {
        self.cfg.wd * self.cfg.mult(&self.cfg.wd_mult, key)
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

    /// True if weights of `dtype` are updated through a float32 copy.
    fn multi_precision(&self, dtype: DType) -> bool {
        self.cfg.multi_precision && dtype == DType::F16
    }
}

/// A built-in optimizer whose updates are fused operators; `Send + Sync`.
pub struct FusedOptimizer {
    inner: Mutex<Inner>,
    ops: OpCache,
}

impl FusedOptimizer {
    /// The optimizer MXNet registers as `name` (case-insensitive) with `params` as strings.
    pub fn new(name: &str, params: &HashMap<String, String>) -> Result<FusedOptimizer> {
        let cfg = Config::parse(name, params)?;
        let d = Dynamic {
            lr: cfg.lr,
            rescale_grad: cfg.rescale_grad,
            scheduler: cfg.scheduler.clone(),
            num_update: cfg.num_update,
            counts: HashMap::from([(0, HashMap::new())]),
        };
        Ok(FusedOptimizer {
            inner: Mutex::new(Inner { cfg, d }),
            ops: OpCache::default(),
        })
    }

    /// Replaces the settings (weight decay, clipping, multipliers, the optimizer's own
    /// hyperparameters) with `params`, keeping the counts, learning rate, schedule and
    /// gradient scale as they are. The optimizer stays the same kind.
    pub fn reconfigure(&self, params: &HashMap<String, String>) -> Result<()> {
        let mut s = self.inner.lock();
        let name = format!("{:?}", s.cfg.kind);
        s.cfg = Config::parse(&name, params)?;
        Ok(())
    }

    /// Counts one update of `key` on device `dev_id` and returns its count, for a Python
    /// optimizer bound to this one.
    pub fn count_update(&self, key: &ParamKey, dev_id: i32) -> i64 {
        let mut s = self.inner.lock();
        let begin = s.cfg.begin_num_update;
        s.d.count(dev_id, key, begin)
    }

    /// The learning rates of `keys`, multipliers applied (may step the schedule).
    pub fn lrs(&self, keys: &[ParamKey]) -> Vec<f64> {
        self.inner.lock().lrs(keys)
    }

    /// The weight decays of `keys`, multipliers applied.
    pub fn wds(&self, keys: &[ParamKey]) -> Vec<f64> {
        let s = self.inner.lock();
        keys.iter().map(|k| s.wd(k)).collect()
    }

    /// The number of updates of the most-updated key (MXNet's `num_update`).
    pub fn num_update(&self) -> i64 {
        self.inner.lock().d.num_update
    }

    /// The current learning rate (MXNet's `learning_rate` property).
    pub fn learning_rate(&self) -> f64 {
        self.inner.lock().d.base_lr()
    }

    /// The learning rate set without a schedule (MXNet's `optimizer.lr`).
    pub fn lr(&self) -> f64 {
        self.inner.lock().d.lr
    }

    /// Sets `lr`, whether or not a scheduler decides the rate (MXNet's `optimizer.lr = x`).
    pub fn set_lr(&self, lr: f64) {
        self.inner.lock().d.lr = lr;
    }

    /// Sets the learning rate; an error when a scheduler sets it, as in MXNet.
    pub fn set_learning_rate(&self, lr: f64) -> Result<()> {
        let mut s = self.inner.lock();
        if s.d.scheduler.is_some() {
            return Err(Error::Value(
                "LRScheduler of the optimizer has already been defined. Note that \
                 set_learning_rate can mutate the value of the learning rate of the optimizer \
                 only when the LRScheduler of the optimizer is undefined."
                    .into(),
            ));
        }
        s.d.lr = lr;
        Ok(())
    }

    /// The gradient scale.
    pub fn rescale_grad(&self) -> f64 {
        self.inner.lock().d.rescale_grad
    }

    /// Sets the gradient scale (Gluon's Trainer changes it with the batch size).
    pub fn set_rescale_grad(&self, rescale_grad: f64) {
        self.inner.lock().d.rescale_grad = rescale_grad;
    }

    /// The scheduler's current state as JSON, if there is a scheduler.
    pub fn lr_scheduler_json(&self) -> Option<String> {
        self.inner.lock().d.scheduler.as_ref().map(|s| s.to_json())
    }

    /// Replaces the scheduler's state with the JSON description `text`.
    pub fn set_lr_scheduler_json(&self, text: &str) -> Result<()> {
        let sched = LrScheduler::from_json(text)?;
        self.inner.lock().d.scheduler = Some(sched);
        Ok(())
    }

    /// The schedule's rate at `num_update` (stepping it as MXNet's scheduler call does), or
    /// None without a scheduler.
    pub fn scheduler_rate(&self, num_update: i64) -> Option<f64> {
        let mut s = self.inner.lock();
        s.d.scheduler.as_mut().map(|sch| sch.lr(num_update))
    }

    /// The steps the schedule made since the last call, oldest first.
    pub fn take_rate_changes(&self) -> Vec<RateChange> {
        let mut s = self.inner.lock();
        s.d.scheduler
            .as_mut()
            .map(|sch| std::mem::take(&mut sch.changes))
            .unwrap_or_default()
    }

    /// The update counts per device id and key.
    pub fn counts(&self) -> HashMap<i32, HashMap<ParamKey, i64>> {
        self.inner.lock().d.counts.clone()
    }

    /// Restores update counts (and `num_update`, if given; else the largest count or the
    /// current value, whichever is larger).
    pub fn set_counts(
        &self,
        counts: HashMap<i32, HashMap<ParamKey, i64>>,
        num_update: Option<i64>,
    ) {
        let d = &mut self.inner.lock().d;
        let most = counts.values().flat_map(|t| t.values()).copied().max();
        d.num_update = num_update.unwrap_or_else(|| most.unwrap_or(0).max(d.num_update));
        d.counts = counts;
        d.counts.entry(0).or_default();
    }
}

/// The states an optimizer keeps for a weight of some dtype.
pub(super) struct StateLayout {
    /// Zero-filled inner states (momentum, moments, ...).
    pub inner: usize,
    /// Their dtype: float32 under multi-precision, else the weight's.
    pub dtype: DType,
    /// Where the float32 copy of a float16 weight goes among them, under multi-precision.
    pub master_at: Option<usize>,
}

/// One counted update, ready to run.
pub(super) struct Step {
    pub op: OpRef,
    /// The operator updates the float32 copy (`state[0]`) with a float32 gradient, and the
    /// weight is then rounded from it: multi-precision for optimizers without `mp_*`
    /// operators.
    pub through_master: bool,
}

impl FusedOptimizer {
    /// The states [`StoreUpdater::create_state`] makes for a weight of `dtype`, in the
    /// order the module docs give.
    pub(super) fn state_layout(&self, dtype: DType) -> StateLayout {
        let s = self.inner.lock();
        let mp = s.multi_precision(dtype);
        StateLayout {
            inner: s.inner_states(),
            dtype: if mp { DType::F32 } else { dtype },
            master_at: mp.then_some(match s.cfg.kind {
                OptKind::Sgd | OptKind::Nag => s.inner_states(),
                _ => 0,
            }),
        }
    }

    /// Counts an update of `key` on device `dev_id` and gives the operator that runs it
    /// with its learning rate and weight decay, as MXNet's optimizer computes them; an
    /// error if `states` is not the number of states a weight of `dtype` has.
    pub(super) fn step(
        &self,
        key: &ParamKey,
        dev_id: i32,
        dtype: DType,
        shape: &[usize],
        states: usize,
    ) -> Result<Step> {
        let (call, through_master) = {
            let mut s = self.inner.lock();
            let mp = s.multi_precision(dtype);
            let n = s.inner_states();
            let want = n + usize::from(mp);
            if states != want {
                return Err(Error::Value(format!(
                    "FusedOptimizer.update: {:?} expects {want} state array(s) for key {key} \
                     (weight {} {dtype}), got {states}",
                    s.cfg.kind,
                    fmt_shape(shape),
                )));
            }
            let begin = s.cfg.begin_num_update;
            let t = s.d.count(dev_id, key, begin);
            let lr = s.lrs(std::slice::from_ref(key))[0];
            let rates = Rates {
                lr,
                wd: s.wd(key),
                t,
                rescale_grad: s.d.rescale_grad,
            };
            // SGD and NAG have `mp_*` operators; the others update the float32 copy.
            let own_mp_ops = matches!(s.cfg.kind, OptKind::Sgd | OptKind::Nag);
            let call = op_call(&s.cfg, &rates, n == 1, mp && own_mp_ops);
            (call, mp && !own_mp_ops)
        };
        Ok(Step {
            op: self.ops.get(call)?,
            through_master,
        })
    }
}

/// The store runs MXNet's built-in optimizers as its updater.
impl StoreUpdater for FusedOptimizer {
    /// Zero-filled states for `weight` (and a float32 copy of a float16 weight under
    /// multi-precision), in the order the module docs give.
    fn create_state(&self, key: &ParamKey, weight: &NDArray) -> Result<Vec<NDArray>> {
        let _ = key;
        let layout = self.state_layout(weight.dtype());
        let mut states = (0..layout.inner)
            .map(|_| zeros(weight, layout.dtype))
            .collect::<Result<Vec<_>>>()?;
        if let Some(at) = layout.master_at {
            states.insert(at, cast(weight, DType::F32, None, 0)?);
        }
        Ok(states)
    }

    /// Pushes the update of `weight` with `grad` and `state` at `priority`, after counting
    /// it and computing its learning rate and weight decay as MXNet's optimizer does.
    fn update(
        &self,
        key: &ParamKey,
        weight: &NDArray,
        grad: &NDArray,
        state: &[NDArray],
        priority: i32,
    ) -> Result<()> {
        let step = self.step(
            key,
            weight.context().dev_id,
            weight.dtype(),
            weight.shape(),
            state.len(),
        )?;
        let ctx = Some(weight.context());
        if step.through_master {
            // Update the float32 copy with a float32 gradient, then round into the weight.
            let w32 = state[0].clone();
            let mut ins = vec![w32.clone(), cast(grad, DType::F32, None, priority)?];
            ins.extend(state[1..].iter().cloned());
            invoke_at(
                &step.op,
                &ins,
                Some(vec![w32.clone()]),
                ctx,
                false,
                priority,
            )?;
            cast(&w32, weight.dtype(), Some(weight.clone()), priority)?;
            return Ok(());
        }
        let mut ins = vec![weight.clone(), grad.clone()];
        ins.extend(state.iter().cloned());
        invoke_at(
            &step.op,
            &ins,
            Some(vec![weight.clone()]),
            ctx,
            false,
            priority,
        )?;
        Ok(())
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
