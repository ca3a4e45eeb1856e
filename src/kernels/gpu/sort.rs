//! GPU kernels of the sorting operators (`sort.cu`): `sort`, `argsort`, `topk` and the
//! backward of `topk` and `sort`. Every lane is sorted whole by a bitonic network over
//! (key, index) pairs, so ties keep index order as on the CPU.

use super::launch::{launch_n, suffix, Args, BLOCK};
use super::temp::Temp;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::grad::indexing::TopkBackward;
use crate::op::sorting::{Lanes, Ret, SortOp};
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "sort";
/// Longest padded lane sorted in shared memory (`RSMX_SORT_SHARED`).
const SHARED: usize = 2048;

/// `struct rsmx_lanes`.
#[repr(C)]
#[derive(Clone, Copy)]
struct LaneDesc {
    outer: i64,
    n: i64,
    inner: i64,
    k: i64,
    p: i64,
}

/// Each lane's order, `p` indices per lane of which the first `k` are kept.
struct Order {
    idx: Temp,
    desc: LaneDesc,
}

/// Sorts every lane of `data` as `op` says; `None` when nothing is kept.
fn order(ctx: &OpContext, op: &SortOp, data: &TBlob, l: Lanes, k: usize) -> Result<Option<Order>> {
    let lanes = l.outer * l.inner;
    if lanes == 0 || k == 0 {
        return Ok(None);
    }
    let p = l.n.next_power_of_two();
    let desc = LaneDesc {
        outer: l.outer as i64,
        n: l.n as i64,
        inner: l.inner as i64,
        k: k as i64,
        p: p as i64,
    };
    let total = lanes
        .checked_mul(p)
        .ok_or_else(|| Error::Value(format!("{}: the input is too large", op.name)))?;
    let keys = Temp::new(ctx, total * 8)?;
    let idx = Temp::new(ctx, total * 8)?;
    let flip: u64 = if op.ascend { 0 } else { u64::MAX };
    let args = Args::new()
        .ptr(data.ptr())
        .arg(desc)
        .arg(flip)
        .ptr(keys.ptr())
        .ptr(idx.ptr());
    let kernel = format!("sort_keys_{}", suffix(op.name, data.dtype)?);
    launch_n(ctx, MODULE, &kernel, total, args)?;
    bitonic(ctx, keys.ptr(), idx.ptr(), lanes, p)?;
    Ok(Some(Order { idx, desc }))
}

/// Sorts `lanes` lanes of `p` (a power of two) (key, index) pairs in place, by key then
/// index; `keys` and `idx` hold `lanes * p` of each, lane after lane.
pub(super) fn bitonic(
    ctx: &OpContext,
    keys: *mut u8,
    idx: *mut u8,
    lanes: usize,
    p: usize,
) -> Result<()> {
    if p <= SHARED {
        let args = Args::new()
            .ptr(keys)
            .ptr(idx)
            .arg(lanes as i64)
            .arg(p as i64);
        launch_n(ctx, MODULE, "sort_block", lanes * BLOCK as usize, args)?;
    } else {
        let mut size = 2;
        while size <= p {
            let mut j = size / 2;
            while j > 0 {
                let args = Args::new()
                    .ptr(keys)
                    .ptr(idx)
                    .arg(lanes as i64)
                    .arg(p as i64)
                    .arg(size as i64)
                    .arg(j as i64);
                launch_n(ctx, MODULE, "sort_step", lanes * p / 2, args)?;
                j /= 2;
            }
            size *= 2;
        }
    }
    Ok(())
}

/// Fills `out` with zeros (the `init` module's kernel).
fn clear(ctx: &OpContext, op: &str, out: &TBlob) -> Result<()> {
    let n = out.size();
    let args = Args::new().ptr(out.ptr()).arg(n as i64).arg(0.0f64);
    launch_n(
        ctx,
        "init",
        &format!("fill_{}", suffix(op, out.dtype)?),
        n,
        args,
    )
}

fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

impl super::GpuKernel for SortOp {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req.iter().all(|r| *r == OpReq::Null) {
            return Ok(());
        }
        let data = &io.inputs[0];
        let (l, _) = self.lanes(&data.shape)?;
        let k = self.k_of(l.n)?;
        if self.ret == Ret::Mask && matches!(io.req[0], OpReq::Write | OpReq::WriteInplace) {
            clear(ctx, self.name, &io.outputs[0])?;
        }
        let Some(ord) = order(ctx, self, data, l, k)? else {
            return Ok(());
        };
        let n_out = ord.desc.outer as usize * k * ord.desc.inner as usize;
        let values = |out: &TBlob, req: OpReq| -> Result<()> {
            if req == OpReq::Null {
                return Ok(());
            }
            let args = Args::new()
                .ptr(out.ptr())
                .ptr(data.ptr())
                .ptr(ord.idx.ptr())
                .arg(ord.desc)
                .arg(add_flag(req));
            let kernel = format!("sort_values_{}", suffix(self.name, out.dtype)?);
            launch_n(ctx, MODULE, &kernel, n_out, args)
        };
        let indices = |out: &TBlob, req: OpReq| -> Result<()> {
            if req == OpReq::Null {
                return Ok(());
            }
            let args = Args::new()
                .ptr(out.ptr())
                .ptr(ord.idx.ptr())
                .arg(ord.desc)
                .arg(add_flag(req));
            let kernel = format!("sort_indices_{}", suffix(self.name, out.dtype)?);
            launch_n(ctx, MODULE, &kernel, n_out, args)
        };
        match self.ret {
            Ret::Value => values(&io.outputs[0], io.req[0]),
            Ret::Indices => indices(&io.outputs[0], io.req[0]),
            Ret::Both => {
                values(&io.outputs[0], io.req[0])?;
                indices(&io.outputs[1], io.req[1])
            }
            Ret::Mask => {
                let out = &io.outputs[0];
                if io.req[0] == OpReq::Null {
                    return Ok(());
                }
                let args = Args::new()
                    .ptr(out.ptr())
                    .ptr(ord.idx.ptr())
                    .arg(ord.desc)
                    .arg(add_flag(io.req[0]));
                let kernel = format!("sort_mask_{}", suffix(self.name, out.dtype)?);
                launch_n(ctx, MODULE, &kernel, n_out, args)
            }
        }
    }
}

impl super::GpuKernel for TopkBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let Some(op) = self.order.as_any().downcast_ref::<SortOp>() else {
            return Err(Error::Runtime(format!(
                "{}: the order is not a sorting operator",
                self.name()
            )));
        };
        let (g, data, out) = (&io.inputs[0], &io.inputs[1], &io.outputs[0]);
        let (l, _) = op.lanes(&data.shape)?;
        let k = op.k_of(l.n)?;
        if req != OpReq::Add {
            clear(ctx, self.name(), out)?;
        }
        let Some(ord) = order(ctx, op, data, l, k)? else {
            return Ok(());
        };
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(g.ptr())
            .ptr(ord.idx.ptr())
            .arg(ord.desc);
        let kernel = format!("topk_grad_{}", suffix(self.name(), out.dtype)?);
        launch_n(ctx, MODULE, &kernel, g.size(), args)
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<SortOp>(k);
    super::add::<TopkBackward>(k);
}
