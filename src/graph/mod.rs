//! Symbol graphs: nodes (an operator or a variable), their inputs and attributes, and the
//! passes over them (inference, gradient, memory planning), with MXNet's JSON format.

pub mod compose;
pub mod cut;
pub mod expand;
pub mod gradient;
pub mod indexed;
pub mod infer;
pub mod json;
pub mod plan;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::op::{Attrs, OpRef};
use parking_lot::RwLock;
use std::collections::HashSet;
use std::sync::Arc;

pub use indexed::IndexedGraph;

/// Attribute keys MXNet stores wrapped as `__key__` and lists under both spellings.
pub const HIDDEN_KEYS: &[&str] = &[
    "ctx_group",
    "lr_mult",
    "wd_mult",
    "force_mirroring",
    "mirror_stage",
    "profiler_scope",
];

/// One node of a graph: a variable (no operator) or an operator applied to inputs.
pub struct Node {
    /// The node's name (`fc1`, `data`).
    pub name: String,
    /// The parsed operator; `None` for a variable.
    pub op: Option<OpRef>,
    /// Attributes: the operator's arguments and the user's (`__shape__`, `__lr_mult__`).
    pub attrs: RwLock<Attrs>,
    /// The entries the operator reads, in the operator's input order.
    pub inputs: Vec<Entry>,
    /// Names of the operator's inputs (`data`, `weight`, ...); empty for a variable.
    pub input_names: Vec<String>,
    /// For a node the gradient pass made, the forward node whose gradient it computes.
    pub backward_of: Option<BackwardOf>,
}

/// Links a backward node to its forward node: its first inputs are the gradients of the
/// forward outputs `ograds` and its outputs the gradients of the forward inputs
/// `grad_of`, so each has the shape and dtype of the forward entry it stands for.
pub struct BackwardOf {
    /// The forward node.
    pub forward: Arc<Node>,
    /// Forward outputs whose gradients are the backward node's first inputs.
    pub ograds: Vec<usize>,
    /// Forward inputs whose gradients are the backward node's outputs, one per output.
    pub grad_of: Vec<usize>,
}

/// One output of a node.
#[derive(Clone)]
pub struct Entry {
    /// The node.
    pub node: Arc<Node>,
    /// Which of its outputs.
    pub index: usize,
}

impl Node {
    /// A new variable node.
    pub fn variable(name: &str, attrs: Attrs) -> Arc<Node> {
        Arc::new(Node {
            name: name.to_string(),
            op: None,
            attrs: RwLock::new(attrs),
            inputs: Vec::new(),
            input_names: Vec::new(),
            backward_of: None,
        })
    }

    /// True for a variable.
    pub fn is_variable(&self) -> bool {
        self.op.is_none()
    }

    /// The operator's name, or `null` for a variable.
    pub fn op_name(&self) -> &'static str {
        self.op.as_ref().map_or("null", |o| o.name())
    }

    /// Number of outputs, hidden ones included.
    pub fn num_outputs(&self) -> usize {
        self.op.as_ref().map_or(1, |o| o.num_outputs())
    }

    /// Number of outputs MXNet's own operator has (its JSON's `node_row_ptr` counts them).
    pub fn mxnet_num_outputs(&self) -> usize {
        self.op.as_ref().map_or(1, |o| o.mxnet_num_outputs())
    }

    /// Number of outputs a symbol of this node shows.
    pub fn num_visible_outputs(&self) -> usize {
        self.op.as_ref().map_or(1, |o| o.num_visible_outputs())
    }

    /// The name `list_outputs` gives output `index`.
    pub fn output_name(&self, index: usize) -> String {
        match &self.op {
            None => self.name.clone(),
            Some(op) => {
                let names = op.output_names();
                match names.get(index) {
                    Some(n) => format!("{}_{n}", self.name),
                    None => format!("{}_output{index}", self.name),
                }
            }
        }
    }

    /// Indices of inputs that are auxiliary states.
    pub fn aux_inputs(&self) -> Vec<usize> {
        self.op.as_ref().map_or(Vec::new(), |o| o.aux_inputs())
    }

    /// One attribute.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.attrs.read().get(key).cloned()
    }

    /// A copy of this node (its name, operator and attributes) reading `inputs`.
    pub fn with_inputs(&self, inputs: Vec<Entry>) -> Arc<Node> {
        Arc::new(Node {
            name: self.name.clone(),
            op: self.op.clone(),
            attrs: RwLock::new(self.attrs.read().clone()),
            inputs,
            input_names: self.input_names.clone(),
            backward_of: None,
        })
    }
}

/// A list of nodes.
pub type Nodes = Vec<Arc<Node>>;

/// A symbol: a list of node outputs, with the graph behind them.
#[derive(Clone)]
pub struct Symbol {
    /// The outputs, in order.
    pub outputs: Vec<Entry>,
}

fn node_key(n: &Arc<Node>) -> *const Node {
    Arc::as_ptr(n)
}

impl Symbol {
    /// A symbol of one variable.
    pub fn variable(name: &str, attrs: Attrs) -> Symbol {
        Symbol {
            outputs: vec![Entry {
                node: Node::variable(name, attrs),
                index: 0,
            }],
        }
    }

    /// The outputs of several symbols as one.
    pub fn group(symbols: &[Symbol]) -> Symbol {
        Symbol {
            outputs: symbols
                .iter()
                .flat_map(|s| s.outputs.iter().cloned())
                .collect(),
        }
    }

    /// Every node reachable from the outputs, inputs before their users, in MXNet's
    /// depth-first order.
    pub fn topo_nodes(&self) -> Vec<Arc<Node>> {
        topo_order(self.outputs.iter().map(|e| &e.node))
    }

    /// The variable nodes: all of them, the arguments, and the auxiliary states.
    pub fn variables(&self) -> (Nodes, Nodes, Nodes) {
        let nodes = self.topo_nodes();
        let mut aux_set = HashSet::new();
        for n in &nodes {
            for i in n.aux_inputs() {
                if let Some(e) = n.inputs.get(i) {
                    if e.node.is_variable() {
                        aux_set.insert(node_key(&e.node));
                    }
                }
            }
        }
        let mut all = Vec::new();
        let mut args = Vec::new();
        let mut aux = Vec::new();
        for n in nodes.into_iter().filter(|n| n.is_variable()) {
            all.push(n.clone());
            if aux_set.contains(&node_key(&n)) {
                aux.push(n);
            } else {
                args.push(n);
            }
        }
        (all, args, aux)
    }

    /// Names of the arguments (variables that are not auxiliary states).
    pub fn list_arguments(&self) -> Vec<String> {
        self.variables().1.iter().map(|n| n.name.clone()).collect()
    }

    /// Names of the auxiliary states.
    pub fn list_auxiliary_states(&self) -> Vec<String> {
        self.variables().2.iter().map(|n| n.name.clone()).collect()
    }

    /// Names of every variable, arguments and auxiliary states in graph order.
    pub fn list_inputs(&self) -> Vec<String> {
        self.variables().0.iter().map(|n| n.name.clone()).collect()
    }

    /// Names of the outputs.
    pub fn list_outputs(&self) -> Vec<String> {
        self.outputs
            .iter()
            .map(|e| e.node.output_name(e.index))
            .collect()
    }

    /// Every visible output of every node, as one symbol.
    pub fn internals(&self) -> Symbol {
        let outputs = self
            .topo_nodes()
            .into_iter()
            .flat_map(|n| {
                (0..n.num_visible_outputs()).map(move |index| Entry {
                    node: n.clone(),
                    index,
                })
            })
            .collect();
        Symbol { outputs }
    }

    /// The inputs of the output nodes, or `None` if they have none.
    pub fn children(&self) -> Option<Symbol> {
        let outputs: Vec<Entry> = self
            .outputs
            .iter()
            .flat_map(|e| e.node.inputs.iter().cloned())
            .collect();
        (!outputs.is_empty()).then_some(Symbol { outputs })
    }

    /// Output `index` alone.
    pub fn output(&self, index: usize) -> Result<Symbol> {
        self.outputs
            .get(index)
            .map(|e| Symbol {
                outputs: vec![e.clone()],
            })
            .ok_or_else(|| {
                Error::Index(format!(
                    "symbol output index {index} out of range: the symbol has {} output(s)",
                    self.outputs.len()
                ))
            })
    }

    /// The single output node, or an error naming `what` was asked.
    pub fn single_node(&self, what: &str) -> Result<&Arc<Node>> {
        match self.outputs.as_slice() {
            [e] => Ok(&e.node),
            _ => Err(Error::Value(format!(
                "{what} needs a symbol with one output, this one has {}",
                self.outputs.len()
            ))),
        }
    }

    /// MXNet's `_value_index` attribute: the output indices (`0`, `1, 2`) when every
    /// output is of one node, else `None`.
    pub fn value_index(&self) -> Option<String> {
        let first = self.outputs.first()?;
        if self
            .outputs
            .iter()
            .any(|e| !Arc::ptr_eq(&e.node, &first.node))
        {
            return None;
        }
        let indices: Vec<String> = self.outputs.iter().map(|e| e.index.to_string()).collect();
        Some(indices.join(", "))
    }

    /// The symbol's name: its single output node's name.
    pub fn name(&self) -> Option<String> {
        match self.outputs.as_slice() {
            [e] => Some(e.node.name.clone()),
            _ => None,
        }
    }

    /// The attributes of every node that has any, by node name, with hidden keys also
    /// listed without their underscores.
    pub fn attr_dict(&self) -> Vec<(String, Attrs)> {
        self.topo_nodes()
            .into_iter()
            .filter_map(|n| {
                let attrs = listed_attrs(&n.attrs.read());
                (!attrs.is_empty()).then(|| (n.name.clone(), attrs))
            })
            .collect()
    }

    /// Sets an attribute on every output node; hidden keys are stored as `__key__`.
    pub fn set_attr(&self, key: &str, value: &str) {
        let stored = stored_key(key);
        for e in &self.outputs {
            e.node
                .attrs
                .write()
                .insert(stored.clone(), value.to_string());
        }
    }
}

/// The key under which MXNet stores a user attribute.
pub fn stored_key(key: &str) -> String {
    if HIDDEN_KEYS.contains(&key) {
        format!("__{key}__")
    } else {
        key.to_string()
    }
}

/// A node's attributes as `list_attr` shows them: hidden keys under both spellings.
pub fn listed_attrs(attrs: &Attrs) -> Attrs {
    let mut out = attrs.clone();
    // A control-flow node's subgraphs are part of its structure, not an attribute.
    out.remove(crate::custom::control_flow::SUBGRAPHS_KEY);
    for (k, v) in attrs {
        if let Some(inner) = k.strip_prefix("__").and_then(|k| k.strip_suffix("__")) {
            if HIDDEN_KEYS.contains(&inner) {
                out.insert(inner.to_string(), v.clone());
            }
        }
    }
    out
}

/// Post-order depth-first traversal from `heads`: each node after its inputs, inputs
/// visited in order, each node once.
pub fn topo_order<'a>(heads: impl Iterator<Item = &'a Arc<Node>>) -> Vec<Arc<Node>> {
    let mut seen: HashSet<*const Node> = HashSet::new();
    let mut order = Vec::new();
    // Iterative, so deep graphs (long unrolled chains) do not overflow the stack.
    let mut stack: Vec<(Arc<Node>, usize)> = Vec::new();
    for head in heads {
        if !seen.insert(node_key(head)) {
            continue;
        }
        stack.push((head.clone(), 0));
        while let Some((node, next)) = stack.last_mut() {
            if let Some(input) = node.inputs.get(*next) {
                *next += 1;
                let child = input.node.clone();
                if seen.insert(node_key(&child)) {
                    stack.push((child, 0));
                }
            } else {
                order.push(node.clone());
                stack.pop();
            }
        }
    }
    order
}
