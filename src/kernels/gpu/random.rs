//! GPU kernels of the random samplers (`random.cu`): those drawn from attributes
//! (`_random_uniform`, `_random_normal` and their `_like` forms), with parameters per
//! element (`_sample_*`), `_sample_multinomial` and `_shuffle`. The host draws one key per
//! launch from the device's generator, and each element hashes (key, index) on the device.

use super::launch::{float_suffix, launch_n, suffix, Args};
use super::temp::Temp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::random::{Dist, Multinomial, Random, Sample, Shuffle};
use crate::op::{OpContext, OpReq};
use crate::shape::{size_of, Shape};
use rand::Rng;

impl super::GpuKernel for Random {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        self.check()?;
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let out = &io.outputs[0];
        let key: u64 = ctx.rng(self.name)?.gen();
        let n = out.size();
        let add = i32::from(io.req[0] == OpReq::Add);
        // The other distributions, by their code in `enum rsmx_sample`.
        let dist = |ctx: &OpContext, code: i32, a: f64, b: f64| -> Result<()> {
            let name = format!("random_dist_{}", float_suffix(self.name, out.dtype)?);
            let args = Args::new()
                .ptr(out.ptr())
                .arg(n as i64)
                .arg(code)
                .arg(a)
                .arg(b)
                .arg(key)
                .arg(add);
            launch_n(ctx, "random", &name, n, args)
        };
        let (kernel, a, b) = match self.dist {
            Dist::Uniform { low, high } => ("random_uniform", low, high),
            Dist::Normal { loc, scale } => ("random_normal", loc, scale),
            Dist::RandInt { low, high } => {
                let name = format!("random_randint_{}", suffix(self.name, out.dtype)?);
                let args = Args::new()
                    .ptr(out.ptr())
                    .arg(n as i64)
                    .arg(low)
                    .arg(high)
                    .arg(key)
                    .arg(add);
                return launch_n(ctx, "random", &name, n, args);
            }
            Dist::Exponential { lam } => return dist(ctx, 2, lam, 0.0),
            Dist::Gamma { alpha, beta } => return dist(ctx, 3, alpha, beta),
            Dist::Poisson { lam } => return dist(ctx, 4, lam, 0.0),
            Dist::NegBinomial { k, p } => return dist(ctx, 5, k, p),
            Dist::GenNegBinomial { mu, alpha } => return dist(ctx, 6, mu, alpha),
        };
        let name = format!("{kernel}_{}", float_suffix(self.name, out.dtype)?);
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

/// The kernel's code of a `_sample_*` kind (`enum rsmx_sample`).
fn sample_code(kind: &str) -> i32 {
    match kind {
        "uniform" => 0,
        "normal" => 1,
        "exponential" => 2,
        "gamma" => 3,
        "poisson" => 4,
        "negative_binomial" => 5,
        _ => 6,
    }
}

/// `blob`'s values as float64 in scratch memory (through `Cast`'s kernel).
fn as_f64(ctx: &OpContext, blob: &TBlob) -> Result<Temp> {
    let t = Temp::new(ctx, blob.size() * 8)?;
    let view = TBlob::on_device(
        t.ptr(),
        Shape::from_slice(&blob.shape),
        DType::F64,
        blob.context(),
    );
    super::xform::cast(ctx, blob, &view, OpReq::Write)?;
    Ok(t)
}

impl super::GpuKernel for Sample {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let out = &io.outputs[0];
        let sfx = float_suffix(self.name, out.dtype)?;
        let key: u64 = ctx.rng(self.name)?.gen();
        let n = out.size();
        if n == 0 {
            return Ok(());
        }
        let a = as_f64(ctx, &io.inputs[0])?;
        let b = if self.nparams > 1 {
            Some(as_f64(ctx, &io.inputs[1])?)
        } else {
            None
        };
        let m = size_of(&self.shape).max(1);
        let args = Args::new()
            .ptr(out.ptr())
            .arg(n as i64)
            .arg(m as i64)
            .ptr(a.ptr())
            .ptr(b.as_ref().map_or(std::ptr::null_mut(), |t| t.ptr()))
            .arg(sample_code(self.kind))
            .arg(key)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, "random", &format!("sample_{sfx}"), n, args)
    }
}

impl super::GpuKernel for Multinomial {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = "_sample_multinomial";
        let data = &io.inputs[0];
        let sfx = float_suffix(name, data.dtype)?;
        let key: u64 = ctx.rng(name)?.gen();
        let k = data.shape[data.shape.len() - 1];
        let n = io.outputs[0].size();
        if n == 0 {
            return Ok(());
        }
        let m = size_of(&self.shape).max(1);
        let cats = Temp::new(ctx, n * 8)?;
        let logp = (self.get_prob && io.req[1] != OpReq::Null).then(|| &io.outputs[1]);
        let args = Args::new()
            .ptr(data.ptr())
            .arg(n as i64)
            .arg(m as i64)
            .arg(k as i64)
            .arg(key)
            .ptr(cats.ptr())
            .ptr(logp.map_or(std::ptr::null_mut(), |b| b.ptr()))
            .arg(i32::from(self.get_prob && io.req[1] == OpReq::Add));
        launch_n(ctx, "random", &format!("multinomial_{sfx}"), n, args)?;
        let out = &io.outputs[0];
        let cats_blob = TBlob::on_device(cats.ptr(), out.shape.clone(), DType::I64, out.context());
        super::xform::cast(ctx, &cats_blob, out, io.req[0])
    }
}

impl super::GpuKernel for Shuffle {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let req = io.req[0];
        if req == OpReq::Null {
            return Ok(());
        }
        let (data, out) = (&io.inputs[0], &io.outputs[0]);
        let key: u64 = ctx.rng("_shuffle")?.gen();
        let rows = data.shape.first().copied().unwrap_or(1);
        let row = data.size().checked_div(rows).unwrap_or(0);
        if row == 0 {
            return Ok(());
        }
        let sfx = if data.dtype == DType::Bool {
            if req == OpReq::Add {
                return Err(Error::Type(
                    "_shuffle: cannot add to an output of dtype bool".into(),
                ));
            }
            "u8"
        } else {
            suffix("_shuffle", data.dtype)?
        };
        // The order: the rows sorted by random keys.
        let p = rows.next_power_of_two();
        let keys = Temp::new(ctx, p * 8)?;
        let order = Temp::new(ctx, p * 8)?;
        let args = Args::new()
            .ptr(keys.ptr())
            .ptr(order.ptr())
            .arg(rows as i64)
            .arg(p as i64)
            .arg(key);
        launch_n(ctx, "random", "shuffle_keys", p, args)?;
        super::sort::bitonic(ctx, keys.ptr(), order.ptr(), 1, p)?;
        // In place, the rows are read from a copy.
        let bytes = data.size() * data.dtype.size();
        let copy = if data.ptr() == out.ptr() {
            let t = Temp::new(ctx, bytes)?;
            let view = TBlob::on_device(t.ptr(), data.shape.clone(), data.dtype, data.context());
            super::xform::copy_same(ctx, "_shuffle", data, &view, OpReq::Write)?;
            Some(t)
        } else {
            None
        };
        let src = copy.as_ref().map_or(data.ptr(), |t| t.ptr());
        let args = Args::new()
            .ptr(out.ptr())
            .ptr(src)
            .ptr(order.ptr())
            .arg(rows as i64)
            .arg(row as i64)
            .arg(i32::from(req == OpReq::Add));
        launch_n(
            ctx,
            "random",
            &format!("shuffle_rows_{sfx}"),
            rows * row,
            args,
        )
    }
}

/// Registers the GPU kernels of the samplers with parameter arrays.
pub(super) fn register_kernels(k: &mut Kernels) {
    super::add::<Sample>(k);
    super::add::<Multinomial>(k);
    super::add::<Shuffle>(k);
}
