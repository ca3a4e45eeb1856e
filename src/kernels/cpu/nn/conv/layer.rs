//! The CPU kernels `Convolution` and `Deconvolution` share: each layer sizes its column
//! matrices and supplies its forward and backward loops; taking the scratch memory,
//! dispatching on the element type and honouring the output requests is done here once.

use super::batch::{tasks, Sink};
use super::epilogue::Epilogue;
use super::workspace::Workspace;
use crate::dispatch_float;
use crate::engine::ContentStamp;
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{Blobs, CpuKernel};
use crate::op::memo::KernelMemo;
use crate::op::nn::conv_layer::{ConvBackward, ConvLayer};
use crate::op::{OpContext, OpReq};

/// A layer computed through column matrices.
pub(crate) trait ColumnLayer: ConvLayer {
    /// The sizes of one run.
    type Plan;

    /// Checks `data` against the arguments and sizes the run.
    fn column_plan(&self, data: &[usize]) -> Result<Self::Plan>;

    /// Samples and multiply-adds of the forward pass.
    fn batch_work(p: &Self::Plan) -> (usize, usize);

    /// Scratch elements one run of samples needs for element type `T`: forward, then
    /// backward.
    fn scratch<T: Num>(p: &Self::Plan) -> (usize, usize);

    /// How many runs of the forward pass hold scratch memory at once.
    fn forward_runs<T: Num>(p: &Self::Plan) -> usize {
        let (batch, work) = Self::batch_work(p);
        tasks(batch, work)
    }

    /// `y (=|+=) post(layer(x, w))` over the whole batch, with `scratch` split between
    /// the runs of samples.
    fn forward_loop<T: Num>(p: &Self::Plan, a: Forward<'_, T>, scratch: &mut [T]);

    /// The gradients of data, weight and bias from the output gradient, with `scratch`
    /// split between the runs of samples.
    fn backward_loop<T: Num>(p: &Self::Plan, a: Backward<'_, T>, scratch: &mut [T]);
}

/// The arrays of a forward pass: data, weight, what is done to the products as they are
/// finished (the bias added, or a fused layer's epilogue), and the output, written or
/// added to (only with a bias-only epilogue).
pub(crate) struct Forward<'a, T> {
    pub x: &'a [T],
    pub w: &'a [T],
    pub post: Epilogue<'a, T>,
    pub y: &'a mut [T],
    pub add: bool,
    /// Where what is derived from the weights alone may be kept for the next run.
    pub kept: Option<KeptWeights<'a>>,
}

/// An executor node's memo, for a forward pass to keep what it derives from the weights
/// alone (Winograd's transformed weights) while their content stamp stays the same.
#[derive(Clone, Copy)]
pub(crate) struct KeptWeights<'a> {
    pub memo: &'a KernelMemo,
    pub stamp: ContentStamp,
}

impl<'a> KeptWeights<'a> {
    /// For a run outside training (where the weights do not change between steps) of an
    /// executor node whose weights, input 1, have a content stamp.
    pub fn of(ctx: &OpContext<'a>) -> Option<KeptWeights<'a>> {
        let node = ctx.node.filter(|_| !ctx.is_train)?;
        Some(KeptWeights {
            memo: node.memo,
            stamp: node.input_stamp(1)?,
        })
    }
}

/// The arrays of a backward pass: output gradient, data and weight, and the gradients of
/// data, weight and bias.
pub(crate) struct Backward<'a, T> {
    pub dy: &'a [T],
    pub x: &'a [T],
    pub w: &'a [T],
    pub dx: Sink<'a, T>,
    pub dw: Sink<'a, T>,
    pub db: Sink<'a, T>,
}

impl<L: ColumnLayer> CpuKernel for L {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.column_plan(&io.inputs[0].shape)?;
        let add = io.req[0] == OpReq::Add;
        let kept = KeptWeights::of(ctx);
        dispatch_float!(L::NAME, io.inputs[0].dtype, T => {
            let len = L::forward_runs::<T>(&p) * L::scratch::<T>(&p).0;
            let bias = (!self.args().no_bias).then(|| io.inputs[2].slice::<T>());
            let mut ws = Workspace::<T>::new(ctx, L::NAME, len)?;
            let (x, w, y) = (io.inputs[0].slice(), io.inputs[1].slice(), io.outputs[0].slice_mut());
            let post = Epilogue::bias(bias);
            L::forward_loop::<T>(&p, Forward { x, w, post, y, add, kept }, ws.slice_mut());
        });
        Ok(())
    }
}

impl<L: ColumnLayer> CpuKernel for ConvBackward<L> {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let p = self.fwd.column_plan(&io.inputs[1].shape)?;
        let (batch, work) = L::batch_work(&p);
        dispatch_float!(L::BACKWARD, io.inputs[1].dtype, T => {
            let len = tasks(batch, work * 2) * L::scratch::<T>(&p).1;
            let sink = |i: usize| Sink::new(io.outputs.get(i), io.req.get(i).copied());
            let mut ws = Workspace::<T>::new(ctx, L::BACKWARD, len)?;
            let (dy, x, w) = (io.inputs[0].slice(), io.inputs[1].slice(), io.inputs[2].slice());
            let (dx, dw, db) = (sink(0), sink(1), sink(2));
            L::backward_loop::<T>(&p, Backward { dy, x, w, dx, dw, db }, ws.slice_mut());
        });
        Ok(())
    }
}
