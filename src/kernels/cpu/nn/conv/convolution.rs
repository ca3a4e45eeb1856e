//! `Convolution` (1-D, 2-D and 3-D, grouped, strided, padded, dilated) by im2col and
//! GEMM, and its backward operator.

use super::args::{ConvArgs, COMMON};
use super::batch::{for_batch, reduce_partials, Chunked, Sink};
use super::geometry::{check_data_ndim, to3, Window};
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
    ParamList, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// The sizes of one convolution.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub batch: usize,
    pub filters: usize,
    pub groups: usize,
    /// The unfolding of one sample's input.
    pub geom: ColGeom,
}

impl Plan {
    /// Elements of one input sample.
    fn in_len(&self) -> usize {
        self.geom.image_len()
    }

    /// Elements of one output sample.
    fn out_len(&self) -> usize {
        self.filters * self.geom.cols()
    }

    /// Rows of the column matrix per group.
    fn k_group(&self) -> usize {
        self.geom.rows() / self.groups
    }

    fn f_group(&self) -> usize {
        self.filters / self.groups
    }

    /// Multiply-adds of the forward pass.
    fn work(&self) -> usize {
        self.batch * self.filters * self.k_group() * self.geom.cols()
    }
}

/// Output extent of a convolution along one dimension, or `None` if the dilated kernel
/// does not fit the padded input.
pub fn conv_out(input: usize, win: &Window, i: usize) -> Option<usize> {
    let padded = input + 2 * win.pad[i];
    let span = win.span(i);
    (span <= padded).then(|| (padded - span) / win.stride[i] + 1)
}

/// The `Convolution` operator.
pub struct Convolution {
    args: ConvArgs,
}

impl Convolution {
    /// Checks `data` against the arguments and sizes the convolution.
    fn plan(&self, data: &[usize]) -> Result<Plan> {
        let a = &self.args;
        let nd = a.nd();
        check_data_ndim("Convolution", data, nd)?;
        let channels = data[1];
        if !channels.is_multiple_of(a.num_group) {
            return Err(Error::Value(format!(
                "Convolution: input channels ({channels}) must be divisible by num_group ({}), data shape {}",
                a.num_group,
                fmt_shape(data)
            )));
        }
        let win = a.window(&a.pad);
        let input = to3(&data[2..], 1);
        let mut output = [1; 3];
        for i in 3 - nd..3 {
            output[i] = conv_out(input[i], &win, i).ok_or_else(|| {
                Error::Value(format!(
                    "Convolution: kernel size {} (dilated {}) exceeds input {} padded to {} along spatial axis {}, data shape {}",
                    win.kernel[i],
                    win.span(i),
                    input[i],
                    input[i] + 2 * win.pad[i],
                    i + nd - 3,
                    fmt_shape(data)
                ))
            })?;
        }
        Ok(Plan {
            batch: data[0],
            filters: a.num_filter,
            groups: a.num_group,
            geom: ColGeom {
                channels,
                input,
                output,
                win,
            },
        })
    }

    /// Shapes of weight, bias and output for `data`.
    fn shapes(&self, data: &[usize]) -> Result<(Shape, Shape, Shape)> {
        let p = self.plan(data)?;
        let a = &self.args;
        let mut w = Shape::from_slice(&[a.num_filter, data[1] / a.num_group]);
        w.extend_from_slice(&a.kernel);
        let mut out = Shape::from_slice(&[data[0], a.num_filter]);
        out.extend_from_slice(&p.geom.output[3 - a.nd()..]);
        Ok((w, Shape::from_slice(&[a.num_filter]), out))
    }
}

impl Operator for Convolution {
    fn name(&self) -> &'static str {
        "Convolution"
    }

    fn input_names(&self) -> Option<Vec<String>> {
        Some(self.args.input_names())
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("Convolution", inputs, self.args.num_inputs())?;
        let (w, b, out) = self.shapes(&inputs[0])?;
        assign_shape("Convolution", "weight", &mut Some(inputs[1].clone()), &w)?;
        if !self.args.no_bias {
            assign_shape("Convolution", "bias", &mut Some(inputs[2].clone()), &b)?;
        }
        Ok(vec![out])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        check_inputs_len(inputs, self.args.num_inputs())?;
        let a = &self.args;
        // With unit strides the data shape follows from the output and weight shapes.
        if let (None, Some(out), Some(w)) = (&inputs[0], &outputs[0], &inputs[1]) {
            if a.stride.iter().all(|&s| s == 1) && out.len() == a.nd() + 2 && w.len() >= 2 {
                let win = a.window(&a.pad);
                let mut d = Shape::from_slice(&[out[0], w[1] * a.num_group]);
                for (i, &o) in out[2..].iter().enumerate() {
                    let j = 3 - a.nd() + i;
                    d.push((o + win.span(j) - 1).saturating_sub(2 * win.pad[j]));
                }
                inputs[0] = Some(d);
            }
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let (w, b, out) = self.shapes(&data)?;
        assign_shape("Convolution", "weight", &mut inputs[1], &w)?;
        if !a.no_bias {
            assign_shape("Convolution", "bias", &mut inputs[2], &b)?;
        }
        assign_shape("Convolution", "output", &mut outputs[0], &out)
    }

    fn gradient(&self) -> Grad {
        let op: OpRef = Arc::new(ConvolutionBackward {
            fwd: Convolution {
                args: self.args.clone(),
            },
        });
        Gradient::simple(op, &[0, 1], &[], self.args.num_inputs())
    }
}

impl CpuKernel for Convolution {
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
        dispatch_float!("Convolution", inputs[0].dtype, T => {
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

fn check_inputs_len(inputs: &[Option<Shape>], want: usize) -> Result<()> {
    if inputs.len() != want {
        return Err(Error::Value(format!(
            "Convolution: expected {want} input(s), got {}",
            inputs.len()
        )));
    }
    Ok(())
}

/// `y (=|+=) conv(x, w) + b` over the whole batch.
pub fn forward_kernel<T: Num>(
    p: &Plan,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    add: bool,
) {
    let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
    let (fg, kg) = (p.f_group(), p.k_group());
    let product = MatMul::new(fg, kg, false, kg, cols, false).expect("inner sizes agree");
    let one = |n: usize, y: &mut [T], threads: bool| {
        let x = &x[n * in_len..(n + 1) * in_len];
        let gemms = |col: &[T], y: &mut [T]| {
            for g in 0..p.groups {
                matmul(
                    &product,
                    &w[g * fg * kg..(g + 1) * fg * kg],
                    &col[g * kg * cols..(g + 1) * kg * cols],
                    &mut y[g * fg * cols..(g + 1) * fg * cols],
                    add,
                    threads,
                );
            }
        };
        if p.geom.win.is_identity() {
            gemms(x, y);
        } else {
            with_scratch::<T, _>(p.geom.rows() * cols, |col| {
                im2col(&p.geom, x, col);
                gemms(col, y);
            });
        }
        if let Some(b) = bias {
            for (row, &bv) in y.chunks_mut(cols).zip(b) {
                row.iter_mut().for_each(|v| *v = v.add(bv));
            }
        }
    };
    for_batch(p.batch, p.work(), y, out_len, one);
}

/// Gradients of a convolution: `dx` by col2im of `wᵀ·dy`, `dw` by `dy·colᵀ` summed over
/// the batch, `db` by summing `dy`.
pub fn backward_kernel<T: Num>(
    p: &Plan,
    dy: &[T],
    x: &[T],
    w: &[T],
    dx: Sink<T>,
    dw: Sink<T>,
    db: Sink<T>,
) {
    let (in_len, out_len, cols) = (p.in_len(), p.out_len(), p.geom.cols());
    let (fg, kg, rows) = (p.f_group(), p.k_group(), p.geom.rows());
    let dw_product = MatMul::new(fg, cols, false, kg, cols, true).expect("inner sizes agree");
    let dcol_product = MatMul::new(fg, kg, true, fg, cols, false).expect("inner sizes agree");
    let identity = p.geom.win.is_identity();
    let (dx_add, need_dw, need_db) = (dx.add(), dw.wanted(), db.wanted());
    let partials = Chunked::new(p.batch, p.work() * 2, dx.into_slice(), in_len).run(
        |samples, mut dx_chunk| {
            let mut dw_part = vec![T::ZERO; if need_dw { p.filters * kg } else { 0 }];
            let mut db_part = vec![T::ZERO; if need_db { p.filters } else { 0 }];
            let threads = samples.len() == p.batch;
            with_scratch::<T, _>(2 * rows * cols, |buf| {
                let (col, dcol) = buf.split_at_mut(rows * cols);
                for (i, n) in samples.clone().enumerate() {
                    let dy = &dy[n * out_len..(n + 1) * out_len];
                    let x = &x[n * in_len..(n + 1) * in_len];
                    if need_dw {
                        let col: &[T] = if identity {
                            x
                        } else {
                            im2col(&p.geom, x, col);
                            col
                        };
                        for g in 0..p.groups {
                            matmul(
                                &dw_product,
                                &dy[g * fg * cols..(g + 1) * fg * cols],
                                &col[g * kg * cols..(g + 1) * kg * cols],
                                &mut dw_part[g * fg * kg..(g + 1) * fg * kg],
                                true,
                                threads,
                            );
                        }
                    }
                    if let Some(dx) = dx_chunk.as_deref_mut() {
                        let dx = &mut dx[i * in_len..(i + 1) * in_len];
                        let direct = identity;
                        let target: &mut [T] = if direct { dx } else { dcol };
                        for g in 0..p.groups {
                            matmul(
                                &dcol_product,
                                &w[g * fg * kg..(g + 1) * fg * kg],
                                &dy[g * fg * cols..(g + 1) * fg * cols],
                                &mut target[g * kg * cols..(g + 1) * kg * cols],
                                direct && dx_add,
                                threads,
                            );
                        }
                        if !direct {
                            if !dx_add {
                                dx.fill(T::ZERO);
                            }
                            col2im(&p.geom, dcol, dx);
                        }
                    }
                    if need_db {
                        for (acc, row) in db_part.iter_mut().zip(dy.chunks(cols)) {
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

/// `_backward_Convolution`: inputs (output gradient, data, weight); outputs the
/// gradients of data, weight and, with a bias, bias.
struct ConvolutionBackward {
    fwd: Convolution,
}

impl Operator for ConvolutionBackward {
    fn name(&self) -> &'static str {
        "_backward_Convolution"
    }

    fn num_outputs(&self) -> usize {
        self.fwd.args.num_inputs()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_backward_Convolution", inputs, 3)?;
        let (w, b, out) = self.fwd.shapes(&inputs[1])?;
        assign_shape(
            "_backward_Convolution",
            "weight",
            &mut Some(inputs[2].clone()),
            &w,
        )?;
        assign_shape(
            "_backward_Convolution",
            "output gradient",
            &mut Some(inputs[0].clone()),
            &out,
        )?;
        let mut v = vec![inputs[1].clone(), w];
        if !self.fwd.args.no_bias {
            v.push(b);
        }
        Ok(v)
    }
}

impl CpuKernel for ConvolutionBackward {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        let p = self.fwd.plan(&inputs[1].shape)?;
        dispatch_float!("_backward_Convolution", inputs[1].dtype, T => {
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
    cpu::add::<Convolution>(k);
    cpu::add::<ConvolutionBackward>(k);
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let args = ConvArgs::parse("Convolution", attrs, &[], false)?;
    Ok(Arc::new(Convolution { args }))
}

/// Registers `Convolution`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Convolution",
        aliases: &[],
        inputs: &["data", "weight", "bias"],
        variadic: false,
        params: ParamList::Names(COMMON),
        doc: "Compute N-D convolution on (N+2)-D input.",
        create: Box::new(create),
    });
}
