//! Imperative invocation (`mx.nd.<op>`): infer shapes and types now, allocate the
//! outputs, find the kernel for the device and push it to the engine.

use crate::context::Context;
use crate::engine::{self, FnProperty, PushSpec, Var};
use crate::error::{Error, Result};
use crate::kernels::{call_kernel, kernel_for, KernelFn};
use crate::ndarray::{NDArray, TBlob};
use crate::op::resource::rng_resource;
use crate::op::{AsyncCall, OpContext, OpRef, OpReq};
use crate::shape::{fmt_shape, Shape};
use smallvec::SmallVec;

/// The context an op runs on: its inputs' (which must agree), else `default`.
pub fn common_context(op: &str, inputs: &[NDArray], default: Option<Context>) -> Result<Context> {
    let Some(first) = inputs.first() else {
        return Ok(default.unwrap_or(Context::cpu(0)));
    };
    let ctx = first.context();
    if let Some(other) = inputs.iter().find(|a| a.context() != ctx) {
        return Err(Error::Value(format!(
            "{op}: all inputs must be on the same context, got {ctx} and {}",
            other.context()
        )));
    }
    Ok(ctx)
}

/// Runs `op` on `inputs`, writing into `out` if given, else into new arrays; returns the
/// outputs at once while the kernel runs on the engine.
pub fn invoke(
    op: &OpRef,
    inputs: &[NDArray],
    out: Option<Vec<NDArray>>,
    ctx: Option<Context>,
    is_train: bool,
) -> Result<Vec<NDArray>> {
    invoke_at(op, inputs, out, ctx, is_train, 0)
}

/// As [`invoke`], pushing the kernel with an engine `priority` (KVStore updates).
pub fn invoke_at(
    op: &OpRef,
    inputs: &[NDArray],
    out: Option<Vec<NDArray>>,
    ctx: Option<Context>,
    is_train: bool,
    priority: i32,
) -> Result<Vec<NDArray>> {
    invoke_with(op, inputs, out, ctx, is_train, priority, false)
}

/// As [`invoke`], for a caller that reads only the visible outputs and records no
/// gradient: hidden outputs that only a gradient reads (max pooling's index) are left
/// uncomputed.
pub fn invoke_visible(
    op: &OpRef,
    inputs: &[NDArray],
    out: Option<Vec<NDArray>>,
    ctx: Option<Context>,
    is_train: bool,
) -> Result<Vec<NDArray>> {
    invoke_with(op, inputs, out, ctx, is_train, 0, true)
}

fn invoke_with(
    op: &OpRef,
    inputs: &[NDArray],
    out: Option<Vec<NDArray>>,
    ctx: Option<Context>,
    is_train: bool,
    priority: i32,
    skip_optional: bool,
) -> Result<Vec<NDArray>> {
    let name = op.name();
    let ctx = common_context(name, inputs, ctx).map_err(|e| e.in_op(name))?;
    let kernel = kernel_unless_async(op, ctx)?;
    let in_shapes: SmallVec<[Shape; 4]> = inputs
        .iter()
        .map(|a| Shape::from_slice(a.shape()))
        .collect();
    let in_types: SmallVec<[crate::dtype::DType; 4]> = inputs.iter().map(|a| a.dtype()).collect();
    let out_shapes = op.infer_shape(&in_shapes).map_err(|e| e.in_op(name))?;
    let out_types = op.infer_type(&in_types).map_err(|e| e.in_op(name))?;
    let outputs = match out {
        Some(mut outs) => {
            // Hidden outputs are not the caller's to give.
            if outs.len() == op.num_visible_outputs() && outs.len() < out_shapes.len() {
                for (s, t) in out_shapes[outs.len()..]
                    .iter()
                    .zip(&out_types[outs.len()..])
                {
                    outs.push(NDArray::empty(s, *t, ctx)?);
                }
            }
            check_outputs(name, &outs, &out_shapes, &out_types, ctx).map_err(|e| e.in_op(name))?;
            outs
        }
        None => out_shapes
            .iter()
            .zip(&out_types)
            .map(|(s, t)| NDArray::empty_output(s, *t, ctx))
            .collect::<Result<Vec<_>>>()?,
    };
    let skip = if skip_optional {
        op.optional_outputs()
    } else {
        &[]
    };
    push_kernel(
        op.clone(),
        kernel,
        inputs,
        (&outputs, skip),
        ctx,
        is_train,
        priority,
    );
    Ok(outputs)
}

/// Runs `op` on `inputs` into `outputs`, whose shapes and dtypes are known beforehand (a
/// backward operator's gradients take their forward inputs'): inference checks them, and
/// fills in only what the operator cannot tell from its inputs alone.
pub fn invoke_into(
    op: &OpRef,
    inputs: &[NDArray],
    outputs: Vec<NDArray>,
    ctx: Context,
    is_train: bool,
) -> Result<Vec<NDArray>> {
    let name = op.name();
    let kernel = kernel_unless_async(op, ctx)?;
    let mut in_shapes: Vec<Option<Shape>> = inputs
        .iter()
        .map(|a| Some(Shape::from_slice(a.shape())))
        .collect();
    let mut out_shapes: Vec<Option<Shape>> = outputs
        .iter()
        .map(|a| Some(Shape::from_slice(a.shape())))
        .collect();
    op.infer_shape_partial(&mut in_shapes, &mut out_shapes)
        .map_err(|e| e.in_op(name))?;
    let mut in_types: Vec<Option<crate::dtype::DType>> =
        inputs.iter().map(|a| Some(a.dtype())).collect();
    let mut out_types: Vec<Option<crate::dtype::DType>> =
        outputs.iter().map(|a| Some(a.dtype())).collect();
    op.infer_type_partial(&mut in_types, &mut out_types)
        .map_err(|e| e.in_op(name))?;
    let shapes: Vec<Shape> = out_shapes.into_iter().flatten().collect();
    let types: Vec<_> = out_types.into_iter().flatten().collect();
    check_outputs(name, &outputs, &shapes, &types, ctx).map_err(|e| e.in_op(name))?;
    push_kernel(
        op.clone(),
        kernel,
        inputs,
        (&outputs, &[]),
        ctx,
        is_train,
        0,
    );
    Ok(outputs)
}

fn check_outputs(
    op: &str,
    outs: &[NDArray],
    shapes: &[Shape],
    types: &[crate::dtype::DType],
    ctx: Context,
) -> Result<()> {
    if outs.len() != shapes.len() {
        return Err(Error::Value(format!(
            "{op}: expected {} output array(s), got {}",
            shapes.len(),
            outs.len()
        )));
    }
    for (i, ((o, s), t)) in outs.iter().zip(shapes).zip(types).enumerate() {
        if o.shape() != s.as_slice() {
            return Err(Error::Value(format!(
                "{op}: output {i} has shape {} but the result has shape {}",
                fmt_shape(o.shape()),
                fmt_shape(s)
            )));
        }
        if o.dtype() != *t {
            return Err(Error::Type(format!(
                "{op}: output {i} has dtype {} but the result has dtype {t}",
                o.dtype()
            )));
        }
        if o.context() != ctx {
            return Err(Error::Value(format!(
                "{op}: output {i} is on {} but the inputs are on {ctx}",
                o.context()
            )));
        }
    }
    Ok(())
}

/// The kernel of `op` on `ctx`; `None` for an asynchronous operator, which has none.
fn kernel_unless_async(op: &OpRef, ctx: Context) -> Result<Option<KernelFn>> {
    if op.as_async().is_some() {
        return Ok(None);
    }
    kernel_for(op.as_ref(), ctx).map(Some)
}

/// The operator to run on `inputs`: for a stateful one (a custom operator), an instance
/// of its own for this call; otherwise `op` itself.
pub fn instantiate(op: &OpRef, inputs: &[NDArray], ctx: Option<Context>) -> Result<OpRef> {
    let ctx = common_context(op.name(), inputs, ctx)?;
    let shapes: Vec<Shape> = inputs
        .iter()
        .map(|a| Shape::from_slice(a.shape()))
        .collect();
    let types: Vec<crate::dtype::DType> = inputs.iter().map(|a| a.dtype()).collect();
    Ok(op
        .instantiate(ctx, &shapes, &types)
        .map_err(|e| e.in_op(op.name()))?
        .unwrap_or_else(|| op.clone()))
}

/// Pushes `kernel` of `op` (or, without one, the asynchronous operator `op`) with the
/// arrays' variables as dependencies and `priority`; the outputs numbered in `skip` get a
/// `Null` request.
fn push_kernel(
    op: OpRef,
    kernel: Option<KernelFn>,
    inputs: &[NDArray],
    (outputs, skip): (&[NDArray], &[usize]),
    ctx: Context,
    is_train: bool,
    priority: i32,
) {
    let in_blobs: SmallVec<[TBlob; 4]> = inputs.iter().map(|a| a.blob()).collect();
    let out_blobs: SmallVec<[TBlob; 2]> = outputs.iter().map(|a| a.blob()).collect();
    let req: SmallVec<[OpReq; 2]> = outputs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            if skip.contains(&k) {
                OpReq::Null
            } else if inputs.iter().any(|i| i.overlaps(o)) {
                OpReq::WriteInplace
            } else {
                OpReq::Write
            }
        })
        .collect();
    // Auxiliary inputs (an optimizer's momentum, BatchNorm's moving statistics) are
    // written by the kernel, so later readers must wait for it: they are mutable
    // variables, not read ones (the engine drops the read entry of a written var).
    let aux = op.aux_inputs();
    let const_vars: SmallVec<[Var; 4]> = inputs
        .iter()
        .enumerate()
        .filter(|(i, _)| !aux.contains(i))
        .map(|(_, a)| a.var().clone())
        .collect();
    let mut mutable_vars: SmallVec<[Var; 2]> = outputs
        .iter()
        .chain(aux.iter().filter_map(|&i| inputs.get(i)))
        .map(|a| a.var().clone())
        .collect();
    let rng = if op.needs_rng() {
        let r = rng_resource(ctx);
        mutable_vars.push(r.var().clone());
        Some(r)
    } else {
        None
    };
    let name = op.name();
    let Some(kernel) = kernel else {
        let call_inputs = inputs.iter().map(|a| (a.blob(), a.var().clone())).collect();
        let call_outputs = outputs
            .iter()
            .map(|a| (a.blob(), a.var().clone()))
            .collect();
        let req = req.to_vec();
        engine::get().push_async(
            Box::new(move |rctx, done| {
                let call = AsyncCall {
                    is_train,
                    ctx,
                    stream: rctx.stream,
                    inputs: call_inputs,
                    outputs: call_outputs,
                    req,
                };
                match op.as_async() {
                    Some(a) => a.start(call, done),
                    None => done.done(Err(Error::Runtime(format!("{name}: not asynchronous")))),
                }
            }),
            PushSpec::new(name, ctx, &const_vars, &mutable_vars)
                .priority(priority)
                .prop(FnProperty::Async),
        );
        return;
    };
    engine::get().push_sync(
        Box::new(move |rctx| {
            let mut guard = rng.map(|r| r.lock());
            let mut octx = OpContext {
                is_train,
                device: ctx,
                rng: guard.as_deref_mut().map(|g| g.as_mut()),
                stream: rctx.stream,
                node: None,
            };
            call_kernel(kernel, op.as_ref(), &mut octx, &in_blobs, &out_blobs, &req)
                .map_err(|e| e.in_op(name))
        }),
        PushSpec::new(name, ctx, &const_vars, &mutable_vars).priority(priority),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::testutil::{f32a, f32s};
    use crate::op::{find, Attrs};

    fn build(name: &str) -> OpRef {
        find(name).unwrap().build(&Attrs::new()).unwrap()
    }

    /// Runs `op` on `inputs` with `out` as its output.
    fn run_into(op: &OpRef, inputs: &[NDArray], out: &NDArray) {
        invoke(op, inputs, Some(vec![out.clone()]), None, false).unwrap();
    }

    #[test]
    fn writing_over_an_input_is_in_place_and_sound() {
        // The borrow check runs in debug builds: a kernel that read and wrote the same
        // bytes through two slices would fail here.
        for (name, want) in [("relu", vec![0.0, 2.0]), ("square", vec![1.0, 4.0])] {
            let a = f32a(&[2], &[-1.0, 2.0]);
            run_into(&build(name), std::slice::from_ref(&a), &a);
            assert_eq!(f32s(&a), want, "{name}");
        }
        let a = f32a(&[2], &[1.0, 2.0]);
        let b = f32a(&[2], &[3.0, 4.0]);
        run_into(&build("elemwise_add"), &[a.clone(), b], &a);
        assert_eq!(f32s(&a), vec![4.0, 6.0]);
        // The output is the second operand, the first one broadcast.
        let r = f32a(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let c = f32a(&[2], &[10.0, 20.0]);
        run_into(&build("broadcast_sub"), &[c, r.clone()], &r);
        assert_eq!(f32s(&r), vec![9.0, 18.0, 7.0, 16.0]);
        // Both operands are the output.
        run_into(&build("elemwise_mul"), &[r.clone(), r.clone()], &r);
        assert_eq!(f32s(&r), vec![81.0, 324.0, 49.0, 256.0]);
        let attrs = Attrs::from([("scalar".to_string(), "2".to_string())]);
        let rdiv = find("_rdiv_scalar").unwrap().build(&attrs).unwrap();
        let d = f32a(&[2], &[4.0, 8.0]);
        run_into(&rdiv, std::slice::from_ref(&d), &d);
        assert_eq!(f32s(&d), vec![0.5, 0.25]);
    }
}
