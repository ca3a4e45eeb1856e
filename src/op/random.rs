//! Definitions of the random samplers: `_random_*` (parameters from attributes),
//! `_random_*_like`, `_sample_*` (parameters per element from arrays),
//! `_sample_multinomial` and `_shuffle`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::{given_or_like, shape_of_input};
use crate::op::{
    check_inputs, same_dtype, Attrs, Grad, OpDef, OpRef, Operator, Param, Params, Registry,
    ResourceRequest,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// A distribution with its parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dist {
    Uniform { low: f64, high: f64 },
    Normal { loc: f64, scale: f64 },
    RandInt { low: i64, high: i64 },
    Exponential { lam: f64 },
    Gamma { alpha: f64, beta: f64 },
    Poisson { lam: f64 },
    NegBinomial { k: f64, p: f64 },
    GenNegBinomial { mu: f64, alpha: f64 },
}

// ---------------------------------------------------------------------------------------
// _random_* and _random_*_like

/// A sampler whose parameters are attributes.
pub(crate) struct Random {
    pub(crate) name: &'static str,
    pub(crate) dist: Dist,
    /// Why the parameters are out of range, reported when the op runs.
    pub(crate) invalid: Option<String>,
    /// Shape and dtype from attributes, or `None` to take the input's (`*_like`).
    pub(crate) out: Option<(Shape, DType)>,
}

impl Random {
    /// The parameters' range error, if any: kernels report it when the op runs.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.invalid {
            Some(msg) => Err(Error::Value(msg.clone())),
            None => Ok(()),
        }
    }
}

impl Operator for Random {
    fn name(&self) -> &'static str {
        self.name
    }

    fn gradient(&self) -> Grad {
        Grad::Zero
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        given_or_like(self.name, self.out.as_ref().map(|(s, _)| s), inputs)
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

pub(crate) fn require(ok: bool, op: &str, msg: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Value(format!("{op}: {msg}")))
    }
}

/// Reads a distribution's parameters from attributes, and checks them as MXNet does: a
/// value out of range is returned beside the distribution, for the kernel to report when
/// the op runs (an error at the next wait, as in MXNet).
pub(crate) fn dist_from(kind: &str, p: &Params) -> Result<(Dist, Option<String>)> {
    let op = p.op();
    let mut bad: Option<String> = None;
    let dist = match kind {
        "uniform" => {
            let (low, high) = (p.get::<f64>("low")?, p.get::<f64>("high")?);
            note(
                &mut bad,
                require(
                    high >= low,
                    op,
                    &format!("low ({low}) must be less than or equal to high ({high})"),
                ),
            );
            note(
                &mut bad,
                require(
                    low.is_finite() && high.is_finite(),
                    op,
                    "low and high must be finite",
                ),
            );
            Dist::Uniform { low, high }
        }
        "normal" => {
            let (loc, scale) = (p.get::<f64>("loc")?, p.get::<f64>("scale")?);
            note(
                &mut bad,
                require(
                    scale > 0.0,
                    op,
                    &format!("scale must be positive, got {scale}"),
                ),
            );
            Dist::Normal { loc, scale }
        }
        "exponential" => {
            let lam: f64 = p.get("lam")?;
            note(
                &mut bad,
                require(lam > 0.0, op, &format!("lam must be positive, got {lam}")),
            );
            Dist::Exponential { lam }
        }
        "gamma" => {
            let (alpha, beta) = (p.get::<f64>("alpha")?, p.get::<f64>("beta")?);
            note(
                &mut bad,
                require(
                    alpha > 0.0,
                    op,
                    &format!("alpha must be positive, got {alpha}"),
                ),
            );
            note(
                &mut bad,
                require(
                    beta > 0.0,
                    op,
                    &format!("beta must be positive, got {beta}"),
                ),
            );
            Dist::Gamma { alpha, beta }
        }
        "poisson" => {
            let lam: f64 = p.get("lam")?;
            note(
                &mut bad,
                require(
                    lam >= 0.0,
                    op,
                    &format!("lam must be non-negative, got {lam}"),
                ),
            );
            Dist::Poisson { lam }
        }
        "negative_binomial" => {
            let (k, pr) = (p.get::<i64>("k")?, p.get::<f64>("p")?);
            note(
                &mut bad,
                require(k >= 0, op, &format!("k must be non-negative, got {k}")),
            );
            note(
                &mut bad,
                require(
                    pr > 0.0 && pr <= 1.0,
                    op,
                    &format!("p must be in (0, 1], got {pr}"),
                ),
            );
            Dist::NegBinomial { k: k as f64, p: pr }
        }
        _ => {
            let (mu, alpha) = (p.get::<f64>("mu")?, p.get::<f64>("alpha")?);
            note(
                &mut bad,
                require(mu >= 0.0, op, &format!("mu must be non-negative, got {mu}")),
            );
            note(
                &mut bad,
                require(
                    alpha >= 0.0,
                    op,
                    &format!("alpha must be non-negative, got {alpha}"),
                ),
            );
            Dist::GenNegBinomial { mu, alpha }
        }
    };
    Ok((dist, bad))
}

/// Keeps the first failed check's message.
fn note(bad: &mut Option<String>, check: Result<()>) {
    if let (None, Err(e)) = (&bad, check) {
        *bad = Some(e.message());
    }
}

/// The `shape` attribute of a sampler, non-negative dimensions; `shape=None` is an empty
/// shape where `none_is_empty`, else an error.
pub(crate) fn shape_attr(p: &Params, none_is_empty: bool) -> Result<Shape> {
    let dims = match p.get::<Option<Vec<i64>>>("shape")? {
        Some(d) => d,
        None if none_is_empty => Vec::new(),
        None => {
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
pub(crate) fn dtype_attr(p: &Params, default: DType, allowed: &[DType]) -> Result<DType> {
    let d = p.get::<Option<DType>>("dtype")?.unwrap_or(default);
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

pub(crate) const FLOATS: &[DType] = &[DType::F16, DType::F32, DType::F64];

const LOW: Param = Param::new("low", "float", "0", "Lower bound of the distribution.");
const HIGH: Param = Param::new("high", "float", "1", "Upper bound of the distribution.");
const LOC: Param = Param::new("loc", "float", "0", "Mean of the distribution.");
const SCALE: Param = Param::new(
    "scale",
    "float",
    "1",
    "Standard deviation of the distribution.",
);
const EXP_LAM: Param = Param::new(
    "lam",
    "float",
    "1",
    "Lambda parameter (rate) of the exponential distribution.",
);
const ALPHA: Param = Param::new(
    "alpha",
    "float",
    "1",
    "Alpha parameter (shape) of the gamma distribution.",
);
const BETA: Param = Param::new(
    "beta",
    "float",
    "1",
    "Beta parameter (scale) of the gamma distribution.",
);
const POISSON_LAM: Param = Param::new(
    "lam",
    "float",
    "1",
    "Lambda parameter (rate) of the Poisson distribution.",
);
const K: Param = Param::new("k", "int", "1", "Limit of unsuccessful experiments.");
const P: Param = Param::new("p", "float", "1", "Failure probability in each experiment.");
const MU: Param = Param::new(
    "mu",
    "float",
    "1",
    "Mean of the negative binomial distribution.",
);
const DISPERSION: Param = Param::new(
    "alpha",
    "float",
    "1",
    "Alpha (dispersion) parameter of the negative binomial distribution.",
);
const SHAPE: Param = Param::required(
    "shape",
    "Shape(tuple)",
    "Shape of the output (rsmx requires it).",
);
const CTX: Param = Param::new(
    "ctx",
    "string",
    "''",
    "Context of output, in format [cpu|gpu|cpu_pinned](n). Only used for imperative calls.",
);
const FLOAT_DTYPE: Param = Param::new(
    "dtype",
    "{'None', 'float16', 'float32', 'float64'}",
    "None",
    "DType of the output in case this can't be inferred. Defaults to float32 if not defined (dtype=None).",
);

/// (op name, aliases, distribution kind, attributes)
pub(crate) type RandomEntry = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [Param],
);

pub(crate) const RANDOM_OPS: &[RandomEntry] = &[
    (
        "_random_uniform",
        &["uniform", "random_uniform"],
        "uniform",
        &[LOW, HIGH, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_normal",
        &["normal", "random_normal"],
        "normal",
        &[LOC, SCALE, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_exponential",
        &["random_exponential"],
        "exponential",
        &[EXP_LAM, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_gamma",
        &["random_gamma"],
        "gamma",
        &[ALPHA, BETA, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_poisson",
        &["random_poisson"],
        "poisson",
        &[POISSON_LAM, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_negative_binomial",
        &["random_negative_binomial"],
        "negative_binomial",
        &[K, P, SHAPE, CTX, FLOAT_DTYPE],
    ),
    (
        "_random_generalized_negative_binomial",
        &["random_generalized_negative_binomial"],
        "generalized_negative_binomial",
        &[MU, DISPERSION, SHAPE, CTX, FLOAT_DTYPE],
    ),
];

/// (op name, distribution kind, attributes)
pub(crate) const LIKE_OPS: &[(&str, &str, &[Param])] = &[
    ("_random_uniform_like", "uniform", &[LOW, HIGH]),
    ("_random_normal_like", "normal", &[LOC, SCALE]),
    ("_random_exponential_like", "exponential", &[EXP_LAM]),
    ("_random_gamma_like", "gamma", &[ALPHA, BETA]),
    ("_random_poisson_like", "poisson", &[POISSON_LAM]),
    (
        "_random_negative_binomial_like",
        "negative_binomial",
        &[K, P],
    ),
    (
        "_random_generalized_negative_binomial_like",
        "generalized_negative_binomial",
        &[MU, DISPERSION],
    ),
];

const RANDINT_PARAMS: &[Param] = &[
    Param::required("low", "long", "Lower bound of the distribution."),
    Param::required("high", "long", "Upper bound of the distribution."),
    SHAPE,
    CTX,
    Param::new(
        "dtype",
        "{'None', 'int32', 'int64'}",
        "None",
        "DType of the output in case this can't be inferred. Defaults to int32 if not defined (dtype=None).",
    ),
];

const SAMPLE_SHAPE: Param = Param::new(
    "shape",
    "Shape(tuple)",
    "()",
    "Shape to be sampled from each random distribution.",
);

const SAMPLE_PARAMS: &[Param] = &[SAMPLE_SHAPE, FLOAT_DTYPE];

const MULTINOMIAL_PARAMS: &[Param] = &[
    SAMPLE_SHAPE,
    Param::new(
        "get_prob",
        "boolean",
        "False",
        "Whether to also return the log probability of sampled result. This is usually used for differentiating through stochastic variables, e.g. in reinforcement learning.",
    ),
    Param::new(
        "dtype",
        "{'float16', 'float32', 'float64', 'int32', 'uint8'}",
        "'int32'",
        "DType of the output in case this can't be inferred.",
    ),
];

pub(crate) fn create_random(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, _, kind, params) = RANDOM_OPS[i];
    let p = Params::declared(name, attrs, params)?;
    let (dist, invalid) = dist_from(kind, &p)?;
    Ok(Arc::new(Random {
        name,
        dist,
        invalid,
        out: Some((shape_attr(&p, false)?, dtype_attr(&p, DType::F32, FLOATS)?)),
    }))
}

pub(crate) fn create_like(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, kind, params) = LIKE_OPS[i];
    let p = Params::declared(name, attrs, params)?;
    let (dist, invalid) = dist_from(kind, &p)?;
    Ok(Arc::new(Random {
        name,
        dist,
        invalid,
        out: None,
    }))
}

pub(crate) fn create_randint(attrs: &Attrs) -> Result<OpRef> {
    let name = "_random_randint";
    let p = Params::declared(name, attrs, RANDINT_PARAMS)?;
    let (low, high) = (p.get::<i64>("low")?, p.get::<i64>("high")?);
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
        invalid: None,
        out: Some((shape_attr(&p, false)?, dtype)),
    }))
}

// ---------------------------------------------------------------------------------------
// _sample_*: parameters per element from input arrays

/// A sampler whose parameters come from arrays of one shape; every parameter element gets
/// `shape` draws.
pub(crate) struct Sample {
    pub(crate) name: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) nparams: usize,
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
}

impl Sample {
    pub(crate) fn dist(&self, a: f64, b: f64) -> Dist {
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

/// (op name, alias, distribution kind, parameter input names)
pub(crate) type SampleEntry = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
);

pub(crate) const SAMPLE_OPS: &[SampleEntry] = &[
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

pub(crate) fn create_sample(i: usize, attrs: &Attrs) -> Result<OpRef> {
    let (name, _, kind, inputs) = SAMPLE_OPS[i];
    let p = Params::declared(name, attrs, SAMPLE_PARAMS)?;
    Ok(Arc::new(Sample {
        name,
        kind,
        nparams: inputs.len(),
        shape: shape_attr(&p, true)?,
        dtype: dtype_attr(&p, DType::F32, FLOATS)?,
    }))
}

// ---------------------------------------------------------------------------------------
// _sample_multinomial

pub(crate) struct Multinomial {
    pub(crate) shape: Shape,
    pub(crate) get_prob: bool,
    pub(crate) dtype: DType,
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

pub(crate) fn create_multinomial(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("_sample_multinomial", attrs, MULTINOMIAL_PARAMS)?;
    Ok(Arc::new(Multinomial {
        shape: shape_attr(&p, true)?,
        get_prob: p.get("get_prob")?,
        dtype: dtype_attr(
            &p,
            DType::I32,
            &[DType::F16, DType::F32, DType::F64, DType::I32, DType::U8],
        )?,
    }))
}

// ---------------------------------------------------------------------------------------
// _shuffle

pub(crate) struct Shuffle;

impl Operator for Shuffle {
    fn name(&self) -> &'static str {
        "_shuffle"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        shape_of_input("_shuffle", inputs, 1, 0)
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::Random]
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }
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
            params,
            doc: "Draws samples of a distribution with the given parameters into a new array of the given shape.",
            create: Box::new(move |attrs| create_random(i, attrs)),
        });
    }
    r.add(OpDef {
        name: "_random_randint",
        aliases: &["random_randint"],
        inputs: &[],
        variadic: false,
        params: RANDINT_PARAMS,
        doc: "Draws integers uniformly from [low, high).",
        create: Box::new(create_randint),
    });
    for (i, (name, _, params)) in LIKE_OPS.iter().enumerate() {
        r.add(OpDef {
            name,
            aliases: &[],
            inputs: &["data"],
            variadic: false,
            params,
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
            params: SAMPLE_PARAMS,
            doc: "Draws `shape` samples for every element of the parameter arrays.",
            create: Box::new(move |attrs| create_sample(i, attrs)),
        });
    }
    r.add(OpDef {
        name: "_sample_multinomial",
        aliases: &["sample_multinomial"],
        inputs: &["data"],
        variadic: false,
        params: MULTINOMIAL_PARAMS,
        doc: "Draws categories from the probabilities in the last axis of data.",
        create: Box::new(create_multinomial),
    });
    r.add(OpDef {
        name: "_shuffle",
        aliases: &["shuffle"],
        inputs: &["data"],
        variadic: false,
        params: &[],
        doc: "Shuffles the array along its first axis.",
        create: Box::new(|attrs| {
            Params::declared("_shuffle", attrs, &[])?;
            Ok(Arc::new(Shuffle) as OpRef)
        }),
    });
}
