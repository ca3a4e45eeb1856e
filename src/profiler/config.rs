//! The profiler's settings, parsed from `mx.profiler.set_config`'s keyword arguments.

use crate::error::{Error, Result};

/// What to record and where to write it; MXNet's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub filename: String,
    pub profile_all: bool,
    pub profile_symbolic: bool,
    pub profile_imperative: bool,
    pub profile_memory: bool,
    pub profile_api: bool,
    pub continuous_dump: bool,
    pub dump_period: f64,
    pub aggregate_stats: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            filename: "profile.json".into(),
            profile_all: false,
            profile_symbolic: true,
            profile_imperative: true,
            profile_memory: true,
            profile_api: true,
            continuous_dump: false,
            dump_period: 1.0,
            aggregate_stats: false,
        }
    }
}

/// A boolean as Python's `str()` of a value writes it, or as a number.
fn flag(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "True" | "true" | "1" => Ok(true),
        "False" | "false" | "0" => Ok(false),
        other => Err(Error::Value(format!(
            "profiler set_config: '{key}' must be a boolean, got '{other}'"
        ))),
    }
}

impl Config {
    /// Sets one setting; an unknown key or a bad value is an error.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "filename" => self.filename = value.to_string(),
            "profile_all" => self.profile_all = flag(key, value)?,
            "profile_symbolic" => self.profile_symbolic = flag(key, value)?,
            "profile_imperative" => self.profile_imperative = flag(key, value)?,
            "profile_memory" => self.profile_memory = flag(key, value)?,
            "profile_api" => self.profile_api = flag(key, value)?,
            "continuous_dump" => self.continuous_dump = flag(key, value)?,
            "aggregate_stats" => self.aggregate_stats = flag(key, value)?,
            "dump_period" => {
                self.dump_period = value.trim().parse().map_err(|_| {
                    Error::Value(format!(
                        "profiler set_config: 'dump_period' must be a number, got '{value}'"
                    ))
                })?
            }
            // Which process to profile is chosen by the caller (worker or server).
            "profile_process" => {}
            other => {
                return Err(Error::Value(format!(
                    "profiler set_config: unknown setting '{other}' (expected filename, \
                     profile_all, profile_symbolic, profile_imperative, profile_memory, \
                     profile_api, continuous_dump, dump_period, aggregate_stats or \
                     profile_process)"
                )))
            }
        }
        Ok(())
    }
}
