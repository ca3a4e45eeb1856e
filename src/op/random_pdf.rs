//! Definitions of the densities of the samplers' distributions, `_random_pdf_*` (alias
//! `random_pdf_*`): the (log-)density of each sample under the parameters of its row, as
//! compositions of element-wise operators, so their gradients come with them.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const PARAMS: &[Param] = &[Param::new(
    "is_log",
    "boolean",
    "False",
    "If set, compute the density of the log-probability instead of the probability.",
)];

/// A distribution.
#[derive(Clone, Copy, PartialEq)]
enum Dist {
    Uniform,
    Normal,
    Gamma,
    Exponential,
    Poisson,
    NegBinomial,
    GenNegBinomial,
    Dirichlet,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "_random_pdf_uniform",
            Dist::Normal => "_random_pdf_normal",
            Dist::Gamma => "_random_pdf_gamma",
            Dist::Exponential => "_random_pdf_exponential",
            Dist::Poisson => "_random_pdf_poisson",
            Dist::NegBinomial => "_random_pdf_negative_binomial",
            Dist::GenNegBinomial => "_random_pdf_generalized_negative_binomial",
            Dist::Dirichlet => "_random_pdf_dirichlet",
        }
    }

    /// True if each sample is a vector (its last axis), as Dirichlet's.
    fn vector(self) -> bool {
        self == Dist::Dirichlet
    }
}

/// The output shape, checking that the parameters share a shape that leads the samples'.
fn output(d: Dist, s: &[Shape]) -> Result<Shape> {
    let (sample, p) = (&s[0], &s[1]);
    let bad = |why: &str| {
        let list: Vec<String> = s.iter().map(|x| fmt_shape(x)).collect();
        Error::Value(format!(
            "{}: {why} (input shapes {})",
            d.name(),
            list.join(", ")
        ))
    };
    if s[1..].iter().any(|q| q != p) {
        return Err(bad("the distribution parameters must have the same shape"));
    }
    let lead = if d.vector() {
        p.len().saturating_sub(1)
    } else {
        p.len()
    };
    if p.is_empty()
        || p.len() > sample.len()
        || sample[..lead] != p[..lead]
        || (d.vector() && sample.last() != p.last())
    {
        return Err(bad("the parameters' shape must lead the samples' shape"));
    }
    if d.vector() {
        if sample.len() == 1 {
            return Ok(Shape::from_slice(&[1]));
        }
        return Ok(Shape::from_slice(&sample[..sample.len() - 1]));
    }
    Ok(sample.clone())
}

/// Parameter input `i` shaped to broadcast against the samples: ones inserted after its
/// leading axes (before the last one for vector samples).
fn param(b: &mut Builder, i: usize, p: &Shape, sample: &Shape, vector: bool) -> Result<Src> {
    let lead = if vector { p.len() - 1 } else { p.len() };
    let mut shape = p[..lead].to_vec();
    shape.extend(std::iter::repeat_n(1, sample.len() - p.len()));
    shape.extend_from_slice(&p[lead..]);
    b.reshape(Src::Input(i), &shape)
}

/// `lgamma(x + c)`.
fn lgamma_plus(b: &mut Builder, x: Src, c: f64) -> Result<Src> {
    let shifted = if c == 0.0 {
        x
    } else {
        b.scalar("_plus_scalar", x, c)?
    };
    b.unary("gammaln", shifted)
}

/// The negative binomial log-density of `x` for limit `l` and probability `p`:
/// lgamma(x + l) - lgamma(x + 1) - lgamma(l) + l log p + x log(1 - p).
fn neg_binomial(b: &mut Builder, x: Src, l: Src, p: Src) -> Result<Src> {
    let xl = b.binary("broadcast_add", x, l)?;
    let a = b.unary("gammaln", xl)?;
    let c = lgamma_plus(b, x, 1.0)?;
    let lg_l = b.unary("gammaln", l)?;
    let logp = b.unary("log", p)?;
    let l_logp = b.binary("broadcast_mul", l, logp)?;
    let q = b.scalar("_rminus_scalar", p, 1.0)?;
    let logq = b.unary("log", q)?;
    let x_logq = b.binary("broadcast_mul", x, logq)?;
    let t = b.binary("elemwise_sub", a, c)?;
    let t = b.binary("broadcast_sub", t, lg_l)?;
    let t = b.binary("broadcast_add", t, l_logp)?;
    b.binary("elemwise_add", t, x_logq)
}

/// The log-density of the samples (input 0).
fn log_density(d: Dist, b: &mut Builder, s: &[Shape]) -> Result<Src> {
    let (x, sample) = (Src::Input(0), &s[0]);
    let p = &s[1];
    Ok(match d {
        Dist::Uniform => {
            let (lo, hi) = (
                param(b, 1, p, sample, false)?,
                param(b, 2, p, sample, false)?,
            );
            let width = b.binary("elemwise_sub", hi, lo)?;
            let lw = b.unary("log", width)?;
            let neg = b.unary("negative", lw)?;
            b.binary("broadcast_like", neg, x)?
        }
        Dist::Normal => {
            let (mu, sigma) = (
                param(b, 1, p, sample, false)?,
                param(b, 2, p, sample, false)?,
            );
            let z = b.binary("broadcast_sub", x, mu)?;
            let z2 = b.unary("square", z)?;
            let s2 = b.unary("square", sigma)?;
            let e = b.binary("broadcast_div", z2, s2)?;
            let e = b.scalar("_mul_scalar", e, -0.5)?;
            let ls = b.unary("log", sigma)?;
            let norm = b.scalar("_plus_scalar", ls, 0.5 * (2.0 * std::f64::consts::PI).ln())?;
            b.binary("broadcast_sub", e, norm)?
        }
        Dist::Gamma => {
            // alpha log(beta) + (alpha - 1) log(x) - beta x - lgamma(alpha)
            let (a, r) = (
                param(b, 1, p, sample, false)?,
                param(b, 2, p, sample, false)?,
            );
            let lr = b.unary("log", r)?;
            let a_lr = b.binary("elemwise_mul", a, lr)?;
            let lga = b.unary("gammaln", a)?;
            let c = b.binary("elemwise_sub", a_lr, lga)?;
            let am1 = b.scalar("_minus_scalar", a, 1.0)?;
            let lx = b.unary("log", x)?;
            let t = b.binary("broadcast_mul", lx, am1)?;
            let rx = b.binary("broadcast_mul", x, r)?;
            let t = b.binary("elemwise_sub", t, rx)?;
            b.binary("broadcast_add", t, c)?
        }
        Dist::Exponential => {
            let l = param(b, 1, p, sample, false)?;
            let ll = b.unary("log", l)?;
            let lx = b.binary("broadcast_mul", x, l)?;
            b.binary("broadcast_sub", ll, lx)?
        }
        Dist::Poisson => {
            // x log(lam) - lgamma(x + 1) - lam
            let l = param(b, 1, p, sample, false)?;
            let ll = b.unary("log", l)?;
            let t = b.binary("broadcast_mul", x, ll)?;
            let f = lgamma_plus(b, x, 1.0)?;
            let t = b.binary("elemwise_sub", t, f)?;
            b.binary("broadcast_sub", t, l)?
        }
        Dist::NegBinomial => {
            let (k, pr) = (
                param(b, 1, p, sample, false)?,
                param(b, 2, p, sample, false)?,
            );
            neg_binomial(b, x, k, pr)?
        }
        Dist::GenNegBinomial => {
            // limit = 1 / alpha, prob = 1 / (mu alpha + 1)
            let (mu, alpha) = (
                param(b, 1, p, sample, false)?,
                param(b, 2, p, sample, false)?,
            );
            let limit = b.unary("reciprocal", alpha)?;
            let ma = b.binary("elemwise_mul", mu, alpha)?;
            let ma1 = b.scalar("_plus_scalar", ma, 1.0)?;
            let prob = b.unary("reciprocal", ma1)?;
            neg_binomial(b, x, limit, prob)?
        }
        Dist::Dirichlet => {
            // sum (alpha - 1) log x + lgamma(sum alpha) - sum lgamma(alpha), over the last axis
            let a = param(b, 1, p, sample, true)?;
            let last = sample.len() - 1;
            let am1 = b.scalar("_minus_scalar", a, 1.0)?;
            let lx = b.unary("log", x)?;
            let t = b.binary("broadcast_mul", lx, am1)?;
            let t = b.reduce("sum", t, &[last], true)?;
            let sa = b.reduce("sum", a, &[last], true)?;
            let lgs = b.unary("gammaln", sa)?;
            let lga = b.unary("gammaln", a)?;
            let slga = b.reduce("sum", lga, &[last], true)?;
            let c = b.binary("elemwise_sub", lgs, slga)?;
            b.binary("broadcast_add", t, c)?
        }
    })
}

fn create(d: Dist, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(d.name(), attrs, PARAMS)?;
    let is_log: bool = p.get("is_log")?;
    let n_in = match d {
        Dist::Exponential | Dist::Poisson | Dist::Dirichlet => 2,
        _ => 3,
    };
    Ok(Defined::op(
        d.name(),
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs(d.name(), s, n_in)?;
            Ok(vec![output(d, s)?])
        }),
        Box::new(move |t: &[DType]| Ok(vec![crate::op::same_dtype(d.name(), t)?])),
        Box::new(move |b, s, _| {
            let lp = log_density(d, b, s)?;
            let out = output(d, s)?;
            let lp = b.reshape(lp, &out)?;
            Ok(vec![if is_log { lp } else { b.unary("exp", lp)? }])
        }),
    ))
}

/// Registers the densities.
pub fn register(r: &mut Registry) {
    let all: [(Dist, &'static [&'static str], &'static [&'static str]); 8] = [
        (
            Dist::Uniform,
            &["sample", "low", "high"],
            &["random_pdf_uniform"],
        ),
        (
            Dist::Normal,
            &["sample", "mu", "sigma"],
            &["random_pdf_normal"],
        ),
        (
            Dist::Gamma,
            &["sample", "alpha", "beta"],
            &["random_pdf_gamma"],
        ),
        (
            Dist::Exponential,
            &["sample", "lam"],
            &["random_pdf_exponential"],
        ),
        (Dist::Poisson, &["sample", "lam"], &["random_pdf_poisson"]),
        (
            Dist::NegBinomial,
            &["sample", "k", "p"],
            &["random_pdf_negative_binomial"],
        ),
        (
            Dist::GenNegBinomial,
            &["sample", "mu", "alpha"],
            &["random_pdf_generalized_negative_binomial"],
        ),
        (
            Dist::Dirichlet,
            &["sample", "alpha"],
            &["random_pdf_dirichlet"],
        ),
    ];
    for (d, inputs, aliases) in all {
        r.add(OpDef {
            name: d.name(),
            aliases,
            inputs,
            variadic: false,
            params: PARAMS,
            doc: "The probability density (or its logarithm) of each sample under its row's distribution parameters.",
            create: Box::new(move |a| create(d, a)),
        });
    }
}
