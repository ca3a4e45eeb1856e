//! GPU kernels of the element-wise operators (`elemwise.cu`): unary, binary on equal
//! shapes, with a scalar, and broadcasting.

use super::launch::{kernel_name, launch_n, suffix, Args};
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::ndarray::TBlob;
use crate::op::elemwise::binary::{Binary, BinaryKind, Scalar};
use crate::op::elemwise::unary::{Unary, UnaryKind};
use crate::op::{OpContext, OpReq};

const MODULE: &str = "elemwise";
/// Most dimensions a broadcast launch describes (`RSMX_MAX_DIM`).
const MAX_DIM: usize = 8;

/// `struct rsmx_broadcast`: the output's shape and each input's strides over it.
#[repr(C)]
#[derive(Clone, Copy)]
struct BroadcastShape {
    ndim: i32,
    shape: [i64; MAX_DIM],
    lhs_stride: [i64; MAX_DIM],
    rhs_stride: [i64; MAX_DIM],
}

/// The kernel's code of a unary kind (`enum rsmx_unary`, and `enum rsmx_unary_grad` of
/// the gradients, in the same order), with its two parameters.
pub(super) fn unary_code(kind: UnaryKind) -> (i32, f64, f64) {
    use UnaryKind as U;
    let code = match kind {
        U::Copy => 0,
        U::Negative => 1,
        U::Abs => 2,
        U::Sign => 3,
        U::Sqrt => 4,
        U::Rsqrt => 5,
        U::Cbrt => 6,
        U::Rcbrt => 7,
        U::Square => 8,
        U::Reciprocal => 9,
        U::Exp => 10,
        U::Expm1 => 11,
        U::Log => 12,
        U::Log1p => 13,
        U::Log2 => 14,
        U::Log10 => 15,
        U::Sin => 16,
        U::Cos => 17,
        U::Tan => 18,
        U::Arcsin => 19,
        U::Arccos => 20,
        U::Arctan => 21,
        U::Sinh => 22,
        U::Cosh => 23,
        U::Tanh => 24,
        U::Arcsinh => 25,
        U::Arccosh => 26,
        U::Arctanh => 27,
        U::Degrees => 28,
        U::Radians => 29,
        U::Sigmoid => 30,
        U::Softsign => 31,
        U::Relu => 32,
        U::Floor => 33,
        U::Ceil => 34,
        U::Round => 35,
        U::Rint => 36,
        U::Fix => 37,
        U::Trunc => 38,
        U::LogicalNot => 39,
        U::Clip(lo, hi) => return (40, lo, hi),
        U::Erf => 41,
        U::Erfinv => 42,
        U::Gamma => 43,
        U::Gammaln => 44,
        U::HardSigmoid(alpha, beta) => return (45, alpha, beta),
    };
    (code, 0.0, 0.0)
}

/// The kernel's code of a binary kind (`enum rsmx_binary`, and `enum rsmx_binary_grad`
/// of the gradients, in `BinaryKind` order).
pub(super) fn binary_code(kind: BinaryKind) -> i32 {
    kind as i32
}

fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

/// Runs `unary_<dtype>` over `input` into `out`.
pub fn unary(
    ctx: &OpContext,
    kind: UnaryKind,
    input: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let (code, a, b) = unary_code(kind);
    let kernel = kernel_name("unary", suffix("unary", out.dtype)?);
    let n = out.size();
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(input.ptr())
        .arg(n as i64)
        .arg(code)
        .arg(add_flag(req))
        .arg(a)
        .arg(b);
    launch_n(ctx, MODULE, kernel, n, args)
}

/// Element strides of an input of shape `shape` over an output of rank `ndim` (numpy's
/// alignment from the right; 0 along broadcast axes).
fn strides_over(shape: &[usize], ndim: usize) -> [i64; MAX_DIM] {
    let mut out = [0i64; MAX_DIM];
    let offset = ndim - shape.len();
    let mut stride = 1i64;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 {
            out[offset + d] = stride;
        }
        stride *= shape[d] as i64;
    }
    out
}

/// Runs `binary_<dtype>` or, when the shapes differ, `broadcast_<dtype>`.
pub fn binary(
    ctx: &OpContext,
    kind: BinaryKind,
    a: &TBlob,
    b: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let sfx = suffix("binary", out.dtype)?;
    let n = out.size();
    let head = Args::new()
        .ptr(out.ptr())
        .ptr(a.ptr())
        .ptr(b.ptr())
        .arg(n as i64);
    if a.shape[..] == out.shape[..] && b.shape[..] == out.shape[..] {
        let args = head.arg(binary_code(kind)).arg(add_flag(req));
        return launch_n(ctx, MODULE, kernel_name("binary", sfx), n, args);
    }
    let ndim = out.shape.len();
    if ndim > MAX_DIM {
        return Err(Error::Value(format!(
            "broadcasting on the GPU supports at most {MAX_DIM} dimensions, got {ndim}"
        )));
    }
    let mut shape = [1i64; MAX_DIM];
    for (d, &s) in out.shape.iter().enumerate() {
        shape[d] = s as i64;
    }
    let desc = BroadcastShape {
        ndim: ndim as i32,
        shape,
        lhs_stride: strides_over(&a.shape, ndim),
        rhs_stride: strides_over(&b.shape, ndim),
    };
    let args = head.arg(desc).arg(binary_code(kind)).arg(add_flag(req));
    launch_n(ctx, MODULE, kernel_name("broadcast", sfx), n, args)
}

/// Runs `binary_scalar_<dtype>`: `x op s`, or `s op x` when `reverse`.
#[allow(clippy::too_many_arguments)]
pub fn scalar(
    ctx: &OpContext,
    kind: BinaryKind,
    reverse: bool,
    s: f64,
    input: &TBlob,
    out: &TBlob,
    req: OpReq,
) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let kernel = kernel_name("binary_scalar", suffix("scalar", out.dtype)?);
    let n = out.size();
    let args = Args::new()
        .ptr(out.ptr())
        .ptr(input.ptr())
        .arg(n as i64)
        .arg(binary_code(kind))
        .arg(i32::from(reverse))
        .arg(add_flag(req))
        .arg(s);
    launch_n(ctx, MODULE, kernel, n, args)
}

impl super::GpuKernel for Unary {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        unary(ctx, self.kind, &io.inputs[0], &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for Binary {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        binary(
            ctx,
            self.kind,
            &io.inputs[0],
            &io.inputs[1],
            &io.outputs[0],
            io.req[0],
        )
    }
}

impl super::GpuKernel for Scalar {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        scalar(
            ctx,
            self.kind,
            self.reverse,
            self.scalar,
            &io.inputs[0],
            &io.outputs[0],
            io.req[0],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_follow_numpy_alignment() {
        assert_eq!(&strides_over(&[3], 2)[..2], &[0, 1]);
        assert_eq!(&strides_over(&[2, 1], 2)[..2], &[1, 0]);
        assert_eq!(&strides_over(&[2, 3, 4], 3)[..3], &[12, 4, 1]);
        assert_eq!(&strides_over(&[1, 4], 3)[..3], &[0, 0, 1]);
    }

    #[test]
    fn codes_follow_the_kernel_enums() {
        let src = crate::cuda::sources::module("elemwise").expect("embedded");
        let unary = src
            .split("enum rsmx_unary {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let names: Vec<&str> = unary
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(names.len(), 46);
        assert_eq!(
            names[unary_code(UnaryKind::Relu).0 as usize],
            "RSMX_UNARY_RELU"
        );
        assert_eq!(
            names[unary_code(UnaryKind::Clip(0.0, 1.0)).0 as usize],
            "RSMX_UNARY_CLIP"
        );
        assert_eq!(
            names[unary_code(UnaryKind::LogicalNot).0 as usize],
            "RSMX_UNARY_LOGICAL_NOT"
        );
        assert_eq!(
            names[unary_code(UnaryKind::HardSigmoid(0.2, 0.5)).0 as usize],
            "RSMX_UNARY_HARD_SIGMOID"
        );
        let binary = src
            .split("enum rsmx_binary {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let names: Vec<&str> = binary
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(
            names[binary_code(BinaryKind::LogicalXor) as usize],
            "RSMX_BINARY_LOGICAL_XOR"
        );
        assert_eq!(
            names[binary_code(BinaryKind::Hypot) as usize],
            "RSMX_BINARY_HYPOT"
        );
    }
}
