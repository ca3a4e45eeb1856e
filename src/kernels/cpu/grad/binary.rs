//! CPU kernels of the backward of the element-wise binary operators, same-shape and
//! broadcasting: each input's gradient is computed over the output's shape and, for a
//! broadcast input, summed over the axes it was stretched along.

use super::{copy_into, map3_broadcast, sum_to, with_float, FloatKernel, Scratch};
use crate::error::Result;
use crate::kernels::cpu::num::Num;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::elemwise::binary::BinaryKind;
use crate::op::grad::binary::{is_identity, BinaryBackward};
use crate::op::{OpContext, OpReq};
use crate::shape::broadcast_shapes;
use num_traits::Float;

/// `d(a op b)/da * g` (`lhs`) or `d(a op b)/db * g`, as MXNet defines them at ties.
#[inline(always)]
fn partial<F: Float>(kind: BinaryKind, lhs: bool, g: F, a: F, b: F) -> F {
    let zero = F::zero();
    let pick = |c: bool| if c { g } else { zero };
    match (kind, lhs) {
        (BinaryKind::Add, _) | (BinaryKind::Sub, true) | (BinaryKind::Mod, true) => g,
        (BinaryKind::Sub, false) => -g,
        (BinaryKind::Mul, true) => g * b,
        (BinaryKind::Mul, false) => g * a,
        (BinaryKind::Div, true) => g / b,
        (BinaryKind::Div, false) => -g * a / (b * b),
        (BinaryKind::Mod, false) => -g * (a / b).floor(),
        (BinaryKind::Power, true) => g * b * a.powf(b - F::one()),
        (BinaryKind::Power, false) => g * a.powf(b) * a.ln(),
        (BinaryKind::Maximum, true) => pick(a >= b),
        (BinaryKind::Maximum, false) => pick(a < b),
        (BinaryKind::Minimum, true) => pick(a <= b),
        (BinaryKind::Minimum, false) => pick(a > b),
        (BinaryKind::Hypot, true) => g * a / a.hypot(b),
        (BinaryKind::Hypot, false) => g * b / a.hypot(b),
        _ => zero,
    }
}

struct SideGrad<'a> {
    kind: BinaryKind,
    lhs: bool,
    shapes: [&'a [usize]; 3],
    full: &'a [usize],
}

impl FloatKernel for SideGrad<'_> {
    fn run<F: Float + Num>(&self, ins: &[&[F]], out: &mut [F], req: OpReq) {
        let (kind, lhs) = (self.kind, self.lhs);
        let [gs, as_, bs] = self.shapes;
        map3_broadcast(
            [(ins[0], gs), (ins[1], as_), (ins[2], bs)],
            out,
            self.full,
            req,
            |g, a, b| partial(kind, lhs, g, a, b),
        );
    }
}

impl CpuKernel for BinaryBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        let (a, b) = match io.inputs {
            [_, a, b] => (a, b),
            _ => (g, g),
        };
        let full = broadcast_shapes(self.name, &a.shape, &b.shape)?;
        for (k, (out, &r)) in io.outputs.iter().zip(io.req).enumerate() {
            if r == OpReq::Null {
                continue;
            }
            let lhs = k == 0;
            let same = out.size() == g.size();
            if is_identity(self.kind, lhs) {
                if same {
                    copy_into(self.name, g, out, r)?;
                } else {
                    sum_to(self.name, g, out, r)?;
                }
                continue;
            }
            let kern = SideGrad {
                kind: self.kind,
                lhs,
                shapes: [&g.shape, &a.shape, &b.shape],
                full: &full,
            };
            if same {
                with_float(self.name, &kern, &[g, a, b], out, r)?;
            } else {
                let tmp = Scratch::new(&full, out.dtype);
                with_float(self.name, &kern, &[g, a, b], &tmp.blob, OpReq::Write)?;
                sum_to(self.name, &tmp.blob, out, r)?;
            }
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<BinaryBackward>(k);
}
