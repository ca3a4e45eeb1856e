//! `Deconvolution` (transposed convolution, 1-D to 3-D) by GEMM and col2im, and its
//! backward operator.
//!
//! The output is the image a convolution with the same window would read: its column
//! matrix is `wᵀ·x` per group, folded back with col2im.

use super::args::{ConvArgs, COMMON};
use super::batch::{for_batch, reduce_partials, Chunked, Sink};
use super::geometry::{check_data_ndim, to3, window_tuple, Dims3};
use super::im2col::{col2im, im2col, ColGeom};
use super::scratch::with_scratch;
use crate::error::{Error, Result};
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::{
    assign_shape, check_inputs, Attrs, Grad, Gradient, OpContext, OpDef, OpRef, OpReq, Operator,
    ParamList, Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

#[derive(Debug, Clone)]
struct Deconvolution {
    args: ConvArgs,
    adj: Vec<usize>,
    /// Output extents; all zero (or empty) means unset.
    target: Vec<usize>,
}

/// The sizes of one deconvolution: `geom` unfolds an output sample (the image) onto the
/// grid of input positions.
#[derive(Debug, Clone, Copy)]
struct Plan {
    batch: usize,
    in_channels: usize,
    groups: usize,
    geom: ColGeom,
}

impl Plan {
    fn in_len(&self) -> usize {
        self.in_channels * self.geom.cols()
    }

    fn out_len(&self) -> usize {
        self.geom.image_len()
    }

    fn c_group(&self) -> usize {
        self.in_channels / self.groups
    }

    fn k_group(&self) -> usize {
        self.geom.rows() / self.groups
    }

    fn work(&self) -> usize {
        self.batch * self.c_group() * self.geom.rows() * self.geom.cols()
    }
}

impl Deconvolution {
    /// Padding and output adjustment per dimension, as MXNet derives them from
    /// `target_shape` when it is set.
    fn pad_adj(&self, input: &[usize]) -> Result<(Vec<usize>, Vec<usize>)> {
        let a = &self.args;
        if !self.target.iter().any(|&t| t != 0) {
            return Ok((a.pad.clone(), self.adj.clone()));
        }
        let win = a.window(&a.pad);
        let off = 3 - a.nd();
        let mut pad = Vec::new();
        let mut adj = Vec::new();
        for (i, (&x, &t)) in input.iter().zip(&self.target).enumerate() {
            let full = a.stride[i] * (x.max(1) - 1) + win.span(off + i);
            if full < t {
                return Err(Error::Value(format!(
                    "Deconvolution: target_shape {} is too big for data extent {x} along spatial axis {i} (at most {full})",
                    fmt_shape(&self.target)
                )));
            }
            adj.push((full - t) % 2);
            pad.push((full - t).div_ceil(2));
        }
        Ok((pad, adj))
    }

    fn plan(&self, data: &[usize]) -> Result<Plan> {
        let a = &self.args;
        let nd = a.nd();
        check_data_ndim("Deconvolution", data, nd)?;
        let channels = data[1];
        if !channels.is_multiple_of(a.num_group) {
            return Err(Error::Value(format!(
                "Deconvolution: input channels ({channels}) must be divisible by num_group ({}), data shape {}",
                a.num_group,
                fmt_shape(data)
            )));
        }
        let (pad, adj) = self.pad_adj(&data[2..])?;
        let win = a.window(&pad);
        let grid = to3(&data[2..], 1);
        let mut image: Dims3 = [1; 3];
        for i in 0..nd {
            let j = 3 - nd + i;
            if adj[i] >= a.stride[i] {
                return Err(Error::Value(format!(
                    "Deconvolution: adj ({}) must be smaller than stride ({}) along spatial axis {i}",
                    adj[i], a.stride[i]
                )));
            }
            let full = a.stride[i] * (grid[j].max(1) - 1) + win.span(j) + adj[i];
            if full < 2 * pad[i] || grid[j] == 0 {
                return Err(Error::Value(format!(
                    "Deconvolution: padding {} leaves no output along spatial axis {i}, data shape {}",
                    pad[i],
                    fmt_shape(data)
                )));
            }
            image[j] = full - 2 * pad[i];
        }
        Ok(Plan {
            batch: data[0],
            in_channels: channels,
            groups: a.num_group,
            geom: ColGeom {
                channels: a.num_filter,
                input: image,
                output: grid,
                win,
            },
        })
    }

    fn shapes(&self, data: &[usize]) -> Result<(Shape, Shape, Shape)> {
        let p = self.plan(data)?;
        let a = &self.args;
        let mut w = Shape::from_slice(&[data[1], a.num_filter / a.num_group]);
        w.extend_from_slice(&a.kernel);
        let mut out = Shape::from_slice(&[data[0], a.num_filter]);
        out.extend_from_slice(&p.geom.input[3 - a.nd()..]);
        Ok((w, Shape::from_slice(&[a.num_filter]), out))
    }
}

impl Operator for Deconvolution {
    fn name(&self) -> &'static str {
        "Deconvolution"
    }

    fn input_names(&self) -> Option<Vec<String>> {
        Some(self.args.input_names())
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("Deconvolution", inputs, self.args.num_inputs())?;
        let (w, b, out) = self.shapes(&inputs[0])?;
        assign_shape("Deconvolution", "weight", &mut Some(inputs[1].clone()), &w)?;
        if !self.args.no_bias {
            assign_shape("Deconvolution", "bias", &mut Some(inputs[2].clone()), &b)?;
        }
        Ok(vec![out])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        if inputs.len() != self.args.num_inputs() {
            return Err(Error::Value(format!(
                "Deconvolution: expected {} input(s), got {}",
                self.args.num_inputs(),
                inputs.len()
            )));
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let (w, b, out) = self.shapes(&data)?;
        assign_shape("Deconvolution", "weight", &mut inputs[1], &w)?;
        if !self.args.no_bias {
            assign_shape("Deconvolution", "bias", &mut inputs[2], &b)?;
        }
        assign_shape("Deconvolution", "output", &mut outputs[0], &out)
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(DeconvolutionBackward { fwd: self.clone() });
        Gradient::simple(op, &[0, 1], &[], self.args.num_inputs())
    }
}

impl CpuKernel for Deconvolution {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let p = self.plan(&inputs[0].shape)?;
        let add = req[0] == OpReq::Add;
        dispatch_float!("Deconvolution", inputs[0].dtype, T => {
            let bias = (!self.args.no_bias).then(|| inputs[2].slice::<T>());
            forward_kernel::<T>(
                &p,
                inputs[0].slice(),
                inputs[1].slice(),
                bias,
                outputs[0].slice_mut(),
                add,
            );
        });
        Ok(())
    }
}

fn forward_kernel<T: Num>(p: &Plan, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], add: bool) {
    let (in_len, cols) = (p.in_len(), p.geom.cols());
    let (cg, kg) = (p.c_group(), p.k_group());
    let product = MatMul::new(cg, kg, true, cg, cols, false).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let one = |n: usize, y: &mut [T], threads: bool| {
        let x = &x[n * in_len..(n + 1) * in_len];
        let gemms = |col: &mut [T], add: bool| {
            for g in 0..p.groups {
                matmul(
                    &product,
                    &w[g * cg * kg..(g + 1) * cg * kg],
                    &x[g * cg * cols..(g + 1) * cg * cols],
                    &mut col[g * kg * cols..(g + 1) * kg * cols],
                    add,
                    threads,
                );
            }
        };
        if identity {
            gemms(y, add);
        } else {
            with_scratch::<T, _>(p.geom.rows() * cols, |col| {
                gemms(col, false);
                if !add {
                    y.fill(T::ZERO);
                }
                col2im(&p.geom, col, y);
            });
        }
        if let Some(b) = bias {
            let plane = p.out_len() / b.len().max(1);
            for (row, &bv) in y.chunks_mut(plane.max(1)).zip(b) {
                row.iter_mut().for_each(|v| *v = v.add(bv));
            }
        }
    };
    for_batch(p.batch, p.work(), y, p.out_len(), one);
}

fn backward_kernel<T: Num>(
    p: &Plan,
    dy: &[T],
    x: &[T],
    w: &[T],
    dx: Sink<T>,
    dw: Sink<T>,
    db: Sink<T>,
) {
    let (in_len, out_len, cols, rows) = (p.in_len(), p.out_len(), p.geom.cols(), p.geom.rows());
    let (cg, kg) = (p.c_group(), p.k_group());
    let dx_product = MatMul::new(cg, kg, false, kg, cols, false).expect("inner sizes agree");
    let dw_product = MatMul::new(cg, cols, false, kg, cols, true).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
    let filters = p.geom.channels;
    let plane = out_len / filters.max(1);
    let partials = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len).run(
        |samples, mut dx_chunk| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.in_channels * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { filters } else { 0 }];
            let threads = samples.len() == p.batch;
            with_scratch::<T, _>(rows * cols, |buf| {
                for (i, n) in samples.clone().enumerate() {
                    let dy = &dy[n * out_len..(n + 1) * out_len];
                    let x = &x[n * in_len..(n + 1) * in_len];
                    let col: &[T] = if identity {
                        dy
                    } else {
                        im2col(&p.geom, dy, buf);
                        buf
                    };
                    if let Some(dx) = dx_chunk.as_deref_mut() {
                        let dx = &mut dx[i * in_len..(i + 1) * in_len];
                        for g in 0..p.groups {
                            matmul(
                                &dx_product,
                                &w[g * cg * kg..(g + 1) * cg * kg],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dx[g * cg * cols..(g + 1) * cg * cols],
                                dx_add,
                                threads,
                            );
                        }
                    }
                    if need_dw {
                        for g in 0..p.groups {
                            matmul(
                                &dw_product,
                                &x[g * cg * cols..(g + 1) * cg * cols],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dw_part[g * cg * kg..(g + 1) * cg * kg],
                                true,
                                threads,
                            );
                        }
                    }
                    if need_db {
                        for (acc, row) in db_part.iter_mut().zip(dy.chunks(plane.max(1))) {
                            *acc = row.iter().fold(*acc, |s, &v| s.add(v));
                        }
                    }
                }
            });
            (dw_part, db_part)
        },
    );
    let (dws, dbs): (Vec<_>, Vec<_>) = partials.into_iter().unzip();
    reduce_partials(dw, &dws);
    reduce_partials(db, &dbs);
}

/// `_backward_Deconvolution`: inputs (output gradient, data, weight); outputs the
/// gradients of data, weight and, with a bias, bias.
struct DeconvolutionBackward {
    fwd: Deconvolution,
}

impl Operator for DeconvolutionBackward {
    fn name(&self) -> &'static str {
        "_backward_Deconvolution"
    }

    fn num_outputs(&self) -> usize {
        self.fwd.args.num_inputs()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_backward_Deconvolution", inputs, 3)?;
        let (w, b, out) = self.fwd.shapes(&inputs[1])?;
        let name = "_backward_Deconvolution";
        assign_shape(name, "weight", &mut Some(inputs[2].clone()), &w)?;
        assign_shape(name, "output gradient", &mut Some(inputs[0].clone()), &out)?;
        let mut v = vec![inputs[1].clone(), w];
        if !self.fwd.args.no_bias {
            v.push(b);
        }
        Ok(v)
    }
}

impl CpuKernel for DeconvolutionBackward {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        let p = self.fwd.plan(&inputs[1].shape)?;
        dispatch_float!("_backward_Deconvolution", inputs[1].dtype, T => {
            let sink = |i: usize| Sink::new(outputs.get(i), req.get(i).copied());
            backward_kernel::<T>(
                &p,
                inputs[0].slice(),
                inputs[1].slice(),
                inputs[2].slice(),
                sink(0),
                sink(1),
                sink(2),
            );
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Deconvolution>(k);
    cpu::add::<DeconvolutionBackward>(k);
}

const EXTRA: &[&str] = &["adj", "target_shape"];

fn create(attrs: &Attrs) -> Result<OpRef> {
    let args = ConvArgs::parse("Deconvolution", attrs, EXTRA, true)?;
    let names: Vec<&str> = COMMON.iter().chain(EXTRA).copied().collect();
    let p = Params::new("Deconvolution", attrs, &names)?;
    let nd = args.nd();
    let adj = window_tuple(&p, "adj", nd, 0, 0)?;
    let target = window_tuple(&p, "target_shape", nd, 0, 0)?;
    Ok(Arc::new(Deconvolution { args, adj, target }))
}

/// The argument names `Deconvolution` takes.
const PARAMS: &[&str] = &[
    "kernel",
    "stride",
    "dilate",
    "pad",
    "num_filter",
    "num_group",
    "workspace",
    "no_bias",
    "cudnn_tune",
    "cudnn_off",
    "layout",
    "adj",
    "target_shape",
];

/// Registers `Deconvolution`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Deconvolution",
        aliases: &[],
        inputs: &["data", "weight", "bias"],
        variadic: false,
        params: ParamList::Names(PARAMS),
        doc: "Computes 1D, 2D or 3D transposed convolution of the input tensor.",
        create: Box::new(create),
    });
}
