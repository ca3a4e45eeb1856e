//! GPU kernels of the fused `RNN` operator (`rnn.cu`): the CPU's algorithm and reserve
//! layout, with the products on cuBLAS and the cell steps, masks and gathers as kernels,
//! all on the op's stream.

use super::launch::{launch_n, Args};
use super::temp::Temp;
use crate::cuda::blas::{gemm, RowMajorGemm};
use crate::cuda::runtime::for_context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::nn::rnn::{Rnn, RnnBackward, RnnDims, RnnMode, NAME};
use crate::op::{OpContext, OpReq, Operator};
use rand::RngCore;
use std::ptr::null;

const MODULE: &str = "rnn";

/// The element type of one run: its kernel suffix and size.
#[derive(Clone, Copy)]
struct Elem {
    dtype: DType,
    sfx: &'static str,
}

impl Elem {
    fn new(op: &str, dtype: DType) -> Result<Elem> {
        let sfx = match dtype {
            DType::F32 => "f32",
            DType::F64 => "f64",
            other => {
                return Err(Error::Type(format!(
                    "{op}: the GPU kernel computes float32 and float64, got {other}"
                )))
            }
        };
        Ok(Elem { dtype, sfx })
    }

    /// `p` advanced by `elems` elements.
    fn at(&self, p: *const u8, elems: usize) -> *mut u8 {
        p.wrapping_add(elems * self.dtype.size()) as *mut u8
    }

    fn launch(&self, ctx: &OpContext, kernel: &str, n: usize, args: Args) -> Result<()> {
        launch_n(ctx, MODULE, &format!("{kernel}_{}", self.sfx), n, args)
    }

    fn scratch(&self, ctx: &OpContext, elems: usize) -> Result<Temp> {
        Temp::new(ctx, elems.max(1) * self.dtype.size())
    }

    fn fill(&self, ctx: &OpContext, p: *mut u8, n: usize, v: f64) -> Result<()> {
        let args = Args::new().ptr(p).arg(n as i64).arg(v);
        launch_n(ctx, "init", &format!("fill_{}", self.sfx), n, args)
    }

    /// `out (=|+=) in`, times `m` element-wise when given.
    fn store(
        &self,
        ctx: &OpContext,
        out: *mut u8,
        src: *const u8,
        m: *const u8,
        n: usize,
        add: bool,
    ) -> Result<()> {
        let args = Args::new()
            .ptr(out)
            .ptr(src)
            .ptr(m)
            .arg(n as i64)
            .arg(add as i32);
        self.launch(ctx, "rnn_store", n, args)
    }

    /// `c (m×n, rows ldc apart) = alpha·op(a)·op(b) + beta·c` on the op's stream.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        ctx: &OpContext,
        (ta, tb): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda): (*const u8, usize),
        (b, ldb): (*const u8, usize),
        c: *mut u8,
        beta: f64,
    ) -> Result<()> {
        let (rt, dev) = for_context(ctx.device)?;
        let stream = ctx
            .stream
            .ok_or_else(|| Error::Runtime(format!("{NAME}: a product ran outside a GPU op")))?;
        let g = RowMajorGemm {
            ta,
            tb,
            m,
            n,
            k,
            lda,
            ldb,
            ldc: n,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
        };
        gemm(
            rt.blas()?,
            dev,
            stream,
            self.dtype,
            &g,
            (1.0, beta),
            a,
            b,
            c,
        )
    }
}

fn mode_code(mode: RnnMode) -> i32 {
    match mode {
        RnnMode::RnnRelu => 0,
        RnnMode::RnnTanh => 1,
        RnnMode::Lstm => 2,
        RnnMode::Gru => 3,
    }
}

/// The clip arguments of the step kernels: (on, lo, hi, NaN to lo).
fn clip_args(op: &Rnn) -> (i32, f64, f64, i32) {
    match op.clip {
        Some((lo, hi)) => (1, lo, hi, op.clip_nan as i32),
        None => (0, 0.0, 0.0, 0),
    }
}

/// Where one (layer, direction)'s pieces lie in the reserve.
struct Cell {
    gates: *mut u8,
    extra: *mut u8,
    hs: *mut u8,
}

fn cell(e: &Elem, dims: &RnnDims, reserve: *const u8, layer: usize, dir: usize) -> Cell {
    let tn = dims.t * dims.n;
    let gates = e.at(reserve, dims.cell_at(layer, dir));
    let extra = e.at(gates, tn * dims.gate_rows());
    let hs = e.at(extra, if dims.has_extra() { tn * dims.h } else { 0 });
    Cell { gates, extra, hs }
}

/// The step of direction `dir` at position `s` of its order.
fn step_time(dims: &RnnDims, dir: usize, s: usize) -> usize {
    if dir == 0 {
        s
    } else {
        dims.t - 1 - s
    }
}

/// A layer's output from the hidden states of its directions, times `mask` if given.
fn gather(
    e: &Elem,
    ctx: &OpContext,
    dims: &RnnDims,
    (reserve, layer): (*const u8, usize),
    mask: *const u8,
    out: *mut u8,
    add: bool,
) -> Result<()> {
    let hs0 = cell(e, dims, reserve, layer, 0).hs;
    let hs1 = if dims.d == 2 {
        cell(e, dims, reserve, layer, 1).hs
    } else {
        hs0
    };
    let rows = dims.t * dims.n;
    let args = Args::new()
        .ptr(out)
        .ptr(hs0)
        .ptr(hs1)
        .ptr(mask)
        .arg(rows as i64)
        .arg(dims.h as i64)
        .arg(dims.d as i32)
        .arg(add as i32);
    e.launch(ctx, "rnn_gather", dims.layer_output(), args)
}

/// The input of layer `layer`: the data for the first, else the layer below's output
/// (times its dropout mask) rebuilt into `buf` from the reserve.
fn layer_input(
    e: &Elem,
    ctx: &OpContext,
    dims: &RnnDims,
    (reserve, layer): (*const u8, usize),
    data: *mut u8,
    buf: *mut u8,
) -> Result<*mut u8> {
    if layer == 0 {
        return Ok(data);
    }
    let mask = mask_ptr(e, dims, reserve, layer - 1);
    gather(e, ctx, dims, (reserve, layer - 1), mask, buf, false)?;
    Ok(buf)
}

fn mask_ptr(e: &Elem, dims: &RnnDims, reserve: *const u8, layer: usize) -> *const u8 {
    if dims.dropout {
        e.at(reserve, dims.mask_at(layer))
    } else {
        null()
    }
}

impl super::GpuKernel for Rnn {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        self.check_supported("GPUs")?;
        let dims = self.dims(&io.inputs[0].shape)?;
        let e = Elem::new(NAME, io.inputs[0].dtype)?;
        let v = self.n_visible();
        let (n, h, gh, tn) = (dims.n, dims.h, dims.gate_rows(), dims.t * dims.n);
        let nh = n * h;
        let (x, w, hx) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.inputs[2].ptr());
        let lstm = self.mode == RnnMode::Lstm;
        let cx = if lstm {
            io.inputs[3].ptr()
        } else {
            null::<u8>() as *mut u8
        };
        let scratch;
        let reserve = if io.req[v] == OpReq::Null {
            scratch = e.scratch(ctx, dims.reserve_len())?;
            scratch.ptr()
        } else {
            io.outputs[v].ptr()
        };
        if dims.dropout {
            let len = dims.layer_output() * (dims.l - 1);
            let keep = 1.0 - self.p;
            let threshold = (keep * 4_294_967_296.0) as u64;
            let seed = if ctx.is_train {
                ctx.rng(NAME)?.next_u64()
            } else {
                0
            };
            let args = Args::new()
                .ptr(e.at(reserve, dims.mask_at(0)))
                .arg(len as i64)
                .arg(seed)
                .arg(threshold)
                .arg(1.0 / keep)
                .arg(ctx.is_train as i32);
            e.launch(ctx, "rnn_dropout_mask", len, args)?;
        }
        let layer_in = e.scratch(ctx, if dims.l > 1 { dims.layer_output() } else { 0 })?;
        let q = e.scratch(ctx, n * gh)?;
        let (clip, lo, hi, nan_to_lo) = clip_args(self);
        let hidden_from = if self.mode == RnnMode::Gru { 2 * h } else { gh };
        for l in 0..dims.l {
            let input = layer_input(&e, ctx, &dims, (reserve, l), x, layer_in.ptr())?;
            let i_l = dims.layer_input(l);
            for dir in 0..dims.d {
                let c = cell(&e, &dims, reserve, l, dir);
                let (wx_at, wh_at) = dims.weights(l, dir);
                let (bx_at, bh_at) = dims.biases(l, dir);
                let (wx, wh, bx, bh) = (
                    e.at(w, wx_at),
                    e.at(w, wh_at),
                    e.at(w, bx_at),
                    e.at(w, bh_at),
                );
                let state = (l * dims.d + dir) * nh;
                let args = Args::new()
                    .ptr(c.gates)
                    .ptr(bx)
                    .ptr(bh)
                    .arg(tn as i64)
                    .arg(gh as i64)
                    .arg(hidden_from as i64);
                e.launch(ctx, "rnn_bias_rows", tn * gh, args)?;
                e.gemm(
                    ctx,
                    (false, true),
                    (tn, gh, i_l),
                    (input, i_l),
                    (wx, i_l),
                    c.gates,
                    1.0,
                )?;
                for s in 0..dims.t {
                    let t = step_time(&dims, dir, s);
                    let tp = (s > 0).then(|| step_time(&dims, dir, s - 1));
                    let h_prev = tp.map_or(e.at(hx, state), |tp| e.at(c.hs, tp * nh));
                    let c_prev = match (lstm, tp) {
                        (false, _) => null::<u8>() as *mut u8,
                        (true, Some(tp)) => e.at(c.extra, tp * nh),
                        (true, None) => e.at(cx, state),
                    };
                    e.gemm(
                        ctx,
                        (false, true),
                        (n, gh, h),
                        (h_prev, h),
                        (wh, h),
                        q.ptr(),
                        0.0,
                    )?;
                    let extra = if dims.has_extra() {
                        e.at(c.extra, t * nh)
                    } else {
                        null::<u8>() as *mut u8
                    };
                    let args = Args::new()
                        .ptr(e.at(c.gates, t * n * gh))
                        .ptr(q.ptr())
                        .ptr(bh)
                        .ptr(h_prev)
                        .ptr(c_prev)
                        .ptr(extra)
                        .ptr(e.at(c.hs, t * nh))
                        .arg(n as i64)
                        .arg(h as i64)
                        .arg(mode_code(self.mode))
                        .arg(clip)
                        .arg(lo)
                        .arg(hi)
                        .arg(nan_to_lo);
                    e.launch(ctx, "rnn_step_forward", nh, args)?;
                }
            }
        }
        if io.req[0] != OpReq::Null {
            let add = io.req[0] == OpReq::Add;
            gather(
                &e,
                ctx,
                &dims,
                (reserve, dims.l - 1),
                null(),
                io.outputs[0].ptr(),
                add,
            )?;
        }
        if self.state_outputs {
            for k in 0..dims.l * dims.d {
                let (l, dir) = (k / dims.d, k % dims.d);
                let c = cell(&e, &dims, reserve, l, dir);
                let t_last = (dims.t > 0).then(|| step_time(&dims, dir, dims.t - 1));
                let h_src = t_last.map_or(e.at(hx, k * nh), |t| e.at(c.hs, t * nh));
                if io.req[1] != OpReq::Null {
                    let out = e.at(io.outputs[1].ptr(), k * nh);
                    e.store(ctx, out, h_src, null(), nh, io.req[1] == OpReq::Add)?;
                }
                if lstm && io.req[2] != OpReq::Null {
                    let c_src = t_last.map_or(e.at(cx, k * nh), |t| e.at(c.extra, t * nh));
                    let out = e.at(io.outputs[2].ptr(), k * nh);
                    e.store(ctx, out, c_src, null(), nh, io.req[2] == OpReq::Add)?;
                }
            }
        }
        Ok(())
    }
}

impl super::GpuKernel for RnnBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let op = &self.0;
        op.check_supported("GPUs")?;
        let (v, k) = (op.n_visible(), op.n_inputs());
        let dims = op.dims(&io.inputs[v].shape)?;
        let e = Elem::new(self.name(), io.inputs[0].dtype)?;
        let (n, h, gh, tn) = (dims.n, dims.h, dims.gate_rows(), dims.t * dims.n);
        let (nh, lo_len) = (n * h, dims.layer_output());
        let lstm = op.mode == RnnMode::Lstm;
        let gru = op.mode == RnnMode::Gru;
        let none = null::<u8>() as *mut u8;
        let dy = io.inputs[0].ptr();
        let dhy = if v >= 2 { io.inputs[1].ptr() } else { none };
        let dcy = if v >= 3 { io.inputs[2].ptr() } else { none };
        let (x, w, hx) = (
            io.inputs[v].ptr(),
            io.inputs[v + 1].ptr(),
            io.inputs[v + 2].ptr(),
        );
        let cx = if lstm { io.inputs[v + 3].ptr() } else { none };
        let reserve = io.inputs[v + k].ptr();
        let dw = if io.req[1] != OpReq::Null {
            let p = io.outputs[1].ptr();
            if io.req[1] != OpReq::Add {
                e.fill(ctx, p, io.outputs[1].size(), 0.0)?;
            }
            Some(p)
        } else {
            None
        };
        let deep = dims.l > 1;
        let dgx = e.scratch(ctx, tn * gh)?;
        let dgh = e.scratch(ctx, if gru { tn * gh } else { 0 })?;
        let layer_in = e.scratch(ctx, if deep { lo_len } else { 0 })?;
        let (s1, s2) = (
            e.scratch(ctx, if deep { lo_len } else { 0 })?,
            e.scratch(ctx, if deep { lo_len } else { 0 })?,
        );
        let (mut dcur, mut dprev) = (s1.ptr(), s2.ptr());
        let dh_next = e.scratch(ctx, nh)?;
        let dc = e.scratch(ctx, nh)?;
        let ones = e.scratch(ctx, tn)?;
        e.fill(ctx, ones.ptr(), tn, 1.0)?;
        let (clip, lo, hi, _) = clip_args(op);
        let dq_all = if gru { dgh.ptr() } else { dgx.ptr() };
        for l in (0..dims.l).rev() {
            let input = layer_input(&e, ctx, &dims, (reserve, l), x, layer_in.ptr())?;
            let dout = if l == dims.l - 1 { dy } else { dcur };
            let i_l = dims.layer_input(l);
            let dx_dst = if l > 0 {
                Some(dprev)
            } else if io.req[0] != OpReq::Null {
                Some(io.outputs[0].ptr())
            } else {
                None
            };
            for dir in 0..dims.d {
                let c = cell(&e, &dims, reserve, l, dir);
                let state = (l * dims.d + dir) * nh;
                let (wx_at, wh_at) = dims.weights(l, dir);
                let (bx_at, bh_at) = dims.biases(l, dir);
                let (wx, wh) = (e.at(w, wx_at), e.at(w, wh_at));
                if dhy.is_null() {
                    e.fill(ctx, dh_next.ptr(), nh, 0.0)?;
                } else {
                    e.store(ctx, dh_next.ptr(), e.at(dhy, state), null(), nh, false)?;
                }
                if dcy.is_null() {
                    e.fill(ctx, dc.ptr(), nh, 0.0)?;
                } else {
                    e.store(ctx, dc.ptr(), e.at(dcy, state), null(), nh, false)?;
                }
                for s in (0..dims.t).rev() {
                    let t = step_time(&dims, dir, s);
                    let tp = (s > 0).then(|| step_time(&dims, dir, s - 1));
                    let h_prev = tp.map_or(e.at(hx, state), |tp| e.at(c.hs, tp * nh));
                    let c_prev = match (lstm, tp) {
                        (false, _) => none,
                        (true, Some(tp)) => e.at(c.extra, tp * nh),
                        (true, None) => e.at(cx, state),
                    };
                    let extra = if dims.has_extra() {
                        e.at(c.extra, t * nh)
                    } else {
                        none
                    };
                    let args = Args::new()
                        .ptr(e.at(c.gates, t * n * gh))
                        .ptr(extra)
                        .ptr(h_prev)
                        .ptr(c_prev)
                        .ptr(e.at(dout, t * n * dims.d * h))
                        .arg((dims.d * h) as i64)
                        .arg((dir * h) as i64)
                        .ptr(dh_next.ptr())
                        .ptr(dc.ptr())
                        .ptr(e.at(dgx.ptr(), t * n * gh))
                        .ptr(if gru {
                            e.at(dgh.ptr(), t * n * gh)
                        } else {
                            none
                        })
                        .arg(n as i64)
                        .arg(h as i64)
                        .arg(mode_code(op.mode))
                        .arg(clip)
                        .arg(lo)
                        .arg(hi);
                    e.launch(ctx, "rnn_step_backward", nh, args)?;
                    let dq = e.at(dq_all, t * n * gh);
                    let beta = if gru { 1.0 } else { 0.0 };
                    e.gemm(
                        ctx,
                        (false, false),
                        (n, h, gh),
                        (dq, gh),
                        (wh, h),
                        dh_next.ptr(),
                        beta,
                    )?;
                }
                if io.req[2] != OpReq::Null {
                    let out = e.at(io.outputs[2].ptr(), state);
                    e.store(ctx, out, dh_next.ptr(), null(), nh, io.req[2] == OpReq::Add)?;
                }
                if lstm && io.req[3] != OpReq::Null {
                    let out = e.at(io.outputs[3].ptr(), state);
                    e.store(ctx, out, dc.ptr(), null(), nh, io.req[3] == OpReq::Add)?;
                }
                if let Some(dw) = dw {
                    let (dwx, dwh) = (e.at(dw, wx_at), e.at(dw, wh_at));
                    e.gemm(
                        ctx,
                        (true, false),
                        (gh, i_l, tn),
                        (dgx.ptr(), gh),
                        (input, i_l),
                        dwx,
                        1.0,
                    )?;
                    if dims.t > 0 {
                        let later = (dims.t - 1) * n;
                        let (first, rest_a, rest_b) = if dir == 0 {
                            (dq_all, e.at(dq_all, n * gh), c.hs as *const u8)
                        } else {
                            (
                                e.at(dq_all, later * gh),
                                dq_all,
                                e.at(c.hs, nh) as *const u8,
                            )
                        };
                        e.gemm(
                            ctx,
                            (true, false),
                            (gh, h, later),
                            (rest_a, gh),
                            (rest_b, h),
                            dwh,
                            1.0,
                        )?;
                        e.gemm(
                            ctx,
                            (true, false),
                            (gh, h, n),
                            (first, gh),
                            (e.at(hx, state), h),
                            dwh,
                            1.0,
                        )?;
                    }
                    let (dbx, dbh) = (e.at(dw, bx_at), e.at(dw, bh_at));
                    e.gemm(
                        ctx,
                        (false, false),
                        (1, gh, tn),
                        (ones.ptr(), tn),
                        (dgx.ptr(), gh),
                        dbx,
                        1.0,
                    )?;
                    e.gemm(
                        ctx,
                        (false, false),
                        (1, gh, tn),
                        (ones.ptr(), tn),
                        (dq_all, gh),
                        dbh,
                        1.0,
                    )?;
                }
                if let Some(dst) = dx_dst {
                    let add = dir > 0 || (l == 0 && io.req[0] == OpReq::Add);
                    let beta = if add { 1.0 } else { 0.0 };
                    e.gemm(
                        ctx,
                        (false, false),
                        (tn, i_l, gh),
                        (dgx.ptr(), gh),
                        (wx, i_l),
                        dst,
                        beta,
                    )?;
                }
            }
            if l > 0 {
                let mask = mask_ptr(&e, &dims, reserve, l - 1);
                if !mask.is_null() {
                    e.store(ctx, dprev, dprev, mask, lo_len, false)?;
                }
                std::mem::swap(&mut dcur, &mut dprev);
            }
        }
        Ok(())
    }
}

/// Registers the GPU kernels of `RNN` and its backward.
pub(crate) fn register_kernels(k: &mut Kernels) {
    super::add::<Rnn>(k);
    super::add::<RnnBackward>(k);
}
