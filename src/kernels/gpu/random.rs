//! GPU kernels of the random samplers drawn from attributes (`_random_uniform`,
//! `_random_normal` and their `_like` forms): the host draws one key per launch from the
//! device's generator, and each element hashes (key, index) on the device (`random.cu`).

use super::launch::{float_suffix, launch_n, Args};
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::op::random::{Dist, Random};
use crate::op::{OpContext, OpReq};
use rand::Rng;

impl super::GpuKernel for Random {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let (kernel, a, b) = match self.dist {
            Dist::Uniform { low, high } => ("random_uniform", low, high),
            Dist::Normal { loc, scale } => ("random_normal", loc, scale),
            other => {
                return Err(Error::NotImplemented(format!(
                    "{}: no GPU kernel for {other:?} draws",
                    self.name
                )))
            }
        };
        let out = &io.outputs[0];
        let name = format!("{kernel}_{}", float_suffix(self.name, out.dtype)?);
        let key: u64 = ctx.rng(self.name)?.gen();
        let n = out.size();
        let args = Args::new()
            .ptr(out.ptr())
            .arg(n as i64)
            .arg(key)
            .arg(a)
            .arg(b)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, "random", &name, n, args)
    }
}
