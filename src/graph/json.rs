//! MXNet's symbol JSON: written byte for byte as MXNet 1.9.1 writes it, read from that
//! format and from the older one with `param`/`attr` keys.

use super::compose::{build_op, input_names};
use super::{stored_key, Entry, Node, Symbol};
use crate::custom::control_flow::SUBGRAPHS_KEY;
use crate::error::{Error, Result};
use crate::op::{self, Attrs};
use parking_lot::RwLock;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

/// The version MXNet 1.9.1 stamps on the files it writes.
pub const MXNET_VERSION: i64 = 10901;

fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// Writes a list as MXNet's JSON writer does: inline up to ten items, else one item per
/// line at `indent` + 2 spaces.
fn write_list(out: &mut String, items: &[String], indent: usize) {
    write_items(out, items, ('[', ']'), 10, indent);
}

/// Writes a string map: inline when it has one entry, else one entry per line.
fn write_map(out: &mut String, attrs: &Attrs, indent: usize) {
    let items: Vec<String> = attrs
        .iter()
        .map(|(k, v)| format!("{}: {}", quote(k), quote(v)))
        .collect();
    write_items(out, &items, ('{', '}'), 1, indent);
}

/// Writes `items` between `open` and `close`: inline when there are at most
/// `inline_max`, else one per line at `indent` + 2 spaces.
fn write_items(
    out: &mut String,
    items: &[String],
    (open, close): (char, char),
    inline_max: usize,
    indent: usize,
) {
    if items.len() <= inline_max {
        let _ = write!(out, "{open}{}{close}", items.join(", "));
        return;
    }
    let pad = " ".repeat(indent + 2);
    out.push(open);
    out.push('\n');
    for (i, item) in items.iter().enumerate() {
        out.push_str(&pad);
        out.push_str(item);
        out.push_str(if i + 1 < items.len() { ", \n" } else { "\n" });
    }
    out.push_str(&" ".repeat(indent));
    out.push(close);
}

/// The symbol as MXNet's JSON.
pub fn to_json(sym: &Symbol) -> String {
    let mut out = String::new();
    write_graph(&mut out, sym, 0);
    let _ = write!(
        out,
        ", \n  \"attrs\": {{\"mxnet_version\": [\"int\", {MXNET_VERSION}]}}\n}}"
    );
    out
}

/// Writes the graph of `sym` as an object whose braces sit at column `base`, up to its
/// `heads` (the caller closes it: the top level adds MXNet's version, a subgraph not).
fn write_graph(out: &mut String, sym: &Symbol, base: usize) {
    let nodes = sym.topo_nodes();
    let index: HashMap<*const Node, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (Arc::as_ptr(n), i))
        .collect();
    let entry = |e: &Entry| format!("[{}, {}, 0]", index[&Arc::as_ptr(&e.node)], e.index);
    let key = " ".repeat(base + 2);
    let node_pad = " ".repeat(base + 4);
    let field = " ".repeat(base + 6);
    // A variable an op mutates (an auxiliary state) is read at a new version each time.
    let mut versions: HashMap<*const Node, usize> = HashMap::new();
    let _ = writeln!(out, "{{\n{key}\"nodes\": [");
    for (i, n) in nodes.iter().enumerate() {
        let _ = writeln!(out, "{node_pad}{{");
        let _ = writeln!(out, "{field}\"op\": {}, ", quote(n.op_name()));
        let _ = writeln!(out, "{field}\"name\": {}, ", quote(&n.name));
        let mut attrs = n.attrs.read().clone();
        let subgraphs = attrs.remove(SUBGRAPHS_KEY);
        if !attrs.is_empty() {
            let _ = write!(out, "{field}\"attrs\": ");
            write_map(out, &attrs, base + 6);
            out.push_str(", \n");
        }
        let _ = write!(out, "{field}\"inputs\": ");
        let aux = n.aux_inputs();
        let inputs: Vec<String> = n
            .inputs
            .iter()
            .enumerate()
            .map(|(k, e)| {
                if aux.contains(&k) && e.node.is_variable() {
                    let v = versions.entry(Arc::as_ptr(&e.node)).or_insert(0);
                    *v += 1;
                    format!("[{}, {}, {v}]", index[&Arc::as_ptr(&e.node)], e.index)
                } else {
                    entry(e)
                }
            })
            .collect();
        write_list(out, &inputs, base + 6);
        if let Some(text) = subgraphs {
            write_subgraphs(out, &text, base + 6);
        }
        out.push('\n');
        out.push_str(&node_pad);
        out.push_str(if i + 1 < nodes.len() { "}, \n" } else { "}\n" });
    }
    out.push_str(&key);
    out.push_str("], \n");
    let arg_nodes: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_variable())
        .map(|(i, _)| i.to_string())
        .collect();
    let _ = write!(out, "{key}\"arg_nodes\": ");
    write_list(out, &arg_nodes, base + 2);
    out.push_str(", \n");
    let mut row = vec![0usize];
    for n in &nodes {
        row.push(row.last().unwrap() + n.mxnet_num_outputs());
    }
    let row: Vec<String> = row.iter().map(|r| r.to_string()).collect();
    let _ = write!(out, "{key}\"node_row_ptr\": ");
    write_list(out, &row, base + 2);
    out.push_str(", \n");
    let heads: Vec<String> = sym.outputs.iter().map(entry).collect();
    let _ = write!(out, "{key}\"heads\": ");
    write_list(out, &heads, base + 2);
}

/// Writes a node's `subgraphs` key (after its inputs) from the JSON list it keeps, each
/// graph in MXNet's layout; a list that does not parse is written as it is.
fn write_subgraphs(out: &mut String, text: &str, indent: usize) {
    let graphs: Option<Vec<Symbol>> =
        serde_json::from_str::<Vec<Value>>(text)
            .ok()
            .and_then(|list| {
                list.iter()
                    .map(|g| from_json(&g.to_string()).ok())
                    .collect()
            });
    let pad = " ".repeat(indent);
    let _ = write!(out, ", \n{pad}\"subgraphs\": ");
    let Some(graphs) = graphs else {
        out.push_str(text);
        return;
    };
    out.push_str("[\n");
    for (i, g) in graphs.iter().enumerate() {
        out.push_str(&" ".repeat(indent + 2));
        write_graph(out, g, indent + 2);
        out.push('\n');
        out.push_str(&" ".repeat(indent + 2));
        out.push_str(if i + 1 < graphs.len() { "}, \n" } else { "}\n" });
    }
    out.push_str(&pad);
    out.push(']');
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Value(format!("symbol JSON: {}", msg.into()))
}

fn string_map(v: Option<&Value>, what: &str, node: &str) -> Result<Attrs> {
    let Some(v) = v else {
        return Ok(Attrs::new());
    };
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("'{what}' of node '{node}' is not an object")))?;
    obj.iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Ok((k.clone(), s))
        })
        .collect()
}

/// Output `idx` of node `nid` among the `nodes` read so far, for `reader` (named in
/// errors).
fn entry_at(
    nodes: &[Arc<Node>],
    (nid, idx): (usize, usize),
    reader: impl Fn() -> String,
) -> Result<Entry> {
    let node = nodes.get(nid).ok_or_else(|| {
        bad(format!(
            "{} reads missing node {nid}: the graph has {} node(s) before it",
            reader(),
            nodes.len()
        ))
    })?;
    if idx >= node.num_outputs() {
        return Err(bad(format!(
            "{} reads output {idx} of node '{}', which has {}",
            reader(),
            node.name,
            node.num_outputs()
        )));
    }
    Ok(Entry {
        node: node.clone(),
        index: idx,
    })
}

fn entry_ref(v: &Value, node: &str) -> Result<(usize, usize)> {
    let arr = v
        .as_array()
        .filter(|a| (2..=3).contains(&a.len()))
        .ok_or_else(|| bad(format!("node '{node}': malformed input entry {v}")))?;
    let get = |i: usize| {
        arr[i]
            .as_u64()
            .map(|x| x as usize)
            .ok_or_else(|| bad(format!("node '{node}': malformed input entry {v}")))
    };
    Ok((get(0)?, get(1)?))
}

/// Reads a symbol from MXNet's JSON.
pub fn from_json(text: &str) -> Result<Symbol> {
    let root: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let nodes_v = root
        .get("nodes")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("no 'nodes' list"))?;
    let mut nodes: Vec<Arc<Node>> = Vec::with_capacity(nodes_v.len());
    for (i, nv) in nodes_v.iter().enumerate() {
        let name = nv
            .get("name")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad(format!("node {i} has no name")))?
            .to_string();
        let op_name = nv
            .get("op")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad(format!("node {i} ('{name}') has no op")))?;
        let mut attrs = string_map(nv.get("attrs"), "attrs", &name)?;
        attrs.extend(string_map(nv.get("param"), "param", &name)?);
        for (k, v) in string_map(nv.get("attr"), "attr", &name)? {
            attrs.insert(stored_key(&k), v);
        }
        if let Some(list) = nv.get("subgraphs") {
            if !list.is_array() {
                return Err(bad(format!("node '{name}': 'subgraphs' is not a list")));
            }
            attrs.insert(SUBGRAPHS_KEY.to_string(), list.to_string());
        }
        let inputs_v = match nv.get("inputs") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .ok_or_else(|| bad(format!("node '{name}': 'inputs' is not a list")))?
                .clone(),
        };
        let mut inputs = Vec::with_capacity(inputs_v.len());
        for iv in &inputs_v {
            let reader = || format!("node '{name}'");
            inputs.push(entry_at(&nodes, entry_ref(iv, &name)?, reader)?);
        }
        let node = if op_name == "null" {
            Node::variable(&name, attrs)
        } else {
            let def = op::find(op_name)
                .map_err(|_| bad(format!("node '{name}' uses unknown operator '{op_name}'")))?;
            let op = build_op(def, &attrs, &name)?;
            let names = input_names(def, &op, inputs.len());
            if names.len() != inputs.len() {
                return Err(bad(format!(
                    "node '{name}' ({op_name}) has {} input(s), the operator takes {} ({})",
                    inputs.len(),
                    names.len(),
                    names.join(", ")
                )));
            }
            Arc::new(Node {
                name,
                op: Some(op),
                attrs: RwLock::new(attrs),
                inputs,
                input_names: names,
                backward_of: None,
            })
        };
        nodes.push(node);
    }
    let heads_v = root
        .get("heads")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("no 'heads' list"))?;
    let mut outputs = Vec::with_capacity(heads_v.len());
    for hv in heads_v {
        outputs.push(entry_at(&nodes, entry_ref(hv, "heads")?, || {
            "a head".into()
        })?);
    }
    Ok(Symbol { outputs })
}
