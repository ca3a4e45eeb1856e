//! Imperative calls of composite operators: each part runs (and is recorded) as an
//! operator of its own, and the results are copied into the caller's arrays if given.

use super::backward::Value;
use super::invoke;
use crate::context::Context;
use crate::error::Result;
use crate::op::composite::{Composite, Src};
use crate::op::{self, Attrs, OpRef};
use crate::shape::Shape;

/// Runs composite operator `op` (defined by `def`) on `inputs`, as [`invoke`] does.
pub(super) fn invoke_composite(
    op: &OpRef,
    def: &dyn Composite,
    inputs: &[Value],
    out: Option<Vec<Value>>,
    ctx: Option<Context>,
    is_train: bool,
) -> Result<Vec<Value>> {
    let name = op.name();
    let arrays: Vec<_> = inputs.iter().map(|(a, _)| a.clone()).collect();
    let ctx = crate::imperative::common_context(name, &arrays, ctx).map_err(|e| e.in_op(name))?;
    let shapes: Vec<Shape> = arrays
        .iter()
        .map(|a| Shape::from_slice(a.shape()))
        .collect();
    let types: Vec<_> = arrays.iter().map(|a| a.dtype()).collect();
    // The operator's own inference checks the inputs and names the op in any error.
    op.infer_shape(&shapes).map_err(|e| e.in_op(name))?;
    op.infer_type(&types).map_err(|e| e.in_op(name))?;
    let d = def.decompose(&shapes, &types).map_err(|e| e.in_op(name))?;
    let mut results: Vec<Vec<Value>> = Vec::with_capacity(d.steps.len());
    let value = |results: &Vec<Vec<Value>>, s: Src| match s {
        Src::Input(i) => inputs[i].clone(),
        Src::Step(k, o) => results[k][o].clone(),
    };
    for step in &d.steps {
        let ins: Vec<Value> = step.inputs.iter().map(|&s| value(&results, s)).collect();
        results.push(invoke(&step.op, &ins, None, Some(ctx), is_train)?);
    }
    let mut outs: Vec<Value> = d.outputs.iter().map(|&s| value(&results, s)).collect();
    for (k, dst) in out.unwrap_or_default().into_iter().enumerate() {
        outs[k] = copy(&outs[k], dst)?;
    }
    Ok(outs)
}

fn copy(src: &Value, dst: Value) -> Result<Value> {
    let copy: OpRef = op::find("_copy")?.build(&Attrs::new())?;
    let mut v = invoke(
        &copy,
        std::slice::from_ref(src),
        Some(vec![dst]),
        None,
        false,
    )?;
    Ok(v.remove(0))
}
