//! Definitions of the element-wise unary operators (`exp`, `tanh`, `relu`, `clip`, ...).

use crate::error::Result;
use crate::op::grad::elemwise::{uses_output, UnaryBackward};
use crate::op::infer::elementwise_inference;
use crate::op::{Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry};
use std::sync::Arc;

/// The element-wise functions of one input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryKind {
    Copy,
    Negative,
    Abs,
    Sign,
    Sqrt,
    Rsqrt,
    Cbrt,
    Rcbrt,
    Square,
    Reciprocal,
    Exp,
    Expm1,
    Log,
    Log1p,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Arcsin,
    Arccos,
    Arctan,
    Sinh,
    Cosh,
    Tanh,
    Arcsinh,
    Arccosh,
    Arctanh,
    Degrees,
    Radians,
    Sigmoid,
    Softsign,
    Relu,
    Floor,
    Ceil,
    Round,
    Rint,
    Fix,
    Trunc,
    LogicalNot,
    Clip(f64, f64),
    Erf,
    Erfinv,
    Gamma,
    Gammaln,
    /// `clip(alpha * x + beta, 0, 1)`.
    HardSigmoid(f64, f64),
}

pub(crate) struct Unary {
    pub(crate) name: &'static str,
    pub(crate) kind: UnaryKind,
}

impl Operator for Unary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn output_is_input(&self, _output: usize) -> Option<usize> {
        (self.kind == UnaryKind::Copy).then_some(0)
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    elementwise_inference!(1);

    fn gradient(&self) -> Grad {
        unary_gradient(self.name, self.kind)
    }
}

/// `_backward_<name>` for the unary ops that have one.
macro_rules! backward_name {
    ($name:expr; $($op:literal),* $(,)?) => {
        match $name {
            $($op => concat!("_backward_", $op),)*
            _ => "_backward_unary",
        }
    };
}

pub(crate) fn unary_gradient(name: &'static str, kind: UnaryKind) -> Grad {
    use UnaryKind as K;
    match kind {
        _ if name == "BlockGrad" => Grad::Zero,
        K::Sign | K::Floor | K::Ceil | K::Round | K::Rint | K::Fix | K::Trunc | K::LogicalNot => {
            Grad::Zero
        }
        K::Copy => Gradient::simple(unary_op("_backward_copy", K::Copy), &[], &[], 1),
        K::Negative => Gradient::simple(unary_op("_backward_negative", K::Negative), &[], &[], 1),
        _ => {
            let bname = backward_name!(name;
                "abs", "sqrt", "rsqrt", "cbrt", "rcbrt", "square", "reciprocal", "exp",
                "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin",
                "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
                "degrees", "radians", "sigmoid", "softsign", "relu", "clip", "erf", "erfinv",
                "gamma", "gammaln", "hard_sigmoid");
            let op: OpRef = Arc::new(UnaryBackward { name: bname, kind });
            if uses_output(kind) {
                Gradient::simple(op, &[], &[0], 1)
            } else {
                Gradient::simple(op, &[0], &[], 1)
            }
        }
    }
}

pub(crate) type UnaryEntry = (&'static str, &'static [&'static str], UnaryKind);

pub(crate) const UNARY_OPS: &[UnaryEntry] = &[
    ("_copy", &["identity"], UnaryKind::Copy),
    ("BlockGrad", &["stop_gradient"], UnaryKind::Copy),
    ("negative", &[], UnaryKind::Negative),
    ("abs", &[], UnaryKind::Abs),
    ("sign", &[], UnaryKind::Sign),
    ("sqrt", &[], UnaryKind::Sqrt),
    ("rsqrt", &[], UnaryKind::Rsqrt),
    ("cbrt", &[], UnaryKind::Cbrt),
    ("rcbrt", &[], UnaryKind::Rcbrt),
    ("square", &[], UnaryKind::Square),
    ("reciprocal", &[], UnaryKind::Reciprocal),
    ("exp", &[], UnaryKind::Exp),
    ("expm1", &[], UnaryKind::Expm1),
    ("log", &[], UnaryKind::Log),
    ("log1p", &[], UnaryKind::Log1p),
    ("log2", &[], UnaryKind::Log2),
    ("log10", &[], UnaryKind::Log10),
    ("sin", &[], UnaryKind::Sin),
    ("cos", &[], UnaryKind::Cos),
    ("tan", &[], UnaryKind::Tan),
    ("arcsin", &[], UnaryKind::Arcsin),
    ("arccos", &[], UnaryKind::Arccos),
    ("arctan", &[], UnaryKind::Arctan),
    ("sinh", &[], UnaryKind::Sinh),
    ("cosh", &[], UnaryKind::Cosh),
    ("tanh", &[], UnaryKind::Tanh),
    ("arcsinh", &[], UnaryKind::Arcsinh),
    ("arccosh", &[], UnaryKind::Arccosh),
    ("arctanh", &[], UnaryKind::Arctanh),
    ("degrees", &[], UnaryKind::Degrees),
    ("radians", &[], UnaryKind::Radians),
    ("sigmoid", &[], UnaryKind::Sigmoid),
    ("softsign", &[], UnaryKind::Softsign),
    ("relu", &[], UnaryKind::Relu),
    ("floor", &[], UnaryKind::Floor),
    ("ceil", &[], UnaryKind::Ceil),
    ("round", &[], UnaryKind::Round),
    ("rint", &[], UnaryKind::Rint),
    ("fix", &[], UnaryKind::Fix),
    ("trunc", &[], UnaryKind::Trunc),
    ("logical_not", &[], UnaryKind::LogicalNot),
    ("erf", &[], UnaryKind::Erf),
    ("erfinv", &[], UnaryKind::Erfinv),
    ("gamma", &[], UnaryKind::Gamma),
    ("gammaln", &[], UnaryKind::Gammaln),
];

const CLIP_PARAMS: &[Param] = &[
    Param::required("a_min", "float", "Minimum value"),
    Param::required("a_max", "float", "Maximum value"),
];

pub(crate) fn create_clip(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("clip", attrs, CLIP_PARAMS)?;
    if !p.given("a_min") || !p.given("a_max") {
        return Err(crate::error::Error::Value(
            "clip: required arguments 'a_min' and 'a_max' must both be given".into(),
        ));
    }
    Ok(Arc::new(Unary {
        name: "clip",
        kind: UnaryKind::Clip(p.get("a_min")?, p.get("a_max")?),
    }))
}

const HARD_SIGMOID_PARAMS: &[Param] = &[
    Param::new("alpha", "float", "0.2", "Slope of hard sigmoid"),
    Param::new("beta", "float", "0.5", "Bias of hard sigmoid."),
];

pub(crate) fn create_hard_sigmoid(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("hard_sigmoid", attrs, HARD_SIGMOID_PARAMS)?;
    Ok(Arc::new(Unary {
        name: "hard_sigmoid",
        kind: UnaryKind::HardSigmoid(p.get("alpha")?, p.get("beta")?),
    }))
}

/// A unary operator by its kind, for callers in the core.
pub fn unary_op(name: &'static str, kind: UnaryKind) -> OpRef {
    Arc::new(Unary { name, kind })
}

/// Registers the unary operators.
pub fn register(r: &mut Registry) {
    for (i, (name, aliases, _)) in UNARY_OPS.iter().enumerate() {
        r.add(OpDef {
            name,
            aliases,
            inputs: &["data"],
            variadic: false,
            params: &[],
            doc: "Element-wise function of one array.",
            create: Box::new(move |attrs| {
                let (name, _, kind) = UNARY_OPS[i];
                Params::declared(name, attrs, &[])?;
                Ok(unary_op(name, kind))
            }),
        });
    }
    r.add(OpDef {
        name: "clip",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: CLIP_PARAMS,
        doc: "Clips values to [a_min, a_max].",
        create: Box::new(create_clip),
    });
    r.add(OpDef {
        name: "hard_sigmoid",
        aliases: &[],
        inputs: &["data"],
        variadic: false,
        params: HARD_SIGMOID_PARAMS,
        doc: "Element-wise max(0, min(1, alpha * x + beta)).",
        create: Box::new(create_hard_sigmoid),
    });
}
