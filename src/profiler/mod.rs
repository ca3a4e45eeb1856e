//! The profiler (MXNet's `mx.profiler`): records what the engine ran, with user tasks,
//! events, frames, counters, markers and memory use, and writes them as a Chrome trace
//! (`dump`) or an aggregate table (`dumps`).
//!
//! Off, it costs the engine one relaxed atomic load per op.

mod aggregate;
mod config;
mod trace;

pub use aggregate::{SortBy, StatsFormat};
pub use config::Config;

use crate::context::Context;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// True while the ops of bound executors are being recorded.
static SYMBOLIC: AtomicBool = AtomicBool::new(false);
/// True while imperative ops (and the engine's own) are being recorded.
static IMPERATIVE: AtomicBool = AtomicBool::new(false);
/// True while memory use is being recorded.
static MEMORY: AtomicBool = AtomicBool::new(false);
/// True while the user's own objects (tasks, events, counters...) are being recorded.
static USER: AtomicBool = AtomicBool::new(false);

/// What a record shows in the trace.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A span of time from `start` to `end` (µs). `async_span` marks tasks and frames,
    /// which MXNet draws as async `b`/`e` events.
    Span {
        start: u64,
        end: u64,
        async_span: bool,
    },
    /// A counter's new value.
    Counter(i64),
    /// An instant marker with its scope letter (`g`, `p`, `t`).
    Marker(char),
}

/// One recorded item.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The category: `operator`, `event`, `Device Storage` or a user domain's name.
    pub category: String,
    pub name: String,
    /// The process row in the trace: a device for operators, else the category's.
    pub device: Option<Context>,
    /// A small number per thread.
    pub thread: u64,
    /// When (µs since the epoch); for spans, when it ended.
    pub at: u64,
    pub kind: Kind,
}

#[derive(Default)]
struct State {
    config: Config,
    running: bool,
    /// Started at least once: only then is there a profile to dump.
    started: bool,
    paused: bool,
    records: Vec<Record>,
    /// Records before this index are left out of `dumps` (its `reset`).
    stats_from: usize,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(Default::default)
}

/// Sets the flags the hot paths read from the state.
fn publish(s: &State) {
    let on = s.running && !s.paused;
    let c = &s.config;
    SYMBOLIC.store(
        on && (c.profile_all || c.profile_symbolic),
        Ordering::Relaxed,
    );
    IMPERATIVE.store(
        on && (c.profile_all || c.profile_imperative),
        Ordering::Relaxed,
    );
    MEMORY.store(on && (c.profile_all || c.profile_memory), Ordering::Relaxed);
    USER.store(on, Ordering::Relaxed);
}

/// Microseconds since the Unix epoch, from a monotonic clock.
pub fn now_us() -> u64 {
    static BASE: OnceLock<(Instant, u64)> = OnceLock::new();
    let (t0, epoch) = BASE.get_or_init(|| {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        (Instant::now(), since.as_micros() as u64)
    });
    epoch + t0.elapsed().as_micros() as u64
}

/// A small number naming the calling thread in traces.
pub fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

/// Applies `key=value` settings as `mx.profiler.set_config` does.
pub fn set_config(pairs: &[(String, String)]) -> Result<()> {
    let mut s = state().lock();
    let mut c = s.config.clone();
    for (k, v) in pairs {
        c.set(k, v)?;
    }
    s.config = c;
    publish(&s);
    Ok(())
}

/// The current settings.
pub fn config() -> Config {
    state().lock().config.clone()
}

/// Starts (`true`) or stops recording.
pub fn set_state(run: bool) {
    let mut s = state().lock();
    s.running = run;
    if run {
        s.paused = false;
        s.started = true;
    }
    publish(&s);
}

/// Pauses (`true`) or resumes recording without stopping the profiler.
pub fn set_paused(paused: bool) {
    let mut s = state().lock();
    s.paused = paused;
    publish(&s);
}

/// True while ops of the kind (`symbolic`: a bound executor's step) are recorded: the
/// engine's check before timing an op.
#[inline]
pub fn ops_active(symbolic: bool) -> bool {
    if symbolic {
        SYMBOLIC.load(Ordering::Relaxed)
    } else {
        IMPERATIVE.load(Ordering::Relaxed)
    }
}

fn push(r: Record) {
    state().lock().records.push(r);
}

/// The category of a custom operator's Python code and of the ops it pushes.
pub const CUSTOM_OPERATOR: &str = "Custom Operator";

thread_local! {
    static CUSTOM_SCOPE: std::cell::RefCell<Option<Arc<str>>> =
        const { std::cell::RefCell::new(None) };
}

/// Sets the custom operator whose code runs on this thread (`MySigmoid`,
/// `_backward_MySigmoid`), or none; returns the previous one. Ops pushed meanwhile are
/// recorded as `<scope>::<op>` under [`CUSTOM_OPERATOR`], as MXNet records them.
pub fn set_custom_scope(scope: Option<Arc<str>>) -> Option<Arc<str>> {
    CUSTOM_SCOPE.with(|s| std::mem::replace(&mut *s.borrow_mut(), scope))
}

/// The custom operator whose code runs on this thread, if any.
pub fn custom_scope() -> Option<Arc<str>> {
    CUSTOM_SCOPE.with(|s| s.borrow().clone())
}

/// Records an engine op that ran on `ctx` from `start` to now.
pub fn record_op(name: &str, ctx: Context, start: u64, symbolic: bool) {
    record_op_in(None, name, ctx, start, symbolic);
}

/// As [`record_op`], for an op pushed by a custom operator's code (`scope`).
pub fn record_op_in(scope: Option<&str>, name: &str, ctx: Context, start: u64, symbolic: bool) {
    if !ops_active(symbolic) {
        return;
    }
    let end = now_us();
    let (category, name) = match scope {
        Some(s) => (CUSTOM_OPERATOR.to_string(), format!("{s}::{name}")),
        None => ("operator".to_string(), name.to_string()),
    };
    push(Record {
        category,
        name,
        device: Some(ctx),
        thread: thread_number(),
        at: end,
        kind: Kind::Span {
            start,
            end,
            async_span: false,
        },
    });
}

/// Records a user span of `domain` (`event` for events) from `start` to `end`.
pub fn record_span(domain: &str, name: &str, start: u64, end: u64, async_span: bool) {
    if !USER.load(Ordering::Relaxed) {
        return;
    }
    push(Record {
        category: domain.into(),
        name: name.into(),
        device: None,
        thread: thread_number(),
        at: end,
        kind: Kind::Span {
            start,
            end,
            async_span,
        },
    });
}

/// Records a counter's new value.
pub fn record_counter(domain: &str, name: &str, value: i64) {
    if !USER.load(Ordering::Relaxed) {
        return;
    }
    push(Record {
        category: domain.into(),
        name: name.into(),
        device: None,
        thread: thread_number(),
        at: now_us(),
        kind: Kind::Counter(value),
    });
}

/// Records an instant marker; `scope` is MXNet's: `global`, `process`, `thread`, `task`
/// or `marker`.
pub fn record_marker(domain: &str, name: &str, scope: &str) -> Result<()> {
    let letter = match scope {
        "global" => 'g',
        "process" => 'p',
        "thread" | "task" | "marker" => 't',
        other => {
            return Err(Error::Value(format!(
                "profiler Marker: unknown scope '{other}' (expected global, process, \
                 thread, task or marker)"
            )))
        }
    };
    if USER.load(Ordering::Relaxed) {
        push(Record {
            category: format!("{domain},instant_marker"),
            name: name.into(),
            device: None,
            thread: thread_number(),
            at: now_us(),
            kind: Kind::Marker(letter),
        });
    }
    Ok(())
}

/// Records the bytes in use on `ctx` after an allocation or a free.
pub fn record_memory(ctx: Context, bytes_in_use: usize) {
    push(Record {
        category: "Device Storage".into(),
        name: format!("Memory: {}", trace::device_name(ctx)),
        device: None,
        thread: thread_number(),
        at: now_us(),
        kind: Kind::Counter(bytes_in_use as i64),
    });
}

/// True while memory use is recorded: the pool's check.
#[inline]
pub fn memory_active() -> bool {
    MEMORY.load(Ordering::Relaxed)
}

/// Writes every record so far to the configured file as a Chrome trace. With
/// `finished`, recording stops.
pub fn dump(finished: bool) -> Result<()> {
    let (text, path) = {
        let mut s = state().lock();
        if !s.started {
            return Err(Error::Runtime(
                "profiler dump: the profiler hasn't been run; set_config and \
                 set_state('run') first"
                    .into(),
            ));
        }
        if finished {
            s.running = false;
            publish(&s);
        }
        (trace::chrome_trace(&s.records), s.config.filename.clone())
    };
    std::fs::write(&path, text)
        .map_err(|e| Error::Runtime(format!("profiler dump: cannot write '{path}': {e}")))
}

/// MXNet's aggregate statistics of the records since the last reset, as a table or JSON.
pub fn dumps(reset: bool, format: StatsFormat, sort_by: SortBy, ascending: bool) -> String {
    let mut s = state().lock();
    let text = if s.config.aggregate_stats {
        aggregate::render(&s.records[s.stats_from..], format, sort_by, ascending)
    } else {
        aggregate::render(&[], format, sort_by, ascending)
    };
    if reset {
        s.stats_from = s.records.len();
    }
    text
}

#[cfg(test)]
mod tests;
