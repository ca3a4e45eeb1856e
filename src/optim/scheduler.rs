//! MXNet 1.9.1's learning-rate schedulers (`mx.lr_scheduler`), stateful as theirs are,
//! read from and written to the JSON description given in the module docs.

use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::{Map, Value};

/// How the learning rate rises during warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WarmupMode {
    Linear,
    Constant,
}

/// The schedule after warm-up; its JSON form names it by MXNet's class (`"type"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Schedule {
    /// `base_lr * factor^k`, one factor every `step` updates, floored at `stop_factor_lr`.
    #[serde(rename = "FactorScheduler")]
    Factor {
        step: i64,
        factor: f64,
        stop_factor_lr: f64,
        count: i64,
    },
    /// One factor at each listed step.
    #[serde(rename = "MultiFactorScheduler")]
    MultiFactor {
        step: Vec<i64>,
        factor: f64,
        count: i64,
        cur_step_ind: usize,
    },
    /// Polynomial decay from `base_lr_orig` to `final_lr` over `max_update` updates.
    #[serde(rename = "PolyScheduler")]
    Poly {
        max_update: i64,
        base_lr_orig: f64,
        pwr: f64,
        final_lr: f64,
    },
    /// Half-cosine decay from `base_lr_orig` to `final_lr` over `max_update` updates.
    #[serde(rename = "CosineScheduler")]
    Cosine {
        max_update: i64,
        base_lr_orig: f64,
        final_lr: f64,
    },
}

/// A step of a factor schedule, which MXNet's scheduler logs as it makes it: `Update[n]:
/// Change learning rate to lr`, or, once floored, that the rate stays at `lr`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateChange {
    pub num_update: i64,
    pub lr: f64,
    pub floored: bool,
}

/// A learning-rate scheduler: `lr(num_update)` may change its state, as in MXNet.
#[derive(Debug, Clone, Serialize)]
pub struct LrScheduler {
    pub base_lr: f64,
    pub warmup_steps: i64,
    pub warmup_begin_lr: f64,
    pub warmup_final_lr: f64,
    pub warmup_mode: WarmupMode,
    #[serde(flatten)]
    pub schedule: Schedule,
    /// The steps made since the caller last took them (for the log lines).
    #[serde(skip)]
    pub changes: Vec<RateChange>,
}

/// Equal schedules are in the same state; the steps waiting to be logged are not state.
impl PartialEq for LrScheduler {
    fn eq(&self, o: &Self) -> bool {
        (
            self.base_lr,
            self.warmup_steps,
            self.warmup_begin_lr,
            self.warmup_final_lr,
        ) == (
            o.base_lr,
            o.warmup_steps,
            o.warmup_begin_lr,
            o.warmup_final_lr,
        ) && self.warmup_mode == o.warmup_mode
            && self.schedule == o.schedule
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Value(format!("lr_scheduler: {}", msg.into()))
}

/// The field `key` of `o`, read by `read` (`what` it must be), or `default` if absent.
fn field<T>(
    o: &Map<String, Value>,
    key: &str,
    default: Option<T>,
    (what, read): (&str, fn(&Value) -> Option<T>),
) -> Result<T> {
    match o.get(key) {
        None | Some(Value::Null) => default.ok_or_else(|| bad(format!("'{key}' is required"))),
        Some(v) => read(v).ok_or_else(|| bad(format!("'{key}' must be {what}, got {v}"))),
    }
}

fn num(o: &Map<String, Value>, key: &str, default: Option<f64>) -> Result<f64> {
    field(o, key, default, ("a number", Value::as_f64))
}

fn int(o: &Map<String, Value>, key: &str, default: Option<i64>) -> Result<i64> {
    field(o, key, default, ("an integer", Value::as_i64))
}

impl LrScheduler {
    /// Reads a scheduler from its JSON description.
    pub fn from_json(text: &str) -> Result<LrScheduler> {
        let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("bad JSON: {e}")))?;
        let o = v.as_object().ok_or_else(|| bad("expected a JSON object"))?;
        let kind = o
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("'type' is required"))?;
        let base_lr = num(o, "base_lr", Some(0.01))?;
        let warmup_steps = int(o, "warmup_steps", Some(0))?;
        let warmup_begin_lr = num(o, "warmup_begin_lr", Some(0.0))?;
        let warmup_final_lr = num(o, "warmup_final_lr", Some(base_lr))?;
        let warmup_mode = match o.get("warmup_mode").and_then(Value::as_str) {
            None | Some("linear") => WarmupMode::Linear,
            Some("constant") => WarmupMode::Constant,
            Some(m) => {
                return Err(bad(format!(
                    "Supports only linear and constant modes of warmup, got '{m}'"
                )))
            }
        };
        if warmup_begin_lr > warmup_final_lr {
            return Err(bad("Base lr has to be higher than warmup_begin_lr"));
        }
        if warmup_steps < 0 {
            return Err(bad("Warmup steps has to be positive or 0"));
        }
        let max_update = || -> Result<i64> {
            let m = int(o, "max_update", None)?;
            if m < 1 {
                return Err(bad("maximum number of updates must be strictly positive"));
            }
            Ok(m)
        };
        let schedule = match kind {
            "FactorScheduler" => {
                let step = int(o, "step", None)?;
                let factor = num(o, "factor", Some(1.0))?;
                if step < 1 {
                    return Err(bad("Schedule step must be greater or equal than 1 round"));
                }
                if factor > 1.0 {
                    return Err(bad("Factor must be no more than 1 to make lr reduce"));
                }
                Schedule::Factor {
                    step,
                    factor,
                    stop_factor_lr: num(o, "stop_factor_lr", Some(1e-8))?,
                    count: int(o, "count", Some(0))?,
                }
            }
            "MultiFactorScheduler" => {
                let steps = o
                    .get("step")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("'step' must be a list of integers"))?;
                let step: Vec<i64> = steps
                    .iter()
                    .map(|s| {
                        s.as_i64()
                            .ok_or_else(|| bad("'step' must be a list of integers"))
                    })
                    .collect::<Result<_>>()?;
                if step.is_empty() {
                    return Err(bad("'step' must not be empty"));
                }
                if step.windows(2).any(|w| w[1] <= w[0]) {
                    return Err(bad("Schedule step must be an increasing integer list"));
                }
                if step[0] < 1 {
                    return Err(bad("Schedule step must be greater or equal than 1 round"));
                }
                let factor = num(o, "factor", Some(1.0))?;
                if factor > 1.0 {
                    return Err(bad("Factor must be no more than 1 to make lr reduce"));
                }
                let cur = int(o, "cur_step_ind", Some(0))?;
                Schedule::MultiFactor {
                    factor,
                    count: int(o, "count", Some(0))?,
                    cur_step_ind: usize::try_from(cur)
                        .map_err(|_| bad("'cur_step_ind' must not be negative"))?
                        .min(step.len()),
                    step,
                }
            }
            "PolyScheduler" => Schedule::Poly {
                max_update: max_update()?,
                base_lr_orig: num(o, "base_lr_orig", Some(base_lr))?,
                pwr: num(o, "pwr", Some(2.0))?,
                final_lr: num(o, "final_lr", Some(0.0))?,
            },
            "CosineScheduler" => Schedule::Cosine {
                max_update: max_update()?,
                base_lr_orig: num(o, "base_lr_orig", Some(base_lr))?,
                final_lr: num(o, "final_lr", Some(0.0))?,
            },
            other => return Err(bad(format!("unknown scheduler type '{other}'"))),
        };
        Ok(LrScheduler {
            schedule,
            base_lr,
            warmup_steps,
            warmup_begin_lr,
            warmup_final_lr,
            warmup_mode,
            changes: Vec::new(),
        })
    }

    /// The JSON description of the scheduler's current state.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a scheduler always serializes")
    }

    fn warmup_lr(&self, num_update: i64) -> f64 {
        match self.warmup_mode {
            WarmupMode::Linear => {
                let inc = (self.warmup_final_lr - self.warmup_begin_lr) * num_update as f64
                    / self.warmup_steps as f64;
                self.warmup_begin_lr + inc
            }
            WarmupMode::Constant => self.warmup_begin_lr,
        }
    }

    /// The learning rate after `num_update` updates (MXNet's `__call__`).
    pub fn lr(&mut self, num_update: i64) -> f64 {
        if num_update < self.warmup_steps {
            return self.warmup_lr(num_update);
        }
        let warmup = self.warmup_steps;
        match &mut self.schedule {
            Schedule::Factor {
                step,
                factor,
                stop_factor_lr,
                count,
            } => {
                while num_update > *count + *step {
                    *count += *step;
                    self.base_lr *= *factor;
                    let floored = self.base_lr < *stop_factor_lr;
                    if floored {
                        self.base_lr = *stop_factor_lr;
                    }
                    self.changes.push(RateChange {
                        num_update,
                        lr: self.base_lr,
                        floored,
                    });
                }
            }
            Schedule::MultiFactor {
                step,
                factor,
                count,
                cur_step_ind,
            } => {
                while *cur_step_ind < step.len() && num_update > step[*cur_step_ind] {
                    *count = step[*cur_step_ind];
                    *cur_step_ind += 1;
                    self.base_lr *= *factor;
                    self.changes.push(RateChange {
                        num_update,
                        lr: self.base_lr,
                        floored: false,
                    });
                }
            }
            Schedule::Poly {
                max_update,
                base_lr_orig,
                pwr,
                final_lr,
            } => {
                if num_update <= *max_update {
                    let frac = (num_update - warmup) as f64 / (*max_update - warmup) as f64;
                    self.base_lr =
                        *final_lr + (*base_lr_orig - *final_lr) * (1.0 - frac).powf(*pwr);
                }
            }
            Schedule::Cosine {
                max_update,
                base_lr_orig,
                final_lr,
            } => {
                if num_update <= *max_update {
                    let t = std::f64::consts::PI * (num_update - warmup) as f64
                        / (*max_update - warmup) as f64;
                    self.base_lr = *final_lr + (*base_lr_orig - *final_lr) * (1.0 + t.cos()) / 2.0;
                }
            }
        }
        self.base_lr
    }
}
