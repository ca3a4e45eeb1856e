//! `debug_str`: the executor's plan in MXNet's layout, with the memory each entry got.

use super::Executor;
use crate::shape::fmt_shape;
use std::fmt::Write;

impl Executor {
    /// The outputs, every node with its inputs and attributes, where each entry's memory
    /// comes from, and the total memory the plan allocated.
    pub fn debug_str(&self) -> String {
        let g = &self.graph;
        let mut s = String::from("Symbol Outputs:\n");
        for (k, &e) in g.outputs.iter().enumerate() {
            let p = g.producer(e);
            let _ = writeln!(
                s,
                "\toutput[{k}]={}({})",
                g.nodes[p].name,
                e - g.entry_base[p]
            );
        }
        for (i, node) in g.nodes.iter().enumerate() {
            let Some(op) = &node.op else {
                let _ = writeln!(s, "Variable:{}", node.name);
                continue;
            };
            let _ = writeln!(s, "--------------------");
            let _ = writeln!(s, "Op:{}, Name={}", op.name(), node.name);
            let _ = writeln!(s, "Inputs:");
            for (j, &e) in g.inputs[i].iter().enumerate() {
                let p = g.producer(e);
                let _ = writeln!(
                    s,
                    "\targ[{j}]={}({}) version=0",
                    g.nodes[p].name,
                    e - g.entry_base[p]
                );
            }
            let attrs = node.attrs.read();
            if !attrs.is_empty() {
                let _ = writeln!(s, "Attrs:");
                for (k, v) in attrs.iter() {
                    let _ = writeln!(s, "\t{k}={v}");
                }
            }
            let _ = writeln!(s, "Outputs:");
            for e in g.node_entries(i) {
                let k = e - g.entry_base[i];
                let where_ = match self.plan.storage[e] {
                    Some(b) if self.plan.inplace[e] => format!("in place, block {b}"),
                    Some(b) => format!("block {b} ({} bytes)", self.plan.block_bytes[b]),
                    None => "external array".to_string(),
                };
                let _ = writeln!(s, "\tout[{k}]={} ({where_})", node.output_name(k));
            }
        }
        let total = self.plan.total_bytes();
        let _ = writeln!(
            s,
            "Total {} MB allocated ({total} bytes in {} blocks)",
            total >> 20,
            self.plan.block_bytes.len()
        );
        for (k, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(
                s,
                "output {k} '{}': {} {}",
                self.output_names[k],
                fmt_shape(o.shape()),
                o.dtype()
            );
        }
        s
    }
}
