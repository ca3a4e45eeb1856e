//! GPU kernels of gradient sums and element-wise backward operators (`grad.cu`): `add_n`
//! and `_backward_add_n`, the backward of the unary operators, of the operators with a
//! scalar operand and of the binary operators (same-shape and broadcasting).

use super::elemwise::{binary_code, unary_code};
use super::launch::{float_suffix, launch_n, suffix, Args, BLOCK};
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::ndarray::TBlob;
use crate::op::elemwise::add_n::{AddN, AddNBackward};
use crate::op::grad::binary::BinaryBackward;
use crate::op::grad::elemwise::{ScalarBackward, UnaryBackward};
use crate::op::{OpContext, OpReq};
use crate::shape::broadcast_shapes;

const MODULE: &str = "grad";
/// Arrays one launch of `add_n` sums (`RSMX_SUM_INPUTS`).
const SUM_INPUTS: usize = 8;
/// Most dimensions a binary backward describes (`RSMX_GRAD_MAX_DIM`).
const MAX_DIM: usize = 8;
/// Reduced positions per output element from which a block, rather than a thread, sums.
const BLOCK_SUM_FROM: usize = 64;

// The block reductions keep one value per thread in a shared array of at most 1024 and
// halve the block each step.
const _: () = assert!(BLOCK.is_power_of_two() && BLOCK <= 1024);

fn add_flag(req: OpReq) -> i32 {
    i32::from(req == OpReq::Add)
}

/// `struct rsmx_sum_inputs`.
#[repr(C)]
#[derive(Clone, Copy)]
struct SumInputs([u64; SUM_INPUTS]);

/// `out (=|+=) sum(inputs)`; an input that is the output itself counts as its old value.
fn sum_into(ctx: &OpContext, inputs: &[&TBlob], out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let aliased = inputs.iter().filter(|b| b.ptr() == out.ptr()).count();
    let mut keep = aliased + usize::from(req == OpReq::Add);
    let others: Vec<&TBlob> = inputs
        .iter()
        .copied()
        .filter(|b| b.ptr() != out.ptr())
        .collect();
    if others.is_empty() && keep == 1 {
        return Ok(());
    }
    let kernel = format!("add_n_{}", suffix("add_n", out.dtype)?);
    let n = out.size();
    let mut chunks = others.chunks(SUM_INPUTS);
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let mut ptrs = [0u64; SUM_INPUTS];
        for (p, b) in ptrs.iter_mut().zip(chunk) {
            *p = b.ptr() as u64;
        }
        let args = Args::new()
            .ptr(out.ptr())
            .arg(SumInputs(ptrs))
            .arg(n as i64)
            .arg(chunk.len() as i32)
            .arg(keep as i32);
        launch_n(ctx, MODULE, &kernel, n, args)?;
        // Later chunks add to what the earlier ones left in the output.
        keep = 1;
        if chunks.len() == 0 {
            return Ok(());
        }
    }
}

impl super::GpuKernel for AddN {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let inputs: Vec<&TBlob> = io.inputs.iter().collect();
        sum_into(ctx, &inputs, &io.outputs[0], io.req[0])
    }
}

impl super::GpuKernel for AddNBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        for (o, &r) in io.outputs.iter().zip(io.req) {
            sum_into(ctx, &[g], o, r)?;
        }
        Ok(())
    }
}

fn floating(op: &str, out: &TBlob, inputs: &[&TBlob]) -> Result<&'static str> {
    for b in inputs {
        if b.dtype != out.dtype {
            return Err(Error::Type(format!(
                "{op}: on the GPU every array must have the output's dtype {}, got {}",
                out.dtype, b.dtype
            )));
        }
    }
    float_suffix(op, out.dtype)
}

impl super::GpuKernel for UnaryBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, v, out, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = floating(self.name, out, &[g, v])?;
        let (code, lo, hi) = unary_code(self.kind);
        let n = out.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(g.ptr())
            .ptr(v.ptr())
            .arg(n as i64)
            .arg(code)
            .arg(add_flag(req))
            .arg(lo)
            .arg(hi);
        launch_n(ctx, MODULE, &format!("unary_backward_{sfx}"), n, args)
    }
}

impl super::GpuKernel for ScalarBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let (g, x, out, req) = (&io.inputs[0], &io.inputs[1], &io.outputs[0], io.req[0]);
        if req == OpReq::Null {
            return Ok(());
        }
        let sfx = floating(self.name, out, &[g, x])?;
        let n = out.size();
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(g.ptr())
            .ptr(x.ptr())
            .arg(n as i64)
            .arg(binary_code(self.kind))
            .arg(i32::from(self.reverse))
            .arg(add_flag(req))
            .arg(self.scalar);
        launch_n(ctx, MODULE, &format!("scalar_backward_{sfx}"), n, args)
    }
}

/// `struct rsmx_sum_to`: the kept and the reduced axes of one side's gradient, with the
/// strides of g, a and b along each.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SumTo {
    nkeep: i32,
    nreduce: i32,
    keep_shape: [i64; MAX_DIM],
    keep_g: [i64; MAX_DIM],
    keep_a: [i64; MAX_DIM],
    keep_b: [i64; MAX_DIM],
    red_shape: [i64; MAX_DIM],
    red_g: [i64; MAX_DIM],
    red_a: [i64; MAX_DIM],
    red_b: [i64; MAX_DIM],
}

/// Element strides of an array of shape `shape` over `full` (numpy's alignment from the
/// right; 0 along broadcast axes).
fn strides_over(shape: &[usize], full: &[usize]) -> Vec<i64> {
    let mut out = vec![0i64; full.len()];
    let offset = full.len() - shape.len();
    let mut stride = 1i64;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 {
            out[offset + d] = stride;
        }
        stride *= shape[d] as i64;
    }
    out
}

impl SumTo {
    /// The description of `out`'s gradient over `full` with inputs of shapes `g`, `a` and
    /// `b`, and how many positions each output element sums. Axes of size 1 are dropped and
    /// neighbouring axes that stay contiguous in every array are merged.
    fn new(
        op: &str,
        out: &[usize],
        full: &[usize],
        shapes: [&[usize]; 3],
    ) -> Result<(SumTo, usize)> {
        if out.len() > full.len() {
            return Err(Error::Runtime(format!(
                "{op}: cannot sum to a shape of more axes"
            )));
        }
        let [sg, sa, sb] = shapes.map(|s| strides_over(s, full));
        let pad = full.len() - out.len();
        let mut d = SumTo::default();
        let mut count = 1usize;
        // (reduced, size, g, a, b) of each axis, innermost last; merged where possible.
        let mut axes: Vec<(bool, i64, i64, i64, i64)> = Vec::new();
        for k in 0..full.len() {
            if full[k] == 1 {
                continue;
            }
            let reduced = k < pad || out[k - pad] == 1;
            let axis = (reduced, full[k] as i64, sg[k], sa[k], sb[k]);
            if let Some(last) = axes.last_mut() {
                let (r, size, g, a, b) = *last;
                let joins = |outer: i64, inner: i64| outer == inner * axis.1;
                if r == reduced && joins(g, axis.2) && joins(a, axis.3) && joins(b, axis.4) {
                    *last = (r, size * axis.1, axis.2, axis.3, axis.4);
                    continue;
                }
            }
            axes.push(axis);
        }
        for (reduced, size, g, a, b) in axes {
            let (n, shape, ag, aa, ab) = if reduced {
                count *= size as usize;
                (
                    &mut d.nreduce,
                    &mut d.red_shape,
                    &mut d.red_g,
                    &mut d.red_a,
                    &mut d.red_b,
                )
            } else {
                (
                    &mut d.nkeep,
                    &mut d.keep_shape,
                    &mut d.keep_g,
                    &mut d.keep_a,
                    &mut d.keep_b,
                )
            };
            let k = *n as usize;
            if k == MAX_DIM {
                return Err(Error::Value(format!(
                    "{op}: broadcasting on the GPU supports at most {MAX_DIM} dimensions"
                )));
            }
            shape[k] = size;
            ag[k] = g;
            aa[k] = a;
            ab[k] = b;
            *n += 1;
        }
        if full.contains(&0) {
            count = 0;
        }
        Ok((d, count))
    }
}

impl super::GpuKernel for BinaryBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        let (a, b) = match io.inputs {
            [_, a, b] => (a, b),
            _ => (g, g),
        };
        let full = broadcast_shapes(self.name, &a.shape, &b.shape)?;
        for (k, (out, &req)) in io.outputs.iter().zip(io.req).enumerate() {
            if req == OpReq::Null || out.size() == 0 {
                continue;
            }
            let sfx = floating(self.name, out, &[g, a, b])?;
            let (desc, count) =
                SumTo::new(self.name, &out.shape, &full, [&g.shape, &a.shape, &b.shape])?;
            let n = out.size();
            let args = Args::new()
                .ptr(out.ptr())
                .ptr(g.ptr())
                .ptr(a.ptr())
                .ptr(b.ptr())
                .arg(n as i64)
                .arg(desc)
                .arg(count as i64)
                .arg(binary_code(self.kind))
                .arg(i32::from(k == 0))
                .arg(add_flag(req));
            if count >= BLOCK_SUM_FROM {
                let kernel = format!("binary_backward_block_{sfx}");
                launch_n(ctx, MODULE, &kernel, n * BLOCK as usize, args)?;
            } else {
                launch_n(ctx, MODULE, &format!("binary_backward_{sfx}"), n, args)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::elemwise::binary::BinaryKind;
    use crate::op::elemwise::unary::UnaryKind;

    fn enum_names(name: &str) -> Vec<String> {
        let src = crate::cuda::sources::module(MODULE).expect("embedded");
        src.split(&format!("enum rsmx_{name} {{"))
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn codes_follow_the_kernel_enums() {
        let unary = enum_names("unary_grad");
        assert_eq!(unary.len(), 46);
        assert_eq!(
            unary[unary_code(UnaryKind::Gammaln).0 as usize],
            "RSMX_UG_GAMMALN"
        );
        assert_eq!(unary[unary_code(UnaryKind::Sin).0 as usize], "RSMX_UG_SIN");
        assert_eq!(
            unary[unary_code(UnaryKind::Softsign).0 as usize],
            "RSMX_UG_SOFTSIGN"
        );
        assert_eq!(
            unary[unary_code(UnaryKind::Clip(0.0, 1.0)).0 as usize],
            "RSMX_UG_CLIP"
        );
        let binary = enum_names("binary_grad");
        assert_eq!(
            binary[binary_code(BinaryKind::Hypot) as usize],
            "RSMX_BG_HYPOT"
        );
        assert_eq!(binary[binary_code(BinaryKind::Mod) as usize], "RSMX_BG_MOD");
    }

    #[test]
    fn sum_to_merges_and_splits_axes() {
        // Same shapes: one kept axis, nothing reduced.
        let s = [2usize, 3, 4];
        let (d, count) = SumTo::new("t", &s, &s, [&s, &s, &s]).unwrap();
        assert_eq!((d.nkeep, d.nreduce, count), (1, 0, 1));
        assert_eq!((d.keep_shape[0], d.keep_g[0], d.keep_a[0]), (24, 1, 1));
        // (2, 3, 4) summed to (3, 1): axis 0 and 2 reduced, axis 1 kept.
        let (d, count) = SumTo::new("t", &[3, 1], &s, [&s, &[3, 1][..], &s]).unwrap();
        assert_eq!((d.nkeep, d.nreduce, count), (1, 2, 8));
        assert_eq!(&d.keep_shape[..1], &[3]);
        assert_eq!(&d.keep_g[..1], &[4]);
        assert_eq!(&d.keep_a[..1], &[1]);
        assert_eq!(&d.red_shape[..2], &[2, 4]);
        assert_eq!(&d.red_g[..2], &[12, 1]);
        assert_eq!(&d.red_a[..2], &[0, 0]);
        // Everything summed to one element; empty arrays sum nothing.
        let (d, count) = SumTo::new("t", &[1], &s, [&s, &[1][..], &s]).unwrap();
        assert_eq!((d.nkeep, d.nreduce, count), (0, 1, 24));
        let (_, count) =
            SumTo::new("t", &[1], &[0, 2], [&[0, 2][..], &[1][..], &[0, 2][..]]).unwrap();
        assert_eq!(count, 0);
    }
}
