//! Built-in optimizers for the KVStore: [`FusedOptimizer`] runs MXNet 1.9.1's optimizers
//! (`sgd`, `ccsgd`, `nag`, `adam`, `adagrad`, `rmsprop`, `adadelta`, `signum`, `ftrl`) as
//! fused update operators, with no Python on the per-key path.
//!
//! # Who owns what
//!
//! While a built-in Python optimizer runs here, this object owns its rules and state:
//! the update counts (per device and key) and `num_update`, the learning rate and the
//! schedule's state, the gradient scale; the Python optimizer reads and writes them here
//! (`count_update`, `lrs`, `wds`, `scheduler_rate`, ...) and sends changed settings with
//! `reconfigure`. Each update is the registered operator MXNet's Python optimizer calls
//! (`sgd_mom_update`, `adam_update`, ...; `_rsmx_adagrad_update`, `_rsmx_adadelta_update`
//! and the single-weight aggregated `_rsmx_agg_sgd_update` / `_rsmx_agg_mp_sgd_update`),
//! built through the registry with the attributes that optimizer passes (see `ops`).
//!
//! # Parameters
//!
//! `FusedOptimizer::new(name, params)` takes the optimizer's attributes *after* its
//! `__init__`, as strings:
//!
//! - `learning_rate` (`optimizer.lr`; `None` allowed with a scheduler; absent: MXNet's
//!   default, 0.01, or 0.001 for adam and rmsprop, 0.1 for ftrl), `wd` (0),
//!   `rescale_grad` (1), `clip_gradient` (`None`), `multi_precision` (`False`),
//!   `begin_num_update` (0), `num_update` (current count, for restoring).
//! - `lr_scheduler`: the scheduler JSON below, or `None`.
//! - `lr_mult`, `wd_mult`: JSON `[[key, mult], ...]` with integer (index) or string (name)
//!   keys, or an object `{"name": mult}`. Without `wd_mult`, MXNet's default applies
//!   (0 for names in `idx2name` not ending in `_weight` or `_gamma`).
//! - `idx2name`: JSON `[[index, name], ...]` or `{"index": name}`.
//! - Per optimizer: `momentum` (sgd, nag, signum; signum's defaults to 0.9),
//!   `lazy_update` (sgd, adam), `aggregate_num` (sgd: above 0, the default 4, updates as
//!   MXNet's aggregated updater does), `wd_lh` (signum), `beta1`, `beta2`, `epsilon` (adam),
//!   `eps` (adagrad, 1e-7; also read as `float_stable_eps`), `gamma1` (0.9), `gamma2`
//!   (0.9), `epsilon`, `centered`, `clip_weights` (rmsprop), `rho` (0.9), `epsilon` (1e-5)
//!   (adadelta), `lamda1` (0.01), `beta` (1) (ftrl). Unknown keys are ignored.
//!
//! # Scheduler JSON
//!
//! The current state of an `mx.lr_scheduler` scheduler. Common fields: `type`, `base_lr`
//! (the current `self.base_lr`), `warmup_steps`, `warmup_begin_lr`, `warmup_mode`
//! (`linear` or `constant`), `warmup_final_lr` (default: `base_lr`).
//!
//! ```json
//! {"type": "FactorScheduler", "step": 10, "factor": 0.5, "stop_factor_lr": 1e-8, "count": 0, ...}
//! {"type": "MultiFactorScheduler", "step": [10, 20], "factor": 0.5, "count": 0, "cur_step_ind": 0, ...}
//! {"type": "PolyScheduler", "max_update": 100, "base_lr_orig": 0.1, "pwr": 2, "final_lr": 0, ...}
//! {"type": "CosineScheduler", "max_update": 100, "base_lr_orig": 0.1, "final_lr": 0, ...}
//! ```
//!
//! `count`, `cur_step_ind` and `base_lr_orig` are optional (0, 0, `base_lr`).
//!
//! # States
//!
//! `create_state` returns a flat list: sgd, nag, signum `[mom]` when momentum is not
//! zero, else `[]`; adam `[mean, var]`; adagrad `[history]`; rmsprop `[n]` or, centered,
//! `[n, g, delta]`; adadelta `[acc_g, acc_delta]`; ftrl `[z, n]`. With `multi_precision`
//! and a float16 weight, sgd and nag append a float32 copy of the weight (`[mom,
//! weight32]`) and the others put it first (`[weight32, ...]`), with float32 states.

mod config;
mod fused;
mod host;
mod ops;
pub mod scheduler;
#[cfg(test)]
mod tests;

pub use config::OptKind;
pub use fused::FusedOptimizer;
pub use host::HostArray;
pub use scheduler::LrScheduler;

use std::fmt;

/// A KVStore key or optimizer index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ParamKey {
    Int(i64),
    Name(String),
}

impl fmt::Display for ParamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamKey::Int(i) => write!(f, "{i}"),
            ParamKey::Name(s) => write!(f, "'{s}'"),
        }
    }
}
