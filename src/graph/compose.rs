//! Building symbols: an operator applied to input symbols, missing inputs made variables.

use super::{Entry, Node, Symbol};
use crate::error::{Error, Result};
use crate::op::{self, Attrs, OpDef, OpRef};
use parking_lot::RwLock;
use std::sync::Arc;

/// The input names of `op` built from `def`, with `count` inputs given to a variadic op.
pub fn input_names(def: &OpDef, op: &OpRef, count: usize) -> Vec<String> {
    if let Some(names) = op.input_names() {
        names
    } else if def.variadic {
        (0..count).map(|i| format!("arg{i}")).collect()
    } else {
        def.inputs.iter().map(|s| s.to_string()).collect()
    }
}

/// Parses `attrs` for operator `def` on node `name`, with the node in any error.
pub fn build_op(def: &OpDef, attrs: &Attrs, name: &str) -> Result<OpRef> {
    def.build(attrs).map_err(|e| e.at_node(def.name, name))
}

/// Applies operator `op_name` to `args` (positional) and `kwargs` (by input name), naming
/// the node `name`. Inputs not given become variables `{name}_{input}`, which carry the
/// node's attributes as MXNet's do.
pub fn create(
    op_name: &str,
    mut attrs: Attrs,
    args: &[Symbol],
    kwargs: &[(String, Symbol)],
    name: &str,
) -> Result<Symbol> {
    let def = op::find(op_name)?;
    if def.variadic && def.param_names().any(|n| n == "num_args") && !attrs.contains_key("num_args")
    {
        attrs.insert("num_args".into(), args.len().to_string());
    }
    let op = build_op(def, &attrs, name)?;
    let names = input_names(def, &op, args.len());
    if args.len() > names.len() {
        return Err(Error::Value(format!(
            "{} (node '{name}'): takes {} input(s) ({}), got {} positional",
            def.name,
            names.len(),
            names.join(", "),
            args.len()
        )));
    }
    let mut slots: Vec<Option<Entry>> = vec![None; names.len()];
    for (i, s) in args.iter().enumerate() {
        slots[i] = Some(single_entry(def.name, name, &names[i], s)?);
    }
    for (key, s) in kwargs {
        let Some(i) = names.iter().position(|n| n == key) else {
            return Err(Error::Value(format!(
                "{} (node '{name}'): unknown input '{key}'; its inputs are {}",
                def.name,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if slots[i].is_some() {
            return Err(Error::Value(format!(
                "{} (node '{name}'): input '{key}' given twice",
                def.name
            )));
        }
        slots[i] = Some(single_entry(def.name, name, key, s)?);
    }
    let inputs = slots
        .into_iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (slot, input))| {
            slot.unwrap_or_else(|| {
                let mut var_attrs = attrs.clone();
                for (k, v) in op.input_var_attrs(i) {
                    var_attrs.insert(k.to_string(), v.to_string());
                }
                Entry {
                    node: Node::variable(&format!("{name}_{input}"), var_attrs),
                    index: 0,
                }
            })
        })
        .collect();
    Ok(node_symbol(op, name, attrs, inputs, names))
}

/// A symbol of every visible output of a new operator node.
pub fn node_symbol(
    op: OpRef,
    name: &str,
    attrs: Attrs,
    inputs: Vec<Entry>,
    input_names: Vec<String>,
) -> Symbol {
    let visible = op.num_visible_outputs();
    let node = Arc::new(Node {
        name: name.to_string(),
        op: Some(op),
        attrs: RwLock::new(attrs),
        inputs,
        input_names,
        backward_of: None,
    });
    Symbol {
        outputs: (0..visible)
            .map(|index| Entry {
                node: node.clone(),
                index,
            })
            .collect(),
    }
}

fn single_entry(op: &str, node: &str, input: &str, s: &Symbol) -> Result<Entry> {
    match s.outputs.as_slice() {
        [e] => Ok(e.clone()),
        outs => Err(Error::Value(format!(
            "{op} (node '{node}'): input '{input}' must be a symbol with one output, got {} \
             outputs",
            outs.len()
        ))),
    }
}

/// What `compose` has made so far: the entries replacing variables and the copied nodes.
#[derive(Default)]
struct Copied {
    var_entries: std::collections::HashMap<*const Node, Entry>,
    copies: std::collections::HashMap<*const Node, Arc<Node>>,
}

impl Copied {
    /// `e` pointed at its replacement or its node's copy, if it has one.
    fn entry(&self, e: &Entry) -> Entry {
        let k = Arc::as_ptr(&e.node);
        if let Some(r) = self.var_entries.get(&k) {
            r.clone()
        } else if let Some(c) = self.copies.get(&k) {
            Entry {
                node: c.clone(),
                index: e.index,
            }
        } else {
            e.clone()
        }
    }
}

/// Replaces the variables of `sym` named in `kwargs`, or the arguments in order for
/// `args`, by other symbols, copying the nodes on the way (MXNet's symbol call).
pub fn compose(sym: &Symbol, args: &[Symbol], kwargs: &[(String, Symbol)]) -> Result<Symbol> {
    use std::collections::HashMap;
    let arg_names = sym.list_arguments();
    if args.len() > arg_names.len() {
        return Err(Error::Value(format!(
            "compose: the symbol has {} argument(s), got {} positional",
            arg_names.len(),
            args.len()
        )));
    }
    let mut replace: HashMap<String, Entry> = HashMap::new();
    for (n, s) in arg_names.iter().zip(args) {
        replace.insert(n.clone(), single_entry("compose", "", n, s)?);
    }
    for (k, s) in kwargs {
        if !sym.list_inputs().contains(k) {
            return Err(Error::Value(format!(
                "compose: the symbol has no input named '{k}'"
            )));
        }
        replace.insert(k.clone(), single_entry("compose", "", k, s)?);
    }
    let mut copied = Copied::default();
    for n in sym.topo_nodes() {
        let key = Arc::as_ptr(&n);
        if n.is_variable() {
            if let Some(e) = replace.get(&n.name) {
                copied.var_entries.insert(key, e.clone());
            }
            continue;
        }
        let inputs: Vec<Entry> = n.inputs.iter().map(|e| copied.entry(e)).collect();
        let copy = n.with_inputs(inputs);
        copied.copies.insert(key, copy);
    }
    let outputs = sym.outputs.iter().map(|e| copied.entry(e)).collect();
    Ok(Symbol { outputs })
}
