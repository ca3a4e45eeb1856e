//! Binding: the graph passes (gradient, shape and type inference, placement, memory
//! planning) run once, ending in the list of steps forward and backward push.

use super::step::{CopyStep, OpStep, Step};
use super::{bulk_groups, fuse, fuse_backward, Executor};
use crate::context::{Context, DeviceType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::infer::{infer_shapes, infer_types};
use crate::graph::plan::{plan_memory, MemoryPlan};
use crate::graph::{expand, gradient, topo_order, IndexedGraph, Node, Symbol};
use crate::ndarray::NDArray;
use crate::op::{Grad, OpRef, OpReq};
use crate::shape::{fmt_shape, Shape};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What `bind` takes besides the symbol.
pub struct BindArgs {
    /// The default context.
    pub ctx: Context,
    /// Argument arrays, in `list_arguments` order.
    pub args: Vec<NDArray>,
    /// Gradient arrays, one per argument (`None` where the request is `null`).
    pub grads: Vec<Option<NDArray>>,
    /// Gradient requests, one per argument.
    pub grad_reqs: Vec<OpReq>,
    /// Auxiliary state arrays, in `list_auxiliary_states` order.
    pub aux: Vec<NDArray>,
    /// Contexts of the `ctx_group` attribute values.
    pub group2ctx: HashMap<String, Context>,
}

fn check_count(what: &str, names: &[Arc<Node>], got: usize) -> Result<()> {
    if names.len() != got {
        let list: Vec<&str> = names.iter().map(|n| n.name.as_str()).collect();
        return Err(Error::Value(format!(
            "bind: expected {} {what} array(s) ({}), got {got}",
            names.len(),
            list.join(", ")
        )));
    }
    Ok(())
}

/// `sym` with its composite operators expanded into their parts, for the shapes and
/// types of the bound arrays; `sym` itself when it has none.
fn expanded(
    sym: &Symbol,
    arg_nodes: &[Arc<Node>],
    aux_nodes: &[Arc<Node>],
    b: &BindArgs,
) -> Result<Symbol> {
    let mut heads = sym.outputs.clone();
    // A composite's parts may be composites themselves: expand until none is left.
    loop {
        let g = IndexedGraph::new(&heads);
        if !expand::has_composites(&g) {
            return Ok(Symbol { outputs: heads });
        }
        let (shapes, types) = bound_inference(&g, arg_nodes, aux_nodes, b)?;
        heads = expand::expand(&g, &shapes, &types)?;
    }
}

/// The shapes and types of `g`'s entries inferred from the bound arrays.
type Inferred = (Vec<Option<Shape>>, Vec<Option<DType>>);

fn bound_inference(
    g: &IndexedGraph,
    arg_nodes: &[Arc<Node>],
    aux_nodes: &[Arc<Node>],
    b: &BindArgs,
) -> Result<Inferred> {
    let mut shapes: Vec<Option<Shape>> = vec![None; g.num_entries()];
    let mut types: Vec<Option<DType>> = vec![None; g.num_entries()];
    for (node, a) in arg_nodes
        .iter()
        .zip(&b.args)
        .chain(aux_nodes.iter().zip(&b.aux))
    {
        if let Some(i) = g.node_index(node) {
            shapes[g.entry_base[i]] = Some(Shape::from_slice(a.shape()));
            types[g.entry_base[i]] = Some(a.dtype());
        }
    }
    infer_shapes(g, &mut shapes)?;
    infer_types(g, &mut types)?;
    Ok((shapes, types))
}

/// Binds `sym` to arrays. With `shared`, its storage blocks are reused where they are
/// big enough.
pub fn bind(sym: &Symbol, b: BindArgs, shared: Option<&Executor>) -> Result<Executor> {
    let (_, arg_nodes, aux_nodes) = sym.variables();
    check_count("argument", &arg_nodes, b.args.len())?;
    check_count("gradient", &arg_nodes, b.grads.len())?;
    check_count("grad_req", &arg_nodes, b.grad_reqs.len())?;
    check_count("auxiliary state", &aux_nodes, b.aux.len())?;
    for (i, n) in arg_nodes.iter().enumerate() {
        if b.grad_reqs[i] == OpReq::Null {
            continue;
        }
        match &b.grads[i] {
            None => {
                return Err(Error::Value(format!(
                    "bind: argument '{}' has grad_req {:?} but no gradient array",
                    n.name, b.grad_reqs[i]
                )))
            }
            Some(g) if g.shape() != b.args[i].shape() => {
                return Err(Error::Value(format!(
                    "bind: gradient array of '{}' has shape {}, the argument has shape {}",
                    n.name,
                    fmt_shape(g.shape()),
                    fmt_shape(b.args[i].shape())
                )))
            }
            _ => {}
        }
    }

    let mut exec_sym = expanded(sym, &arg_nodes, &aux_nodes, &b)?;
    let wrt: Vec<Arc<Node>> = arg_nodes
        .iter()
        .zip(&b.grad_reqs)
        .filter(|(_, r)| **r != OpReq::Null)
        .map(|(n, _)| n.clone())
        .collect();
    let on_cpu = |c: &Context| c.dev_type == DeviceType::Cpu;
    if wrt.is_empty() && on_cpu(&b.ctx) && b.group2ctx.values().all(on_cpu) && fuse::enabled() {
        let g = IndexedGraph::new(&exec_sym.outputs);
        let (_, types) = bound_inference(&g, &arg_nodes, &aux_nodes, &b)?;
        if let Some(heads) = fuse::fuse(&g, &types) {
            exec_sym = Symbol { outputs: heads };
        }
    }
    let mut grad_graph = if wrt.is_empty() {
        None
    } else {
        Some(gradient::build(&exec_sym.outputs, &wrt)?)
    };
    let mut heads = exec_sym.outputs.clone();
    if let Some(gg) = &mut grad_graph {
        heads.extend(gg.grads.iter().flatten().cloned());
        let cpu_only = on_cpu(&b.ctx) && b.group2ctx.values().all(on_cpu);
        let rewrite = (cpu_only && fuse::enabled())
            .then(|| fuse_backward::fuse(&heads))
            .flatten();
        if let Some(rw) = rewrite {
            heads = heads.iter().map(|e| rw.entry(e)).collect();
            for ge in gg.grads.iter_mut().flatten() {
                *ge = rw.entry(ge);
            }
        }
    }
    let g = IndexedGraph::new(&heads);
    let n_fwd_nodes = topo_order(exec_sym.outputs.iter().map(|e| &e.node)).len();
    let n = g.num_entries();

    // Arrays of the variables.
    let mut arrays: Vec<Option<NDArray>> = vec![None; n];
    for (node, a) in arg_nodes
        .iter()
        .zip(&b.args)
        .chain(aux_nodes.iter().zip(&b.aux))
    {
        if let Some(i) = g.node_index(node) {
            arrays[g.entry_base[i]] = Some(a.clone());
        }
    }

    // Shapes and types.
    let mut shapes: Vec<Option<Shape>> = arrays
        .iter()
        .map(|a| a.as_ref().map(|a| Shape::from_slice(a.shape())))
        .collect();
    let mut types: Vec<Option<DType>> = arrays
        .iter()
        .map(|a| a.as_ref().map(|a| a.dtype()))
        .collect();
    infer_shapes(&g, &mut shapes)?;
    infer_types(&g, &mut types)?;
    let mut head_entries = Vec::new();
    if let Some(gg) = &grad_graph {
        for (k, hv) in gg.head_grads.iter().enumerate() {
            if let Some(v) = hv {
                let i = g
                    .node_index(v)
                    .expect("a used head gradient is in the graph");
                let out = g.outputs[k];
                let e = g.entry_base[i];
                shapes[e] = shapes[out].clone();
                types[e] = types[out];
                head_entries.push((k, e));
            }
        }
        infer_shapes(&g, &mut shapes)?;
        infer_types(&g, &mut types)?;
    }
    for e in 0..n {
        if shapes[e].is_none() || types[e].is_none() {
            let node = &g.nodes[g.producer(e)];
            let what = if shapes[e].is_none() {
                "shape"
            } else {
                "dtype"
            };
            return Err(Error::Value(format!(
                "bind: cannot infer the {what} of '{}' (node '{}', operator {}); give the \
                 shapes of the inputs it depends on",
                node.output_name(e - g.entry_base[g.producer(e)]),
                node.name,
                node.op_name()
            )));
        }
    }

    // A bound array of unknown (0) dimensions does not take the sizes inferred for them.
    for (e, a) in arrays.iter().enumerate() {
        if let (Some(a), Some(s)) = (a, &shapes[e]) {
            if a.shape() != s.as_slice() {
                let node = &g.nodes[g.producer(e)];
                return Err(Error::Value(format!(
                    "bind: the array given for '{}' has shape {}, the graph needs {}",
                    node.name,
                    fmt_shape(a.shape()),
                    fmt_shape(s)
                )));
            }
        }
    }

    // Placement.
    let node_ctx: Vec<Context> = g
        .nodes
        .iter()
        .map(|node| {
            node.attr("__ctx_group__")
                .and_then(|grp| b.group2ctx.get(&grp).copied())
                .unwrap_or(b.ctx)
        })
        .collect();
    let entry_ctx = |e: usize, arrays: &[Option<NDArray>]| -> Context {
        arrays[e]
            .as_ref()
            .map_or(node_ctx[g.producer(e)], |a| a.context())
    };

    // Head gradient and gradient arrays.
    let mut head_grads: Vec<Option<NDArray>> = vec![None; exec_sym.outputs.len()];
    for &(k, e) in &head_entries {
        let out_ctx = entry_ctx(g.outputs[k], &arrays);
        let a = NDArray::empty(shapes[e].as_ref().unwrap(), types[e].unwrap(), out_ctx)?;
        arrays[e] = Some(a.clone());
        head_grads[k] = Some(a);
    }
    let mut grad_req_of_entry: HashMap<usize, OpReq> = HashMap::new();
    let mut zero_grads = Vec::new();
    if let Some(gg) = &grad_graph {
        for (v, ge) in wrt.iter().zip(&gg.grads) {
            let ai = arg_nodes
                .iter()
                .position(|a| Arc::ptr_eq(a, v))
                .expect("a requested variable is an argument");
            let grad = b.grads[ai].clone().expect("checked above");
            match ge {
                Some(ge) => {
                    let e = g.entry_of(ge).expect("gradient entries are heads");
                    if grad.dtype() != types[e].unwrap() {
                        return Err(Error::Type(format!(
                            "bind: gradient array of '{}' has dtype {}, the gradient is {}",
                            v.name,
                            grad.dtype(),
                            types[e].unwrap()
                        )));
                    }
                    arrays[e] = Some(grad);
                    grad_req_of_entry.insert(e, b.grad_reqs[ai]);
                }
                None if b.grad_reqs[ai] == OpReq::Write => zero_grads.push(grad),
                None => {}
            }
        }
    }

    // Outputs of backward nodes that nothing reads (the gradient of the data when only
    // the weights want one), and the optional hidden outputs of forward nodes that no
    // gradient reads (max pooling's index when bound for inference), are not computed:
    // their kernels get a `Null` request and a scratch array.
    let refs = g.ref_counts();
    let optional = |i: usize| {
        g.nodes[i]
            .op
            .as_ref()
            .map_or(&[][..], |op| op.optional_outputs())
    };
    let unused: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| !g.nodes[i].is_variable())
        .flat_map(|i| {
            g.node_entries(i)
                .enumerate()
                .filter(move |(k, _)| i >= n_fwd_nodes || optional(i).contains(k))
                .map(|(_, e)| e)
        })
        .filter(|&e| refs[e] == 0 && arrays[e].is_none())
        .collect();
    let mut null_outputs = std::collections::HashSet::new();
    // One scratch array per device the unread outputs' nodes run on.
    let mut scratch_ctxs: Vec<Context> = unused.iter().map(|&e| node_ctx[g.producer(e)]).collect();
    scratch_ctxs.sort_by_key(|c| (c.dev_type as u8, c.dev_id));
    scratch_ctxs.dedup();
    for ctx in scratch_ctxs {
        let mine: Vec<usize> = unused
            .iter()
            .copied()
            .filter(|&e| node_ctx[g.producer(e)] == ctx)
            .collect();
        let max = mine
            .iter()
            .map(|&e| bytes_of(&shapes, &types, e))
            .max()
            .unwrap_or(0);
        let scratch = NDArray::empty(&[max], DType::U8, ctx)?;
        for e in mine {
            arrays[e] = Some(NDArray::from_chunk(
                scratch.chunk().clone(),
                shapes[e].as_ref().unwrap(),
                types[e].unwrap(),
            )?);
            null_outputs.insert(e);
        }
    }

    // Memory, planned per context.
    let bytes: Vec<usize> = (0..n).map(|e| bytes_of(&shapes, &types, e)).collect();
    let mut contexts: Vec<Context> = node_ctx.clone();
    contexts.sort_by_key(|c| (c.dev_type as i32, c.dev_id));
    contexts.dedup();
    let mut plan = MemoryPlan {
        storage: vec![None; n],
        block_bytes: Vec::new(),
        inplace: vec![false; n],
    };
    let mut block_ctx = Vec::new();
    for &ctx in &contexts {
        let external: Vec<bool> = (0..n)
            .map(|e| arrays[e].is_some() || entry_ctx(e, &arrays) != ctx)
            .collect();
        let p = plan_memory(&g, &bytes, &external);
        let base = plan.block_bytes.len();
        for e in 0..n {
            if let Some(s) = p.storage[e] {
                plan.storage[e] = Some(base + s);
                plan.inplace[e] = p.inplace[e];
            }
        }
        block_ctx.extend(std::iter::repeat_n(ctx, p.block_bytes.len()));
        plan.block_bytes.extend(p.block_bytes);
    }
    let mut blocks = Vec::with_capacity(plan.block_bytes.len());
    for (i, (&size, &ctx)) in plan.block_bytes.iter().zip(&block_ctx).enumerate() {
        let reuse = shared
            .and_then(|s| s.blocks.get(i))
            .filter(|blk| blk.context() == ctx && blk.size() >= size);
        blocks.push(match reuse {
            Some(blk) => blk.clone(),
            None => NDArray::empty(&[size], DType::U8, ctx)?,
        });
    }
    for e in 0..n {
        if let Some(sid) = plan.storage[e] {
            arrays[e] = Some(NDArray::from_chunk(
                blocks[sid].chunk().clone(),
                shapes[e].as_ref().unwrap(),
                types[e].unwrap(),
            )?);
        }
    }

    // Steps.
    let mut steps = Vec::new();
    let mut forward_steps = 0;
    let mut instances: HashMap<*const Node, OpRef> = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let Some(op) = &node.op else { continue };
        let ctx = node_ctx[i];
        let op = node_instance(node, op, ctx, &g.inputs[i], &shapes, &types, &mut instances)?;
        let mut inputs = Vec::with_capacity(g.inputs[i].len());
        for &e in &g.inputs[i] {
            let a = arrays[e].clone().expect("every entry has an array");
            if a.context() == ctx {
                inputs.push(a);
            } else {
                let local = NDArray::empty(a.shape(), a.dtype(), ctx)?;
                steps.push(Step::Copy(CopyStep {
                    src: a,
                    dst: local.clone(),
                }));
                inputs.push(local);
            }
        }
        let outputs: Vec<NDArray> = g
            .node_entries(i)
            .map(|e| arrays[e].clone().expect("every entry has an array"))
            .collect();
        let req: Vec<OpReq> = g
            .node_entries(i)
            .map(|e| match grad_req_of_entry.get(&e) {
                _ if null_outputs.contains(&e) => OpReq::Null,
                Some(r) => *r,
                None if plan.inplace[e] => OpReq::WriteInplace,
                None => OpReq::Write,
            })
            .collect();
        let mut step = OpStep::new(node.name.clone(), op, inputs, outputs, req, ctx)?;
        step.monitor_view = expand::monitor_view(node);
        steps.push(Step::Op(Arc::new(step)));
        if i < n_fwd_nodes {
            forward_steps = steps.len();
        }
    }
    let mut groups = bulk_groups(&steps, 0..forward_steps);
    let forward_groups = groups.len();
    groups.extend(bulk_groups(&steps, forward_steps..steps.len()));

    let outputs = g
        .outputs
        .iter()
        .take(exec_sym.outputs.len())
        .map(|&e| arrays[e].clone().expect("outputs have arrays"))
        .collect();
    Ok(Executor {
        plan,
        blocks,
        steps,
        forward_steps,
        groups,
        forward_groups,
        args: b.args,
        grads: b.grads,
        grad_reqs: b.grad_reqs,
        aux: b.aux,
        outputs,
        output_names: sym.list_outputs(),
        head_grads,
        zero_grads,
        forward_done: AtomicBool::new(false),
        pacer: super::pace::Pacer::new(),
        graph: g,
    })
}

fn bytes_of(shapes: &[Option<Shape>], types: &[Option<DType>], e: usize) -> usize {
    shapes[e]
        .as_ref()
        .map_or(0, |s| s.iter().product::<usize>())
        * types[e].map_or(0, |t| t.size())
}

/// The operator a node's step runs. A stateful operator (a custom op) gets an instance of
/// its own for this executor, made from its inputs' shapes and types, and its backward
/// node the gradient operator of that instance, so the two share the state.
fn node_instance(
    node: &Arc<Node>,
    op: &OpRef,
    ctx: Context,
    inputs: &[usize],
    shapes: &[Option<Shape>],
    types: &[Option<DType>],
    instances: &mut HashMap<*const Node, OpRef>,
) -> Result<OpRef> {
    if let Some(b) = &node.backward_of {
        if let Some(fwd) = instances.get(&Arc::as_ptr(&b.forward)) {
            if let Grad::Op(g) = fwd.gradient() {
                return Ok(g.op);
            }
        }
        return Ok(op.clone());
    }
    let in_shapes: Vec<Shape> = inputs.iter().filter_map(|&e| shapes[e].clone()).collect();
    let in_types: Vec<DType> = inputs.iter().filter_map(|&e| types[e]).collect();
    match op
        .instantiate(ctx, &in_shapes, &in_types)
        .map_err(|e| e.at_node(op.name(), &node.name))?
    {
        Some(inst) => {
            instances.insert(Arc::as_ptr(node), inst.clone());
            Ok(inst)
        }
        None => Ok(op.clone()),
    }
}
