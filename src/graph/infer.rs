//! Shape and type inference over a whole graph: each operator's partial inference run
//! forwards and backwards until nothing changes.

use super::{IndexedGraph, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::params::parse_tuple;
use crate::op::Operator;
use crate::shape::{is_partial, known_dims, unify, with_zero_meaning, zero_is_unknown, Shape};

/// Passes over the graph before giving up on reaching a fixed point.
const MAX_PASSES: usize = 16;

/// The shape a variable declares through `__shape__`. While 0 means an unknown size, so
/// do 0 and -1 there: `(0, 4)` is a partly known shape of two dimensions.
pub fn declared_shape(attr: Option<String>) -> Option<Shape> {
    let dims = parse_tuple(&attr?)??;
    let unknown = zero_is_unknown();
    if dims.iter().any(|&d| d < 0) && !unknown {
        return None;
    }
    Some(dims.iter().map(|&d| d.max(0) as usize).collect())
}

/// Whether a variable's declared `__shape__` leaves some size unknown (-1).
pub fn declares_unknown_size(attr: Option<String>) -> bool {
    attr.and_then(|a| parse_tuple(&a).flatten())
        .is_some_and(|dims| dims.iter().any(|&d| d < 0))
}

/// What the passes know of one slot's value, which a pass may only add to.
pub trait Knowledge: Clone + PartialEq {
    /// How much is known.
    fn amount(&self) -> usize;
    /// Whether nothing is left to learn.
    fn complete(&self) -> bool;
    /// Whether `new` knows more than `self` without contradicting it.
    fn refined_by(&self, new: &Self) -> bool;
}

impl Knowledge for Shape {
    fn amount(&self) -> usize {
        known_dims(self)
    }
    fn complete(&self) -> bool {
        !is_partial(self)
    }
    fn refined_by(&self, new: &Self) -> bool {
        self != new && unify(self, new).as_ref() == Some(new)
    }
}

impl Knowledge for DType {
    fn amount(&self) -> usize {
        1
    }
    fn complete(&self) -> bool {
        true
    }
    fn refined_by(&self, _new: &Self) -> bool {
        false
    }
}

fn known_amount<T: Knowledge>(slots: &[Option<T>]) -> usize {
    slots.iter().flatten().map(Knowledge::amount).sum()
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
fn run_passes<T: Knowledge>(
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
        let before = known_amount(slots);
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
        let done = slots
            .iter()
            .all(|s| s.as_ref().is_some_and(Knowledge::complete));
        if done || (pass > 0 && known_amount(slots) == before) {
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

fn merge<T: Knowledge>(slot: &mut Option<T>, v: Option<T>) {
    match (slot.as_ref(), &v) {
        (None, _) => *slot = v,
        (Some(have), Some(new)) if have.refined_by(new) => *slot = v,
        _ => {}
    }
}

/// Infers every entry's shape from the known ones in `shapes` (indexed by entry id).
/// Dimensions of 0 are unknown sizes there, as in MXNet's legacy shape semantics.
pub fn infer_shapes(g: &IndexedGraph, shapes: &mut [Option<Shape>]) -> Result<()> {
    infer_shapes_reading_zero(g, shapes, true)
}

/// [`infer_shapes`], with dimensions of 0 unknown sizes (`zero_is_unknown`) or empty axes.
pub fn infer_shapes_reading_zero(
    g: &IndexedGraph,
    shapes: &mut [Option<Shape>],
    zero_is_unknown: bool,
) -> Result<()> {
    with_zero_meaning(zero_is_unknown, || {
        run_passes(g, shapes, "__shape__", declared_shape, |op, ins, outs| {
            op.infer_shape_partial(ins, outs)
        })
    })
}

/// Infers every entry's dtype from the known ones in `types` (indexed by entry id).
pub fn infer_types(g: &IndexedGraph, types: &mut [Option<DType>]) -> Result<()> {
    run_passes(g, types, "__dtype__", declared_dtype, |op, ins, outs| {
        op.infer_type_partial(ins, outs)
    })
}
