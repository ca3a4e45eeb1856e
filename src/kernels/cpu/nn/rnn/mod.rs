//! CPU kernels of the fused `RNN` operator: per layer and direction, one product for the
//! input's part of every step, then the steps in order, each a product with the hidden
//! weights and an element-wise cell step; the backward runs the steps in reverse and
//! gathers the weight gradients in a few large products.

mod backward;
mod cell;
mod cell_avx2;
mod forward;
#[cfg(test)]
mod tests;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::fastmath::FastMath;
use crate::kernels::cpu::linalg::{matmul, MatMul};
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::nn::rnn::{Rnn, RnnBackward, RnnDims, NAME};
use crate::op::{OpContext, OpReq, Operator};
use num_traits::Float;

/// The float types the kernels compute in.
pub trait RnnFloat: Num + Float + FastMath + cell::WideCell + Send + Sync + 'static {}
impl RnnFloat for f32 {}
impl RnnFloat for f64 {}

/// Errors for float16, which the CPU kernels do not compute.
fn check_dtype(op: &str, t: DType) -> Result<()> {
    match t {
        DType::F32 | DType::F64 => Ok(()),
        other => Err(Error::Type(format!(
            "{op}: the CPU kernel computes float32 and float64, got {other}"
        ))),
    }
}

impl CpuKernel for Rnn {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        self.check_supported("the CPU")?;
        let dims = self.dims(&io.inputs[0].shape)?;
        check_dtype(NAME, io.inputs[0].dtype)?;
        if io.inputs[0].dtype == DType::F64 {
            forward::run::<f64>(self, &dims, ctx, io)
        } else {
            forward::run::<f32>(self, &dims, ctx, io)
        }
    }
}

impl CpuKernel for RnnBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        self.0.check_supported("the CPU")?;
        let v = self.0.n_visible();
        let dims = self.0.dims(&io.inputs[v].shape)?;
        check_dtype(self.name(), io.inputs[0].dtype)?;
        if io.inputs[0].dtype == DType::F64 {
            backward::run::<f64>(&self.0, &dims, ctx, io)
        } else {
            backward::run::<f32>(&self.0, &dims, ctx, io)
        }
    }
}

/// Registers the CPU kernels of `RNN` and its backward.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Rnn>(k);
    cpu::add::<RnnBackward>(k);
}

/// `dst (=|+=) a (m×k, rows `a_rs` apart) · bᵀ` with `b` an `n×k` row-major matrix;
/// `threads` lets a large product use the rayon pool.
#[allow(clippy::too_many_arguments)]
fn mul_bt<F: RnnFloat>(
    m: usize,
    k: usize,
    n: usize,
    a: &[F],
    a_rs: usize,
    b: &[F],
    dst: &mut [F],
    add: bool,
    threads: bool,
) {
    let d = MatMul {
        m,
        n,
        k,
        a_rs,
        a_cs: 1,
        b_rs: 1,
        b_cs: k,
    };
    if m > 0 && n > 0 && k > 0 {
        matmul(&d, a, b, dst, add, threads);
    } else if !add {
        dst[..m * n].fill(F::zero());
    }
}

/// `dst (=|+=) a · b` with `a` m×k and `b` k×n, both row-major; `threads` lets a large
/// product use the rayon pool.
#[allow(clippy::too_many_arguments)]
fn mul<F: RnnFloat>(
    m: usize,
    k: usize,
    n: usize,
    a: &[F],
    b: &[F],
    dst: &mut [F],
    add: bool,
    threads: bool,
) {
    let d = MatMul::new(m, k, false, k, n, false).expect("inner dimensions agree");
    if m > 0 && n > 0 && k > 0 {
        matmul(&d, a, b, dst, add, threads);
    } else if !add {
        dst[..m * n].fill(F::zero());
    }
}

/// `dst += aᵀ · b` with `a` k×m and `b` k×n row-major (a sum of outer products over k rows).
fn add_at_b<F: RnnFloat>(k: usize, m: usize, n: usize, a: &[F], b: &[F], dst: &mut [F]) {
    let d = MatMul::new(k, m, true, k, n, false).expect("inner dimensions agree");
    if m > 0 && n > 0 && k > 0 {
        matmul(&d, a, b, dst, true, true);
    }
}

/// The step order of direction `dir`: forward in time, or backward for the second.
fn step_time(dims: &RnnDims, dir: usize, s: usize) -> usize {
    if dir == 0 {
        s
    } else {
        dims.t - 1 - s
    }
}

/// Writes the `d` contiguous per-direction hidden sequences `hs[dir]` (`t·n × h` each)
/// side by side into `out` (`t·n × d·h`), scaled element-wise by `mask` when given.
fn interleave<F: RnnFloat>(dims: &RnnDims, hs: &[&[F]], mask: Option<&[F]>, out: &mut [F]) {
    let (h, dh) = (dims.h, dims.d * dims.h);
    for (row, o) in out.chunks_exact_mut(dh).enumerate() {
        for (dir, part) in o.chunks_exact_mut(h).enumerate() {
            part.copy_from_slice(&hs[dir][row * h..(row + 1) * h]);
        }
        if let Some(m) = mask {
            for (v, &k) in o.iter_mut().zip(&m[row * dh..(row + 1) * dh]) {
                *v = *v * k;
            }
        }
    }
}

/// Writes or adds `src` into `dst` as `req` says.
fn store<F: RnnFloat>(dst: &mut [F], src: &[F], req: OpReq) {
    match req {
        OpReq::Null => {}
        OpReq::Add => dst.iter_mut().zip(src).for_each(|(d, &s)| *d = *d + s),
        _ => dst.copy_from_slice(src),
    }
}
