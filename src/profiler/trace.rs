//! Records as Chrome's trace event format (chrome://tracing, Perfetto), laid out as
//! MXNet's `profiler.dump` lays it out: a process row per device or category.

use super::{Kind, Record};
use crate::context::{Context, DeviceType};
use serde_json::{json, Value};
use std::collections::HashMap;

/// MXNet's name of a device in traces: `cpu/0`, `gpu/1`, `cpu pinned/0`.
pub fn device_name(ctx: Context) -> String {
    let kind = match ctx.dev_type {
        DeviceType::Cpu => "cpu",
        DeviceType::Gpu => "gpu",
        DeviceType::CpuPinned => "cpu pinned",
        DeviceType::CpuShared => "cpu shared",
    };
    format!("{kind}/{}", ctx.dev_id)
}

/// The whole trace as JSON text.
pub fn chrome_trace(records: &[Record]) -> String {
    let mut rows: HashMap<String, usize> = HashMap::new();
    let mut events: Vec<Value> = Vec::with_capacity(records.len() * 2);
    for r in records {
        let row = match r.device {
            Some(ctx) => device_name(ctx),
            None => r.category.clone(),
        };
        let next = rows.len();
        let pid = *rows.entry(row.clone()).or_insert_with(|| {
            events.push(json!({
                "ph": "M", "args": {"name": row}, "pid": next, "name": "process_name"
            }));
            next
        });
        let (name, cat, tid) = (&r.name, &r.category, r.thread);
        match r.kind {
            Kind::Span {
                start,
                end,
                async_span,
            } => {
                let (b, e) = if async_span { ("b", "e") } else { ("B", "E") };
                for (ph, ts) in [(b, start), (e, end)] {
                    let mut ev = json!({
                        "name": name, "cat": cat, "ph": ph, "ts": ts, "pid": pid, "tid": tid
                    });
                    if async_span {
                        ev["id"] = json!(tid);
                    }
                    events.push(ev);
                }
            }
            Kind::Counter(v) => events.push(json!({
                "name": name, "cat": cat, "ph": "C", "ts": r.at, "args": {name: v},
                "pid": pid, "tid": tid
            })),
            Kind::Marker(scope) => events.push(json!({
                "name": name, "cat": cat, "ph": "i", "ts": r.at, "s": scope.to_string(),
                "pid": pid, "tid": tid
            })),
        }
    }
    let doc = json!({"traceEvents": events, "displayTimeUnit": "ms"});
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
