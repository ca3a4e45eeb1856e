//! The backward pass over a recorded graph: gradients flow from the heads to the
//! variables, each node's backward operator running on the arrays it saved.

use super::{is_recording, set_recording, Backward, Entry, GradReq, Kind, Meta, Node};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::imperative::{invoke, invoke_into};
use crate::ndarray::{copy, NDArray};
use crate::op::{self, Attrs, Grad, OpRef};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// An array and its place in a graph, if it has one.
pub type Value = (NDArray, Option<Entry>);

/// A head of the backward pass and its gradient (ones when `None`).
pub struct Head {
    /// The head array with its entry.
    pub value: Value,
    /// The gradient flowing into it.
    pub grad: Option<Value>,
}

const NOT_IN_GRAPH: &str = "Cannot differentiate node because it is not in a computational \
     graph. You need to set is_recording to true or use autograd.record() to save \
     computational graphs for backward. If you want to differentiate the same graph twice, \
     you need to pass retain_graph=True to backward.";

type Key = (*const Node, usize);

fn key(e: &Entry) -> Key {
    (Arc::as_ptr(&e.node), e.index)
}

/// Computes the gradients of `heads`. With `variables`, returns the gradient of each
/// (zeros where no head depends on it) and leaves the variables' buffers alone; without,
/// writes into the buffer of every variable the heads depend on, as its `grad_req` says,
/// and returns nothing. `retain_graph` keeps the saved arrays for another pass;
/// `create_graph` records the backward ops, for a gradient of the gradient.
pub fn backward(
    heads: &[Head],
    variables: Option<&[Value]>,
    retain_graph: bool,
    create_graph: bool,
    is_train: bool,
) -> Result<Vec<Value>> {
    let mut head_entries = Vec::with_capacity(heads.len());
    for h in heads {
        match &h.value.1 {
            Some(e) if e.is_live() => head_entries.push(e.clone()),
            _ => return Err(Error::Value(NOT_IN_GRAPH.into())),
        }
    }
    let order = topo_order(&head_entries)?;
    let wanted: Vec<Arc<Node>> = match variables {
        Some(vars) => vars
            .iter()
            .map(|(_, e)| match e {
                Some(e) if matches!(e.node.kind, Kind::Variable { .. }) => Ok(e.node.clone()),
                _ => Err(Error::Value(
                    "autograd.grad: every variable must be marked first (attach_grad or \
                     mark_variables)"
                        .into(),
                )),
            })
            .collect::<Result<_>>()?,
        None => order
            .iter()
            .filter(|n| matches!(n.kind, Kind::Variable { req, .. } if req != GradReq::Null))
            .cloned()
            .collect(),
    };
    if wanted.is_empty() {
        return Err(Error::Value(
            "There are no inputs in computation graph that require gradients.".into(),
        ));
    }
    let prev = set_recording(create_graph);
    let result = Pass::new(&order, &wanted).run(heads, &head_entries, is_train);
    set_recording(prev);
    let grads = result?;
    if !retain_graph {
        for n in &order {
            if let Kind::Op(rec) = &n.kind {
                *rec.lock() = None;
            }
        }
    }
    match variables {
        Some(vars) => vars
            .iter()
            .zip(grads)
            .map(|((v, _), g)| match g {
                Some(g) => Ok(g),
                None => Ok((zeros(&super::meta(v), v.context())?, None)),
            })
            .collect(),
        None => {
            for (n, g) in wanted.iter().zip(grads) {
                let Kind::Variable { grad, req, fresh } = &n.kind else {
                    continue;
                };
                fresh.store(true, std::sync::atomic::Ordering::Relaxed);
                match (req, g) {
                    (GradReq::Write, Some((g, _))) => copy::copy_into(&g, grad)?,
                    (GradReq::Write, None) => copy::fill_zeros(grad),
                    (GradReq::Add, Some((g, _))) => {
                        invoke(
                            &build("elemwise_add", &[])?,
                            &[grad.clone(), g],
                            Some(vec![grad.clone()]),
                            None,
                            is_train,
                        )?;
                    }
                    _ => {}
                }
            }
            Ok(Vec::new())
        }
    }
}

/// The nodes the heads depend on, inputs before the nodes that read them; an error if
/// one was released by an earlier backward pass.
fn topo_order(heads: &[Entry]) -> Result<Vec<Arc<Node>>> {
    let mut order = Vec::new();
    let mut seen: HashSet<*const Node> = HashSet::new();
    // Depth-first, iteratively: (node, its inputs already pushed).
    let mut stack: Vec<(Arc<Node>, bool)> = heads.iter().map(|e| (e.node.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        if !seen.insert(Arc::as_ptr(&n)) {
            continue;
        }
        let inputs: Vec<Arc<Node>> = match &n.kind {
            Kind::Variable { .. } => Vec::new(),
            Kind::Op(rec) => match &*rec.lock() {
                Some(r) => r.inputs.iter().flatten().map(|e| e.node.clone()).collect(),
                None => return Err(Error::Value(NOT_IN_GRAPH.into())),
            },
        };
        stack.push((n, true));
        for i in inputs.into_iter().rev() {
            if !seen.contains(&Arc::as_ptr(&i)) {
                stack.push((i, false));
            }
        }
    }
    Ok(order)
}

/// One backward pass: the pending gradient parts of each entry.
struct Pass<'a> {
    order: &'a [Arc<Node>],
    wanted: &'a [Arc<Node>],
    /// Nodes on a path from a wanted variable.
    depends: HashSet<*const Node>,
    pending: HashMap<Key, Vec<Value>>,
}

impl<'a> Pass<'a> {
    fn new(order: &'a [Arc<Node>], wanted: &'a [Arc<Node>]) -> Pass<'a> {
        let mut depends: HashSet<*const Node> = wanted.iter().map(Arc::as_ptr).collect();
        for n in order {
            let Kind::Op(rec) = &n.kind else { continue };
            let hit = rec.lock().as_ref().is_some_and(|r| {
                r.inputs
                    .iter()
                    .flatten()
                    .any(|e| depends.contains(&Arc::as_ptr(&e.node)))
            });
            if hit {
                depends.insert(Arc::as_ptr(n));
            }
        }
        Pass {
            order,
            wanted,
            depends,
            pending: HashMap::new(),
        }
    }

    /// Runs the pass; the summed gradient of each wanted variable (`None`: none reached it).
    fn run(
        mut self,
        heads: &[Head],
        head_entries: &[Entry],
        is_train: bool,
    ) -> Result<Vec<Option<Value>>> {
        for (h, e) in heads.iter().zip(head_entries) {
            let g = match &h.grad {
                Some(g) => {
                    check_head_grad(&h.value.0, &g.0)?;
                    g.clone()
                }
                None => {
                    let ones = invoke(
                        &build("ones_like", &[])?,
                        std::slice::from_ref(&h.value.0),
                        None,
                        None,
                        false,
                    )?;
                    (ones[0].clone(), None)
                }
            };
            self.pending.entry(key(e)).or_default().push(g);
        }
        for n in self.order.iter().rev() {
            if self.depends.contains(&Arc::as_ptr(n)) {
                self.node(n, is_train)?;
            }
        }
        self.wanted
            .iter()
            .map(|v| {
                let parts = self
                    .pending
                    .remove(&(Arc::as_ptr(v), 0))
                    .unwrap_or_default();
                let ctx = parts.first().map(|(a, _)| a.context());
                match ctx {
                    None => Ok(None),
                    Some(ctx) => sum(parts, ctx, is_train).map(Some),
                }
            })
            .collect()
    }

    /// Sends the gradients of `n`'s outputs on to its inputs.
    fn node(&mut self, n: &Arc<Node>, is_train: bool) -> Result<()> {
        let Kind::Op(rec) = &n.kind else {
            return Ok(());
        };
        let num_outputs = match &*rec.lock() {
            Some(r) => r.out_meta.len(),
            None => return Err(Error::Value(NOT_IN_GRAPH.into())),
        };
        let mut parts: Vec<Vec<Value>> = (0..num_outputs)
            .map(|i| {
                self.pending
                    .remove(&(Arc::as_ptr(n), i))
                    .unwrap_or_default()
            })
            .collect();
        if parts.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let guard = rec.lock();
        let r = guard
            .as_ref()
            .ok_or_else(|| Error::Value(NOT_IN_GRAPH.into()))?;
        let mut ograd = |k: usize| -> Result<Value> {
            let p = std::mem::take(&mut parts[k]);
            if p.is_empty() {
                Ok((zeros(&r.out_meta[k], r.ctx)?, None))
            } else {
                sum(p, r.ctx, is_train)
            }
        };
        // The gradient of each forward input the computation gives.
        let igrads: Vec<(usize, Value)> = match &r.backward {
            Backward::Op { forward, grad } => match grad {
                Grad::Undefined => {
                    return Err(Error::NotImplemented(format!(
                        "operator {} has no gradient",
                        forward.name()
                    )))
                }
                Grad::Zero => Vec::new(),
                Grad::Op(g) => {
                    let mut ins: Vec<Value> = Vec::new();
                    for &k in &g.ograds {
                        ins.push(ograd(k)?);
                    }
                    if let Some(composed) =
                        compose_if_recording(n, r, forward.as_ref(), &g.ograds, &ins, is_train)
                    {
                        composed?
                    } else {
                        let fwd_in = g
                            .inputs
                            .iter()
                            .map(|&i| saved(&r.saved_inputs[i], r.inputs[i].clone()))
                            .collect::<Result<Vec<_>>>()?;
                        let fwd_out = g
                            .outputs
                            .iter()
                            .map(|&o| {
                                saved(
                                    &r.saved_outputs[o],
                                    Some(Entry {
                                        node: n.clone(),
                                        index: o,
                                    }),
                                )
                            })
                            .collect::<Result<Vec<_>>>()?;
                        let ins = g.arrange(ins, fwd_in, fwd_out);
                        let outs =
                            run_backward_op(&g.op, &ins, &g.grad_of, &r.in_meta, r.ctx, is_train)?;
                        let aux = forward.aux_inputs();
                        g.grad_of
                            .iter()
                            .copied()
                            .zip(outs)
                            .filter(|(i, _)| !aux.contains(i))
                            .collect()
                    }
                }
            },
            Backward::Custom(custom) => {
                let ograds = (0..num_outputs)
                    .map(|k| ograd(k).map(|(a, _)| a))
                    .collect::<Result<Vec<_>>>()?;
                let prev = set_recording(false);
                let res = custom.backward(ograds, is_train);
                set_recording(prev);
                let res = res?;
                if res.len() != r.in_meta.len() {
                    return Err(Error::Value(format!(
                        "Function.backward must return as many gradients as forward has \
                         inputs: expected {}, got {}",
                        r.in_meta.len(),
                        res.len()
                    )));
                }
                let mut out = Vec::new();
                for (i, g) in res.into_iter().enumerate() {
                    let Some(g) = g else { continue };
                    if g.shape() != r.in_meta[i].0.as_slice() {
                        return Err(Error::Value(format!(
                            "Function.backward: the gradient of input {i} has shape {} but \
                             the input has shape {}",
                            crate::shape::fmt_shape(g.shape()),
                            crate::shape::fmt_shape(&r.in_meta[i].0)
                        )));
                    }
                    out.push((i, (g, None)));
                }
                out
            }
        };
        for (i, g) in igrads {
            if let Some(e) = &r.inputs[i] {
                if self.depends.contains(&Arc::as_ptr(&e.node)) {
                    self.pending.entry(key(e)).or_default().push(g);
                }
            }
        }
        Ok(())
    }
}

/// While the backward pass is recorded, the gradients of a one-output op written with
/// differentiable operators (see [`super::compose`]), so that they can be differentiated
/// again; `None` where there is no such form.
fn compose_if_recording(
    n: &Arc<Node>,
    r: &super::Recorded,
    forward: &dyn crate::op::Operator,
    ograds: &[usize],
    ins: &[Value],
    is_train: bool,
) -> Option<Result<Vec<(usize, Value)>>> {
    if !is_recording() || ograds != [0] {
        return None;
    }
    let xs: Vec<Option<Value>> = r
        .saved_inputs
        .iter()
        .zip(&r.inputs)
        .map(|(a, e)| a.clone().map(|a| (a, e.clone())))
        .collect();
    let ys: Vec<Option<Value>> = r
        .saved_outputs
        .iter()
        .enumerate()
        .map(|(o, a)| {
            a.clone().map(|a| {
                let e = Entry {
                    node: n.clone(),
                    index: o,
                };
                (a, Some(e))
            })
        })
        .collect();
    super::compose::gradient(forward, &ins[0], &xs, &ys, is_train)
}

/// A saved forward array, with its entry when the backward ops are recorded.
fn saved(a: &Option<NDArray>, entry: Option<Entry>) -> Result<Value> {
    let a = a
        .clone()
        .ok_or_else(|| Error::Runtime("autograd: a saved array is missing".into()))?;
    Ok((a, if is_recording() { entry } else { None }))
}

fn check_head_grad(head: &NDArray, grad: &NDArray) -> Result<()> {
    if head.shape() != grad.shape() || head.context() != grad.context() {
        return Err(Error::Value(format!(
            "backward: the head gradient has shape {} on {} but its head has shape {} on {}",
            crate::shape::fmt_shape(grad.shape()),
            grad.context(),
            crate::shape::fmt_shape(head.shape()),
            head.context()
        )));
    }
    Ok(())
}

/// Runs backward operator `op` on `ins`; its outputs are the gradients of the forward
/// inputs `grad_of`, shaped as `in_meta` says.
fn run_backward_op(
    op: &OpRef,
    ins: &[Value],
    grad_of: &[usize],
    in_meta: &[Meta],
    ctx: Context,
    is_train: bool,
) -> Result<Vec<Value>> {
    // A gradient that is one of its inputs (the backward of a sum) needs no kernel.
    let passed: Vec<Option<usize>> = (0..grad_of.len()).map(|j| op.output_is_input(j)).collect();
    if passed.iter().all(Option::is_some) {
        return Ok(passed
            .into_iter()
            .flatten()
            .map(|k| ins[k].clone())
            .collect());
    }
    let outs = grad_of
        .iter()
        .map(|&i| NDArray::empty_output(&in_meta[i].0, in_meta[i].1, ctx))
        .collect::<Result<Vec<_>>>()?;
    let arrays: Vec<NDArray> = ins.iter().map(|(a, _)| a.clone()).collect();
    let outs = invoke_into(op, &arrays, outs, ctx, is_train)?;
    Ok(recorded(op, ins, outs))
}

/// `outputs` of `op` on `ins`, recorded when the backward pass builds a graph.
fn recorded(op: &OpRef, ins: &[Value], outputs: Vec<NDArray>) -> Vec<Value> {
    let with: Vec<(&NDArray, Option<Entry>)> = ins.iter().map(|(a, e)| (a, e.clone())).collect();
    match super::record_op(op, &with, &outputs) {
        Some(entries) => outputs
            .into_iter()
            .zip(entries)
            .map(|(a, e)| (a, Some(e)))
            .collect(),
        None => outputs.into_iter().map(|a| (a, None)).collect(),
    }
}

/// The sum of gradient parts (the part itself when there is one).
fn sum(mut parts: Vec<Value>, ctx: Context, is_train: bool) -> Result<Value> {
    if parts.len() == 1 {
        return Ok(parts.pop().expect("one part"));
    }
    let n = parts.len().to_string();
    let op = build("add_n", &[("num_args", &n)])?;
    let arrays: Vec<NDArray> = parts.iter().map(|(a, _)| a.clone()).collect();
    let out = invoke(&op, &arrays, None, Some(ctx), is_train)?;
    Ok(recorded(&op, &parts, out).pop().expect("one output"))
}

fn zeros(m: &Meta, ctx: Context) -> Result<NDArray> {
    let a = NDArray::empty(&m.0, m.1, ctx)?;
    copy::fill_zeros(&a);
    Ok(a)
}

fn build(name: &str, attrs: &[(&str, &str)]) -> Result<OpRef> {
    let attrs: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    op::find(name)?.build(&attrs)
}
