//! Shape and type inference over a whole graph: each operator's partial inference run
//! forwards and backwards until nothing changes.

use super::{IndexedGraph, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::params::parse_tuple;
use crate::op::Operator;
use crate::shape::Shape;

/// Passes over the graph before giving up on reaching a fixed point.
const MAX_PASSES: usize = 8;

/// The shape a variable declares through `__shape__` (dimensions of 0 are unknown, so
/// such a shape counts as not given).
pub fn declared_shape(attr: Option<String>) -> Option<Shape> {
    let dims = parse_tuple(&attr?)??;
    if dims.iter().any(|&d| d <= 0) {
        return None;
    }
    Some(dims.iter().map(|&d| d as usize).collect())
}

/// The dtype a variable declares through `__dtype__`.
pub fn declared_dtype(attr: Option<String>) -> Option<DType> {
    let flag = attr?.trim().parse::<i32>().ok()?;
    DType::from_flag(flag).ok()
}

fn in_operator(node: &Node, e: Error) -> Error {
    match &node.op {
        Some(op) => e.at_node(op.name(), &node.name),
        None => e,
    }
}

/// Generic fixed-point driver: variables without a slot take what their attribute `attr`
/// declares (read by `declared`), then `step(op, inputs, outputs)` refines
/// each operator node's slots.
fn run_passes<T: Clone + PartialEq>(
    g: &IndexedGraph,
    slots: &mut [Option<T>],
    attr: &str,
    declared: fn(Option<String>) -> Option<T>,
    step: impl Fn(&dyn Operator, &mut [Option<T>], &mut [Option<T>]) -> Result<()>,
) -> Result<()> {
    for (i, n) in g.nodes.iter().enumerate() {
        if n.is_variable() && slots[g.entry_base[i]].is_none() {
            slots[g.entry_base[i]] = declared(n.attr(attr));
        }
    }
    let n = g.nodes.len();
    for pass in 0..MAX_PASSES {
        let before = slots.iter().filter(|s| s.is_some()).count();
        let order: Box<dyn Iterator<Item = usize>> = if pass % 2 == 0 {
            Box::new(0..n)
        } else {
            Box::new((0..n).rev())
        };
        for i in order {
            let node = &g.nodes[i];
            let Some(op) = &node.op else {
                continue;
            };
            let mut ins: Vec<Option<T>> = g.inputs[i].iter().map(|&e| slots[e].clone()).collect();
            let range = g.node_entries(i);
            let mut outs: Vec<Option<T>> = slots[range.clone()].to_vec();
            if link_backward(g, node, slots, &mut ins, &mut outs) {
                step(op.as_ref(), &mut ins, &mut outs).map_err(|e| in_operator(node, e))?;
            }
            for (&e, v) in g.inputs[i].iter().zip(ins) {
                merge(&mut slots[e], v);
            }
            for (e, v) in range.zip(outs) {
                merge(&mut slots[e], v);
            }
        }
        let after = slots.iter().filter(|s| s.is_some()).count();
        if after == slots.len() || (pass > 0 && after == before) {
            break;
        }
    }
    Ok(())
}

/// Gives a backward node's output gradients and input gradients the slots of the
/// forward entries they stand for (an index's gradient keeps the index's dtype, a
/// `softmax(dtype=...)` data gradient the data's). False while some of them are unknown:
/// the operator's own inference would guess them from its other inputs.
fn link_backward<T: Clone>(
    g: &IndexedGraph,
    node: &Node,
    slots: &[Option<T>],
    ins: &mut [Option<T>],
    outs: &mut [Option<T>],
) -> bool {
    let Some(link) = &node.backward_of else {
        return true;
    };
    let Some(f) = g.node_index(&link.forward) else {
        return true;
    };
    let mut known = true;
    for (slot, &o) in ins.iter_mut().zip(&link.ograds) {
        if slot.is_none() {
            *slot = slots[g.entry_base[f] + o].clone();
        }
        known &= slot.is_some();
    }
    for (slot, &k) in outs.iter_mut().zip(&link.grad_of) {
        if slot.is_none() {
            *slot = slots[g.inputs[f][k]].clone();
        }
        known &= slot.is_some();
    }
    known
}

fn merge<T>(slot: &mut Option<T>, v: Option<T>) {
    if slot.is_none() {
        *slot = v;
    }
}

/// Infers every entry's shape from the known ones in `shapes` (indexed by entry id).
pub fn infer_shapes(g: &IndexedGraph, shapes: &mut [Option<Shape>]) -> Result<()> {
    run_passes(g, shapes, "__shape__", declared_shape, |op, ins, outs| {
        op.infer_shape_partial(ins, outs)
    })
}

/// Infers every entry's dtype from the known ones in `types` (indexed by entry id).
pub fn infer_types(g: &IndexedGraph, types: &mut [Option<DType>]) -> Result<()> {
    run_passes(g, types, "__dtype__", declared_dtype, |op, ins, outs| {
        op.infer_type_partial(ins, outs)
    })
}
