//! GPU kernels of the array creation operators (`init.cu`): `_zeros`, `_ones`, `_full`,
//! `zeros_like`, `ones_like`, `_arange`, `_eye`.

use super::launch::{launch_n, suffix, Args};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::op::init::{Fill, Init};
use crate::op::{OpContext, OpReq};

const MODULE: &str = "init";

impl super::GpuKernel for Init {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        if req == OpReq::Add {
            return Err(Error::NotImplemented(format!(
                "{}: adding into the output is not supported on the GPU",
                self.name
            )));
        }
        let out = &io.outputs[0];
        // A bool is one byte of 0 or 1: the u8 kernels write it.
        let dtype = if out.dtype == DType::Bool {
            DType::U8
        } else {
            out.dtype
        };
        let sfx = suffix(self.name, dtype)?;
        let n = out.size();
        let args = Args::new().ptr(out.ptr());
        match self.fill {
            Fill::Value(v) => {
                let v = if out.dtype == DType::Bool {
                    f64::from(u8::from(v != 0.0))
                } else {
                    v
                };
                launch_n(
                    ctx,
                    MODULE,
                    &format!("fill_{sfx}"),
                    n,
                    args.arg(n as i64).arg(v),
                )
            }
            Fill::Arange {
                start,
                step,
                repeat,
            } => {
                let args = args.arg(n as i64).arg(start).arg(step).arg(repeat as i64);
                launch_n(ctx, MODULE, &format!("arange_{sfx}"), n, args)
            }
            Fill::Eye { m, k } => {
                let rows = n.checked_div(m).unwrap_or(0);
                let args = args.arg(rows as i64).arg(m as i64).arg(k);
                launch_n(ctx, MODULE, &format!("eye_{sfx}"), n, args)
            }
        }
    }
}
