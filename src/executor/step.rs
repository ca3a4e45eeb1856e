//! One scheduled unit of an executor: an operator over fixed arrays, or a copy between
//! contexts, pushed to the engine with its dependencies worked out at bind time.

use crate::context::Context;
use crate::engine::{self, FnProperty, PushSpec, RunContext, Var};
use crate::error::{Error, Result};
use crate::kernels::{call_kernel, kernel_for, KernelFn};
use crate::ndarray::{NDArray, TBlob};
use crate::op::memo::{KernelMemo, NodeMemo};
use crate::op::resource::{rng_resource, RngResource};
use crate::op::{AsyncCall, OpContext, OpRef, OpReq};
use crate::profiler;
use std::sync::Arc;

/// An operator node bound to its arrays.
pub struct OpStep {
    /// The node's name, for errors and the monitor.
    pub name: String,
    /// The operator.
    pub op: OpRef,
    /// Input arrays, in the operator's order.
    pub inputs: Vec<NDArray>,
    /// Output arrays, hidden ones included.
    pub outputs: Vec<NDArray>,
    /// How each output is written.
    pub req: Vec<OpReq>,
    /// The device it runs on.
    pub ctx: Context,
    /// For a part of an expanded composite operator, what the monitor shows instead of
    /// the step: the composite's name and the composite outputs the step computes.
    pub monitor_view: Option<(String, Vec<crate::graph::expand::ShownOutput>)>,
    in_blobs: Vec<TBlob>,
    out_blobs: Vec<TBlob>,
    const_vars: Vec<Var>,
    mutable_vars: Vec<Var>,
    rng: Option<&'static RngResource>,
    /// `None` for an asynchronous operator (a custom op), which has no kernel.
    kernel: Option<KernelFn>,
    /// What the kernel keeps from one run to the next.
    memo: KernelMemo,
}

/// A copy of one array into another, for inputs that live on another context.
pub struct CopyStep {
    /// Source.
    pub src: NDArray,
    /// Destination.
    pub dst: NDArray,
}

/// A unit of work of the executor.
pub enum Step {
    /// Run an operator.
    Op(Arc<OpStep>),
    /// Copy between contexts.
    Copy(CopyStep),
}

impl OpStep {
    /// Binds `op` to its arrays; auxiliary inputs are written, the others read.
    pub fn new(
        name: String,
        op: OpRef,
        inputs: Vec<NDArray>,
        outputs: Vec<NDArray>,
        req: Vec<OpReq>,
        ctx: Context,
    ) -> Result<OpStep> {
        let kernel = match op.as_async() {
            Some(_) => None,
            None => Some(kernel_for(op.as_ref(), ctx)?),
        };
        let aux = op.aux_inputs();
        let mut const_vars = Vec::new();
        // Outputs that are not written (scratch arrays) add no dependency.
        let mut mutable_vars: Vec<Var> = outputs
            .iter()
            .zip(&req)
            .filter(|(_, r)| **r != OpReq::Null)
            .map(|(a, _)| a.var().clone())
            .collect();
        for (i, a) in inputs.iter().enumerate() {
            if aux.contains(&i) {
                mutable_vars.push(a.var().clone());
            } else {
                const_vars.push(a.var().clone());
            }
        }
        let rng = op.needs_rng().then(|| rng_resource(ctx));
        if let Some(r) = rng {
            mutable_vars.push(r.var().clone());
        }
        Ok(OpStep {
            name,
            monitor_view: None,
            in_blobs: inputs.iter().map(|a| a.blob()).collect(),
            out_blobs: outputs.iter().map(|a| a.blob()).collect(),
            op,
            inputs,
            outputs,
            req,
            ctx,
            const_vars,
            mutable_vars,
            rng,
            kernel,
            memo: KernelMemo::default(),
        })
    }

    /// True for an asynchronous operator, pushed on its own and never bulked.
    pub fn is_async(&self) -> bool {
        self.kernel.is_none()
    }

    /// Runs the kernel now, on the calling thread.
    pub fn run(&self, is_train: bool, rctx: RunContext) -> Result<()> {
        let Some(kernel) = self.kernel else {
            return Err(Error::Runtime(format!(
                "{}: an asynchronous operator cannot run inside another op",
                self.op.name()
            ))
            .at_node(self.op.name(), &self.name));
        };
        let mut guard = self.rng.map(|r| r.lock());
        let mut octx = OpContext {
            is_train,
            device: self.ctx,
            rng: guard.as_deref_mut().map(|g| g.as_mut()),
            stream: rctx.stream,
            node: Some(NodeMemo {
                memo: &self.memo,
                inputs: &self.inputs,
            }),
        };
        call_kernel(
            kernel,
            self.op.as_ref(),
            &mut octx,
            &self.in_blobs,
            &self.out_blobs,
            &self.req,
        )
        .map_err(|e| e.at_node(self.op.name(), &self.name))
    }
}

impl OpStep {
    fn push_async(self: &Arc<Self>, is_train: bool) {
        let step = self.clone();
        engine::get().push_async(
            Box::new(move |rctx, done| {
                let Some(op) = step.op.as_async() else {
                    return done.done(step.run(is_train, rctx));
                };
                let pair = |(a, b): (&NDArray, &TBlob)| (b.clone(), a.var().clone());
                let call = AsyncCall {
                    is_train,
                    ctx: step.ctx,
                    stream: rctx.stream,
                    inputs: step.inputs.iter().zip(&step.in_blobs).map(pair).collect(),
                    outputs: step.outputs.iter().zip(&step.out_blobs).map(pair).collect(),
                    req: step.req.clone(),
                };
                op.start(call, done);
            }),
            PushSpec::new(
                self.op.name(),
                self.ctx,
                &self.const_vars,
                &self.mutable_vars,
            )
            .symbolic()
            .prop(FnProperty::Async),
        );
    }
}

impl Step {
    /// Pushes the step to the engine.
    pub fn push(&self, is_train: bool) {
        match self {
            Step::Op(s) if s.is_async() => s.push_async(is_train),
            Step::Op(s) => {
                let step = s.clone();
                engine::get().push_sync(
                    Box::new(move |rctx| step.run(is_train, rctx)),
                    PushSpec::new(s.op.name(), s.ctx, &s.const_vars, &s.mutable_vars).symbolic(),
                );
            }
            Step::Copy(c) => {
                // Shapes and dtypes were matched at bind time.
                let _ = crate::ndarray::copy_into(&c.src, &c.dst);
            }
        }
    }

    /// Pushes a run of op steps as one engine op (bulk execution); they must share a
    /// context. Each kernel still sees its own arrays; the engine sees the union of their
    /// dependencies.
    pub fn push_bulk(steps: &[Arc<OpStep>], is_train: bool) {
        let Some(first) = steps.first() else { return };
        let mut const_vars: Vec<Var> = Vec::new();
        let mut mutable_vars: Vec<Var> = Vec::new();
        for s in steps {
            const_vars.extend(s.const_vars.iter().cloned());
            mutable_vars.extend(s.mutable_vars.iter().cloned());
        }
        let steps: Vec<Arc<OpStep>> = steps.to_vec();
        let ctx = first.ctx;
        engine::get().push_sync(
            Box::new(move |rctx| {
                for s in &steps {
                    let start = profiler::ops_active(true).then(profiler::now_us);
                    s.run(is_train, rctx)?;
                    if let Some(start) = start {
                        profiler::record_op(s.op.name(), ctx, start, true);
                    }
                }
                Ok(())
            }),
            PushSpec::new(engine::BULK, ctx, &const_vars, &mutable_vars).symbolic(),
        );
    }
}
