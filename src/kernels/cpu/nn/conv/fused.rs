//! The CPU kernel of `_sg_rsmx_conv`, a convolution fused with the BatchNorm, residual
//! addition and ReLU after it. Outside training (or with `use_global_stats`) the
//! BatchNorm is folded into a per-channel scale and shift that the convolution applies,
//! with the rest of the epilogue, to each tile of output as it finishes it. With batch
//! statistics the convolution runs first, then the statistics, then the epilogue.

use super::batch_norm::{affine, batch_moments, update_moving};
use super::epilogue::Epilogue;
use super::layer::{ColumnLayer, Forward, KeptWeights};
use super::workspace::Workspace;
use crate::error::{Error, Result};
use crate::kernels::cpu::map::pool_shares_work;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::batch_norm::Layout;
use crate::op::nn::convolution::Convolution;
use crate::op::nn::fused_conv::{FusedConv, NAME};
use crate::op::{OpContext, OpReq};
use num_traits::Float;
use rayon::prelude::*;

impl CpuKernel for FusedConv {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        match io.inputs[0].dtype {
            crate::dtype::DType::F32 => forward::<f32>(self, ctx, io),
            crate::dtype::DType::F64 => forward::<f64>(self, ctx, io),
            other => Err(Error::Type(format!(
                "{NAME}: dtype {other} is not supported"
            ))),
        }
    }
}

fn forward<T: Num + Float>(op: &FusedConv, ctx: &mut OpContext, io: Blobs) -> Result<()> {
    let p = op.conv.column_plan(&io.inputs[0].shape)?;
    let kept = KeptWeights::of(ctx);
    let (x, w) = (io.inputs[0].slice::<T>(), io.inputs[1].slice::<T>());
    let bias = (!op.conv.args.no_bias).then(|| io.inputs[2].slice::<T>());
    let residual = op
        .residual
        .then(|| io.inputs[op.residual_at()].slice::<T>());
    let out = io.outputs[0].slice_mut::<T>();
    let add = io.req[0] == OpReq::Add;
    let conv_len = Convolution::forward_runs::<T>(&p) * Convolution::scratch::<T>(&p).0;
    // Added to the output, the result is made apart first: the epilogue is not linear.
    let mut ws = Workspace::<T>::new(ctx, NAME, conv_len + if add { out.len() } else { 0 })?;
    let (scratch, apart) = ws.slice_mut().split_at_mut(conv_len);
    let y: &mut [T] = if add { apart } else { &mut *out };
    let batch_stats = op.bn.as_ref().filter(|bn| bn.batch_stats(ctx.is_train));
    // Outside training the BatchNorm is folded into the convolution's epilogue.
    let folded = match (&op.bn, batch_stats) {
        (Some(bn), None) => {
            let k = op.bn_at();
            let stat = |i: usize| -> Vec<f64> {
                let v = io.inputs[k + i].slice::<T>();
                v.iter()
                    .map(|&v| crate::dtype::Element::to_f64(v))
                    .collect()
            };
            let (mean, var) = (stat(2), stat(3));
            let (gamma, beta) = (io.inputs[k].slice::<T>(), io.inputs[k + 1].slice::<T>());
            let (scale, shift, _) = affine(bn, gamma, beta, (&mean, &var), bias);
            Some((scale, shift))
        }
        _ => None,
    };
    let post = match (&folded, batch_stats) {
        (Some((scale, shift)), _) => Epilogue {
            scale: Some(scale.as_slice()),
            shift: Some(shift.as_slice()),
            residual,
            relu: op.relu,
        },
        (None, Some(_)) => Epilogue::bias(bias),
        (None, None) => Epilogue {
            scale: None,
            shift: bias,
            residual,
            relu: op.relu,
        },
    };
    let y_conv = &mut *y;
    Convolution::forward_loop(
        &p,
        Forward {
            x,
            w,
            post,
            y: y_conv,
            add: false,
            kept,
        },
        scratch,
    );
    // With batch statistics the BatchNorm and what follows it go over the whole output.
    if let Some(bn) = batch_stats {
        let inner = p.geom.cols();
        let l = Layout {
            outer: p.batch,
            channels: p.filters,
            inner,
        };
        let moments = batch_moments(&l, y);
        let k = op.bn_at();
        let (gamma, beta) = (io.inputs[k].slice::<T>(), io.inputs[k + 1].slice::<T>());
        let (scale, shift, _) = affine(bn, gamma, beta, (&moments.0, &moments.1), None);
        let moving = [
            io.inputs[k + 2].slice_mut::<T>(),
            io.inputs[k + 3].slice_mut::<T>(),
        ];
        update_moving(bn, moving, (&moments.0, &moments.1));
        let post = Epilogue {
            scale: Some(&scale),
            shift: Some(&shift),
            residual,
            relu: op.relu,
        };
        let plane = |(i, row): (usize, &mut [T])| post.apply(i % p.filters, i * inner, row);
        if inner > 0 && y.len() >= 1 << 15 && pool_shares_work() {
            y.par_chunks_mut(inner).enumerate().for_each(plane);
        } else if inner > 0 {
            y.chunks_mut(inner).enumerate().for_each(plane);
        }
    }
    if add {
        let made = &ws.slice_mut()[conv_len..];
        for (o, &v) in out.iter_mut().zip(made) {
            *o = Num::add(*o, v);
        }
    }
    Ok(())
}

/// Registers the CPU kernel of the fused convolution.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<FusedConv>(k);
}
