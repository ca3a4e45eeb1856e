//! Random samplers: `_random_*` (parameters from attributes), `_random_*_like`, `_sample_*` (parameters per element from arrays), `_sample_multinomial` and `_shuffle`.

use super::indexing::{store, CastElem, Elem, Scalar};
use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::{
    check_inputs, same_dtype, Attrs, Grad, OpContext, OpDef, OpRef, OpReq, Operator, ParamList,
    Params, Registry, ResourceRequest,
};
use crate::shape::{fmt_shape, size_of, Shape};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, Gamma, Poisson, StandardNormal};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;
use std::sync::Arc;

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
    out.par_chunks_mut(CHUNK)
        .zip(seeds)
        .enumerate()
        .for_each(|(c, (chunk, seed))| {
            let mut r = Pcg64Mcg::seed_from_u64(seed);
            for (i, o) in chunk.iter_mut().enumerate() {
                store(o, T::from_scalar(draw(&mut r, c * CHUNK + i)), add);
            }
        });
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

/// A distribution with its parameters.
#[derive(Debug, Clone, Copy)]
enum Dist {
    Uniform { low: f64, high: f64 },
    Normal { loc: f64, scale: f64 },
    RandInt { low: i64, high: i64 },
    Exponential { lam: f64 },
    Gamma { alpha: f64, beta: f64 },
    Poisson { lam: f64 },
    NegBinomial { k: f64, p: f64 },
    GenNegBinomial { mu: f64, alpha: f64 },
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

// ---------------------------------------------------------------------------------------
// _random_* and _random_*_like

/// A sampler whose parameters are attributes.
struct Random {
    name: &'static str,
    dist: Dist,
    /// Shape and dtype from attributes, or `None` to take the input's (`*_like`).
    out: Option<(Shape, DType)>,
}

impl Operator for Random {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        match &self.out {
            Some((s, _)) => {
                check_inputs(self.name, inputs, 0)?;
                Ok(vec![s.clone()])
            }
            None => {
                check_inputs(self.name, inputs, 1)?;
                Ok(vec![inputs[0].clone()])
            }
        }
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        match &self.out {
            Some((_, t)) => Ok(vec![*t]),
            None => {
                let t = same_dtype(self.name, inputs)?;
                if !t.is_float() {
                    return Err(Error::Type(format!(
                        "{}: only floating-point types are supported, not {t}",
                        self.name
                    )));
                }
                Ok(vec![t])
            }
        }
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }
}

impl CpuKernel for Random {
    fn forward(
        &self,
        ctx: &mut OpContext,
        _: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let rng = ctx.rng(self.name)?;
        fill_dist(self.dist, &outputs[0], rng, req[0] == OpReq::Add);
        Ok(())
    }
}

fn require(ok: bool, op: &str, msg: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Value(format!("{op}: {msg}")))
    }
}

/// Reads a distribution's parameters from attributes and checks them as MXNet does.
fn dist_from(kind: &str, p: &Params) -> Result<Dist> {
    let op = p.op();
    Ok(match kind {
        "uniform" => {
            let (low, high) = (p.float("low", 0.0)?, p.float("high", 1.0)?);
            require(
                high >= low,
                op,
                &format!("low ({low}) must be less than or equal to high ({high})"),
            )?;
            require(
                low.is_finite() && high.is_finite(),
                op,
                "low and high must be finite",
            )?;
            Dist::Uniform { low, high }
        }
        "normal" => {
            let (loc, scale) = (p.float("loc", 0.0)?, p.float("scale", 1.0)?);
            require(
                scale > 0.0,
                op,
                &format!("scale must be positive, got {scale}"),
            )?;
            Dist::Normal { loc, scale }
        }
        "exponential" => {
            let lam = p.float("lam", 1.0)?;
            require(lam > 0.0, op, &format!("lam must be positive, got {lam}"))?;
            Dist::Exponential { lam }
        }
        "gamma" => {
            let (alpha, beta) = (p.float("alpha", 1.0)?, p.float("beta", 1.0)?);
            require(
                alpha > 0.0,
                op,
                &format!("alpha must be positive, got {alpha}"),
            )?;
            require(
                beta > 0.0,
                op,
                &format!("beta must be positive, got {beta}"),
            )?;
            Dist::Gamma { alpha, beta }
        }
        "poisson" => {
            let lam = p.float("lam", 1.0)?;
            require(
                lam >= 0.0,
                op,
                &format!("lam must be non-negative, got {lam}"),
            )?;
            Dist::Poisson { lam }
        }
        "negative_binomial" => {
            let (k, pr) = (p.int("k", 1)?, p.float("p", 1.0)?);
            require(k >= 0, op, &format!("k must be non-negative, got {k}"))?;
            require(
                pr > 0.0 && pr <= 1.0,
                op,
                &format!("p must be in (0, 1], got {pr}"),
            )?;
            Dist::NegBinomial { k: k as f64, p: pr }
        }
        _ => {
            let (mu, alpha) = (p.float("mu", 1.0)?, p.float("alpha", 1.0)?);
            require(mu >= 0.0, op, &format!("mu must be non-negative, got {mu}"))?;
            require(
                alpha >= 0.0,
                op,
                &format!("alpha must be non-negative, got {alpha}"),
            )?;
            Dist::GenNegBinomial { mu, alpha }
        }
    })
}

/// The `shape` attribute of a sampler: required, non-negative dimensions.
fn shape_attr(p: &Params, default: Option<&[i64]>) -> Result<Shape> {
    let dims = match (p.opt_tuple("shape")?, default) {
        (Some(d), _) => d,
        (None, Some(d)) => d.to_vec(),
        (None, None) => {
            return Err(Error::Value(format!(
                "{}: the output shape must be given (shape=...)",
                p.op()
            )))
        }
    };
    dims.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                Error::Value(format!(
                    "{}: shape {dims:?} has a negative dimension",
                    p.op()
                ))
            })
        })
        .collect()
}

/// The `dtype` attribute, `None`/absent giving `default`, limited to `allowed`.
fn dtype_attr(p: &Params, default: DType, allowed: &[DType]) -> Result<DType> {
    let d = p.opt_dtype("dtype")?.unwrap_or(default);
    if !allowed.contains(&d) {
        return Err(Error::Type(format!(
            "{}: dtype {d} is not supported; use one of {}",
            p.op(),
            allowed
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(d)
}

const FLOATS: &[DType] = &[DType::F16, DType::F32, DType::F64];

/// (op name, aliases, distribution kind, parameter names)
type RandomEntry = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
);

const RANDOM_OPS: &[RandomEntry] = &[
    (
        "_random_uniform",
        &["uniform", "random_uniform"],
        "uniform",
        &["low", "high"],
    ),
    (
        "_random_normal",
        &["normal", "random_normal"],
        "normal",
        &["loc", "scale"],
    ),
    (
        "_random_exponential",
        &["random_exponential"],
        "exponential",
        &["lam"],
    ),
    (
        "_random_gamma",
        &["random_gamma"],
        "gamma",
        &["alpha", "beta"],
    ),
    ("_random_poisson", &["random_poisson"], "poisson", &["lam"]),
    (
        "_random_negative_binomial",
        &["random_negative_binomial"],
        "negative_binomial",
        &["k", "p"],
    ),
    (
        "_random_generalized_negative_binomial",
        &["random_generalized_negative_binomial"],
        "generalized_negative_binomial",
        &["mu", "alpha"],
    ),
];

const LIKE_OPS: &[(&str, &str)] = &[
    ("_random_uniform_like", "uniform"),
    ("_random_normal_like", "normal"),
    ("_random_exponential_like", "exponential"),
    ("_random_gamma_like", "gamma"),
    ("_random_poisson_like", "poisson"),
    ("_random_negative_binomial_like", "negative_binomial"),
    (
        "_random_generalized_negative_binomial_like",
        "generalized_negative_binomial",
    ),
];

fn create_random(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, _, kind, params) = RANDOM_OPS[i];
    let mut allowed: Vec<&str> = params.to_vec();
    allowed.extend(["shape", "ctx", "dtype"]);
    let p = Params::new(name, attrs, &allowed)?;
    let dist = dist_from(kind, &p)?;
    Ok(Arc::new(Random {
        name,
        dist,
        out: Some((shape_attr(&p, None)?, dtype_attr(&p, DType::F32, FLOATS)?)),
    }))
}

fn create_like(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, kind) = LIKE_OPS[i];
    let params = RANDOM_OPS
        .iter()
        .find(|e| e.2 == kind)
        .map_or(&[][..], |e| e.3);
    let p = Params::new(name, attrs, params)?;
    Ok(Arc::new(Random {
        name,
        dist: dist_from(kind, &p)?,
        out: None,
    }))
}

fn create_randint(attrs: &Attrs) -> Result<OpRef> {
    let name = "_random_randint";
    let p = Params::new(name, attrs, &["low", "high", "shape", "ctx", "dtype"])?;
    let (low, high) = (p.int_required("low")?, p.int_required("high")?);
    require(
        low < high,
        name,
        &format!("low ({low}) must be less than high ({high})"),
    )?;
    let dtype = dtype_attr(&p, DType::I32, &[DType::I32, DType::I64])?;
    if dtype == DType::I32 {
        require(
            low >= i32::MIN as i64 && high <= i32::MAX as i64 + 1,
            name,
            &format!("[{low}, {high}) does not fit dtype int32; use dtype='int64'"),
        )?;
    }
    Ok(Arc::new(Random {
        name,
        dist: Dist::RandInt { low, high },
        out: Some((shape_attr(&p, None)?, dtype)),
    }))
}

// ---------------------------------------------------------------------------------------
// _sample_*: parameters per element from input arrays

/// A sampler whose parameters come from arrays of one shape; every parameter element gets
/// `shape` draws.
struct Sample {
    name: &'static str,
    kind: &'static str,
    nparams: usize,
    shape: Shape,
    dtype: DType,
}

impl Sample {
    fn dist(&self, a: f64, b: f64) -> Dist {
        match self.kind {
            "uniform" => Dist::Uniform { low: a, high: b },
            "normal" => Dist::Normal { loc: a, scale: b },
            "exponential" => Dist::Exponential { lam: a },
            "gamma" => Dist::Gamma { alpha: a, beta: b },
            "poisson" => Dist::Poisson { lam: a },
            "negative_binomial" => Dist::NegBinomial { k: a, p: b },
            _ => Dist::GenNegBinomial { mu: a, alpha: b },
        }
    }
}

fn f64s(blob: &TBlob) -> Vec<f64> {
    dispatch_dtype!(blob.dtype, T => blob.slice::<T>().iter().map(|v| v.to_f64()).collect())
}

impl Operator for Sample {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, self.nparams)?;
        if let Some(other) = inputs.iter().find(|s| *s != &inputs[0]) {
            return Err(Error::Value(format!(
                "{}: all parameter arrays must have the same shape, got {} and {}",
                self.name,
                fmt_shape(&inputs[0]),
                fmt_shape(other)
            )));
        }
        let mut out = inputs[0].clone();
        out.extend_from_slice(&self.shape);
        Ok(vec![out])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        same_dtype(self.name, inputs)?;
        Ok(vec![self.dtype])
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }
}

impl CpuKernel for Sample {
    fn forward(
        &self,
        ctx: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let a = f64s(&inputs[0]);
        let b = if self.nparams > 1 {
            f64s(&inputs[1])
        } else {
            vec![0.0; a.len()]
        };
        let m = size_of(&self.shape);
        let rng = ctx.rng(self.name)?;
        let add = req[0] == OpReq::Add;
        let out = &outputs[0];
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

/// (op name, alias, distribution kind, parameter input names)
type SampleEntry = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
);

const SAMPLE_OPS: &[SampleEntry] = &[
    (
        "_sample_uniform",
        &["sample_uniform"],
        "uniform",
        &["low", "high"],
    ),
    (
        "_sample_normal",
        &["sample_normal"],
        "normal",
        &["mu", "sigma"],
    ),
    (
        "_sample_exponential",
        &["sample_exponential"],
        "exponential",
        &["lam"],
    ),
    (
        "_sample_gamma",
        &["sample_gamma"],
        "gamma",
        &["alpha", "beta"],
    ),
    ("_sample_poisson", &["sample_poisson"], "poisson", &["lam"]),
    (
        "_sample_negative_binomial",
        &["sample_negative_binomial"],
        "negative_binomial",
        &["k", "p"],
    ),
    (
        "_sample_generalized_negative_binomial",
        &["sample_generalized_negative_binomial"],
        "generalized_negative_binomial",
        &["mu", "alpha"],
    ),
];

fn create_sample(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, _, kind, inputs) = SAMPLE_OPS[i];
    let p = Params::new(name, attrs, &["shape", "dtype"])?;
    Ok(Arc::new(Sample {
        name,
        kind,
        nparams: inputs.len(),
        shape: shape_attr(&p, Some(&[]))?,
        dtype: dtype_attr(&p, DType::F32, FLOATS)?,
    }))
}

// ---------------------------------------------------------------------------------------
// _sample_multinomial

struct Multinomial {
    shape: Shape,
    get_prob: bool,
    dtype: DType,
}

impl Operator for Multinomial {
    fn name(&self) -> &'static str {
        "_sample_multinomial"
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn num_outputs(&self) -> usize {
        if self.get_prob {
            2
        } else {
            1
        }
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_sample_multinomial", inputs, 1)?;
        let data = &inputs[0];
        if data.is_empty() || data[data.len() - 1] == 0 {
            return Err(Error::Value(format!(
                "_sample_multinomial: data must have a last axis of probabilities, got shape {}",
                fmt_shape(data)
            )));
        }
        let mut out = Shape::from_slice(&data[..data.len() - 1]);
        out.extend_from_slice(&self.shape);
        if out.is_empty() {
            out.push(1);
        }
        Ok(vec![out; self.num_outputs()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let t = same_dtype("_sample_multinomial", inputs)?;
        if !t.is_float() {
            return Err(Error::Type(format!(
                "_sample_multinomial: probabilities must be floating-point, not {t}"
            )));
        }
        Ok(if self.get_prob {
            vec![self.dtype, t]
        } else {
            vec![self.dtype]
        })
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }
}

impl CpuKernel for Multinomial {
    fn forward(
        &self,
        ctx: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        let data = &inputs[0];
        let k = data.shape[data.shape.len() - 1];
        let probs = f64s(data);
        let m = size_of(&self.shape).max(1);
        let rng = ctx.rng("_sample_multinomial")?;
        // Categories first, so that the log-probabilities can be read from them.
        let mut cats = vec![0i64; outputs[0].size()];
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
        if req[0] != OpReq::Null {
            let add = req[0] == OpReq::Add;
            dispatch_dtype!(outputs[0].dtype, T => {
                for (o, &c) in outputs[0].slice_mut::<T>().iter_mut().zip(&cats) {
                    store(o, T::from_scalar(Scalar::Int(c)), add);
                }
            });
        }
        if self.get_prob && req[1] != OpReq::Null {
            let add = req[1] == OpReq::Add;
            dispatch_dtype!(outputs[1].dtype, T => {
                for (e, (o, &c)) in outputs[1].slice_mut::<T>().iter_mut().zip(&cats).enumerate() {
                    let lp = probs[(e / m) * k + c as usize].ln();
                    store(o, T::from_scalar(Scalar::Float(lp)), add);
                }
            });
        }
        Ok(())
    }
}

fn create_multinomial(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::new(
        "_sample_multinomial",
        attrs,
        &["shape", "get_prob", "dtype"],
    )?;
    Ok(Arc::new(Multinomial {
        shape: shape_attr(&p, Some(&[]))?,
        get_prob: p.bool("get_prob", false)?,
        dtype: dtype_attr(
            &p,
            DType::I32,
            &[DType::F16, DType::F32, DType::F64, DType::I32, DType::U8],
        )?,
    }))
}

// ---------------------------------------------------------------------------------------
// _shuffle

struct Shuffle;

fn shuffle_rows<T: Elem>(src: &[T], out: &mut [T], row: usize, order: &[usize], add: bool) {
    // Copy first: the output may be the input (in-place shuffle).
    let src = src.to_vec();
    for (dst, &j) in out.chunks_mut(row).zip(order) {
        for (o, &v) in dst.iter_mut().zip(&src[j * row..(j + 1) * row]) {
            store(o, v, add);
        }
    }
}

impl Operator for Shuffle {
    fn name(&self) -> &'static str {
        "_shuffle"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs("_shuffle", inputs, 1)?;
        Ok(vec![inputs[0].clone()])
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }
}

impl CpuKernel for Shuffle {
    fn forward(
        &self,
        ctx: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        if req[0] == OpReq::Null {
            return Ok(());
        }
        let data = &inputs[0];
        let rows = data.shape.first().copied().unwrap_or(1);
        let row = data.size().checked_div(rows).unwrap_or(0);
        let mut order: Vec<usize> = (0..rows).collect();
        order.shuffle(ctx.rng("_shuffle")?);
        if row == 0 {
            return Ok(());
        }
        let add = req[0] == OpReq::Add;
        dispatch_dtype!(data.dtype, T => shuffle_rows::<T>(data.slice(), outputs[0].slice_mut(), row, &order, add));
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

// ---------------------------------------------------------------------------------------

/// Registers the random operators.
pub fn register(r: &mut Registry) {
    for (i, (name, aliases, _, params)) in RANDOM_OPS.iter().enumerate() {
        r.add(OpDef {
            name,
            aliases,
            inputs: &[],
            variadic: false,
            params: ParamList::Names(params),
            doc: "Draws samples of a distribution with the given parameters into a new array of the given shape.",
            create: Box::new(move |attrs| create_random(i, attrs)),
        });
    }
    r.add(OpDef {
        name: "_random_randint",
        aliases: &["random_randint"],
        inputs: &[],
        variadic: false,
        params: ParamList::Names(&["low", "high", "shape", "ctx", "dtype"]),
        doc: "Draws integers uniformly from [low, high).",
        create: Box::new(create_randint),
    });
    for (i, (name, kind)) in LIKE_OPS.iter().enumerate() {
        let params = RANDOM_OPS
            .iter()
            .find(|e| e.2 == *kind)
            .map_or(&[][..], |e| e.3);
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &["data"],
            variadic: false,
            params: ParamList::Names(params),
            doc: "Draws samples of a distribution into an array of the input's shape and dtype.",
            create: Box::new(move |attrs| create_like(i, attrs)),
        });
    }
    for (i, (name, aliases, _, inputs)) in SAMPLE_OPS.iter().enumerate() {
        r.add(OpDef {
            name,
            aliases,
            inputs,
            variadic: false,
            params: ParamList::Names(&["shape", "dtype"]),
            doc: "Draws `shape` samples for every element of the parameter arrays.",
            create: Box::new(move |attrs| create_sample(i, attrs)),
        });
    }
    r.add(OpDef {
        name: "_sample_multinomial",
        aliases: &["sample_multinomial"],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&["shape", "get_prob", "dtype"]),
        doc: "Draws categories from the probabilities in the last axis of data.",
        create: Box::new(create_multinomial),
    });
    r.add(OpDef {
        name: "_shuffle",
        aliases: &["shuffle"],
        inputs: &["data"],
        variadic: false,
        params: ParamList::Names(&[]),
        doc: "Shuffles the array along its first axis.",
        create: Box::new(|attrs| {
            Params::new("_shuffle", attrs, &[])?;
            Ok(Arc::new(Shuffle) as OpRef)
        }),
    });
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
        assert!(try_run(
            "_random_uniform",
            &[("low", "1"), ("high", "0"), ("shape", "(3,)")],
            &[]
        )
        .is_err());
        assert!(try_run("_random_uniform", &[], &[]).is_err());
        assert!(try_run(
            "_random_uniform",
            &[("shape", "(3,)"), ("dtype", "int32")],
            &[]
        )
        .is_err());
        assert!(try_run("_random_normal", &[("scale", "0"), ("shape", "(3,)")], &[]).is_err());
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
        assert!(try_run(
            "_random_exponential",
            &[("lam", "0"), ("shape", "(3,)")],
            &[]
        )
        .is_err());
        assert!(try_run("_random_gamma", &[("alpha", "0"), ("shape", "(3,)")], &[]).is_err());
        assert!(try_run("_random_poisson", &[("lam", "-1"), ("shape", "(3,)")], &[]).is_err());
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
