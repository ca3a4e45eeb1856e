//! CPU kernels of the random samplers: `_random_*` (parameters from attributes),
//! `_random_*_like`, `_sample_*` (parameters per element from arrays),
//! `_sample_multinomial` and `_shuffle`.

use super::indexing::{store, CastElem, Elem, Scalar};
use super::map::pool_shares_work;
use crate::dispatch_dtype;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::{InOut, TBlob};
use crate::op::random::{Dist, Multinomial, Random, Sample, Shuffle};
use crate::op::{OpContext, OpReq};
use crate::shape::size_of;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, Gamma, Poisson, StandardNormal};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

/// Outputs longer than this are drawn in chunks of this many elements, each from its own
/// generator seeded from the device's, in parallel; the result depends only on the seed.
const CHUNK: usize = 1 << 16;

/// Fills `out` with `draw(rng, element index)`, writing or adding as `add` says.
fn fill<T: CastElem>(
    out: &mut [T],
    rng: &mut Pcg64Mcg,
    add: bool,
    draw: impl Fn(&mut Pcg64Mcg, usize) -> Scalar + Sync,
) {
    if out.len() <= CHUNK {
        for (e, o) in out.iter_mut().enumerate() {
            store(o, T::from_scalar(draw(rng, e)), add);
        }
        return;
    }
    let seeds: Vec<u64> = (0..out.len().div_ceil(CHUNK)).map(|_| rng.gen()).collect();
    let each = |(c, (chunk, seed)): (usize, (&mut [T], u64))| {
        let mut r = Pcg64Mcg::seed_from_u64(seed);
        for (i, o) in chunk.iter_mut().enumerate() {
            store(o, T::from_scalar(draw(&mut r, c * CHUNK + i)), add);
        }
    };
    // The chunks and their seeds are the same either way, so the values are too.
    if pool_shares_work() {
        out.par_chunks_mut(CHUNK)
            .zip(seeds)
            .enumerate()
            .for_each(each);
    } else {
        out.chunks_mut(CHUNK).zip(seeds).enumerate().for_each(each);
    }
}

/// A gamma draw with shape `alpha` and scale `beta`; NaN for invalid parameters.
#[inline]
fn gamma(r: &mut Pcg64Mcg, alpha: f64, beta: f64) -> f64 {
    match Gamma::new(alpha, beta) {
        Ok(g) => g.sample(r),
        Err(_) => f64::NAN,
    }
}

/// A Poisson draw; 0 for a rate that is not positive.
#[inline]
fn poisson(r: &mut Pcg64Mcg, lam: f64) -> f64 {
    if lam.is_nan() {
        return f64::NAN;
    }
    if lam <= 0.0 {
        return 0.0;
    }
    match Poisson::new(lam) {
        Ok(p) => p.sample(r),
        Err(_) => f64::NAN,
    }
}

impl Dist {
    /// One draw, as a float (an integer for `RandInt`).
    #[inline]
    fn draw(self, r: &mut Pcg64Mcg) -> Scalar {
        Scalar::Float(match self {
            Dist::Uniform { low, high } => low + (high - low) * r.gen::<f64>(),
            Dist::Normal { loc, scale } => {
                let z: f64 = StandardNormal.sample(r);
                loc + scale * z
            }
            Dist::RandInt { low, high } => return Scalar::Int(r.gen_range(low..high)),
            Dist::Exponential { lam } => {
                let e: f64 = Exp1.sample(r);
                e / lam
            }
            Dist::Gamma { alpha, beta } => gamma(r, alpha, beta),
            Dist::Poisson { lam } => poisson(r, lam),
            Dist::NegBinomial { k, p } => {
                if k <= 0.0 || p >= 1.0 {
                    0.0
                } else {
                    let lam = gamma(r, k, (1.0 - p) / p);
                    poisson(r, lam)
                }
            }
            Dist::GenNegBinomial { mu, alpha } => {
                if alpha == 0.0 {
                    poisson(r, mu)
                } else if mu <= 0.0 {
                    0.0
                } else {
                    let lam = gamma(r, 1.0 / alpha, alpha * mu);
                    poisson(r, lam)
                }
            }
        })
    }
}

/// One uniform draw on `[low, high)` for an output of type `T`, redrawn if rounding to
/// `T` reached `high` (only for finite ranges that `T` can tell apart; other parameters,
/// as `_sample_uniform` may get, draw without the check).
#[inline]
fn uniform_in<T: CastElem>(r: &mut Pcg64Mcg, low: f64, high: f64) -> Scalar {
    let d = Dist::Uniform { low, high };
    let hi = T::from_scalar(Scalar::Float(high));
    let checked = low.is_finite()
        && high.is_finite()
        && high > low
        && hi.to_f64().is_finite()
        && T::from_scalar(Scalar::Float(low)) < hi;
    if !checked {
        return d.draw(r);
    }
    loop {
        let v = d.draw(r);
        if T::from_scalar(v) < hi {
            return v;
        }
    }
}

/// Draws `dist` into `out`, whatever its element type.
fn fill_dist(dist: Dist, out: &TBlob, rng: &mut Pcg64Mcg, add: bool) {
    dispatch_dtype!(out.dtype, T => {
        let o = out.slice_mut::<T>();
        match dist {
            Dist::Uniform { low, high } => fill(o, rng, add, |r, _| uniform_in::<T>(r, low, high)),
            d => fill(o, rng, add, |r, _| d.draw(r)),
        }
    })
}

impl CpuKernel for Random {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        self.check()?;
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let rng = ctx.rng(self.name)?;
        fill_dist(self.dist, &io.outputs[0], rng, io.req[0] == OpReq::Add);
        Ok(())
    }
}

fn f64s(blob: &TBlob) -> Vec<f64> {
    dispatch_dtype!(blob.dtype, T => blob.slice::<T>().iter().map(|v| v.to_f64()).collect())
}

impl CpuKernel for Sample {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let a = f64s(&io.inputs[0]);
        let b = if self.nparams > 1 {
            f64s(&io.inputs[1])
        } else {
            vec![0.0; a.len()]
        };
        let m = size_of(&self.shape);
        let rng = ctx.rng(self.name)?;
        let add = io.req[0] == OpReq::Add;
        let out = &io.outputs[0];
        let uniform = self.kind == "uniform";
        dispatch_dtype!(out.dtype, T => fill(out.slice_mut::<T>(), rng, add, |r, e| {
            let i = e / m.max(1);
            if uniform {
                uniform_in::<T>(r, a[i], b[i])
            } else {
                self.dist(a[i], b[i]).draw(r)
            }
        }));
        Ok(())
    }
}

impl CpuKernel for Multinomial {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let data = &io.inputs[0];
        let k = data.shape[data.shape.len() - 1];
        let probs = f64s(data);
        let m = size_of(&self.shape).max(1);
        let rng = ctx.rng("_sample_multinomial")?;
        // Categories first, so that the log-probabilities can be read from them.
        let mut cats = vec![0i64; io.outputs[0].size()];
        for (e, c) in cats.iter_mut().enumerate() {
            let row = &probs[(e / m) * k..(e / m + 1) * k];
            let u: f64 = rng.gen();
            let mut acc = 0.0;
            let mut pick = row.iter().rposition(|&p| p > 0.0).unwrap_or(k - 1);
            for (j, &p) in row.iter().enumerate() {
                acc += p;
                if acc > u {
                    pick = j;
                    break;
                }
            }
            *c = pick as i64;
        }
        if io.req[0] != OpReq::Null {
            let add = io.req[0] == OpReq::Add;
            dispatch_dtype!(io.outputs[0].dtype, T => {
                for (o, &c) in io.outputs[0].slice_mut::<T>().iter_mut().zip(&cats) {
                    store(o, T::from_scalar(Scalar::Int(c)), add);
                }
            });
        }
        if self.get_prob && io.req[1] != OpReq::Null {
            let add = io.req[1] == OpReq::Add;
            dispatch_dtype!(io.outputs[1].dtype, T => {
                let out = io.outputs[1].slice_mut::<T>();
                for (e, (o, &c)) in out.iter_mut().zip(&cats).enumerate() {
                    let lp = probs[(e / m) * k + c as usize].ln();
                    store(o, T::from_scalar(Scalar::Float(lp)), add);
                }
            });
        }
        Ok(())
    }
}

fn shuffle_rows<T: Elem>(data: &TBlob, out: &TBlob, row: usize, order: &[usize], add: bool) {
    // Copy first: the output may be the input (in-place shuffle).
    let mut io = data.in_out::<T>(out);
    let src = io.input().to_vec();
    let out = match &mut io {
        InOut::Same(o) => &mut **o,
        InOut::Apart(_, o) => &mut **o,
    };
    for (dst, &j) in out.chunks_mut(row).zip(order) {
        for (o, &v) in dst.iter_mut().zip(&src[j * row..(j + 1) * row]) {
            store(o, v, add);
        }
    }
}

impl CpuKernel for Shuffle {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let data = &io.inputs[0];
        let rows = data.shape.first().copied().unwrap_or(1);
        let row = data.size().checked_div(rows).unwrap_or(0);
        let mut order: Vec<usize> = (0..rows).collect();
        order.shuffle(ctx.rng("_shuffle")?);
        if row == 0 {
            return Ok(());
        }
        let add = io.req[0] == OpReq::Add;
        dispatch_dtype!(data.dtype, T => shuffle_rows::<T>(data, &io.outputs[0], row, &order, add));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Random>(k);
    cpu::add::<Sample>(k);
    cpu::add::<Multinomial>(k);
    cpu::add::<Shuffle>(k);
}

#[cfg(test)]
mod tests {
    use crate::imperative::invoke;
    use crate::op::resource::seed;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    fn mean_std(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (
            m,
            (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt(),
        )
    }

    /// Builds sampler `name` with `attrs` (and shape (3,)) and runs its kernel directly,
    /// without the engine (so no other test sees the failure at its wait): it must fail
    /// with a message containing `msg`.
    fn fails_when_run(name: &str, attrs: &[(&str, &str)], msg: &str) {
        use crate::context::Context;
        use crate::op::{OpContext, OpReq};
        let mut all = attrs.to_vec();
        all.push(("shape", "(3,)"));
        let op = crate::op::find(name)
            .unwrap()
            .build(&crate::op::testutil::attrs(&all))
            .unwrap();
        let cpu = Context::cpu(0);
        let out = crate::ndarray::NDArray::empty(&[3], crate::dtype::DType::F32, cpu).unwrap();
        let ob = [out.blob()];
        let mut rng = crate::op::resource::HostRng::new(7, cpu);
        let mut ctx = OpContext::new(cpu, false);
        ctx.rng = Some(&mut rng);
        let blobs = crate::kernels::Blobs::new(&[], &ob, &[OpReq::Write]);
        let e = crate::kernels::run_kernel(op.as_ref(), &mut ctx, blobs).unwrap_err();
        assert!(e.message().contains(msg), "{name}: {e}");
    }

    fn f64s(a: &crate::ndarray::NDArray) -> Vec<f64> {
        f32s(a).iter().map(|&v| v as f64).collect()
    }

    #[test]
    fn distributions_have_their_moments() {
        let n = "(200000,)";
        let u = f64s(
            &run(
                "_random_uniform",
                &[("low", "-1"), ("high", "3"), ("shape", n)],
                &[],
            )[0],
        );
        assert!(u.iter().all(|&v| (-1.0..3.0).contains(&v)));
        let (m, s) = mean_std(&u);
        assert!(
            (m - 1.0).abs() < 0.02 && (s - 4.0 / 12f64.sqrt()).abs() < 0.02,
            "{m} {s}"
        );
        let (m, s) = mean_std(&f64s(
            &run("normal", &[("loc", "2"), ("scale", "3"), ("shape", n)], &[])[0],
        ));
        assert!((m - 2.0).abs() < 0.05 && (s - 3.0).abs() < 0.05, "{m} {s}");
        let (m, _) = mean_std(&f64s(
            &run("_random_exponential", &[("lam", "4"), ("shape", n)], &[])[0],
        ));
        assert!((m - 0.25).abs() < 0.01, "{m}");
        let (m, s) = mean_std(&f64s(
            &run(
                "_random_gamma",
                &[("alpha", "2"), ("beta", "3"), ("shape", n)],
                &[],
            )[0],
        ));
        assert!(
            (m - 6.0).abs() < 0.1 && (s - 18f64.sqrt()).abs() < 0.1,
            "{m} {s}"
        );
        let (m, s) = mean_std(&f64s(
            &run("_random_poisson", &[("lam", "3"), ("shape", n)], &[])[0],
        ));
        assert!(
            (m - 3.0).abs() < 0.05 && (s - 3f64.sqrt()).abs() < 0.05,
            "{m} {s}"
        );
        let (m, _) = mean_std(&f64s(
            &run(
                "_random_negative_binomial",
                &[("k", "3"), ("p", "0.4"), ("shape", n)],
                &[],
            )[0],
        ));
        assert!((m - 4.5).abs() < 0.1, "{m}");
        let gnb = &run(
            "_random_generalized_negative_binomial",
            &[("mu", "2"), ("alpha", "0.5"), ("shape", n)],
            &[],
        )[0];
        let (m, s) = mean_std(&f64s(gnb));
        assert!(
            (m - 2.0).abs() < 0.05 && (s - 4f64.sqrt()).abs() < 0.1,
            "{m} {s}"
        );
        let r = &run(
            "_random_randint",
            &[("low", "-5"), ("high", "-3"), ("shape", "(1000,)")],
            &[],
        )[0];
        let v = values::<i32>(r);
        assert!(v.iter().all(|&x| x == -5 || x == -4) && v.contains(&-5) && v.contains(&-4));
        let r = &run(
            "random_randint",
            &[
                ("low", "0"),
                ("high", "1099511627776"),
                ("shape", "(10,)"),
                ("dtype", "int64"),
            ],
            &[],
        )[0];
        assert!(values::<i64>(r).iter().all(|&x| (0..1 << 40).contains(&x)));
    }

    #[test]
    fn seeds_reproduce() {
        // A device of its own, so that tests running beside this one do not draw from it.
        let ctx = crate::context::Context::cpu(7);
        let draw = || {
            let op = crate::op::find("uniform")
                .unwrap()
                .build(&[("shape".to_string(), "(100000,)".to_string())].into())
                .unwrap();
            f32s(&invoke(&op, &[], None, Some(ctx), false).unwrap()[0])
        };
        seed(7, Some(ctx));
        let a = draw();
        let b = draw();
        seed(7, Some(ctx));
        let c = draw();
        assert_eq!(a, c);
        assert_ne!(a, b);
    }

    #[test]
    fn attributes_and_dtypes() {
        let o = &run(
            "_random_uniform",
            &[("shape", "(2, 3)"), ("dtype", "float64"), ("ctx", "cpu(0)")],
            &[],
        )[0];
        assert_eq!(o.shape(), &[2, 3]);
        assert_eq!(o.dtype(), crate::dtype::DType::F64);
        let o = &run(
            "_random_normal",
            &[("shape", "(4,)"), ("dtype", "float16")],
            &[],
        )[0];
        assert_eq!(o.dtype(), crate::dtype::DType::F16);
        let o = &run(
            "_random_uniform",
            &[("low", "1"), ("high", "1"), ("shape", "(3,)")],
            &[],
        )[0];
        assert_eq!(f32s(o), vec![1.0; 3]);
        // Out-of-range parameters build (the call returns) and fail when the kernel runs.
        fails_when_run(
            "_random_uniform",
            &[("low", "1"), ("high", "0")],
            "less than or equal",
        );
        fails_when_run(
            "_random_normal",
            &[("scale", "0")],
            "scale must be positive",
        );
        fails_when_run(
            "_random_exponential",
            &[("lam", "0")],
            "lam must be positive",
        );
        fails_when_run("_random_gamma", &[("alpha", "0")], "alpha must be positive");
        fails_when_run(
            "_random_poisson",
            &[("lam", "-1")],
            "lam must be non-negative",
        );
        assert!(try_run("_random_uniform", &[], &[]).is_err());
        assert!(try_run(
            "_random_uniform",
            &[("shape", "(3,)"), ("dtype", "int32")],
            &[]
        )
        .is_err());
        assert!(try_run(
            "_random_randint",
            &[("low", "3"), ("high", "3"), ("shape", "(3,)")],
            &[]
        )
        .is_err());
        assert!(try_run("_random_randint", &[("high", "3"), ("shape", "(3,)")], &[]).is_err());
        assert!(try_run(
            "_random_randint",
            &[("low", "0"), ("high", "1099511627776"), ("shape", "(3,)")],
            &[]
        )
        .is_err());
        assert!(try_run("_random_uniform", &[("shape", "(3,)"), ("foo", "1")], &[]).is_err());
        let z = &run("_random_poisson", &[("lam", "0"), ("shape", "(3,)")], &[])[0];
        assert_eq!(f32s(z), vec![0.0; 3]);
        let like = &run(
            "_random_uniform_like",
            &[("low", "2"), ("high", "3")],
            &[array::<f64>(&[2, 2], &[0.0; 4])],
        )[0];
        assert_eq!(like.dtype(), crate::dtype::DType::F64);
        assert!(values::<f64>(like).iter().all(|v| (2.0..3.0).contains(v)));
        assert!(try_run("_random_normal_like", &[], &[array::<i32>(&[2], &[0, 0])]).is_err());
    }

    #[test]
    fn per_element_samplers() {
        let lo = f32a(&[2], &[0., 10.]);
        let hi = f32a(&[2], &[1., 11.]);
        let o = &run(
            "_sample_uniform",
            &[("shape", "(1000,)")],
            &[lo.clone(), hi.clone()],
        )[0];
        assert_eq!(o.shape(), &[2, 1000]);
        let v = f32s(o);
        assert!(v[..1000].iter().all(|x| (0.0..1.0).contains(x)));
        assert!(v[1000..].iter().all(|x| (10.0..11.0).contains(x)));
        let o = &run("sample_normal", &[], &[lo.clone(), f32a(&[2], &[1., 1.])])[0];
        assert_eq!(o.shape(), &[2]);
        let o = &run(
            "_sample_uniform",
            &[("dtype", "float64")],
            &[array::<i32>(&[1], &[3]), array::<i32>(&[1], &[4])],
        )[0];
        assert_eq!(o.dtype(), crate::dtype::DType::F64);
        assert!(try_run(
            "_sample_uniform",
            &[],
            &[lo.clone(), f32a(&[3], &[1., 1., 1.])]
        )
        .is_err());
        assert!(try_run("_sample_uniform", &[], &[lo, array::<f64>(&[2], &[1., 1.])]).is_err());
        let g = &run(
            "_sample_gamma",
            &[("shape", "(50000,)")],
            &[f32a(&[1], &[2.]), f32a(&[1], &[3.])],
        )[0];
        let (m, _) = mean_std(&f64s(g));
        assert!((m - 6.0).abs() < 0.15, "{m}");
        let e = &run("_sample_exponential", &[], &[f32a(&[2], &[0., -1.])])[0];
        let v = f32s(e);
        assert!(v[0].is_infinite() && v[1] <= 0.0);
        let p = &run(
            "_sample_poisson",
            &[("shape", "(3,)")],
            &[f32a(&[2], &[0., -1.])],
        )[0];
        assert_eq!(f32s(p), vec![0.0; 6]);
    }

    #[test]
    fn multinomial_and_shuffle() {
        let probs = f32a(&[2, 3], &[0.1, 0.9, 0.0, 0.5, 0.5, 0.0]);
        let o = run(
            "_sample_multinomial",
            &[("shape", "(1000,)"), ("get_prob", "True")],
            &[probs],
        );
        assert_eq!(o[0].shape(), &[2, 1000]);
        let c = values::<i32>(&o[0]);
        assert!(c.iter().all(|&x| x == 0 || x == 1));
        let ones = c[..1000].iter().filter(|&&x| x == 1).count();
        assert!((850..950).contains(&ones), "{ones}");
        let lp = f32s(&o[1]);
        assert!((lp[1000] - 0.5f32.ln()).abs() < 1e-6);
        let one = &run("_sample_multinomial", &[], &[f32a(&[2], &[0.0, 1.0])])[0];
        assert_eq!((one.shape(), values::<i32>(one)), (&[1usize][..], vec![1]));
        let data: Vec<f32> = (0..300).map(|v| v as f32).collect();
        let s = &run("shuffle", &[], &[f32a(&[100, 3], &data)])[0];
        let v = f32s(s);
        assert_ne!(v, data);
        let mut firsts: Vec<f32> = v
            .chunks(3)
            .map(|r| {
                assert_eq!((r[1] - r[0], r[2] - r[0]), (1.0, 2.0));
                r[0]
            })
            .collect();
        firsts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(firsts, (0..100).map(|v| (v * 3) as f32).collect::<Vec<_>>());
    }
}
