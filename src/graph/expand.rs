//! Expands composite operators into the graphs that define them, for execution: the
//! symbol keeps the composite node (and MXNet's JSON), the executor runs its parts.

use super::{Entry, IndexedGraph, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::Src;
use crate::shape::Shape;
use parking_lot::RwLock;
use std::sync::Arc;

/// Attribute of an expanded part: the composite node it belongs to.
pub const MONITOR_PART_OF: &str = "__part_of__";
/// Attribute of an expanded part: which of the composite's outputs it computes, as
/// `{output index}:{output name}={output index of the part}` entries separated by commas.
pub const MONITOR_SHOWN: &str = "__shown_outputs__";

/// One output of a composite as the monitor shows it: its index among the composite's
/// outputs, its name, and which output of the part computes it.
pub type ShownOutput = (usize, String, usize);

/// The monitor's view of an expanded part from its attributes: the composite's name and
/// the outputs it shows; `None` for other nodes.
pub fn monitor_view(node: &Node) -> Option<(String, Vec<ShownOutput>)> {
    let of = node.attr(MONITOR_PART_OF)?;
    let shown = node.attr(MONITOR_SHOWN).unwrap_or_default();
    let entries = shown
        .split(',')
        .filter_map(|p| {
            let (j, rest) = p.split_once(':')?;
            let (name, o) = rest.split_once('=')?;
            Some((j.parse().ok()?, name.to_string(), o.parse().ok()?))
        })
        .collect();
    Some((of, entries))
}

/// True if any node behind `heads` is a composite operator.
pub fn has_composites(g: &IndexedGraph) -> bool {
    g.nodes
        .iter()
        .any(|n| n.op.as_ref().is_some_and(|op| op.as_composite().is_some()))
}

/// The heads of `g` with every composite node replaced by its parts, given every entry's
/// inferred shape and type. Nodes that read no composite output are kept as they are, so
/// variables (and everything else the caller holds) keep their identity.
pub fn expand(
    g: &IndexedGraph,
    shapes: &[Option<Shape>],
    types: &[Option<DType>],
) -> Result<Vec<Entry>> {
    // The entry each old entry id now stands for.
    let mut now: Vec<Option<Entry>> = vec![None; g.num_entries()];
    for (i, node) in g.nodes.iter().enumerate() {
        let inputs: Vec<Entry> = g.inputs[i]
            .iter()
            .map(|&e| now[e].clone().expect("inputs come before their users"))
            .collect();
        let outs = match node.op.as_ref().and_then(|op| op.as_composite()) {
            Some(def) => {
                let known = |what: &str| {
                    Error::Value(format!(
                        "{} (node '{}'): the {what} of its inputs must be known to run it",
                        node.op_name(),
                        node.name
                    ))
                };
                let in_shapes = g.inputs[i]
                    .iter()
                    .map(|&e| shapes[e].clone())
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| known("shapes"))?;
                let in_types = g.inputs[i]
                    .iter()
                    .map(|&e| types[e])
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| known("dtypes"))?;
                let d = def
                    .decompose(&in_shapes, &in_types)
                    .map_err(|e| e.at_node(node.op_name(), &node.name))?;
                parts(node, &inputs, d)
            }
            None => {
                let unchanged =
                    node.inputs.iter().zip(&inputs).all(|(old, new)| {
                        Arc::ptr_eq(&old.node, &new.node) && old.index == new.index
                    });
                let node = if unchanged {
                    node.clone()
                } else {
                    node.with_inputs(inputs)
                };
                (0..node.num_outputs())
                    .map(|index| Entry {
                        node: node.clone(),
                        index,
                    })
                    .collect()
            }
        };
        for (k, e) in g.node_entries(i).zip(outs) {
            now[k] = Some(e);
        }
    }
    Ok(g.outputs
        .iter()
        .map(|&e| now[e].clone().expect("every entry was mapped"))
        .collect())
}

/// The nodes of decomposition `d` of `node` applied to `inputs`; returns its outputs.
/// The step giving the composite's first output takes the node's name, so the monitor and
/// profiler still see `{name}_output`; the others are named after it.
fn parts(node: &Arc<Node>, inputs: &[Entry], d: crate::op::composite::Decomposition) -> Vec<Entry> {
    let named_step = match d.outputs.first() {
        Some(&Src::Step(k, 0)) if d.steps[k].op.num_outputs() == 1 => Some(k),
        _ => None,
    };
    let mut made: Vec<Arc<Node>> = Vec::with_capacity(d.steps.len());
    let entry = |made: &Vec<Arc<Node>>, s: Src| match s {
        Src::Input(i) => inputs[i].clone(),
        Src::Step(k, o) => Entry {
            node: made[k].clone(),
            index: o,
        },
    };
    // Placement and other user attributes (`__ctx_group__`) carry over to the parts.
    let user_attrs: crate::op::Attrs = node
        .attrs
        .read()
        .iter()
        .filter(|(k, _)| k.starts_with("__"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let out_names = node
        .op
        .as_ref()
        .map_or_else(Vec::new, |op| op.output_names());
    let outer = monitor_view(node);
    for (k, step) in d.steps.into_iter().enumerate() {
        // What the monitor shows of this part: the composite's outputs it computes (none
        // for a part inside). A composite that is itself a part shows, through its parts,
        // what it showed.
        let (part_of, shown): (String, Vec<String>) = match &outer {
            None => (
                node.name.clone(),
                d.outputs
                    .iter()
                    .enumerate()
                    .filter_map(|(j, s)| match s {
                        Src::Step(sk, o) if *sk == k => {
                            Some(format!("{j}:{}={o}", out_names.get(j)?))
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            Some((of, outer_shown)) => (
                of.clone(),
                outer_shown
                    .iter()
                    .filter_map(|(j, n, inner)| match d.outputs.get(*inner) {
                        Some(Src::Step(sk, o)) if *sk == k => Some(format!("{j}:{n}={o}")),
                        _ => None,
                    })
                    .collect(),
            ),
        };
        let mut attrs = user_attrs.clone();
        attrs.insert(MONITOR_PART_OF.into(), part_of);
        attrs.insert(MONITOR_SHOWN.into(), shown.join(","));
        let name = if named_step == Some(k) {
            node.name.clone()
        } else {
            format!(
                "{}_{}{k}",
                node.name,
                step.op.name().trim_start_matches('_')
            )
        };
        let ins: Vec<Entry> = step.inputs.iter().map(|&s| entry(&made, s)).collect();
        let input_names = (0..ins.len()).map(|i| format!("arg{i}")).collect();
        made.push(Arc::new(Node {
            name,
            op: Some(step.op),
            attrs: RwLock::new(attrs),
            inputs: ins,
            input_names,
            backward_of: None,
        }));
    }
    d.outputs.iter().map(|&s| entry(&made, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::compose::create;
    use crate::graph::infer::{infer_shapes, infer_types};
    use crate::graph::Symbol;

    fn expanded(sym: &Symbol, data_shape: &[usize]) -> Vec<Entry> {
        let g = IndexedGraph::new(&sym.outputs);
        let mut shapes = vec![None; g.num_entries()];
        let mut types = vec![None; g.num_entries()];
        shapes[0] = Some(Shape::from_slice(data_shape));
        types[0] = Some(DType::F32);
        infer_shapes(&g, &mut shapes).unwrap();
        infer_types(&g, &mut types).unwrap();
        expand(&g, &shapes, &types).unwrap()
    }

    #[test]
    fn composites_are_replaced_by_their_parts_and_the_rest_kept() {
        let data = Symbol::variable("data", Default::default());
        let l2 = create(
            "L2Normalization",
            Default::default(),
            std::slice::from_ref(&data),
            &[],
            "l2",
        )
        .unwrap();
        let act = create("relu", Default::default(), &[l2], &[], "act").unwrap();
        assert!(has_composites(&IndexedGraph::new(&act.outputs)));
        let heads = expanded(&act, &[2, 3]);
        let g = IndexedGraph::new(&heads);
        assert!(!has_composites(&g));
        // The variable is the same node; the reader of the composite is rebuilt, named
        // as before; the parts are named after the composite.
        assert!(Arc::ptr_eq(&g.nodes[0], &data.outputs[0].node));
        assert_eq!(heads[0].node.name, "act");
        assert!(!Arc::ptr_eq(&heads[0].node, &act.outputs[0].node));
        let input = &heads[0].node.inputs[0].node;
        assert_eq!(input.name, "l2");
        assert_eq!(input.op_name(), "broadcast_div");
        assert!(g
            .nodes
            .iter()
            .all(|n| n.is_variable() || n.name.starts_with("l2") || n.name == "act"));
    }

    #[test]
    fn the_step_of_the_first_output_takes_the_composites_name() {
        let data = Symbol::variable("data", Default::default());
        let mut attrs = crate::op::Attrs::new();
        attrs.insert("nsize".into(), "3".into());
        let lrn = create("LRN", attrs, &[data], &[], "lrn").unwrap();
        let heads = expanded(&lrn, &[1, 3, 2, 2]);
        assert_eq!(heads[0].node.name, "lrn");
        let g = IndexedGraph::new(&heads);
        assert!(g.nodes.iter().any(|n| n.name.starts_with("lrn_Pooling")));
        let mut attrs = crate::op::Attrs::new();
        attrs.insert("a".into(), "2".into());
        let data = Symbol::variable("x", Default::default());
        let q = create("_contrib_quadratic", attrs, &[data], &[], "q").unwrap();
        let heads = expanded(&q, &[4]);
        assert_eq!(heads[0].node.name, "q");
        assert_eq!(heads[0].node.op_name(), "_plus_scalar");
    }
}
