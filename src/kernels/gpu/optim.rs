//! GPU kernels of the fused optimizer updates (`optim.cu`): one element-wise pass that
//! updates a weight and its optimizer states in place, as the CPU kernels compute it.

use super::launch::{float_suffix, launch_n, Args};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::optim::elem::{Real, H};
use crate::kernels::cpu::Blobs;
use crate::ndarray::TBlob;
use crate::op::optim::spec::{Hyper, Kind};
use crate::op::optim::{MultiUpdateOp, UpdateOp};
use crate::op::{OpContext, OpReq, Operator};
use half::f16;

const MODULE: &str = "optim";

/// `struct rsmx_hyper`: the hyperparameters, each rounded to the type the update
/// computes in (the weight's, float32 for the multi-precision kinds).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct HyperArg([f64; 21]);

impl HyperArg {
    fn of<T: Real>(h: &Hyper) -> HyperArg {
        let h = H::<T>::new(h);
        let v = |x: T| crate::dtype::Element::to_f64(x);
        HyperArg([
            v(h.lr),
            v(h.wd),
            v(h.rg),
            v(h.clip),
            v(h.mom),
            v(h.beta1),
            v(h.beta2),
            v(h.eps),
            v(h.gamma1),
            v(h.gamma2),
            v(h.clip_w),
            v(h.lamda1),
            v(h.beta),
            v(h.wd_lh),
            v(h.rho),
            v(h.one_minus_rho),
            v(h.beta1_t),
            v(h.beta2_t),
            v(h.eta),
            v(h.one_minus_beta1),
            v(h.one_minus_beta2),
        ])
    }
}

/// The kernel's `req`: 0 leaves the output, 1 writes it, 2 adds to it.
fn req_code(req: OpReq) -> i32 {
    match req {
        OpReq::Null => 0,
        OpReq::Add => 2,
        OpReq::Write | OpReq::WriteInplace => 1,
    }
}

fn is_mixed_precision(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::MpSgd | Kind::MpSgdMom | Kind::MpNagMom | Kind::AggMpSgd | Kind::MpAdamW
    )
}

/// Checks sizes and that blobs either are the same memory or do not overlap.
fn check_blobs(op: &str, blobs: &[&TBlob], n: usize) -> Result<()> {
    let span = |b: &TBlob| {
        let start = b.ptr() as usize;
        (start, start + b.size() * b.dtype.size())
    };
    for (i, a) in blobs.iter().enumerate() {
        if a.size() != n {
            return Err(Error::Value(format!(
                "{op}: array {i} has {} elements, expected {n}",
                a.size()
            )));
        }
        let (a0, a1) = span(a);
        for b in &blobs[..i] {
            let (b0, b1) = span(b);
            if !(a0 == b0 && a1 == b1) && a0 < b1 && b0 < a1 {
                return Err(Error::Value(format!(
                    "{op}: arrays overlap in memory without being the same array"
                )));
            }
        }
    }
    Ok(())
}

impl super::GpuKernel for UpdateOp {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        let out = &io.outputs[0];
        let n = io.inputs[0].size();
        let scaled = self.kind.spec().scale_input;
        let (ins, scale) = io.inputs.split_at(io.inputs.len() - scaled as usize);
        let all: Vec<&TBlob> = ins.iter().chain(std::iter::once(out)).collect();
        check_blobs(name, &all, n)?;
        let types: Vec<DType> = io.inputs.iter().map(|b| b.dtype).collect();
        if self.infer_type(&types)?[0] != out.dtype {
            return Err(Error::Type(format!(
                "{name}: output has dtype {} but weight has dtype {}",
                out.dtype, types[0]
            )));
        }
        let sfx = float_suffix(name, out.dtype)?;
        let code = self.kind as i32;
        let req = req_code(io.req[0]);
        if let Some(scale) = scale.first() {
            return self.adamw(ctx, ins, scale, out, req, sfx);
        }
        if is_mixed_precision(self.kind) {
            // (momentum, master weight); the momentum-free kinds have no momentum.
            let (mom, w32) = match ins.len() {
                4 => (ins[2].ptr(), ins[3].ptr()),
                _ => (std::ptr::null_mut(), ins[2].ptr()),
            };
            let args = Args::new()
                .ptr(out.ptr())
                .ptr(ins[1].ptr())
                .ptr(mom)
                .ptr(w32)
                .arg(n as i64)
                .arg(code)
                .arg(req)
                .arg(HyperArg::of::<f32>(&self.h));
            return launch_n(ctx, MODULE, &format!("mp_update_{sfx}"), n, args);
        }
        let state = |i: usize| ins.get(i).map_or(std::ptr::null_mut(), |b| b.ptr());
        let hyper = match out.dtype {
            DType::F64 => HyperArg::of::<f64>(&self.h),
            DType::F16 => HyperArg::of::<f16>(&self.h),
            _ => HyperArg::of::<f32>(&self.h),
        };
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(ins[0].ptr())
            .ptr(ins[1].ptr())
            .ptr(state(2))
            .ptr(state(3))
            .ptr(state(4))
            .arg(n as i64)
            .arg(code)
            .arg(req)
            .arg(hyper);
        launch_n(ctx, MODULE, &format!("update_{sfx}"), n, args)
    }
}

impl super::GpuKernel for MultiUpdateOp {
    /// Each weight in turn, by the single-weight update of the same formula.
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        for t in 0..self.count() {
            let (op, ins) = self.weight_update(t, io.outputs[t].dtype);
            let blobs = Blobs::new(&io.inputs[ins], &io.outputs[t..t + 1], &io.req[t..t + 1]);
            super::GpuKernel::forward(&op, ctx, blobs).map_err(|e| e.in_op(self.name()))?;
        }
        Ok(())
    }
}

impl UpdateOp {
    /// AdamW, whose gradient scale is an array the kernel reads on the device.
    fn adamw(
        &self,
        ctx: &mut OpContext,
        ins: &[TBlob],
        scale: &TBlob,
        out: &TBlob,
        req: i32,
        sfx: &str,
    ) -> Result<()> {
        let name = self.name();
        if scale.dtype != DType::F32 || scale.size() != 1 {
            return Err(Error::Value(format!(
                "{name}: rescale_grad must be one float32 value, got {} elements of {}",
                scale.size(),
                scale.dtype
            )));
        }
        let n = out.size();
        let args = Args::new().ptr(out.ptr());
        let (kernel, args, hyper) = if self.kind == Kind::MpAdamW {
            let args = args
                .ptr(ins[1].ptr())
                .ptr(ins[2].ptr())
                .ptr(ins[3].ptr())
                .ptr(ins[4].ptr());
            ("mp_adamw_update", args, HyperArg::of::<f32>(&self.h))
        } else {
            let args = (0..4).fold(args, |a, i| a.ptr(ins[i].ptr()));
            let hyper = match out.dtype {
                DType::F64 => HyperArg::of::<f64>(&self.h),
                DType::F16 => HyperArg::of::<f16>(&self.h),
                _ => HyperArg::of::<f32>(&self.h),
            };
            ("adamw_update", args, hyper)
        };
        let args = args.ptr(scale.ptr()).arg(n as i64).arg(req).arg(hyper);
        launch_n(ctx, MODULE, &format!("{kernel}_{sfx}"), n, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_kernel_enum() {
        let src = crate::cuda::sources::module(MODULE).expect("embedded");
        let body = src
            .split("enum rsmx_update {")
            .nth(1)
            .unwrap()
            .split("};")
            .next()
            .unwrap();
        let names: Vec<String> = body
            .split(',')
            .map(|s| s.trim().trim_start_matches("RSMX_UPDATE_").to_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(names.len(), Kind::ALL.len());
        for kind in Kind::ALL {
            let spec_name = kind
                .spec()
                .name
                .trim_start_matches("_rsmx_")
                .trim_start_matches('_')
                .trim_end_matches("_update");
            assert_eq!(names[kind as usize], spec_name, "{kind:?}");
        }
    }

    #[test]
    fn hyperparameters_are_rounded_to_the_compute_type() {
        let mut h = Hyper::defaults(Kind::AdaDelta);
        h.lr = 0.1;
        h.rho = 0.3;
        let f = HyperArg::of::<f16>(&h);
        assert_eq!(f.0[0], f16::from_f64(0.1).to_f64());
        assert_eq!(f.0[15], f16::from_f64(1.0 - 0.3).to_f64());
        assert_eq!(HyperArg::of::<f32>(&h).0[0], 0.1f32 as f64);
        assert_eq!(HyperArg::of::<f64>(&h).0[0], 0.1);
        assert_eq!(std::mem::size_of::<HyperArg>(), 168);
    }
}
