//! `mx.profiler.dumps`: per-name statistics of the records, by category, as MXNet's
//! table or its JSON.

use super::{Kind, Record};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The category whose counters are bytes in use rather than times.
const MEMORY: &str = "Device Storage";

/// How `dumps` lays its statistics out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsFormat {
    Table,
    Json,
}

/// The statistic `dumps` sorts each category's entries by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Total,
    Avg,
    Min,
    Max,
    Count,
}

/// Count, sum, least and most of one name's values (ms, or kB for memory).
#[derive(Debug, Clone, Copy)]
struct Stat {
    count: u64,
    total: f64,
    min: f64,
    max: f64,
}

impl Stat {
    fn add(&mut self, v: f64) {
        self.count += 1;
        self.total += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total / self.count as f64
        }
    }

    fn key(&self, by: SortBy, memory: bool) -> f64 {
        match by {
            SortBy::Total if memory => self.max,
            SortBy::Total => self.total,
            SortBy::Avg => self.avg(),
            SortBy::Min => self.min,
            SortBy::Max => self.max,
            SortBy::Count => self.count as f64,
        }
    }
}

impl Default for Stat {
    fn default() -> Self {
        Stat {
            count: 0,
            total: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

type Categories = BTreeMap<String, BTreeMap<String, Stat>>;

/// Statistics per category and name: span times in ms, memory in kB, counter values
/// and markers as they are (markers count only).
fn collect(records: &[Record]) -> Categories {
    let mut cats = Categories::new();
    for r in records {
        let v = match r.kind {
            Kind::Span { start, end, .. } => end.saturating_sub(start) as f64 / 1000.0,
            Kind::Counter(v) if r.category == MEMORY => v as f64 / 1000.0,
            Kind::Counter(v) => v as f64,
            Kind::Marker(_) => 0.0,
        };
        cats.entry(r.category.clone())
            .or_default()
            .entry(r.name.clone())
            .or_default()
            .add(v);
    }
    cats
}

/// The entries of one category in the requested order.
fn sorted(items: &BTreeMap<String, Stat>, by: SortBy, asc: bool, mem: bool) -> Vec<(&str, Stat)> {
    let mut v: Vec<(&str, Stat)> = items.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    v.sort_by(|a, b| {
        let o = a.1.key(by, mem).total_cmp(&b.1.key(by, mem));
        if asc {
            o
        } else {
            o.reverse()
        }
    });
    v
}

/// The statistics as MXNet's `dumps` prints them.
pub fn render(records: &[Record], format: StatsFormat, by: SortBy, asc: bool) -> String {
    let cats = collect(records);
    match format {
        StatsFormat::Table => table(&cats, by, asc),
        StatsFormat::Json => json_text(&cats, by, asc),
    }
}

fn table(cats: &Categories, by: SortBy, asc: bool) -> String {
    let mut s = String::from(
        "\nProfile Statistics:\n\tNote the difference in units for different entries.\n",
    );
    for (cat, items) in cats {
        let mem = cat == MEMORY;
        let _ = writeln!(s, "{cat}\n=================");
        if mem {
            let _ = writeln!(
                s,
                "{:<30}{:>11}{:>17}{:>17}{:>17}",
                "Name", "Total Count", "Min Use  (kB)", "Max Use  (kB)", "Avg Use  (kB)"
            );
            let _ = writeln!(
                s,
                "{:<30}{:>11}{:>17}{:>17}{:>17}",
                "----", "-----------", "-------------", "-------------", "-------------"
            );
        } else {
            let _ = writeln!(
                s,
                "{:<30}{:>11}{:>17}{:>17}{:>17}{:>17}",
                "Name",
                "Total Count",
                "Time (ms)",
                "Min Time (ms)",
                "Max Time (ms)",
                "Avg Time (ms)"
            );
            let _ = writeln!(
                s,
                "{:<30}{:>11}{:>17}{:>17}{:>17}{:>17}",
                "----",
                "-----------",
                "---------",
                "-------------",
                "-------------",
                "-------------"
            );
        }
        for (name, st) in sorted(items, by, asc, mem) {
            if mem {
                let _ = writeln!(
                    s,
                    "{name:<30}{:>11}{:>17.4}{:>17.4}{:>17.4}",
                    st.count,
                    st.min,
                    st.max,
                    st.avg()
                );
            } else {
                let _ = writeln!(
                    s,
                    "{name:<30}{:>11}{:>17.4}{:>17.4}{:>17.4}{:>17.4}",
                    st.count,
                    st.total,
                    st.min,
                    st.max,
                    st.avg()
                );
            }
        }
        s.push('\n');
    }
    s
}

fn json_text(cats: &Categories, by: SortBy, asc: bool) -> String {
    let (mut time, mut memory) = (Map::new(), Map::new());
    for (cat, items) in cats {
        let mem = cat == MEMORY;
        let mut entries = Map::new();
        for (name, st) in sorted(items, by, asc, mem) {
            let mut e = json!({"Count": st.count});
            if !mem {
                e["Total"] = json!(st.total);
            }
            e["Min"] = json!(st.min);
            e["Max"] = json!(st.max);
            e["Avg"] = json!(st.avg());
            entries.insert(name.to_string(), e);
        }
        let dest = if mem { &mut memory } else { &mut time };
        dest.insert(cat.clone(), Value::Object(entries));
    }
    let doc = json!({
        "Time": time,
        "Memory": memory,
        "Unit": {"Time": "ms", "Memory": "kB"},
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
