//! The gradient pass: appends to a forward graph the backward nodes that compute the
//! gradients of chosen variables, summing where an entry feeds several consumers.

use super::compose::node_symbol;
use super::{topo_order, BackwardOf, Entry, Node};
use crate::error::{Error, Result};
use crate::op::{self, Attrs, Grad};
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The backward part of a graph.
pub struct GradientGraph {
    /// For each forward output, the variable node its head gradient is fed through, if
    /// some backward node reads it (loss outputs ignore theirs).
    pub head_grads: Vec<Option<Arc<Node>>>,
    /// For each requested variable, the entry holding its gradient; `None` if no output
    /// depends on it (its gradient is zero).
    pub grads: Vec<Option<Entry>>,
}

type Key = (*const Node, usize);

fn key(e: &Entry) -> Key {
    (Arc::as_ptr(&e.node), e.index)
}

/// One entry summing `parts` (the part itself when there is one).
fn sum_entries(mut parts: Vec<Entry>, name: &str) -> Result<Entry> {
    if parts.len() == 1 {
        return Ok(parts.pop().expect("one part"));
    }
    let def = op::find("add_n")?;
    let mut attrs = Attrs::new();
    attrs.insert("num_args".into(), parts.len().to_string());
    let op = def.build(&attrs)?;
    let names = (0..parts.len()).map(|i| format!("arg{i}")).collect();
    let sym = node_symbol(op, name, attrs, parts, names);
    Ok(sym.outputs[0].clone())
}

/// A node applying the one-input operator `op_name` (`_copy`, `zeros_like`) to `src`.
fn unary_node(op_name: &str, src: &Entry, name: &str) -> Result<Entry> {
    let op = op::find(op_name)?.build(&Attrs::new())?;
    let sym = node_symbol(
        op,
        name,
        Attrs::new(),
        vec![src.clone()],
        vec!["data".into()],
    );
    Ok(sym.outputs[0].clone())
}

/// The placement attribute of `n`, which the nodes computing its gradient inherit.
fn placement(n: &Node) -> Attrs {
    let mut attrs = Attrs::new();
    if let Some(g) = n.attr("__ctx_group__") {
        attrs.insert("__ctx_group__".into(), g);
    }
    attrs
}

/// Builds the gradient of `outputs` with respect to the variables `wrt`.
pub fn build(outputs: &[Entry], wrt: &[Arc<Node>]) -> Result<GradientGraph> {
    let nodes = topo_order(outputs.iter().map(|e| &e.node));
    let wanted: HashSet<*const Node> = wrt.iter().map(Arc::as_ptr).collect();

    // Nodes on a path from a requested variable (through non-auxiliary inputs).
    let mut depends: HashSet<*const Node> = wanted.clone();
    for n in &nodes {
        if n.is_variable() {
            continue;
        }
        let aux = n.aux_inputs();
        let hit = n
            .inputs
            .iter()
            .enumerate()
            .any(|(i, e)| !aux.contains(&i) && depends.contains(&Arc::as_ptr(&e.node)));
        if hit {
            depends.insert(Arc::as_ptr(n));
        }
    }

    let mut pending: HashMap<Key, Vec<Entry>> = HashMap::new();
    let mut head_grads = Vec::with_capacity(outputs.len());
    for (k, out) in outputs.iter().enumerate() {
        let var = Node::variable(&format!("_head_grad_{k}"), Attrs::new());
        let e = Entry {
            node: var.clone(),
            index: 0,
        };
        pending.entry(key(out)).or_default().push(e);
        head_grads.push(var);
    }

    for n in nodes.iter().rev() {
        let Some(op) = &n.op else { continue };
        if !depends.contains(&Arc::as_ptr(n)) {
            continue;
        }
        let has_grad = (0..n.num_outputs()).any(|i| pending.contains_key(&(Arc::as_ptr(n), i)));
        if !has_grad {
            continue;
        }
        let g = match op.gradient() {
            Grad::Undefined => {
                return Err(Error::NotImplemented(format!(
                    "operator {} (node '{}') has no gradient",
                    op.name(),
                    n.name
                )))
            }
            Grad::Zero => continue,
            Grad::Op(g) => g,
        };
        let mut ograds = Vec::new();
        for &k in &g.ograds {
            let out = Entry {
                node: n.clone(),
                index: k,
            };
            let parts = pending.remove(&key(&out)).unwrap_or_default();
            let e = if parts.is_empty() {
                unary_node("zeros_like", &out, &format!("{}_zero_grad{k}", n.name))?
            } else {
                sum_entries(parts, &format!("{}_output{k}_grad_sum", n.name))?
            };
            ograds.push(e);
        }
        let inputs = g.arrange(
            ograds,
            g.inputs.iter().map(|&i| n.inputs[i].clone()).collect(),
            g.outputs
                .iter()
                .map(|&o| Entry {
                    node: n.clone(),
                    index: o,
                })
                .collect(),
        );
        let bwd_node = Arc::new(Node {
            name: format!("{}_backward", n.name),
            op: Some(g.op.clone()),
            attrs: RwLock::new(placement(n)),
            input_names: (0..inputs.len()).map(|i| format!("arg{i}")).collect(),
            inputs,
            backward_of: Some(BackwardOf {
                forward: n.clone(),
                ograds: g.ograds.clone(),
                grad_of: g.grad_of.clone(),
            }),
        });
        let aux = n.aux_inputs();
        for (j, &i) in g.grad_of.iter().enumerate() {
            if aux.contains(&i) {
                continue;
            }
            let src = &n.inputs[i];
            if !depends.contains(&Arc::as_ptr(&src.node)) {
                continue;
            }
            // A gradient that is one of the backward op's inputs (the backward of a sum)
            // is used directly: no node, no copy.
            let grad = match g.op.output_is_input(j) {
                Some(k) => bwd_node.inputs[k].clone(),
                None => Entry {
                    node: bwd_node.clone(),
                    index: j,
                },
            };
            pending.entry(key(src)).or_default().push(grad);
        }
    }

    let mut grads = Vec::with_capacity(wrt.len());
    for v in wrt {
        let parts = pending.remove(&(Arc::as_ptr(v), 0)).unwrap_or_default();
        grads.push(if parts.is_empty() {
            None
        } else {
            Some(sum_entries(parts, &format!("{}_grad_sum", v.name))?)
        });
    }
    // Each gradient is written into its own array, so an entry that is a variable (a head
    // gradient passed straight through), another variable's gradient too, or read by
    // another node gets a copy of its own.
    let mut readers: HashMap<Key, usize> = HashMap::new();
    let grad_nodes: Vec<Arc<Node>> = grads.iter().flatten().map(|e| e.node.clone()).collect();
    for n in topo_order(grad_nodes.iter()) {
        for e in &n.inputs {
            *readers.entry(key(e)).or_default() += 1;
        }
    }
    let mut uses: HashMap<Key, usize> = HashMap::new();
    for e in grads.iter().flatten() {
        *uses.entry(key(e)).or_default() += 1;
    }
    for (v, slot) in wrt.iter().zip(grads.iter_mut()) {
        let Some(e) = slot.as_ref() else { continue };
        let shared = e.node.is_variable()
            || readers.get(&key(e)).copied().unwrap_or(0) > 0
            || uses[&key(e)] > 1;
        if shared {
            *slot = Some(unary_node("_copy", e, &format!("{}_grad_copy", v.name))?);
        }
    }
    // A head gradient is used only if some node (or a requested gradient) reads it.
    let mut used: HashSet<*const Node> = HashSet::new();
    let grad_heads: Vec<Arc<Node>> = grads.iter().flatten().map(|e| e.node.clone()).collect();
    for n in topo_order(grad_heads.iter()) {
        if n.is_variable() {
            used.insert(Arc::as_ptr(&n));
        }
    }
    let head_grads = head_grads
        .into_iter()
        .map(|v| used.contains(&Arc::as_ptr(&v)).then_some(v))
        .collect();
    Ok(GradientGraph { head_grads, grads })
}
