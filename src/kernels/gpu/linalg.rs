//! GPU kernels of the matrix products through cuBLAS: `dot`, `batch_dot`,
//! `FullyConnected` and its backward (bias added by the broadcasting kernel, its gradient
//! as a product with a vector of ones).

use super::elemwise;
use super::launch::{launch_n, suffix, Args};
use super::temp::Temp;
use crate::cuda::blas::{gemm, RowMajorGemm};
use crate::cuda::runtime::for_context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::ndarray::TBlob;
use crate::op::elemwise::binary::BinaryKind;
use crate::op::linalg::{BatchDot, Dot};
use crate::op::nn::dense::{Fc, FcBackward};
use crate::op::{OpContext, OpReq, Operator};
use crate::shape::Shape;

/// `c (=|+=) op(a) · op(b)` as `req` says, on the op's stream.
fn product(
    ctx: &OpContext,
    g: RowMajorGemm,
    a: &TBlob,
    b: &TBlob,
    c: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    if !c.dtype.is_float() {
        return looped(ctx, &g, a, b, c, req);
    }
    let beta = if req == OpReq::Add { 1.0 } else { 0.0 };
    let (rt, dev) = for_context(ctx.device)?;
    let stream = ctx
        .stream
        .ok_or_else(|| Error::Runtime("a matrix product ran outside a GPU op".into()))?;
    gemm(
        rt.blas()?,
        dev,
        stream,
        c.dtype,
        &g,
        (1.0, beta),
        a.ptr(),
        b.ptr(),
        c.ptr(),
    )
}

/// `product` for the integer dtypes, which cuBLAS lacks: a thread per output element
/// (`linalg.cu`), wrapping as the CPU does.
fn looped(
    ctx: &OpContext,
    g: &RowMajorGemm,
    a: &TBlob,
    b: &TBlob,
    c: &TBlob,
    req: OpReq,
) -> Result<()> {
    let n = g.batch * g.m * g.n;
    if n == 0 {
        return Ok(());
    }
    let dims = [g.batch, g.m, g.n, g.k, g.lda, g.ldb, g.ldc];
    let strides = [g.stride_a, g.stride_b, g.stride_c];
    let mut args = Args::new().ptr(c.ptr()).ptr(a.ptr()).ptr(b.ptr());
    for v in dims.into_iter().chain(strides) {
        args = args.arg(v as i64);
    }
    let args = args
        .arg(g.ta as i32)
        .arg(g.tb as i32)
        .arg((req == OpReq::Add) as i32);
    let kernel = format!("matmul_{}", suffix("dot", c.dtype)?);
    launch_n(ctx, "linalg", &kernel, n, args)
}

/// A product of one `m×k` by `k×n`, the operands stored transposed as `ta`, `tb` say.
fn single(ta: bool, tb: bool, m: usize, n: usize, k: usize) -> RowMajorGemm {
    RowMajorGemm {
        ta,
        tb,
        m,
        n,
        k,
        lda: if ta { m } else { k },
        ldb: if tb { k } else { n },
        ldc: n,
        batch: 1,
        stride_a: m * k,
        stride_b: k * n,
        stride_c: m * n,
    }
}

impl super::GpuKernel for Dot {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (a, b) = (&io.inputs[0], &io.inputs[1]);
        let (d, _) = self.plan(&a.shape, &b.shape).map_err(|e| e.in_op("dot"))?;
        let g = single(self.ta, self.tb, d.m, d.n, d.k);
        product(ctx, g, a, b, &io.outputs[0], io.req[0]).map_err(|e| e.in_op("dot"))
    }
}

impl super::GpuKernel for BatchDot {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (a, b) = (&io.inputs[0], &io.inputs[1]);
        let (d, batch, _) = self
            .plan(&a.shape, &b.shape)
            .map_err(|e| e.in_op("batch_dot"))?;
        let g = RowMajorGemm {
            batch,
            ..single(self.ta, self.tb, d.m, d.n, d.k)
        };
        product(ctx, g, a, b, &io.outputs[0], io.req[0]).map_err(|e| e.in_op("batch_dot"))
    }
}

/// `blob` seen with another shape (same memory).
fn reshaped(blob: &TBlob, shape: &[usize]) -> TBlob {
    TBlob::on_device(
        blob.ptr(),
        Shape::from_slice(shape),
        blob.dtype,
        blob.context(),
    )
}

impl super::GpuKernel for Fc {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let (rows, k) = self.matrix(&io.inputs[0].shape)?;
        let nh = self.num_hidden;
        let out = reshaped(&io.outputs[0], &[rows, nh]);
        product(
            ctx,
            single(false, true, rows, nh, k),
            &io.inputs[0],
            &io.inputs[1],
            &out,
            req,
        )?;
        if !self.no_bias {
            // In place: each output element reads only itself and its column's bias.
            elemwise::binary(
                ctx,
                BinaryKind::Add,
                &out,
                &io.inputs[2],
                &out,
                OpReq::Write,
            )?;
        }
        Ok(())
    }
}

/// A vector of `n` ones of `dtype` in scratch memory.
fn ones(ctx: &OpContext, n: usize, dtype: DType) -> Result<Temp> {
    let t = Temp::new(ctx, n * dtype.size())?;
    let args = Args::new().ptr(t.ptr()).arg(n as i64).arg(1.0f64);
    launch_n(
        ctx,
        "init",
        &format!("fill_{}", suffix("FullyConnected", dtype)?),
        n,
        args,
    )?;
    Ok(t)
}

impl super::GpuKernel for FcBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        let nh = self.0.num_hidden;
        let (rows, k) = self.0.matrix(&io.inputs[1].shape)?;
        let (g, x, w) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let g = reshaped(g, &[rows, nh]);
        // d data = g · W: (rows × nh) · (nh × k).
        let dx = reshaped(&io.outputs[0], &[rows, k]);
        product(
            ctx,
            single(false, false, rows, k, nh),
            &g,
            w,
            &dx,
            io.req[0],
        )
        .map_err(|e| e.in_op(name))?;
        // d weight = gᵀ · X: (nh × rows) · (rows × k).
        let x = reshaped(x, &[rows, k]);
        product(
            ctx,
            single(true, false, nh, k, rows),
            &g,
            &x,
            &io.outputs[1],
            io.req[1],
        )
        .map_err(|e| e.in_op(name))?;
        if !self.0.no_bias && io.req[2] != OpReq::Null {
            // d bias = gᵀ · 1: (nh × rows) · (rows × 1).
            let one = ones(ctx, rows, g.dtype)?;
            let ones_blob = TBlob::on_device(
                one.ptr(),
                Shape::from_slice(&[rows, 1]),
                g.dtype,
                g.context(),
            );
            let db = reshaped(&io.outputs[2], &[nh, 1]);
            product(
                ctx,
                single(true, false, nh, 1, rows),
                &g,
                &ones_blob,
                &db,
                io.req[2],
            )
            .map_err(|e| e.in_op(name))?;
        }
        Ok(())
    }
}

/// `op(x) · op(y)` of stored row-major `x` and `y`, `batch` times; `None` if the inner
/// dimensions differ.
fn stored_gemm(
    x: (usize, usize),
    tx: bool,
    y: (usize, usize),
    ty: bool,
    batch: usize,
) -> Option<RowMajorGemm> {
    let d = crate::op::linalg::MatMul::new(x.0, x.1, tx, y.0, y.1, ty)?;
    Some(RowMajorGemm {
        ta: tx,
        tb: ty,
        m: d.m,
        n: d.n,
        k: d.k,
        lda: x.1,
        ldb: y.1,
        ldc: d.n,
        batch,
        stride_a: x.0 * x.1,
        stride_b: y.0 * y.1,
        stride_c: d.m * d.n,
    })
}

impl super::GpuKernel for crate::op::grad::linalg::DotBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        let (g, a, b) = (&io.inputs[0], &io.inputs[1], &io.inputs[2]);
        let (ta, tb) = (self.ta, self.tb);
        let (sa, sb, batch) = self.stored_operands(ta, tb, &a.shape, &b.shape);
        let bad = || Error::Runtime(format!("{name}: operand shapes do not match"));
        let fwd = stored_gemm(sa, ta, sb, tb, batch).ok_or_else(bad)?;
        let sg = (fwd.m, fwd.n);
        if io.req[0] != OpReq::Null {
            let (p, x, y) = if ta {
                (stored_gemm(sb, tb, sg, true, batch), b, g)
            } else {
                (stored_gemm(sg, false, sb, !tb, batch), g, b)
            };
            product(ctx, p.ok_or_else(bad)?, x, y, &io.outputs[0], io.req[0])
                .map_err(|e| e.in_op(name))?;
        }
        if io.req[1] != OpReq::Null {
            let (p, x, y) = if tb {
                (stored_gemm(sg, true, sa, ta, batch), g, a)
            } else {
                (stored_gemm(sa, !ta, sg, false, batch), a, g)
            };
            product(ctx, p.ok_or_else(bad)?, x, y, &io.outputs[1], io.req[1])
                .map_err(|e| e.in_op(name))?;
        }
        Ok(())
    }
}
