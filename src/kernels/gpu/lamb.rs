//! GPU kernels of LAMB's two update phases (`lamb.cu`); the norms of phase two are read on
//! the device.

use super::launch::{float_suffix, launch_n, Args};
use crate::error::Result;
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::optim::lamb::{LambOp, Phase};
use crate::op::{OpContext, OpReq, Operator};

const MODULE: &str = "lamb";

impl super::GpuKernel for LambOp {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let (ins, out) = (io.inputs, &io.outputs[0]);
        let n = out.size();
        let sfx = float_suffix(self.name(), ins[0].dtype)?;
        let prefix = if self.mp { "mp_" } else { "" };
        let add = i32::from(req == OpReq::Add);
        match self.phase {
            Phase::One(p) => {
                let (b1t, b2t) = p.powers();
                let w32 = if self.mp {
                    ins[4].ptr()
                } else {
                    std::ptr::null_mut()
                };
                let args = Args::new()
                    .ptr(out.ptr())
                    .ptr(ins[2].ptr())
                    .ptr(ins[3].ptr())
                    .ptr(ins[0].ptr())
                    .ptr(w32)
                    .ptr(ins[1].ptr())
                    .arg(n as i64)
                    .arg(p.beta1 as f64)
                    .arg(p.beta2 as f64)
                    .arg(p.epsilon as f64)
                    .arg(p.wd as f64)
                    .arg(p.rescale_grad as f64)
                    .arg(p.clip_gradient as f64)
                    .arg(b1t)
                    .arg(b2t)
                    .arg(i32::from(p.bias_correction))
                    .arg(add);
                launch_n(ctx, MODULE, &format!("{prefix}lamb_phase1_{sfx}"), n, args)
            }
            Phase::Two(p) => {
                let base = if self.mp { &ins[4] } else { &ins[0] };
                let args = Args::new()
                    .ptr(out.ptr())
                    .ptr(base.ptr())
                    .ptr(ins[1].ptr())
                    .ptr(ins[2].ptr())
                    .ptr(ins[3].ptr())
                    .arg(n as i64)
                    .arg(p.lr as f64)
                    .arg(p.lower_bound as f64)
                    .arg(p.upper_bound as f64)
                    .arg(add);
                launch_n(ctx, MODULE, &format!("{prefix}lamb_phase2_{sfx}"), n, args)
            }
        }
    }
}

/// Registers the GPU kernels of this module.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<LambOp>(k);
}
