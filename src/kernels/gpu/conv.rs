//! GPU kernels of `Convolution` and `Deconvolution` and their backward (`conv.cu`): the
//! column matrices of a run of images unfolded by im2col into scratch memory, the
//! products in cuBLAS (batched over the images of a run), the folding back by a gathering
//! col2im and the weight gradient summed over per-image products in image order; no
//! atomics, so results are the same on every run.

use super::launch::{float_suffix, launch_n, Args, BLOCK};
use super::temp::Temp;
use crate::cuda::blas::{gemm, RowMajorGemm};
use crate::cuda::runtime::for_context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::nn::conv_layer::ConvLayer;
use crate::op::nn::convolution::{Convolution, ConvolutionBackward};
use crate::op::nn::deconvolution::{Deconvolution, DeconvolutionBackward};
use crate::op::nn::geometry::{volume, ColGeom};
use crate::op::{OpContext, OpReq};

const MODULE: &str = "conv";
/// Most bytes of column matrices one run of images unfolds at once (at least one image).
const RUN_BYTES: usize = 1 << 28;

/// `struct rsmx_col_geom`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Geom {
    channels: i64,
    input: [i32; 3],
    output: [i32; 3],
    kernel: [i32; 3],
    stride: [i32; 3],
    dilate: [i32; 3],
    pad: [i32; 3],
}

/// Three extents as the kernels take them, or an error naming `op` if one (or the
/// product of the first two, which the kernels index by) does not fit.
pub(super) fn dims(op: &str, d: &[usize; 3]) -> Result<[i32; 3]> {
    let too_big = || {
        Error::Value(format!(
            "{op}: extents {d:?} are too large for the GPU kernel"
        ))
    };
    if i32::try_from(volume(d)).is_err() {
        return Err(too_big());
    }
    let mut out = [0; 3];
    for (o, &v) in out.iter_mut().zip(d) {
        *o = i32::try_from(v).map_err(|_| too_big())?;
    }
    Ok(out)
}

impl Geom {
    fn new(op: &str, g: &ColGeom) -> Result<Geom> {
        let w = &g.win;
        Ok(Geom {
            channels: g.channels as i64,
            input: dims(op, &g.input)?,
            output: dims(op, &g.output)?,
            kernel: dims(op, &w.kernel)?,
            stride: dims(op, &w.stride)?,
            dilate: dims(op, &w.dilate)?,
            pad: dims(op, &w.pad)?,
        })
    }
}

/// A product of `batch` `m×k` by `k×n` matrices, `strides` (a, b, c) elements apart, the
/// operands stored transposed as `ta`, `tb` say.
#[allow(clippy::too_many_arguments)]
fn mm(
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    [stride_a, stride_b, stride_c]: [usize; 3],
) -> RowMajorGemm {
    RowMajorGemm {
        ta,
        tb,
        m,
        n,
        k,
        lda: if ta { m } else { k },
        ldb: if tb { k } else { n },
        ldc: n,
        batch,
        stride_a,
        stride_b,
        stride_c,
    }
}

/// The device work of one layer run: its op, stream and element type.
struct Dev<'a, 'c> {
    ctx: &'a OpContext<'c>,
    op: &'static str,
    dtype: DType,
    sfx: &'static str,
}

impl<'a, 'c> Dev<'a, 'c> {
    fn new(ctx: &'a OpContext<'c>, op: &'static str, dtype: DType) -> Result<Dev<'a, 'c>> {
        Ok(Dev {
            ctx,
            op,
            dtype,
            sfx: float_suffix(op, dtype)?,
        })
    }

    /// `p` moved on by `elems` elements (device memory: only the address is computed).
    fn at(&self, p: *mut u8, elems: usize) -> *mut u8 {
        p.wrapping_add(elems * self.dtype.size())
    }

    /// Images per run when each unfolds into `per_image` elements.
    fn run_len(&self, batch: usize, per_image: usize) -> usize {
        (RUN_BYTES / (per_image * self.dtype.size()).max(1)).clamp(1, batch.max(1))
    }

    /// Scratch memory for `elems` elements.
    fn temp(&self, elems: usize) -> Result<Temp> {
        Temp::new(self.ctx, elems * self.dtype.size())
    }

    /// `c (=|+=) op(a) · op(b)`.
    fn gemm(&self, g: RowMajorGemm, a: *mut u8, b: *mut u8, c: *mut u8, add: bool) -> Result<()> {
        let (rt, dev) = for_context(self.ctx.device)?;
        let stream = self.ctx.stream.ok_or_else(|| {
            Error::Runtime(format!(
                "{}: a matrix product ran outside a GPU op",
                self.op
            ))
        })?;
        let beta = if add { 1.0 } else { 0.0 };
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
        .map_err(|e| e.in_op(self.op))
    }

    fn launch(&self, kernel: &str, n: usize, args: Args) -> Result<()> {
        launch_n(self.ctx, MODULE, &format!("{kernel}_{}", self.sfx), n, args)
    }

    /// The column matrices of `images` images from `img` into `col`.
    fn im2col(&self, g: &Geom, col: *mut u8, img: *mut u8, elems: usize) -> Result<()> {
        let args = Args::new().ptr(col).ptr(img).arg(elems as i64).arg(*g);
        self.launch("im2col", elems, args)
    }

    /// `img (=|+=)` the folding of `col`, over `elems` image elements.
    fn col2im(&self, g: &Geom, img: *mut u8, col: *mut u8, elems: usize, add: bool) -> Result<()> {
        let args = Args::new()
            .ptr(img)
            .ptr(col)
            .arg(elems as i64)
            .arg(*g)
            .arg(i32::from(add));
        self.launch("col2im", elems, args)
    }

    /// `y += bias` per channel over `n` elements, `plane` a channel.
    fn bias_add(&self, y: *mut u8, b: *mut u8, n: usize, plane: usize, ch: usize) -> Result<()> {
        let args = Args::new()
            .ptr(y)
            .ptr(b)
            .arg(n as i64)
            .arg(plane.max(1) as i64)
            .arg(ch.max(1) as i64);
        self.launch("bias_add", n, args)
    }

    /// `db (=|+=)` the sums of `dy` per channel over `images` images.
    fn bias_grad(
        &self,
        db: *mut u8,
        dy: *mut u8,
        images: usize,
        ch: usize,
        plane: usize,
        add: bool,
    ) -> Result<()> {
        let args = Args::new()
            .ptr(db)
            .ptr(dy)
            .arg(images as i64)
            .arg(ch as i64)
            .arg(plane as i64)
            .arg(i32::from(add));
        // One block per channel (the grid may be capped; blocks loop).
        self.launch("bias_grad", ch * BLOCK as usize, args)
    }

    /// `out (=|+=)` the sum of `images` arrays of `len` elements at `parts`, in order.
    fn sum_images(
        &self,
        out: *mut u8,
        parts: *mut u8,
        len: usize,
        images: usize,
        add: bool,
    ) -> Result<()> {
        let args = Args::new()
            .ptr(out)
            .ptr(parts)
            .arg(len as i64)
            .arg(images as i64)
            .arg(i32::from(add));
        self.launch("sum_images", len, args)
    }

    /// Zeros `n` elements.
    fn zero(&self, p: *mut u8, n: usize) -> Result<()> {
        let args = Args::new().ptr(p).arg(n as i64).arg(0.0f64);
        launch_n(self.ctx, "init", &format!("fill_{}", self.sfx), n, args)
    }
}

/// Output `i`'s pointer and request, `None` when not wanted.
fn sink(io: &Blobs, i: usize) -> Option<(*mut u8, bool)> {
    match (io.outputs.get(i), io.req.get(i)) {
        (Some(b), Some(&r)) if r != OpReq::Null => Some((b.ptr(), r == OpReq::Add)),
        _ => None,
    }
}

/// A weight gradient written for an empty batch is zero.
fn first_add(d: &Dev<'_, '_>, dw: Option<(*mut u8, bool)>, len: usize, batch: usize) -> Result<()> {
    if let Some((p, false)) = dw {
        if batch == 0 {
            d.zero(p, len)?;
        }
    }
    Ok(())
}

/// The weight gradient, a sum over the batch, in parts: the per-image products of a few
/// images at a time go to scratch memory, then are added up in image order, so the result
/// is the same on every run.
struct WeightGrad {
    dw: *mut u8,
    add: bool,
    /// Elements of the weight.
    len: usize,
    /// Images per batch of products.
    cap: usize,
    parts: Temp,
}

impl WeightGrad {
    fn new(
        d: &Dev,
        dw: Option<(*mut u8, bool)>,
        len: usize,
        batch: usize,
        run: usize,
    ) -> Result<Option<WeightGrad>> {
        let Some((dw, add)) = dw else {
            return Ok(None);
        };
        let cap = d.run_len(batch, len).min(run);
        Ok(Some(WeightGrad {
            dw,
            add,
            len,
            cap,
            parts: d.temp(cap * len)?,
        }))
    }

    /// Adds images `first..first + count`'s products `lhs_g · src_gᵀ` per group: `lhs`
    /// holds a `rows × cols` matrix per group, `lhs_len` elements per image; `src` the
    /// `kg × cols` columns per group of the run's images, `stride` elements apart.
    #[allow(clippy::too_many_arguments)]
    fn products(
        &self,
        d: &Dev,
        first: usize,
        count: usize,
        groups: usize,
        (rows, kg, cols): (usize, usize, usize),
        (lhs, lhs_len): (*mut u8, usize),
        (src, stride): (*mut u8, usize),
    ) -> Result<()> {
        self.run(d, first, count, |s0, sb, parts| {
            for g in 0..groups {
                d.gemm(
                    mm(
                        false,
                        true,
                        rows,
                        kg,
                        cols,
                        sb,
                        [lhs_len, stride, rows * kg * groups],
                    ),
                    d.at(lhs, (first + s0) * lhs_len + g * rows * cols),
                    d.at(src, s0 * stride + g * kg * cols),
                    d.at(parts, g * rows * kg),
                    false,
                )?;
            }
            Ok(())
        })
    }

    /// Adds the products of images `first..first + count` of the batch, images `0..count`
    /// of the current run: `product(start, n, parts)` writes those of the run's images
    /// `start..start + n` to `parts`, one weight-sized array each.
    fn run(
        &self,
        d: &Dev,
        first: usize,
        count: usize,
        product: impl Fn(usize, usize, *mut u8) -> Result<()>,
    ) -> Result<()> {
        for s0 in (0..count).step_by(self.cap) {
            let sb = self.cap.min(count - s0);
            product(s0, sb, self.parts.ptr())?;
            let add = self.add || first + s0 > 0;
            d.sum_images(self.dw, self.parts.ptr(), self.len, sb, add)?;
        }
        Ok(())
    }
}

impl super::GpuKernel for Convolution {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&io.inputs[0].shape)?;
        let d = Dev::new(ctx, Self::NAME, io.inputs[0].dtype)?;
        let geo = Geom::new(Self::NAME, &p.geom)?;
        let (rows, cols) = (p.geom.rows(), p.geom.cols());
        let (in_len, out_len) = (p.geom.image_len(), p.filters * cols);
        let (fg, kg) = (p.filters / p.groups, rows / p.groups);
        let add = io.req[0] == OpReq::Add;
        let (x, w, y) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.outputs[0].ptr());
        if p.batch == 0 || out_len == 0 {
            return Ok(());
        }
        let run = d.run_len(p.batch, rows * cols);
        let temp = if p.geom.win.is_identity() {
            None
        } else {
            Some(d.temp(run * rows * cols)?)
        };
        for n0 in (0..p.batch).step_by(run) {
            let nb = run.min(p.batch - n0);
            let (src, stride) = match &temp {
                None => (d.at(x, n0 * in_len), in_len),
                Some(t) => {
                    d.im2col(&geo, t.ptr(), d.at(x, n0 * in_len), nb * rows * cols)?;
                    (t.ptr(), rows * cols)
                }
            };
            for g in 0..p.groups {
                d.gemm(
                    mm(false, false, fg, cols, kg, nb, [0, stride, out_len]),
                    d.at(w, g * fg * kg),
                    d.at(src, g * kg * cols),
                    d.at(y, n0 * out_len + g * fg * cols),
                    add,
                )?;
            }
        }
        if !self.args.no_bias {
            let n = p.batch * out_len;
            d.bias_add(y, io.inputs[2].ptr(), n, cols, p.filters)?;
        }
        Ok(())
    }
}

impl super::GpuKernel for ConvolutionBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = Convolution::BACKWARD;
        let p = self.fwd.plan(&io.inputs[1].shape)?;
        let d = Dev::new(ctx, name, io.inputs[1].dtype)?;
        let geo = Geom::new(name, &p.geom)?;
        let (rows, cols) = (p.geom.rows(), p.geom.cols());
        let (in_len, out_len) = (p.geom.image_len(), p.filters * cols);
        let (fg, kg) = (p.filters / p.groups, rows / p.groups);
        let (dy, x, w) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.inputs[2].ptr());
        let (dx, dw) = (sink(&io, 0), sink(&io, 1));
        let db = if self.fwd.args.no_bias {
            None
        } else {
            sink(&io, 2)
        };
        first_add(&d, dw, p.filters * kg, p.batch)?;
        if let Some((db, add)) = db {
            d.bias_grad(db, dy, p.batch, p.filters, cols, add)?;
        }
        if p.batch == 0 || (dx.is_none() && dw.is_none()) {
            return Ok(());
        }
        let identity = p.geom.win.is_identity();
        let run = d.run_len(p.batch, rows * cols);
        let temp = if identity {
            None
        } else {
            Some(d.temp(run * rows * cols)?)
        };
        let col = temp.as_ref().map_or(std::ptr::null_mut(), Temp::ptr);
        let wg = WeightGrad::new(&d, dw, p.filters * kg, p.batch, run)?;
        for n0 in (0..p.batch).step_by(run) {
            let nb = run.min(p.batch - n0);
            if let Some(wg) = &wg {
                let (src, stride) = if identity {
                    (d.at(x, n0 * in_len), in_len)
                } else {
                    d.im2col(&geo, col, d.at(x, n0 * in_len), nb * rows * cols)?;
                    (col, rows * cols)
                };
                wg.products(
                    &d,
                    n0,
                    nb,
                    p.groups,
                    (fg, kg, cols),
                    (dy, out_len),
                    (src, stride),
                )?;
            }
            if let Some((dx, add)) = dx {
                let dx = d.at(dx, n0 * in_len);
                let (target, stride) = if identity {
                    (dx, in_len)
                } else {
                    (col, rows * cols)
                };
                for g in 0..p.groups {
                    d.gemm(
                        mm(true, false, kg, cols, fg, nb, [0, out_len, stride]),
                        d.at(w, g * fg * kg),
                        d.at(dy, n0 * out_len + g * fg * cols),
                        d.at(target, g * kg * cols),
                        identity && add,
                    )?;
                }
                if !identity {
                    d.col2im(&geo, dx, col, nb * in_len, add)?;
                }
            }
        }
        Ok(())
    }
}

impl super::GpuKernel for Deconvolution {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&io.inputs[0].shape)?;
        let d = Dev::new(ctx, Self::NAME, io.inputs[0].dtype)?;
        let geo = Geom::new(Self::NAME, &p.geom)?;
        let (rows, cols) = (p.geom.rows(), p.geom.cols());
        let (in_len, out_len) = (p.in_channels * cols, p.geom.image_len());
        let (cg, kg) = (p.in_channels / p.groups, rows / p.groups);
        let add = io.req[0] == OpReq::Add;
        let (x, w, y) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.outputs[0].ptr());
        if p.batch == 0 || out_len == 0 {
            return Ok(());
        }
        let identity = p.geom.win.is_identity();
        let run = d.run_len(p.batch, rows * cols);
        let temp = if identity {
            None
        } else {
            Some(d.temp(run * rows * cols)?)
        };
        let col = temp.as_ref().map_or(std::ptr::null_mut(), Temp::ptr);
        for n0 in (0..p.batch).step_by(run) {
            let nb = run.min(p.batch - n0);
            let (target, stride) = if identity {
                (d.at(y, n0 * out_len), out_len)
            } else {
                (col, rows * cols)
            };
            for g in 0..p.groups {
                d.gemm(
                    mm(true, false, kg, cols, cg, nb, [0, in_len, stride]),
                    d.at(w, g * cg * kg),
                    d.at(x, n0 * in_len + g * cg * cols),
                    d.at(target, g * kg * cols),
                    identity && add,
                )?;
            }
            if !identity {
                d.col2im(&geo, d.at(y, n0 * out_len), col, nb * out_len, add)?;
            }
        }
        if !self.args.no_bias {
            let filters = p.geom.channels;
            d.bias_add(
                y,
                io.inputs[2].ptr(),
                p.batch * out_len,
                volume(&p.geom.input),
                filters,
            )?;
        }
        Ok(())
    }
}

impl super::GpuKernel for DeconvolutionBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = Deconvolution::BACKWARD;
        let p = self.fwd.plan(&io.inputs[1].shape)?;
        let d = Dev::new(ctx, name, io.inputs[1].dtype)?;
        let geo = Geom::new(name, &p.geom)?;
        let (rows, cols) = (p.geom.rows(), p.geom.cols());
        let (in_len, out_len) = (p.in_channels * cols, p.geom.image_len());
        let (cg, kg) = (p.in_channels / p.groups, rows / p.groups);
        let (dy, x, w) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.inputs[2].ptr());
        let (dx, dw) = (sink(&io, 0), sink(&io, 1));
        let db = if self.fwd.args.no_bias {
            None
        } else {
            sink(&io, 2)
        };
        first_add(&d, dw, p.in_channels * kg, p.batch)?;
        if let Some((db, add)) = db {
            let filters = p.geom.channels;
            d.bias_grad(db, dy, p.batch, filters, volume(&p.geom.input), add)?;
        }
        if p.batch == 0 || (dx.is_none() && dw.is_none()) {
            return Ok(());
        }
        let identity = p.geom.win.is_identity();
        let run = d.run_len(p.batch, rows * cols);
        let temp = if identity {
            None
        } else {
            Some(d.temp(run * rows * cols)?)
        };
        let col = temp.as_ref().map_or(std::ptr::null_mut(), Temp::ptr);
        let wg = WeightGrad::new(&d, dw, p.in_channels * kg, p.batch, run)?;
        for n0 in (0..p.batch).step_by(run) {
            let nb = run.min(p.batch - n0);
            let (src, stride) = if identity {
                (d.at(dy, n0 * out_len), out_len)
            } else {
                d.im2col(&geo, col, d.at(dy, n0 * out_len), nb * rows * cols)?;
                (col, rows * cols)
            };
            if let Some((dx, add)) = dx {
                for g in 0..p.groups {
                    d.gemm(
                        mm(false, false, cg, cols, kg, nb, [0, stride, in_len]),
                        d.at(w, g * cg * kg),
                        d.at(src, g * kg * cols),
                        d.at(dx, n0 * in_len + g * cg * cols),
                        add,
                    )?;
                }
            }
            if let Some(wg) = &wg {
                wg.products(
                    &d,
                    n0,
                    nb,
                    p.groups,
                    (cg, kg, cols),
                    (x, in_len),
                    (src, stride),
                )?;
            }
        }
        Ok(())
    }
}

/// Registers the GPU kernels of the convolution layers.
pub fn register_kernels(k: &mut Kernels) {
    super::add::<Convolution>(k);
    super::add::<ConvolutionBackward>(k);
    super::add::<Deconvolution>(k);
    super::add::<DeconvolutionBackward>(k);
}
