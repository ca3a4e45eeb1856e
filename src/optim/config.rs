//! Reading an optimizer's hyperparameters from the string map the KVStore and the Python
//! optimizer hand over (see the module docs for the keys).

use super::scheduler::LrScheduler;
use super::ParamKey;
use crate::error::{Error, Result};
use crate::op::params::parse_float;
use serde_json::Value;
use std::collections::HashMap;

/// The optimizers with fused dense updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptKind {
    Sgd,
    Nag,
    Adam,
    AdaGrad,
    RmsProp,
    AdaDelta,
    Signum,
    Ftrl,
}

impl OptKind {
    /// The optimizer registered (case-insensitively) under `name`.
    pub fn from_name(name: &str) -> Result<OptKind> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "sgd" | "ccsgd" => OptKind::Sgd,
            "nag" => OptKind::Nag,
            "adam" => OptKind::Adam,
            "adagrad" => OptKind::AdaGrad,
            "rmsprop" => OptKind::RmsProp,
            "adadelta" => OptKind::AdaDelta,
            "signum" => OptKind::Signum,
            "ftrl" => OptKind::Ftrl,
            _ => {
                return Err(Error::Value(format!(
                    "FusedOptimizer: no fused update for optimizer '{name}' (fused: sgd, ccsgd, \
                     nag, adam, adagrad, rmsprop, adadelta, signum, ftrl)"
                )))
            }
        })
    }

    /// MXNet's default learning rate for the optimizer.
    pub fn default_lr(self) -> f64 {
        match self {
            OptKind::Adam | OptKind::RmsProp => 0.001,
            OptKind::Ftrl => 0.1,
            _ => 0.01,
        }
    }
}

/// Every setting of a fused optimizer.
#[derive(Debug, Clone)]
pub struct Config {
    pub kind: OptKind,
    pub lr: f64,
    pub wd: f64,
    pub rescale_grad: f64,
    pub clip_gradient: Option<f64>,
    pub multi_precision: bool,
    pub begin_num_update: i64,
    pub num_update: i64,
    pub scheduler: Option<LrScheduler>,
    pub lr_mult: HashMap<ParamKey, f64>,
    pub wd_mult: HashMap<ParamKey, f64>,
    pub idx2name: HashMap<i64, String>,
    pub momentum: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub gamma1: f64,
    pub gamma2: f64,
    pub centered: bool,
    pub clip_weights: Option<f64>,
    pub rho: f64,
    pub lamda1: f64,
    pub beta: f64,
    pub wd_lh: f64,
    /// Dense updates ignore it, but the operators take it (sgd, adam).
    pub lazy_update: bool,
    /// SGD updates as MXNet's aggregated updater does (`aggregate_num` > 0).
    pub aggregate: bool,
}

struct Reader<'a>(&'a HashMap<String, String>);

fn is_none(v: &str) -> bool {
    v.trim().is_empty() || v.trim() == "None" || v.trim() == "null"
}

impl Reader<'_> {
    fn opt_float(&self, key: &str) -> Result<Option<f64>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) if is_none(v) => Ok(None),
            Some(v) => parse_float(v).map(Some).ok_or_else(|| {
                Error::Value(format!(
                    "FusedOptimizer: invalid value '{v}' for '{key}': expected a number"
                ))
            }),
        }
    }

    fn float(&self, key: &str, default: f64) -> Result<f64> {
        Ok(self.opt_float(key)?.unwrap_or(default))
    }

    fn int(&self, key: &str, default: i64) -> Result<i64> {
        match self.0.get(key) {
            None => Ok(default),
            Some(v) if is_none(v) => Ok(default),
            Some(v) => crate::op::params::parse_int(v).ok_or_else(|| {
                Error::Value(format!(
                    "FusedOptimizer: invalid value '{v}' for '{key}': expected an integer"
                ))
            }),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.0.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" || v == "1" => Ok(true),
            Some(v) if v == "false" || v == "0" || v == "none" => Ok(false),
            Some(v) => Err(Error::Value(format!(
                "FusedOptimizer: invalid value '{v}' for '{key}': expected True or False"
            ))),
        }
    }

    fn json(&self, key: &str) -> Result<Option<Value>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) if is_none(v) => Ok(None),
            Some(v) => serde_json::from_str(v).map(Some).map_err(|e| {
                Error::Value(format!("FusedOptimizer: '{key}' is not valid JSON: {e}"))
            }),
        }
    }
}

fn key_of(v: &Value, what: &str) -> Result<ParamKey> {
    match v {
        Value::String(s) => Ok(ParamKey::Name(s.clone())),
        v => v.as_i64().map(ParamKey::Int).ok_or_else(|| {
            Error::Value(format!(
                "FusedOptimizer: '{what}' keys must be integers or strings, got {v}"
            ))
        }),
    }
}

/// `[[key, value], ...]` or `{"name": value}` as (key, value) pairs.
fn pairs(v: &Value, what: &str) -> Result<Vec<(ParamKey, Value)>> {
    let err = || {
        Error::Value(format!(
            "FusedOptimizer: '{what}' must be a list of [key, value] pairs or an object"
        ))
    };
    match v {
        Value::Object(o) => Ok(o
            .iter()
            .map(|(k, v)| (ParamKey::Name(k.clone()), v.clone()))
            .collect()),
        Value::Array(items) => items
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([k, v]) => Ok((key_of(k, what)?, v.clone())),
                _ => Err(err()),
            })
            .collect(),
        _ => Err(err()),
    }
}

fn mults(v: Option<Value>, what: &str) -> Result<Option<HashMap<ParamKey, f64>>> {
    let Some(v) = v else { return Ok(None) };
    pairs(&v, what)?
        .into_iter()
        .map(|(k, v)| {
            let m = v.as_f64().ok_or_else(|| {
                Error::Value(format!("FusedOptimizer: '{what}' values must be numbers"))
            })?;
            Ok((k, m))
        })
        .collect::<Result<HashMap<_, _>>>()
        .map(Some)
}

fn idx2name(v: Option<Value>) -> Result<HashMap<i64, String>> {
    let Some(v) = v else {
        return Ok(HashMap::new());
    };
    let mut out = HashMap::new();
    for (k, name) in pairs(&v, "idx2name")? {
        let idx = match k {
            ParamKey::Int(i) => i,
            ParamKey::Name(s) => s.trim().parse().map_err(|_| {
                Error::Value(format!(
                    "FusedOptimizer: 'idx2name' keys must be integers, got '{s}'"
                ))
            })?,
        };
        let name = name.as_str().ok_or_else(|| {
            Error::Value("FusedOptimizer: 'idx2name' values must be strings".into())
        })?;
        out.insert(idx, name.to_string());
    }
    Ok(out)
}

impl Config {
    /// Reads the settings of optimizer `name` from `params`.
    pub fn parse(name: &str, params: &HashMap<String, String>) -> Result<Config> {
        let kind = OptKind::from_name(name)?;
        let r = Reader(params);
        let scheduler = match params.get("lr_scheduler") {
            Some(v) if !is_none(v) => Some(LrScheduler::from_json(v)?),
            _ => None,
        };
        let idx2name = idx2name(r.json("idx2name")?)?;
        let wd_mult = match mults(r.json("wd_mult")?, "wd_mult")? {
            Some(m) => m,
            // MXNet's default: no decay for parameters not named *_weight or *_gamma.
            None => idx2name
                .values()
                .filter(|n| !(n.ends_with("_weight") || n.ends_with("_gamma")))
                .map(|n| (ParamKey::Name(n.clone()), 0.0))
                .collect(),
        };
        let begin_num_update = r.int("begin_num_update", 0)?;
        let (momentum_default, eps_key, eps_default, g1_default) = match kind {
            OptKind::Signum => (0.9, "epsilon", 1e-8, 0.9),
            OptKind::AdaGrad => (0.0, "eps", 1e-7, 0.9),
            OptKind::AdaDelta => (0.0, "epsilon", 1e-5, 0.9),
            _ => (0.0, "epsilon", 1e-8, 0.9),
        };
        let epsilon = match r.opt_float(eps_key)? {
            Some(e) => e,
            None => r.float("float_stable_eps", eps_default)?,
        };
        Ok(Config {
            kind,
            lr: r.float("learning_rate", kind.default_lr())?,
            wd: r.float("wd", 0.0)?,
            rescale_grad: r.float("rescale_grad", 1.0)?,
            clip_gradient: r.opt_float("clip_gradient")?,
            multi_precision: r.bool("multi_precision", false)?,
            begin_num_update,
            num_update: r.int("num_update", begin_num_update)?,
            scheduler,
            lr_mult: mults(r.json("lr_mult")?, "lr_mult")?.unwrap_or_default(),
            wd_mult,
            idx2name,
            momentum: r.float("momentum", momentum_default)?,
            beta1: r.float("beta1", 0.9)?,
            beta2: r.float("beta2", 0.999)?,
            epsilon,
            gamma1: r.float("gamma1", g1_default)?,
            gamma2: r.float("gamma2", 0.9)?,
            centered: r.bool("centered", false)?,
            clip_weights: r.opt_float("clip_weights")?,
            rho: r.float("rho", 0.9)?,
            lamda1: r.float("lamda1", 0.01)?,
            beta: r.float("beta", 1.0)?,
            wd_lh: r.float("wd_lh", 0.0)?,
            lazy_update: r.bool("lazy_update", true)?,
            aggregate: r.int("aggregate_num", 4)? > 0,
        })
    }

    /// The multiplier for `key` in `table`, as MXNet's `_get_lrs`/`_get_wds` look it up:
    /// the key itself, else the name `idx2name` gives it.
    pub fn mult(&self, table: &HashMap<ParamKey, f64>, key: &ParamKey) -> f64 {
        if let Some(m) = table.get(key) {
            return *m;
        }
        if let ParamKey::Int(i) = key {
            if let Some(name) = self.idx2name.get(i) {
                return table
                    .get(&ParamKey::Name(name.clone()))
                    .copied()
                    .unwrap_or(1.0);
            }
        }
        1.0
    }
}
