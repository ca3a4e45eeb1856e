use super::aggregate::render;
use super::trace::chrome_trace;
use super::*;
use crate::context::Context;

fn span(cat: &str, name: &str, start: u64, end: u64, device: Option<Context>) -> Record {
    Record {
        category: cat.into(),
        name: name.into(),
        device,
        thread: 7,
        at: end,
        kind: Kind::Span {
            start,
            end,
            async_span: cat != "operator" && cat != "event",
        },
    }
}

fn sample() -> Vec<Record> {
    let cpu = Some(Context::cpu(0));
    vec![
        span("operator", "sqrt", 1000, 3000, cpu),
        span("operator", "_plus_scalar", 3000, 3500, cpu),
        span("operator", "_plus_scalar", 4000, 4100, cpu),
        span("PyD", "task", 900, 5000, None),
        Record {
            category: "Device Storage".into(),
            name: "Memory: cpu/0".into(),
            device: None,
            thread: 7,
            at: 1200,
            kind: Kind::Counter(40_000),
        },
        Record {
            category: "Device Storage".into(),
            name: "Memory: cpu/0".into(),
            device: None,
            thread: 7,
            at: 1300,
            kind: Kind::Counter(120_000),
        },
    ]
}

#[test]
fn json_stats_count_and_time_each_name_by_category() {
    let text = render(&sample(), StatsFormat::Json, SortBy::Total, false);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ops = &v["Time"]["operator"];
    assert_eq!(ops["sqrt"]["Count"], 1);
    assert_eq!(ops["_plus_scalar"]["Count"], 2);
    assert_eq!(ops["_plus_scalar"]["Total"], 0.6);
    assert_eq!(ops["_plus_scalar"]["Min"], 0.1);
    assert_eq!(ops["_plus_scalar"]["Avg"], 0.3);
    assert_eq!(v["Time"]["PyD"]["task"]["Max"], 4.1);
    let mem = &v["Memory"]["Device Storage"]["Memory: cpu/0"];
    assert_eq!(
        (mem["Count"].as_u64(), mem["Max"].as_f64()),
        (Some(2), Some(120.0))
    );
    assert!(mem.get("Total").is_none());
    assert_eq!(v["Unit"]["Time"], "ms");
    // Descending by total: sqrt (2 ms) before _plus_scalar (0.6 ms); ascending reverses.
    let names: Vec<&String> = ops.as_object().unwrap().keys().collect();
    assert_eq!(names, ["sqrt", "_plus_scalar"]);
    let text = render(&sample(), StatsFormat::Json, SortBy::Count, true);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&String> = v["Time"]["operator"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["sqrt", "_plus_scalar"]);
}

#[test]
fn table_has_mxnets_columns() {
    let text = render(&sample(), StatsFormat::Table, SortBy::Total, false);
    assert!(text.contains("Profile Statistics:"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("_plus_scalar"))
        .expect("row");
    assert_eq!(
        row,
        format!(
            "{:<30}{:>11}{:>17}{:>17}{:>17}{:>17}",
            "_plus_scalar", 2, "0.6000", "0.1000", "0.5000", "0.3000"
        )
    );
    assert!(text.contains("Max Use  (kB)"));
    // Categories in name order, as MXNet prints them.
    let at = |s: &str| text.find(&format!("{s}\n=")).unwrap();
    assert!(at("Device Storage") < at("PyD") && at("PyD") < at("operator"));
}

#[test]
fn trace_pairs_begin_and_end_per_device_row() {
    let v: serde_json::Value = serde_json::from_str(&chrome_trace(&sample())).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu/0", "PyD", "Device Storage"]);
    let sqrt: Vec<(&str, u64)> = ev
        .iter()
        .filter(|e| e["name"] == "sqrt")
        .map(|e| (e["ph"].as_str().unwrap(), e["ts"].as_u64().unwrap()))
        .collect();
    assert_eq!(sqrt, [("B", 1000), ("E", 3000)]);
    let task: Vec<&str> = ev
        .iter()
        .filter(|e| e["name"] == "task")
        .map(|e| e["ph"].as_str().unwrap())
        .collect();
    assert_eq!(task, ["b", "e"]);
    let counter = ev.iter().find(|e| e["ph"] == "C").unwrap();
    assert_eq!(counter["args"]["Memory: cpu/0"], 40_000);
    assert_eq!(v["displayTimeUnit"], "ms");
}

#[test]
fn config_takes_pythons_spelling_and_rejects_unknown_keys() {
    let mut c = Config::default();
    c.set("profile_all", "True").unwrap();
    c.set("aggregate_stats", "1").unwrap();
    c.set("filename", "out.json").unwrap();
    c.set("dump_period", "0.5").unwrap();
    assert!(c.profile_all && c.aggregate_stats);
    assert_eq!((c.filename.as_str(), c.dump_period), ("out.json", 0.5));
    let e = c.set("profile_everything", "True").unwrap_err().to_string();
    assert!(e.contains("profile_everything"), "{e}");
    let e = c.set("profile_memory", "maybe").unwrap_err().to_string();
    assert!(e.contains("profile_memory") && e.contains("maybe"), "{e}");
    assert!(record_marker("d", "m", "galaxy").is_err());
}
