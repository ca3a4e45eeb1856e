//! A graph flattened for passes: nodes in topological order, each output an entry id.

use super::{topo_order, Entry, Node};
use std::collections::HashMap;
use std::sync::Arc;

/// Nodes in topological order with numbered entries (MXNet's `node_row_ptr` numbering).
pub struct IndexedGraph {
    /// The nodes, each after its inputs.
    pub nodes: Vec<Arc<Node>>,
    /// The first entry id of each node, and one past the last entry at the end.
    pub entry_base: Vec<usize>,
    /// The entry ids each node reads.
    pub inputs: Vec<Vec<usize>>,
    /// The entry ids of the heads.
    pub outputs: Vec<usize>,
    index: HashMap<usize, usize>,
}

impl IndexedGraph {
    /// Flattens the graph behind `heads`.
    pub fn new(heads: &[Entry]) -> IndexedGraph {
        let nodes = topo_order(heads.iter().map(|e| &e.node));
        let index: HashMap<usize, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (Arc::as_ptr(n) as usize, i))
            .collect();
        let mut entry_base = Vec::with_capacity(nodes.len() + 1);
        let mut next = 0;
        for n in &nodes {
            entry_base.push(next);
            next += n.num_outputs();
        }
        entry_base.push(next);
        let eid = |e: &Entry| entry_base[index[&(Arc::as_ptr(&e.node) as usize)]] + e.index;
        let inputs = nodes
            .iter()
            .map(|n| n.inputs.iter().map(eid).collect())
            .collect();
        let outputs = heads.iter().map(eid).collect();
        IndexedGraph {
            nodes,
            entry_base,
            inputs,
            outputs,
            index,
        }
    }

    /// Number of entries.
    pub fn num_entries(&self) -> usize {
        *self.entry_base.last().unwrap_or(&0)
    }

    /// The entry id of output `index` of node `node`.
    pub fn entry_id(&self, node: usize, index: usize) -> usize {
        self.entry_base[node] + index
    }

    /// The entry ids of node `node`'s outputs.
    pub fn node_entries(&self, node: usize) -> std::ops::Range<usize> {
        self.entry_base[node]..self.entry_base[node + 1]
    }

    /// The position of a node, if it is in the graph.
    pub fn node_index(&self, n: &Arc<Node>) -> Option<usize> {
        self.index.get(&(Arc::as_ptr(n) as usize)).copied()
    }

    /// The entry id of an entry, if its node is in the graph.
    pub fn entry_of(&self, e: &Entry) -> Option<usize> {
        self.node_index(&e.node)
            .map(|i| self.entry_base[i] + e.index)
    }

    /// The node that produces entry `eid`.
    pub fn producer(&self, eid: usize) -> usize {
        self.entry_base.partition_point(|&b| b <= eid) - 1
    }

    /// How many times each entry is read by a node, plus once per head.
    pub fn ref_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.num_entries()];
        for ins in &self.inputs {
            for &e in ins {
                counts[e] += 1;
            }
        }
        for &e in &self.outputs {
            counts[e] += 1;
        }
        counts
    }
}
