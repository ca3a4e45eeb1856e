//! `rsmx.profiler`'s entry points into the core profiler.

use super::errors::{guard, guard_detached, IntoPy};
use crate::error::{Error, Result};
use crate::profiler::{self, SortBy, StatsFormat};
use pyo3::prelude::*;

/// Applies `set_config`'s settings, each as `(key, str(value))`.
#[pyfunction]
fn profiler_set_config(pairs: Vec<(String, String)>) -> PyResult<()> {
    guard("profiler_set_config", || profiler::set_config(&pairs).py())
}

/// Starts (`True`) or stops recording.
#[pyfunction]
fn profiler_set_state(run: bool) -> PyResult<()> {
    guard("profiler_set_state", || {
        profiler::set_state(run);
        Ok(())
    })
}

/// Pauses (`True`) or resumes recording.
#[pyfunction]
fn profiler_pause(paused: bool) -> PyResult<()> {
    guard("profiler_pause", || {
        profiler::set_paused(paused);
        Ok(())
    })
}

/// Writes the trace file; with `finished`, stops recording.
#[pyfunction]
fn profiler_dump(py: Python<'_>, finished: bool) -> PyResult<()> {
    guard_detached(py, "profiler_dump", || profiler::dump(finished))
}

/// The aggregate statistics as MXNet's table (`table`) or JSON (`json`).
#[pyfunction]
fn profiler_dumps(reset: bool, format: &str, sort_by: &str, ascending: bool) -> PyResult<String> {
    guard("profiler_dumps", || {
        dumps_checked(reset, format, sort_by, ascending).py()
    })
}

/// Parses `dumps`' options and renders the statistics.
fn dumps_checked(reset: bool, format: &str, sort_by: &str, ascending: bool) -> Result<String> {
    let format = match format {
        "table" => StatsFormat::Table,
        "json" => StatsFormat::Json,
        other => {
            return Err(Error::Value(format!(
                "profiler dumps: format must be 'table' or 'json', got '{other}'"
            )))
        }
    };
    let sort_by = match sort_by {
        "total" => SortBy::Total,
        "avg" => SortBy::Avg,
        "min" => SortBy::Min,
        "max" => SortBy::Max,
        "count" => SortBy::Count,
        other => {
            return Err(Error::Value(format!(
                "profiler dumps: sort_by must be one of total, avg, min, max, count, \
                 got '{other}'"
            )))
        }
    };
    Ok(profiler::dumps(reset, format, sort_by, ascending))
}

/// The profiler's clock, in microseconds since the epoch.
#[pyfunction]
fn profiler_now() -> PyResult<u64> {
    guard("profiler_now", || Ok(profiler::now_us()))
}

/// Records a span of a user object (task, frame or event).
#[pyfunction]
fn profiler_span(domain: &str, name: &str, start: u64, end: u64, async_span: bool) -> PyResult<()> {
    guard("profiler_span", || {
        profiler::record_span(domain, name, start, end, async_span);
        Ok(())
    })
}

/// Records a counter's new value.
#[pyfunction]
fn profiler_counter(domain: &str, name: &str, value: i64) -> PyResult<()> {
    guard("profiler_counter", || {
        profiler::record_counter(domain, name, value);
        Ok(())
    })
}

/// Records an instant marker.
#[pyfunction]
fn profiler_marker(domain: &str, name: &str, scope: &str) -> PyResult<()> {
    guard("profiler_marker", || {
        profiler::record_marker(domain, name, scope).py()
    })
}

pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(profiler_set_config, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_set_state, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_pause, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_dump, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_dumps, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_now, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_span, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_counter, m)?)?;
    m.add_function(wrap_pyfunction!(profiler_marker, m)?)?;
    Ok(())
}
