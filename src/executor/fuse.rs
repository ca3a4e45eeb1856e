//! Bind-time fusion for executors bound without gradients: a `Convolution` whose output
//! feeds only a `BatchNorm`, then only a residual `elemwise_add`, then only a ReLU (any
//! of the three, in that order) becomes one `_sg_rsmx_conv` node, which applies them to
//! each tile of output while it is in cache. MXNet's oneDNN build fuses the same layers
//! of inference graphs. `MXNET_SUBGRAPH_BACKEND=NONE` (or `RSMX_FUSE=0`) binds the graph
//! as written.

use crate::dtype::DType;
use crate::graph::{Entry, IndexedGraph, Node};
use crate::op::nn::batch_norm::BatchNorm;
use crate::op::nn::convolution::Convolution;
use crate::op::nn::fused_conv::{is_relu, FusedConv, NAME};
use crate::op::OpRef;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// False if the environment turns fusion off.
pub fn enabled() -> bool {
    let off = |k: &str, v: &str| std::env::var(k).is_ok_and(|s| s.eq_ignore_ascii_case(v));
    !(off("MXNET_SUBGRAPH_BACKEND", "NONE") || off("RSMX_FUSE", "0"))
}

/// One fusion found: the convolution, the nodes fused after it, and the residual.
struct Chain {
    conv: usize,
    bn: Option<usize>,
    residual: Option<usize>,
    relu: bool,
    /// The chain's nodes, the convolution first; the fused node's output stands for the
    /// last one's.
    nodes: Vec<usize>,
}

impl Chain {
    fn last(&self) -> usize {
        *self.nodes.last().expect("a chain has its convolution")
    }
}

/// The graph of `g` with every fusable chain fused, or `None` if there is none. `types`
/// are the entries' element types; only float32 and float64 chains are fused.
pub fn fuse(g: &IndexedGraph, types: &[Option<DType>]) -> Option<Vec<Entry>> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.num_entries()];
    for (i, ins) in g.inputs.iter().enumerate() {
        for &e in ins {
            readers[e].push(i);
        }
    }
    for &e in &g.outputs {
        // A head is read from outside: it cannot disappear into a fused node.
        readers[e].push(usize::MAX);
    }
    // The one node that reads entry `e` (and nothing else does).
    let sole = |e: usize| match readers[e].as_slice() {
        [r] if *r != usize::MAX => Some(*r),
        _ => None,
    };
    let op_of = |i: usize| g.nodes[i].op.as_deref();
    let mut chains: Vec<Chain> = Vec::new();
    let mut taken = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let Some(conv) = op_of(i).and_then(|o| o.as_any().downcast_ref::<Convolution>()) else {
            continue;
        };
        let out = g.entry_base[i];
        if taken[i] || !matches!(types[out], Some(DType::F32 | DType::F64)) {
            continue;
        }
        let mut chain = Chain {
            conv: i,
            bn: None,
            residual: None,
            relu: false,
            nodes: vec![i],
        };
        let mut cur = out;
        let nd = conv.args.nd() as i64 + 2;
        if let Some(j) = sole(cur) {
            let bn = op_of(j).and_then(|o| o.as_any().downcast_ref::<BatchNorm>());
            let stats_unread = g.node_entries(j).skip(1).all(|e| readers[e].is_empty());
            if let Some(bn) = bn {
                let channel_axis = bn.axis == 1 || bn.axis == 1 - nd;
                if channel_axis && g.inputs[j][0] == cur && stats_unread {
                    chain.bn = Some(j);
                    (cur, taken[j]) = (g.entry_base[j], true);
                    chain.nodes.push(j);
                }
            }
        }
        if let Some(a) = sole(cur).filter(|&a| !taken[a]) {
            if op_of(a).is_some_and(|o| o.name() == "elemwise_add") {
                if let [x, y] = g.inputs[a][..] {
                    let other = if x == cur { y } else { x };
                    if other != cur && (x == cur || y == cur) {
                        chain.residual = Some(other);
                        (cur, taken[a]) = (g.entry_base[a], true);
                        chain.nodes.push(a);
                    }
                }
            }
        }
        if let Some(r) = sole(cur).filter(|&r| !taken[r]) {
            if op_of(r).is_some_and(|o| is_relu(o) && g.inputs[r].len() == 1) {
                chain.relu = true;
                taken[r] = true;
                chain.nodes.push(r);
            }
        }
        if chain.nodes.len() > 1 {
            taken[i] = true;
            chains.push(chain);
        }
    }
    if chains.is_empty() {
        return None;
    }
    Some(rebuild(g, &chains))
}

/// The graph with each chain's nodes replaced by one fused node.
fn rebuild(g: &IndexedGraph, chains: &[Chain]) -> Vec<Entry> {
    let by_last: HashMap<usize, &Chain> = chains.iter().map(|c| (c.last(), c)).collect();
    let mut inside = vec![false; g.nodes.len()];
    for c in chains {
        for &n in &c.nodes[..c.nodes.len() - 1] {
            inside[n] = true;
        }
    }
    let mut new: Vec<Option<Arc<Node>>> = vec![None; g.nodes.len()];
    let entry = |new: &[Option<Arc<Node>>], e: usize| {
        let p = g.producer(e);
        Entry {
            node: new[p].clone().expect("inputs come first"),
            index: e - g.entry_base[p],
        }
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if node.is_variable() {
            new[i] = Some(node.clone());
            continue;
        }
        if let Some(c) = by_last.get(&i) {
            new[i] = Some(fused_node(g, c, |e| entry(&new, e)));
            continue;
        }
        if inside[i] {
            continue;
        }
        let inputs = g.inputs[i].iter().map(|&e| entry(&new, e)).collect();
        new[i] = Some(node.with_inputs(inputs));
    }
    g.outputs.iter().map(|&e| entry(&new, e)).collect()
}

/// The fused node of chain `c`, reading its inputs through `entry`.
fn fused_node(g: &IndexedGraph, c: &Chain, entry: impl Fn(usize) -> Entry) -> Arc<Node> {
    let conv_node = &g.nodes[c.conv];
    let downcast = |i: usize| g.nodes[i].op.as_ref().map(|o| o.as_any());
    let conv = downcast(c.conv)
        .and_then(|o| o.downcast_ref::<Convolution>())
        .expect("a chain starts at a convolution")
        .clone();
    let bn = c.bn.map(|b| {
        downcast(b)
            .and_then(|o| o.downcast_ref::<BatchNorm>())
            .expect("a chain's BatchNorm")
            .clone()
    });
    let mut inputs: Vec<usize> = g.inputs[c.conv].clone();
    let mut input_names = conv_node.input_names.clone();
    if let Some(b) = c.bn {
        inputs.extend_from_slice(&g.inputs[b][1..]);
        input_names.extend(g.nodes[b].input_names[1..].iter().cloned());
    }
    if let Some(r) = c.residual {
        inputs.push(r);
        input_names.push("residual".into());
    }
    let op: OpRef = Arc::new(FusedConv {
        conv,
        bn,
        residual: c.residual.is_some(),
        relu: c.relu,
    });
    debug_assert_eq!(op.name(), NAME);
    Arc::new(Node {
        name: conv_node.name.clone(),
        op: Some(op),
        attrs: RwLock::new(conv_node.attrs.read().clone()),
        inputs: inputs.into_iter().map(entry).collect(),
        input_names,
        backward_of: None,
    })
}
