//! GPU kernels of `CTCLoss` and its backward (`ctc.cu`). The labels and lengths are
//! converted to float64 on the device and read back to check them, as the CPU kernel does
//! (MXNet reads them on the host too); then a block per sequence runs the recursions.

use super::launch::{float_suffix, launch_n, Args, BLOCK};
use super::temp::Temp;
use super::xform::cast;
use crate::cuda::memcpy::device_to_host;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::ctc_loss::{CtcLoss, CtcLossBackward, NAME};
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "ctc";

/// An input converted to float64 on the device, with its values on the host.
struct AsF64 {
    temp: Temp,
    host: Vec<f64>,
}

impl AsF64 {
    fn new(ctx: &OpContext, b: &TBlob) -> Result<AsF64> {
        let n = b.size();
        let temp = Temp::new(ctx, (n * 8).max(8))?;
        let blob = TBlob::on_device(temp.ptr(), b.shape.clone(), DType::F64, ctx.device);
        cast(ctx, b, &blob, OpReq::Write)?;
        let mut raw = vec![0u8; n * 8];
        device_to_host(ctx.device, ctx.stream, &mut raw, temp.ptr())?;
        let host = raw
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Ok(AsF64 { temp, host })
    }
}

impl super::GpuKernel for CtcLoss {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let want_grad = io.req[1] != OpReq::Null;
        if io.req[0] == OpReq::Null && !want_grad {
            return Ok(());
        }
        let (data, loss) = (&io.inputs[0], &io.outputs[0]);
        let sfx = float_suffix(NAME, data.dtype)?;
        let (steps, batch, classes) = (data.shape[0], data.shape[1], data.shape[2]);
        let width = io.inputs[1].shape[1];
        let label = AsF64::new(ctx, &io.inputs[1])?;
        let optional = |i: Option<usize>| i.map(|i| AsF64::new(ctx, &io.inputs[i])).transpose();
        let data_lengths = optional(self.use_data_lengths.then_some(2))?;
        let label_lengths = optional(self.label_lengths_input())?;
        self.sequences(
            &data.shape,
            &label.host,
            data_lengths.as_ref().map(|l| &l.host[..]),
            label_lengths.as_ref().map(|l| &l.host[..]),
        )?;
        if batch == 0 {
            return Ok(());
        }
        // The loss goes to scratch when it is added or not wanted.
        let direct = io.req[0] != OpReq::Add && io.req[0] != OpReq::Null;
        let loss_temp = Temp::new(ctx, batch * data.dtype.size())?;
        let loss_ptr = if direct { loss.ptr() } else { loss_temp.ptr() };
        let compute = if data.dtype == DType::F64 { 8 } else { 4 };
        let states = 2 * width + 1;
        let per_sequence = steps * classes + 2 * steps * states;
        let work = Temp::new(ctx, (batch * per_sequence * compute).max(1))?;
        let ext = Temp::new(ctx, (batch * states * 4).max(1))?;
        let status = Temp::new(ctx, batch * 4)?;
        let null = std::ptr::null_mut();
        let args = Args::new()
            .ptr(data.ptr())
            .ptr(label.temp.ptr())
            .ptr(data_lengths.as_ref().map_or(null, |l| l.temp.ptr()))
            .ptr(label_lengths.as_ref().map_or(null, |l| l.temp.ptr()))
            .ptr(loss_ptr)
            .ptr(if want_grad { io.outputs[1].ptr() } else { null })
            .ptr(work.ptr())
            .ptr(ext.ptr())
            .ptr(status.ptr())
            .arg(steps as i64)
            .arg(batch as i64)
            .arg(classes as i64)
            .arg(width as i64)
            .arg(i32::from(self.blank_last));
        launch_n(
            ctx,
            MODULE,
            &format!("ctc_loss_{sfx}"),
            batch * BLOCK as usize,
            args,
        )?;
        if io.req[0] == OpReq::Add {
            let sums =
                TBlob::on_device(loss_temp.ptr(), loss.shape.clone(), loss.dtype, ctx.device);
            cast(ctx, &sums, loss, OpReq::Add)?;
        }
        let mut raw = vec![0u8; batch * 4];
        device_to_host(ctx.device, ctx.stream, &mut raw, status.ptr())?;
        match raw.chunks_exact(4).position(|c| c != [0, 0, 0, 0]) {
            Some(n) => Err(Error::Runtime(format!(
                "{NAME}: the GPU kernel refused sequence {n}'s label or lengths"
            ))),
            None => Ok(()),
        }
    }
}

impl super::GpuKernel for CtcLossBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (og, g, out, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = float_suffix(self.name(), out.dtype)?;
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(g.ptr())
            .ptr(og.ptr())
            .arg(out.size() as i64)
            .arg(g.shape[1] as i64)
            .arg(g.shape[2] as i64)
            .arg(i32::from(req == OpReq::Add));
        launch_n(ctx, MODULE, &format!("ctc_scale_{sfx}"), out.size(), args)
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<CtcLoss>(k);
    super::add::<CtcLossBackward>(k);
}
