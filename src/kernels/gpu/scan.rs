//! GPU kernels of `cumsum` (and its backward) and `_histogram` (`scan.cu`).

use super::launch::{launch_n, suffix, Args};
use super::temp::Temp;
use super::xform::{cast, copy_same};
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::cumsum::Cumsum;
use crate::op::histogram::Histogram;
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "scan";

impl super::GpuKernel for Cumsum {
    /// The input converted into the output's type, then summed in place along each lane
    /// (a thread per lane); adding into the output sums in scratch memory first.
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (src, out, req) = (&io.inputs[0], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let name = self.name();
        let lanes = self.lanes(&out.shape)?;
        let scratch = match req {
            OpReq::Add => Some(Temp::new(ctx, out.size() * out.dtype.size())?),
            _ => None,
        };
        let target = match &scratch {
            Some(t) => TBlob::on_device(t.ptr(), out.shape.clone(), out.dtype, ctx.device),
            None => out.clone(),
        };
        cast(ctx, src, &target, OpReq::Write)?;
        let args = Args::new()
            .ptr(target.ptr())
            .arg(lanes.lanes as i64)
            .arg(lanes.len as i64)
            .arg(lanes.stride as i64)
            .arg(i32::from(self.reverse));
        let kernel = format!("cumsum_{}", suffix(name, out.dtype)?);
        launch_n(ctx, MODULE, &kernel, lanes.lanes, args)?;
        if scratch.is_some() {
            copy_same(ctx, name, &target, out, OpReq::Add)?;
        }
        Ok(())
    }
}

impl super::GpuKernel for Histogram {
    /// The edges (and zeroed counts), then a thread per element adding one to its bin.
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        if io.req.contains(&OpReq::Add) {
            return Err(Error::NotImplemented(format!(
                "{name}: adding into the outputs is not supported"
            )));
        }
        let (data, counts, edges) = (&io.inputs[0], &io.outputs[0], &io.outputs[1]);
        let bins = counts.size();
        let sfx = suffix(name, data.dtype)?;
        let (given, (lo, hi)) = match self.uniform {
            Some((_, lo, hi)) => (std::ptr::null_mut(), Histogram::span(lo, hi)),
            None => (io.inputs[1].ptr(), (0.0, 0.0)),
        };
        let args = Args::new()
            .ptr(edges.ptr())
            .ptr(counts.ptr())
            .ptr(given)
            .arg(bins as i64)
            .arg(lo)
            .arg(hi);
        launch_n(ctx, MODULE, &format!("hist_edges_{sfx}"), bins + 1, args)?;
        let args = Args::new()
            .ptr(counts.ptr())
            .ptr(data.ptr())
            .ptr(edges.ptr())
            .arg(data.size() as i64)
            .arg(bins as i64)
            .arg(i32::from(self.uniform.is_some()))
            .arg(lo)
            .arg(hi);
        launch_n(ctx, MODULE, &format!("hist_count_{sfx}"), data.size(), args)
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<Cumsum>(k);
    super::add::<Histogram>(k);
}
