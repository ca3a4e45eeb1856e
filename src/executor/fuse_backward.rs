//! Bind-time fusion for executors bound with gradients on the CPU: a ReLU's backward
//! (`_backward_Activation`, relu) whose gradient only a `_backward_BatchNorm` reads is
//! computed inside that node (`_backward_rsmx_bn_relu`), which saves writing and reading
//! back one array the size of the activation per layer. The forward graph is not touched,
//! so outputs, the monitor and the gradients' values are those of the graph as written.
//! Off with fusion (`MXNET_SUBGRAPH_BACKEND=NONE` or `RSMX_FUSE=0`).

use crate::graph::{BackwardOf, Entry, IndexedGraph, Node};
use crate::op::nn::activation::{Act, ActivationBackward};
use crate::op::nn::batch_norm::{BatchNormBackward, BatchNormReluBackward};
use crate::op::OpRef;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// The nodes a fusion replaced, old node to new; every entry of the graph it was made
/// from reads through [`Rewrite::entry`].
pub struct Rewrite {
    new: HashMap<*const Node, Arc<Node>>,
}

impl Rewrite {
    /// Entry `e` of the graph before the rewrite, in the graph after it.
    pub fn entry(&self, e: &Entry) -> Entry {
        match self.new.get(&Arc::as_ptr(&e.node)) {
            Some(n) => Entry {
                node: n.clone(),
                index: e.index,
            },
            None => e.clone(),
        }
    }
}

/// The graph of `roots` (the forward outputs and the gradients) with every ReLU backward
/// fused into the BatchNorm backward that alone reads it, or `None` if there is none.
/// Nodes that neither are fused nor read a fused node's output stay the same nodes, so
/// that backward nodes still name their forward nodes.
pub fn fuse(roots: &[Entry]) -> Option<Rewrite> {
    let g = IndexedGraph::new(roots);
    let mut readers = g.ref_counts();
    for r in roots {
        if let Some(e) = g.entry_of(r) {
            readers[e] += 1;
        }
    }
    let mut rw = Rewrite {
        new: HashMap::new(),
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if node.is_variable() {
            continue;
        }
        let remap = |es: &[Entry]| es.iter().map(|e| rw.entry(e)).collect::<Vec<_>>();
        let replaced = match relu_below(&g, i, &readers) {
            Some(relu) => {
                let inputs = [remap(&relu.inputs), remap(&node.inputs[1..])].concat();
                Some(fused_node(node, inputs))
            }
            None if node
                .inputs
                .iter()
                .any(|e| rw.new.contains_key(&Arc::as_ptr(&e.node))) =>
            {
                Some(same_with_inputs(node, remap(&node.inputs)))
            }
            None => None,
        };
        if let Some(n) = replaced {
            rw.new.insert(Arc::as_ptr(node), n);
        }
    }
    (!rw.new.is_empty()).then_some(rw)
}

/// For node `i`, a `_backward_BatchNorm` whose output gradient is a ReLU backward's
/// output that nothing else reads, that ReLU backward node.
fn relu_below<'g>(g: &'g IndexedGraph, i: usize, readers: &[usize]) -> Option<&'g Arc<Node>> {
    let node = &g.nodes[i];
    let op = node.op.as_deref()?;
    op.as_any().downcast_ref::<BatchNormBackward>()?;
    let dy = g.inputs[i][0];
    if readers[dy] != 1 {
        return None;
    }
    let p = g.producer(dy);
    let relu = &g.nodes[p];
    let act = relu
        .op
        .as_deref()?
        .as_any()
        .downcast_ref::<ActivationBackward>()?;
    (act.0 == Act::Relu && relu.inputs.len() == 2 && g.node_entries(p).len() == 1).then_some(relu)
}

/// The fused node standing for `bn_backward`, reading `inputs` (the ReLU's output
/// gradient and output, then `bn_backward`'s inputs after its first).
fn fused_node(bn_backward: &Node, inputs: Vec<Entry>) -> Arc<Node> {
    let fwd = bn_backward
        .op
        .as_deref()
        .and_then(|o| o.as_any().downcast_ref::<BatchNormBackward>())
        .expect("a fused node replaces a BatchNorm backward")
        .fwd
        .clone();
    let op: OpRef = Arc::new(BatchNormReluBackward { fwd });
    let mut input_names = vec!["relu_ograd".to_string(), "relu_output".to_string()];
    input_names.extend(bn_backward.input_names.iter().skip(1).cloned());
    Arc::new(Node {
        name: bn_backward.name.clone(),
        op: Some(op),
        attrs: RwLock::new(bn_backward.attrs.read().clone()),
        inputs,
        input_names,
        backward_of: link(bn_backward),
    })
}

/// `node` reading `inputs`, still linked to its forward node.
fn same_with_inputs(node: &Node, inputs: Vec<Entry>) -> Arc<Node> {
    Arc::new(Node {
        name: node.name.clone(),
        op: node.op.clone(),
        attrs: RwLock::new(node.attrs.read().clone()),
        inputs,
        input_names: node.input_names.clone(),
        backward_of: link(node),
    })
}

/// A copy of `node`'s link to its forward node.
fn link(node: &Node) -> Option<BackwardOf> {
    node.backward_of.as_ref().map(|b| BackwardOf {
        forward: b.forward.clone(),
        ograds: b.ograds.clone(),
        grad_of: b.grad_of.clone(),
    })
}
