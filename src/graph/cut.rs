//! MXNet's subgraph cut (`MXSymbolCutSubgraph`), which the symbolic control-flow
//! operators use: the nodes of a graph marked with one `__subgraph_name__`, with every
//! entry they read from outside replaced by a variable named after that entry.

use super::{node_key, topo_order, Entry, Node, Symbol};
use std::collections::HashMap;
use std::sync::Arc;

/// The attribute marking the nodes a control-flow operator's function made.
pub const SUBGRAPH_NAME: &str = "__subgraph_name__";

/// The subgraph of `sym` whose nodes carry the `__subgraph_name__` of its first output's
/// node, as a new graph (`sym` is left as it is), and the outside entries it read, one
/// symbol each, in the order they were first read. Each outside entry becomes a variable
/// named as the entry's output (`fc1_output`; a variable keeps its name). Without the
/// attribute on the first output's node, nothing is cut.
pub fn cut_subgraph(sym: &Symbol) -> (Symbol, Vec<Symbol>) {
    let Some(name) = sym.outputs.first().and_then(|e| e.node.attr(SUBGRAPH_NAME)) else {
        return (sym.clone(), Vec::new());
    };
    let inside = |n: &Node| n.attr(SUBGRAPH_NAME).as_deref() == Some(name.as_str());
    let mut copies: HashMap<*const Node, Arc<Node>> = HashMap::new();
    let mut cut_vars: HashMap<(*const Node, usize), Arc<Node>> = HashMap::new();
    let mut cut: Vec<Symbol> = Vec::new();
    for node in topo_order(sym.outputs.iter().map(|e| &e.node)) {
        if !inside(&node) {
            continue;
        }
        let inputs = node
            .inputs
            .iter()
            .map(|e| {
                if let Some(copy) = copies.get(&node_key(&e.node)) {
                    return Entry {
                        node: copy.clone(),
                        index: e.index,
                    };
                }
                let var = cut_vars
                    .entry((node_key(&e.node), e.index))
                    .or_insert_with(|| {
                        cut.push(Symbol {
                            outputs: vec![e.clone()],
                        });
                        Node::variable(&e.node.output_name(e.index), Default::default())
                    });
                Entry {
                    node: var.clone(),
                    index: 0,
                }
            })
            .collect();
        let copy = node.with_inputs(inputs);
        copies.insert(node_key(&node), copy);
    }
    let outputs = sym
        .outputs
        .iter()
        .map(|e| match copies.get(&node_key(&e.node)) {
            Some(copy) => Entry {
                node: copy.clone(),
                index: e.index,
            },
            None => e.clone(),
        })
        .collect();
    (Symbol { outputs }, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::compose::create;
    use crate::op::Attrs;

    fn marked(name: &str) -> Attrs {
        [(SUBGRAPH_NAME.to_string(), name.to_string())].into()
    }

    #[test]
    fn outside_entries_become_variables_named_after_them() {
        let outer = Symbol::variable("x", Attrs::new());
        let fc = create("relu", Attrs::new(), &[outer], &[], "act").unwrap();
        let w = Symbol::variable("w", Attrs::new());
        let inner = Symbol::variable("s-0", marked("loop0"));
        let prod = create(
            "elemwise_mul",
            marked("loop0"),
            &[inner, fc.clone()],
            &[],
            "m",
        )
        .unwrap();
        let sum = create("elemwise_add", marked("loop0"), &[prod, w], &[], "a").unwrap();
        let (sub, cut) = cut_subgraph(&sum);
        assert_eq!(sub.list_inputs(), vec!["s-0", "act_output", "w"]);
        let cut_names: Vec<String> = cut.iter().flat_map(|s| s.list_outputs()).collect();
        assert_eq!(cut_names, vec!["act_output", "w"]);
        // The original graph still reads the outside node.
        assert_eq!(sum.list_inputs(), vec!["s-0", "x", "w"]);
    }

    #[test]
    fn a_graph_without_the_mark_is_not_cut() {
        let x = Symbol::variable("x", Attrs::new());
        let y = create("relu", Attrs::new(), &[x], &[], "r").unwrap();
        let (sub, cut) = cut_subgraph(&y);
        assert!(cut.is_empty());
        assert_eq!(sub.list_inputs(), vec!["x"]);
    }
}
